#!/usr/bin/env bash
# ci/baseline.sh: the lab's reference numbers, printed as a Markdown table.
# The same LB, the same connections and the same CPU placement for wrk (the seeds' client)
# and k6 (ours): RPS, TPS, throughput, and what each costs the client in CPU per request.
# Then seed 004's keep-alive ratio. Settings: DURATION (default 10s), CONNECTIONS (50),
# VARIANT (the LB's knobs, default seed002-tuned: the seed's own tuned set).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "the baseline"
D=${DURATION:-10s} C=${CONNECTIONS:-50} V=${VARIANT:-seed002-tuned}
export PLATFORM=lab
export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/baseline-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS_ROOT"
VARIANT=$V "$IB_ROOT/ci/lab.sh" up
read -r CLIENT SERVER <<<"$(lab_cpus)"
THREADS=$(taskset -c "$CLIENT" nproc)
STUB=http://198.18.0.2:8080/stub_status # ci/lab.sh LB_IP, LB_STATUS_PORT
served() { stub_counts "$STUB" | cut -d' ' -f2; }

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); echo "$1 / $2: $3 req/s, $4 µs CPU/req, server agreement $6" >&2; }

wrk_run() { # NAME URL [wrk args...]: wrk pinned like k6, CPU measured the same way
  local name=$1 url=$2; shift 2
  local out s0 s1 t; s0=$(served)
  TIMEFORMAT='%R %U %S'
  { time ip netns exec ibench-client taskset -c "$CLIENT" wrk -t"$THREADS" -c"$C" -d"$D" \
      -H 'Host: bench.ingress.test' "$@" "$url" >"$RESULTS_ROOT/wrk-$name.txt" ; } 2>"$RESULTS_ROOT/wrk-$name.cpu"
  s1=$(served)
  local n rps wall user sys
  n=$(awk '/requests in/ {print $1}' "$RESULTS_ROOT/wrk-$name.txt")
  rps=$(awk '/Requests\/sec/ {printf "%.0f", $2}' "$RESULTS_ROOT/wrk-$name.txt")
  read -r wall user sys <"$RESULTS_ROOT/wrk-$name.cpu"
  # wrk counts completed responses; the server also counts requests in flight at the end.
  row "$name" "wrk 4.1 -t$THREADS -c$C" "$rps" "$(calc %.0f "($user + $sys) * 1000000 / $n")" \
    "$(calc %.0f%% "100 * ($user + $sys) / ($wall * $THREADS)")" "$(calc %.3f "$n / ($s1 - $s0 - 1)")"
}

k6_run() { # NAME SCENARIO [ENV=VALUE...]
  local name=$1 scenario=$2 id; shift 2
  id=k6-$(tr -c 'A-Za-z0-9\n' - <<<"$name")
  env "$@" VARIANT="$V" DURATION="$D" CONNECTIONS="$C" TESTID="$id" bash "$IB_ROOT/ci/bench.sh" "$scenario" >/dev/null 2>&1 || true
  local s=$RESULTS_ROOT/$id/summary.json
  [ -f "$s" ] || die "k6 $name wrote no summary: see $RESULTS_ROOT/$id/k6.log"
  row "$name" "k6 $K6_VERSION, $C VUs" "$(jq '.result.rps | round' "$s")" "$(jq '.client.cpu_us_per_request | round' "$s")" \
    "$(jq '.client.utilization * 100 | round' "$s")%" "$(jq '.server.client_over_server * 1000 | round / 1000' "$s")"
  [ "$scenario" = throughput ] && rows+=("| | throughput | $(jq '.result.gbit_per_s * 1000 | round / 1000' "$s") Gbit/s | | | |")
  return 0
}

wrk_run "rps http 1 KB" http://198.18.0.2/1kb.bin
k6_run "rps http 1 KB" rps
k6_run "rps https 1 KB" rps SCHEME=https
wrk_run "tps (Connection: close, 0 KB)" https://198.18.0.2/0kb.bin -H 'Connection: close'
k6_run "tps (Connection: close, 0 KB)" tps
wrk_run "throughput 1 MB" http://198.18.0.2/1mb.bin
k6_run "throughput 1 MB" throughput

# Seed 004: no client keep-alive (ab without -k); the LB the limit, as in the seed: servers
# share one CPU, the client may use all. Median of three alternations (this VM has steal).
declare -A ka=([default]="" [seed004-keepalive]="")
for i in 1 2 3; do
  for v in default seed004-keepalive; do
    VARIANT=$v NO_REUSE=1 DURATION=5s CONNECTIONS=50 LAB_CLIENT_CPUS=0-$(($(nproc) - 1)) LAB_SERVER_CPUS=$(($(nproc) - 1)) \
      TESTID="ka-$v-$i" bash "$IB_ROOT/ci/bench.sh" rps >/dev/null 2>&1 || true
    ka[$v]+="$(jq '.result.rps | round' "$RESULTS_ROOT/ka-$v-$i/summary.json") "
  done
done
ka_def=$(median "${ka[default]}") ka_tuned=$(median "${ka[seed004-keepalive]}")

echo
echo "Lab baseline: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), client on CPU $CLIENT, LB + $(cat /run/ingress-bench/lab/shape | cut -d' ' -f1) backends on CPU $SERVER; LB variant $V; $C connections × $D"
echo
echo "| measurement | client | req/s | client CPU µs/request | client CPU busy | client/server count |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Seed 004 keep-alive, no client keep-alive (k6 NO_REUSE=1, 50 connections, servers on one CPU): default ${ka_def} req/s, seed004-keepalive ${ka_tuned} req/s, ratio $(calc %.2f "$ka_tuned / $ka_def")x (medians of ${ka[default]}/ ${ka[seed004-keepalive]})"
echo "Results: $RESULTS_ROOT"
