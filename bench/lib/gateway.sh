# Gateway API variants (components/gateway-api with a controller's component): the CRDs they
# need and, on our cluster, Envoy Gateway's images. Sourced by bench/lib.sh (which every
# script sources); no side effects beyond variables.
IB_GATEWAY_IMAGES="envoy-gateway-$ENVOY_GATEWAY_VERSION envoy-$ENVOY_VERSION" # images.sh gateway
# module_dir MODULE@VERSION: the pinned module's files (the Go module cache, fetched once).
module_dir() {
  GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$1" 2>/dev/null | jq -er .Dir ||
    die "the Go module proxy did not serve $1 (needed for its CRDs)"
}
# gateway_crd_files: the CRDs of a Gateway API variant, one file each: Gateway API's standard
# channel (sigs.k8s.io/gateway-api) and Envoy Gateway's own (its CRD chart's generated files,
# whose only template lines are the chart's on/off switch).
gateway_crd_files() { # OUT_DIR
  local gw eg f
  gw=$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION") || return 1
  eg=$(module_dir "github.com/envoyproxy/gateway@$ENVOY_GATEWAY_VERSION") || return 1
  cp "$gw"/config/crd/standard/gateway.networking.k8s.io_{gatewayclasses,gateways,grpcroutes,httproutes,referencegrants,backendtlspolicies,listenersets,tcproutes,tlsroutes,udproutes}.yaml "$1/"
  for f in "$eg"/charts/gateway-crds-helm/templates/generated/*.yaml; do
    grep -v '^{{' "$f" >"$1/$(basename "$f")"
  done
  chmod u+w "$1"/*.yaml
}
# gateway_crds_up: on our cluster (KUBECONFIG), the CRDs of the pinned modules, once.
gateway_crds_up() {
  kubectl get crd gateways.gateway.networking.k8s.io envoyproxies.gateway.envoyproxy.io >/dev/null 2>&1 && return 0
  local dir; dir=$(mktemp -d)
  gateway_crd_files "$dir" || { rm -rf "$dir"; return 1; }
  kubectl apply --server-side --force-conflicts -f "$dir" >/dev/null || { rm -rf "$dir"; die "the Gateway API CRDs did not apply"; }
  rm -rf "$dir"
  kubectl wait --for=condition=Established crd envoyproxies.gateway.envoyproxy.io gateways.gateway.networking.k8s.io httproutes.gateway.networking.k8s.io gatewayclasses.gateway.networking.k8s.io --timeout=60s >/dev/null ||
    die "the Gateway API CRDs are not established"
}
# gateway_up OVERLAY: what an overlay with Gateway API objects needs before it is applied.
# Our cluster: the CRDs (server-side: several exceed the client-side annotation limit) and,
# with local images, Envoy Gateway's built and imported. A user's cluster must have the CRDs:
# they are cluster-wide, and another program's to install.
gateway_up() {
  local built groups
  built=$(kustomize build "$IB_ROOT/overlays/$1" 2>/dev/null)
  groups=$(sed -n 's|^apiVersion: \(gateway\.[a-z0-9.]*\)/.*|\1|p' <<<"$built" | sort -u)
  [ -n "$groups" ] || return 0
  if [ "$(pf_trait cluster)" != own ]; then
    kubectl get crd gateways.gateway.networking.k8s.io >/dev/null 2>&1 ||
      die "the cluster has no Gateway API CRDs: install Gateway API $GATEWAY_API_VERSION (standard channel) and the controller's, then re-run"
    ! grep -qx gateway.envoyproxy.io <<<"$groups" || kubectl get crd envoyproxies.gateway.envoyproxy.io >/dev/null 2>&1 ||
      die "the cluster has no Envoy Gateway CRDs: install Envoy Gateway $ENVOY_GATEWAY_VERSION's (its gateway-crds-helm chart), then re-run"
    ! grep -qx gateway.nginx.org <<<"$groups" || kubectl get crd nginxproxies.gateway.nginx.org >/dev/null 2>&1 ||
      die "the cluster has no NGINX Gateway Fabric CRDs: install those of release $(sed -n 's|.*image: ghcr.io/nginx/nginx-gateway-fabric:||p' <<<"$built" | head -n1) (its deploy/crds.yaml), then re-run"
    return 0
  fi
  gateway_crds_up
  # Envoy Gateway's images, for its variants only (NGINX Gateway Fabric's are not built here:
  # the deploy's image check refuses them).
  if [ "$(image_set)" = local ] && grep -qx gateway.envoyproxy.io <<<"$groups"; then
    bash "$IB_ROOT/bench/platforms/local/images.sh" gateway
    local have b missing=(); have=$(local_images)
    for b in $IB_GATEWAY_IMAGES; do
      grep -q "/${b%-*}:${b##*-}\$" <<<"$have" || missing+=("$b")
    done
    [ ${#missing[@]} = 0 ] || import_images "${missing[@]}"
  fi
}
