# The bare-metal lab's driver (interface: bench/platforms/driver.sh): plain NGINX and backends in
# network namespaces (bench/platforms/lab.sh, addresses in bench/platforms/lab.env), or a user's
# host given as TARGET (ALLOW_EXTERNAL_TARGET=1), loaded from here.

# Traits (bench/platforms/driver.sh pf_trait; Python: bench/run/cases.py traits): root: network
# namespaces, nginx on 80/443; k6 on the host (in the client's namespace); no cluster; Prometheus
# and exporters on the host.
PF_TRAITS='root=1 k6=host cluster=none monitoring=host'

# A target in the project's range (or none: the lab's LB) is only ever loaded from the lab's
# client namespace: from the host, an address of 198.18.0.0/15 that no lab host holds would
# follow the default route off the machine. Loopback and opted-in external targets run here.
pf_check() {
  export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
  local host; host=$(printf '%s' "${TARGET:-}" | sed -E 's|^[a-z]+://||; s|[:/].*||')
  if [ -z "${TARGET:-}" ] || [[ $host =~ ^198\.1[89]\. ]]; then
    "$IB_ROOT/bench/platforms/lab.sh" check
    read -r CLIENT_CPU_LIST SERVER_CPU_LIST <<<"$(lab_cpus)"
    RUN=(ip netns exec "$LAB_CLIENT_NS" taskset -c "$CLIENT_CPU_LIST")
    dash_host=$LAB_CLIENT_IP # the client's address: the host reaches k6's dashboard there
    STUB=$LAB_STUB
    [ -n "${TARGET:-}" ] && [ "$host" != "$LAB_LB_IP" ] && STUB=${STUB_STATUS_URL:-}
  else
    STUB=${STUB_STATUS_URL:-} # a user's target: server-side counts only if they expose stub_status
    # and a Prometheus only if one is given: the lab's exporters know nothing of it.
    [ -n "${PROMETHEUS_URL:-}" ] || MONITORING=0
  fi
  export CLIENT_CPUS=${CLIENT_CPUS:-$(taskset -c "${CLIENT_CPU_LIST:-0-$(($(nproc) - 1))}" nproc)}
}

# The LB's and the backends' groups (bench/platforms/lab.sh starts them in their roles' groups).
pf_cpu_groups() {
  [ ${#RUN[@]} -gt 0 ] || return 0
  printf '%s\n' "ingress ingress-bench/ingress" "backend ingress-bench/backend"
}

pf_up() {
  [ ${#RUN[@]} -gt 0 ] || return 0 # a user's host: nothing of ours to bring up
  need_root "bench on the lab"
  "$IB_ROOT/bench/platforms/lab.sh" up || exit 1 # its one-line error is said; a failed up removes what it made
  if own_monitoring; then
    bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" up || exit 1
    bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" wait
  fi
}
