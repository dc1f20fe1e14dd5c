# The local cluster's nodes, NODES of them (sourced by bench/platforms/local/cluster.sh).
# Each node is a network namespace of its own, pinned under the state dir (never in /run/netns),
# joined to the host by one veth on the bridge $NODES_BRIDGE: its own address, containerd,
# kubelet, kube-proxy, pod /24 and routes to the other nodes' pods. kube-proxy's and the CNI's
# rules, the pods' bridge and the forwarding they need all live inside the node's namespace: the
# host keeps its own rulesets, routes and sysctls as they were; the bridge and its connected
# route are all it gains (and the bridge hands its frames to no host iptables: nf_call_* off).
# The control plane (etcd, the API server, the controller manager, the scheduler) has a
# namespace of its own too, "node" 0 at $API_IP: the host reaches it across the bridge and never
# needs a route to the pods, which it does not have.
# Addresses: the nodes' link 198.18.63.0/24 (the host .1, the control plane .2, node i
# .(10+i)); node i's pods
# 198.18.(63+i).0/24, all in the cluster's 198.18.64.0/18 (so 64 nodes at most, NODES' max).
NODES_BRIDGE=ibench-nodes
NODES_NET=198.18.63
CP_IP=$NODES_NET.2
ROLES="ingress backends client"
CLUSTER_POD_CIDR=198.18.64.0/18

node_ip() { echo "$NODES_NET.$((10 + $1))"; }
node_pod_cidr() { echo "198.18.$((63 + $1)).0/24"; }
node_gw() { echo "198.18.$((63 + $1)).1"; }
node_dir() { echo "$S/nodes/$1"; }
# in_node I CMD...: CMD in node I's network namespace (the host's mounts and everything else).
in_node() { local i=$1; shift; nsenter --net="$(node_dir "$i")/netns" "$@"; }

# node_role I: node 1 the ingress, node 2 the client (with 2 nodes: the backends and the
# client), the others the backends; the one node of NODES=1 every role.
node_role() {
  if [ "$NODE_COUNT" = 1 ]; then echo ingress,backends,client
  elif [ "$1" = 1 ]; then echo ingress
  elif [ "$NODE_COUNT" = 2 ]; then echo backends,client
  elif [ "$1" = 2 ]; then echo client
  else echo backends; fi
}

# node_labels I: its roles as labels, ingress-bench/role-ROLE=true each (a node can hold two).
node_labels() { node_role "$1" | tr , '\n' | sed 's|^|ingress-bench/role-|; s|$|=true|' | paste -sd,; }

