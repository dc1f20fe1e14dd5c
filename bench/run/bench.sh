#!/usr/bin/env bash
# bench/run/bench.sh SCENARIO: one benchmark run, end to end.
#   validate every setting -> bring the platform up -> read server counters -> k6 ->
#   read server counters -> add the server-side count to the run's summary.
# Settings come from the environment (docs/reference/settings.md); results go to
# $RESULTS_ROOT/<testid>/, a directory that is created fresh and never reused.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

SCENARIO=${1:-}
need_scenario "$SCENARIO"
# The platform (bench/lib.sh platform), through its driver (bench/platforms/driver.sh): the
# variant, the target's rules, how k6 is run and pinned, which stub_status counts the
# server side; all decided before anything starts.
load_platform
# Whose cluster (the platform's trait): own (its nodes on this host, their CPUs the budget's),
# user, or none (the lab: host processes).
cluster=$(pf_trait cluster "$PLATFORM")
# An ingress the user runs is measured on the user's cluster, by in-cluster runners.
[ -z "${INGRESS_PODS:-}${BACKEND_PODS:-}" ] || [ "$cluster" = user ] ||
  die "INGRESS_PODS names an ingress you run on the cluster of PLATFORM=external (KUBECONFIG): set PLATFORM=external"
registry_platform
[ "$(setting EXISTING_RULES)" = query ] || [ -n "${INGRESS_PODS:-}" ] ||
  die "EXISTING_RULES=install installs the rules of an ingress you run in your Prometheus: set INGRESS_PODS too"
[ -z "${BACKEND_PODS:-}" ] || [ -n "${INGRESS_PODS:-}" ] || die "BACKEND_PODS names the backends of the ingress of INGRESS_PODS: set INGRESS_PODS too"
command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run './task tools'"
RESULTS_ROOT=${RESULTS_ROOT:-$IB_ROOT/results}
# Monitoring (Prometheus + the bench:* rules, bench/platforms/monitoring/monitoring.sh): on by
# default on the platforms that have it. PROMETHEUS_URL names another Prometheus (a user's
# lab target).
MONITORING=$(setting MONITORING)
export MONITORING
pf_check "$SCENARIO"
need_ingress_cpu
pf_enter bash "$0" "$@"
# A user's cluster runs k6 in its pods: the in-cluster Job (SEGMENTS pods, default 1).
if [ "$IN_CLUSTER" = 1 ]; then SEGMENTS=$(setting SEGMENTS external); export SEGMENTS; fi
[ "$IN_CLUSTER" = 0 ] || exec bash "$IB_ROOT/bench/run/distributed.sh" "$SCENARIO"

export MONITORING
setting LINK_CAPACITY >/dev/null

# (On the local platform TARGET is unset here: its address is known only after deploy.)
k6_validate "$SCENARIO"

testid=$(run_testid "$SCENARIO")
dir=$RESULTS_ROOT/$testid
need_new_results_dir "$dir"

# Interrupts (SIGINT: Ctrl-C; SIGTERM): before the load nothing was measured and the run just
# ends; during it k6 is stopped and what it measured is kept, marked aborted (below); after
# it the run's files are completed and the exit code still says it was interrupted. Scratch
# files (k6's exit code, CPU times, printed summary) live outside the results directory, in
# a directory of this run's own that goes on any exit.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ingress-bench-run.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
k6_job='' k6_done=0 interrupted='' signal_rc=0 launching=0 pending=''
on_signal() { # NAME CODE
  signal_rc=$2
  # Between k6's fork and `k6_job=$!` (bash runs a trap between two commands): k6 runs but has
  # no job yet; the signal is forwarded once it has one, never left to a k6 nobody stops.
  if [ "$launching" = 1 ]; then pending="$1 $2"; return 0; fi
  if [ -z "$k6_job" ]; then
    [ ! -d "${made_dir:-}" ] || rmdir "$made_dir" 2>/dev/null || true # made, still empty
    exit "$2"
  fi
  [ "$k6_done" = 0 ] || return 0
  # One SIGINT to k6 for each signal we get (SIGTERM too: k6 treats both alike): the first
  # stops it gracefully (teardown and handleSummary run: the summary of what was measured),
  # a second, the user insisting, stops it at once without one.
  # Signals within a second of the last one forwarded are one (the terminal's Ctrl-C reaches
  # ./task and go-task too, which may pass it on).
  local now=${EPOCHREALTIME/./}
  [ $((now - ${last_signal:-0})) -ge 1000000 ] || return 0
  last_signal=$now
  [ -n "$interrupted" ] || { interrupted=$1 interrupted_after=$((SECONDS - k6_started)) stop_at=$SECONDS; }
  kill -INT -- "-$k6_job" 2>/dev/null || true
}
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM

