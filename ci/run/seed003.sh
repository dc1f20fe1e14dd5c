#!/usr/bin/env bash
# ci/run/seed003.sh: seed 003's matrix on the local cluster, as Markdown tables like the seed's:
# the LB -> Pod, LB -> ClusterIP -> Pod and LB -> NodePort -> Pod paths (overlays
# seed003-lb-<path>-<n>pod[s]) with 1 and 10 backend pods and 4 KB / 100 KB responses, the rps
# scenario over keep-alive. Each round deploys every overlay in turn (so slow drifts of this
# VM hit every path alike); medians of ROUNDS. Settings: DURATION (10s), CONNECTIONS (50),
# ROUNDS (3). (bench.sh deploys each overlay; re-applying an unchanged one is a no-op.)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the seed 003 matrix"
D=${DURATION:-10s} C=${CONNECTIONS:-50} N=${ROUNDS:-3}
[[ $N =~ ^[1-9][0-9]?$ ]] || die "ROUNDS must be a whole number from 1 to 99, got '$N'"
export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/seed003-$(date -u +%Y%m%dT%H%M%SZ)}
export PLATFORM=local DURATION=$D CONNECTIONS=$C
PATHS="pods clusterip nodeport" PODS="1 10" SIZES="4kb 100kb"
overlay() { echo "seed003-lb-$1-$2pod$([ "$2" = 1 ] || echo s)"; }
PAYLOAD=4kb k6_validate rps
mkdir -p "$RESULTS_ROOT"

declare -A rps
for i in $(seq "$N"); do
  for p in $PATHS; do for n in $PODS; do
    for s in $SIZES; do
      id=$p-$n-$s-$i
      VARIANT=$(overlay "$p" "$n") PAYLOAD=$s TESTID=$id bash "$IB_ROOT/ci/run/bench.sh" rps >/dev/null 2>&1 ||
        die "run $id failed: see $RESULTS_ROOT/$id/"
      rps[$p-$n-$s]+="$(jq '.result.rps | round' "$RESULTS_ROOT/$id/summary.json") "
      echo "$(overlay "$p" "$n") $s round $i: $(jq '.result.rps | round' "$RESULTS_ROOT/$id/summary.json") req/s" >&2
    done
  done; done
done

m() { median "${rps[$1]}"; }
declare -A hops=([pods]="Pod" [clusterip]="ClusterIP -> Pod" [nodeport]="NodePort -> Pod")
echo
echo "Seed 003 on the local cluster: rps, keep-alive, $C connections × $D, median of $N rounds; $(nproc) CPUs"
for p in $PATHS; do
  echo
  echo "$(overlay "$p" N) (k6 -> nginx -> ${hops[$p]})"
  echo
  echo "| case | pods | payload | req/s (median) | runs | vs LB -> Pod |"
  echo "|---|---|---|---|---|---|"
  k=0; for n in $PODS; do for s in $SIZES; do
    k=$((k + 1))
    echo "| $k | $n | ${s^^} | $(m "$p-$n-$s") | ${rps[$p-$n-$s]% } | $(calc %.2f "$(m "$p-$n-$s") / $(m "pods-$n-$s")")x |"
  done; done
done
echo "Results: $RESULTS_ROOT"
