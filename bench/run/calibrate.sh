#!/usr/bin/env bash
# bench/run/calibrate.sh: k6's two engines against wrk, the client the seeds trusted.
# The same lab target, the same connections, each client in turn on the same single CPU
# (the servers on the others); per client: req/s, client CPU per request (user + system
# of the whole process), peak RSS, the ratios to wrk and the client/server count. Then the
# the native engine's open model (client native-open: RATE at OPEN_SHARE, 90 %, of the same
# round's native closed-model rate; the share of the slots it sent). Each case at each of
# the connection counts. The native engine's CPU profile of each case and count (pprof,
# k6's own profiling endpoint): its heaviest functions. Then the long-run checks of the
# native engine: CPU per request in minute 3 against minute 1 of a LONG run with the default
# thresholds, and peak RSS, at the first count and at LONG_CONNECTIONS.
# A benchmark: it prints what it measured (Markdown tables, also RESULTS_ROOT/result.md) and
# fails only when a run does.
# The HTTP/2 cases (h2c-1kb-mN to a backend's cleartext port, h2-1kb-mN to the LB over TLS, N
# streams per connection) compare the native engine with h2load, the reference HTTP/2 client.
# Settings: DURATION (15s), CONNECTION_COUNTS (50 200 1000; CONNECTIONS: that one alone),
# VARIANT (full+http2), CASES (all of the registry's),
# CLIENTS (wrk js native native-open), OPEN_RATE (native-open's rate; 90 % of native's), ROUNDS (3),
# LONG (180s; 0 skips the long runs),
# LONG_CONNECTIONS (1000).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the calibration"
# The registry's values and calibrate's own defaults (bench/settings/settings.yaml), checked there.
D=$(setting DURATION calibrate)
COUNTS=$(setting CONNECTIONS calibrate)
[ -n "$COUNTS" ] || COUNTS=$(setting CONNECTION_COUNTS)
V=$(setting VARIANT calibrate)
CASES=$(setting CASES)
CLIENTS=$(setting CLIENTS)
LONG=$(setting LONG)
LC=$(setting LONG_CONNECTIONS)
R=$(setting ROUNDS calibrate)
OPEN_SHARE=0.9 # the open model's cost measured where it still keeps up: 90 % of the closed model's rate
OPEN_RATE=$(setting OPEN_RATE) # or at this rate
[[ " $CLIENTS " != *" native-open "* ]] || [ -n "$OPEN_RATE" ] || [[ " ${CLIENTS%% native-open*} " == *" native "* ]] ||
  die "CLIENTS: native-open paces a share of the native closed model's rate: list native before it"
# calibrate's own rule: whole seconds (its Gbit/s and the long run's minutes are counted so)
secs() { [[ $1 =~ ^([1-9][0-9]*)s$ ]] || die "$2 must be whole seconds like 15s, got '$1'"; echo "${BASH_REMATCH[1]}"; }
dsecs=$(secs "$D" DURATION)
[ "$LONG" = 0 ] || { lsecs=$(secs "$LONG" LONG); [ "$lsecs" -ge 150 ] || die "LONG must be at least 150s (minute 1 against minute 3), got '$LONG'"; }
variant_knob_files "$V" >/dev/null
command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run './task tools'"
k6 version | grep -q 'k6/x/ingressbench' || die "this k6 lacks the native engine (k6/x/ingressbench): run './task tools'"

export RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results/calibrate-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS_ROOT"
# The lab through its driver (bench/platforms/drivers/lab.sh), without monitoring: the
# calibration measures the clients alone. Its own targets, never a TARGET given.
# shellcheck disable=SC2034 # read by the driver sourced below
PLATFORM=lab VARIANT=$V MONITORING=0
unset TARGET
. "$IB_ROOT/bench/platforms/drivers/lab.sh"
pf_check rps
pf_up rps
CPU=${CLIENT_CPU_LIST%%[-,]*} # one core: a per-request cost, not how well a client spreads
# The target: plain HTTP goes to a backend itself (nginx serving from memory, no proxy hop),
# so the client, not the server's core, is the limit; TLS to the LB, the lab's TLS endpoint.
# Each is counted by its own stub_status (bench/platforms/lab.env).
BACKEND=http://$(lab_backend_ip 1) BACKEND_STUB=http://$(lab_backend_ip 1)/stub_status BACKEND_H2C=http://$(lab_backend_ip 1):81
LB=https://$LAB_LB_IP LB_STUB=$LAB_STUB
served() { stub_counts "$STUB" | cut -d' ' -f2; }
CLIENT=(ip netns exec "$LAB_CLIENT_NS" taskset -c "$CPU")

