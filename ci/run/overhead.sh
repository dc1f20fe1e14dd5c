#!/usr/bin/env bash
# ci/run/overhead.sh: what monitoring costs a run. The rps scenario with the whole stack off
# (Prometheus, exporters and sampler down, no remote write, no sidecars) and on, alternating
# ROUNDS times (off-on, then on-off: drift of a noisy machine falls on both); medians, and
# the cost in % of the off median. A benchmark: it prints what it measured and fails only
# when a run fails.
# Settings: PLATFORM (lab or local; the default platform, ci/lib.sh), VARIANT (the platform's default),
# DURATION (default 15s), CONNECTIONS (50), ROUNDS (5).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the overhead benchmark"
P=$(platform) || exit 1
D=${DURATION:-15s} C=${CONNECTIONS:-50} N=${ROUNDS:-5}
case "$P" in
  lab) V=${VARIANT:-seed002-nginx-lb-default}; variant_knob_files "$V" >/dev/null ;;
  local) V=${VARIANT:-$DEFAULT_OVERLAY}; need_overlay "$V" ;;
  *) die "PLATFORM must be lab or local for the overhead benchmark, got '$P'" ;;
esac
[[ $N =~ ^[1-9][0-9]?$ ]] || die "ROUNDS must be a whole number from 1 to 99, got '$N'"
# The scenario's own settings, checked before the first round takes monitoring down.
DURATION=$D CONNECTIONS=$C k6_validate rps
export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/overhead-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS_ROOT"

declare -A rps busy
run() { # MONITORING ROUND
  local m=$1 id=$P-monitoring$1-$2
  # Off means nothing of the stack runs, not only that this run ignores it.
  [ "$m" = 1 ] || PLATFORM=$P bash "$IB_ROOT/ci/platforms/monitoring/monitoring.sh" down >/dev/null
  local s=$RESULTS_ROOT/$id/summary.json err
  # bench checks DURATION and CONNECTIONS: its one-line error is this script's.
  err=$(PLATFORM=$P VARIANT=$V MONITORING=$m DURATION=$D CONNECTIONS=$C TESTID=$id bash "$IB_ROOT/ci/run/bench.sh" rps 2>&1 >/dev/null) ||
    die "$(sed -n 's/^error: //p' <<<"$err" | head -n1) (run $id)"
  local r; r=$(jq '.result.rps | round' "$s")
  rps[$m]+="$r "
  busy[$m]+="$(jq '.client.utilization * 100 | round' "$s") "
  echo "round $2, monitoring $([ "$m" = 1 ] && echo on || echo off): $r req/s" >&2
}
for i in $(seq "$N"); do
  if [ $((i % 2)) = 1 ]; then run 0 "$i"; run 1 "$i"; else run 1 "$i"; run 0 "$i"; fi
done
off=$(median "${rps[0]}") on=$(median "${rps[1]}")

echo
echo "monitoring on vs off: rps, $P, $V, $C connections × $D, median of $N alternating rounds; $(nproc) CPUs"
echo
echo "| monitoring | req/s (median) | runs | k6 CPU busy (median) |"
echo "|---|---|---|---|"
echo "| off | $off | ${rps[0]% } | $(median "${busy[0]}")% |"
echo "| on | $on | ${rps[1]% } | $(median "${busy[1]}")% |"
echo
echo "- cost of monitoring: $(calc %.1f "($off - $on) * 100 / $off")% of the req/s (target: at most 3%)"
echo "Results: $RESULTS_ROOT"
