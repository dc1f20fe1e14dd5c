# The user's cluster (interface: bench/platforms/driver.sh): the cluster of $KUBECONFIG, only
# with ALLOW_EXTERNAL_CLUSTER=1 (bench/platforms/deploy.sh checks both before anything is
# applied). Its ClusterIPs are not reachable from here, so k6 always runs inside it, as the
# in-cluster Job of bench/run/distributed.sh (SEGMENTS pods). kind is this platform with its
# config (bench/platforms/kind/cluster.yaml). With INGRESS_PODS it measures an ingress the user
# runs there, nothing of it deployed: TARGET is its address, its pods and Prometheus are read
# (bench/lib/existing.sh).

# Traits (bench/platforms/driver.sh pf_trait; Python: bench/run/cases.py traits): no root; k6 in
# pods (the Indexed Job); the user's cluster; the user's Prometheus (PROMETHEUS_URL, or a
# chart's).
PF_TRAITS='root=0 k6=pods cluster=user monitoring=user'

pf_check() {
  IN_CLUSTER=1
  if [ -n "${INGRESS_PODS:-}" ]; then
    setting INGRESS_PODS >/dev/null && setting BACKEND_PODS >/dev/null
    [ -n "${TARGET:-}" ] || die "INGRESS_PODS: TARGET must be the address of the ingress they serve (a Service name the runners reach, a LoadBalancer address, or a host name with HOST)"
    export VARIANT=${VARIANT:-existing}
    return 0
  fi
  export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
  need_overlay "$VARIANT"
  [ -z "${TARGET:-}" ] || die "PLATFORM=external measures the overlay it deploys: unset TARGET, or name the pods of an ingress you run at TARGET in INGRESS_PODS"
}

pf_cluster_up() { :; } # the user's cluster is theirs: never brought up or down here
# The user's Prometheus is theirs to name: PROMETHEUS_URL, an address the pods reach.
pf_prometheus_in_cluster() { :; }
