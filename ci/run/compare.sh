#!/usr/bin/env bash
# ci/run/compare.sh: the platform comparisons of seeds 001 and 003/004, as a Markdown table.
# The rps scenario with the same connections and duration on: the bare-metal lab and the
# local cluster with the same nginx-lb overlays (one set of knob files), and the backends'
# NodePort with no ingress. Each run alternates ROUNDS times; medians reported.
# Settings: DURATION (default 10s), CONNECTIONS (50), ROUNDS (3).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the comparison"
D=${DURATION:-10s} C=${CONNECTIONS:-50} N=${ROUNDS:-3}
export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/compare-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS_ROOT"

CASES="lab:seed002-nginx-lb-default lab:seed002-nginx-lb-tuned local:seed002-nginx-lb-default local:seed002-nginx-lb-tuned local:seed003-nodeport-direct"
declare -A rps cpu place
for i in $(seq "$N"); do
  for c in $CASES; do
    id=${c/:/-}-$i
    PLATFORM=${c%%:*} VARIANT=${c#*:} DURATION=$D CONNECTIONS=$C TESTID=$id bash "$IB_ROOT/ci/run/bench.sh" rps >/dev/null 2>&1 ||
      die "run $c failed: see $RESULTS_ROOT/$id/"
    s=$RESULTS_ROOT/$id/summary.json
    rps[$c]+="$(jq '.result.rps | round' "$s") "
    cpu[$c]+="$(jq '.client.utilization * 100 | round' "$s") "
    place[$c]=$(jq -r '"client CPU \(.placement.client_cpus), server CPU \(.placement.server_cpus)"' "$RESULTS_ROOT/$id/meta.json")
    echo "$c round $i: $(jq '.result.rps | round' "$s") req/s" >&2
  done
done
ratio() { calc %.2f "$1 / $2"; }

echo
echo "rps, 1 KB keep-alive, $C connections × $D, median of $N alternating rounds; $(nproc) CPUs"
echo
echo "| platform | variant | req/s (median) | runs | k6 CPU busy | placement |"
echo "|---|---|---|---|---|---|"
for c in $CASES; do
  echo "| ${c%%:*} | ${c#*:} | $(median "${rps[$c]}") | ${rps[$c]% } | $(median "${cpu[$c]}")% | ${place[$c]} |"
done
m() { median "${rps[$1]}"; }
echo
echo "- bare metal vs Kubernetes (seed 001), default knobs: $(ratio "$(m local:seed002-nginx-lb-default)" "$(m lab:seed002-nginx-lb-default)")x; seed002-tuned: $(ratio "$(m local:seed002-nginx-lb-tuned)" "$(m lab:seed002-nginx-lb-tuned)")x"
echo "- ingress vs NodePort (seeds 003/004): nginx-lb default $(ratio "$(m local:seed002-nginx-lb-default)" "$(m local:seed003-nodeport-direct)")x, tuned $(ratio "$(m local:seed002-nginx-lb-tuned)" "$(m local:seed003-nodeport-direct)")x of the NodePort's req/s"
echo "- tuned vs default: lab $(ratio "$(m lab:seed002-nginx-lb-tuned)" "$(m lab:seed002-nginx-lb-default)")x, cluster $(ratio "$(m local:seed002-nginx-lb-tuned)" "$(m local:seed002-nginx-lb-default)")x"
echo "Results: $RESULTS_ROOT"