# The ingress's CPU (INGRESS_CPU): on the local platform, where k6 and the backends share the
# host with it, by default (auto) the share a short probe finds the client side can saturate
# (bench/run/budget.py), and on the lab, whose LB keeps its pinned cores, a probe that says before
# the load whether k6's CPUs can drive them; overlay: the overlay's own, no probe; a quantity:
# that (need_ingress_cpu, above).
# probe: auto, with this machine's kept share decided again (below).
reprobe=0
# How long after an up the stack's own start may still weigh on a check (below): here a quick
# start's check 29 s after its up read the rest of the host at 0.65 CPU, where the share had been
# decided at 0.36; the same check read 0.38 some minutes later, and one a minute later passed.
STACK_SETTLING_S=120
[ "${INGRESS_CPU:-}" != probe ] || { reprobe=1; INGRESS_CPU=auto; }
budget=$(jq -nc --arg q "${INGRESS_CPU:-}" 'if $q == "" or $q == "auto" or $q == "overlay" then {source: "overlay"} else {ingress_cpu: $q, source: "INGRESS_CPU"} end')
# An overlay whose "ingress" is only a Service (seed 004's NodePort straight to the backends)
# has no ingress CPU to budget, nor has a Gateway's, whose proxies its controller makes (a
# probe's share would roll them beside the old pod): it keeps its own placement, and says so.
# (An overlay that does not build counts as having one: deploy says why it does not build.)
no_ingress_deployment() { # prints why
  local manifest
  manifest=$(kustomize build --load-restrictor LoadRestrictionsNone "$IB_ROOT/overlays/$VARIANT" 2>/dev/null) || return 1
  "$IB_VENV/bin/python" -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
if any(d.get("kind") == "Deployment" and (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "ingress" for d in docs):
    sys.exit(1)
print("its ingress is a Gateway, whose proxies its controller makes" if any(d.get("kind") == "Gateway" for d in docs)
      else "its Service leads straight to the backends")' <<<"$manifest"
}
if [ "$cluster" = own ] && [ "${INGRESS_CPU:-auto}" = auto ] && why=$(no_ingress_deployment); then
  say budget "overlay $VARIANT has no ingress Deployment ($why): no ingress CPU to budget, the overlay's placement"
  budget='{"source":"overlay","reason":"no ingress Deployment"}'
  INGRESS_CPU=overlay
fi
# probe SHARE BUDGET_ARGS...: a 3 s run of the scenario at INGRESS_CPU=SHARE, then
# bench/run/budget.py on it: sets INGRESS_CPU, line (said before the load) and budget (meta.json).
# The probe's load and the run's are one (load_lock here, held until the run's load ends): a
# probe read beside another run's load would choose from that run's costs.
# Returns 1 when budget.py refused (its line in $refused); probe_dir is the probe's run.
probe() {
  load_lock
  probe_dir=$scratch/budget/$testid-budget${probes:-}
  probes=$((${probes:-1} + 1))
  IB_PROBE=1 INGRESS_CPU=$1 DURATION=3s TESTID="${probe_dir##*/}" RESULTS_ROOT="$scratch/budget" \
    bash "$IB_ROOT/bench/run/bench.sh" "$SCENARIO" >"$scratch/budget.log" 2>&1 || [ $? = 99 ] ||
    die "the ingress CPU probe failed: $(sed -n 's/^error: //p' "$scratch/budget.log" | head -n1 | grep . || tail -n1 "$scratch/budget.log") (INGRESS_CPU=overlay skips it)"
  out=$("$IB_VENV/bin/python" "$IB_ROOT/bench/run/budget.py" "$probe_dir" "${@:2}" 2>"$scratch/budget.err") ||
    { refused="$(sed 's/^error: //' "$scratch/budget.err" | head -n1) (INGRESS_CPU=overlay skips the probe)"; return 1; }
  { read -r INGRESS_CPU; read -r line; read -r budget; } <<<"$out"
}
# stack_age: seconds since the cluster or its monitoring last came up (cluster.sh and
# monitoring.sh stamp their state), or nothing.
stack_age() {
  local at; at=$(cat "$IB_CLUSTER_STATE"/up-at "$IB_CLUSTER_STATE"/monitoring-up-at 2>/dev/null | sort -n | tail -n1)
  [ -z "$at" ] || echo $(($(date +%s) - at))
}
# The share is the machine's: decided by the first run of a scenario and variant on this
# machine and node count, kept in the machine's state (IB_MACHINE_STATE: a cluster up or down
# keeps it), and only checked by the runs after it, so a figure's basis never moves with the
# host's moment, nor with a probe's noise at each up. A record made on other CPUs or another
# cluster layout is decided again; INGRESS_CPU=probe decides it again on purpose.
if [ "$cluster" = own ]; then
  kept_share=$IB_MACHINE_STATE/ingress-cpu/nodes$(cat "$IB_CLUSTER_STATE/node-count" 2>/dev/null || echo 1)/$SCENARIO-$VARIANT.json
  machine="$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)), CPUs for the client and the ingress node: ${budget_cpus:-$(nproc)}"
  if [ "${INGRESS_CPU:-auto}" = auto ] && [ -f "$kept_share" ] && [ "$(jq -r '.machine // ""' "$kept_share")" != "$machine" ]; then
    say budget "this machine's share for $SCENARIO on $VARIANT was decided on another ($(jq -r '.machine // "unrecorded"' "$kept_share")): deciding it again"
    rm -f "$kept_share"
  fi
  [ "$reprobe" = 0 ] || rm -f "$kept_share"
fi
if [ "$cluster" = own ] && [ "${INGRESS_CPU:-auto}" = auto ] && [ -f "$kept_share" ] && [ "${IB_SHARE_CHECKED:-}" = "$(jq -r .ingress_cpu "$kept_share")" ]; then
  # A later round of bench/run/rounds.sh: its first round chose or checked this share moments ago.
  INGRESS_CPU=$IB_SHARE_CHECKED budget=$(jq -c '.source = "kept" | .checked = "by the first round"' "$kept_share")
  say budget "ingress CPU $INGRESS_CPU, this machine's, as the first round checked it"
elif [ "$cluster" = own ] && [ "${INGRESS_CPU:-auto}" = auto ] && [ -f "$kept_share" ]; then
  share=$(jq -r .ingress_cpu "$kept_share")
  say budget "checking that the client side can still drive this machine's INGRESS_CPU=$share (3 s)"
  # A stack that came up moments ago is still at its own start's work (its Prometheus's first
  # minutes, the operator's and the controllers' first reconciles, the first deploy's pods): not
  # the host's moment, which the check is about. A check refused then waits until the stack is
  # STACK_SETTLING_S old and checks again.
  # shellcheck disable=SC2086 # "CLIENT INGRESS": two arguments
  if ! probe "$share" check "$share" ${budget_cpus:-$(nproc)}; then
    age=$(stack_age)
    [ -n "$age" ] && [ "$age" -lt "$STACK_SETTLING_S" ] || die "$refused"
    say budget "the cluster's stack came up $age s ago, and a check this early reads its start's work: checking again once it is $STACK_SETTLING_S s old"
    load_unlock # no other run's load waits on this one's wait (the probe takes the lock again)
    sleep $((STACK_SETTLING_S - age))
    # shellcheck disable=SC2086
    probe "$share" check "$share" ${budget_cpus:-$(nproc)} || die "$refused"
    budget=$(jq -c --argjson s "$((STACK_SETTLING_S - age))" '. + {waited_for_the_stack_s: $s}' <<<"$budget")
  fi
  say budget "$line"
elif [ "$cluster" = own ] && [ "${INGRESS_CPU:-auto}" = auto ]; then
  probe_share=$(deployed_ingress_share)
  say budget "probing what the ingress, k6 and the backends cost per request (3 s at INGRESS_CPU=$probe_share)"
  # shellcheck disable=SC2086 # "CLIENT INGRESS": two arguments
  probe "$probe_share" "$probe_share" ${budget_cpus:-$(nproc)} || die "$refused"
  mkdir -p "${kept_share%/*}" && jq -c --arg m "$machine" '. + {machine: $m}' <<<"$budget" >"$kept_share"
  say budget "$line"
elif [ "$cluster" = none ] && [ "${INGRESS_CPU:-auto}" = auto ] && [ -z "${TARGET:-}" ]; then
  say placement "probing what k6, the LB and the backends cost per request (3 s)"
  probe overlay pinned || die "$refused"
  if [[ $line == warning:* ]]; then echo "$line" >&2; else say placement "${line#placement: }"; fi
fi
case ${INGRESS_CPU:-} in auto | overlay) unset INGRESS_CPU ;; "") ;; *) export INGRESS_CPU ;; esac

