#!/usr/bin/env bash
# The local platform: a real Kubernetes from upstream binaries on this host, its nodes (NODES,
# one or several) and its control plane each in a network namespace of its own (nodes.sh).
#   bench/platforms/local/cluster.sh up       etcd, API server, controller manager, scheduler; each node's
#                                  containerd, kubelet, kube-proxy (iptables); CoreDNS; waits for Ready
#   bench/platforms/local/cluster.sh down     stops all of it and removes every process, network namespace,
#                                  bridge, mount, cgroup and file it made; nothing it did not make,
#                                  and nothing at all without a cluster of ours (idempotent)
#   bench/platforms/local/cluster.sh status   exit 0 when the API answers and the node is Ready
#   bench/platforms/local/cluster.sh procs    the pids of every live process of it, containers included
#   bench/platforms/local/cluster.sh node-stop|node-start I   backends node I lost and back (nodes.sh node_lost)
#   bench/platforms/local/cluster.sh pod-links  our pods' node devices ("NETNS DEV"): the veths on
#                                  their node's bridge and the CNI bandwidth plugin's ifb devices of
#                                  those (deploy.sh)
# Ownership by structure: kube-proxy's, the kubelet's and the CNI plugins' rules, routes and
# sysctls are all in the nodes' namespaces, which down deletes whole; the host gains one bridge
# and its veths, its own tables and sysctls untouched, so another Kubernetes beside it is no
# concern of ours, and nothing of the host's is ever ours to clean. Pods' network namespaces are
# pinned under the state dir, never in /run/netns (containerd.toml).
# Addresses (all in the project's 198.18.0.0/15; the lab uses 198.18.0.0/24): the nodes' link
# 198.18.63.0/24, pods 198.18.64.0/18 (a /24 a node), services 198.18.128.0/20. Nothing is routed
# off the host: the host has no route to the pods, and its ip_forward stays as found.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"
# shellcheck source=bench/platforms/cgroup.sh
. "$IB_ROOT/bench/platforms/cgroup.sh"
cg_detect # v1, hybrid or unified v2, from the mount table

S=$IB_CLUSTER_STATE
CONF=$IB_ROOT/bench/platforms/local
# shellcheck source=bench/platforms/local/nodes.sh
. "$CONF/nodes.sh"
BRIDGE=ibench-cni0                  # each node's pods' bridge, in its namespace
API_IP=$CP_IP                       # the control plane's namespace's address (nodes.sh)
CP=(nsenter --net="$S/nodes/0/netns") # the control plane's command prefix: into its namespace
SERVICE_CIDR=198.18.128.0/20
DNS_IP=198.18.128.10
CGROUP_ROOT=/$IB_KUBELET_CGROUP     # kubelet's cgroupRoot: every pod cgroup lives below it (bench/lib.sh)
# setupKernelTunables (pkg/kubelet/cm/container_manager_linux.go, v1.34): the values the kubelet
# wants; it writes them to the host unless protectKernelDefaults, where it refuses to start.
KUBELET_TUNABLES="vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1 kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000"
export KUBECONFIG=$S/pki/admin.kubeconfig
LOCAL_IMAGES="pause-$PAUSE_TAG nginx-$NGINX_IMAGE_TAG coredns-$COREDNS_VERSION k6-$K6_LOCAL_TAG" # bench/platforms/local/images.sh

# Logs outlive the cluster (a failed up removes everything else): the last run's are here.
LOGS=$IB_CACHE/logs/cluster
log() { echo "$LOGS/$1.log"; }

# start NAME CMD...: a daemon of the cluster, its pid in $S/pids/NAME, its log in $S/logs.
start() {
  local name=$1; shift
  without_our_fds setsid "$@" >"$(log "$name")" 2>&1 </dev/null &
  echo $! >"$S/pids/$name"
  disown
}

wait_for() { # SECONDS WHAT CMD...: poll CMD until it succeeds
  local secs=$1 what=$2; shift 2
  poll "$secs" "$@" || die "$what not ready after ${secs}s (logs: $LOGS/)"
}

our_pids() { # every live process this cluster started, containers included
  local pid
  # Zombies are dead already (this machine's PID 1 reaps them late) but stay listed in
  # cgroup.procs: skip them.
  for pid in $(our_pids_all | sort -u); do
    if live "$pid"; then echo "$pid"; fi
  done
}

