# The local platform's driver (interface: bench/platforms/driver.sh): a real Kubernetes on this
# host, its nodes network namespaces (bench/platforms/local/), the overlay deployed by
# bench/platforms/deploy.sh, k6 a host process in the client node's namespace, pinned to the
# client's CPUs (on one node, those the ingress does not have).

# Traits (bench/platforms/driver.sh pf_trait; Python: bench/run/cases.py traits): root: a kubelet,
# containerd, iptables; k6 on the host (in the client node's namespace); our own cluster; the
# operator stack in it.
PF_TRAITS='root=1 k6=host cluster=own monitoring=operator'

pf_check() {
  export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
  need_overlay "$VARIANT"
  [ -z "${TARGET:-}" ] || die "PLATFORM=local measures the overlay it deploys: unset TARGET (or use PLATFORM=lab with ALLOW_EXTERNAL_TARGET=1)"
  image_set >/dev/null
  # One node: the kubelet keeps one CPU out of exclusive use (bench/platforms/local/kubelet.yaml)
  # and pins the ingress to others: k6 goes on the CPUs the ingress does not have (known after
  # deploy). On several nodes k6 is the client node's, on its CPUs, the ingress's budget its node's.
  local ns; ns=$(client_netns)
  if [ -n "$ns" ] && in_netns "$ns" && [ "$(cluster_nodes)" -gt 1 ]; then
    CLIENT_CPU_LIST=$(cat "$(client_node_dir)/cpus")
    budget_cpus="$(taskset -c "$CLIENT_CPU_LIST" nproc) $(KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl get nodes -l ingress-bench/role-ingress=true -o jsonpath='{.items[0].status.capacity.cpu}')"
    export CLIENT_CPUS=${CLIENT_CPUS:-${budget_cpus% *}}
  else
    export CLIENT_CPUS=${CLIENT_CPUS:-$(($(nproc) - 1))}
  fi
}

# pf_client_netns: the client node's network namespace (the seeds' client machine, where the
# run's client side belongs; with one node, that node's). The cluster and its monitoring are
# brought up first, from the host: the namespace is the cluster's, and what their first up
# builds (the module proxy, Debian's archive) is not reachable from a node.
pf_client_netns() {
  local ns; ns=$(client_netns)
  { [ -n "$ns" ] && in_netns "$ns"; } || pf_cluster_up >&2
  client_netns
}

# pf_enter CMD...: CMD in place of this process in the client node's namespace (pf_client_netns):
# the host has no route into the cluster, and on several nodes k6's traffic crosses the client
# node's link to the ingress node's. Nothing when in it already.
pf_enter() {
  local ns; ns=$(pf_client_netns) || exit 1
  [ -n "$ns" ] && ! in_netns "$ns" || return 0
  if [ "$(cluster_nodes)" -gt 1 ]; then
    say placement "k6 in the client node (ibench-node-2, CPU $(cat "$(client_node_dir)/cpus")), the ingress on its own node"
  else
    say placement "k6 in the one node (ibench-node-1), on the CPUs the ingress does not have"
  fi
  # pf_client_netns checked the cluster and its monitoring just now: pf_up in the process this
  # becomes (the same pid) need not again (a second of tools, up and monitoring checks a run).
  export IB_CLUSTER_CHECKED=$$
  exec nsenter --net="$ns" "$@"
}

# pf_cluster_up: the cluster and its monitoring stack (what deploy's monitoring component needs).
pf_cluster_up() {
  need_root "a run on the local cluster"
  bash "$IB_ROOT/ci/tools/tools.sh" cluster >/dev/null
  bash "$IB_ROOT/bench/platforms/local/cluster.sh" up || exit 1
  export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
  if own_monitoring; then bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" up || exit 1; fi
}

pf_up() {
  if [ "${IB_CLUSTER_CHECKED:-}" = $$ ]; then export KUBECONFIG=$IB_CLUSTER_KUBECONFIG; else pf_cluster_up; fi
  local addr scheme
  addr=$(bash "$IB_ROOT/bench/platforms/deploy.sh") || exit 1
  # The pods its monitors scrape: the ingress's, or a NodePort straight to the backends' (no
  # ingress pod: waiting for one took the whole timeout).
  if own_monitoring; then bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" wait "$([[ $addr == *:* ]] && echo backend || echo ingress)"; fi
  scheme=$(scenario_scheme "$1")
  if [[ $addr == *:* ]]; then
    # A NodePort straight to the backends: plain HTTP, counted by the backend's stub_status.
    [ "$scheme" = http ] || die "overlay $VARIANT exposes plain HTTP only (no TLS without an ingress): use rps or throughput"
    STUB=http://$addr/stub_status
  else
    # nginx-lb's status port, or a Gateway's proxy's statistics (its pod's stats port: the
    # controller's Service has none); one replica, so exact counts.
    local proxy; proxy=$(kubectl -n ingress-bench get pod -l ingress-bench/role=ingress --field-selector=status.phase=Running -o jsonpath='{.items[*].status.podIP}')
    proxy=${proxy%% *}
    if [ -n "$proxy" ]; then STUB=http://$proxy:19001/stats/prometheus; else STUB=http://$addr:8080/stub_status; fi
  fi
  export TARGET=$scheme://$addr
  SERVER_CPU_LIST=$(ingress_cpuset)
  # A CPU amount that is not whole cores is a CFS quota in the shared pool, beside k6.
  INGRESS_CORES=''
  [ -z "${INGRESS_CPU:-}" ] || INGRESS_CORES=$(cpu_cores "$INGRESS_CPU" | awk '$1 != int($1)')
  # The client node's address: the host's way to k6's web dashboard.
  dash_host=$(ip -o -4 addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  if [ -n "${budget_cpus:-}" ]; then
    # The client node's CPUs (pf_check).
    PLACEMENT_SHARED="the backends' node and the control plane"
  else
    CLIENT_CPU_LIST=$(client_cpus "$SERVER_CPU_LIST")
    PLACEMENT_SHARED="the backends and the control plane" # unpinned: every CPU but the ingress's
  fi
  RUN=(taskset -c "$CLIENT_CPU_LIST")
}

pf_cpu_groups() { pod_groups; }
