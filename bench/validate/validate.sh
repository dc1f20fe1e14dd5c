#!/usr/bin/env bash
# Offline validation of every overlay (design.md, "Validation"), one line per overlay:
#   kustomize build -> kubeconform -strict against the JSON schemas of several Kubernetes
#   versions (no network: schemas from the kubernetes-validate package, converted once into a
#   cache) -> the project's policy (bench/validate/policy.py) -> server-side dry-run when a cluster is at
#   hand (dry_run_server).
# Stops at the first failure with "error: <overlay>: <reason>".
#   OVERLAYS_DIR   where the overlays are (default: overlays/); every directory in it with a
#                  kustomization.yaml is one.
#   VALIDATE_DRY_RUN  auto (default): the server-side dry-run when the local cluster is up
#                  (./task cluster:up); 0: never. It applies namespaces and CRDs to that cluster:
#                  a caller whose cluster is someone else's (the test suite's lab stream, while
#                  the cluster stream's tests deploy) leaves it alone.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

# kubernetes-validate ships the OpenAPI schemas of Kubernetes 1.25-1.37 as JSON per version;
# kubeconform reads them once bench/validate/k8s_schemas.py has made their refs local. The cache is
# keyed by the package version, outside the checkout.
KUBERNETES_VALIDATE_VERSION=1.37.0
# The versions every overlay must be valid for: the local platform's (v1.34) and the one before.
K8S_VERSIONS="1.33.0 1.34.0"
K8S_SHORT=$(echo "$K8S_VERSIONS" | sed -E 's/\.0( |$)/\1/g; s/ /, /g') # "1.33, 1.34" for the report
KV_DIR=$IB_CACHE/kubernetes-validate-$KUBERNETES_VALIDATE_VERSION
SCHEMAS=$KV_DIR/schemas
OVERLAYS_DIR=${OVERLAYS_DIR:-$IB_ROOT/overlays}
# Custom kinds no pinned source here has a CRD of (group/version/Kind): NGINX Gateway Fabric's
# module and release are refused on these machines (docs/guides/migrate-off-ingress-nginx.md). Checked against no
# schema and left out of the server-side dry-run, and named on their overlay's line; every other
# object of that overlay is validated as usual.
UNSCHEMED_KINDS="gateway.nginx.org/v1alpha2/NginxProxy"

# ensure_schemas: the venv with kubernetes-validate (also PyYAML for policy.py), then the
# converted schemas; both no-ops once present. The console script arrives with the package
# itself, after its dependencies, so its presence means a complete install.
ensure_schemas() {
  if [ ! -x "$KV_DIR/venv/bin/kubernetes-validate" ]; then
    say validate "python venv with kubernetes-validate $KUBERNETES_VALIDATE_VERSION (Kubernetes JSON schemas)"
    rm -rf "$KV_DIR/venv"
    python3 -m venv "$KV_DIR/venv" >/dev/null || die "python3 -m venv failed: install python3-venv"
    "$KV_DIR/venv/bin/pip" install -q "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" ||
      die "pip install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION failed"
  fi
  # shellcheck disable=SC2086 # one argument per version
  "$KV_DIR/venv/bin/python" "$IB_ROOT/bench/validate/k8s_schemas.py" "$SCHEMAS" $K8S_VERSIONS ||
    die "converting the Kubernetes schemas into $SCHEMAS failed"
}

# first_error FILE: the line of a tool's output that says what went wrong, without the
# tools' boilerplate (kubeconform's schema URL), so the failure stays one readable line.
first_error() {
  { grep -m1 -iE 'error|invalid|fail|not found|could not' "$1" || head -n1 "$1"; } |
    sed -E "s/^Error: //; s/^stdin - //; s/problem validating schema\. Check JSON formatting: jsonschema validation failed with '[^']*' - //"
}

# ensure_crd_schemas: the custom resources' schemas (the Gateway API variants'), from the CRDs
# of the pinned modules (bench/lib/gateway.sh), converted once into a cache keyed by their pins.
CRD_SCHEMAS=$IB_CACHE/crd-schemas-gateway-api-$GATEWAY_API_VERSION-envoy-gateway-$ENVOY_GATEWAY_VERSION
ensure_crd_schemas() {
  [ ! -d "$CRD_SCHEMAS" ] || return 0
  local crds; crds=$(mktemp -d)
  gateway_crd_files "$crds" && "$KV_DIR/venv/bin/python" "$IB_ROOT/bench/validate/crd_schemas.py" "$CRD_SCHEMAS.tmp" "$crds"/*.yaml ||
    { rm -rf "$crds" "$CRD_SCHEMAS.tmp"; die "converting the Gateway API CRDs into schemas failed"; }
  rm -rf "$crds"; mv "$CRD_SCHEMAS.tmp" "$CRD_SCHEMAS"
}

# without_unschemed: stdin's documents but those of UNSCHEMED_KINDS (for an overlay that has
# one: the caller's $unschemed).
without_unschemed() {
  "$KV_DIR/venv/bin/python" -c 'import sys, yaml
skip = set(sys.argv[1].split())
docs = [d for d in yaml.safe_load_all(sys.stdin) if d and d["apiVersion"] + "/" + d["kind"] not in skip]
yaml.safe_dump_all(docs, sys.stdout)' "$UNSCHEMED_KINDS"
}

# kubeconform_all VERSION: every built overlay against Kubernetes VERSION's schemas in one
# kubeconform (it loads the schemas once: per overlay that was most of the validation's time);
# the first overlay (by name) it finds invalid is the error.
kubeconform_all() {
  local bad
  kubeconform -strict -kubernetes-version "$1" -skip "${UNSCHEMED_KINDS// /,}" \
    -schema-location "$SCHEMAS/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
    -schema-location "$CRD_SCHEMAS/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json" \
    "$TMP"/built/*.yaml >"$TMP/kubeconform.out" 2>&1 && return 0
  bad=$(grep -o "^$TMP/built/[^ ]*\.yaml - " "$TMP/kubeconform.out" | sort | head -n1 || true)
  [ -n "$bad" ] || die "kubeconform (Kubernetes $1): $(first_error "$TMP/kubeconform.out")"
  grep -F "$bad" "$TMP/kubeconform.out" | sed "s|^$bad||" >"$TMP/kubeconform.first"
  bad=${bad%.yaml - }
  die "${bad##*/}: kubeconform (Kubernetes $1): $(first_error "$TMP/kubeconform.first")"
}

