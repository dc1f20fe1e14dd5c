#!/usr/bin/env bash
# The platform's monitoring: Prometheus with the bench:* rules, the exporters, and the cgroup
# sampler for processes outside Kubernetes.
#   PLATFORM=local (default): the local cluster's stack (monitoring/local: prometheus-operator,
#     a Prometheus, node-exporter, kubelet cAdvisor) plus the monitoring component's CRDs.
#   PLATFORM=lab: Prometheus, node-exporter and nginx-prometheus-exporter on the host, for
#     the bare-metal lab (monitoring/lab), listening on the lab bridge and loopback only.
# bench/platforms/monitoring/monitoring.sh up|down|status|url|url-in-cluster|wait ; up and down are idempotent.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

PLATFORM=$(platform) || exit 1
# The platform's monitoring trait: operator (the local cluster's Prometheus Operator stack),
# host (a Prometheus process beside the lab), or the user's (none of ours to run).
KIND=$(pf_trait monitoring "$PLATFORM")
case "$KIND" in operator|host) ;; *) die "PLATFORM=$PLATFORM has no monitoring of ours to run: its Prometheus is the user's (PROMETHEUS_URL)" ;; esac
CGROUPS=$IB_ROOT/bench/platforms/monitoring/cgroups.sh
LAB_STATE=/run/ingress-bench/monitoring-lab
LAB_PROM_ADDR=$LAB_HOST_IP:$LAB_PROMETHEUS_PORT # on the lab bridge's host address
LOCAL_TEXTFILE=$IB_CLUSTER_STATE/textfile # must match node-exporter's hostPath (monitoring/local)
LOCAL_LIVE=$IB_CLUSTER_STATE/live         # must match Prometheus' hostPath (monitoring/local/prometheus.yaml)
LOCAL_URL=$IB_CLUSTER_STATE/monitoring-url # its address, as its up read it (operator_up)

# live_assets DIR: the live page (dashboards/live/, built by ./task tools) and the dashboard it
# shows, into DIR, which the run's Prometheus serves at /user/ (--web.user-assets): same origin
# as its API, no server of its own. A page not built leaves DIR empty, and runs say nothing of it.
live_assets() {
  mkdir -p "$1"
  [ -f "$IB_LIVE_DIR/.complete" ] || return 0
  cp -r "$IB_LIVE_DIR/." "$1/" && rm -f "$1/.complete"
  cp "$IB_ROOT/dashboards/live/ingress-bench.perses.json" "$1/"
}

# The sampler runs while monitoring is up; its pid file sits beside what it writes.
sampler_start() { # DIR [ROLE=CPUS...]
  sampler_stop "$1"; mkdir -p "$1"
  without_our_fds setsid bash "$CGROUPS" sample "$@" >/dev/null 2>&1 </dev/null &
  echo $! >"$1/.sampler.pid"
}
sampler_alive() { [ -f "$1/.sampler.pid" ] && kill -0 "$(cat "$1/.sampler.pid")" 2>/dev/null; }
sampler_stop() { # DIR
  [ -f "$1/.sampler.pid" ] && kill "$(cat "$1/.sampler.pid")" 2>/dev/null || true
  rm -f "$1/.sampler.pid"
}

# Our cluster's Prometheus from the client node: the host has no route into the cluster
# (bench/platforms/local/nodes.sh).
NET=(); [ "$KIND" != operator ] || [ -z "$(client_netns)" ] || NET=(nsenter --net="$(client_netns)")
ready() { "${NET[@]}" curl -fsS --max-time 2 "$1/-/ready" >/dev/null 2>&1; }

