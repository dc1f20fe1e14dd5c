#!/usr/bin/env bash
# ci/run/bench.sh SCENARIO: one benchmark run, end to end.
#   validate every setting -> bring the platform up -> read server counters -> k6 ->
#   read server counters -> add the server-side count to the run's summary.
# Settings come from the environment (see README "Settings"); results go to
# $RESULTS_ROOT/<testid>/, a directory that is created fresh and never reused.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

SCENARIO=${1:-}
SCENARIOS="rps tps throughput"
[[ " $SCENARIOS " == *" $SCENARIO "* ]] || die "unknown scenario '$SCENARIO' (known: $SCENARIOS)"
# The platform (ci/lib.sh platform); a TARGET is guarded by the lab's rules (a lab address,
# or a user's host with ALLOW_EXTERNAL_TARGET=1).
PLATFORM=$(platform) || exit 1
export PLATFORM
command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run './task tools'"
RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results}

LAB_CLIENT_NS=ibench-client # ci/platforms/lab.sh's client namespace; the lab's addresses: ci/platforms/lab.env

# Each platform decides, before anything starts: the variant, how k6 is run and pinned, and
# which stub_status counts the server side.
target_host=$(printf '%s' "${TARGET:-}" | sed -E 's|^[a-z]+://||; s|[:/].*||')
case "$PLATFORM" in
  lab)
    export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
    # A target in the project's range (or none: the lab's LB) is only ever loaded from the
    # lab's client namespace: from the host, an address of 198.18.0.0/15 that no lab host
    # holds would follow the default route off the machine. Loopback and opted-in external
    # targets run here.
    if [ -z "${TARGET:-}" ] || [[ $target_host =~ ^198\.1[89]\. ]]; then
      "$IB_ROOT/ci/platforms/lab.sh" check
      read -r CLIENT_CPU_LIST SERVER_CPU_LIST <<<"$(lab_cpus)"
      RUN=(ip netns exec "$LAB_CLIENT_NS" taskset -c "$CLIENT_CPU_LIST")
      STUB=$LAB_STUB
      [ -n "${TARGET:-}" ] && [ "$target_host" != "$LAB_LB_IP" ] && STUB=${STUB_STATUS_URL:-}
    else
      RUN=()
      STUB=${STUB_STATUS_URL:-} # a user's target: server-side counts only if they expose stub_status
    fi ;;
  local)
    export VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
    need_overlay "$VARIANT"
    [ -z "${TARGET:-}" ] || die "PLATFORM=local measures the overlay it deploys: unset TARGET (or use PLATFORM=lab with ALLOW_EXTERNAL_TARGET=1)"
    image_set >/dev/null
    # The kubelet keeps one CPU out of exclusive use (ci/platforms/local/kubelet.yaml) and pins the
    # ingress to others: k6 goes on the CPUs the ingress does not have (known after deploy).
    CLIENT_CPUS=${CLIENT_CPUS:-$(($(nproc) - 1))} ;;
  external)
    # A user's cluster: its ClusterIPs are not reachable from here, so k6 runs inside it, as
    # the in-cluster Job of ci/run/distributed.sh (SEGMENTS pods, default 1); results there.
    [ -z "${TARGET:-}" ] || die "PLATFORM=external measures the overlay it deploys: unset TARGET"
    export SEGMENTS=${SEGMENTS:-1}
    exec bash "$IB_ROOT/ci/run/distributed.sh" "$SCENARIO" ;;
esac
export CLIENT_CPUS=${CLIENT_CPUS:-$(taskset -c "${CLIENT_CPU_LIST:-0-$(($(nproc) - 1))}" nproc)}

