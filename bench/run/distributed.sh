#!/usr/bin/env bash
# bench/run/distributed.sh SCENARIO: the scenario split over SEGMENTS k6 pods (an Indexed Job,
# k6/distributed/job.yaml) against the overlay VARIANT, in the cluster: the local one
# (PLATFORM=local, the default) or the user's (PLATFORM=external, see bench/platforms/deploy.sh; there the
# load always runs in-cluster, as a ClusterIP is not reachable from outside). The parts'
# request counts are summed and checked against the ingress's stub_status, read through the
# API server's service proxy (it works wherever kubectl does).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$IB_ROOT/bench/run/render_distributed.sh"

SCENARIO=${1:-}
need_scenario "$SCENARIO"
SEGMENTS=$(setting SEGMENTS distributed)
export SEGMENTS # the pods' k6 splits its connections by it, and the check below sees it
setting RUNNER_CPU >/dev/null # rendered after deploy: checked before
load_platform
[ "$(pf_trait cluster)" != none ] || die "unknown PLATFORM '$PLATFORM' for in-cluster load (known: $(for p in $(setting_values PLATFORM); do [ "$(pf_trait cluster "$p")" = none ] || echo "$p"; done | paste -sd' ' | sed 's/ /, /g'))"
# The pods load the ingress this run deploys, or on a user's cluster one the user runs
# (INGRESS_PODS, TARGET its address: bench/lib/existing.sh), and what they receive is the
# registry's "pods" settings: anything else given would be checked here and lost there.
existing=0
if [ -n "${INGRESS_PODS:-}" ]; then
  existing_platform
  existing=1
else
  [ -z "${TARGET:-}" ] || die "in-cluster runs measure the overlay they deploy: unset TARGET"
fi
registry_platform
pf_check "$SCENARIO"
settings_must_reach "the in-cluster k6 pods" pods distributed
# Checked as the pods will see them: in a pod a Service DNS name is a cluster address
# (k6/lib/config.js isClusterService), such as a user's PROMETHEUS_URL.
KUBERNETES_SERVICE_HOST=${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc} k6_validate "$SCENARIO"
# Grafana's image is stock k6: the native engine, the default, is this project's build
# (bench/platforms/local/images.sh); there the default is k6/http, passed on to the pods.
if k6_is_upstream; then
  [ "${ENGINE:-}" != native ] ||
    die "ENGINE=native needs k6 built with k6/x/ingressbench, which $K6_IMAGE_UPSTREAM is not: use REGISTRY (the project's k6 image pushed where your cluster pulls from), IMAGE_SET=local (your nodes hold it) or ENGINE=js"
  export ENGINE=js
fi
testid=${TESTID:-$(date -u +%Y%m%dT%H%M%SZ)-$SCENARIO-${VARIANT}-x$SEGMENTS}
dir=${RESULTS_ROOT:-$IB_ROOT/results}/$testid
need_new_results_dir "$dir"
# The cluster and (deploy adds the monitoring component by default, which needs the stack's
# CRDs) its monitoring, as for bench; the k6 pods' CPU is then scraped as the load generator's.
pf_cluster_up
if [ "$existing" = 1 ]; then
  need_external_cluster "loads an ingress you run on"
  existing_up
  registry_push
  target=$TARGET
  # Ours on the user's cluster: this namespace and what the run puts in it, removed with it.
  say existing "on your cluster: namespace ingress-bench (created if it is not there),$([ "${IB_TARGET_CHECKED:-}" = 1 ] || echo " a pod that sends TARGET $existing_probes requests (removed when it ends),") ConfigMaps k6-scenarios and k6-lib,$([ -z "$EXISTING_RULES_LABELS" ] || echo " PrometheusRule $(distributed_name "$testid") for $EXISTING_RULES_BY (removed when the run ends),") Job $(distributed_name "$testid") of $SEGMENTS pods for $(setting DURATION) (k6's graceful stop and 90 s at most after it; removed when the run ends); nothing of the ingress is changed"
  kubectl get namespace ingress-bench >/dev/null 2>&1 || kubectl create namespace ingress-bench >/dev/null ||
    die "could not create namespace ingress-bench on the cluster of KUBECONFIG=$KUBECONFIG"
  [ "${IB_TARGET_CHECKED:-}" = 1 ] || existing_target
  # What the run makes on the user's cluster goes when it ends, however it ends: its rules,
  # and its Job with its pods once their summaries are read.
  trap 'existing_rules_remove; kubectl -n ingress-bench delete job "$(distributed_name "$testid")" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
  existing_rules "$(distributed_name "$testid")"