# The handshake cases: a new connection per request, each case's TLS as k6's settings ask it
# (TLS_VERSION, TLS_GROUP, TLS_RESUMPTION) and as wrk's OpenSSL is held to it. "-" for wrk: it
# cannot. Its OpenSSL 3.0 has no ML-KEM group, and on TLS 1.3 it resumes every session by the
# server's tickets whatever its options say (the LB's log shows it), so a full TLS 1.3
# handshake per connection has no wrk row while the LB gives tickets.
# case                     k6 settings                                         wrk: protocol, group, tickets
TLS_CASES="tls-handshakes          TLS_VERSION=1.2                                     TLSv1.2 X25519 off
tls13-handshakes        TLS_VERSION=1.3                                     - - -
tls13-p256-handshakes   TLS_VERSION=1.3,TLS_GROUP=p256                      - - -
tls13-hybrid-handshakes TLS_VERSION=1.3,TLS_GROUP=x25519mlkem768            - - -
tls12-resumed           TLS_VERSION=1.2,TLS_RESUMPTION=tickets              TLSv1.2 X25519 on
tls13-resumed           TLS_VERSION=1.3,TLS_RESUMPTION=tickets              TLSv1.3 X25519 on
tls12-session-id        -                                                   TLSv1.2 X25519 off"
tls_case() { awk -v c="$1" '$1 == c' <<<"$TLS_CASES"; }
# The LB's knobs the TLS cases depend on: its certificate (the ecdsa knob: wrk then asks the
# seed's cipher's ECDSA twin, as k6 offers both) and its session cache (tls12-session-id: wrk
# resumes by session ID, which Go's client cannot, so that case has no k6 row).
knob() { grep -h "^$1=" $(variant_knob_files "$V") | tail -n1 | cut -d= -f2-; }
CIPHER=ECDHE-RSA-AES256-GCM-SHA384; [ "$(knob CERT)" != ecdsa ] || CIPHER=ECDHE-ECDSA-AES256-GCM-SHA384
[[ " $CASES " != *" tls12-session-id "* ]] || [ -n "$(knob SSL_SESSION_CACHE)" ] ||
  die "CASES: tls12-session-id needs the LB's session cache: VARIANT=$V+session-ids"
# wrk speaks what OpenSSL offers (TLS 1.3 here); held to each case's protocol and group (and
# on TLS 1.2 to the seed's cipher), as k6 is (k6/lib/options.js), so both pay for the same
# handshake. wrk keeps each connection's session and resumes it with nginx's tickets (on by
# default): without them every request pays a full handshake, as the tps scenario asserts
# for k6.
wrk_openssl() { # CASE: the OpenSSL configuration wrk runs the case with
  local f=$RESULTS_ROOT/wrk-$1.cnf proto group tickets
  read -r _ _ proto group tickets < <(tls_case "$1")
  [ "$1" != https-1kb ] || { proto=TLSv1.2 group=X25519 tickets=off; }
  [ "$group" != X25519 ] || group=X25519:P-256 # as k6's x25519 offers: an ECDSA certificate's curve listed
  printf '%s\n' "openssl_conf = ib" "[ib]" "ssl_conf = ib_ssl" "[ib_ssl]" "system_default = ib_tls" "[ib_tls]" \
    "MinProtocol = $proto" "MaxProtocol = $proto" "Groups = $group" "CipherString = $CIPHER" \
    "Options = $([ "$tickets" = on ] && echo SessionTicket || echo -SessionTicket)" >"$f"
  echo "$f"
}

