#!/usr/bin/env bash
# bench/platforms/deploy.sh: apply overlay $VARIANT (default nginx-lb-default) to the platform's
# cluster and wait until its ingress answers. Prints the ingress address (IP, or IP:PORT for
# a NodePort; with --for-pods a Service DNS name) on stdout for bench/run/bench.sh.
#   PLATFORM=local     the cluster of bench/platforms/local/cluster.sh
#   PLATFORM=external  the cluster of $KUBECONFIG, only with ALLOW_EXTERNAL_CLUSTER=1
#   IMAGE_SET          local (this machine's builds; the local platform's default) or upstream
#                      (the pinned registry images; the external default), see bench/lib.sh
# Switching overlays removes the previous one's objects first, so two controllers never
# share the namespace, but for those the new one takes over as they are (most often the
# backends); the same overlay again, deployed whole and ready, is not applied again.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

# --for-pods: the address is for the cluster's k6 pods (bench/run/distributed.sh), not this host.
for_pods=0; [ "${1:-}" != --for-pods ] || for_pods=1
OVERLAY=${VARIANT:-$DEFAULT_OVERLAY}
PLATFORM=$(platform) || exit 1
DEPLOY_TIMEOUT=$(setting DEPLOY_TIMEOUT)
NS=ingress-bench                     # kustomize/base namespace
HOST_HEADER=$(setting HOST)

need_overlay "$OVERLAY"
images=$(image_set) || exit 1
MONITORING=$(setting MONITORING)
setting LINK_CAPACITY >/dev/null
release=$(setting PROMETHEUS_RELEASE) || exit 1
[ "$MONITORING" = 1 ] || release=''
ingress_cpu=$(setting INGRESS_CPU) || exit 1
case $ingress_cpu in auto | probe | overlay) ingress_cpu='' ;; esac # a probe's is bench.sh's to run (auto, probe)
# Whose cluster (the platform's trait): ours (its nodes' containerd, kube-proxy rules and pods'
# links are ours to read and shape), a user's, or none.
cluster=$(pf_trait cluster "$PLATFORM")
case "$cluster" in
  own)
    export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
    # (A run's deploy: the run checked the cluster and its monitoring moments ago.)
    [ -n "${IB_CLUSTER_CHECKED:-}" ] || bash "$IB_ROOT/bench/platforms/local/cluster.sh" status >/dev/null 2>&1 ||
      die "the local cluster is not up: run './task cluster:up'"
    # A Gateway API variant's CRDs and its controller's images (bench/lib/gateway.sh): from
    # this host, which reaches the module proxy (the client node reaches only the cluster).
    gateway_up "$OVERLAY"
    # The host has no route into it: the rest from the client node.
    ns=$(client_netns)
    [ -z "$ns" ] || in_netns "$ns" || exec nsenter --net="$ns" bash "$0" "$@" ;;
  user)
    need_external_cluster "deploys into"
    gateway_up "$OVERLAY" ;;
  *) die "PLATFORM=$PLATFORM has no cluster to deploy into" ;;
esac

if [ "$MONITORING" = 1 ] && ! kubectl get crd podmonitors.monitoring.coreos.com >/dev/null 2>&1; then
  die "the cluster has no Prometheus Operator CRDs for the monitoring component: run './task monitoring:up' (local) or install kube-prometheus-stack, or set MONITORING=0"
fi

# Render: the overlay as it is, plus monitoring (its sidecars, PodMonitors, rules) and the
# platform's image override, which must come last to see the sidecars' images.
extra=()
[ "$MONITORING" = 1 ] && extra+=("$IB_ROOT/kustomize/components/monitoring")
# Our cluster's nodes carry their roles (bench/platforms/local/nodes.sh): each workload on its own.
[ "$cluster" != own ] || extra+=("$IB_ROOT/kustomize/components/placement-roles")
# On our cluster of several nodes the ingress's node is its CPU budget: without INGRESS_CPU its
# container may use every CPU of that node (the limit) and asks for what leaves its metrics
# sidecar room (the request), no quota below the node's.
# An LB proxying to the backends' NodePort asks the backends' nodes (components/nginx-lb lb.sh),
# as seed 003's LB asked its cluster's, not its own node, which has no backend.
node_cpus='' backend_nodes=''
if [ "$cluster" = own ] && [ "$(kubectl get nodes -o name | wc -l)" -gt 1 ]; then
  [ -n "$ingress_cpu" ] || node_cpus=$(kubectl get nodes -l ingress-bench/role-ingress=true -o jsonpath='{.items[0].status.capacity.cpu}')
  backend_nodes=$(kubectl get nodes -l ingress-bench/role-backends=true -o jsonpath='{.items[*].status.addresses[?(@.type=="InternalIP")].address}')
