# The platform driver interface. Entry points (bench/run/bench.sh, calibrate.sh, distributed.sh,
# and the matrices through bench.sh) know a platform only through these functions, which
# bench/platforms/drivers/<PLATFORM>.sh defines; a new platform is one driver file plus its
# value in the PLATFORM setting (bench/settings/settings.yaml).
#   pf_check SCENARIO   before anything starts: the variant, the target rules, what is known of
#                       the CPU placement (CLIENT_CPU_LIST, SERVER_CPU_LIST, CLIENT_CPUS), how
#                       k6 is run (RUN: a command prefix; none: on the host; IN_CLUSTER=1: pods)
#                       and which stub_status counts the server side (STUB)
#   pf_up SCENARIO      the platform and its monitoring up, the variant deployed; exports
#                       TARGET when the platform decides it, completes STUB and the placement
#                       (host k6: lab, local)
#   pf_cluster_up       a cluster and its monitoring up, for the in-cluster k6 of
#                       bench/run/distributed.sh, which deploys and loads it itself (local, external)
#   pf_enter CMD...     after pf_check: CMD in place of this process where the platform's
#                       client side runs (pf_client_netns: local, the client node's
#                       network namespace), or nothing
#   pf_cpu_groups       after pf_up: "ROLE REL" lines, the cgroups whose CPU time is the
#                       ingress's and the backends' (bench/platforms/monitoring/cgroups.sh usage);
#                       none: the platform cannot see them (a user's cluster or host)
#   pf_prometheus       the platform's Prometheus URL (fails when it has none up)
#   pf_prometheus_in_cluster   the address in-cluster k6 reaches it at; empty: none of its own
# And its traits, one line of the driver (PF_TRAITS='root=1 k6=host cluster=own ...'), which
# bash (pf_trait) and Python (bench/run/cases.py traits) read without loading it:
#   root        1: its runs need root
#   k6          host: k6 runs on this machine; pods: in the cluster (bench/run/distributed.sh)
#   cluster     none, own (this machine's, bench/platforms/local/), user (KUBECONFIG's)
#   monitoring  host (the lab's Prometheus), operator (ours, in our cluster), user (theirs)
# Taking a platform down stays with its own task (lab:down, cluster:down, monitoring:down):
# what they remove is what the platform's scripts made, whoever started them.
# Sourced after bench/lib.sh.

# load_platform: PLATFORM resolved (platform(), the one place) and exported, its driver loaded.
load_platform() {
  PLATFORM=$(platform) || exit 1
  export PLATFORM
  pf_cpu_groups() { :; }
  pf_enter() { :; }
  pf_client_netns() { :; }
  . "$IB_ROOT/bench/platforms/drivers/$PLATFORM.sh"
  RUN=() STUB='' IN_CLUSTER=0 dash_host=127.0.0.1 budget_cpus=''
}

# pf_trait NAME [PLATFORM]: a trait of PLATFORM's driver (default: the resolved PLATFORM).
pf_trait() {
  local p=${2:-$(platform)} || exit 1
  sed -n "s/^PF_TRAITS='\(.*\)'$/\1/p" "$IB_ROOT/bench/platforms/drivers/$p.sh" | tr ' ' '\n' | awk -F= -v n="$1" '$1 == n {print $2}'
}

# Every platform's Prometheus is the monitoring script's to say.
pf_prometheus() { bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" url; }
pf_prometheus_in_cluster() { bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" url-in-cluster; }
# own_monitoring: the platform's own stack, unless the run was given another Prometheus.
own_monitoring() { [ "$(setting MONITORING)" = 1 ] && [ -z "${PROMETHEUS_URL:-}" ]; }