pf_up "$SCENARIO"
# (A share the probe chose has its own reason, said above.)
[ -z "${SERVER_CPU_LIST:-}" ] || [[ $(jq -r .source <<<"$budget") =~ ^(probe|kept)$ ]] ||
  placement_warning "$CLIENT_CPU_LIST" "$SERVER_CPU_LIST" "${PLACEMENT_SHARED:-}" "${INGRESS_CORES:-}"

# The server's word on what a TLS run negotiates, before its load: a 1 s pass of the run's own
# scenario and client settings on a few connections, then the server's record of it judged
# against what the run asks (bench/run/tls_record.py: tls.json, the summary's tls line): our
# LB's TLS record of the pass's requests (under its recorded path), or a Gateway's proxy's own
# statistics. A server that negotiated otherwise (another version, group, ALPN, HTTP version;
# no resumption where asked) stops the run in one line; a client the server refuses (TLS 1.3
# of a TLS 1.2 server) stops in the pass's setup. Another ingress keeps no record we read.
tls_record_url() {
  [ "$(scenario_scheme "$SCENARIO")" = https ] && [ -z "${IB_PROBE:-}" ] || return 1
  case $STUB in
    */stats/prometheus) echo "$STUB" ;;
    */stub_status)
      if [ "$cluster" = none ]; then [ "$STUB" = "$LAB_STUB" ] || return 1; else overlay_components "$VARIANT" | grep -qx nginx-lb || return 1; fi
      echo "${STUB%/stub_status}/bench-tls-record" ;;
    *) return 1 ;;
  esac
}
if record_url=$(tls_record_url); then
  load_lock
  tls_record() { "$IB_VENV/bin/python" "$IB_ROOT/bench/run/tls_record.py" "$@" 2>"$scratch/tls.err" || die "$(sed 's/^error: //' "$scratch/tls.err" | head -n1)"; }
  record_mark=$(tls_record mark "$record_url")
  record_path=''; [[ $record_url == */stats/prometheus ]] || record_path=/bench-tls-record/$testid
  t0=$EPOCHREALTIME
  pass_connections=$(setting CONNECTIONS); [ -n "$pass_connections" ] && [ "$pass_connections" -le 4 ] || pass_connections=4
  rc_pass=0; mkdir -p "$scratch/tls-record"
  # shellcheck disable=SC2097,SC2098 # the pass's own TESTID and DURATION
  "${RUN[@]}" env -u PROMETHEUS_URL -u RATE TESTID="$testid-tls-record" CLIENT_CPUS="$CLIENT_CPUS" RESULTS_DIR="$scratch/tls-record" \
    DURATION=1s CONNECTIONS="$pass_connections" IB_RECORD_PATH="$record_path" GODEBUG=http2client=0 \
    k6 run --quiet --no-color "$IB_ROOT/k6/$SCENARIO.js" >"$scratch/tls-record.out" 2>"$scratch/tls-record.log" || rc_pass=$?
  if [ "$rc_pass" != 0 ] && [ "$rc_pass" != 99 ]; then
    reason=$(k6_error_line "$scratch/tls-record.log")
    die "the TLS confirmation pass before the load failed: ${reason:-k6 exit $rc_pass}"
  fi
  mkdir -p "$scratch/tls"
  IB_PASS_SECONDS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.3f", b - a}') ASKED_TLS_VERSION=$(setting TLS_VERSION) ASKED_TLS_GROUP=$(setting TLS_GROUP) ASKED_TLS_RESUMPTION=$(setting TLS_RESUMPTION) \
    ASKED_HTTP_VERSION=$(setting HTTP_VERSION) ASKED_NEW_CONNECTIONS=$([ "$(jq -r .reuse <<<"$(scenario_profile "$SCENARIO")")" = false ] || [ "$(setting NO_REUSE)" = 1 ] && echo 1 || echo 0) \
    tls_record judge "$scratch/tls" "$record_url" "$testid" "$record_mark" >/dev/null
