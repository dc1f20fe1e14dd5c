# Shared shell helpers: sourced by every script in ci/ and by ./task. Keep it free of side
# effects beyond setting variables and PATH.
IB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$IB_ROOT/bench/settings/settings.sh"
. "$IB_ROOT/bench/platforms/lab.env"
. "$IB_ROOT/bench/platforms/driver.sh"
lab_backend_ip() { echo "$LAB_BACKEND_NET.$((LAB_BACKEND_OCTET0 + $1))"; }
LAB_STUB=http://$LAB_LB_IP:$LAB_STATUS_PORT/stub_status
# shellcheck source=ci/tools/versions.env
. "$IB_ROOT/ci/tools/versions.env"
IB_CACHE=${IB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-bench}
# Version-keyed install directories: PATH is composed from the pins, so two checkouts with
# different pins never see each other's binaries.
# k6 with the project's extension (xk6/): keyed by the pin and the extension's sources, so an
# edit there builds a new binary beside the old one (its tests are not part of it).
IB_K6_EXT=$(cd "$IB_ROOT/xk6" 2>/dev/null && cat go.mod $(ls -- *.go | grep -v '_test\.go$') 2>/dev/null | sha256sum | cut -c1-12)
IB_K6_DIR=$IB_CACHE/k6-$K6_VERSION-xk6-$IB_K6_EXT
K6_LOCAL_TAG=$K6_VERSION-xk6-$IB_K6_EXT # the local k6 image (bench/platforms/local/images.sh)
IB_KUSTOMIZE_DIR=$IB_CACHE/kustomize-$KUSTOMIZE_VERSION
IB_KUBECONFORM_DIR=$IB_CACHE/kubeconform-$KUBECONFORM_VERSION
IB_TASK_DIR=$IB_CACHE/task-$TASK_VERSION
IB_HELM_DIR=$IB_CACHE/helm-$HELM_VERSION-k8s$HELM_K8S_VERSION
# One venv per content of ci/tools/requirements.txt: a changed pin builds a new one beside the old.
IB_VENV=$IB_CACHE/venv-$(sha256sum "$IB_ROOT/ci/tools/requirements.txt" | cut -c1-12)
export PATH="$IB_K6_DIR:$IB_KUSTOMIZE_DIR:$IB_KUBECONFORM_DIR:$IB_TASK_DIR:$IB_HELM_DIR:$IB_VENV/bin:$PATH"
# k6 1.8 would otherwise phone home, or ask a remote build service for unknown k6/x modules.
export K6_NO_USAGE_REPORT=true K6_AUTO_EXTENSION_RESOLUTION=false

# k6_rw_env PROMETHEUS_URL: k6's remote-write output to that Prometheus, one NAME=value a line,
# for the host's k6 (bench/run/bench.sh) and the in-cluster pods (bench/run/render_distributed.sh):
# native histograms, a 2 s push (the rules' scrape cadence), and stale markers at the end, so
# a finished run's series end with it instead of lingering five minutes in "last value" panels.
k6_rw_env() {
  printf '%s\n' K6_PROMETHEUS_RW_SERVER_URL="$1/api/v1/write" K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM=true \
    K6_PROMETHEUS_RW_PUSH_INTERVAL=2s K6_PROMETHEUS_RW_STALE_MARKERS=true
}