else
  registry_push
  addr=$(bash "$IB_ROOT/bench/platforms/deploy.sh" --for-pods) || exit 1
  [[ $addr != *:* ]] || die "distributed runs measure an ingress: overlay $VARIANT exposes a NodePort only"
  target=$(scenario_scheme "$SCENARIO")://$addr
fi
# The pods stream to the platform's Prometheus and correlate from it, by the address they
# reach it at (a Service DNS name); a PROMETHEUS_URL given is the pods' already. None without
# monitoring.
# The wait for it to load this deploy's monitors and rules goes through the API server.
MONITORING=$(setting MONITORING)
DEPLOY_TIMEOUT=$(setting DEPLOY_TIMEOUT)
if [ "$MONITORING" != 1 ]; then unset PROMETHEUS_URL
else
  ! own_monitoring || PROMETHEUS_URL=$(pf_prometheus_in_cluster) || exit 1
  # (An existing ingress's Prometheus holds no rules of ours: its signals are one query.)
  if [ "$existing" = 0 ] && [ -n "$PROMETHEUS_URL" ] && prometheus_wait_loaded "$PROMETHEUS_URL" "$DEPLOY_TIMEOUT"; then
    prometheus_wait_link "$PROMETHEUS_URL" "$DEPLOY_TIMEOUT"
  fi
fi

mkdir -p "$(dirname "$dir")" && mkdir "$dir" 2>/dev/null || die "results directory $dir exists already"