# measure ID CMD...: runs CMD as the pinned client under GNU time; sets CPU_S RSS_KB and
# SERVED (requests nginx counted meanwhile, minus the second stub read itself). With pprof_to
# set, a CPU profile of the middle of the run from k6's profiling endpoint goes there.
pprof_to=
measure() {
  local id=$1 s0 s1 rc=0; shift
  s0=$(served)
  /usr/bin/time -f '%e %U %S %M' -o "$RESULTS_ROOT/$id.time" "${CLIENT[@]}" "$@" >"$RESULTS_ROOT/$id.out" 2>"$RESULTS_ROOT/$id.log" &
  local job=$!
  if [ -n "$pprof_to" ]; then # from 2 s in (setup, the connections) for half the load
    sleep 2
    ip netns exec "$LAB_CLIENT_NS" curl -sf -o "$pprof_to" "http://$K6_API/debug/pprof/profile?seconds=$((dsecs / 2))" ||
      say calibrate "$id: no CPU profile from k6's endpoint"
  fi
  wait "$job" || rc=$?
  s1=$(served)
  [ $rc = 0 ] || [ $rc = 99 ] || die "$id failed (exit $rc): $(tail -n1 "$RESULTS_ROOT/$id.log")"
  local user sys; read -r _ user sys RSS_KB < <(tail -n1 "$RESULTS_ROOT/$id.time")
  CPU_S=$(calc %.3f "$user + $sys") SERVED=$((s1 - s0 - 1))
}

# Each run's figures, by "CASE/CLIENT": the table shows the median of the ROUNDS runs; every
# run is also a line of runs.jsonl (bench:evidence's calibration claims read the rounds' ratios).
declare -A RPS US RSS AGREE GBIT SENT
record() { # CASE CLIENT REQUESTS RPS [GBIT] (at $C connections)
  local k=$1/$C/$2 us; us=$(calc %.2f "$CPU_S * 1000000 / $3")
  RPS[$k]+="$4 " US[$k]+="$us " RSS[$k]+="$((RSS_KB / 1024)) " AGREE[$k]+="$(calc %.4f "$3 / $SERVED") " GBIT[$k]+="${5:-} "
  jq -nc --arg case "$1" --arg client "$2" --argjson connections "$C" --argjson round "$ROUND" --argjson requests "$3" --argjson rps "$4" \
    --argjson us "$us" --argjson rss "$((RSS_KB / 1024))" --argjson served "$SERVED" \
    '{case: $case, client: $client, connections: $connections, round: $round, requests: $requests, rps: $rps, cpu_us_per_request: $us,
      peak_rss_mib: $rss, served: $served}' >>"$RESULTS_ROOT/runs.jsonl"
  echo "$1 / $C / $2: $(calc %.0f "$4") req/s, $us µs CPU/request, $((RSS_KB / 1024)) MiB peak, client/server $(calc %.4f "$3 / $SERVED")" >&2
}

wrk_case() { # CASE ROUND URL [wrk args]
  local case=$1 id=$1-$C-wrk-$2 url=$3; shift 3
  measure "$id" env OPENSSL_CONF="$(wrk_openssl "$case")" wrk -t1 -c"$C" -d"$D" -H 'Host: bench.ingress.test' "$@" "$url"
  local f=$RESULTS_ROOT/$id.out n
  n=$(awk '/requests in/ {print $1}' "$f")
  ! grep -q 'Non-2xx\|Socket errors' "$f" || die "wrk saw errors in $id: $(grep 'Non-2xx\|Socket errors' "$f")"
  record "$case" wrk "$n" "$(awk '/Requests\/sec/ {print $2}' "$f")" \
    "$([ "$case" = throughput-1mb ] && calc %.2f "$n * 1048576 * 8 / ($dsecs * 1e9)")"
}

