# Prometheus: k6's remote write to it, its API, the waits for a deploy's rules and targets, link capacities.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# k6_rw_env PROMETHEUS_URL: k6's remote-write output to that Prometheus, one NAME=value a line,
# for the host's k6 (bench/run/bench.sh) and the in-cluster pods (bench/run/render_distributed.sh):
# native histograms and a 2 s push (the rules' scrape cadence). No stale markers: k6 writes its
# final push and its markers at one instant, and Prometheus kept neither, so every run's last
# push was lost (a 10 s run's series ended at 70,437 of its 89,057 requests; without them
# 87,182 of 87,181 and the teardown's query). The dashboard reads k6's series through
# windows (max_over_time, last_over_time), never as bare last values.
k6_rw_env() {
  printf '%s\n' K6_PROMETHEUS_RW_SERVER_URL="$1/api/v1/write" K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM=true \
    K6_PROMETHEUS_RW_PUSH_INTERVAL=2s K6_PROMETHEUS_RW_STALE_MARKERS=false
}
# prometheus_api BASE_URL PATH: GET a Prometheus API path. A Service DNS name (the address
# in-cluster k6 is given) through the API server's service proxy: this host may reach none of
# a user's cluster addresses, but wherever kubectl works this does.
prometheus_api() {
  if [[ $1 =~ ^http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.[a-z0-9.-]+)?(:([0-9]+))?/?$ ]]; then
    kubectl get --raw "/api/v1/namespaces/${BASH_REMATCH[2]}/services/http:${BASH_REMATCH[1]}:${BASH_REMATCH[5]:-80}/proxy$2" --request-timeout=3s
  else
    curl -fsS --max-time 2 "${1%/}$2"
  fi
}
# prometheus_query BASE_URL EXPR [TIME]: an instant query's JSON answer (prometheus_api).
prometheus_query() {
  prometheus_api "$1" "/api/v1/query?query=$(jq -rn --arg q "$2" '$q | @uri')${3:+&time=$3}"
}
# prometheus_wait_loaded URL [SECONDS] [ROLE] [NAMESPACE]: until Prometheus has the bench rules
# and scrapes the deploy's pods of ROLE (ingress; backend for a NodePort straight to the
# backends), those of kubectl's NAMESPACE when given: the operator and the kubelet take seconds
# to hand it a new deploy's PodMonitors and rules. A warning, not an error, after SECONDS
# (DEPLOY_TIMEOUT's default, 120): the run's summary then says which signals are missing.
# Exit 0 loaded, 2 warned.
prometheus_wait_loaded() {
  local secs=${2:-120} role=${3:-ingress} ns=${4:-}
  prometheus_api "$1" /api/v1/status/buildinfo >/dev/null 2>&1 ||
    { echo "warning: Prometheus at $1 does not answer from this host: its rules and targets are not waited for" >&2; return 2; }
  loaded() {
    prometheus_api "$1" /api/v1/rules | jq -e '[.data.groups[].name] | index("bench-signals") and index("bench-link")' >/dev/null 2>&1 &&
      prometheus_api "$1" "/api/v1/query?query=$(jq -rn --arg r "$role" '"up{role=\"\($r)\"} == 1" | @uri')" | jq -e '.data.result | length > 0' >/dev/null 2>&1
  }
  # And, for each of the deploy's running pods of that role (not one terminating: a rolling
  # update's old pod still answers its scrape, and a 3 s run on the new one read no CPU limit),
  # two samples of its target (a rate needs two before the run's first second counts) and its
  # CPU rate and limit recorded. Pods scraped for a while have them (no wait); a new pod has
  # them ~5 s after its deploy (the service discovery's 5 s batching, two 2 s scrapes).
  # The pods are read once: the wait comes after the deploy's rollout.
  scraped() {
    prometheus_api "$1" "/api/v1/query?query=$(jq -rn --arg q "count(count by (namespace, pod) ($q))" '$q | @uri')" |
      jq -e --argjson n "$n" '(.data.result[0].value[1] // "0" | tonumber) >= $n' >/dev/null 2>&1
  }
  local pods n q
  pods=$([ -z "$ns" ] || kubectl -n "$ns" get pods -o json 2>/dev/null | jq -r --arg role "$role" '[.items[]
    | select('"$IB_POD_ROLE"' == $role)
    | select(.metadata.deletionTimestamp == null and .status.phase == "Running") | .metadata.name] | join("|")') || pods=
  if [ -z "$pods" ]; then n=1 q="count_over_time(up{role=\"$role\"}[1m]) >= 2"
  else
    n=$(awk -F'|' '{print NF}' <<<"$pods")
    q="count_over_time(up{role=\"$role\",pod=~\"$pods\"}[1m]) >= 2"
    q+=" and on (namespace, pod) bench:${role}_cpu_cores:rate and on (namespace, pod) bench:${role}_cpu_limit:cores"
  fi
  poll "$secs" loaded "$1" && poll 30 scraped "$1" ||
    { echo "warning: Prometheus at $1 has not loaded the bench rules or scraped an $role target after $secs s: the correlation will miss them" >&2; return 2; }
}
# prometheus_wait_link URL [SECONDS]: until Prometheus evaluates the link capacity the deploy
# just declared (the PrometheusRule bench-link-capacity in the current kubectl context, patched
# by deploy.sh). The operator and the config reloader hand a changed rule over in seconds; a
# run started before would be judged against the previous deploy's link (a 1 Gbit/s link read
# as 1.75: the old 10 over the window's first seconds). A warning, not an error, after SECONDS.
prometheus_wait_link() {
  local secs=${2:-120} want
  want=$(kubectl -n ingress-bench get prometheusrule bench-link-capacity -o jsonpath='{.spec.groups[0].rules[0].expr}' 2>/dev/null |
    sed -n 's/^vector(\(.*\))$/\1/p')
  [ -n "$want" ] || return 0
  link_is() {
    prometheus_api "$1" "/api/v1/query?query=bench%3Alink_capacity%3Abits" |
      jq -e --arg w "$want" '.data.result | length == 1 and (.[0].value[1] | tonumber) == ($w | tonumber)' >/dev/null 2>&1
  }
  poll "$secs" link_is "$1" ||
    echo "warning: Prometheus at $1 still evaluates another link capacity than this deploy's ($want bits) after $secs s: NIC utilization is judged against it" >&2
}

# link_capacity_bits SPEED: "10G", "1G", "100M", "2.5G" or bits per second -> bits per second
# (the Kubernetes bandwidth annotations' notation, decimal as NIC speeds are quoted).
link_capacity_bits() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)([KMG]?)$ ]] || die "LINK_CAPACITY must look like 10G, 1G or 100M, got '$1'"
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {m = (u == "G") ? 1e9 : (u == "M") ? 1e6 : (u == "K") ? 1e3 : 1; printf "%.0f\n", n * m}'
}

# live_view PROMETHEUS_URL START_MS END_MS [REFRESH]: the live page's view of this run (its
# testid, variant and scenario; dashboards/live/) from START to END, when that Prometheus serves
# the page (bench/platforms/monitoring/monitoring.sh live_assets); nothing otherwise.
live_view() {
  curl -fsS -o /dev/null --max-time 2 "$1/user/ingress-bench.perses.json" 2>/dev/null || return 0
  jq -rn --arg p "$1" --arg s "$2" --arg e "$3" --arg r "${4:-}" --arg t "$testid" --arg v "$VARIANT" --arg c "$SCENARIO" \
    '"\($p)/user/?start=\($s)&end=\($e)\(if $r == "" then "" else "&refresh=\($r)" end)&var-testid=\($t|@uri)&var-variant=\($v|@uri)&var-scenario=\($c|@uri)"'
}
