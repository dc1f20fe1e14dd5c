#!/usr/bin/env bash
# The local platform: a real single-node Kubernetes from upstream binaries on this host.
#   ci/platforms/local/cluster.sh up       etcd, containerd, API server, controller manager, scheduler,
#                                  kubelet, kube-proxy (iptables), CoreDNS; waits for Ready
#   ci/platforms/local/cluster.sh down     stops all of it and removes every process, network namespace,
#                                  bridge, route, iptables rule, mount, cgroup and file it made,
#                                  and restores the sysctls it changed (idempotent)
#   ci/platforms/local/cluster.sh status   exit 0 when the API answers and the node is Ready
# Addresses (all in the project's 198.18.0.0/15; the lab uses 198.18.0.0/24):
#   node and pod bridge 198.18.64.1 on ibench-cni0, pods 198.18.64.0/18, services 198.18.128.0/20.
# Nothing is routed off the host: ip_forward stays as found (0 here; pods share one bridge
# with the node), no masquerade, and a FORWARD rule drops the range toward other interfaces.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

S=$IB_CLUSTER_STATE
CONF=$IB_ROOT/ci/platforms/local
BRIDGE=ibench-cni0
NODE_IP=198.18.64.1                 # must match kubeconfig/cni/kubelet below
POD_CIDR=198.18.64.0/18
SERVICE_CIDR=198.18.128.0/20
DNS_IP=198.18.128.10
NODE_NAME=ibench-node
CGROUP_ROOT=/ibench                 # kubelet's cgroupRoot: every pod cgroup lives below it
FWD_CHAIN=IBENCH-FORWARD
# Sysctls the kubelet and kube-proxy set; saved at up, restored at down.
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables net.ipv4.ip_forward"
export KUBECONFIG=$S/pki/admin.kubeconfig
LOCAL_IMAGES="pause-$PAUSE_TAG nginx-$NGINX_IMAGE_TAG coredns-$COREDNS_VERSION k6-$K6_LOCAL_TAG" # ci/platforms/local/images.sh

# Logs outlive the cluster (a failed up removes everything else): the last run's are here.
LOGS=$IB_CACHE/logs/cluster
log() { echo "$LOGS/$1.log"; }

# start NAME CMD...: a daemon of the cluster, its pid in $S/pids/NAME, its log in $S/logs.
start() {
  local name=$1; shift
  setsid "$@" >"$(log "$name")" 2>&1 </dev/null &
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
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] || [ ! -e "/proc/$pid" ] || echo "$pid"
  done
}