fi

stub() { [ -z "$STUB" ] || stub_counts "$STUB"; } # "accepts requests", or nothing
# Each role's CPU time from its cgroups, read around the load like the server's count: the
# seeds' unit, what the ingress serves per CPU of its own (bench/report/summary.py cpu). Where
# the ingress has a node of its own (budget_cpus), the client node's CPUs' busy time too: what
# else runs there takes the client side's CPU; what runs on the ingress's node does not.
cpu_groups=$(pf_cpu_groups)
cpu_usage() { [ -z "$cpu_groups" ] || bash "$IB_ROOT/bench/platforms/monitoring/cgroups.sh" usage ${budget_cpus:+"$CLIENT_CPU_LIST"} <<<"$cpu_groups" 2>/dev/null || true; }

# Seconds k6 has after the first signal before the second, 3 more, then it is killed: its
# graceful stop (the scenario's gracefulStop, 5 s), the teardown's Prometheus query (its 10 s
# timeout; asked again for at most 4 s while the rules' last evaluation is being written) and
# handleSummary, with room for a busy node (k6, the backends and the control plane on one CPU),
# where a teardown cut short loses the run's summary.
stop_grace=17

# Correlation and live views. k6 streams its metrics into Prometheus (native histograms,
# tagged testid/variant/scenario/platform), the teardown reads the bench:* rules back, and
# the web dashboard serves the run live (loopback; where k6 runs in a namespace of its own, the
# lab's client or a client node, that namespace's address: dash_host) and is saved with the results.
# --out on the command line replaces K6_OUT: a user's own output is passed on beside ours.
K6_ARGS=(); [ -z "${K6_OUT:-}" ] || K6_ARGS+=(--out "$K6_OUT")
dash=$dash_host:${K6_WEB_DASHBOARD_PORT:-5665}
K6_ENV=(K6_WEB_DASHBOARD=true K6_WEB_DASHBOARD_OPEN=false K6_WEB_DASHBOARD_HOST="${dash%:*}" K6_WEB_DASHBOARD_PORT="${dash#*:}")
if [ "$MONITORING" = 1 ]; then
  PROMETHEUS_URL=${PROMETHEUS_URL:-$(pf_prometheus)} || exit 1
  K6_ARGS+=(--out experimental-prometheus-rw)
  mapfile -t rw < <(k6_rw_env "$PROMETHEUS_URL")
  K6_ENV+=(PROMETHEUS_URL="$PROMETHEUS_URL" "${rw[@]}")
  say monitoring "Prometheus $PROMETHEUS_URL; k6 web dashboard http://$dash/"
  # The live page: the dashboard's panels on this run, from its start to its planned end
  # (a stopped run's teardown included), refreshed every 2 s; afterwards the run's view.
  live_start=$(($(date +%s) * 1000))
  live=$(live_view "$PROMETHEUS_URL" "$live_start" $((live_start + $(duration_ms "$(setting DURATION)") + stop_grace * 1000)) 2s)
  [ -z "$live" ] || say monitoring "live page $live"
