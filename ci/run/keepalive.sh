#!/usr/bin/env bash
# ci/run/keepalive.sh: seed 004's keep-alive ratio on the lab: the rps scenario without client
# keep-alive (ab without -k), the LB with its default knobs and with seed004-keepalive, the
# LB the limit as in the seed (servers on one CPU, the client on all); medians of three
# alternations (this VM has steal). wrk against k6 is ci/run/calibrate.sh.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the keep-alive comparison"
export PLATFORM=lab
export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/keepalive-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS_ROOT"
declare -A ka=([default]="" [seed004-keepalive]="")
for i in 1 2 3; do
  for v in default seed004-keepalive; do
    VARIANT=$v NO_REUSE=1 DURATION=5s CONNECTIONS=50 LAB_CLIENT_CPUS=0-$(($(nproc) - 1)) LAB_SERVER_CPUS=$(($(nproc) - 1)) \
      TESTID="ka-$v-$i" bash "$IB_ROOT/ci/run/bench.sh" rps >/dev/null 2>&1 || true
    ka[$v]+="$(jq '.result.rps | round' "$RESULTS_ROOT/ka-$v-$i/summary.json") "
  done
done
ka_def=$(median "${ka[default]}") ka_tuned=$(median "${ka[seed004-keepalive]}")

echo "Seed 004 keep-alive, no client keep-alive (k6 NO_REUSE=1, 50 connections, servers on one CPU): default ${ka_def} req/s, seed004-keepalive ${ka_tuned} req/s, ratio $(calc %.2f "$ka_tuned / $ka_def")x (medians of ${ka[default]}/ ${ka[seed004-keepalive]})"
echo "Results: $RESULTS_ROOT"
