# A run's client and server side: k6's own checks, durations, the host's description, nginx's counts.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# k6_validate SCENARIO: check the k6 settings in the environment with the scenario's own
# config code (k6/lib/config.js), before anything starts: one source of truth for defaults
# and rules. k6 reports a thrown Error as a log line; only its message is kept.
k6_validate() {
  local out msg
  if ! out=$(k6 inspect --include-system-env-vars --execution-requirements "$IB_ROOT/k6/$1.js" 2>&1 >/dev/null); then
    msg=$(printf '%s\n' "$out" | sed -n 's/.*Error: \(.*\)/\1/p' | sed 's/\\n.*//; s/" *$//; s/ at \(file:\|[A-Za-z_.$]* (\).*//; s/\\\\/\\/g' | head -n1)
    die "${msg:-k6 rejected the scenario: $(printf '%s' "$out" | head -n1)}"
  fi
}

# k6_error_line LOG: the first error k6 logged (a setup's thrown Error: its message alone).
k6_error_line() { sed -n 's/.*level=error msg="\(Error: \)\{0,1\}\([^"]*\).*/\2/p' "$1" | sed 's/\\n.*//' | head -n1; }

# k6_duration_seconds 1m30s -> 90: whole seconds, rounded up (duration_ms parses).
k6_duration_seconds() { local ms; ms=$(duration_ms "$1") || die "'$1' is not a duration like 30s or 1m30s"; echo $(((ms + 999) / 1000)); }

# host_description: what a figure was measured with, as JSON {tools, host}: each run's
# meta.json has it (bench.sh), and bench:compare tells a saved baseline's from this machine's.
host_description() {
  jq -nc --arg k6 "$(k6 version 2>/dev/null | head -n1)" --arg nginx "$(nginx -v 2>&1 | sed 's|.*/||')" \
    --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" --arg machine "$(uname -n)" \
    --arg cpu_model "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
    '{tools: {k6: $k6, nginx: $nginx}, host: {machine: $machine, cpu_model: $cpu_model, cpus: $cpus, kernel: $kernel}}'
}

# stub_counts URL: "accepts requests" from an nginx stub_status page (nothing if unreachable).
# Reading it counts as one request and, on a new connection, one accept. A URL of Envoy's
# statistics (.../stats/prometheus: a Gateway's proxy, components/envoy-gateway) gives
# "accepts requests envoy": the connections its gateway listeners accepted and the requests
# their HTTP connection managers took, not those of its own stats and readiness listeners
# (which the read goes to: it counts in neither).
stub_counts() {
  case $1 in
    */stats/prometheus) curl -sf --max-time 3 "$1" | envoy_parse ;;
    *) curl -sf --max-time 3 "$1" | stub_parse ;;
  esac
}
# Envoy's own listeners and connection managers, not the gateway's: its admin, Envoy Gateway's
# stats (19001) and readiness (19003) listeners (eg-*; the same as bench:server_requests:rate's
# in monitoring/signals.yaml).
ENVOY_OWN_STATS='"(admin|eg-[^"]*)"|_190[0-9][0-9]"'
# envoy_parse: stdin Envoy's Prometheus statistics -> "accepts requests envoy".
envoy_parse() {
  awk -v own="$ENVOY_OWN_STATS" '
    /^envoy_listener_downstream_cx_total\{/ && $0 !~ own { a += $NF; seen = 1 }
    /^envoy_http_downstream_rq_total\{/ && $0 !~ own { r += $NF; seen = 1 }
    END { if (seen) printf "%d %d envoy\n", a, r }'
}
# stub_parse: stdin a stub_status page -> "accepts requests"; nothing for any other page.
stub_parse() { awk 'NR==1 && !/^Active connections/ {exit} NR==3 {print $1, $3}'; }

# load_lock / load_unlock: one load at a time on this machine. Two loads at once measure each
# other (2 CPUs: each client and each ingress gets half), so a run waits, saying so, for a load
# of another run (another terminal, the test suite's other stream, bench:evidence) to end.
# The lock is an flock on a file in the cache every checkout of one user shares; it is released
# by load_unlock or when the load's processes end. A script that holds it exports
# IB_LOAD_LOCKED, and the runs it starts (calibrate's k6, a change's bench.sh) take it no more.
# Waits a second at a time, so that a signal is acted on while waiting.
# IB_LOAD_YIELD=1 (the test suite's lab stream, which has time to spare beside the cluster's):
# a waiting run without it goes first. flock grants no turns, and a stream of short loads took
# the lock back each time it came free. A run that waits holds load.turn shared until it has
# the load; a yielding run that gets the load gives it back while load.turn is held, and waits
# for that run to have it.
load_lock() {
  [ -z "${IB_LOAD_LOCKED:-}" ] || return 0
  mkdir -p "$IB_CACHE"
  exec {ib_load_fd}>>"$IB_CACHE/load.lock"
  if ! flock -n "$ib_load_fd"; then
    local turn waited=$SECONDS
    exec {turn}>>"$IB_CACHE/load.turn"
    if [ "${IB_LOAD_YIELD:-0}" = 1 ]; then
      say load "waiting for another run's load on this machine to end (fuser -v $IB_CACHE/load.lock shows it)"
      until flock -w 1 "$ib_load_fd" && { flock -n "$turn" || { flock -u "$ib_load_fd"; false; }; }; do
        flock -w 1 "$turn" || :
        flock -u "$turn"
      done
    else
      until flock -s -w 1 "$turn"; do :; done
      say load "waiting for another run's load on this machine to end (fuser -v $IB_CACHE/load.lock shows it)"
      until flock -w 1 "$ib_load_fd"; do :; done
    fi
    exec {turn}>&-
    say load "waited $((SECONDS - waited)) s"
  fi
  export IB_LOAD_LOCKED=1
}
load_unlock() {
  [ -n "${ib_load_fd:-}" ] || return 0
  flock -u "$ib_load_fd"
  exec {ib_load_fd}>&-
  ib_load_fd='' IB_LOAD_LOCKED=''
  export -n IB_LOAD_LOCKED
}
