# Kubernetes platforms: consent for a user's cluster, images, pods' problems and cgroups.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# The monitoring side's images on the local cluster (bench/platforms/local/images.sh monitoring
# builds them): either stack's, and the monitoring component's sidecar.
IB_MONITORING_IMAGES="prometheus-$PROMETHEUS_VERSION prometheus-operator-$PROMETHEUS_OPERATOR_VERSION prometheus-config-reloader-$PROMETHEUS_OPERATOR_VERSION node-exporter-$NODE_EXPORTER_VERSION nginx-prometheus-exporter-${NGINX_EXPORTER_IMAGE##*:}"
# need_external_cluster VERB: PLATFORM=external's consent (ALLOW_EXTERNAL_CLUSTER=1 and an
# explicit KUBECONFIG) and a cluster that answers, or one line; VERB: what is done there.
need_external_cluster() {
  [ "${ALLOW_EXTERNAL_CLUSTER:-}" = 1 ] || die "PLATFORM=external $1 the cluster of \$KUBECONFIG: set ALLOW_EXTERNAL_CLUSTER=1 to confirm"
  [ -n "${KUBECONFIG:-}" ] || die "PLATFORM=external needs KUBECONFIG set explicitly (the current context is never used by accident)"
  kubectl get --raw /readyz --request-timeout=5s >/dev/null 2>&1 || die "the cluster of KUBECONFIG=$KUBECONFIG does not answer"
}
# remove_monitoring_stack KUBELET_SERVICE: on the local cluster, a monitoring stack's
# namespace, its operator's kubelet Service in kube-system (not the stack's own object: it
# outlives it, and the next stack's kubelet monitor would scrape every kubelet twice, failing
# the rules' joins) and, last, the operator's CRDs (with every PodMonitor and rule).
remove_monitoring_stack() {
  kubectl delete ns monitoring --ignore-not-found --wait --timeout=90s >/dev/null 2>&1 || true
  kubectl -n kube-system delete service "$1" --ignore-not-found >/dev/null 2>&1 || true
  kubectl get crd -o name 2>/dev/null | grep '\.monitoring\.coreos\.com$' | xargs -r kubectl delete --wait --timeout=60s >/dev/null 2>&1 || true
}
# import_images NAME...: the cached image archives $IB_CACHE/images/NAME.tar into every node's
# containerd (no registry: every image of the local cluster comes this way), the nodes at once
# (each import mostly waits on its unpacking: one node after another took 4 nodes 16 s);
# import_images_to SOCKET NAME...: into one.
import_images() {
  local sock jobs=()
  for sock in "$IB_CLUSTER_STATE"/nodes/*/containerd/containerd.sock; do
    [ -S "$sock" ] || continue
    import_images_to "$sock" "$@" & jobs+=($!)
  done
  [ ${#jobs[@]} -gt 0 ] || die "the local cluster has no containerd to import images into: run './task cluster:up'"
  wait_all "${jobs[@]}" || die "ctr could not import the images $* into every node"
}
# wait_all PID...: wait for every one of them; 1 when any failed (each said why).
wait_all() {
  local p rc=0
  for p in "$@"; do wait "$p" || rc=1; done
  return $rc
}
import_images_to() {
  local b sock=$1; shift
  for b in "$@"; do
    ctr -a "$sock" -n k8s.io images import --no-unpack=false "$IB_CACHE/images/$b.tar" >/dev/null || die "ctr could not import image $b"
  done
}
# IMAGE_SET: which images a cluster runs. "upstream": the pins of components/images and
# K6_IMAGE_UPSTREAM, from their registries; "local": this machine's builds (bench/platforms/local/images.sh,
# components/images-local). The local platform runs local builds; an external cluster
# upstream images unless told otherwise (a cluster that was given our builds).
image_set() {
  local s; s=$(setting IMAGE_SET) || exit 1
  [ -n "$s" ] || s=$([ "$(pf_trait cluster)" = own ] && echo local || echo upstream)
  echo "$s"
}
# The runners' k6: with REGISTRY, this machine's build (the project's engine) as pushed there
# (registry_push); else by IMAGE_SET.
k6_image() {
  if [ -n "${REGISTRY:-}" ]; then echo "${REGISTRY#http://}/ingress-bench-k6:$K6_LOCAL_TAG"
  elif [ "$(image_set)" = local ]; then echo "$K6_IMAGE_NAME:$K6_LOCAL_TAG"
  else echo "$K6_IMAGE_UPSTREAM"; fi
}
# k6_is_upstream: the runners run Grafana's stock k6 (no native engine in it).
k6_is_upstream() { [ -z "${REGISTRY:-}" ] && [ "$(image_set)" = upstream ]; }
# registry_platform: REGISTRY is for a user's cluster (the local cluster's nodes hold our builds).
registry_platform() {
  setting REGISTRY >/dev/null || exit 1
  [ -z "${REGISTRY:-}" ] || [ "$(pf_trait cluster)" = user ] ||
    die "REGISTRY puts the project's k6 image where a cluster of yours pulls from (PLATFORM=external): PLATFORM=$PLATFORM's runners have it already; unset it"
}
# registry_push [quiet]: with REGISTRY, the runners' image there before anything runs on the
# cluster: this machine's k6 image (bench/platforms/local/images.sh k6) copied by skopeo with
# the user's own credentials and configuration (skopeo login, registries.conf), once per build
# (its tag is its sources' hash: an image already there is not sent again, nor said when
# quiet); one line and exit 1 when the registry refuses it. An http:// REGISTRY is sent without
# TLS, as the nodes of a cluster configured for such a registry pull from it.
registry_push() {
  [ -n "${REGISTRY:-}" ] || return 0
  need_external_cluster "runs the runners' image from REGISTRY on"
  local ref tls=true out t
  ref=$(k6_image)
  [[ $REGISTRY != http://* ]] || tls=false
  for t in skopeo umoci busybox; do
    command -v "$t" >/dev/null || die "REGISTRY: building the project's k6 image needs $t: run 'ci/tools/tools.sh apt skopeo umoci busybox-static'"
  done
  if timeout 60 skopeo inspect --raw --tls-verify=$tls "docker://$ref" >/dev/null 2>&1; then
    [ "${1:-}" = quiet ] || say image "runners' k6: $ref (the project's engine), in your registry already"
    return 0
  fi
  bash "$IB_ROOT/bench/platforms/local/images.sh" k6 || exit 1
  out=$(timeout 300 skopeo copy -q --dest-tls-verify=$tls "docker-archive:$IB_CACHE/images/${K6_IMAGE_NAME##*/}-$K6_LOCAL_TAG.tar" "docker://$ref" 2>&1) ||
    die "REGISTRY=$REGISTRY: could not push $ref: $(tail -n1 <<<"$out" | sed 's/^time="[^"]*" level=[a-z]* msg=//')"
  say image "runners' k6: $ref (the project's engine), pushed to your registry"
}
# Image references the local cluster's nodes hold (each has its own containerd, each given the
# same images: node 1's say).
local_images() {
  ctr -a "$IB_CLUSTER_STATE/nodes/1/containerd/containerd.sock" -n k8s.io images ls -q 2>/dev/null | grep -v '^sha256:' || true
}
# manifest_images FILE: every image a manifest names, one per line: the `image` fields of its
# objects at any depth (pods' containers, and where a controller takes them from, such as an
# EnvoyProxy's), not text inside a ConfigMap.
manifest_images() {
  "$IB_VENV/bin/python" -c '
import sys, yaml
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "image" and isinstance(v, str): print(v)
            else: walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
for doc in yaml.safe_load_all(open(sys.argv[1])): walk(doc)' "$1" | sort -u
}
# Our cluster's node count (bench/platforms/local/nodes.sh), 0 when none is up.
cluster_nodes() { cat "$IB_CLUSTER_STATE/node-count" 2>/dev/null || echo 0; }
# The client node of our cluster (nodes.sh node_role: node 2 of several, the one node of
# NODES=1): its state directory (its netns, its cpus), and its network namespace, nothing
# without a cluster up.
client_node_dir() { echo "$IB_CLUSTER_STATE/nodes/$([ "$(cluster_nodes)" = 1 ] && echo 1 || echo 2)"; }
client_netns() { [ "$(cluster_nodes)" = 0 ] || echo "$(client_node_dir)/netns"; }
# in_netns PATH: this process is in network namespace PATH.
in_netns() { [ "$(stat -L -c %i /proc/self/ns/net)" = "$(stat -L -c %i "$1" 2>/dev/null)" ]; }
# pod_problem NAMESPACE DEPLOYMENT: why its pods are not ready, in one line.
pod_problem() {
  local sel; sel=$(kubectl -n "$1" get deploy "$2" -o json | jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")')
  kubectl -n "$1" get pods -l "$sel" -o json | jq -r '
    [.items[] | (.status.containerStatuses // [])[] | select(.ready | not)
       | (.state.waiting // .lastState.terminated // .state.terminated) | select(. != null)
       | "\(.reason)" + (if .message then ": " + (.message | split("\n")[0]) else "" end)]
    + [.items[] | (.status.conditions // [])[] | select(.status == "False" and .message != null) | "\(.reason): \(.message)"]
    | first // "no reason reported"'
}
# The local cluster kubelet's cgroupRoot (bench/platforms/local/cluster.sh): every pod's groups
# are below it, Guaranteed pods directly below kubepods, the others one QoS level deeper.
IB_KUBELET_CGROUP=ibench
# A pod's role, for jq: its component label (ingress, backend), or the ingress-bench/role label a
# Gateway's infrastructure labels put on the proxies its controller makes (components/gateway-api).
IB_POD_ROLE='(.metadata.labels["ingress-bench/role"] // .metadata.labels["app.kubernetes.io/component"])'
# pod_groups: "ROLE REL" for each container of the namespace's pods (not the metrics sidecar),
# its group's path in every hierarchy as a glob over the nodes (NODES) and QoS levels (cgroups.sh usage).
pod_groups() {
  kubectl -n ingress-bench get pods -o json 2>/dev/null | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | '"$IB_POD_ROLE"' as $role | .metadata.uid as $uid
    | (.status.containerStatuses // [])[] | select(.name != "nginx-exporter" and .name != "shutdown-manager" and .containerID != null)
    | (.containerID | sub(".*://"; "")) as $cid | "", "node-*/" | . as $node | "", "*/"
    | "\($role) '"$IB_KUBELET_CGROUP"'/\($node)kubepods/\(.)pod\($uid)/\($cid)"'
}
# The CPUs the ingress pod's container is confined to (its cpuset, as the static CPU manager
# set it), for meta.json: proof of the placement, not a guess from the spec.
ingress_cpuset() {
  local uid cid pod
  pod=$(kubectl -n ingress-bench get pod -o json 2>/dev/null | jq -c '[.items[] | select(.metadata.deletionTimestamp == null)
    | select('"$IB_POD_ROLE"' == "ingress")][0] // empty') || return 0
  [ -n "$pod" ] || return 0
  uid=$(jq -r .metadata.uid <<<"$pod")
  # The first container that is not the metrics sidecar (components/monitoring).
  cid=$(jq -r '[.status.containerStatuses[] | select(.name != "nginx-exporter")][0].containerID' <<<"$pod")
  cat /sys/fs/cgroup/cpuset/$IB_KUBELET_CGROUP/{,node-*/}kubepods/{,*/}pod"$uid"/"${cid#*://}"/cpuset.cpus 2>/dev/null | head -n1 || true
}