# Monitoring (Prometheus + the bench:* rules, ci/platforms/monitoring/monitoring.sh): on by default on
# the platforms that have it. PROMETHEUS_URL names another Prometheus (a user's lab target).
MONITORING=${MONITORING:-1}
case "$MONITORING" in 0|1) ;; *) die "MONITORING must be 1 (correlate the run with Prometheus) or 0, got '$MONITORING'" ;; esac
[ "$PLATFORM" = lab ] && [ ${#RUN[@]} = 0 ] && [ -z "${PROMETHEUS_URL:-}" ] && MONITORING=0 # a user's own target
export MONITORING
[ -z "${LINK_CAPACITY:-}" ] || link_capacity_bits "$LINK_CAPACITY" >/dev/null

# (On the local platform TARGET is unset here: its address is known only after deploy.)
k6_validate "$SCENARIO"

case "$PLATFORM" in
  lab)
    if [ ${#RUN[@]} -gt 0 ]; then
      need_root "bench on the lab"
      "$IB_ROOT/ci/platforms/lab.sh" up || exit 1 # its one-line error is said; a failed up removes what it made
      if [ "$MONITORING" = 1 ] && [ -z "${PROMETHEUS_URL:-}" ]; then
        PLATFORM=lab bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" up || exit 1
        PLATFORM=lab bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" wait
      fi
    fi ;;
  local)
    need_root "bench on the local cluster"
    bash "$IB_ROOT/ci/tools/tools.sh" cluster >/dev/null
    bash "$IB_ROOT/ci/platforms/local/cluster.sh" up || exit 1
    if [ "$MONITORING" = 1 ] && [ -z "${PROMETHEUS_URL:-}" ]; then
      bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" up || exit 1
    fi
    addr=$(bash "$IB_ROOT/ci/platforms/deploy.sh") || exit 1
    [ "$MONITORING" = 1 ] && [ -z "${PROMETHEUS_URL:-}" ] && bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" wait
    scheme=$(scenario_scheme "$SCENARIO")
    if [[ $addr == *:* ]]; then
      # A NodePort straight to the backends: plain HTTP, counted by the backend's stub_status.
      [ "$scheme" = http ] || die "overlay $VARIANT exposes plain HTTP only (no TLS without an ingress): use rps or throughput"
      STUB=http://$addr/stub_status
    else
      STUB=http://$addr:8080/stub_status # nginx-lb's status port; one replica, so exact counts
    fi
    export TARGET=$scheme://$addr
    export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
    SERVER_CPU_LIST=$(ingress_cpuset)
    CLIENT_CPU_LIST=$(cpus_except "$SERVER_CPU_LIST")
    RUN=(taskset -c "$CLIENT_CPU_LIST") ;;
esac

stub() { [ -z "$STUB" ] || stub_counts "$STUB"; } # "accepts requests", or nothing

# Correlation and live views. k6 streams its metrics into Prometheus (native histograms,
# tagged testid/variant/scenario/platform), the teardown reads the bench:* rules back, and
# the web dashboard serves the run live (loopback; on the lab, the client's address, the one
# the host reaches in the client's namespace) and is saved with the results.
# --out on the command line replaces K6_OUT: a user's own output is passed on beside ours.
K6_ARGS=(); [ -z "${K6_OUT:-}" ] || K6_ARGS+=(--out "$K6_OUT")
dash=127.0.0.1:${K6_WEB_DASHBOARD_PORT:-5665}
[ "$PLATFORM" = lab ] && [ ${#RUN[@]} -gt 0 ] && dash=$LAB_CLIENT_IP:${dash#*:}
K6_ENV=(K6_WEB_DASHBOARD=true K6_WEB_DASHBOARD_OPEN=false K6_WEB_DASHBOARD_HOST="${dash%:*}" K6_WEB_DASHBOARD_PORT="${dash#*:}")
if [ "$MONITORING" = 1 ]; then
  PROMETHEUS_URL=${PROMETHEUS_URL:-$(bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" url)} || exit 1
  K6_ARGS+=(--out experimental-prometheus-rw)
  K6_ENV+=(PROMETHEUS_URL="$PROMETHEUS_URL" K6_PROMETHEUS_RW_SERVER_URL="$PROMETHEUS_URL/api/v1/write"
           K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM=true K6_PROMETHEUS_RW_PUSH_INTERVAL=2s)
  say monitoring "Prometheus $PROMETHEUS_URL; k6 web dashboard http://$dash/"
fi
# k6 in its own cgroup: its CPU is the load generator's signal (ci/platforms/monitoring/cgroups.sh).
RUN=(bash "$IB_ROOT/ci/platforms/monitoring/cgroups.sh" run loadgen "${RUN[@]}")

testid=${TESTID:-$(date -u +%Y%m%dT%H%M%SZ)-$SCENARIO-${VARIANT//+/_}}
mkdir -p "$RESULTS_ROOT"
dir=$RESULTS_ROOT/$testid
mkdir "$dir" 2>/dev/null || die "results directory $dir exists already: results are never overwritten (choose another TESTID)"

meta=$(jq -nc \
  --arg git "$(git -C "$IB_ROOT" describe --always --dirty 2>/dev/null || echo unknown)" \
  --arg k6 "$(k6 version 2>/dev/null | head -n1)" \
  --arg nginx "$(nginx -v 2>&1 | sed 's|.*/||')" \
  --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" \
  --arg knobs "$([ "$PLATFORM" = lab ] && variant_knob_files "$VARIANT" | sed "s|$IB_ROOT/||" | paste -sd' ')" \
  --arg backends "${LAB_BACKENDS:-2}" --arg platform "$PLATFORM" \
  --arg client_cpus "${CLIENT_CPU_LIST:-all}" --arg server_cpus "${SERVER_CPU_LIST:-n/a}" \
  '{git_revision: $git, tools: {k6: $k6, nginx: $nginx}, host: {cpus: $cpus, kernel: $kernel},
    knob_files: ($knobs | split(" ")), placement: {client_cpus: $client_cpus, server_cpus: $server_cpus}, lab_backends: (if $platform == "lab" then ($backends|tonumber) else null end)}')

before=$(stub)
set +e
# `time` measures the load generator's own CPU (user + system of k6, which ip netns exec,
# taskset and env exec into): a run where the client saturates measures the client.
TIMEFORMAT='%R %U %S'
{ time {
  # GODEBUG: k6 would negotiate HTTP/2 over TLS; the seeds measured HTTP/1.1.
  "${RUN[@]}" env TESTID="$testid" CLIENT_CPUS="$CLIENT_CPUS" RESULTS_DIR="$dir" BENCH_META="$meta" GODEBUG=http2client=0 \
    "${K6_ENV[@]}" K6_WEB_DASHBOARD_EXPORT="$dir/k6-dashboard.html" \
    k6 run --quiet --no-color "${K6_ARGS[@]}" "$IB_ROOT/k6/$SCENARIO.js" 2>"$dir/k6.log"
  echo $? >"$dir/.rc"
} ; } 2>"$dir/.cpu"
rc=$(cat "$dir/.rc")
set -e
after=$(stub)

if [ $rc != 0 ] && [ $rc != 99 ]; then # 99: thresholds crossed, a finished run that failed
  # k6 stopped early (setup failed: target not ready): the one-line reason; files stay.
  reason=$(sed -n 's/.*level=error msg="\(Error: \)\{0,1\}\([^"]*\).*/\2/p' "$dir/k6.log" | sed 's/\\n.*//' | head -n1)
  die "k6 $SCENARIO did not finish (exit $rc): ${reason:-see $dir/k6.log}"
fi

read -r wall user sys <"$dir/.cpu" && rm -f "$dir/.cpu" "$dir/.rc"
summary_add() { # JQ_ARGS... FILTER: add fields to the run's summary.json in place
  jq "$@" "$dir/summary.json" >"$dir/summary.json.new" && mv "$dir/summary.json.new" "$dir/summary.json"
}
summary_add --argjson wall "$wall" --argjson user "$user" --argjson sys "$sys" --argjson cpus "$CLIENT_CPUS" \
  '.client = {cpu_seconds: ($user + $sys), wall_seconds: $wall, cpus: $cpus,
              cpu_us_per_request: (if .result.requests > 0 then ($user + $sys) * 1e6 / .result.requests else null end),
              utilization: (($user + $sys) / ($wall * $cpus))}'
jq -r '"client        k6 used \(.client.cpu_seconds * 100 | round / 100) CPU-s: \(.client.cpu_us_per_request // 0 | round) µs per request, \(.client.utilization * 100 | round)% of \(.client.cpus) CPU"' \
  "$dir/summary.json" | tee -a "$dir/summary.txt" >&2

if [ -n "$before" ] && [ -n "$after" ]; then
  read -r acc0 req0 <<<"$before"; read -r acc1 req1 <<<"$after"
  # The second stub_status read counts itself (the first one is inside $req0): minus one.
  summary_add --argjson req "$((req1 - req0 - 1))" --argjson acc "$((acc1 - acc0 - 1))" \
    '.server = {source: "nginx stub_status", requests: $req, connections_accepted: $acc,
                client_over_server: (if $req > 0 then .result.requests / $req else null end)}'
  line=$(jq -r '"server        \(.server.requests) requests, \(.server.connections_accepted) connections counted by nginx (client/server \(.server.client_over_server * 1000 | round / 1000))"' "$dir/summary.json")
else
  line="server        no server-side count (no stub_status for this target)"
fi
echo "$line" | tee -a "$dir/summary.txt" >&2
# The run's report (ci/report.py): the series over the run while Prometheus still holds
# them, then the page. A report problem is said, never the run's result.
if [ "$MONITORING" = 1 ]; then "$IB_VENV/bin/python" "$IB_ROOT/ci/report.py" fetch "$dir" --prometheus "$PROMETHEUS_URL" || true; fi
"$IB_VENV/bin/python" "$IB_ROOT/ci/report.py" render "$dir" >/dev/null || echo "warning: the report of $dir could not be rendered" >&2
say results "$dir/ (report: $dir/report.html)"
exit $rc
