#!/bin/bash
# Old engine (5dd33eb) against new (this checkout) and wrk, alternated in each round, on the
# lab's backend 1 from the client CPU alone: client CPU per request, rate, peak RSS.
# Usage: ab.sh CONNECTIONS ROUNDS OUT
set -u
C=$1 R=$2 OUT=$3
OLD=/root/.cache/ingress-bench/k6-v1.8.1-xk6-f5ad344c118f/k6
NEW=$(cd /work/main && export IB_CACHE=/root/.cache/ingress-bench && . bench/lib.sh && command -v k6)
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
  run old env TARGET=$URL ENGINE=native DURATION=6s CONNECTIONS="$C" RESULTS_DIR="$OUT/k/old$r" $OLD run --quiet --no-color /root/ibw/old/k6/rps.js
  run new env TARGET=$URL ENGINE=native DURATION=6s CONNECTIONS="$C" CLIENT_CPUS=1 RESULTS_DIR="$OUT/k/new$r" $NEW run --quiet --no-color /work/main/k6/rps.js
done