fi
# k6 in its own cgroup: its CPU is the load generator's signal (bench/platforms/monitoring/cgroups.sh).
RUN=(bash "$IB_ROOT/bench/platforms/monitoring/cgroups.sh" run loadgen "${RUN[@]}")

mkdir -p "$RESULTS_ROOT" && mkdir "$dir" 2>/dev/null || die "results directory $dir exists already: results are never overwritten (choose another TESTID)"
made_dir=$dir
[ ! -f "$scratch/tls/tls.json" ] || mv "$scratch/tls/tls.json" "$dir/" # the server's TLS record, judged above
[ ! -d "$scratch/budget/$testid-budget" ] || mv "$scratch/budget/$testid-budget" "$dir/budget" # the probe run, kept

meta=$(jq -nc \
  --arg git "$(git -C "$IB_ROOT" describe --always --dirty 2>/dev/null || echo unknown)" --argjson described "$(host_description)" \
  --arg knobs "$([ "$cluster" = none ] && variant_knob_files "$VARIANT" | sed "s|$IB_ROOT/||" | paste -sd' ')" \
  --arg backends "$(setting LAB_BACKENDS)" --arg cluster "$cluster" \
  --arg client_cpus "${CLIENT_CPU_LIST:-all}" --arg server_cpus "${SERVER_CPU_LIST:-n/a}" \
  --arg nodes "$([ "$cluster" = none ] || kubectl get nodes -o name 2>/dev/null | wc -l)" \
  --argjson budget "$budget" \
  '{git_revision: $git} + $described + {cluster: $cluster,
    knob_files: ($knobs | split(" ")), placement: {client_cpus: $client_cpus, server_cpus: $server_cpus}, ingress_budget: $budget, lab_backends: (if $cluster == "none" then ($backends|tonumber) else null end),
    nodes: (if $nodes == "" or $nodes == "0" then null else ($nodes|tonumber) end)}')