# h2load, the HTTP/2 reference client (nghttp2), in wrk's place for the HTTP/2 cases: its
# -m streams per connection as the case's name says (h2c-1kb-m10: 10); over TLS, 1.3 with
# X25519 and AES-128-GCM, what Go's client negotiates with nginx.
h2load_case() { # CASE ROUND URL
  local case=$1 id=$1-$C-h2load-$2 url=$3 f n
  measure "$id" h2load -t1 -c"$C" -m"${case##*-m}" -D"$dsecs" --groups=X25519 --tls13-ciphers=TLS_AES_128_GCM_SHA256 \
    -H ':authority: bench.ingress.test' "$url"
  f=$RESULTS_ROOT/$id.out
  n=$(awk '/^requests:/ {print $8}' "$f") # succeeded (in-flight at the end: started, not done, not counted)
  [ "${n:-0}" -gt 0 ] && grep -q '^requests: .* 0 failed, 0 errored, 0 timeout$' "$f" && grep -q '^status codes: .* 0 3xx, 0 4xx, 0 5xx$' "$f" ||
    die "h2load saw errors in $id: $(grep -E '^(requests|status codes):' "$f" | tr '\n' ' ')"
  ! grep -q '^Application protocol:' "$f" || grep -q '^Application protocol: h2' "$f" || die "h2load did not negotiate h2 in $id"
  record "$case" h2load "$n" "$(awk '/^finished in/ {print $4}' "$f")"
}

k6_case() { # CASE ROUND CLIENT SCENARIO [ENV=VALUE...]
  local case=$1 client=$3 scenario=$4 id=$1-$C-$3-$2 rate='' pprof=''; shift 4
  if [ "$client" = native-open ] && [ -n "$OPEN_RATE" ]; then
    rate=$OPEN_RATE
  elif [ "$client" = native-open ]; then # this round's native closed-model rate, the last recorded
    local closed=${RPS[$case/$C/k6 native]% }
    rate=$(calc %.0f "$OPEN_SHARE * ${closed##* }")
  fi
  mkdir "$RESULTS_ROOT/$id"
  # The native engine's profile in the first round, each model's (CLIENT_CPUS: k6 has the one CPU).
  case "$client/$ROUND" in
    native/1) pprof=$RESULTS_ROOT/profiles/$case-$C.pprof ;;
    native-open/1) pprof=$RESULTS_ROOT/profiles/$case-$C-open.pprof ;;
  esac
  # k6/http held to HTTP/1.1 as wrk is (the LB offers h2), by k6's own switch.
  local http1=''; [ "$client" != js ] || http1=GODEBUG=http2client=0
  pprof_to=$pprof measure "$id" env "$@" ${rate:+RATE=$rate} TARGET="$BASE" ENGINE="${client%-open}" DURATION="$D" CONNECTIONS="$C" $http1 \
    CLIENT_CPUS=1 TESTID="$id" RESULTS_DIR="$RESULTS_ROOT/$id" \
    k6 run --quiet --no-color ${pprof:+--profiling-enabled --address "$K6_API"} "$IB_ROOT/k6/$scenario.js"
  local s=$RESULTS_ROOT/$id/summary.json
  [ "$(jq '.result.errors' "$s")" = 0 ] || die "$id had $(jq '.result.errors' "$s") failed requests"
  # The open model's slots sent (setup's readiness GET aside), of RATE x DURATION.
  [ -z "$rate" ] || SENT[$case/$C/k6 $client]+="$(calc %.4f "($(jq '.result.requests' "$s") - 1) / ($rate * $dsecs)") "
  record "$case" "k6 $client" "$(jq '.result.requests' "$s")" "$(jq '.result.rps' "$s")" \
    "$([ "$scenario" = throughput ] && jq '.result.gbit_per_s * 100 | round / 100' "$s")"
}