our_pids_all() {
  local f pid
  for f in "$S"/pids/*; do [ -f "$f" ] && pid=$(cat "$f") && kill -0 "$pid" 2>/dev/null && echo "$pid"; done
  # Container processes: everything in a cgroup anywhere below the kubelet's cgroup root.
  [ -d /sys/fs/cgroup/pids"$CGROUP_ROOT" ] && find /sys/fs/cgroup/pids"$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null
  pgrep -f "containerd-shim-runc-v2 .*-address $S/" || true
}

pki() {
  local d=$S/pki
  mkdir -p "$d" && cd "$d"
  # EC keys: quick to make at every up; nothing here is kept or committed.
  openssl ecparam -name prime256v1 -genkey -noout -out ca.key
  openssl req -x509 -new -key ca.key -subj /CN=ingress-bench-ca -days 30 -out ca.crt 2>/dev/null
  cert() { # NAME SUBJECT [SAN]
    openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
    local ext=; [ -n "${3:-}" ] && { printf 'subjectAltName=%s\n' "$3" >"$1.ext"; ext="-extfile $1.ext"; }
    # shellcheck disable=SC2086
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out "$1.crt" $ext 2>/dev/null
  }
  cert apiserver /CN=kube-apiserver "IP:$NODE_IP,IP:${SERVICE_CIDR%.0/*}.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert kubelet "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
  # One cluster-admin identity for the control plane, kubelet and kube-proxy: a single-user
  # benchmark cluster; the Node and RBAC authorizers are still on for workloads.
  cert admin "/O=system:masters/CN=ingress-bench-admin"
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  kubectl config set-cluster local --server="https://$NODE_IP:6443" --certificate-authority=ca.crt --embed-certs --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config set-credentials admin --client-certificate=admin.crt --client-key=admin.key --embed-certs --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config set-context local --cluster=local --user=admin --kubeconfig=admin.kubeconfig >/dev/null
  kubectl config use-context local --kubeconfig=admin.kubeconfig >/dev/null
  cd - >/dev/null
}

render() { # TEMPLATE -> stdout, with the cluster's variables filled in
  sed -e "s|@STATE@|$S|g" -e "s|@NODE_IP@|$NODE_IP|g" -e "s|@POD_CIDR@|$POD_CIDR|g" -e "s|@BRIDGE@|$BRIDGE|g" \
      -e "s|@DNS_IP@|$DNS_IP|g" -e "s|@SERVICE_CIDR@|$SERVICE_CIDR|g" -e "s|@CGROUP_ROOT@|$CGROUP_ROOT|g" -e "s|@NODE_NAME@|$NODE_NAME|g" \
      -e "s|@PAUSE_TAG@|$PAUSE_TAG|g" -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE_NAME:$COREDNS_VERSION|g" \
      "$1"
}

network_up() {
  ip link add "$BRIDGE" type bridge
  ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Service IPs are translated by kube-proxy after routing: give them a route that stays on
  # the bridge, so without a rule a packet goes nowhere rather than to the default gateway.
  ip route add "$SERVICE_CIDR" dev "$BRIDGE"
  iptables -N "$FWD_CHAIN"
  # ibench+: every bridge of the project (this one, the lab's ibench0): bridged frames pass
  # FORWARD too (br_netfilter), and traffic between project hosts must.
  iptables -A "$FWD_CHAIN" -s 198.18.0.0/15 ! -o ibench+ -j DROP
  iptables -I FORWARD 1 -j "$FWD_CHAIN"
}

save_sysctls() {
  local k; for k in $SYSCTLS; do printf '%s=%s\n' "$k" "$(sysctl -n "$k" 2>/dev/null)"; done >"$S/sysctls.saved"
}

up() {
  need_root "cluster:up"
  local b; for b in kube-apiserver kubelet kube-proxy kubectl; do
    command -v "$b" >/dev/null || die "$b is not built: run './task cluster:tools'"
  done
  for b in etcd containerd runc; do command -v "$b" >/dev/null || die "$b is missing: run './task cluster:tools'"; done
  for b in $LOCAL_IMAGES; do [ -f "$IB_CACHE/images/$b.tar" ] || die "image $b is not built: run './task cluster:tools'"; done
  if status >/dev/null 2>&1; then say cluster "up (Kubernetes $KUBE_VERSION, node $NODE_NAME $NODE_IP)"; return 0; fi
  [ -d "$S" ] && down
  if ip link show "$BRIDGE" >/dev/null 2>&1 || iptables -nL "$FWD_CHAIN" >/dev/null 2>&1; then
    die "leftovers of another cluster ($BRIDGE or $FWD_CHAIN exist): run './task cluster:down' first"
  fi
  local t0=$SECONDS
  # CLUSTER_KEEP_FAILED=1 keeps a failed cluster for inspection (then run down).
  trap 'rc=$?; [ $rc = 0 ] || [ -n "${CLUSTER_KEEP_FAILED:-}" ] || down; exit $rc' EXIT
  trap 'exit 130' INT TERM
  rm -rf "$LOGS" && mkdir -p "$LOGS" "$S"/{pids,etcd,cni/net.d,kubelet}
  # The kubelet's cgroup root must exist in every v1 hierarchy; a new cpuset starts empty.
  local c; for c in /sys/fs/cgroup/*/; do [ "$c" = /sys/fs/cgroup/unified/ ] || mkdir -p "$c${CGROUP_ROOT#/}"; done
  cp /sys/fs/cgroup/cpuset/cpuset.cpus /sys/fs/cgroup/cpuset"$CGROUP_ROOT"/cpuset.cpus
  cp /sys/fs/cgroup/cpuset/cpuset.mems /sys/fs/cgroup/cpuset"$CGROUP_ROOT"/cpuset.mems
  save_sysctls
  # containerd pins each pod's network namespace as /run/netns/cni-*: down removes only new ones.
  ip netns list | awk '{print $1}' >"$S/netns.before"
  pki
  network_up
  render "$CONF/cni.conflist" >"$S/cni/net.d/10-ibench.conflist"
  render "$CONF/containerd.toml" >"$S/containerd.toml"
  render "$CONF/kubelet.yaml" >"$S/kubelet.yaml"
  render "$CONF/kube-proxy.yaml" >"$S/kube-proxy.yaml"
  # A resolv.conf without a nameserver: pods that follow the node (CoreDNS) get no upstream.
  echo "search cluster.local" >"$S/resolv.conf"

  start etcd etcd --data-dir "$S/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380
  start containerd containerd --config "$S/containerd.toml"
  local p=$S/pki
  start kube-apiserver kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 \
    --service-cluster-ip-range="$SERVICE_CIDR" --client-ca-file="$p/ca.crt" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$p/sa.pub" \
    --service-account-signing-key-file="$p/sa.key" --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$p/admin.crt" --kubelet-client-key="$p/admin.key" \
    --kubelet-certificate-authority="$p/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname --allow-privileged=true
  wait_for 20 containerd test -S "$S/containerd/containerd.sock"
  say cluster "importing images"
  for b in $LOCAL_IMAGES; do
    ctr -a "$S/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "$IB_CACHE/images/$b.tar" >/dev/null ||
      die "ctr could not import image $b"
  done
  wait_for 60 "kube-apiserver" kubectl get --raw /readyz
  start kube-controller-manager kube-controller-manager --kubeconfig="$KUBECONFIG" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --controllers='*,-nodeipam'
  start kube-scheduler kube-scheduler --kubeconfig="$KUBECONFIG" --leader-elect=false
  # --housekeeping-interval: cAdvisor refreshes container stats every 10 s by default, too
  # coarse for the 2 s scrape the bench:* rules expect (monitoring/README.md).
  start kubelet kubelet --config="$S/kubelet.yaml" --kubeconfig="$KUBECONFIG" --node-ip="$NODE_IP" \
    --hostname-override="$NODE_NAME" --root-dir="$S/kubelet" --containerd="$S/containerd/containerd.sock" \
    --housekeeping-interval=1s
  start kube-proxy kube-proxy --config="$S/kube-proxy.yaml"
  wait_for 60 "node $NODE_NAME" kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
  render "$CONF/coredns.yaml" | kubectl apply -f - >/dev/null
  kubectl -n kube-system rollout status deploy/coredns --timeout=90s >/dev/null 2>&1 ||
    die "CoreDNS not ready after 90s: $(pod_problem kube-system coredns)"
  trap - EXIT INT TERM
  say cluster "up: Kubernetes $KUBE_VERSION, node $NODE_NAME $NODE_IP ready in $((SECONDS - t0)) s (KUBECONFIG=$KUBECONFIG)"
}