our_pids_all() {
  local f pid
  for f in "$S"/pids/*; do [ -f "$f" ] && pid=$(cat "$f") && kill -0 "$pid" 2>/dev/null && echo "$pid"; done
  # Container processes: everything in a cgroup anywhere below the kubelet's cgroup root.
  cg_procs "$(cg_path pids "$CGROUP_ROOT")"
  pgrep -f "containerd-shim-runc-v2 .*-address $S/" || true
}

pki() {
  local d=$S/pki
  mkdir -p "$d" && cd "$d"
  # EC keys: quick to make at every up; nothing here is kept or committed.
  # Only root may read the keys (the state dir is root's too).
  umask 077
  ca() { # NAME CN
    openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"
    openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 30 -out "$1.crt" 2>/dev/null
  }
  cert() { # NAME SUBJECT [SAN], signed by $signer (default: ca)
    openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
    local ext=; [ -n "${3:-}" ] && { printf 'subjectAltName=%s\n' "$3" >"$1.ext"; ext="-extfile $1.ext"; }
    # shellcheck disable=SC2086
    openssl x509 -req -in "$1.csr" -CA "${signer:-ca}.crt" -CAkey "${signer:-ca}.key" -CAcreateserial -days 30 -out "$1.crt" $ext 2>/dev/null
  }
  ca ca ingress-bench-ca
  # etcd trusts its own CA only: a certificate of the cluster's (the admin's, the kubelet's)
  # is no key to etcd; only the API server's etcd client certificate is.
  ca etcd-ca ingress-bench-etcd-ca
  signer=etcd-ca cert etcd /CN=etcd IP:127.0.0.1
  signer=etcd-ca cert etcd-client /CN=kube-apiserver-etcd-client
  cert apiserver /CN=kube-apiserver "IP:$API_IP,IP:${SERVICE_CIDR%.0/*}.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # One cluster-admin identity for the control plane, kubelet and kube-proxy: a single-user
  # benchmark cluster; the Node and RBAC authorizers are still on for workloads.
  cert admin "/O=system:masters/CN=ingress-bench-admin"
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  kubectl config set-cluster local --server="https://$API_IP:6443" --certificate-authority=ca.crt --embed-certs --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config set-credentials admin --client-certificate=admin.crt --client-key=admin.key --embed-certs --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config set-context local --cluster=local --user=admin --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config use-context local --kubeconfig=admin.kubeconfig >/dev/null
  umask 022
  cd - >/dev/null
}

# render TEMPLATE -> stdout, with the cluster's variables filled in (a node's own set by
# node_render; none in the cluster's own, coredns.yaml).
render() {
  sed -e "s|@NODE_STATE@|${node_state:-}|g" -e "s|@POD_GW@|${pod_gw:-}|g" -e "s|@POD_ROUTES@|${pod_routes:-}|g" \
      -e "s|@CPU_MANAGER@|${cpu_manager:-}|g" -e "s|@KUBE_RESERVED@|${kube_reserved:-}|g" -e "s|@NODE_LEASE_S@|${node_lease_s:-}|g" \
      -e "s|@CFS_PERIOD@|${cfs_period:-}|g" -e "s|@CFS_CUSTOM@|${cfs_custom:-}|g" -e "s|@CLUSTER_POD_CIDR@|$CLUSTER_POD_CIDR|g" \
      -e "s|@STATE@|$S|g" -e "s|@NODE_IP@|${node_ip:-}|g" -e "s|@POD_CIDR@|${pod_cidr:-}|g" -e "s|@BRIDGE@|$BRIDGE|g" \
      -e "s|@DNS_IP@|$DNS_IP|g" -e "s|@SERVICE_CIDR@|$SERVICE_CIDR|g" -e "s|@CGROUP_ROOT@|$CGROUP_ROOT|g" -e "s|@NODE_NAME@|${node_name:-}|g" \
      -e "s|@PAUSE_TAG@|$PAUSE_TAG|g" -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE_NAME:$COREDNS_VERSION|g" \
      "$1"
}

# pod_links: "NETNS DEV" for our pods' node devices: the veths on their node's bridge and the
# ifb devices the CNI bandwidth plugin redirects their ingress to (egress shaping of the pod).
pod_links() {
  local i
  for i in $(seq "$(cat "$S/node-count")"); do in_node "$i" bash "$0" pod-links-here | sed "s|^|$(node_dir "$i")/netns |"; done
}
pod_links_here() {
  local dev
  for dev in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    echo "$dev"
    tc filter show dev "$dev" parent ffff: 2>/dev/null | sed -n 's/.*Redirect to device \([^)]*\)).*/\1/p'
  done | awk '!seen[$0]++'
}