# The whole calibration is one load (bench/lib/k6.sh load_lock): no other run's load beside it.
load_lock
mkdir -p "$RESULTS_ROOT/profiles"
K6_API=127.0.0.1:6565 # k6's REST API in the client's namespace: its profiling endpoint
# Rounds outside, counts and clients inside: a drift of this shared machine falls on every client.
for round in $(seq "$R"); do
  ROUND=$round
  for C in $COUNTS; do
    for case in $CASES; do
      case "$case" in
        http-1kb|throughput-1mb) BASE=$BACKEND STUB=$BACKEND_STUB ;;
        h2c-*) BASE=$BACKEND_H2C STUB=$BACKEND_STUB ;;
        *) BASE=$LB STUB=$LB_STUB ;;
      esac
      for client in $CLIENTS; do
        case "$case/$client" in
          h2*/wrk) h2load_case "$case" "$round" "$BASE/1kb.bin" ;;
          h2*/js|h2*/native-open) ;; # HTTP/2 is the native engine's, closed model
          h2c-*/native) k6_case "$case" "$round" native rps HTTP_VERSION=2 STREAMS="${case##*-m}" ;;
          h2-*/native) k6_case "$case" "$round" native rps HTTP_VERSION=2 STREAMS="${case##*-m}" SCHEME=https TLS_VERSION=1.3 ;;
          http-1kb/wrk|https-1kb/wrk) wrk_case "$case" "$round" "$BASE/1kb.bin" ;;
          tls*/wrk) [ "$(tls_case "$case" | awk '{print $3}')" = - ] || wrk_case "$case" "$round" "$BASE/0kb.bin" -H 'Connection: close' ;;
          throughput-1mb/wrk) wrk_case "$case" "$round" "$BASE/1mb.bin" ;;
          http-1kb/*) k6_case "$case" "$round" "$client" rps ;;
          https-1kb/*) k6_case "$case" "$round" "$client" rps SCHEME=https ;;
          tls12-session-id/*) ;; # Go's client resumes by tickets only
          tls*/js) [[ $(tls_case "$case" | awk '{print $2}') != *TLS_GROUP* && $(tls_case "$case" | awk '{print $2}') != *TLS_RESUMPTION* ]] &&
            k6_case "$case" "$round" "$client" tps $(tls_case "$case" | awk '{gsub(",", " ", $2); print $2}') || true ;;
          tls*/*) # shellcheck disable=SC2046 # the case's settings, one word each
            k6_case "$case" "$round" "$client" tps $(tls_case "$case" | awk '{gsub(",", " ", $2); print $2}') ;;
          throughput-1mb/*) k6_case "$case" "$round" "$client" throughput ;;
        esac
      done
    done
  done
done

rows=()
for C in $COUNTS; do
  for case in $CASES; do
    ref=wrk; [[ $case != h2* ]] || ref=h2load # the reference client: h2load in wrk's place on HTTP/2
    for client in $CLIENTS; do
      k=$case/$C/$client; [ "$client" = wrk ] && k=$case/$C/$ref || k="$case/$C/k6 $client"
      [ -n "${RPS[$k]:-}" ] || continue # a client that cannot run the case (wrk: ML-KEM; k6/http: a group alone, resumption)
      rps=$(median "${RPS[$k]}") us=$(median "${US[$k]}") vs_cpu=- vs_rps=-
      if [ "$client" != wrk ] && [ -n "${US[$case/$C/$ref]:-}" ]; then
        vs_cpu=$(calc %.2f× "$us / $(median "${US[$case/$C/$ref]}")") vs_rps=$(calc %.0f%% "100 * $rps / $(median "${RPS[$case/$C/$ref]}")")
      fi
      g=$(median "${GBIT[$k]}" || true) # only throughput has one
      sent=$(median "${SENT[$k]:-}" || true) # only the open model has one
      [ -z "$sent" ] || sent="$(calc %.2f%% "100 * $sent") of RATE × DURATION sent at $([ -n "$OPEN_RATE" ] && echo "$OPEN_RATE/s" || echo "$(calc %.0f%% "100 * $OPEN_SHARE") of native closed")"
      rows+=("| $case | $C | ${k##*/} | $(calc %.0f "$rps") | $us | $vs_cpu | $vs_rps | $(median "${RSS[$k]}") | $(median "${AGREE[$k]}") | ${g:+$g Gbit/s}${g:+${sent:+; }}$sent |")
    done
  done
done

