# The local cluster's nodes when NODES is above 1 (sourced by bench/platforms/local/cluster.sh).
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
CLUSTER_POD_CIDR=198.18.64.0/18

node_ip() { echo "$NODES_NET.$((10 + $1))"; }
node_pod_cidr() { echo "198.18.$((63 + $1)).0/24"; }
node_gw() { echo "198.18.$((63 + $1)).1"; }
node_dir() { echo "$S/nodes/$1"; }
# in_node I CMD...: CMD in node I's network namespace (the host's mounts and everything else).
in_node() { local i=$1; shift; nsenter --net="$(node_dir "$i")/netns" "$@"; }

# node_role I: node 1 the ingress, node 2 the client (with 2 nodes: the backends and the
# client), the others the backends; 0, the one node of NODES=1 (this host), every role.
node_role() {
  if [ "$1" = 0 ]; then echo ingress,backends,client
  elif [ "$1" = 1 ]; then echo ingress
  elif [ "$NODE_COUNT" = 2 ]; then echo backends,client
  elif [ "$1" = 2 ]; then echo client
  else echo backends; fi
}

# node_labels I: its roles as labels, ingress-bench/role-ROLE=true each (a node can hold two).
node_labels() { node_role "$1" | tr , '\n' | sed 's|^|ingress-bench/role-|; s|$|=true|' | paste -sd,; }

# nodes_plan: NODES read and checked before anything starts (one line, exit 1): NODE_COUNT.
nodes_plan() { NODE_COUNT=$(setting NODES) || exit 1; }

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
# from a node's address) through their node.
node_render() {
  local i=$1
  node_state=$(node_dir "$i") NODE_IP=$(node_ip "$i") POD_CIDR=$(node_pod_cidr "$i") pod_gw=$(node_gw "$i") \
    NODE_NAME=ibench-node-$i CGROUP_ROOT=$CGROUP_ROOT/node-$i cpu_manager=none \
    pod_routes=", { \"dst\": \"$CLUSTER_POD_CIDR\", \"gw\": \"$(node_gw "$i")\" }, { \"dst\": \"$NODES_NET.0/24\", \"gw\": \"$(node_gw "$i")\" }" render "$2"
}

# nodes_start: each node's containerd (its images imported), kubelet and kube-proxy, in its
# namespace, below a cgroup root of its own.
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
    # Every CPU: the kubelet writes every CPU of the machine into its kubepods group at start
    # (with the none policy too), which a group confined to fewer refuses.
    cg_node_group "$CGROUP_ROOT/node-$i" "$(cg_cpuset "$CGROUP_ROOT")"
    start "containerd-$i" nsenter --net="$d/netns" containerd --config "$d/containerd.toml"
  done
  for i in $(seq "$NODE_COUNT"); do
    d=$(node_dir "$i")
    wait_for 20 "containerd of node $i" test -S "$d/containerd/containerd.sock"
    # shellcheck disable=SC2086 # one name a word
    import_images_to "$d/containerd/containerd.sock" $LOCAL_IMAGES
    mount --bind "$d/kubelet" "$d/kubelet" && mount --make-shared "$d/kubelet"
    start "kubelet-$i" nsenter --net="$d/netns" unshare --mount --propagation unchanged bash "$CONF/cluster.sh" kubelet-ns \
      --config="$d/kubelet.yaml" --kubeconfig="$KUBECONFIG" --node-ip="$(node_ip "$i")" \
      --hostname-override="ibench-node-$i" --root-dir="$d/kubelet" --containerd="$d/containerd/containerd.sock" \
      --housekeeping-interval=1s --node-labels="$(node_labels "$i")"
    start "kube-proxy-$i" nsenter --net="$d/netns" kube-proxy --config="$d/kube-proxy.yaml"
  done
}
