#!/usr/bin/env bash
# Builds the local cluster's pinned binaries into $IB_CACHE (a no-op when they are there):
# Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
# kubectl) from k8s.io/kubernetes on the module proxy, and etcd from Debian's package.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

KUBE_BINS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"

build_kube() {
  local b missing=
  for b in $KUBE_BINS; do [ -x "$IB_KUBE_DIR/$b" ] || missing=1; done
  [ -z "$missing" ] && return 0
  need_go "Kubernetes $KUBE_VERSION"
  local src=$IB_CACHE/src/kubernetes-$KUBE_VERSION minor=${KUBE_VERSION#v1.} minor_only
  minor_only=${minor%%.*}
  mkdir -p "$src"
  # k8s.io/kubernetes points its staging modules at ./staging; outside its repository each
  # must be replaced by its published version (v0.<minor>.<patch>). sample-* are examples.
  local mod; mod=$(gocmd mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | jq -r .GoMod) ||
    die "the module proxy did not serve k8s.io/kubernetes@$KUBE_VERSION"
  {
    echo "module ingress-bench/kubernetes-build"
    echo "go $(awk '$1 == "go" {print $2; exit}' "$mod")"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    awk -v v="v0.$minor" '$2 == "=>" && $3 ~ /^\.\/staging/ && $1 !~ /sample-/ {print "replace " $1 " => " $1 " " v}' "$mod"
  } >"$src/go.mod"
  say cluster "building Kubernetes $KUBE_VERSION ($KUBE_BINS) with $(go env GOVERSION): cold ~10 min, cached after"
  (
    cd "$src"
    local pkgs=()
    for b in $KUBE_BINS; do [ -x "$IB_KUBE_DIR/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    # One go get and one go build for all: the module graph resolved once, and each binary's
    # link overlaps the others' compiles (six builds in a row linked one at a time).
    GOFLAGS=-mod=mod gocmd get "${pkgs[@]/%/@$KUBE_VERSION}" >"$src/get.log" 2>&1 ||
      { tail -n 5 "$src/get.log" >&2; die "go get of Kubernetes $KUBE_VERSION failed (log: $src/get.log)"; }
    # The version Kubernetes' own build stamps in (hack/lib/version.sh): without it every
    # binary reports v0.0.0-master, which `kubectl version` and version-skew checks reject.
    # -s: no symbol table nor DWARF (as Kubernetes' release builds), a third of each link.
    local v=k8s.io/component-base/version c=k8s.io/client-go/pkg/version f ldflags=-s
    for f in "gitVersion=$KUBE_VERSION" gitMajor=1 "gitMinor=$minor_only" gitTreeState=clean; do ldflags+=" -X $v.$f -X $c.$f"; done
    mkdir -p "$src/bin" "$IB_KUBE_DIR"
    GOFLAGS=-mod=mod gocmd build -trimpath -ldflags="$ldflags" -o "$src/bin/" "${pkgs[@]}" >"$src/build.log" 2>&1 ||
      { tail -n 5 "$src/build.log" >&2; die "go build of Kubernetes $KUBE_VERSION failed (log: $src/build.log)"; }
    for b in "${pkgs[@]##*/}"; do mv "$src/bin/$b" "$IB_KUBE_DIR/$b"; done
  )
}

# etcd from Debian's package, unpacked into the cache: installing it would start a service.
etcd_from_debian() {
  [ -x "$IB_ETCD_DIR/etcd" ] && return 0
  say cluster "etcd: Debian's etcd-server, unpacked"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq etcd-server >/dev/null 2>&1) || { rm -rf "$tmp"; die "apt-get download etcd-server failed"; }
  dpkg-deb -x "$tmp"/etcd-server_*.deb "$tmp/root"
  mkdir -p "$IB_ETCD_DIR" && cp "$tmp/root/usr/bin/etcd" "$IB_ETCD_DIR/etcd" && rm -rf "$tmp"
}

build_kube
etcd_from_debian
