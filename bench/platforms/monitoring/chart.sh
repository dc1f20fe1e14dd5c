#!/usr/bin/env bash
# kube-prometheus-stack from its chart, with the project's values, through the pinned Helm:
# what a user's cluster runs (monitoring/kube-prometheus-stack-values.yaml says how).
#   bench/platforms/monitoring/chart.sh template [HELM_ARGS...]   render it, no cluster needed
#   bench/platforms/monitoring/chart.sh up [HELM_ARGS...]         install or upgrade it: into the local
#       cluster (PLATFORM=local, with monitoring/kube-prometheus-stack-local.yaml and this
#       machine's images), or the cluster of KUBECONFIG (PLATFORM=external, ALLOW_EXTERNAL_CLUSTER=1)
#   bench/platforms/monitoring/chart.sh down                      uninstall it (safe to run twice)
#   bench/platforms/monitoring/chart.sh url-in-cluster            its Prometheus, as pods reach it
# The chart comes from KPS_CHART: its repository's URL (default), or a directory holding the
# release with its subcharts (air-gapped: `helm pull --untar` of KPS_CHART_VERSION on a
# connected machine). Either way the version is KPS_CHART_VERSION (ci/tools/versions.env).
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

CHART_NAME=kube-prometheus-stack
# The release name of the chart's own docs: its objects are then named kube-prometheus-stack-*
# (the chart's fullname), and `release: kube-prometheus-stack` is what its selectors ask for.
RELEASE=kube-prometheus-stack
# Helm's label on the releases this script installed: up never upgrades, down never removes,
# a release of that name someone else installed.
OURS=ingress-bench.io/installed-by=chart.sh
NAMESPACE=monitoring
VALUES=$IB_ROOT/monitoring/kube-prometheus-stack-values.yaml
# Helm's repository cache and config stay in the project's cache, not the user's ~/.cache/helm.
export HELM_CACHE_HOME=$IB_CACHE/helm/cache HELM_CONFIG_HOME=$IB_CACHE/helm/config HELM_DATA_HOME=$IB_CACHE/helm/data

command -v helm >/dev/null || die "helm $HELM_VERSION is not built: run ci/tools/tools.sh"

# chart_args: helm's chart arguments for KPS_CHART, checked: a directory must be the pinned
# release and hold every subchart it depends on (helm's own message only says to run
# `helm dependency build`, which an air-gapped machine cannot).
chart_args() {
  local src=${KPS_CHART:-$(awk -F'\t' '$1 == "KPS_CHART" {print $3}' "$IB_SETTINGS_TSV")} v missing=() dep
  case "$src" in
    http://*|https://*) CHART=("$CHART_NAME" --repo "$src" --version "$KPS_CHART_VERSION"); return 0 ;;
  esac
  [ -f "$src/Chart.yaml" ] || die "KPS_CHART '$src' is neither a chart repository URL nor a chart directory (no Chart.yaml)"
  v=$(awk '/^name:/ {n=$2} /^version:/ {v=$2} END {print n, v}' "$src/Chart.yaml")
  [ "$v" = "$CHART_NAME $KPS_CHART_VERSION" ] || die "KPS_CHART '$src' is $v, not $CHART_NAME $KPS_CHART_VERSION (the release the values are tested against)"
  for dep in $(yq_deps "$src/Chart.yaml"); do
    [ -e "$src/charts/$dep" ] || compgen -G "$src/charts/$dep-*.tgz" >/dev/null || missing+=("$dep")
  done
  [ ${#missing[@]} = 0 ] || die "KPS_CHART '$src' lacks its subcharts ${missing[*]} in charts/: copy the release with them (helm pull --untar $CHART_NAME --version $KPS_CHART_VERSION)"
  CHART=("$src")
}

# yq_deps CHART_YAML: the names of the chart's dependencies (Chart.yaml's dependencies list).
yq_deps() { "$IB_VENV/bin/python" -c 'import sys, yaml; print(" ".join(d["name"] for d in yaml.safe_load(open(sys.argv[1])).get("dependencies") or []))' "$1"; }

# target: KUBECONFIG and the helm arguments of the platform's cluster (LOCAL_ARGS).
target() {
  PLATFORM=$(platform) || exit 1
  LOCAL_ARGS=()
  # Whose cluster (the platform's trait): ours (its images from this host, the local values),
  # or a user's.
  CLUSTER=$(pf_trait cluster "$PLATFORM")
  case "$CLUSTER" in
    own)
      export KUBECONFIG=$IB_CLUSTER_KUBECONFIG
      bash "$IB_ROOT/bench/platforms/local/cluster.sh" status >/dev/null 2>&1 || die "the local cluster is not up: run './task cluster:up'"
      LOCAL_ARGS=(-f "$IB_ROOT/monitoring/kube-prometheus-stack-local.yaml" --set "$(printf '%s,' \
        "prometheusOperator.image.tag=$PROMETHEUS_OPERATOR_VERSION" "prometheusOperator.prometheusConfigReloader.image.tag=$PROMETHEUS_OPERATOR_VERSION" \
        "prometheus.prometheusSpec.image.tag=$PROMETHEUS_VERSION" "prometheus-node-exporter.image.tag=$NODE_EXPORTER_VERSION")") ;;
    user)
      need_external_cluster "installs into" ;;
    *) die "PLATFORM=$PLATFORM has no cluster to install kube-prometheus-stack into" ;;
  esac
}

