# An ingress the suite did not deploy, where it runs (PLATFORM=external with INGRESS_PODS): its
# pods found by the user's selector, its signals read from the user's Prometheus as the signal
# contract's platform "existing" computes them (monitoring/signals.yaml). Nothing of it is
# applied; only reads here. Sourced by bench/lib.sh; no side effects beyond variables.

# existing_platform: an ingress you run is measured on the user's cluster only.
existing_platform() {
  [ "$(pf_trait cluster)" = user ] || die "INGRESS_PODS names an ingress you run on the cluster of PLATFORM=external (KUBECONFIG): set PLATFORM=external"
}

# existing_pods SETTING: the running pods (not terminating) of SETTING's value, NAMESPACE/SELECTOR
# or NAMESPACE/service/NAME (that Service's selector), one "NAMESPACE POD NODE HOSTNETWORK HOSTIP"
# line each; one line and exit 1 when it names none.
existing_pods() {
  local spec=${!1} ns sel json svc
  ns=${spec%%/*} sel=${spec#*/}
  if [[ $sel == service/* ]]; then
    svc=${sel#service/}
    json=$(kubectl -n "$ns" get service "$svc" -o json 2>/dev/null) || die "$1=$spec: no Service $svc in namespace $ns"
    sel=$(jq -r '.spec.selector // {} | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$json")
    [ -n "$sel" ] || die "$1=$spec: Service $svc selects no pods (its endpoints are set by hand): name the pods by a label selector"
  fi
  json=$(kubectl -n "$ns" get pods -l "$sel" -o json 2>&1) || die "$1=$spec: $(head -n1 <<<"$json")"
  jq -er '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running")
    | "\(.metadata.namespace) \(.metadata.name) \(.spec.nodeName) \(.spec.hostNetwork // false) \(.status.hostIP)"] | if length == 0 then null else .[] end' \
    <<<"$json" 2>/dev/null || die "$1=$spec: no running pod in namespace $ns matches $sel"
}

# existing_matcher: existing_pods' lines -> the PromQL label matchers of those pods.
existing_matcher() {
  awk 'NR == 1 {ns = $1} {pods = pods (NR > 1 ? "|" : "") $2} END {printf "namespace=\"%s\", pod=~\"%s\"", ns, pods}'
}

# existing_nodes_matcher: existing_pods' lines -> the PromQL label matcher of their nodes'
# node-exporters: its `instance`, the node's address (kube-prometheus-stack's node-exporter runs
# on the host's network, so its target is the node's IP) or its name (a relabeled instance),
# with or without a port.
existing_nodes_matcher() {
  awk '{n[$5] = 1; n[$3] = 1} END {for (k in n) s = s (s == "" ? "" : "|") k; printf "instance=~\"(%s)(:[0-9]+)?\"", s}' |
    sed 's/\./\\\\./g'
}

# existing_nic_matcher: the device matcher of the nodes' NIC (NODE_NIC): the devices it names,
# or every device but the loopback and those pods, bridges and overlays make.
EXISTING_VIRTUAL_DEVICES='lo|veth.*|docker.*|br-.*|cni.*|cbr.*|virbr.*|flannel.*|cali.*|cilium.*|lxc.*|vxlan.*|genev.*|tunl.*|tun.*|tap.*|kube-.*|weave.*|nodelocaldns|dummy.*|ibench-.*|[a-f0-9]{15}'
existing_nic_matcher() {
  local nic; nic=$(setting NODE_NIC) || exit 1
  if [ -n "$nic" ]; then printf 'device=~"%s"' "$nic"; else printf 'device!~"%s"' "$EXISTING_VIRTUAL_DEVICES"; fi
}

# existing_steady_s INTERVAL: the shortest load with a steady window at that scrape interval,
# as k6/lib/correlation.js steadyMinS(existingTiming(INTERVAL)) reckons it: RAMP_S, the lag of
# the load's first sample (a scrape, or the kubelet's 30 s for an idle container: its
# KUBELET_IDLE_COLLECT_S), three scrapes, one evaluation.
existing_steady_s() {
  local lag=$(($1 > 30 ? $1 : 30))
  echo $((1 + lag + 4 * $1))
}

# existing_interval URL MATCHER: the seconds between the scrapes of those pods' cAdvisor CPU
# counters over the last 5 minutes (the median gap), which the rules' window and interval
# follow; nothing when Prometheus has none of them.
existing_interval() {
  prometheus_query "$1" "container_cpu_usage_seconds_total{$2, container!~\"|POD\"}[5m]" 2>/dev/null |
    jq -r '[.data.result[].values | map(.[0]) as $t | range(1; $t | length) | $t[.] - $t[. - 1]] | sort
      | if length == 0 then empty else .[length / 2 | floor] | round | tostring end'
}

# existing_up: the pods of INGRESS_PODS (and BACKEND_PODS) and the Prometheus that judges them,
# said and checked before anything is applied; exports IB_EXISTING (k6/lib/config.js) for the
# runners in the namespace of ours, and, with DURATION unset, one that holds a steady window at
# this Prometheus's scrape interval; sets EXISTING_COUNTER, the query existing_count reads.
existing_up() {
  local ingress backend='namespace="", pod=""' pods interval bits hostnet steady duration_said name q nodes nic devices
  [ -n "${PROMETHEUS_URL:-}" ] && [ "$(setting MONITORING)" = 1 ] ||
    die "INGRESS_PODS: an existing ingress is judged from your Prometheus: set PROMETHEUS_URL (an address the runners reach, such as http://prometheus-operated.monitoring.svc:9090)"
  prometheus_api "$PROMETHEUS_URL" /api/v1/status/buildinfo >/dev/null 2>&1 ||
    die "INGRESS_PODS: the Prometheus at $PROMETHEUS_URL does not answer (through the API server's service proxy for a Service name)"
  pods=$(existing_pods INGRESS_PODS) || exit 1
  ingress=$(existing_matcher <<<"$pods")
  say existing "ingress $INGRESS_PODS: $(awk '{printf "%s%s on %s", (NR > 1 ? ", " : ""), $2, $3}' <<<"$pods") (the replicas summed)"
  nodes=$(existing_nodes_matcher <<<"$pods") nic=$(existing_nic_matcher)
  hostnet=$(awk '$4 == "true"' <<<"$pods" | wc -l)
  [ "$hostnet" = 0 ] || say existing "$hostnet of its pods use the node's network: cAdvisor has no network counters of their own, so their share of the NIC is not known"
  if [ -n "${BACKEND_PODS:-}" ]; then
    pods=$(existing_pods BACKEND_PODS) || exit 1
    backend=$(existing_matcher <<<"$pods")
    say existing "backends $BACKEND_PODS: $(wc -l <<<"$pods") pods"
  else
    say existing "backends: none named (BACKEND_PODS): their CPU is not in the verdict"
  fi
  interval=$(existing_interval "$PROMETHEUS_URL" "$ingress")
  [ -n "$interval" ] && [ "$interval" -ge 1 ] ||
    die "INGRESS_PODS: the Prometheus at $PROMETHEUS_URL has no cAdvisor CPU series of the ingress's pods (container_cpu_usage_seconds_total{$ingress}): it does not scrape the kubelets' cAdvisor, as kube-prometheus-stack's kubelet ServiceMonitor does"
  steady=$(existing_steady_s "$interval")
  [ -n "${DURATION:-}" ] || { DURATION=$(( (steady + 2 * interval + 9) / 10 * 10 ))s; export DURATION; duration_said="; DURATION $DURATION"; }
  say existing "scraped every $interval s: the rules evaluated every $interval s over $((3 * interval)) s, the first steady evaluation $steady s into the load${duration_said:-}"
  bits=$(link_capacity_bits "${LINK_CAPACITY:-10G}")
  # The NIC: its nodes' devices as their node-exporters count them, all of their traffic (the
  # ingress's share of it is read around the load: existing_nic).
  devices=$(prometheus_query "$PROMETHEUS_URL" "group by (instance, device) (node_network_transmit_bytes_total{$nodes, $nic})" 2>/dev/null |
    jq -r '[.data.result[].metric | "\(.instance) \(.device)"] | join(", ")') || true
  if [ -n "$devices" ]; then
    say existing "NIC: its nodes' devices as node-exporter counts them ($devices), the busiest on each node judged against $(awk -v b="$bits" 'BEGIN {print b / 1e9}') Gbit/s (LINK_CAPACITY): all their traffic, the ingress's share of it said beside"
  else
    say existing "NIC: the Prometheus at $PROMETHEUS_URL has no node-exporter network series of the ingress's nodes ($nodes, $nic): the NIC is not read (NODE_NIC names the devices)"
  fi
  IB_EXISTING=$(jq -cn --argjson i "$interval" --arg in "$ingress" --arg b "$backend" --argjson l "$bits" --arg n "$nodes" --arg d "$nic" \
    '{interval: $i, ingress: $in, backend: $b, loadgen: "namespace=\"ingress-bench\"", link: $l, nodes: $n, nic: $d}')
  export IB_EXISTING
  # The server's count, client = server: its controller's own counter, the first of the
  # contract's list its pods export; else its backends' (the rules' order: the same choice).
  EXISTING_COUNTER=''
  while read -r whose name q; do
    prometheus_query "$PROMETHEUS_URL" "$q" 2>/dev/null | jq -e '.data.result | length > 0' >/dev/null 2>&1 &&
      { EXISTING_COUNTER=$q; break; }
  done < <("$IB_VENV/bin/python" "$IB_ROOT/monitoring/rulefile.py" server-counters "$ingress" "$backend")
  [ -n "$EXISTING_COUNTER" ] ||
    die "INGRESS_PODS: the Prometheus at $PROMETHEUS_URL has no request counter of the ingress's pods that the signal contract knows (ingress-nginx, NGINX Ingress Controller, nginx-prometheus-exporter, Envoy, Traefik, HAProxy: monitoring/README.md), nor of its backends' (BACKEND_PODS: a stub_status exporter, Istio's sidecars): scrape its metrics, or its requests cannot be counted"
  if [ "$whose" = ingress ]; then
    say existing "server count: its pods' $name, read before and after the load (whatever else the ingress serves meanwhile counts too)"
  else
    say existing "server count: its backends' $name (the ingress's pods export no request counter the contract knows), read before and after the load: the requests it passed on, not those it answered itself"
  fi
  # Its CPU as the contract counts it: the seconds used, read around the load as the count is.
  { read -r _ EXISTING_CPU; read -r _ q; } < <("$IB_VENV/bin/python" "$IB_ROOT/monitoring/rulefile.py" ingress-cpu "$ingress")
  # Its CPU series as the contract selects them (the containers it counts): what the scrape
  # after the load is waited on, and whose CFS counters are read.
  EXISTING_CPU_SERIES=$(grep -o 'container_cpu_usage_seconds_total{[^}]*}' <<<"$EXISTING_CPU" | head -n1)
  EXISTING_CORES=$(prometheus_query "$PROMETHEUS_URL" "$q" 2>/dev/null | jq -r '.data.result[0].value[1] // empty') || true
  [ -n "$EXISTING_CORES" ] || EXISTING_CORES=-
  say existing "ingress CPU: ${EXISTING_CORES/#-/unknown} CPUs it may use; the seconds it used read before and after the load, the rate per ingress CPU-second from them"
  existing_rules_check
}

# existing_count AT: the counter existing_up chose, summed over the ingress's pods, as its
# Prometheus read it last at AT (unix seconds). Two reads around a load count the load (and
# anything else the ingress served meanwhile: the summary's client/server says how much).
existing_count() {
  prometheus_query "$PROMETHEUS_URL" "$EXISTING_COUNTER" "$1" 2>/dev/null | jq -r '.data.result[0].value[1] // empty | tonumber | round'
}

# existing_cpu AT: the CPU seconds the ingress's counted containers have used, summed over its
# pods, as its Prometheus read them last at AT; "-" when it has none.
existing_cpu() {
  local v
  v=$(prometheus_query "$PROMETHEUS_URL" "$EXISTING_CPU" "$1" 2>/dev/null | jq -r '.data.result[0].value[1] // empty') || true
  echo "${v:--}"
}

# existing_throttling AT: the CFS periods and the throttled ones of the ingress's counted
# containers (the contract's CPU series' labels), summed over its pods, as its Prometheus read
# them last at AT: "PERIODS/THROTTLED", or "-" when it has none (no CPU quota: nothing to throttle).
existing_throttling() {
  local labels=${EXISTING_CPU_SERIES#container_cpu_usage_seconds_total} p t
  p=$(prometheus_query "$PROMETHEUS_URL" "sum(container_cpu_cfs_periods_total$labels)" "$1" 2>/dev/null | jq -r '.data.result[0].value[1] // empty') || true
  t=$(prometheus_query "$PROMETHEUS_URL" "sum(container_cpu_cfs_throttled_periods_total$labels)" "$1" 2>/dev/null | jq -r '.data.result[0].value[1] // empty') || true
  if [ -n "$p" ] && [ -n "$t" ]; then echo "$p/$t"; else echo -; fi
}

# existing_nic AT: the bytes the ingress's pods sent and received (cAdvisor, their own interfaces)
# and those their nodes' NICs did (node-exporter, the busiest device of each node, as the NIC
# signals), each summed, as its Prometheus read them last at AT: "PODS/NICS", either "none"
# when it has none (pods on the host's network have no counters of their own).
existing_nic() {
  local pods nics ingress nodes nic
  ingress=$(jq -r .ingress <<<"$IB_EXISTING") nodes=$(jq -r .nodes <<<"$IB_EXISTING") nic=$(jq -r .nic <<<"$IB_EXISTING")
  pods=$(prometheus_query "$PROMETHEUS_URL" "sum(container_network_transmit_bytes_total{$ingress, interface=\"eth0\"} + container_network_receive_bytes_total{$ingress, interface=\"eth0\"})" "$1" 2>/dev/null |
    jq -r '.data.result[0].value[1] // empty') || true
  nics=$(prometheus_query "$PROMETHEUS_URL" "sum(max by (instance) (node_network_transmit_bytes_total{$nodes, $nic} + node_network_receive_bytes_total{$nodes, $nic}))" "$1" 2>/dev/null |
    jq -r '.data.result[0].value[1] // empty') || true
  echo "${pods:-none}/${nics:-none}"
}

# existing_scraped_since T: until every series of that counter and of the ingress's CPU has a
# sample taken at T (unix seconds) or later, so that a count read then holds all a load that
# ended before T served (at most 4 scrapes and 5 s: then the count is what was read by then).
existing_scraped_since() {
  local counter=${EXISTING_COUNTER#sum(} tries q i
  tries=$((4 * $(jq -r .interval <<<"$IB_EXISTING") + 5))
  for ((i = 0; i < tries; i += 1)); do
    ((i == 0)) || sleep 1
    # (the CPU series the contract counts, not every container's: cAdvisor stamps an idle
    # container's series, Envoy Gateway's shutdown manager, with its last collection, seconds late)
    for q in "${counter%)}" "$EXISTING_CPU_SERIES"; do
      # (No series at all: the pods are gone, replaced under the load; there is nothing to wait for.)
      prometheus_query "$PROMETHEUS_URL" "min(timestamp($q))" 2>/dev/null |
        jq -e --argjson t "$1" '.data.result | length == 0 or (.[0].value[1] | tonumber >= $t)' >/dev/null 2>&1 || continue 2
    done
    return 0
  done
}

# probe_pod JSON: the requests of JSON ([{method, url, headers}]) sent by k6/probe/probe.js from
# a pod of the runners' image (in REGISTRY first, when given) in namespace ingress-bench (made if
# it is not there; the pod is removed when it ends): its "@@probes" line, the answers in order.
probe_pod() {
  registry_push quiet
  kubectl get namespace ingress-bench >/dev/null 2>&1 || kubectl create namespace ingress-bench >/dev/null ||
    die "could not create namespace ingress-bench on the cluster of KUBECONFIG=$KUBECONFIG"
  # A second after the answers: the runtime copies a pod's output after it ends.
  kubectl -n ingress-bench run "probe-$RANDOM$RANDOM" --image="$(k6_image)" --restart=Never --rm -i --quiet \
    --labels=app.kubernetes.io/part-of=ingress-bench,app.kubernetes.io/component=probe --env="IB_PROBES=$1" \
    --command -- sh -c 'k6 run --quiet --no-color --log-output=none - && sleep 1' <"$IB_ROOT/k6/probe/probe.js" 2>&1 |
    grep -m1 '^@@probes ' || die "the probes' pod failed on the cluster of KUBECONFIG=$KUBECONFIG"
}

existing_probes=20 # the requests existing_target sends

# existing_target: TARGET is the ingress INGRESS_PODS names, before any load: requests sent to
# it from a pod move its pods' counter by at least as many (others' requests only add), once its
# Prometheus holds a scrape after them; one line and exit 1 otherwise.
existing_target() {
  local n=$existing_probes before after reqs answers
  before=$(existing_count "$(date +%s)")
  reqs=$(jq -cn --argjson n "$n" --arg u "${TARGET%/}/" --arg h "$(setting HOST)" '[range($n) | {method: "GET", url: $u, headers: {Host: $h}}]')
  answers=$(probe_pod "$reqs") || exit 1
  # None answered (each one's error the same: refused, no such host, timed out): not an ingress there.
  jq -e 'map(select(.status != null)) | length > 0' <<<"${answers#@@probes }" >/dev/null ||
    die "TARGET $TARGET does not answer from a pod of the cluster: $n requests sent, none answered ($(jq -r '.[0].error' <<<"${answers#@@probes }"))"
  existing_scraped_since "$(date +%s)"
  after=$(existing_count "$(date +%s)")
  [ -n "$before" ] && [ -n "$after" ] && [ $((after - before)) -ge "$n" ] ||
    die "TARGET $TARGET is not the ingress INGRESS_PODS=$INGRESS_PODS names: $n requests sent to it moved its pods' counter by $((${after:-0} - ${before:-0}))"
  say existing "target: $n requests sent to $TARGET, counted by its pods ($((after - before)) in all meanwhile)"
}

# existing_rules_check: with EXISTING_RULES=install (the user's opt-in to rules of ours in
# their Prometheus), that Prometheus can take them from namespace ingress-bench: the Prometheus
# object in the namespace of PROMETHEUS_URL's Service (or the cluster's only one) selects rules
# by labels, from other namespaces than its own; sets EXISTING_RULES_LABELS (the rule's
# labels), EXISTING_RULES_NS (the labels our namespace needs) and EXISTING_RULES_BY (which
# Prometheus). One line and exit 1 otherwise; nothing is made here.
existing_rules_check() {
  local json where n nsel
  EXISTING_RULES_LABELS='' EXISTING_RULES_NAME=''
  [ "$(setting EXISTING_RULES)" = install ] || return 0
  kubectl get crd prometheusrules.monitoring.coreos.com >/dev/null 2>&1 ||
    die "EXISTING_RULES=install: the cluster has no PrometheusRule kind (the Prometheus Operator's, as kube-prometheus-stack installs it): set EXISTING_RULES=query"
  if [[ $PROMETHEUS_URL =~ ^https?://[a-z0-9-]+\.([a-z0-9-]+)\.svc ]]; then
    where="in namespace ${BASH_REMATCH[1]}"
    json=$(kubectl -n "${BASH_REMATCH[1]}" get prometheus -o json 2>/dev/null) || json='{"items": []}'
  else
    where="on the cluster"
    json=$(kubectl get prometheus -A -o json 2>/dev/null) || json='{"items": []}'
  fi
  n=$(jq '.items | length' <<<"$json")
  [ "$n" = 1 ] || die "EXISTING_RULES=install: $n Prometheus objects $where, where one must take the rules: name its Service in PROMETHEUS_URL (http://SERVICE.NAMESPACE.svc:9090), the only Prometheus of its namespace"
  json=$(jq '.items[0]' <<<"$json")
  EXISTING_RULES_BY="Prometheus $(jq -r '.metadata.namespace + "/" + .metadata.name' <<<"$json")"
  jq -e '.spec.ruleSelector != null and (.spec.ruleSelector.matchExpressions // [] | length == 0)' <<<"$json" >/dev/null ||
    die "EXISTING_RULES=install: $EXISTING_RULES_BY selects no PrometheusRule by labels alone (its ruleSelector is unset or has expressions): set EXISTING_RULES=query"
  nsel=$(jq -c '.spec.ruleNamespaceSelector' <<<"$json")
  [ "$nsel" != null ] ||
    die "EXISTING_RULES=install: $EXISTING_RULES_BY reads PrometheusRules from its own namespace only (ruleNamespaceSelector unset), and the suite makes its objects in namespace ingress-bench only: set EXISTING_RULES=query"
  jq -e '.matchExpressions // [] | length == 0' <<<"$nsel" >/dev/null ||
    die "EXISTING_RULES=install: $EXISTING_RULES_BY selects the namespaces of its rules by expressions: set EXISTING_RULES=query"
  EXISTING_RULES_NS=$(jq -r '.matchLabels // {} | to_entries[] | "\(.key)=\(.value)"' <<<"$nsel")
  EXISTING_RULES_LABELS=$(jq -c '.spec.ruleSelector.matchLabels // {} | . + {"app.kubernetes.io/part-of": "ingress-bench"}' <<<"$json")
}

# existing_rules NAME: after existing_rules_check found where, the bench:* rules rendered for
# this ingress (monitoring/rulefile.py existing, each labelled bench_rules=NAME) as the
# PrometheusRule NAME in namespace ingress-bench, until its Prometheus has loaded them;
# IB_EXISTING.rules then names them and the runners read their recorded series. The caller
# removes them when the run ends (existing_rules_remove), and on any exit from here.
existing_rules() {
  local name=$1 secs t0=$SECONDS
  [ -n "$EXISTING_RULES_LABELS" ] || return 0
  # shellcheck disable=SC2086 # one label a word
  [ -z "$EXISTING_RULES_NS" ] || kubectl label namespace ingress-bench --overwrite $EXISTING_RULES_NS >/dev/null
  EXISTING_RULES_NAME=$name
  jq -r '.interval, .ingress, .backend, .loadgen, .link, .nodes, .nic' <<<"$IB_EXISTING" | {
    mapfile -t v
    "$IB_VENV/bin/python" "$IB_ROOT/monitoring/rulefile.py" existing "${v[@]}" "$name"
  } | { printf 'apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: %s\n  namespace: ingress-bench\n  labels: %s\nspec:\n' "$name" "$EXISTING_RULES_LABELS"
        sed 's/^/  /'; } | kubectl apply -f - >/dev/null || die "EXISTING_RULES=install: could not create PrometheusRule ingress-bench/$name"
  secs=$(setting DEPLOY_TIMEOUT)
  loaded() { prometheus_api "$PROMETHEUS_URL" /api/v1/rules | jq -e --arg n "$1" 'any(.data.groups[].rules[]; .labels.bench_rules == $n)'; }
  poll "$secs" loaded "$name" ||
    die "EXISTING_RULES=install: $EXISTING_RULES_BY had not loaded PrometheusRule ingress-bench/$name after $secs s (DEPLOY_TIMEOUT: its operator and config reloader hand rules over), removed: set EXISTING_RULES=query"
  IB_EXISTING=$(jq -c --arg n "$name" '. + {rules: $n}' <<<"$IB_EXISTING")
  say existing "rules: PrometheusRule ingress-bench/$name, loaded by $EXISTING_RULES_BY in $((SECONDS - t0)) s: the runners read its recorded series; removed when the run ends"
}

# existing_rules_remove: the PrometheusRule existing_rules made, if any.
existing_rules_remove() {
  [ -n "$EXISTING_RULES_NAME" ] || return 0
  kubectl -n ingress-bench delete prometheusrule "$EXISTING_RULES_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
