#!/usr/bin/env bash
# `task report`: the report of one run (RUN), its series fetched first when PROMETHEUS_URL
# is given, or the comparison of several (RUNS). The package bench/report does the work.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
# shellcheck disable=SC2086 # RUNS is a list of directories
if [ -n "${RUNS:-}" ]; then exec python "$IB_ROOT/bench/report" index $RUNS; fi
[ -n "${RUN:-}" ] || die "name the run: ./task report RUN=results/<id> (or RUNS='dir...' for several)"
[ -z "${PROMETHEUS_URL:-}" ] || python "$IB_ROOT/bench/report" fetch "$RUN" --prometheus "$PROMETHEUS_URL"
python "$IB_ROOT/bench/report" render "$RUN"
