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
# Reading it counts as one request and, on a new connection, one accept.
stub_counts() { curl -sf --max-time 3 "$1" | stub_parse; }
# stub_parse: stdin a stub_status page -> "accepts requests"; nothing for any other page.
stub_parse() { awk 'NR==1 && !/^Active connections/ {exit} NR==3 {print $1, $3}'; }
