#!/usr/bin/env bash
# ci/bench.sh SCENARIO: one benchmark run, end to end.
#   validate every setting -> bring the platform up -> read server counters -> k6 ->
#   read server counters -> add the server-side count to the run's summary.
# Settings come from the environment (see README "Settings"); results go to
# $RESULTS_ROOT/<testid>/, a directory that is created fresh and never reused.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SCENARIO=${1:-}
SCENARIOS="rps tps throughput"
[[ " $SCENARIOS " == *" $SCENARIO "* ]] || die "unknown scenario '$SCENARIO' (known: $SCENARIOS)"
export VARIANT=${VARIANT:-default} PLATFORM=${PLATFORM:-lab}
case "$PLATFORM" in
  lab) ;;
  *) die "unknown PLATFORM '$PLATFORM' (known: lab)" ;;
esac
variant_knob_files "$VARIANT" >/dev/null
command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run './task tools'"
RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results}

# The lab's addresses: must match ci/lab.sh.
LAB_CLIENT_NS=ibench-client
LAB_STUB=http://198.18.0.2:8080/stub_status

# Validate the k6 settings with the scenario's own config code (k6/lib/config.js), before
# anything starts: one source of truth for defaults and rules. k6 reports a thrown Error as
# a log line; keep its message only.
export CLIENT_CPUS=${CLIENT_CPUS:-$(nproc)}
if ! out=$(k6 inspect --include-system-env-vars --execution-requirements "$IB_ROOT/k6/$SCENARIO.js" 2>&1 >/dev/null); then
  msg=$(printf '%s\n' "$out" | sed -n 's/.*Error: \(.*\)/\1/p' | sed 's/\\n.*//; s/" *$//; s/ at .*//' | head -n1)
  die "${msg:-k6 rejected the scenario: $(printf '%s' "$out" | head -n1)}"
fi

# A target in the project's range (or none: the lab's LB) is only ever loaded from the lab's
# client namespace: from the host, an address of 198.18.0.0/15 that no lab host holds would
# follow the default route off the machine. Loopback and opted-in external targets run here.
target_host=$(printf '%s' "${TARGET:-}" | sed -E 's|^[a-z]+://||; s|[:/].*||')
if [ -z "${TARGET:-}" ] || [[ $target_host =~ ^198\.1[89]\. ]]; then
  need_root "bench on the lab"
  "$IB_ROOT/ci/lab.sh" up || die "the lab did not come up (see above); nothing is left running"
  STUB=$LAB_STUB
  [ -n "${TARGET:-}" ] && [ "$target_host" != 198.18.0.2 ] && STUB=${STUB_STATUS_URL:-}
  read -r CLIENT_CPUS_LIST SERVER_CPUS_LIST <<<"$(lab_cpus)"
  RUN=(ip netns exec "$LAB_CLIENT_NS" taskset -c "$CLIENT_CPUS_LIST")
  CLIENT_CPUS=$(taskset -c "$CLIENT_CPUS_LIST" nproc)
else
  STUB=${STUB_STATUS_URL:-} # a user's target: server-side counts only if they expose stub_status
  RUN=()
fi

stub() { # prints "accepts requests" from nginx stub_status, or nothing
  [ -n "$STUB" ] || return 0
  curl -s --max-time 3 "$STUB" | awk 'NR==3 {print $1, $3}'
}

testid=${TESTID:-$(date -u +%Y%m%dT%H%M%SZ)-$SCENARIO-${VARIANT//+/_}}
mkdir -p "$RESULTS_ROOT"
dir=$RESULTS_ROOT/$testid
mkdir "$dir" 2>/dev/null || die "results directory $dir exists already: results are never overwritten (choose another TESTID)"

meta=$(jq -nc \
  --arg git "$(git -C "$IB_ROOT" describe --always --dirty 2>/dev/null || echo unknown)" \
  --arg k6 "$(k6 version 2>/dev/null | head -n1)" \
  --arg nginx "$(nginx -v 2>&1 | sed 's|.*/||')" \
  --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" \
  --arg knobs "$(variant_knob_files "$VARIANT" | sed "s|$IB_ROOT/||" | paste -sd' ')" \
  --arg backends "${LAB_BACKENDS:-2}" --arg platform "$PLATFORM" \
  --arg client_cpus "${CLIENT_CPUS_LIST:-all}" --arg server_cpus "${SERVER_CPUS_LIST:-n/a}" \
  '{git_revision: $git, tools: {k6: $k6, nginx: $nginx}, host: {cpus: $cpus, kernel: $kernel},
    knob_files: ($knobs | split(" ")), placement: {client_cpus: $client_cpus, server_cpus: $server_cpus}, lab_backends: (if $platform == "lab" then ($backends|tonumber) else null end)}')

before=$(stub)
set +e
# GODEBUG: k6 would negotiate HTTP/2 over TLS; the seeds measured HTTP/1.1.
"${RUN[@]}" env TESTID="$testid" CLIENT_CPUS="$CLIENT_CPUS" RESULTS_DIR="$dir" BENCH_META="$meta" GODEBUG=http2client=0 \
  k6 run --quiet --no-color "$IB_ROOT/k6/$SCENARIO.js" 2>"$dir/k6.log"
rc=$?
set -e
after=$(stub)

if [ $rc != 0 ] && [ $rc != 99 ]; then # 99: thresholds crossed, a finished run that failed
  # k6 stopped early (setup failed: target not ready): the one-line reason; files stay.
  reason=$(sed -n 's/.*level=error msg="\(Error: \)\{0,1\}\([^"]*\).*/\2/p' "$dir/k6.log" | sed 's/\\n.*//' | head -n1)
  die "k6 $SCENARIO did not finish (exit $rc): ${reason:-see $dir/k6.log}"
fi

if [ -n "$before" ] && [ -n "$after" ]; then
  read -r acc0 req0 <<<"$before"; read -r acc1 req1 <<<"$after"
  # The second stub_status read counts itself (the first one is inside $req0): minus one.
  jq --argjson req "$((req1 - req0 - 1))" --argjson acc "$((acc1 - acc0 - 1))" \
    '.server = {source: "nginx stub_status", requests: $req, connections_accepted: $acc,
                client_over_server: (if $req > 0 then .result.requests / $req else null end)}' \
    "$dir/summary.json" >"$dir/summary.json.new" && mv "$dir/summary.json.new" "$dir/summary.json"
  line=$(jq -r '"server        \(.server.requests) requests, \(.server.connections_accepted) connections counted by nginx (client/server \(.server.client_over_server * 1000 | round / 1000))"' "$dir/summary.json")
else
  line="server        no server-side count (no stub_status for this target)"
fi
echo "$line" | tee -a "$dir/summary.txt" >&2
say results "$dir/"
exit $rc