# The results directory's filesystem filling up: one line, not a tool's own error.
disk_full() { die "cannot write the results in $dir: $(df -P "$dir" 2>/dev/null | awk 'NR==2 {print $4 " KiB left on " $6}') (${1:-free some space or set RESULTS_ROOT})"; }

load_lock # the load and the counts around it: never beside another run's load
before=$(stub) usage_before=$(cpu_usage)
# `time` measures the load generator's own CPU (user + system of k6, which ip netns exec,
# taskset and env exec into): a run where the client saturates measures the client.
# k6 runs as a job of its own process group (set -m): a terminal's Ctrl-C reaches this script
# only, and k6 gets exactly the signals on_signal sends, so one Ctrl-C is one graceful stop
# (without it k6 would get the terminal's SIGINT and ours: two, an immediate abort).
TIMEFORMAT='%R %U %S'
k6_started=$SECONDS
launching=1
set -m
{ { time {
  # GODEBUG: k6 would negotiate HTTP/2 over TLS; the seeds measured HTTP/1.1.
  "${RUN[@]}" env TESTID="$testid" CLIENT_CPUS="$CLIENT_CPUS" RESULTS_DIR="$dir" BENCH_META="$meta" GODEBUG=http2client=0 \
    "${K6_ENV[@]}" K6_WEB_DASHBOARD_EXPORT="$dir/k6-dashboard.html" \
    k6 run --quiet --no-color "${K6_ARGS[@]}" "$IB_ROOT/k6/$SCENARIO.js" >"$scratch/stdout" 2>"$dir/k6.log" &&
    echo 0 >"$scratch/rc" || echo $? >"$scratch/rc" # (set -e holds in the job too)
} ; } 2>"$scratch/cpu"; } &
# (BENCH_FAILPOINT=signal-at-fork: the suite's Ctrl-C in this window, test_interrupts.py.)
[ "${BENCH_FAILPOINT:-}" != signal-at-fork ] || kill -INT $$
k6_job=$!
set +m
launching=0
# shellcheck disable=SC2086 # NAME CODE
[ -z "$pending" ] || on_signal $pending
# wait returns early when a trapped signal arrives (on_signal runs); after one, poll, to
# enforce the grace.
hard=0
while kill -0 "$k6_job" 2>/dev/null; do
  if [ -z "$interrupted" ]; then wait "$k6_job" 2>/dev/null || true; continue; fi
  if [ $((SECONDS - stop_at)) -ge $((stop_grace + 3)) ]; then kill -KILL -- "-$k6_job" 2>/dev/null || true
  elif [ "$hard" = 0 ] && [ $((SECONDS - stop_at)) -ge "$stop_grace" ]; then
    # k6's graceful stop outlived its grace: first its goroutines' stacks into k6.log (Go's
    # SIGQUIT: they say which stage held it), then the second SIGINT, an abort, to the group.
    hard=1; pkill -QUIT -g "$k6_job" -x k6 2>/dev/null || true; kill -INT -- "-$k6_job" 2>/dev/null || true
  fi
  sleep 0.2
