#!/usr/bin/env bash
# ci/run/bench.sh SCENARIO: one benchmark run, end to end.
#   validate every setting -> bring the platform up -> read server counters -> k6 ->
#   read server counters -> add the server-side count to the run's summary.
# Settings come from the environment (see README "Settings"); results go to
# $RESULTS_ROOT/<testid>/, a directory that is created fresh and never reused.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

SCENARIO=${1:-}
need_scenario "$SCENARIO"
# The platform (ci/lib.sh platform), through its driver (ci/platforms/driver.sh): the
# variant, the target's rules, how k6 is run and pinned, which stub_status counts the
# server side; all decided before anything starts.
load_platform
command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run './task tools'"
RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results}
# Monitoring (Prometheus + the bench:* rules, ci/platforms/monitoring/monitoring.sh): on by
# default on the platforms that have it. PROMETHEUS_URL names another Prometheus (a user's
# lab target).
MONITORING=${MONITORING:-1}
case "$MONITORING" in 0|1) ;; *) die "MONITORING must be 1 (correlate the run with Prometheus) or 0, got '$MONITORING'" ;; esac
pf_check "$SCENARIO"
# A user's cluster runs k6 in its pods: the in-cluster Job (SEGMENTS pods, default 1).
[ "$IN_CLUSTER" = 0 ] || SEGMENTS=${SEGMENTS:-1} exec bash "$IB_ROOT/ci/run/distributed.sh" "$SCENARIO"

export MONITORING
[ -z "${LINK_CAPACITY:-}" ] || link_capacity_bits "$LINK_CAPACITY" >/dev/null

# (On the local platform TARGET is unset here: its address is known only after deploy.)
k6_validate "$SCENARIO"

testid=${TESTID:-$(date -u +%Y%m%dT%H%M%SZ)-$SCENARIO-${VARIANT//+/_}}
dir=$RESULTS_ROOT/$testid
need_new_results_dir "$dir"

pf_up "$SCENARIO"

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
  PROMETHEUS_URL=${PROMETHEUS_URL:-$(pf_prometheus)} || exit 1
  K6_ARGS+=(--out experimental-prometheus-rw)
  K6_ENV+=(PROMETHEUS_URL="$PROMETHEUS_URL" K6_PROMETHEUS_RW_SERVER_URL="$PROMETHEUS_URL/api/v1/write"
           K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM=true K6_PROMETHEUS_RW_PUSH_INTERVAL=2s)
  say monitoring "Prometheus $PROMETHEUS_URL; k6 web dashboard http://$dash/"
fi
# k6 in its own cgroup: its CPU is the load generator's signal (ci/platforms/monitoring/cgroups.sh).
RUN=(bash "$IB_ROOT/ci/platforms/monitoring/cgroups.sh" run loadgen "${RUN[@]}")

mkdir -p "$RESULTS_ROOT" && mkdir "$dir" 2>/dev/null || die "results directory $dir exists already: results are never overwritten (choose another TESTID)"

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
report() { "$IB_VENV/bin/python" "$IB_ROOT/ci/report" "$@"; } # the package ci/report
# summary.json: k6's own, completed with the load generator's CPU and nginx's count (ci/report/
# summary.py); the client and server lines go into summary.txt and here.
report summary "$dir" --times "$wall" "$user" "$sys" --cpus "$CLIENT_CPUS" --stub-before "$before" --stub-after "$after" || exit 1
# The run's report: the series over the run while Prometheus still holds them, then the
# page. A report problem is said, never the run's result.
if [ "$MONITORING" = 1 ]; then report fetch "$dir" --prometheus "$PROMETHEUS_URL" || true; fi
report render "$dir" >/dev/null || echo "warning: the report of $dir could not be rendered" >&2
say results "$dir/ (report: $dir/report.html)"
exit $rc
