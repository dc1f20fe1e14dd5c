#!/bin/bash
# Old engine (5dd33eb) against new (this checkout) and wrk, alternated in each round, on the
# lab's backend 1 from the client CPU alone: client CPU per request, rate, peak RSS.
# Usage: ab.sh CONNECTIONS ROUNDS OUT OLD_CHECKOUT (a checkout of the engine before, its
# ./task tools run: its k6 is the one its lib.sh finds); the new is this checkout's.
set -u
C=$1 R=$2 OUT=$3 OLD_ROOT=$(cd "$4" && pwd)
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
k6_of() { (cd "$1" && . bench/lib.sh && command -v k6); }
OLD=$(k6_of "$OLD_ROOT") NEW=$(k6_of "$ROOT")
URL=http://198.18.0.11
mkdir -p "$OUT"
served() { ip netns exec ibench-client curl -s $URL/stub_status | awk 'NR==3 {print $3}'; }
run() { # NAME CMD...
  local name=$1; shift
  local s0 s1; s0=$(served)
  /usr/bin/time -f '%e %U %S %M' -o "$OUT/t" ip netns exec ibench-client taskset -c 0 "$@" > "$OUT/o" 2> "$OUT/e"
  s1=$(served)
  read -r _ u s m < <(tail -n1 "$OUT/t")
  local n=$((s1 - s0 - 1))
  printf '%s %s %d %.2f %.0f %d\n' "$name" "$r" "$C" "$(echo "($u + $s) * 1000000 / $n" | bc -l)" "$(echo "$n / 6" | bc -l)" "$((m / 1024))" | tee -a "$OUT/runs.txt"
}
for r in $(seq "$R"); do
  run wrk wrk -t1 -c"$C" -d6s -H 'Host: bench.ingress.test' $URL/1kb.bin
  mkdir -p "$OUT/k"; rm -rf "$OUT/k"/*
  run old env TARGET=$URL ENGINE=native DURATION=6s CONNECTIONS="$C" RESULTS_DIR="$OUT/k/old$r" "$OLD" run --quiet --no-color "$OLD_ROOT/k6/rps.js"
  run new env TARGET=$URL ENGINE=native DURATION=6s CONNECTIONS="$C" CLIENT_CPUS=1 RESULTS_DIR="$OUT/k/new$r" "$NEW" run --quiet --no-color "$ROOT/k6/rps.js"
done
