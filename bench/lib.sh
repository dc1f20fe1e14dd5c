# Shared shell helpers: sourced by every script of bench/ and ci/ and by ./task. Keep it free of
# side effects beyond setting variables and PATH. Here: the paths, pins and caches, die/say,
# platform(); the rest by concern in bench/lib/.
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
# The tools' own caches in ours, not in the user's home (kubectl's discovery and HTTP caches,
# matplotlib's font list); a user's own choice of place stays.
export KUBECACHEDIR=${KUBECACHEDIR:-$IB_CACHE/kube} MPLCONFIGDIR=${MPLCONFIGDIR:-$IB_CACHE/matplotlib}

# die MSG: the one-line error every script ends with; never a stack trace.
die() { echo "error: $*" >&2; exit 1; }
say() { printf '%-13s %s\n' "$1" "$2" >&2; }
# "-2": the second build recipe (version-stamped binaries); a change of recipe builds anew.
IB_KUBE_DIR=$IB_CACHE/kubernetes-$KUBE_VERSION-2
IB_ETCD_DIR=$IB_CACHE/etcd-debian
IB_PROMETHEUS_DIR=$IB_CACHE/prometheus-$PROMETHEUS_VERSION
# The live page (dashboards/live/, built by ./task tools): keyed by its lockfile and sources, as
# k6 by its extension's; the dashboard it shows is copied in when monitoring comes up.
IB_LIVE_DIR=$IB_CACHE/live-$(cd "$IB_ROOT/dashboards/live" 2>/dev/null && cat package-lock.json build.mjs index.html src/* 2>/dev/null | sha256sum | cut -c1-12)
# The browser tests' driver (ci/tools/browser/: playwright-core, Debian's chromium).
IB_BROWSER_DIR=$IB_CACHE/browser-$(cat "$IB_ROOT/ci/tools/browser/package-lock.json" 2>/dev/null | sha256sum | cut -c1-12)
IB_OPERATOR_DIR=$IB_CACHE/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION
IB_NODE_EXPORTER_DIR=$IB_CACHE/node_exporter-$NODE_EXPORTER_VERSION
export PATH="$IB_KUBE_DIR:$IB_ETCD_DIR:$PATH"

# platform: the platform of this run, decided here and nowhere else: PLATFORM if given (one
# of the registry's values), else the local cluster, unless a TARGET is given: a URL is
# loaded where it is, the lab's way. Entry points export the result, so the scripts they
# call and k6's tags see the same.
platform() {
  if [ -z "${PLATFORM:-}" ] && [ -n "${TARGET:-}" ]; then echo lab; elif [ -z "${PLATFORM:-}" ]; then echo local; else setting PLATFORM; fi
}

# Kubernetes platforms. The local cluster's state (and so its KUBECONFIG) lives here.
IB_CLUSTER_STATE=${IB_CLUSTER_STATE:-/run/ingress-bench/cluster}
IB_CLUSTER_KUBECONFIG=$IB_CLUSTER_STATE/pki/admin.kubeconfig
# What is decided once per machine (the ingress's CPU share, bench/run/bench.sh): a cluster's
# down and up keep it, so one machine gives one basis; an empty cache decides it again.
IB_MACHINE_STATE=${IB_MACHINE_STATE:-$IB_CACHE/machine}

# The rest by concern (bench/lib/*.sh), each a file of its own.
. "$IB_ROOT/bench/lib/util.sh"
. "$IB_ROOT/bench/lib/build.sh"
. "$IB_ROOT/bench/lib/variants.sh"
. "$IB_ROOT/bench/lib/placement.sh"
. "$IB_ROOT/bench/lib/kube.sh"
. "$IB_ROOT/bench/lib/gateway.sh"
. "$IB_ROOT/bench/lib/prometheus.sh"
. "$IB_ROOT/bench/lib/existing.sh"
. "$IB_ROOT/bench/lib/k6.sh"