# release_owner: "ours", "other" (a release of that name not installed here) or "none".
release_owner() {
  helm status "$RELEASE" -n "$NAMESPACE" >/dev/null 2>&1 || { echo none; return; }
  [ -n "$(helm list -n "$NAMESPACE" -l "$OURS" --filter "^$RELEASE\$" -q 2>/dev/null)" ] && echo ours || echo other
}

chart_up() {
  target; chart_args
  local t0=$SECONDS log=$IB_CACHE/logs/helm-install.log
  [ "$(release_owner)" != other ] || die "a release $RELEASE that chart.sh did not install is in namespace $NAMESPACE: it stays untouched (point PROMETHEUS_URL at its Prometheus instead)"
  # One Prometheus Operator per cluster: the local stack (monitoring/local) owns the same CRDs.
  [ -z "$(kubectl -n "$NAMESPACE" get deploy -l app.kubernetes.io/part-of=ingress-bench-monitoring -o name 2>/dev/null)" ] ||
    die "the local monitoring stack is up in namespace $NAMESPACE: run './task monitoring:down' first"
  if [ "$CLUSTER" = own ]; then
    bash "$IB_ROOT/bench/platforms/local/images.sh" monitoring
    # shellcheck disable=SC2086 # one name a word
    import_images $IB_MONITORING_IMAGES
  fi
  mkdir -p "$(dirname "$log")"
  say monitoring "installing $CHART_NAME $KPS_CHART_VERSION as $RELEASE in namespace $NAMESPACE"
  # --wait: until the operator and Prometheus are ready (Helm waits for the StatefulSet the
  # operator makes only through the Prometheus object, so Prometheus' readiness is polled).
  helm upgrade --install "$RELEASE" "${CHART[@]}" -n "$NAMESPACE" --create-namespace --labels "$OURS" \
    -f "$VALUES" "${LOCAL_ARGS[@]}" "$@" --wait --timeout 5m >"$log" 2>&1 ||
    die "helm could not install $CHART_NAME $KPS_CHART_VERSION: $(grep -m1 -i error "$log" || tail -n1 "$log") (log: $log)"
  poll 180 kubectl -n "$NAMESPACE" wait --for=condition=Available --timeout=1s "prometheus/$RELEASE-prometheus" ||
    die "the chart's Prometheus is not available after 180 s: $(kubectl -n "$NAMESPACE" get pods -l app.kubernetes.io/name=prometheus -o jsonpath='{.items[*].status.containerStatuses[*].state}' 2>/dev/null)"
  say monitoring "$CHART_NAME $KPS_CHART_VERSION up in $((SECONDS - t0)) s; pods reach its Prometheus at $(url_in_cluster)"
}

# down: the release this script installed; on the local cluster (ours) also what Helm leaves.
chart_down() {
  target
  case "$(release_owner)" in
    none) ;;
    other) die "the release $RELEASE in namespace $NAMESPACE was not installed by chart.sh: left as it is" ;;
    ours) helm uninstall "$RELEASE" -n "$NAMESPACE" --wait --timeout 2m >/dev/null || die "helm could not uninstall $RELEASE" ;;
  esac
  # On a user's cluster the CRDs and the operator's kubelet Service stay: other monitors may
  # use them. (The release's own kubelet Service name: the operator's --kubelet-service.)
  [ "$CLUSTER" != own ] || remove_monitoring_stack "$RELEASE-kubelet"
  say monitoring "$CHART_NAME down ($PLATFORM)"
}

# The chart's Prometheus Service (the chart's fullname is the release name here).
url_in_cluster() { echo "http://$RELEASE-prometheus.$NAMESPACE.svc:9090"; }

case "${1:-}" in
  template)
    shift; chart_args
    helm template "$RELEASE" "${CHART[@]}" -n "$NAMESPACE" -f "$VALUES" "$@" ;;
  up) shift; chart_up "$@" ;;
  down) chart_down ;;
  url-in-cluster) url_in_cluster ;;
  *) die "usage: bench/platforms/monitoring/chart.sh template|up [HELM_ARGS...] | down | url-in-cluster" ;;
esac