# die MSG: the one-line error every script ends with; never a stack trace.
die() { echo "error: $*" >&2; exit 1; }
say() { printf '%-13s %s\n' "$1" "$2" >&2; }
# need_go WHAT: Go on PATH, at least the version xk6/go.mod declares (the one source: k6
# v1.8 and the extension need it; every tool here is built with the same Go).
go_min() { awk '$1 == "go" {print $2; exit}' "$IB_ROOT/xk6/go.mod"; }
need_go() {
  local min v
  min=$(go_min)
  command -v go >/dev/null || die "building $1 needs Go $min or newer: install it from go.dev (or your distribution), then re-run"
  v=$(go env GOVERSION 2>/dev/null); v=${v#go}
  [ "$(printf '%s\n%s\n' "$min" "$v" | sort -V | head -n1)" = "$min" ] ||
    die "building $1 needs Go $min or newer, found go$v: install a newer one from go.dev, then re-run"
}
# gocmd ARGS...: the go command as every build here runs it: this machine's Go only (the
# proxy here serves modules, never toolchains), static binaries, and the compiler's garbage
# collector relaxed for the build alone (GOGC=400: cold builds 15 % faster here, CoreDNS 93
# and 102 s against 80 and 84 s, alternated; memory is not short). Never exported: k6 is a Go
# program, and its collector is part of what a run measures. No DWARF compiled: every binary
# is linked with -s, which drops it (a cold helm build 87 and 95 s against 78 and 69 s,
# alternated); GOFLAGS applies it to the commands that know the flag.
gocmd() { GOTOOLCHAIN=local CGO_ENABLED=0 GOGC=${IB_BUILD_GOGC:-400} GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false" go "$@"; }
# debian_mirror WHY: the machine's own apt mirror, read from its sources (never a hard-coded
# host: only what this machine's apt already reaches).
debian_mirror() {
  local m
  m=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1)
  [ -n "$m" ] || die "no Debian mirror found in /etc/apt/sources.list*: needed $1"
  echo "$m"
}
# rm_state DIR: removes a platform's state directory, and /run/ingress-bench with the last one
# (an empty parent a down would otherwise leave on a host that had none).
rm_state() { rm -rf "$1"; rmdir "$(dirname "$1")" 2>/dev/null || true; }
need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (network namespaces, nginx on ports 80/443): run it as root"; }

# Variants. VARIANT names an overlay on every platform (overlays/<name>). The lab runs plain
# NGINX only, so there it reads the overlay's tuning components' knob files; it also takes
# "default" or knob names joined by '+' (each a kustomize/components/tuning-<name>), applied in
# order over the defaults (later knobs win), for ad-hoc combinations.
IB_LB_DIR=$IB_ROOT/kustomize/components/nginx-lb
known_variants() { (cd "$IB_ROOT/kustomize/components" && ls -d tuning-*/ | sed 's|^tuning-||; s|/$||' | paste -sd' '); }
# overlay_components OVERLAY: the names of the components it lists, in order.
overlay_components() {
  sed -nE 's#^ *- *(\.\./)*kustomize/components/([a-z0-9-]+)/?$#\2#p' "$IB_ROOT/overlays/$1/kustomization.yaml"
}
# variant_knob_files VARIANT: the lab's knob files, defaults first; dies on a name that is
# neither, or on an overlay with parts the lab cannot reproduce.
variant_knob_files() {
  local v=$1 k
  echo "$IB_LB_DIR/defaults.env"
  [ "$v" = default ] && return 0
  if [ -f "$IB_ROOT/overlays/$v/kustomization.yaml" ]; then
    for k in $(overlay_components "$v"); do
      case $k in
        tuning-*) echo "$IB_ROOT/kustomize/components/$k/nginx.env" ;;
        nginx-lb|images) ;;
        *) die "overlay $v uses component $k, which the bare-metal lab cannot reproduce: use PLATFORM=local" ;;
      esac
    done
    return 0
  fi
  [[ $v =~ ^[a-z0-9-]+(\+[a-z0-9-]+)*$ ]] || die "unknown variant '$v' (an overlay: $(known_overlays); or knob names joined by '+': $(known_variants))"
  for k in ${v//+/ }; do
    [ -f "$IB_ROOT/kustomize/components/tuning-$k/nginx.env" ] || die "unknown variant '$k' (an overlay: $(known_overlays); or knob names joined by '+': $(known_variants))"
    echo "$IB_ROOT/kustomize/components/tuning-$k/nginx.env"
  done
}