# cpu_list_ok LIST LAST: every CPU of LIST is at most LAST.
cpu_list_ok() {
  local part a b
  for part in ${1//,/ }; do
    a=${part%-*} b=${part#*-}
    [ "$a" -le "$2" ] && [ "$b" -le "$2" ] && [ "$a" -le "$b" ] || return 1
  done
}

# nodes_plan: NODES and NODE_CPUS read and checked before anything starts (one line, exit 1);
# sets NODE_COUNT and ROLE_CPUS[role].
nodes_plan() {
  local layout last kv role
  NODE_COUNT=$(setting NODES) || exit 1
  layout=$(setting NODE_CPUS) || exit 1
  # One node has every CPU (its roles share them: the static CPU manager places the ingress).
  [ "$NODE_COUNT" != 1 ] || layout=auto
  last=$(($(nproc) - 1))
  declare -gA ROLE_CPUS=()
  if [ "$layout" = auto ]; then
    ROLE_CPUS[ingress]=$last
    ROLE_CPUS[backends]=$([ "$last" = 0 ] && echo 0 || echo "0$([ "$last" -gt 1 ] && echo "-$((last - 1))")")
    ROLE_CPUS[client]=${ROLE_CPUS[backends]}
    return 0
  fi
  for kv in $layout; do
    role=${kv%%=*}
    [ -z "${ROLE_CPUS[$role]:-}" ] || die "NODE_CPUS gives the $role role twice ($layout)"
    cpu_list_ok "${kv#*=}" "$last" || die "NODE_CPUS names CPUs $role=${kv#*=}, which this machine lacks (it has CPUs 0-$last)"
    ROLE_CPUS[$role]=${kv#*=}
  done
  for role in $ROLES; do [ -n "${ROLE_CPUS[$role]:-}" ] || die "NODE_CPUS lacks the $role role's CPUs ($layout): give all of $ROLES"; done
}

# node_cpus I: the CPUs node I's pods are confined to (its roles' CPUs together).
node_cpus() {
  local r
  for r in $(node_role "$1" | tr , ' '); do cpu_numbers "${ROLE_CPUS[$r]}"; done | tr ' ' '\n' | sort -un | paste -sd,
}

# cpu_numbers LIST: "0-2,5" as "0 1 2 5".
cpu_numbers() { local p; for p in ${1//,/ }; do seq "${p%-*}" "${p#*-}"; done | paste -sd' '; }

# kubelet_cpus_view DIR CPUS: in the kubelet's own mount namespace (kubelet_ns), this machine as
# one with only CPUS, its node's: each NUMA node lists only those of its CPUs (its memory and
# huge pages as they are) and /proc/cpuinfo only their entries. cAdvisor's topology, the node's
# CPU capacity and the cpuset the kubelet writes into its kubepods group at start are then
# those CPUs, which its cgroup root is confined to (cg_node_group). DIR: scratch for the copies.
kubelet_cpus_view() {
  local d=$1 keep n c name
  keep=" $(cpu_numbers "$2") "
  rm -rf "$d" && mkdir -p "$d"
  mount --make-rprivate /sys
  for n in /sys/devices/system/node/node[0-9]*; do
    name=$(basename "$n")
    mkdir -p "$d/$name"
    cp -r "$n/meminfo" "$n/distance" "$n/hugepages" "$d/$name/" 2>/dev/null || true
    mount -t tmpfs -o mode=755 ibench-cpus "$n"
    cp -r "$d/$name/." "$n/"
  done
  for c in $keep; do
    # The CPU's NUMA node: the one its own directory names (nodeN), else node 0.
    name=$(basename "$(ls -d /sys/devices/system/cpu/cpu"$c"/node[0-9]* 2>/dev/null | head -n1)" 2>/dev/null)
    ln -s "/sys/devices/system/cpu/cpu$c" "/sys/devices/system/node/${name:-node0}/cpu$c"
  done
  echo "$2" >"$d/cpulist"
  awk -v keep="$keep" '/^processor/ {on = index(keep, " " $3 " ") > 0} on' /proc/cpuinfo >"$d/cpuinfo"
  mount --bind -o ro "$d/cpuinfo" /proc/cpuinfo
}

# node_netns I IP: namespace I pinned under the state dir, on the bridge by one veth with IP,
# with routes to every node's pods but its own.
node_netns() {
  local i=$1 d j; d=$(node_dir "$1")
  mkdir -p "$d" && touch "$d/netns"
  unshare --net="$d/netns" true
  # Made inside, its peer sent to PID 1's namespace: the host's, which is ours.
  in_node "$i" ip link add eth0 type veth peer name "ibn-$i" netns 1
  ip link set "ibn-$i" master "$NODES_BRIDGE" up
  in_node "$i" ip link set lo up
  in_node "$i" ip addr add "$2/24" dev eth0
  in_node "$i" ip link set eth0 up
  for j in $(seq "$NODE_COUNT"); do
    [ "$j" = "$i" ] || in_node "$i" ip route add "$(node_pod_cidr "$j")" via "$(node_ip "$j")"
  done
}

# nodes_network_up: the bridge (the host's own address on it: its one way to the cluster), the
# control plane's namespace (0) and each node's, with its pods' bridge.
nodes_network_up() {
  local i
  ip link add "$NODES_BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0
  ip addr add "$NODES_NET.1/24" dev "$NODES_BRIDGE"
  ip link set "$NODES_BRIDGE" up
  # The host's own namespace pinned beside the nodes' (node_lost reaches the links' host ends
  # from any of them; PID 1's is not ours to open).
  mkdir -p "$S/nodes" && touch "$S/nodes/host-netns" && mount --bind /proc/self/ns/net "$S/nodes/host-netns"
  node_netns 0 "$API_IP"
  for i in $(seq "$NODE_COUNT"); do
    node_netns "$i" "$(node_ip "$i")"
    # The pods' bridge, made before the CNI plugin would, so Service addresses have a route.
    in_node "$i" ip link add "$BRIDGE" type bridge
    in_node "$i" ip addr add "$(node_gw "$i")/24" dev "$BRIDGE"
    in_node "$i" ip link set "$BRIDGE" up
    in_node "$i" ip route add "$SERVICE_CIDR" dev "$BRIDGE"
    in_node "$i" sysctl -qw net.ipv4.ip_forward=1
  done
}

# node_render I TEMPLATE: TEMPLATE for node I (render's variables, the node's own). Its pods
# route the other nodes' pods and the nodes themselves (a NodePort's masqueraded requests come
# from a node's address) through their node. The one node of NODES=1 has every CPU: the static
# CPU manager pins a whole-core ingress there, half a core reserved (kubelet.yaml). The
# ingress's own node takes a short CFS period (kubelet.yaml), every other node the kernel's.
INGRESS_NODE_CFS_PERIOD=5ms
node_render() {
  local i=$1 cpu_manager=none kube_reserved=0 cfs_period=100ms cfs_custom=false
  [ "$NODE_COUNT" != 1 ] || cpu_manager=static kube_reserved=500m
  [ "$(node_role "$i")" != ingress ] || cfs_period=$INGRESS_NODE_CFS_PERIOD cfs_custom=true
  node_state=$(node_dir "$i") node_ip=$(node_ip "$i") pod_cidr=$(node_pod_cidr "$i") pod_gw=$(node_gw "$i") \
    node_name=ibench-node-$i CGROUP_ROOT=$CGROUP_ROOT/node-$i cpu_manager=$cpu_manager kube_reserved=$kube_reserved node_lease_s=20 \
    cfs_period=$cfs_period cfs_custom=$cfs_custom \
    pod_routes=", { \"dst\": \"$CLUSTER_POD_CIDR\", \"gw\": \"$(node_gw "$i")\" }, { \"dst\": \"$NODES_NET.0/24\", \"gw\": \"$(node_gw "$i")\" }" render "$2"
}

# nodes_start: each node's containerd (its images imported), kubelet and kube-proxy, in its
# namespace, below a cgroup root of its own confined to its roles' CPUs (its kubelet shown
# only those: kubelet_cpus_view).
nodes_start() {
  local i d p=$S/pki
  for i in $(seq "$NODE_COUNT"); do
    d=$(node_dir "$i")
    mkdir -p "$d"/{cni/net.d,kubelet,pki}
    node_render "$i" "$CONF/cni.conflist" >"$d/cni/net.d/10-ibench.conflist"
    node_render "$i" "$CONF/containerd.toml" >"$d/containerd.toml"
    node_render "$i" "$CONF/kubelet.yaml" >"$d/kubelet.yaml"
    node_render "$i" "$CONF/kube-proxy.yaml" >"$d/kube-proxy.yaml"
    (umask 077 && cd "$p" && cert "$d/pki/kubelet" "/CN=ibench-node-$i" "IP:$(node_ip "$i"),DNS:ibench-node-$i")
    cg_node_group "$CGROUP_ROOT/node-$i" "$(node_cpus "$i")"
    node_cpus "$i" >"$d/cpus" # (the bench's k6 in the client node runs on these: drivers/local.sh)
    start "containerd-$i" nsenter --net="$d/netns" containerd --config "$d/containerd.toml"
  done
  # The nodes' images at once (import_images), each node's kubelet once its own are in.
  local imports=()
  for i in $(seq "$NODE_COUNT"); do
    d=$(node_dir "$i")
    wait_for 20 "containerd of node $i" test -S "$d/containerd/containerd.sock"
    # shellcheck disable=SC2086 # one name a word
    import_images_to "$d/containerd/containerd.sock" $LOCAL_IMAGES & imports+=($!)
  done
  for i in $(seq "$NODE_COUNT"); do
    d=$(node_dir "$i")
    wait_all "${imports[i - 1]}" || die "the images of node $i could not be imported"
    mount --bind "$d/kubelet" "$d/kubelet" && mount --make-shared "$d/kubelet"
    start "kubelet-$i" nsenter --net="$d/netns" unshare --mount --propagation unchanged bash "$CONF/cluster.sh" kubelet-ns-node "$d" "$(node_cpus "$i")" \
      --config="$d/kubelet.yaml" --kubeconfig="$KUBECONFIG" --node-ip="$(node_ip "$i")" \
      --hostname-override="ibench-node-$i" --root-dir="$d/kubelet" --containerd="$d/containerd/containerd.sock" \
      --housekeeping-interval=1s --node-labels="$(node_labels "$i")"
    start "kube-proxy-$i" nsenter --net="$d/netns" kube-proxy --config="$d/kube-proxy.yaml"
  done
}

# node_lost I stop|start: node I lost to the cluster and back (bench:change CHANGE=kill-node): its
# link to the others down and its daemons (kubelet, kube-proxy, containerd) stopped, as a node
# that hangs or is cut off, its pods unreachable where they run; then all of it continued and
# its link up. Only a backends node of its own: the ingress's and the client's are the run's.
node_lost() {
  local i=$1 name sig
  NODE_COUNT=$(cat "$S/node-count" 2>/dev/null || echo 1)
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$NODE_COUNT" ] && [ "$(node_role "$i")" = backends ] ||
    die "node $i is not a backends node of its own (a cluster of $NODE_COUNT node(s): NODES=3 or more has one)"
  sig=STOP; [ "$2" = stop ] || sig=CONT
  # (Its link's host end is in the host's namespace, which up pinned: the caller may be in the
  # client node's.)
  [ "$2" = stop ] && nsenter --net="$S/nodes/host-netns" ip link set "ibn-$i" down
  for name in kubelet kube-proxy containerd; do kill -"$sig" "$(cat "$S/pids/$name-$i")"; done
  [ "$2" = stop ] || nsenter --net="$S/nodes/host-netns" ip link set "ibn-$i" up
}