# The operator's CRDs, from the module the operator is built from.
crd_dir() {
  local d; d=$(gocmd mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" | jq -r .Dir) ||
    die "the module proxy did not serve prometheus-operator $PROMETHEUS_OPERATOR_VERSION (its CRDs)"
  echo "$d/example/prometheus-operator-crd"
}

# operator_url: Prometheus as the user's browser and the bench both reach it: its NodePort on
# the client node's address.
operator_url() {
  local ip
  ip=$(kubectl get nodes -l ingress-bench/role-client=true -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}' 2>/dev/null) || return 1
  [ -n "$ip" ] && echo "http://$ip:$(kubectl -n monitoring get svc prometheus -o jsonpath='{.spec.ports[0].nodePort}' 2>/dev/null)"
}

operator_up() {
  export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
  # Up already: the address its up wrote answers, and the sampler runs (every run asks; the
  # API server's checks and the Service's reads were four kubectl calls of each).
  local url
  if url=$(cat "$LOCAL_URL" 2>/dev/null) && ready "$url" && sampler_alive "$LOCAL_TEXTFILE"; then
    live_assets "$LOCAL_LIVE"; say monitoring "up: $url"; return 0
  fi
  bash "$IB_ROOT/bench/platforms/local/cluster.sh" status >/dev/null 2>&1 || die "the local cluster is not up: run './task cluster:up'"
  live_assets "$LOCAL_LIVE"
  local t0=$SECONDS
  bash "$IB_ROOT/bench/platforms/local/images.sh" monitoring
  # shellcheck disable=SC2086 # one name a word
  import_images $IB_MONITORING_IMAGES
  # Four of the CRDs exceed the client-side apply annotation limit: server-side apply.
  kubectl apply --server-side --force-conflicts -f "$(crd_dir)" >/dev/null || die "the prometheus-operator CRDs did not apply"
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null || die "the prometheus-operator CRDs are not established"
  kustomize build "$IB_ROOT/monitoring/local" | kubectl apply -f - >/dev/null || die "monitoring/local did not apply"
  kubectl -n monitoring rollout status deploy/prometheus-operator --timeout=90s >/dev/null 2>&1 ||
    die "prometheus-operator not ready: $(pod_problem monitoring prometheus-operator)"
  # A cluster of several nodes holds the ingress alone on node 1 (bench/platforms/local/nodes.sh):
  # its CPUs are the ingress's to judge, whoever else runs there.
  local fixed=()
  [ ! -d "$IB_CLUSTER_STATE/nodes/2" ] || fixed=("ingress=$(cat "$IB_CLUSTER_STATE/nodes/1/cpus")")
  sampler_start "$LOCAL_TEXTFILE" "${fixed[@]}"
  # Its address is the applied Service's, read once: a poll that read it again each time made
  # two kubectl calls every half second (a CPU-bound machine's cost while Prometheus starts).
  url=$(operator_url) || die "the Prometheus Service of monitoring/local has no address on the client node"
  poll 120 ready "$url" || die "Prometheus not ready after 120 s: $(pod_problem monitoring prometheus)"
  echo "$url" >"$LOCAL_URL"
  date +%s >"$IB_CLUSTER_STATE/monitoring-up-at" # (bench.sh stack_age)
  say monitoring "up: Prometheus $PROMETHEUS_VERSION at $url, operator $PROMETHEUS_OPERATOR_VERSION, in $((SECONDS - t0)) s"
}

operator_down() {
  export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
  sampler_stop "$LOCAL_TEXTFILE"; rm -rf "$LOCAL_TEXTFILE" "$LOCAL_LIVE" "$LOCAL_URL" "$IB_CLUSTER_STATE/monitoring-up-at"
  if bash "$IB_ROOT/bench/platforms/local/cluster.sh" status >/dev/null 2>&1; then
    kubectl delete clusterrole,clusterrolebinding -l app.kubernetes.io/part-of=ingress-bench-monitoring --ignore-not-found >/dev/null 2>&1 || true
    remove_monitoring_stack kubelet # the operator's --kubelet-service (monitoring/local/operator.yaml)
  fi
}

host_pids() { pgrep -f -- "--ingress-bench-lab-monitoring" || true; }

host_up() {
  need_root "monitoring:up on the lab"
  # (Not a pipe into grep -q: under pipefail, grep's early exit fails the pipeline.)
  [[ $(ip -o addr show 2>/dev/null) == *" ${LAB_PROM_ADDR%:*}/"* ]] || die "the lab is not up: run './task lab:up' (its Prometheus listens on the lab bridge)"
  ready "http://$LAB_PROM_ADDR" && [ -n "$(host_pids)" ] && sampler_alive "$LAB_STATE/textfile" &&
    { live_assets "$LAB_STATE/live"; say monitoring "up: http://$LAB_PROM_ADDR (lab)"; return 0; }
  host_down
  bash "$IB_ROOT/bench/platforms/monitoring/build.sh" prometheus
  mkdir -p "$LAB_STATE/rules" "$LAB_STATE/data" "$LAB_STATE/textfile"
  live_assets "$LAB_STATE/live"
  cp "$IB_ROOT/monitoring/lab/prometheus.yml" "$LAB_STATE/"
  "$IB_VENV/bin/python" "$IB_ROOT/monitoring/rulefile.py" lab "$(link_capacity_bits "${LINK_CAPACITY:-10G}")" >"$LAB_STATE/rules/bench.yaml"
  sampler_start "$LAB_STATE/textfile"
  # A marker argument names every process here, so down finds exactly these.
  local m=--ingress-bench-lab-monitoring
  without_our_fds setsid bash -c 'exec -a "prometheus-node-exporter '"$m"'" prometheus-node-exporter --web.listen-address=127.0.0.1:19100 --collector.disable-defaults --collector.cpu --collector.netdev --collector.textfile --collector.textfile.directory="$1"' _ "$LAB_STATE/textfile" >"$LAB_STATE/node-exporter.log" 2>&1 </dev/null &
  without_our_fds setsid bash -c 'exec -a "prometheus-nginx-exporter '"$m"'" prometheus-nginx-exporter -web.listen-address=127.0.0.1:19113 -nginx.scrape-uri='"$LAB_STUB"'' >"$LAB_STATE/nginx-exporter.log" 2>&1 </dev/null &
  without_our_fds setsid bash -c 'exec -a "prometheus '"$m"'" "$1" --config.file="$2/prometheus.yml" --storage.tsdb.path="$2/data" --storage.tsdb.retention.time=1d --web.listen-address='"$LAB_PROM_ADDR"' --web.enable-remote-write-receiver --enable-feature=native-histograms --web.user-assets="$2/live"' _ "$IB_PROMETHEUS_DIR/prometheus" "$LAB_STATE" >"$LAB_STATE/prometheus.log" 2>&1 </dev/null &
  poll 30 ready "http://$LAB_PROM_ADDR" || die "the lab's Prometheus did not become ready: $(tail -n1 "$LAB_STATE/prometheus.log")"
  say monitoring "up: Prometheus $PROMETHEUS_VERSION at http://$LAB_PROM_ADDR (lab), node-exporter and nginx-prometheus-exporter on loopback"
}

host_down() {
  local pid
  sampler_stop "$LAB_STATE/textfile"
  for pid in $(host_pids); do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do [ -z "$(host_pids)" ] && break; sleep 0.1; done
  for pid in $(host_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  rm_state "$LAB_STATE"
}

case "${1:-}" in
  # The lab's Prometheus reads its rules and targets from files as it starts (up waits for
  # it): what it lacks a few seconds later it will not get.
  wait)
    url=$("$0" url)
    if [ "$KIND" = host ]; then prometheus_wait_loaded "$url" 10 "${2:-ingress}" || true
    elif export KUBECONFIG=$IB_CLUSTER_KUBECONFIG && prometheus_wait_loaded "$url" "$(setting DEPLOY_TIMEOUT)" "${2:-ingress}" ingress-bench; then
      prometheus_wait_link "$url" "$(setting DEPLOY_TIMEOUT)"
    fi ;;
  up) "${KIND}_up" ;;
  down)
    need_root "monitoring:down"
    "${KIND}_down"; bash "$CGROUPS" remove
    say monitoring "down ($PLATFORM)" ;;
  url)
    case "$KIND" in
      operator) cat "$LOCAL_URL" 2>/dev/null || die "monitoring is not up on the local cluster: run './task monitoring:up'" ;;
      host) ready "http://$LAB_PROM_ADDR" || die "monitoring is not up on the lab: run './task monitoring:up PLATFORM=lab'"; echo "http://$LAB_PROM_ADDR" ;;
    esac ;;
  # Where in-cluster k6 reaches it: the Service's DNS name (monitoring/local/prometheus.yaml).
  url-in-cluster)
    [ "$KIND" = operator ] || die "PLATFORM=$PLATFORM has no in-cluster Prometheus of its own: give PROMETHEUS_URL (an address the pods reach)"
    KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl -n monitoring get svc prometheus >/dev/null 2>&1 ||
      die "monitoring is not up on the local cluster: run './task monitoring:up'"
    echo "http://prometheus.monitoring.svc:9090" ;;
  # The lab's Prometheus (the local cluster's runs in a pod: cluster.sh procs has it).
  procs) [ "$KIND" != host ] || host_pids ;;
  status) url=$("$0" url) && ready "$url" && echo "monitoring ($PLATFORM): Prometheus at $url ready" ;;
  *) die "usage: bench/platforms/monitoring/monitoring.sh up|down|status|procs|url|url-in-cluster|wait" ;;
esac