down() {
  local pid name i
  # The host k6's cgroup sampler writes into the state directory (ci/platforms/monitoring/monitoring.sh).
  [ -f "$S/textfile/.sampler.pid" ] && kill "$(cat "$S/textfile/.sampler.pid")" 2>/dev/null || true
  bash "$IB_ROOT/ci/platforms/monitoring/cgroups.sh" remove # the host k6's cgroup
  # Control plane and node agents first, so nothing restarts the containers killed next.
  for name in kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver; do
    [ -f "$S/pids/$name" ] && kill -TERM "$(cat "$S/pids/$name")" 2>/dev/null || true
  done
  for i in $(seq 20); do
    pid=$(our_pids); [ -z "$pid" ] && break
    kill -KILL $pid 2>/dev/null || true
    sleep 0.25
  done
  [ -z "$(our_pids)" ] || die "processes of the cluster survive SIGKILL: $(our_pids | tr '\n' ' ')"
  # Mounts: container root filesystems, pod volumes, the network namespaces containerd pinned.
  local m
  for m in $(awk -v s="$S/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  if [ -f "$S/netns.before" ]; then
    for m in $(ip netns list | awk '$1 ~ /^cni-/ {print $1}'); do
      grep -qx "$m" "$S/netns.before" || { umount "/run/netns/$m" 2>/dev/null || true; ip netns del "$m" 2>/dev/null || true; }
    done
  fi
  # iptables: kube-proxy's and the CNI plugins' chains, then ours.
  command -v kube-proxy >/dev/null && kube-proxy --cleanup >/dev/null 2>&1 || true
  cleanup_iptables
  ip route del "$SERVICE_CIDR" dev "$BRIDGE" 2>/dev/null || true
  # Pods' veths: deleting the host end removes the pair at once, whatever the kernel's pace
  # in freeing the pod's network namespace.
  for m in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$m" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  # The CNI bandwidth plugin's ifb devices (components/link-1g): the pods were killed, so no
  # CNI DEL removed them.
  for m in $(ip -o link show type ifb | awk -F': ' '$2 ~ /^bwp/ {print $2}'); do ip link del "$m" 2>/dev/null || true; done
  # cgroups below the kubelet's root, deepest first, in every v1 hierarchy.
  for m in /sys/fs/cgroup/*"$CGROUP_ROOT"; do
    [ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [ -f "$S/sysctls.saved" ]; then
    while IFS='=' read -r k v; do [ -n "$v" ] && sysctl -qw "$k=$v" 2>/dev/null || true; done <"$S/sysctls.saved"
  fi
  rm -rf "$S"
}

# Removes every rule in filter/nat/mangle that jumps to a KUBE-*/CNI-* chain or ours, then
# those chains. The host had none of them before up (up refuses to start over leftovers).
cleanup_iptables() {
  local t chain rule
  for t in filter nat mangle; do
    for rule in "$(iptables -t "$t" -S 2>/dev/null | grep -E '^-A .* -j (KUBE-|CNI-|'"$FWD_CHAIN"')' | grep -vE '^-A (KUBE-|CNI-|'"$FWD_CHAIN"')' || true)"; do
      [ -n "$rule" ] || continue
      while read -r line; do
        # shellcheck disable=SC2086
        iptables -t "$t" ${line/-A/-D} 2>/dev/null || true
      done <<<"$rule"
    done
    for chain in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-)/ || $2 == "'"$FWD_CHAIN"'") {print $2}'); do
      iptables -t "$t" -F "$chain" 2>/dev/null || true
    done
    for chain in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-)/ || $2 == "'"$FWD_CHAIN"'") {print $2}'); do
      iptables -t "$t" -X "$chain" 2>/dev/null || true
    done
  done
}

status() {
  [ -f "$KUBECONFIG" ] || { echo "cluster: down"; return 1; }
  kubectl get --raw /readyz >/dev/null 2>&1 || { echo "cluster: API server not answering"; return 1; }
  kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s >/dev/null 2>&1 || { echo "cluster: node not Ready"; return 1; }
  echo "cluster: up, Kubernetes $KUBE_VERSION, node $NODE_NAME $NODE_IP, KUBECONFIG=$KUBECONFIG"
}

case "${1:-}" in
  up) up ;;
  down) need_root "cluster:down"; down; say cluster down ;;
  status) status ;;
  *) die "usage: ci/platforms/local/cluster.sh up|down|status" ;;
esac