# CPU placement on one host (the seeds pinned wrk with taskset): the load generator gets the
# first half of the CPUs, the servers the second half, so neither steals the other's cycles.
# Overridable with LAB_CLIENT_CPUS / LAB_SERVER_CPUS (taskset lists such as 0 or 2-3).
cpu_range() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
lab_cpus() { # prints "CLIENT_LIST SERVER_LIST"
  local n; n=$(nproc)
  local client=${LAB_CLIENT_CPUS:-} server=${LAB_SERVER_CPUS:-}
  if [ "$n" -lt 2 ]; then client=${client:-0}; server=${server:-0}
  else client=${client:-$(cpu_range 0 $((n / 2 - 1)))}; server=${server:-$(cpu_range $((n / 2)) $((n - 1)))}; fi
  local v; for v in "$client" "$server"; do
    [[ $v =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] || die "LAB_CLIENT_CPUS/LAB_SERVER_CPUS must be CPU lists like 0 or 1-3, got '$v'"
    taskset -c "$v" true 2>/dev/null || die "CPU list '$v' is not available on this host ($n CPUs)"
  done
  echo "$client $server"
}
# "-2": the second build recipe (version-stamped binaries); a change of recipe builds anew.
IB_KUBE_DIR=$IB_CACHE/kubernetes-$KUBE_VERSION-2
IB_ETCD_DIR=$IB_CACHE/etcd-debian
IB_PROMETHEUS_DIR=$IB_CACHE/prometheus-$PROMETHEUS_VERSION
IB_OPERATOR_DIR=$IB_CACHE/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION
IB_NODE_EXPORTER_DIR=$IB_CACHE/node_exporter-$NODE_EXPORTER_VERSION
export PATH="$IB_KUBE_DIR:$IB_ETCD_DIR:$PATH"

# platform: the platform of this run, decided here and nowhere else: PLATFORM if given (one
# of the registry's values), else the local cluster, unless a TARGET is given: a URL is
# loaded where it is, the lab's way. Entry points export the result, so the scripts they
# call and k6's tags see the same.
platform() {
  if [ -z "${PLATFORM:-}" ] && [ -n "${TARGET:-}" ]; then echo lab; else setting_enum PLATFORM local; fi
}

# Kubernetes platforms. The local cluster's state (and so its KUBECONFIG) lives here.
IB_CLUSTER_STATE=${IB_CLUSTER_STATE:-/run/ingress-bench/cluster}
IB_CLUSTER_KUBECONFIG=$IB_CLUSTER_STATE/pki/admin.kubeconfig
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
  pods=$([ -z "$ns" ] || kubectl -n "$ns" get pods -l "app.kubernetes.io/component=$role" -o json 2>/dev/null |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running") | .metadata.name] | join("|")') || pods=
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
# need_cpu_quantity NAME VALUE: dies unless VALUE is a Kubernetes CPU quantity above 0 (2, 500m, 0.5).
# need_ingress_cpu: INGRESS_CPU as a run takes it: auto (the default; a probe decides on the
# local platform, the overlay's elsewhere), overlay, or a CPU quantity this host has.
need_ingress_cpu() {
  case ${INGRESS_CPU:-auto} in auto | overlay) return 0 ;; esac
  is_cpu_quantity "$INGRESS_CPU" ||
    die "INGRESS_CPU must be auto, overlay or a CPU quantity above 0 like 2, 500m or 0.5, got '$INGRESS_CPU'"
  [ "$PLATFORM" != local ] || awk -v c="$(cpu_cores "$INGRESS_CPU")" -v n="$(nproc)" 'BEGIN { exit !(c <= n) }' ||
    die "INGRESS_CPU $INGRESS_CPU is more than this machine's $(nproc) CPUs"
}
# cpu_cores QUANTITY: a Kubernetes CPU quantity (500m, 0.5, 2) in cores.
cpu_cores() { awk -v q="$1" 'BEGIN { print (q ~ /m$/ ? substr(q, 1, length(q) - 1) / 1000 : q + 0) }'; }
is_cpu_quantity() { [[ $1 =~ ^([0-9]+m|[0-9]+|[0-9]*\.[0-9]+)$ ]] && [[ ! $1 =~ ^[0.]*m?$ ]]; }
# deployed_ingress_share: the fractional CPU of the ingress deployed now for VARIANT (the probe
# runs there, and a share within its noise keeps the pod), else 500m.
deployed_ingress_share() {
  local v q
  v=$(KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl get ns ingress-bench -o jsonpath='{.metadata.annotations.ingress-bench/variant}' 2>/dev/null) || v=''
  q=$(KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl -n ingress-bench get deploy -l app.kubernetes.io/component=ingress \
    -o jsonpath='{.items[0].spec.template.spec.containers[0].resources.limits.cpu}' 2>/dev/null) || q=''
  if [ "${v%% *}" = "$VARIANT" ] && [[ $q =~ ^[0-9]+m$ ]] && [ "${q%m}" -lt 1000 ]; then echo "$q"; else echo 500m; fi
}
need_cpu_quantity() {
  is_cpu_quantity "$2" ||
    die "$1 must be a CPU quantity above 0 like 2, 500m or 0.5, got '$2'"
}
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
# import_images NAME...: the cached image archives $IB_CACHE/images/NAME.tar into the local
# node's containerd (no registry: every image of the local cluster comes this way).
import_images() {
  local b; for b in "$@"; do
    ctr -a "$IB_CLUSTER_STATE/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "$IB_CACHE/images/$b.tar" >/dev/null ||
      die "ctr could not import image $b"
  done
}
DEFAULT_OVERLAY=$(setting_default VARIANT)
known_overlays() { (cd "$IB_ROOT/overlays" && ls -d */ 2>/dev/null | tr -d / | paste -sd' '); }
# need_overlay NAME: dies unless NAME is an overlay (overlays/NAME/kustomization.yaml).
# A name, never a path: "../kustomize/base" has a kustomization too.
need_overlay() {
  [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ ]] && [ -f "$IB_ROOT/overlays/$1/kustomization.yaml" ] || die "unknown overlay '$1' (known: $(known_overlays))"
}
# need_new_results_dir DIR: DIR can be made (it does not exist, and the nearest directory that
# does is writable), checked before the platform starts; DIR itself is made only after.
need_new_results_dir() {
  local d=$1
  [ ! -e "$d" ] || die "results directory $d exists already: results are never overwritten (choose another TESTID)"
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  # Tried, not judged from the mode bits: root passes -w on /proc and on read-only mounts.
  local t; t=$(mktemp -d "$d/.ingress-bench-write-test.XXXXXX" 2>/dev/null) && rmdir "$t" ||
    die "results directory $1 cannot be made: $d is not a writable directory (set RESULTS_ROOT)"
}
# need_scenario NAME: dies unless NAME is a scenario (the SCENARIO setting's values, each a
# k6/NAME.js with its profile in k6/lib/config.js).
need_scenario() {
  [[ " $(setting_values SCENARIO) " == *" $1 "* ]] || die "unknown scenario '$1' (known: $(setting_values SCENARIO | sed 's/ /, /g'))"
}
# scenario_scheme SCENARIO: http unless SCHEME says otherwise; tps is TLS by definition.
scenario_scheme() { if [ "$1" = tps ]; then echo https; else echo "${SCHEME:-http}"; fi; }
# IMAGE_SET: which images a cluster runs. "upstream": the pins of components/images and
# K6_IMAGE_UPSTREAM, from their registries; "local": this machine's builds (bench/platforms/local/images.sh,
# components/images-local). The local platform runs local builds; an external cluster
# upstream images unless told otherwise (a cluster that was given our builds).
image_set() {
  local s=${IMAGE_SET:-$([ "$(platform)" = local ] && echo local || echo upstream)}
  case $s in local|upstream) echo "$s" ;; *) die "IMAGE_SET must be local or upstream, got '$s'" ;; esac
}
k6_image() { if [ "$(image_set)" = local ]; then echo "$K6_IMAGE_NAME:$K6_LOCAL_TAG"; else echo "$K6_IMAGE_UPSTREAM"; fi; }
# Image references the local node's containerd holds.
local_images() { ctr -a "$IB_CLUSTER_STATE/containerd/containerd.sock" -n k8s.io images ls -q 2>/dev/null | grep -v '^sha256:' || true; }
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
# pod_groups: "ROLE REL" for each container of the namespace's pods (not the metrics sidecar),
# its group's path in every hierarchy as a glob over the QoS levels (cgroups.sh usage).
pod_groups() {
  kubectl -n ingress-bench get pods -o json 2>/dev/null | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | .metadata.labels["app.kubernetes.io/component"] as $role | .metadata.uid as $uid
    | (.status.containerStatuses // [])[] | select(.name != "nginx-exporter" and .containerID != null)
    | (.containerID | sub(".*://"; "")) as $cid | "", "*/" | "\($role) '"$IB_KUBELET_CGROUP"'/kubepods/\(.)pod\($uid)/\($cid)"'
}
# The CPUs the ingress pod's container is confined to (its cpuset, as the static CPU manager
# set it), for meta.json: proof of the placement, not a guess from the spec.
ingress_cpuset() {
  local uid cid
  uid=$(kubectl -n ingress-bench get pod -l app.kubernetes.io/component=ingress -o jsonpath='{.items[0].metadata.uid}' 2>/dev/null) || return 0
  # The first container that is not the metrics sidecar (components/monitoring).
  cid=$(kubectl -n ingress-bench get pod -l app.kubernetes.io/component=ingress -o json 2>/dev/null |
    jq -r '[.items[0].status.containerStatuses[] | select(.name != "nginx-exporter")][0].containerID')
  cat /sys/fs/cgroup/cpuset/$IB_KUBELET_CGROUP/kubepods/pod"$uid"/"${cid#*://}"/cpuset.cpus \
    /sys/fs/cgroup/cpuset/$IB_KUBELET_CGROUP/kubepods/*/pod"$uid"/"${cid#*://}"/cpuset.cpus 2>/dev/null | head -n1 || true
}

# link_capacity_bits SPEED: "10G", "1G", "100M", "2.5G" or bits per second -> bits per second
# (the Kubernetes bandwidth annotations' notation, decimal as NIC speeds are quoted).
link_capacity_bits() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)([KMG]?)$ ]] || die "LINK_CAPACITY must look like 10G, 1G or 100M, got '$1'"
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {m = (u == "G") ? 1e9 : (u == "M") ? 1e6 : (u == "K") ? 1e3 : 1; printf "%.0f\n", n * m}'
}

# client_cpus LIST: where k6 runs beside an ingress on cpuset LIST ("1", "0-1,3"): this
# machine's CPUs not in it; all of them when LIST has every CPU (a fractional INGRESS_CPU is a
# CFS quota in the shared pool, not a pinned core: k6 shares, and the placement warning says so).
client_cpus() {
  local all=() c
  for c in $(seq 0 $(($(nproc) - 1))); do cpu_in "$c" "$1" || all+=("$c"); done
  [ ${#all[@]} -gt 0 ] || all=($(seq 0 $(($(nproc) - 1))))
  (IFS=,; echo "${all[*]}")
}
# placement_warning CLIENT_LIST SERVER_LIST [SHARED [INGRESS_CORES]]: before the load, one line
# when k6's CPUs could not saturate the ingress's. The native engine costs about what nginx does
# per request (xk6/README.md), so k6 needs as many CPUs as the ingress has, twice as many when
# it shares them with SHARED (the local platform's backends and control plane: about the
# ingress's cost again). INGRESS_CORES: a fractional ingress (a CFS quota on the CPUs k6 runs on
# too) has that much, and leaves k6 the rest. The run goes on: the validity threshold judges
# what it measured.
placement_warning() {
  local nc ns have need
  nc=$(taskset -c "$1" nproc 2>/dev/null) && ns=$(taskset -c "$2" nproc 2>/dev/null) || return 0
  ns=${4:-$ns}
  read -r have need < <(awk -v c="$nc" -v s="$ns" -v q="${4:-}" -v k="$([ -n "${3:-}" ] && echo 2 || echo 1)" \
    'BEGIN { printf "%g %g\n", c - (q == "" ? 0 : s), k * s }')
  awk -v h="$have" -v n="$need" 'BEGIN { exit !(h < n) }' || return 0
  if [ -n "${3:-}" ]; then
    echo "warning: placement: k6 has $have CPU(s) ($1), shared with $3, for an ingress on $ns ($2): it needs $need to saturate it, so the run will likely measure k6 (NOT VALID, exit 99); use a node with more CPUs, INGRESS_CPU=auto, or PLATFORM=lab for the ingress alone" >&2
  else
    echo "warning: placement: k6 has $have CPU(s) ($1) for an ingress on $ns ($2): give it at least $ns (LAB_CLIENT_CPUS), or the run will likely measure k6 (NOT VALID, exit 99)" >&2
  fi
}
cpu_in() { # CPU LIST
  local r; for r in ${2//,/ }; do
    [ "$1" -ge "${r%-*}" ] && [ "$1" -le "${r#*-}" ] && return 0
  done
  return 1
}

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

# stub_counts URL: "accepts requests" from an nginx stub_status page (nothing if unreachable).
# Reading it counts as one request and, on a new connection, one accept.
# host_description: what a figure was measured with, as JSON {tools, host}: each run's
# meta.json has it (bench.sh), and bench:compare tells a saved baseline's from this machine's.
host_description() {
  jq -nc --arg k6 "$(k6 version 2>/dev/null | head -n1)" --arg nginx "$(nginx -v 2>&1 | sed 's|.*/||')" \
    --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" --arg machine "$(uname -n)" \
    --arg cpu_model "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
    '{tools: {k6: $k6, nginx: $nginx}, host: {machine: $machine, cpu_model: $cpu_model, cpus: $cpus, kernel: $kernel}}'
}

stub_counts() { curl -sf --max-time 3 "$1" | stub_parse; }
# stub_parse: stdin a stub_status page -> "accepts requests"; nothing for any other page.
stub_parse() { awk 'NR==1 && !/^Active connections/ {exit} NR==3 {print $1, $3}'; }
# median "N N N ...": the middle value (the upper one of an even count's two).
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int(NR / 2) + 1]}'; }
# calc FORMAT EXPR: awk arithmetic, printf-formatted.
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
# poll SECONDS CMD...: run CMD every 0.2 s until it succeeds (0) or SECONDS pass (1).
poll() {
  local secs=$1 i; shift
  for i in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}
# http_ok URL [CURL_ARGS...]: the URL answers 200.
http_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "${@:2}" "$1")" = 200 ]; }