done
wait "$k6_job" 2>/dev/null || true
k6_done=1
rc=$(cat "$scratch/rc" 2>/dev/null || echo 137) # none: killed
after=$(stub) usage_after=$(cpu_usage)
load_unlock

# k6 stopped without its summary (it had to be killed, or the signal came before its own
# handling was set up)...
lost=''
if [ -n "$interrupted" ] && [ ! -s "$dir/meta.json" ]; then
  # ... before it sent anything: the signal came as it started, before k6 set up its handling
  # (which it does before any request), and k6 died of it. The server says so where it
  # counts (no connection but the count's own: each stub_status read is one); elsewhere the
  # job's shell, which died with k6 and never wrote the CPU times, does (its file is there,
  # empty, once the shell opened it: a machine slow enough lets the shell get that far
  # before the signal; whether the shell dies too is a race, so both are read); and where
  # the shell lived on, k6's own status:
  # killed by the SIGINT itself (130), which a k6 that had set up its handling never is (its
  # graceful stop exits, its abort too). The server's count alone misses it while Prometheus's
  # exporter reads the same stub_status. Nothing was measured, and the run just ends.
  if { [ -n "$before" ] && [ -n "$after" ] && [ $(( ${after%% *} - ${before%% *} )) -le 1 ]; } || [ ! -s "$scratch/cpu" ] || [ "$rc" = 130 ]; then
    rm -rf "$dir"
    say results "none: interrupted by $interrupted as k6 started, before it sent a request"
    exit "$signal_rc"
  fi
  # ... later: the run's directory is completed from what this script knows, so it stays a
  # run (the server's count) and its line says what was lost.
  lost="; k6 stopped before writing its summary: the client's counts are lost"
  jq -n --argjson m "$meta" --arg testid "$testid" --arg scenario "$SCENARIO" --arg variant "$VARIANT" --arg platform "$PLATFORM" \
    --arg target "${TARGET:-}" --arg duration "${DURATION:-}" --arg engine "${ENGINE:-}" --arg at "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)" \
    --argjson secs "$interrupted_after" \
    '{testid: $testid, scenario: $scenario, variant: $variant, platform: $platform, target: $target, duration: $duration,
      engine: $engine, finished_at: $at, run_seconds: $secs, k6_summary: false} + $m' >"$dir/meta.json"
