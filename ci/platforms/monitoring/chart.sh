#!/usr/bin/env bash
# kube-prometheus-stack from its chart, with the project's values, through the pinned Helm:
# what a user's cluster runs (monitoring/kube-prometheus-stack-values.yaml says how).
#   ci/platforms/monitoring/chart.sh template [HELM_ARGS...]   render it, no cluster needed
# The chart comes from KPS_CHART: its repository's URL (default), or a directory holding the
# release with its subcharts (air-gapped: `helm pull --untar` of KPS_CHART_VERSION on a
# connected machine). Either way the version is KPS_CHART_VERSION (ci/tools/versions.env).
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

CHART_NAME=kube-prometheus-stack
RELEASE=ingress-bench-kps # its resources' names and the `release` label of its selectors
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

case "${1:-}" in
  template)
    shift; chart_args
    helm template "$RELEASE" "${CHART[@]}" -n "$NAMESPACE" -f "$VALUES" "$@" ;;
  *) die "usage: ci/platforms/monitoring/chart.sh template [HELM_ARGS...]" ;;
esac
