# CPU placement: the lab's CPU split, the ingress's CPU amount, where k6 runs beside it.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# CPU placement on one host (the seeds pinned wrk with taskset): the load generator gets the
# first half of the CPUs, the servers the second half, so neither steals the other's cycles.
# Overridable with LAB_CLIENT_CPUS / LAB_SERVER_CPUS (taskset lists such as 0 or 2-3).
cpu_range() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
lab_cpus() { # prints "CLIENT_LIST SERVER_LIST"
  local n; n=$(nproc)
  local client=${LAB_CLIENT_CPUS:-} server=${LAB_SERVER_CPUS:-}
  if [ "$n" -lt 2 ]; then client=${client:-0}; server=${server:-0}
  else client=${client:-$(cpu_range 0 $((n / 2 - 1)))}; server=${server:-$(cpu_range $((n / 2)) $((n - 1)))}; fi
  local v; for v in "$client" "$server"; do
    [[ $v =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] || die "LAB_CLIENT_CPUS/LAB_SERVER_CPUS must be CPU lists like 0 or 1-3, got '$v'"
    taskset -c "$v" true 2>/dev/null || die "CPU list '$v' is not available on this host ($n CPUs)"
  done
  echo "$client $server"
}
# need_ingress_cpu: INGRESS_CPU as a run takes it: auto (the default; a probe decides on the
# local platform, the overlay's elsewhere; probe: the same, decided again), overlay, or a CPU quantity this host has.
need_ingress_cpu() {
  local q; q=$(setting INGRESS_CPU) || exit 1
  case $q in "" | auto | probe | overlay) return 0 ;; esac
  [ "$(pf_trait cluster)" != own ] || awk -v c="$(cpu_cores "$q")" -v n="$(nproc)" 'BEGIN { exit !(c <= n) }' ||
    die "INGRESS_CPU $q is more than this machine's $(nproc) CPUs"
}
# cpu_cores QUANTITY: a Kubernetes CPU quantity (500m, 0.5, 2) in cores.
cpu_cores() { awk -v q="$1" 'BEGIN { print (q ~ /m$/ ? substr(q, 1, length(q) - 1) / 1000 : q + 0) }'; }
# is_cpu_quantity TEXT: a Kubernetes CPU quantity above 0 (2, 500m, 0.5), the registry's cpu type
# (k6/lib/settings.js isCpuQuantity is the same rule; ci/tests/test_settings.py holds both to one table).
is_cpu_quantity() { [[ $1 =~ ^([0-9]+m|[0-9]+|[0-9]*\.[0-9]+)$ ]] && [[ ! $1 =~ ^[0.]*m?$ ]]; }
# deployed_ingress_share: the fractional CPU of the ingress deployed now for VARIANT (the probe
# runs there, and a share within its noise keeps the pod), else 500m.
deployed_ingress_share() {
  local v q
  v=$(KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl get ns ingress-bench -o jsonpath='{.metadata.annotations.ingress-bench/variant}' 2>/dev/null) || v=''
  q=$(KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl -n ingress-bench get deploy -l app.kubernetes.io/component=ingress \
    -o jsonpath='{.items[0].spec.template.spec.containers[0].resources.limits.cpu}' 2>/dev/null) || q=''
  if [ "${v%% *}" = "$VARIANT" ] && [[ $q =~ ^[0-9]+m$ ]] && [ "${q%m}" -lt 1000 ]; then echo "$q"; else echo 500m; fi
}

# client_cpus LIST: where k6 runs beside an ingress on cpuset LIST ("1", "0-1,3"): this
# machine's CPUs not in it; all of them when LIST has every CPU (a fractional INGRESS_CPU is a
# CFS quota in the shared pool, not a pinned core: k6 shares, and the placement warning says so).
client_cpus() {
  local all=() c
  for c in $(seq 0 $(($(nproc) - 1))); do cpu_in "$c" "$1" || all+=("$c"); done
  [ ${#all[@]} -gt 0 ] || all=($(seq 0 $(($(nproc) - 1))))
  (IFS=,; echo "${all[*]}")
}
# placement_warning CLIENT_LIST SERVER_LIST [SHARED [INGRESS_CORES]]: before the load, one line
# when k6's CPUs could not saturate the ingress's. The native engine costs about what nginx does
# per request (the probe's per-request costs, bench/run/budget.py, read them), so k6 needs as many CPUs as the ingress has, twice as many when
# it shares them with SHARED (the local platform's backends and control plane: about the
# ingress's cost again). INGRESS_CORES: a fractional ingress (a CFS quota on the CPUs k6 runs on
# too) has that much, and leaves k6 the rest. The run goes on: the validity threshold judges
# what it measured.
placement_warning() {
  local nc ns have need
  nc=$(taskset -c "$1" nproc 2>/dev/null) && ns=$(taskset -c "$2" nproc 2>/dev/null) || return 0
  ns=${4:-$ns}
  read -r have need < <(awk -v c="$nc" -v s="$ns" -v q="${4:-}" -v k="$([ -n "${3:-}" ] && echo 2 || echo 1)" \
    'BEGIN { printf "%g %g\n", c - (q == "" ? 0 : s), k * s }')
  awk -v h="$have" -v n="$need" 'BEGIN { exit !(h < n) }' || return 0
  if [ -n "${3:-}" ]; then
    echo "warning: placement: k6 has $have CPU(s) ($1), shared with $3, for an ingress on $ns ($2): it needs $need to saturate it, so the run will likely measure k6 (NOT VALID, exit 99); use a node with more CPUs, INGRESS_CPU=auto, or PLATFORM=lab for the ingress alone" >&2
  else
    echo "warning: placement: k6 has $have CPU(s) ($1) for an ingress on $ns ($2): give it at least $ns (LAB_CLIENT_CPUS), or the run will likely measure k6 (NOT VALID, exit 99)" >&2
  fi
}
cpu_in() { # CPU LIST
  local r; for r in ${2//,/ }; do
    [ "$1" -ge "${r%-*}" ] && [ "$1" -le "${r#*-}" ] && return 0
  done
  return 1
}