fi
[ "$images" = upstream ] || extra+=("$IB_ROOT/kustomize/components/images-local")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# cpu_patches REQUEST LIMIT: the ingress container's CPU where a variant sets it: the first
# container of our ingress Deployment, or the proxies' of a Gateway's EnvoyProxy (the
# controller makes their Deployment from it).
cpu_patches() {
  local t
  for t in 'kind: Deployment, labelSelector: app.kubernetes.io/component=ingress|/spec/template/spec/containers/0/resources' \
           'kind: EnvoyProxy|/spec/provider/kubernetes/envoyDeployment/container/resources'; do
    printf '  - target: { %s }\n    patch: |\n      - { op: add, path: %s/requests/cpu, value: "%s" }\n      - { op: add, path: %s/limits/cpu, value: "%s" }\n' "${t%|*}" "${t#*|}" "$1" "${t#*|}" "$2"
  done
}
render() { # [LINK_CAPACITY_BITS]
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "resources: [$(realpath --relative-to="$work" "$IB_ROOT/overlays/$OVERLAY")]"
    [ ${#extra[@]} = 0 ] || echo "components: [$(for c in "${extra[@]}"; do realpath --relative-to="$work" "$c"; done | paste -sd,)]"
    [ -n "${1:-}" ] || [ -n "$release" ] || [ -n "$ingress_cpu$node_cpus$backend_nodes" ] && echo "patches:"
    [ -z "$backend_nodes" ] || printf '  - target: { kind: Deployment, name: nginx-lb }\n    patch: |\n      - { op: add, path: /spec/template/spec/containers/0/env/-, value: { name: BACKEND_NODE_IPS, value: "%s" } }\n' "$backend_nodes"
    # INGRESS_CPU: the ingress container's CPU, request = limit (whole cores: pinned by the
    # static CPU manager; a fraction: a CFS quota), the overlay's other settings as they are.
    [ -z "$ingress_cpu" ] || cpu_patches "$ingress_cpu" "$ingress_cpu"
    [ -z "$node_cpus" ] || cpu_patches "$((node_cpus * 1000 - 100))m" "$node_cpus"
    # The link capacity NIC utilization is judged against (bench:link_capacity:bits).
    [ -z "${1:-}" ] || printf '  - target: { kind: PrometheusRule, name: bench-link-capacity }\n    patch: |\n      - { op: replace, path: /spec/groups/0/rules/0/expr, value: "vector(%s)" }\n' "$1"
    # A kube-prometheus-stack with the chart's default selectors picks monitors and rules by
    # its release's label only.
    local kind; [ -z "$release" ] || for kind in PodMonitor PrometheusRule; do
      printf '  - target: { kind: %s }\n    patch: |\n      - { op: add, path: /metadata/labels/release, value: "%s" }\n' "$kind" "$release"
    done
  } >"$work/kustomization.yaml"
  kustomize build --load-restrictor LoadRestrictionsNone "$work" >"$work/manifest.yaml" 2>"$work/err" ||
    die "overlay $OVERLAY does not build: $(head -n1 "$work/err")"
}
render
# The overlay's bandwidth emulation (components/link-1g), if any.
shaped=$(awk '$1 == "kubernetes.io/egress-bandwidth:" {print $2; exit}' "$work/manifest.yaml" | tr -d '"')
if [ "$MONITORING" = 1 ]; then
  # Declared: LINK_CAPACITY, else the overlay's bandwidth emulation, else the rule's default.
  capacity=${LINK_CAPACITY:-$shaped}
  [ -z "$capacity" ] || render "$(link_capacity_bits "$capacity")"
fi

# A previous overlay's objects go first (its controller would otherwise serve too), but for
# those the new one takes over (bench/platforms/stale_objects.py), most often the backends.
# (With or without monitoring counts as another overlay: the sidecars come and go. So does
# another INGRESS_CPU: a rolling update would schedule the new pod beside the old one, and
# on a small node a whole core more does not fit.) Its PodMonitors and PrometheusRules stay
# until the new overlay is applied (prune_monitoring): every overlay has the same ones, and a
# deleted and re-created monitor is a new scrape configuration for the operator to write and
# Prometheus to reload (18 s here, per switch of overlay), where a kept one finds the new pods
# by service discovery alone.
deployed=$OVERLAY; [ "$MONITORING" = 1 ] && deployed+=" +monitoring"; [ -z "$ingress_cpu" ] || deployed+=" +cpu=$ingress_cpu"
# What is deployed: the overlay (as above) and a stamp of the manifest a deploy last completed
# with and of its objects as that deploy left them. The stamp is removed when an apply starts
# and written once it has succeeded: it names a manifest applied whole, and a scale, a
# restart or an edit of ours since (bench:change makes them) changes what it reads.
digest=$(sha256sum "$work/manifest.yaml" | cut -c1-32)
IFS=$'\t' read -r current stamp < <(kubectl get ns "$NS" -o jsonpath='{.metadata.annotations.ingress-bench/variant}{"\t"}{.metadata.annotations.ingress-bench/manifest}{"\n"}' 2>/dev/null) || true
# objects: the stamp's second half (Deployments by generation, which their status does not
# move, the rest by resourceVersion) and whether every Deployment is ready and up to date.
objects() {
  local json; json=$(kubectl -n "$NS" get deploy,svc,configmap,ingress -l app.kubernetes.io/part-of=ingress-bench -o json) || return 1
  jq -r '.items[] | "\(.kind)/\(.metadata.name)@\(if .kind == "Deployment" then .metadata.generation else .metadata.resourceVersion end)"' <<<"$json" |
    sort | sha256sum | cut -c1-32
  jq -r '[.items[] | select(.kind == "Deployment")] | length > 0 and all(.[]; .status.observedGeneration == .metadata.generation
    and ([.spec.replicas, .status.replicas, .status.updatedReplicas, .status.readyReplicas, .status.availableReplicas] | unique | length) == 1)' <<<"$json"
}
# The same manifest, its objects as the last deploy left them and ready: nothing to apply.
# Applying it again would change nothing and cost two applies and a rollout wait per
# Deployment (3 s a run here, on each run of a matrix's rounds).
unchanged() {
  [ -n "$stamp" ] && [ "$current" = "$deployed" ] && [ "${stamp%% *}" = "$digest" ] || return 1
  local seen; seen=$(objects 2>/dev/null | paste -sd' ') || return 1
  [ "$seen" = "${stamp#* } true" ]
}
same=0; unchanged && same=1
# No registry here: every image must already be in the node's containerd, or the pods would
# sit in ImagePullBackOff. Say which overlay cannot run locally before applying anything (a
# manifest deployed whole already was checked by the deploy that applied it).
if [ "$same" = 0 ] && [ "$cluster" = own ] && [ "$images" = local ]; then
  have=$(local_images)
  for img in $(manifest_images "$work/manifest.yaml"); do
    grep -qx "$img" <<<"$have" || grep -qx "docker.io/$img" <<<"$have" ||
      die "image $img of overlay $OVERLAY is not on the local node and no registry is reachable: it validates ('./task lint') but cannot run here"
  done