fi
# k6's own report of what it measured, printed now: an interrupted run's result line says so.
if [ -n "$interrupted" ]; then
  [ ! -f "$scratch/stdout" ] || sed "s/^result\( *\)\(PASS\|FAIL\) (.*/result\1ABORTED (interrupted after $interrupted_after s by $interrupted)/" "$scratch/stdout"
  [ -z "$lost" ] || printf '%-14s%s\n' result "ABORTED (interrupted after $interrupted_after s by $interrupted$lost)"
else
  cat "$scratch/stdout"
fi

if [ -z "$interrupted" ] && [ "$rc" != 0 ] && [ "$rc" != 99 ]; then # 99: thresholds crossed, a finished run that failed
  # k6 stopped early (setup failed: target not ready): the one-line reason; files stay.
  reason=$(k6_error_line "$dir/k6.log")
  case $reason in *"no space left on device"*) disk_full "k6: $reason" ;; esac
  die "k6 $SCENARIO did not finish (exit $rc): ${reason:-see $dir/k6.log}"
fi

{ [ -f "$scratch/cpu" ] && read -r wall user sys <"$scratch/cpu"; } || { wall=$((SECONDS - k6_started)) user=0 sys=0; }
report() { "$IB_VENV/bin/python" "$IB_ROOT/bench/report" "$@"; } # the package bench/report
# summary.json: k6's own, completed with the load generator's CPU and nginx's count (bench/report/
# summary.py); the client and server lines go into summary.txt and here.
aborted=(); [ -z "$interrupted" ] || aborted=(--aborted "$interrupted_after" --signal "$interrupted")
# k6's utilization is of the CPUs it had (placed after deploy: beside a fractional ingress, all).
k6_cpus=$CLIENT_CPUS; [ -z "${CLIENT_CPU_LIST:-}" ] || k6_cpus=$(taskset -c "$CLIENT_CPU_LIST" nproc 2>/dev/null || echo "$CLIENT_CPUS")
report summary "$dir" --times "$wall" "$user" "$sys" --cpus "$k6_cpus" --stub-before "$before" --stub-after "$after" \
  --usage-before "$usage_before" --usage-after "$usage_after" --host-cpus "$(nproc)" "${aborted[@]}" || exit 1
# The run's report: the series over the run while Prometheus still holds them, then the
# page. A report problem is said, never the run's result.
# Exit 3: the results could not be written (a full disk), said in its one line: fatal.
if [ -n "$lost" ]; then  # no client figures to draw: the directory holds the server's count
  say results "$dir/ (no report: k6's summary is lost; summary.json has the server's count)"
  exit "$signal_rc"
fi
# A probe (IB_PROBE: probe(), above) is read for its summary's CPU figures only, and kept in
# the run's budget/ as that: no series fetched, no page drawn (they were most of its own CPU
# after its load, beside the run that waits on it).
if [ -n "${IB_PROBE:-}" ]; then
  say results "$dir/ (a probe: its summary, no page)"
  [ "$signal_rc" = 0 ] || exit "$signal_rc"
  exit "$rc"
fi
if [ "$MONITORING" = 1 ]; then report fetch "$dir" --prometheus "$PROMETHEUS_URL" || [ $? != 3 ] || exit 1; fi
# The run's view on the live page, for the report's link and ./task dashboard: to now and the
# grace after (Perses aligns a query's end down to its step, which would leave k6's last push out).
[ -z "${live:-}" ] || live_view "$PROMETHEUS_URL" "$live_start" $((($(date +%s) + stop_grace) * 1000)) >"$dir/live.url"
report render "$dir" >/dev/null || { [ $? != 3 ] || exit 1; echo "warning: the report of $dir could not be rendered" >&2; }
say results "$dir/ (report: $dir/report.html)"
[ "$signal_rc" = 0 ] || exit "$signal_rc" # 130 SIGINT, 143 SIGTERM: never a pass
exit "$rc"