# dry_run_server NAME...: the last step, on a real API server: the local cluster's when it is
# up (never whatever cluster a shell's KUBECONFIG names). Every overlay in one apply (a
# dry-run changes nothing, so each object is checked against the cluster as it is); when it
# fails, overlay by overlay, to name the first that does. Namespaces are created for real
# first: namespaced objects fail a dry-run in a namespace that does not exist yet, even when the
# same apply would create it; a Gateway API overlay's custom resources need their CRDs, as its
# deploy applies them first.
dry_run_server() {
  local name
  [ -n "$dry_run" ] || return 0
  ! grep -qh '^apiVersion: gateway\.' "$TMP"/built/*.yaml || KUBECONFIG=$IB_CLUSTER_KUBECONFIG gateway_crds_up
  cat "$TMP"/built/*.yaml | awk 'BEGIN{RS="---"} /\nkind: Namespace\n/ {print "---"; print}' |
    KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl apply -f - >/dev/null 2>&1 || true
  for name in "$@"; do echo "---"; cat "$TMP/checked/$name.yaml"; done >"$TMP/all.yaml"
  KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl apply --dry-run=server -f "$TMP/all.yaml" >/dev/null 2>&1 && return 0
  for name in "$@"; do
    KUBECONFIG=$IB_CLUSTER_KUBECONFIG kubectl apply --dry-run=server -f "$TMP/checked/$name.yaml" >/dev/null 2>"$TMP/dry-run.err" ||
      die "$name: server-side dry-run: $(first_error "$TMP/dry-run.err")"
  done
}

[ -d "$OVERLAYS_DIR" ] || die "no overlays directory at $OVERLAYS_DIR (OVERLAYS_DIR)"
dry_run_setting=${VALIDATE_DRY_RUN:-auto}
case $dry_run_setting in
  auto|0) ;;
  *) die "VALIDATE_DRY_RUN must be auto or 0, not '$dry_run_setting'" ;;
esac
mkdir -p "$KV_DIR"
ensure_schemas
ensure_crd_schemas
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/built" "$TMP/checked"
dry_run=
if [ "$dry_run_setting" = 0 ]; then say validate "VALIDATE_DRY_RUN=0: no server-side dry-run"
elif bash "$IB_ROOT/bench/platforms/local/cluster.sh" status >/dev/null 2>&1; then dry_run=1
else say validate "local cluster not up: no server-side dry-run (./task cluster:up adds it)"; fi
names=()
for dir in "$OVERLAYS_DIR"/*/; do
  [ -f "$dir/kustomization.yaml" ] || continue
  name=$(basename "$dir")
  kustomize build "${dir%/}" >"$TMP/built/$name.yaml" 2>"$TMP/build.err" ||
    die "$name: kustomize build: $(first_error "$TMP/build.err")"
  names+=("$name")
done
[ "${#names[@]}" -gt 0 ] || die "no overlay (a directory with a kustomization.yaml) in $OVERLAYS_DIR"
for v in $K8S_VERSIONS; do kubeconform_all "$v"; done
declare -A objects unschemed
for name in "${names[@]}"; do
  objects[$name]=$("$KV_DIR/venv/bin/python" "$IB_ROOT/bench/validate/policy.py" "$OVERLAYS_DIR/$name" <"$TMP/built/$name.yaml" 2>"$TMP/policy.err") ||
    die "$name: $(first_error "$TMP/policy.err")"
  unschemed[$name]=$(for k in $UNSCHEMED_KINDS; do grep -qx "kind: ${k##*/}" "$TMP/built/$name.yaml" && echo "${k##*/}"; done | paste -sd, || true)
  if [ -n "${unschemed[$name]}" ]; then without_unschemed <"$TMP/built/$name.yaml" >"$TMP/checked/$name.yaml"
  else cp "$TMP/built/$name.yaml" "$TMP/checked/$name.yaml"; fi
done
dry_run_server "${names[@]}"
for name in "${names[@]}"; do
  say validate "$name: ${objects[$name]} objects ok (k8s $K8S_SHORT${dry_run:+, server dry-run on the local cluster})${unschemed[$name]:+; not validated: ${unschemed[$name]} (no CRD of it can be had here)}"
done