# What the native engine spent its CPU on: each profile's heaviest functions, by their own
# share of the profile (system calls, which wrk pays too, are linux.Syscall6).
profiles=()
if command -v go >/dev/null; then
  for f in "$RESULTS_ROOT"/profiles/*.pprof; do
    [ -s "$f" ] || continue
    go tool pprof -top -nodecount=8 "$(command -v k6)" "$f" 2>/dev/null >"${f%.pprof}.txt" || continue
    # its lines: flat, flat%, sum%, cum, cum%, the function
    top=$(awk '/^ *[0-9.]+(ms|s|us|µs) +[0-9.]+%/ { fn = $6; for (i = 7; i <= NF; i++) fn = fn " " $i
      sub(/^.*\//, "", fn); printf "%s%s %s", sep, fn, $2; sep = ", " }' "${f%.pprof}.txt")
    profiles+=("| $(basename "${f%.pprof}") | $top |")
  done
fi

# The long runs (native engine, rps): k6's CPU per request in minute 1 and in minute 3, from
# its /proc counters and nginx's, with the default latency thresholds evaluated all along.
long=()
if [ "$LONG" != 0 ]; then
  STUB=$BACKEND_STUB tick=$(getconf CLK_TCK)
  k6_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  window() { # PID SECONDS: k6's CPU µs per request nginx served over the next SECONDS
    local a b r0 r1; a=$(k6_ticks "$1"); r0=$(served); sleep "$2"; b=$(k6_ticks "$1"); r1=$(served)
    calc %.2f "($b - $a) * 1000000 / $tick / ($r1 - $r0 - 1)"
  }
  long_run() { # CONNECTIONS: one run, one row of the long-run table
    local id=long-$1 pid='' m1 m3 rss reqs
    mkdir "$RESULTS_ROOT/$id"
    "${CLIENT[@]}" /usr/bin/time -f '%e %U %S %M' -o "$RESULTS_ROOT/$id.time" \
      env TARGET="$BACKEND" ENGINE=native DURATION="$LONG" CONNECTIONS="$1" CLIENT_CPUS=1 TESTID="$id" RESULTS_DIR="$RESULTS_ROOT/$id" \
      k6 run --quiet --no-color "$IB_ROOT/k6/rps.js" >"$RESULTS_ROOT/$id.out" 2>"$RESULTS_ROOT/$id.log" &
    local job=$!
    # This k6: the child of the job's GNU time (ip netns exec and taskset exec into it), never
    # the newest k6 on the host, which may be anyone's.
    poll 10 pgrep -P "$job" -x k6 || true
    pid=$(pgrep -P "$job" -x k6) || die "$id: k6 did not start: $(tail -n1 "$RESULTS_ROOT/$id.log")"
    sleep 5 # setup and the first connections
    m1=$(window "$pid" 60)
    sleep $((lsecs - 5 - 60 - 60 - 5))
    m3=$(window "$pid" 60)
    wait "$job" || [ $? = 99 ] || die "$id failed: $(tail -n1 "$RESULTS_ROOT/$id.log")"
    read -r _ _ _ rss < <(tail -n1 "$RESULTS_ROOT/$id.time")
    reqs=$(jq '.result.requests' "$RESULTS_ROOT/$id/summary.json")
    long+=("| native, $1 connections, $LONG | $(calc %.0f "$reqs / $lsecs") | $m1 | $m3 | $(calc %+.1f%% "100 * ($m3 - $m1) / $m1") | $(calc %.0f "$rss / 1024") |")
  }
  long_run "${COUNTS%% *}"
  long_run "$LC"
fi

tables() {
  echo "Calibration: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); client on CPU $CPU alone, servers on CPU $SERVER_CPU_LIST (plain HTTP: backend 1 directly; TLS: the LB, $V); ${COUNTS// /, } connections × $D, medians of $R rounds; $(k6 version | head -n1 | cut -d' ' -f1-2), wrk $(dpkg-query -W -f='${Version}' wrk), h2load $(dpkg-query -W -f='${Version}' nghttp2-client); $(date -u +%Y-%m-%d)"
  echo
  echo "| case | connections | client | req/s | client CPU µs/request | CPU vs wrk (HTTP/2: h2load) | req/s vs wrk (h2load) | peak RSS MiB | client/server count | |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  if [ ${#profiles[@]} -gt 0 ]; then
    echo
    echo "| native engine's CPU profile (round 1, half the load; -open: the open model) | heaviest functions, their own share |"
    echo "|---|---|"
    printf '%s\n' "${profiles[@]}"
  fi
  if [ ${#long[@]} -gt 0 ]; then
    echo
    echo "| long run (rps, default thresholds) | req/s | minute 1 µs/request | minute 3 µs/request | change | peak RSS MiB |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${long[@]}"
  fi
}
echo
tables | tee "$RESULTS_ROOT/result.md"
echo "Results: $RESULTS_ROOT"