# The scenarios and their lib, as the pods see them (tests of the lib stay out).
# shellcheck disable=SC2046 # one --from-file argument per word
kubectl -n ingress-bench create configmap k6-scenarios $(for s in $(setting_values SCENARIO); do printf -- '--from-file=%s ' "$IB_ROOT/k6/$s.js"; done) \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# shellcheck disable=SC2046
kubectl -n ingress-bench create configmap k6-lib $(for f in "$IB_ROOT"/k6/lib/*.js; do [[ $f == *.test.js ]] || printf -- '--from-file=%s ' "$f"; done) \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n ingress-bench delete job -l app.kubernetes.io/component=load-generator --wait >/dev/null 2>&1 || true

name=$(distributed_name "$testid")
TARGET=$target TESTID=$testid NAME=$name SCENARIO=$SCENARIO SEGMENTS=$SEGMENTS \
  render_distributed "$IB_ROOT/k6/distributed/job.yaml" >"$dir/job.yaml"

# nginx-lb's status port (the Service port named status): via the API server, so the count
# works for a cluster whose addresses this host cannot reach.
stub() {
  if [ "$existing" = 1 ]; then
    # Its own counter, as its Prometheus last read it: once more a scrape after the load.
    local c; c=$(existing_count "$(date +%s)") && [ -n "$c" ] && echo "0 $c prometheus"
    return 0
  fi
  kubectl get --raw "/api/v1/namespaces/ingress-bench/services/http:nginx-lb:status/proxy/stub_status" 2>/dev/null |
    stub_parse || true # no count is reported after the run, not fatal here
}
# Interrupts (SIGINT, SIGTERM) while the pods load: each pod's k6 gets one SIGINT (its
# graceful stop: the pod still prints the summary of what it measured), the pods are waited
# for, and the run is recorded as measured, marked aborted; exit 130 or 143. Before the Job
# exists nothing was measured: the run just ends.
job_started='' interrupted='' signal_rc=0 waiter=''
on_signal() { # NAME CODE
  signal_rc=$2
  [ -n "$job_started" ] || exit "$2"
  [ -z "$interrupted" ] || return 0
  interrupted=$1 interrupted_after=$((SECONDS - job_started))
  kill "$waiter" 2>/dev/null || true
}
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM
pods() { kubectl -n ingress-bench get pods -l job-name="$name" -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}'; }

load_lock # the Job's load and the counts around it: never beside another run's load
before=$(stub)
# An ingress you run: its CPU seconds around the load, and the CPUs it may use (existing_up).
[ "$existing" = 0 ] || { cpu_before=$(existing_cpu "$(date +%s)") throttling_before=$(existing_throttling "$(date +%s)") nic_before=$(existing_nic "$(date +%s)"); }
kubectl apply -f "$dir/job.yaml" >/dev/null
job_started=$SECONDS
say k6 "$SEGMENTS segments of $SCENARIO as Job $name"
duration=$(setting DURATION)
secs=$(( $(k6_duration_seconds "$duration") + 90 ))
# Until each pod has Succeeded, as the kubelet reports it (the Job's complete condition came
# about 3 s later), once the Job has made them all. In the background, so that a signal is
# acted on at once (wait returns to run the trap).
for _ in $(seq 100); do [ -n "$interrupted" ] || [ "$(pods | grep -c .)" -ge "$SEGMENTS" ] && break; sleep 0.2; done
waiter=''; wait_rc=0
if [ -z "$interrupted" ]; then
  kubectl -n ingress-bench wait --for=jsonpath='{.status.phase}'=Succeeded pod -l "job-name=$name" --timeout="${secs}s" >/dev/null 2>&1 &
  waiter=$!
  wait "$waiter" || wait_rc=$?
fi
if [ -n "$interrupted" ]; then
  # Each pod's k6 gets its SIGINT once it runs: a pod still Pending, or not even created, at
  # the interrupt (a busy node; the Job controller creates them one by one) would otherwise
  # start later and load for the whole duration: so until all SEGMENTS pods exist and ended.
  # Each ends after its k6's graceful stop (5 s) and teardown, whose Prometheus queries may
  # take up to k6's teardownTimeout (60 s) on a loaded node: 20 s was not always enough (an
  # empty segment). 90 s for all.
  signalled=' '
  for _ in $(seq 450); do
    while read -r pod phase; do
      [ "$phase" = Running ] && [[ $signalled != *" $pod "* ]] || continue
      # Once its k6 runs the test (its REST API says so): a SIGINT before k6 handles signals
      # (while it loads the script, seconds on a busy node) kills it without a summary.
      kubectl -n ingress-bench exec "$pod" -- sh -c 'wget -qO- http://127.0.0.1:6565/v1/status | grep -q "\"running\":true" && kill -INT $(pidof k6)' \
        </dev/null >/dev/null 2>&1 && signalled+="$pod "
    done < <(pods)
    phases=$(pods)
    [ "$(grep -c . <<<"$phases")" -ge "$SEGMENTS" ] && ! grep -qw -e Running -e Pending <<<"$phases" && break
    sleep 0.2
  done
elif [ "$wait_rc" != 0 ]; then
  die "job $name did not complete: $(pods | awk '{print $2}' | paste -sd' ')"
fi
[ "$existing" = 0 ] || existing_scraped_since $(($(date +%s) - $(jq -r .interval <<<"$IB_EXISTING")))
after=$(stub)
ingress_cpu=(); [ "$existing" = 0 ] || ingress_cpu=(--ingress-cpu "$cpu_before" "$(existing_cpu "$(date +%s)")" "$EXISTING_CORES"
  --ingress-throttling "$throttling_before" "$(existing_throttling "$(date +%s)")" --ingress-nic "$nic_before" "$(existing_nic "$(date +%s)")")
load_unlock

# section NAME: a pod's log's lines from its "@@NAME" line to the next "@@" one.
section() { awk -v m="@@$1" '$0 == m {on = 1; next} /^@@/ {on = 0} on'; }
for i in $(seq 0 $((SEGMENTS - 1))); do
  # (A pod that is gone leaves its segment empty, which `segments` names, rather than stop here.)
  pod=$(kubectl -n ingress-bench get pods -l "job-name=$name,batch.kubernetes.io/job-completion-index=$i" -o jsonpath='{.items[*].metadata.name}')
  pod=${pod%% *}
  # The log up to its end marker: a pod that has just ended may not have all its output in
  # the log yet. A summary that does not decode is left empty: `segments` names it.
  log=
  for _ in $(seq 50); do
    [ -n "$pod" ] || break
    log=$(kubectl -n ingress-bench logs "$pod" 2>/dev/null) || true
    [[ $log == *$'\n@@end'* ]] && break
    sleep 0.2
  done
  section summary.json.gz.b64 <<<"$log" | base64 -d 2>/dev/null | gunzip -c >"$dir/segment-$i.json" 2>/dev/null || true
  [ "${IB_TIMELINE:-}" != 1 ] || section timeline.json.gz.b64 <<<"$log" | base64 -d 2>/dev/null | gunzip -c >"$dir/timeline-$i.json" 2>/dev/null || true
done
# summary.json: the segments summed, with nginx's count (bench/report/summary.py).
aborted=(); [ -z "$interrupted" ] || aborted=(--aborted "$interrupted_after" --signal "$interrupted")
"$IB_VENV/bin/python" "$IB_ROOT/bench/report" segments "$dir" --testid "$testid" --variant "$VARIANT" --platform "$PLATFORM" \
  --stub-before "$before" --stub-after "$after" "${aborted[@]}" "${ingress_cpu[@]}" || exit 1
say results "$dir/"
[ "$signal_rc" = 0 ] || exit "$signal_rc" # 130 SIGINT, 143 SIGTERM: never a pass
# A crossed threshold in any segment: k6's own code for it (the pods end 0 then, job.yaml).
[ "$(jq -r .passed "$dir/summary.json")" = true ] || exit 99
