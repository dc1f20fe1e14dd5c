#!/usr/bin/env bash
# Installs every pinned tool the project needs; a no-op (a few stat calls) when all are there.
#   ci/tools/tools.sh            everything
#   ci/tools/tools.sh task       only go-task (what the ./task wrapper needs to start)
#   ci/tools/tools.sh cluster    everything, plus the local Kubernetes platform's binaries and images
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

# go_tool NAME VERSION DIR PACKAGE: build PACKAGE@VERSION with the local Go into DIR/NAME.
go_tool() {
  local name=$1 version=$2 dir=$3 pkg=$4
  [ -x "$dir/$name" ] && return 0
  command -v go >/dev/null || die "building $name $version needs Go (1.24 or newer): install it from your distribution or go.dev, then re-run"
  say tools "building $name $version with $(go env GOVERSION) (cold: 1-4 min, cached after)"
  local tmp; tmp=$(mktemp -d "$IB_CACHE/.build-XXXXXX")
  # GOTOOLCHAIN=local: never download another Go toolchain (the proxy here serves modules only).
  if ! GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath GOBIN="$tmp" go install "$pkg@$version" >"$tmp.log" 2>&1; then
    tail -n 5 "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"
    die "go install $pkg@$version failed (last lines above)"
  fi
  mkdir -p "$dir" && mv "$tmp/$name" "$dir/$name" && rm -rf "$tmp" "$tmp.log"
}

# k6 with the project's extension, built the way xk6 builds one (xk6 itself is not obtainable
# here): a main.go importing go.k6.io/k6/cmd and the extension, go mod tidy, go build. Users
# with xk6: `xk6 build $K6_VERSION --with github.com/ingress-bench/ingress-bench/xk6=./xk6`.
k6_build() {
  [ -x "$IB_K6_DIR/k6" ] && return 0
  command -v go >/dev/null || die "building k6 $K6_VERSION needs Go (1.24 or newer): install it from your distribution or go.dev, then re-run"
  say tools "building k6 $K6_VERSION with the xk6/ extension, $(go env GOVERSION) (cold: 1-4 min, cached after)"
  local src ext=github.com/ingress-bench/ingress-bench/xk6
  src=$(mktemp -d "$IB_CACHE/.k6-build-XXXXXX")
  printf 'module ingress-bench/k6-build\n\ngo 1.25.0\n\nrequire (\n\tgo.k6.io/k6 %s\n\t%s v0.0.0\n)\n\nreplace %s => %s\n' \
    "$K6_VERSION" "$ext" "$ext" "$IB_ROOT/xk6" >"$src/go.mod"
  printf 'package main\n\nimport (\n\tk6cmd "go.k6.io/k6/cmd"\n\n\t_ "%s"\n)\n\nfunc main() {\n\tk6cmd.Execute()\n}\n' "$ext" >"$src/main.go"
  if ! (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod tidy && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o k6 .) >"$src.log" 2>&1; then
    tail -n 5 "$src.log" >&2; rm -rf "$src" "$src.log"
    die "building k6 $K6_VERSION with the xk6/ extension failed (last lines above)"
  fi
  mkdir -p "$IB_K6_DIR" && mv "$src/k6" "$IB_K6_DIR/k6" && rm -rf "$src" "$src.log"
}

apt_tools() { # PACKAGE...
  local missing=() p
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} = 0 ] && return 0
  command -v apt-get >/dev/null || die "missing Debian packages (${missing[*]}) and no apt-get: install them with your package manager"
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}): run 'sudo ci/tools/tools.sh' or install them"
  say tools "apt-get install ${missing[*]}"
  # A policy-rc.d that says no keeps the packages' services (nginx on :80, prometheus) from
  # starting on hosts with an init system: the suite starts its own instances.
  local policy=/usr/sbin/policy-rc.d added=
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy; chmod +x $policy; added=1; fi
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$IB_CACHE/apt.log" 2>&1 || rc=$?
  [ -n "$added" ] && rm -f $policy
  [ $rc = 0 ] || { tail -n 5 "$IB_CACHE/apt.log" >&2; die "apt-get install failed (log: $IB_CACHE/apt.log)"; }
}

check_series() { # NAME ACTUAL EXPECTED_PREFIX
  case "$2" in "$3"*) ;; *) die "$1 is $2 but the suite is pinned to $3x: install that version";; esac
}

mkdir -p "$IB_CACHE"
go_tool task "$TASK_VERSION" "$IB_TASK_DIR" github.com/go-task/task/v3/cmd/task
[ "${1:-all}" = task ] && exit 0

command -v node >/dev/null || APT_PACKAGES="$APT_PACKAGES nodejs" # unit tests of the k6 lib
# shellcheck disable=SC2086
apt_tools $APT_PACKAGES
check_series nginx "$(nginx -v 2>&1 | sed 's|.*nginx/||')" "$NGINX_SERIES"
check_series wrk "$(dpkg-query -W -f='${Version}' wrk)" "$WRK_SERIES"
k6_build
go_tool kustomize "$KUSTOMIZE_VERSION" "$IB_KUSTOMIZE_DIR" sigs.k8s.io/kustomize/kustomize/v5
go_tool kubeconform "$KUBECONFORM_VERSION" "$IB_KUBECONFORM_DIR" github.com/yannh/kubeconform/cmd/kubeconform
# A venv cannot be moved (its scripts name their path): built in place, marked when complete.
if [ ! -f "$IB_VENV/.complete" ]; then
  say tools "python venv from ci/tools/requirements.txt (pytest, PyYAML, matplotlib, grafana-foundation-sdk)"
  rm -rf "$IB_VENV"
  python3 -m venv "$IB_VENV" >/dev/null || die "python3 -m venv failed: install python3-venv"
  "$IB_VENV/bin/pip" install -q -r "$IB_ROOT/ci/tools/requirements.txt" >"$IB_CACHE/pip.log" 2>&1 ||
    { tail -n 3 "$IB_CACHE/pip.log" >&2; rm -rf "$IB_VENV"; die "pip install -r ci/tools/requirements.txt failed (log: $IB_CACHE/pip.log)"; }
  touch "$IB_VENV/.complete"
fi
say tools "k6 $K6_VERSION, kustomize $KUSTOMIZE_VERSION, kubeconform $KUBECONFORM_VERSION, task $TASK_VERSION, nginx $(nginx -v 2>&1 | sed 's|.*/||'), wrk $(dpkg-query -W -f='${Version}' wrk) ready"
[ "${1:-all}" = cluster ] || exit 0
# shellcheck disable=SC2086
apt_tools $CLUSTER_APT_PACKAGES
bash "$IB_ROOT/ci/platforms/local/build.sh"
bash "$IB_ROOT/ci/platforms/local/images.sh"
say tools "cluster: Kubernetes $KUBE_VERSION, etcd $(etcd --version 2>/dev/null | awk 'NR==1{print $3}'), containerd $(containerd --version | awk '{print $3}'), images ready"
