#!/usr/bin/env bash
# `task dashboard`: the live page's view of the last run (RUN=results/<id> for another one):
# its address, opened with $BROWSER when that is set. The run's Prometheus serves the page.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
root=${RESULTS_ROOT:-$IB_ROOT/results}
run=${RUN:-$(find "$root" -mindepth 2 -maxdepth 2 -name live.url -printf '%h\n' 2>/dev/null | sort | tail -n1)}
[ -n "$run" ] || die "no run under $root has a live page: ./task bench:rps (monitoring on) makes one"
[ -f "$run/live.url" ] || die "$run has no live page (a run with monitoring off, or on a Prometheus that does not serve it)"
url=$(cat "$run/live.url")
prom=${url%%/user/*}
curl -fsS -o /dev/null --max-time 2 "$prom/-/ready" 2>/dev/null ||
  die "the run's Prometheus ($prom) does not answer: './task monitoring:up' serves the page again, with the run's series while they are retained"
say dashboard "$url"
[ -z "${BROWSER:-}" ] || { "$BROWSER" "$url" >/dev/null 2>&1 & }
