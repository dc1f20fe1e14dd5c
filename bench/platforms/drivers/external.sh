# The user's cluster (interface: bench/platforms/driver.sh): the cluster of $KUBECONFIG, only
# with ALLOW_EXTERNAL_CLUSTER=1 (bench/platforms/deploy.sh checks both before anything is
# applied). Its ClusterIPs are not reachable from here, so k6 always runs inside it, as the
# in-cluster Job of bench/run/distributed.sh (SEGMENTS pods). kind is this platform with its
# config (bench/platforms/kind/cluster.yaml).

# Traits (bench/platforms/driver.sh pf_trait; Python: bench/run/cases.py traits): no root; k6 in
# pods (the Indexed Job); the user's cluster; the user's Prometheus (PROMETHEUS_URL, or a
# chart's).
PF_TRAITS='root=0 k6=pods cluster=user monitoring=user'

pf_check() {
  export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
  need_overlay "$VARIANT"
  [ -z "${TARGET:-}" ] || die "PLATFORM=external measures the overlay it deploys: unset TARGET"
  IN_CLUSTER=1
}

pf_cluster_up() { :; } # the user's cluster is theirs: never brought up or down here
# The user's Prometheus is theirs to name: PROMETHEUS_URL, an address the pods reach.
pf_prometheus_in_cluster() { :; }
