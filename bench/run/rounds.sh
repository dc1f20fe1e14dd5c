#!/usr/bin/env bash
# bench/run/rounds.sh SCENARIO: `./task bench:rps` (tps, throughput). ROUNDS runs of bench.sh
# on one deploy and one ingress share, each a whole run with its own verdict, then their median
# and its interval (bench/report/rounds.py): one run's figure moves with the host's moment.
# ROUNDS=1: one bench.sh run as it is. Results: $RESULTS_ROOT/<testid>/, each round in
# <testid>-r<i>/ (a run of its own: the index and the pages read it as one), rounds.json and
# summary.txt beside them.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

SCENARIO=${1:-}
need_scenario "$SCENARIO"
rounds=$(setting ROUNDS rounds)
[ "$rounds" != 1 ] || exec bash "$IB_ROOT/bench/run/bench.sh" "$SCENARIO"
setting VARIANT >/dev/null
setting TESTID >/dev/null
# Each round a steady window long (10 s: the signals average from 8 s in), unless DURATION says;
# on an ingress you run, as long as its Prometheus's scrape interval needs for one (each round's
# bench.sh decides, bench/lib/existing.sh existing_up): 10 s there held no steady window.
if [ -n "${DURATION:-}" ] || [ -z "${INGRESS_PODS:-}" ]; then
  DURATION=$(setting DURATION rounds)
  export DURATION
fi
RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results}
testid=$(run_testid "$SCENARIO")
dir=$RESULTS_ROOT/$testid
need_new_results_dir "$dir"

# A signal (Ctrl-C) reaches the round's bench.sh too, which stops its load and keeps what it
# measured: no round after it, and the rounds so far are summed up.
interrupted=''
trap 'interrupted=SIGINT' INT
trap 'interrupted=SIGTERM' TERM
exits=()
for i in $(seq "$rounds"); do
  # (Round 1's bad settings are its one line: nothing said before it.)
  [ "$i" = 1 ] || say rounds "round $i of $rounds"
  rc=0
  RESULTS_ROOT=$dir TESTID=$testid-r$i bash "$IB_ROOT/bench/run/bench.sh" "$SCENARIO" || rc=$?
  exits+=("$rc")
  [ -z "$interrupted" ] || break
  # The share the first round's probe chose or checked (the cluster's, kept): the later rounds
  # take it without a check of their own (3 s and a run's setup each).
  if [ "$i" = 1 ] && [ -d "$dir/$testid-r1" ]; then
    IB_SHARE_CHECKED=$(jq -r '.ingress_budget | select(.source == "probe" or .source == "kept") | .ingress_cpu // empty' \
      "$dir/$testid-r1/meta.json" 2>/dev/null || true)
    export IB_SHARE_CHECKED
    # An ingress you run: its TARGET was checked to be the ingress INGRESS_PODS names (20
    # requests and a scrape's wait, bench/lib/existing.sh existing_target) once, by round 1.
    [ -z "${INGRESS_PODS:-}" ] || export IB_TARGET_CHECKED=1
  fi
  # 99: the round's thresholds crossed (a finished run); anything else stops the rounds.
  case $rc in 0 | 99) ;; *) break ;; esac
done
# Round 1 refused its settings or failed before its load: it said why, and nothing was made.
[ -d "$dir" ] || exit "${exits[0]}"
aborted=(); [ -z "$interrupted" ] || aborted=(--aborted "$interrupted")
"$IB_VENV/bin/python" "$IB_ROOT/bench/report" rounds "$dir" --exits "${exits[@]}" "${aborted[@]}" || exit 1
say results "$dir/ (rounds.json, summary.txt; each round's report in its own directory)"
case $interrupted in SIGINT) exit 130 ;; SIGTERM) exit 143 ;; esac
# The worst round's exit: an error (1) over crossed thresholds (99) over a pass.
worst=0
for rc in "${exits[@]}"; do
  if [ "$rc" != 0 ] && { [ "$worst" = 0 ] || [ "$worst" = 99 ]; }; then worst=$rc; fi
done
exit "$worst"