# kubelet_ns DIR KUBELET_ARGS...: the kubelet in a mount namespace of its own where the files of
# KUBELET_TUNABLES read as the values it wants, so with protectKernelDefaults it checks them,
# finds them, and never writes the host's (a kernel oops would otherwise reboot the user's
# machine 10 s later: kernel.panic=10, panic_on_oops=1). Its volume mounts must still reach
# containerd: its node's kubelet directory is a shared mount (nodes_start), so they propagate
# back to the host's mount namespace. DIR: its node's, for the files: a node's kubelet reads
# them as it starts, when the next node's is writing, and a file shared by all of them was
# read empty in that moment (its kubelet exited, its node never registered).
kubelet_ns() {
  local d=$1 kv k f; shift
  # A host whose / is shared (systemd) must not see the binds below.
  mount --make-rprivate /proc
  mkdir -p "$d"
  for kv in $KUBELET_TUNABLES; do
    k=${kv%%=*} f=/proc/sys/${k//.//}
    [ "$(cat "$f")" = "${kv#*=}" ] && continue
    echo "${kv#*=}" >"$d/$k"
    mount --bind -o ro "$d/$k" "$f"
  done
  # Its symlinks to the pods' logs go to /var/log/containers, a fixed path, which it would
  # make on the host: the state's directory as /var/log, in this namespace only (the pods'
  # logs themselves are in podLogsDir, kubelet.yaml).
  mkdir -p "$S/var-log"
  mount --bind "$S/var-log" /var/log
  exec kubelet "$@"
}

# control_plane: etcd and the API server started, in the control plane's namespace (up waits for them).
control_plane() {
  local p=$S/pki
  # TLS both ways, on loopback: only the API server's client certificate opens etcd.
  start etcd "${CP[@]}" etcd --data-dir "$S/etcd" --listen-client-urls https://127.0.0.1:2379 \
    --advertise-client-urls https://127.0.0.1:2379 --listen-peer-urls https://127.0.0.1:2380 \
    --initial-advertise-peer-urls https://127.0.0.1:2380 --initial-cluster default=https://127.0.0.1:2380 \
    --cert-file="$p/etcd.crt" --key-file="$p/etcd.key" --client-cert-auth --trusted-ca-file="$p/etcd-ca.crt" \
    --peer-cert-file="$p/etcd.crt" --peer-key-file="$p/etcd.key" --peer-client-cert-auth --peer-trusted-ca-file="$p/etcd-ca.crt"
  start kube-apiserver "${CP[@]}" kube-apiserver --etcd-servers=https://127.0.0.1:2379 \
    --etcd-cafile="$p/etcd-ca.crt" --etcd-certfile="$p/etcd-client.crt" --etcd-keyfile="$p/etcd-client.key" --anonymous-auth=false \
    --bind-address="$API_IP" --advertise-address="$API_IP" --secure-port=6443 \
    --service-cluster-ip-range="$SERVICE_CIDR" --client-ca-file="$p/ca.crt" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$p/sa.pub" \
    --service-account-signing-key-file="$p/sa.key" --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$p/admin.crt" --kubelet-client-key="$p/admin.key" \
    --kubelet-certificate-authority="$p/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname --allow-privileged=true
}

# node_up: the controller manager, the scheduler, the kubelet and kube-proxy started.
node_up() {
  local p=$S/pki
  # Loopback only; every path authenticated and authorized (no always-allowed /healthz).
  local guarded=(--bind-address=127.0.0.1 --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG"
    --authorization-always-allow-paths=)
  # A node of several lost (bench:change CHANGE=kill-node) is NotReady, and its pods' endpoints
  # gone, 12 s after its last heartbeat (its kubelet renews its lease every 5 s: kubelet.yaml)
  # instead of 40 s, looked at every 2 s instead of 5 s (and so Ready again as soon).
  local node_grace=(); [ "$NODE_COUNT" = 1 ] || node_grace=(--node-monitor-grace-period=12s --node-monitor-period=2s)
  start kube-controller-manager "${CP[@]}" kube-controller-manager --kubeconfig="$KUBECONFIG" "${guarded[@]}" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --controllers='*,-nodeipam' "${node_grace[@]}"
  start kube-scheduler "${CP[@]}" kube-scheduler --kubeconfig="$KUBECONFIG" "${guarded[@]}" --leader-elect=false
  nodes_start
}

# nodes_said: "N node(s): NAME IP (ROLES), ...".
nodes_said() {
  local i out=()
  NODE_COUNT=$(cat "$S/node-count" 2>/dev/null || echo 1)
  for i in $(seq "$NODE_COUNT"); do out+=("ibench-node-$i $(node_ip "$i") ($(node_role "$i" | sed 's/,/ + /g'))"); done
  echo "$NODE_COUNT node$([ "$NODE_COUNT" = 1 ] || echo s): $(printf '%s, ' "${out[@]}" | sed 's/, $//')"
}

# nodes_ready: as many nodes Ready as up made ($S/node-count).
nodes_ready() {
  [ "$(kubectl get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)" = "$(cat "$S/node-count" 2>/dev/null || echo 1)" ]
}

# nodes_problem: each node that is not Ready and why: its Ready condition, or, never registered,
# whether its kubelet still runs and what it said last that matters (a slow start and a kubelet
# that cannot start read alike otherwise).
nodes_problem() {
  local i name why json
  json=$(kubectl get nodes -o json 2>/dev/null) || json='{"items":[]}'
  for i in $(seq "$(cat "$S/node-count")"); do
    name=ibench-node-$i
    why=$(jq -r --arg n "$name" '.items[] | select(.metadata.name == $n) | .status.conditions[]? | select(.type == "Ready")
      | if .status == "True" then "ready" else "\(.reason): \(.message)" end' <<<"$json")
    [ "$why" = ready ] && continue
    [ -n "$why" ] || why="not registered, $(kubelet_said "$i")"
    printf '%s: %s; ' "$name" "$why"
  done | sed 's/; $//'
}

# kubelet_said I: "its kubelet runs|exited, its last ... LINE" from its log: its last fatal
# line, else its last error, else its last line.
kubelet_said() {
  local f state=exited what line; f=$(log "kubelet-$1")
  live "$(cat "$S/pids/kubelet-$1" 2>/dev/null)" && state=runs
  for what in "fatal error:^F[0-9]{4}" "error:^E[0-9]{4}" "line:."; do
    line=$(grep -E "${what#*:}" "$f" 2>/dev/null | tail -n1 | cut -c1-300) && [ -n "$line" ] && break
  done
  echo "its kubelet $state, its last ${what%%:*} ${line:-(none: its log is empty)}"
}

up() {
  need_root "cluster:up"
  nodes_plan
  local b; for b in kube-apiserver kubelet kube-proxy kubectl; do
    command -v "$b" >/dev/null || die "$b is not built: run './task cluster:tools'"
  done
  for b in etcd containerd runc; do command -v "$b" >/dev/null || die "$b is missing: run './task cluster:tools'"; done
  for b in $LOCAL_IMAGES; do [ -f "$IB_CACHE/images/$b.tar" ] || die "image $b is not built: run './task cluster:tools'"; done
  local st
  if st=$(status 2>/dev/null); then
    # Another count asked for (NODES given) than is up: one line; not given, the cluster that is up.
    [ -z "${NODES:-}" ] || [ "$(cat "$S/node-count")" = "$NODE_COUNT" ] ||
      die "the local cluster is up with $(cat "$S/node-count") node(s), not NODES=$NODE_COUNT: run './task cluster:down' first"
    say cluster "up (${st#cluster: up, })"; return 0
  fi
  [ -d "$S" ] && down
  if ip link show "$NODES_BRIDGE" >/dev/null 2>&1 || [ -d "$(cg_path cpu "$CGROUP_ROOT")" ]; then
    die "leftovers of another cluster ($NODES_BRIDGE or cgroup $CGROUP_ROOT exist, no state in $S): remove them by hand"
  fi
  local t0=$SECONDS
  # CLUSTER_KEEP_FAILED=1 keeps a failed cluster for inspection (then run down).
  trap 'rc=$?; [ $rc = 0 ] || [ -n "${CLUSTER_KEEP_FAILED:-}" ] || down; exit $rc' EXIT
  trap 'exit 130' INT TERM
  rm -rf "$LOGS" && mkdir -p "$LOGS" "$S"/{pids,etcd}
  # The kubelet's cgroup root: in every v1 hierarchy with its cpuset filled; on v2 once, with
  # the kubelet's controllers enabled above it (the root's subtree_control recorded for down).
  cg_kubelet_root_prepare "$CGROUP_ROOT" "$S/cgroup.subtree_control.saved"
  pki
  echo "$NODE_COUNT" >"$S/node-count"
  nodes_network_up
  # A resolv.conf without a nameserver: pods that follow the node (CoreDNS) get no upstream.
  echo "search cluster.local" >"$S/resolv.conf"

  control_plane
  wait_for 60 "kube-apiserver" kubectl get --raw /readyz
  # No anonymous access: the API server has none, and the controller manager and scheduler
  # ask it (SubjectAccessReview) about anonymous requests, which RBAC's bootstrap binding
  # system:public-info-viewer grants /healthz, /livez, /readyz and /version: keep it to
  # authenticated users (autoupdate off, or the API server restores it at its next start).
  kubectl patch clusterrolebinding system:public-info-viewer --type=merge >/dev/null -p \
    '{"metadata":{"annotations":{"rbac.authorization.kubernetes.io/autoupdate":"false"}},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:authenticated"}]}'
  node_up
  poll 90 nodes_ready || die "$NODE_COUNT node(s) not ready after 90s: $(nodes_problem) (logs: $LOGS/)"
  render "$CONF/coredns.yaml" | kubectl apply -f - >/dev/null
  kubectl -n kube-system rollout status deploy/coredns --timeout=90s >/dev/null 2>&1 ||
    die "CoreDNS not ready after 90s: $(pod_problem kube-system coredns)"
  trap - EXIT INT TERM
  date +%s >"$S/up-at" # when its start's own work began to settle (bench.sh stack_age)
  say cluster "up: Kubernetes $KUBE_VERSION, $(nodes_said) ready in $((SECONDS - t0)) s (KUBECONFIG=$KUBECONFIG)"
}

down() {
  local pid name i m f
  # No state dir: no cluster of ours is up, and nothing on this host is ours to touch.
  [ -d "$S" ] || return 0
  # The host k6's cgroup sampler writes into the state directory (bench/platforms/monitoring/monitoring.sh).
  [ -f "$S/textfile/.sampler.pid" ] && kill "$(cat "$S/textfile/.sampler.pid")" 2>/dev/null || true
  bash "$IB_ROOT/bench/platforms/monitoring/cgroups.sh" remove # the host k6's cgroup
  # Control plane and node agents first, so nothing restarts the containers killed next.
  for name in kubelet kubelet-* kube-proxy kube-proxy-* kube-scheduler kube-controller-manager kube-apiserver; do
    for f in "$S"/pids/$name; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true; done
  done
  for i in $(seq 20); do
    pid=$(our_pids); [ -z "$pid" ] && break
    kill -KILL $pid 2>/dev/null || true
    sleep 0.25
  done
  [ -z "$(our_pids)" ] || die "processes of the cluster survive SIGKILL: $(our_pids | tr '\n' ' ')"
  # Mounts: container root filesystems, pod volumes, the pods' and the nodes' network namespaces
  # (pinned under the state dir), the kubelets' shared mounts. The nodes' namespaces go with
  # their pinning mounts and take their rules, routes, bridges and veths along.
  for m in $(awk -v s="$S/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  ip link del "$NODES_BRIDGE" 2>/dev/null || true
  # cgroups below the kubelet's root, deepest first, in every hierarchy; then (v2) the
  # subtree_control up had changed, and the kubelet's runc after it, as up found it.
  cg_remove_tree "$CGROUP_ROOT"
  cg_kubelet_root_restore "$S/cgroup.subtree_control.saved"
  rm_state "$S"
}

status() {
  [ -f "$KUBECONFIG" ] || { echo "cluster: down"; return 1; }
  kubectl get --raw /readyz >/dev/null 2>&1 || { echo "cluster: API server not answering"; return 1; }
  nodes_ready || { echo "cluster: not every node is Ready: $(nodes_problem)"; return 1; }
  echo "cluster: up, Kubernetes $KUBE_VERSION, $(nodes_said), KUBECONFIG=$KUBECONFIG"
}

case "${1:-}" in
  up) up ;;
  down) need_root "cluster:down"; down; say cluster down ;;
  status) status ;;
  procs) our_pids ;;
  pod-links) pod_links ;;
  pod-links-here) pod_links_here ;; # (in a node's namespace: pod_links)
  node-stop | node-start) need_root "$1"; node_lost "${2:-}" "${1#node-}" ;;
  kubelet-ns-node) kubelet_cpus_view "$2/cpus-view" "$3"; set -- "$2/kubelet-view" "${@:4}"; kubelet_ns "$@" ;;
  *) die "usage: bench/platforms/local/cluster.sh up|down|status|procs|pod-links|node-stop I|node-start I" ;;
esac