fi
if [ "$same" = 0 ] && [ -n "$current" ] && [ "$current" != "$deployed" ]; then
  # Only what the new manifest cannot take over as it is (bench/platforms/stale_objects.py): the
  # backends most overlays share keep running, or roll.
  kinds=all,configmap,ingress,serviceaccount,role,rolebinding gateways=''
  ! kubectl get crd gateways.gateway.networking.k8s.io >/dev/null 2>&1 || gateways=gateway,httproute
  ! kubectl get crd envoyproxies.gateway.envoyproxy.io >/dev/null 2>&1 || gateways+=,envoyproxy
  ! kubectl get crd nginxproxies.gateway.nginx.org >/dev/null 2>&1 || gateways+=,nginxproxy
  # Read first, then compared: a failed read once reached the comparison as empty input, and
  # its error line was the parser's, not kubectl's.
  live=$(kubectl get "$kinds${gateways:+,$gateways}" -n "$NS" -o json 2>"$work/err") ||
    die "could not read overlay $current's objects to compare them with $OVERLAY's: $(tail -n1 "$work/err")"
  stale=$("$IB_VENV/bin/python" "$IB_ROOT/bench/platforms/stale_objects.py" "$work/manifest.yaml" <<<"$live" 2>"$work/err") ||
    die "could not compare overlay $current's objects with $OVERLAY's: $(tail -n1 "$work/err")"
  say deploy "removing overlay $current: $(wc -w <<<"$stale") objects $OVERLAY does not take over${stale:+ ($(paste -sd' ' <<<"$stale"))}"
  # A Gateway's routes and the Gateway first, while its controller runs: the controller then
  # removes the proxies it made for it, and its finalizers (it holds one on the class while a
  # Gateway uses it).
  routed=$(grep -E '^(gateway|httproute)/' <<<"$stale" || true)
  # shellcheck disable=SC2086 # one name a word
  [ -z "$routed" ] || kubectl -n "$NS" delete $routed --ignore-not-found --wait --timeout=60s >/dev/null
  # Its proxies now, not after their graceful drain (Envoy Gateway's waits up to 6 min for
  # connections such as the scrapes' to end): no run is on them, and the new ingress needs
  # their node's CPU. (Labelled by the Gateway's infrastructure labels: ours.)
  if [ -n "$routed" ]; then
    kubectl -n "$NS" delete deploy,svc -l ingress-bench/role=ingress --ignore-not-found --wait=false >/dev/null
    kubectl -n "$NS" delete pod -l ingress-bench/role=ingress --grace-period=1 --ignore-not-found --wait --timeout=60s >/dev/null
  fi
  # Its class, unless the new overlay has the same (name and controller: the latter cannot
  # change): a class a Gateway still uses is never released by its controller's finalizer.
  if [ -n "$gateways" ]; then
    keep=$("$IB_VENV/bin/python" -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "GatewayClass": print(d["metadata"]["name"], d["spec"]["controllerName"])' "$work/manifest.yaml")
    for gc in $(kubectl get gatewayclass -l "app.kubernetes.io/part-of=ingress-bench,ingress-bench/variant=${current%% *}" \
                  -o jsonpath='{range .items[*]}{.metadata.name}={.spec.controllerName}{" "}{end}'); do
      grep -qx "${gc%%=*} ${gc#*=}" <<<"$keep" || kubectl delete gatewayclass "${gc%%=*}" --wait --timeout=60s >/dev/null
    done
  fi
  stale=$(grep -vxF -f <(printf '%s\n' $routed) <<<"$stale" || true)
  # shellcheck disable=SC2086 # one name a word
  [ -z "$stale" ] || kubectl -n "$NS" delete $stale --ignore-not-found --wait --timeout=60s >/dev/null
  kubectl delete clusterrole,clusterrolebinding,ingressclass -l "app.kubernetes.io/part-of=ingress-bench,ingress-bench/variant=${current%% *}" >/dev/null 2>&1 || true
  # Envoy Gateway's certificates, which its certgen Job made (its chart's label), with it.
  ! grep -qx deployment/envoy-gateway <<<"$stale" || kubectl -n "$NS" delete secret -l control-plane=envoy-gateway --ignore-not-found >/dev/null
  # NGINX Gateway Fabric's, which its certificate Job made (by the names its flags give them).
  ! grep -qx deployment/nginx-gateway <<<"$stale" || kubectl -n "$NS" delete secret server-tls agent-tls --ignore-not-found >/dev/null
fi
# prune_monitoring: the PodMonitors and PrometheusRules of ours that the applied overlay has not.
prune_monitoring() {
  kubectl get crd podmonitors.monitoring.coreos.com >/dev/null 2>&1 || return 0
  local ours mine
  # (An assignment's failing command would end the script without a word: each says why.)
  ours=$(kubectl -n "$NS" get podmonitor,prometheusrule -l app.kubernetes.io/part-of=ingress-bench -o name 2>"$work/err") ||
    die "cannot list the monitoring objects of $NS: $(head -n1 "$work/err")"
  mine=$(kubectl get -f "$work/manifest.yaml" -o name --ignore-not-found 2>"$work/err") ||
    die "cannot read back the objects of $OVERLAY: $(head -n1 "$work/err")"
  ours=$(grep -vxF -f <(printf '%s\n' "$mine") <<<"$ours" || true)
  # shellcheck disable=SC2086 # one name a word
  [ -z "$ours" ] || kubectl -n "$NS" delete $ours --wait --timeout=60s >/dev/null
}

# The namespace first, then the TLS Secrets the ingress needs: RSA-2048 as seed 002 (tls.crt,
# tls.key, what every controller reads) and P-256 beside it (ecdsa.crt, ecdsa.key: nginx-lb's
# ecdsa knob), generated here for each new namespace, never committed; and the P-256 pair
# alone as a Secret of its own (ingress-tls-ecdsa: a Gateway listener's certificate is a
# Secret's tls.crt and tls.key, components/envoy-gateway-ecdsa).
[ "$same" = 1 ] || kubectl apply -f - >/dev/null <<<"$(awk 'BEGIN{RS="---"} /\nkind: Namespace\n/' "$work/manifest.yaml")"
if [ -z "$(kubectl -n "$NS" get secret ingress-tls-ecdsa -o name 2>/dev/null)" ]; then
  make_certs "$work/tls" "$HOST_HEADER"
  kubectl -n "$NS" delete secret ingress-tls ingress-tls-ecdsa --ignore-not-found >/dev/null
  # shellcheck disable=SC2046 # one option a word
  kubectl -n "$NS" create secret generic ingress-tls --type=kubernetes.io/tls \
    $(for f in tls.crt tls.key ecdsa.crt ecdsa.key; do echo "--from-file=$f=$work/tls/$f"; done) >/dev/null
  kubectl -n "$NS" create secret tls ingress-tls-ecdsa --cert="$work/tls/ecdsa.crt" --key="$work/tls/ecdsa.key" >/dev/null
fi
if [ "$same" = 1 ]; then say deploy "overlay $OVERLAY → $PLATFORM: deployed already, ready"; else say deploy "overlay $OVERLAY → $PLATFORM"; fi
# Ready, or the reason a pod is not: one line.
rollout() { # SELECTOR: wait for the matching Deployments
  local d; for d in $(kubectl -n "$NS" get deploy -l "$1" -o name); do
    kubectl -n "$NS" rollout status "$d" --timeout="${DEPLOY_TIMEOUT}s" >/dev/null 2>&1 ||
      die "$d not ready after ${DEPLOY_TIMEOUT}s: $(pod_problem "$NS" "${d#*/}")"
  done
}
apply() { # [SELECTOR]
  # (A selector no object matches is not a failure: a Gateway's proxies are its controller's.)
  kubectl apply ${1:+-l "$1"} -f "$work/manifest.yaml" >/dev/null 2>"$work/err" || grep -q 'no objects passed to apply' "$work/err" ||
    die "kubectl apply of $OVERLAY failed: $(head -n1 "$work/err")"
}
# Backends first, the ingress once they serve: an LB that resolves its upstreams when it
# starts (components/path-lb-pods) then sees every backend pod.
if [ "$same" = 0 ]; then
  kubectl annotate ns "$NS" --overwrite "ingress-bench/variant=$deployed" ingress-bench/manifest- >/dev/null
  apply 'app.kubernetes.io/component!=ingress' # (also every object without the label)
  rollout 'app.kubernetes.io/component!=ingress'
  # ... and once the headless Services it resolves list every ready pod: their endpoints follow
  # the pods' readiness by a moment (the EndpointSlice controller, then CoreDNS's watch), and an
  # LB started in that moment kept nine of ten pods.
  if grep -q 'ingress-bench/upstreams: resolved-at-start' "$work/manifest.yaml"; then
    listed() { # the headless Services whose ready endpoints are not their ready pods yet
      local svc sel; while read -r svc sel; do
        [ "$(kubectl -n "$NS" get endpointslices -l "kubernetes.io/service-name=$svc" -o json | jq '[.items[].endpoints[]? | select(.conditions.ready)] | length')" = \
          "$(kubectl -n "$NS" get pods -l "$sel" -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length')" ] || echo "$svc"
      done < <(kubectl -n "$NS" get svc -o json | jq -r '.items[] | select(.spec.clusterIP == "None" and .spec.selector) | "\(.metadata.name) \(.spec.selector | to_entries | map("\(.key)=\(.value)") | join(","))"')
    }
    for _ in $(seq $((DEPLOY_TIMEOUT * 2))); do left=$(listed); [ -n "$left" ] || break; sleep 0.5; done
    [ -z "$left" ] || die "the headless Services $(paste -sd' ' <<<"$left") do not list their ready pods after ${DEPLOY_TIMEOUT}s"
  fi
  # An ingress that reads its backends' addresses as it starts (components/path-lb-pods) and
  # that this apply did not roll (its revision, once the rollout settled, is the one before)
  # would keep the old ones: its pods are replaced (deleted: a rolling restart would schedule
  # the new pod beside the old, and a second whole core does not fit a small node).
  revisions() { kubectl -n "$NS" get deploy -l app.kubernetes.io/component=ingress -o jsonpath='{range .items[?(@.metadata.annotations.ingress-bench/upstreams=="resolved-at-start")]}{.metadata.name}={.metadata.annotations.deployment\.kubernetes\.io/revision}{" "}{end}' 2>/dev/null; }
  before=$(revisions) || die "cannot read the revisions of $OVERLAY's ingress"
  apply app.kubernetes.io/component=ingress
  prune_monitoring
  rollout app.kubernetes.io/component=ingress
  for d in $before; do
    grep -qw -- "$d" <<<"$(revisions)" || continue
    kubectl -n "$NS" delete pod -l "$(kubectl -n "$NS" get deploy "${d%=*}" -o go-template='{{range $k, $v := .spec.selector.matchLabels}}{{$k}}={{$v}},{{end}}' | sed 's/,$//')" --wait=false >/dev/null
    rollout app.kubernetes.io/component=ingress
  done
fi
# A Gateway's proxies are its controller's to make (labelled by the Gateway's infrastructure
# labels, components/gateway-api): ready once the controller reports the Gateway programmed
# and their Deployment has rolled out.
if grep -q '^kind: Gateway$' "$work/manifest.yaml"; then
  kubectl -n "$NS" wait --for=condition=Programmed gateway --all --timeout="${DEPLOY_TIMEOUT}s" >/dev/null 2>&1 ||
    die "the Gateway is not programmed after ${DEPLOY_TIMEOUT}s: $(kubectl -n "$NS" get gateway -o jsonpath='{.items[0].status.conditions[?(@.type=="Programmed")].message}' 2>/dev/null || echo 'no status')"
  rollout ingress-bench/role=ingress
fi
[ "$same" = 1 ] || kubectl annotate ns "$NS" --overwrite "ingress-bench/manifest=$digest $(objects | head -n1)" >/dev/null
# Settled: no pod still terminating. A rollout is complete once the old ReplicaSet is scaled
# to none, while its pods may still be shutting down on a busy node, taking CPU and holding
# connections beside the run's; a pod a change deleted does the same.
terminating=$(kubectl -n "$NS" get pods -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}pod/{.metadata.name}{" "}{end}') ||
  die "cannot list the pods of namespace $NS"
[ -z "$terminating" ] || kubectl -n "$NS" wait --for=delete $terminating --timeout="${DEPLOY_TIMEOUT}s" >/dev/null 2>&1 ||
  die "pods still terminating after ${DEPLOY_TIMEOUT}s: $terminating"

# The CNI bandwidth plugin shapes with a token bucket whose burst containerd sets to 2^32 bits
# (512 MiB): after 4 s idle the first 512 MB pass at full speed, so a short run reads more
# than the link's rate. A NIC has no such allowance: on our own nodes the burst
# becomes 1 MiB (8 ms at 1 Gbit/s; tbf must hold a 64 KB GSO segment). Only our pods' devices
# in their nodes' namespaces (cluster.sh pod-links), never a tbf of the host's. (On users'
# clusters the burst stays: see components/link-1g.)
if [ "$cluster" = own ] && [ -n "$shaped" ]; then
  while read -r netns dev; do
    net=(nsenter --net="$netns")
    rate=$("${net[@]}" tc qdisc show dev "$dev" root | awk '$2 == "tbf" {for (i = 1; i < NF; i++) if ($i == "rate") print $(i + 1)}')
    [ -z "$rate" ] || "${net[@]}" tc qdisc change dev "$dev" root handle 1: tbf rate "$rate" burst 1mb latency 25ms ||
      die "could not set the link emulation's burst on $dev"
  done < <(bash "$IB_ROOT/bench/platforms/local/cluster.sh" pod-links)
fi

# The ingress: the Service labelled app.kubernetes.io/component=ingress (the controller's,
# nginx-lb's, or a NodePort of an exposure path), or a Gateway's proxies' (ingress-bench/role). Its address for the load: ClusterIP, or
# node address:nodePort for a NodePort Service.
svc=$(kubectl -n "$NS" get svc -l app.kubernetes.io/component=ingress -o jsonpath='{.items[*].metadata.name}')
[ -n "$svc" ] || svc=$(kubectl -n "$NS" get svc -l ingress-bench/role=ingress -o jsonpath='{.items[*].metadata.name}')
svc=${svc%% *}
[ -n "$svc" ] || die "overlay $OVERLAY has no Service labelled app.kubernetes.io/component=ingress (nor a Gateway's, ingress-bench/role=ingress)"
read -r svc_type cluster_ip node_port < <(kubectl -n "$NS" get svc "$svc" -o jsonpath='{.spec.type} {.spec.clusterIP} {.spec.ports[?(@.name=="http")].nodePort}{"\n"}') ||
  die "cannot read Service $svc of namespace $NS"
if [ "$svc_type" = NodePort ]; then
  addr=$(kubectl get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}'):$node_port
elif [ "$for_pods" = 1 ]; then
  # The pods' own name for it: a user's service range is unknown here, and may not be reachable.
  addr=$svc.$NS.svc
else
  addr=$cluster_ip
fi
if [ "$for_pods" = 1 ]; then
  # This host may reach none of the cluster's addresses: ready when the Service has a ready
  # endpoint (the k6 pods' setup() then waits for the first 200 themselves).
  ready_endpoint() { [ -n "$(kubectl -n "$NS" get endpointslices -l "kubernetes.io/service-name=$svc" -o jsonpath='{.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}')" ]; }
  poll "$DEPLOY_TIMEOUT" ready_endpoint || die "ingress $svc has no ready endpoint after ${DEPLOY_TIMEOUT}s"
  say deploy "ingress $svc ready, for pods at http://$addr/"
else
  # ?deploy: the access log tells this request from a run's (bench:change counts the run's).
  # Ready pods are not yet a path: kube-proxy programs a new Service's address (the LB's, and
  # the backends' it forwards to) in its own time, over 10 s on a busy 2-CPU node. On our node
  # nothing is sent to a Service before kube-proxy's rule for it is there: this host routes
  # the service range onto the bridge, and a SYN sent before (ours, or the LB's to a backend
  # Service) leaves a conntrack entry without the DNAT for 120 s; a new connection of a run
  # that drew the same source port then went to no one ("no route to host" after 3 s). A run
  # with a new connection per request goes through every source port in seconds.
  if [ "$cluster" = own ]; then
    # The namespace's Services with a ready endpoint: their ClusterIP and their NodePorts.
    rules=$(kubectl -n "$NS" get svc,endpointslices -o json | jq -r '
      (.items | map(select(.kind == "EndpointSlice" and any(.endpoints[]?; .conditions.ready))
        | .metadata.labels["kubernetes.io/service-name"])) as $ready
      | .items[] | select(.kind == "Service" and .spec.clusterIP != "None" and (.metadata.name as $n | $ready | index($n)))
      | "-d \(.spec.clusterIP)/32 ", (.spec.ports[] | select(.nodePort) | "--dport \(.nodePort) ")')
    programmed() {
      local nat r; nat=$(iptables -w -t nat -S)
      while IFS= read -r r; do [ -z "$r" ] || grep -qF -- "$r" <<<"$nat" || return 1; done <<<"$rules"
    }
    poll "$DEPLOY_TIMEOUT" programmed ||
      die "kube-proxy has not programmed the Services of $OVERLAY after ${DEPLOY_TIMEOUT}s (iptables -t nat -S lacks one of: $(paste -sd, <<<"$rules"))"
  fi
  poll "$DEPLOY_TIMEOUT" http_ok "http://$addr/1kb.bin?deploy" -H "Host: $HOST_HEADER" ||
    die "ingress $svc ($addr) does not answer 200 for /1kb.bin after ${DEPLOY_TIMEOUT}s (last: $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -H "Host: $HOST_HEADER" "http://$addr/1kb.bin?deploy"))"
  say deploy "ingress $svc answering at http://$addr/"
fi
echo "$addr"
