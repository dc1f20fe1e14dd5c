#!/usr/bin/env bash
# Installs every pinned tool the project needs; a no-op (a few stat calls) when all are there.
#   ci/tools/tools.sh            everything
#   ci/tools/tools.sh task       only go-task (what the ./task wrapper needs to start)
#   ci/tools/tools.sh cluster    everything, plus the local Kubernetes platform's binaries and images
#   ci/tools/tools.sh versions   the distribution's versions the suite runs with (name=version lines)
#   ci/tools/tools.sh apt PKG... install Debian packages the suite's way (no service started or
#                                enabled at boot); the tests use it
#   ci/tools/tools.sh registry   the tests' image registry (a user's, to which the project's k6
#                                image is pushed): its binary's path
set -euo pipefail
. "$(dirname "$0")/../../bench/lib.sh"

# go_tool NAME VERSION DIR PACKAGE [LDFLAGS]: build PACKAGE@VERSION with the local Go into DIR/NAME
# (-s: no symbol table nor DWARF, as release builds; the links are a third shorter).
go_tool() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-}
  [ -x "$dir/$name" ] && return 0
  need_go "$name $version"
  say tools "building $name $version with $(go env GOVERSION) (cold: 1-4 min, cached after)"
  local tmp; tmp=$(mktemp -d "$IB_CACHE/.build-XXXXXX")
  if ! GOFLAGS=-trimpath GOBIN="$tmp" gocmd install -ldflags="-s $ldflags" "$pkg@$version" >"$tmp.log" 2>&1; then
    tail -n 5 "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"
    die "go install $pkg@$version failed (last lines above)"
  fi
  mkdir -p "$dir" && mv "$tmp/$name" "$dir/$name" && rm -rf "$tmp" "$tmp.log"
}

# k6 with the project's extension, built the way xk6 builds one (xk6 itself is not obtainable
# here): a main.go importing go.k6.io/k6/cmd and the extension, go mod tidy, go build. Users
# with xk6: `xk6 build $K6_VERSION --with github.com/ingress-bench/ingress-bench/xk6=./xk6`.
# npm_build NAME DIR SRC WHAT [OUT]: SRC's locked packages (npm ci, no install scripts) into DIR,
# built (node build.mjs) when SRC has a build, DIR then holding OUT's files and index.html;
# marked when complete. npm's own cache is outside the checkout (~/.npm); --prefer-offline takes
# a locked package from it without asking the registry first (17 s for the live page's 333
# packages here, 28 s asking).
npm_build() {
  local name=$1 dir=$2 src=$3 what=$4 out=${5:-} tmp
  [ -f "$dir/.complete" ] && return 0
  say tools "$what"
  tmp=$(mktemp -d "$IB_CACHE/.$name-build-XXXXXX")
  cp -r "$src/." "$tmp/"; rm -rf "$tmp/node_modules" "$tmp/dist"
  (cd "$tmp" && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts && { [ ! -f build.mjs ] || node build.mjs; }) >"$IB_CACHE/npm-$name.log" 2>&1 ||
    { tail -n 3 "$IB_CACHE/npm-$name.log" >&2; rm -rf "$tmp"; die "npm ci in $src failed (log: $IB_CACHE/npm-$name.log)"; }
  rm -rf "$dir"
  if [ -n "$out" ]; then mkdir -p "$dir"; cp -r "$tmp/$out/." "$tmp/index.html" "$dir/"; rm -rf "$tmp"; else mv "$tmp" "$dir"; fi
  touch "$dir/.complete"
}

# python_and_pages: the venv (built in place: a venv cannot be moved, its scripts name their
# path; marked when complete), the live page and the browser tests' driver.
python_and_pages() {
  if [ ! -f "$IB_VENV/.complete" ]; then
    say tools "python venv from ci/tools/requirements.txt (pytest, PyYAML, matplotlib, grafana-foundation-sdk)"
    rm -rf "$IB_VENV"
    python3 -m venv "$IB_VENV" >/dev/null || die "python3 -m venv failed: install python3-venv"
    "$IB_VENV/bin/pip" install -q -r "$IB_ROOT/ci/tools/requirements.txt" >"$IB_CACHE/pip.log" 2>&1 ||
      { tail -n 3 "$IB_CACHE/pip.log" >&2; rm -rf "$IB_VENV"; die "pip install -r ci/tools/requirements.txt failed (log: $IB_CACHE/pip.log)"; }
    touch "$IB_VENV/.complete"
  fi
  npm_build live "$IB_LIVE_DIR" "$IB_ROOT/dashboards/live" "the live page (Perses, bundled by esbuild)" dist
  npm_build browser "$IB_BROWSER_DIR" "$IB_ROOT/ci/tools/browser" "the browser tests' driver (playwright-core)"
}

k6_build() {
  [ -x "$IB_K6_DIR/k6" ] && return 0
  need_go "k6 $K6_VERSION"
  say tools "building k6 $K6_VERSION with the xk6/ extension, $(go env GOVERSION) (cold: 1-4 min, cached after)"
  local src ext=github.com/ingress-bench/ingress-bench/xk6
  src=$(mktemp -d "$IB_CACHE/.k6-build-XXXXXX")
  printf 'module ingress-bench/k6-build\n\ngo %s\n\nrequire (\n\tgo.k6.io/k6 %s\n\t%s v0.0.0\n)\n\nreplace %s => %s\n' \
    "$(go_min)" "$K6_VERSION" "$ext" "$ext" "$IB_ROOT/xk6" >"$src/go.mod"
  printf 'package main\n\nimport (\n\tk6cmd "go.k6.io/k6/cmd"\n\n\t_ "%s"\n)\n\nfunc main() {\n\tk6cmd.Execute()\n}\n' "$ext" >"$src/main.go"
  if ! (cd "$src" && GOFLAGS=-mod=mod gocmd mod tidy && gocmd build -trimpath -ldflags=-s -o k6 .) >"$src.log" 2>&1; then
    tail -n 5 "$src.log" >&2; rm -rf "$src" "$src.log"
    die "building k6 $K6_VERSION with the xk6/ extension failed (last lines above)"
  fi
  mkdir -p "$IB_K6_DIR" && mv "$src/k6" "$IB_K6_DIR/k6" && rm -rf "$src" "$src.log"
}

# Debian's docker-registry (the distribution project's registry), unpacked into the cache:
# installing it would start a service and add a user.
registry_from_debian() {
  local dir=$IB_CACHE/docker-registry tmp
  if [ ! -x "$dir/docker-registry" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq docker-registry >/dev/null 2>&1) || { rm -rf "$tmp"; die "apt-get download docker-registry failed"; }
    dpkg-deb -x "$tmp"/docker-registry_*.deb "$tmp/root"
    mkdir -p "$dir" && cp "$tmp/root/usr/bin/docker-registry" "$dir/" && rm -rf "$tmp"
  fi
  echo "$dir/docker-registry"
}

# The policy-rc.d we wrote, while an install runs: removed on any exit of this script, so an
# interrupted install never leaves every service start on the host blocked.
POLICY_RC=/usr/sbin/policy-rc.d POLICY_ADDED='' APT_PID='' BUILD_PID='' AUX_PID='' IMAGE_PID=''
policy_remove() { [ -z "$POLICY_ADDED" ] || rm -f "$POLICY_RC"; POLICY_ADDED=; }
# A signal stops the running apt-get and waits for it: left to finish alone it could start
# services once our policy-rc.d is gone. The builds beside others (the venv and the pages', the
# cluster's) are stopped too. TERM, also for Ctrl-C: a background command of a script ignores
# SIGINT.
# A build that failed ends the others the same way (the EXIT trap).
stop_children() {
  local pid
  for pid in "$APT_PID" "$BUILD_PID" "$AUX_PID" "$IMAGE_PID"; do
    [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  done
  APT_PID='' BUILD_PID='' AUX_PID='' IMAGE_PID=''
}
on_signal() { stop_children; policy_remove; exit "$1"; } # EXIT_CODE
trap 'stop_children; policy_remove' EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# apt_run ARGS...: apt-get in the background and waited for, so a signal reaches our trap at
# once instead of after apt-get has finished.
apt_run() {
  DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$IB_CACHE/apt.log" 2>&1 &
  APT_PID=$!
  local rc=0; wait "$APT_PID" || rc=$?
  APT_PID=; return "$rc"
}

installed_packages() { dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" {print $2}' | sort; }

# boot_disable PACKAGE...: the packages' services do not start at boot (their postinst enables
# them: sysv rc links, systemd .wants links); both tools edit links only, no init system needed.
boot_disable() {
  local p f name
  for p in "$@"; do
    for f in $(dpkg-query -L "$p" 2>/dev/null | grep -E '^(/etc/init\.d/[^/]+|(/usr)?/lib/systemd/system/[^/@]+\.(service|socket|timer))$'); do
      name=${f##*/}
      case $f in
        /etc/init.d/*) ! compgen -G "/etc/rc?.d/S[0-9][0-9]$name" >/dev/null || update-rc.d "$name" disable >/dev/null 2>&1 || true ;;
        # It runs only as a package's maintainer script would call it.
        *) ! command -v deb-systemd-helper >/dev/null || DPKG_MAINTSCRIPT_PACKAGE=$p deb-systemd-helper disable "$name" >/dev/null 2>&1 || true ;;
      esac
    done
  done
}

apt_tools() { # PACKAGE...
  local missing=() p
  # One dpkg-query for all (each reads the whole status database: a tenth of a second, at
  # every ./task on a busy host); a package it does not know is missing too.
  mapfile -t missing < <(comm -23 <(printf '%s\n' "$@" | sort -u) \
    <(dpkg-query -W -f='${db:Status-Status} ${Package}\n' "$@" 2>/dev/null | awk '$1 == "installed" {print $2}' | sort -u))
  [ ${#missing[@]} = 0 ] && return 0
  command -v apt-get >/dev/null || die "missing Debian packages (${missing[*]}) and no apt-get: install them with your package manager"
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}): run 'sudo ci/tools/tools.sh' or install them"
  say tools "apt-get install ${missing[*]}"
  # A policy-rc.d that says no keeps the packages' services (nginx on :80, the exporters) from
  # starting on hosts with an init system: the suite starts its own instances.
  if [ ! -e $POLICY_RC ]; then POLICY_ADDED=1; printf '#!/bin/sh\nexit 101\n' >$POLICY_RC; chmod +x $POLICY_RC; fi
  local before rc=0; before=$(installed_packages)
  : >"$IB_CACHE/apt.log"
  { apt_run update -qq && apt_run install -y -qq --no-install-recommends "${missing[@]}"; } || rc=$?
  # Only what this install added (dependencies included); what was there before keeps its setup.
  # shellcheck disable=SC2046
  boot_disable $(comm -13 <(echo "$before") <(installed_packages))
  policy_remove
  [ $rc = 0 ] || { tail -n 5 "$IB_CACHE/apt.log" >&2; die "apt-get install failed (log: $IB_CACHE/apt.log)"; }
}

# Distribution packages are accepted from a minimum upstream version on (Debian 12 and 13 ship
# different ones); what was found is printed by `tools.sh versions`.
nginx_version() { nginx -v 2>&1 | sed -n 's|^nginx version: nginx/||p'; }
wrk_version() { wrk -v 2>&1 | awk 'NR == 1 {sub(/^debian\//, "", $2); print $2}'; }
check_min() { # NAME FOUND MINIMUM
  [ -n "$2" ] || die "$1: no version found (is it installed?); the suite needs $1 $3 or newer"
  [ "$(printf '%s\n' "$3" "$2" | sort -V | head -n1)" = "$3" ] || die "$1 is $2; the suite needs $1 $3 or newer"
}

case ${1:-all} in
  all | task | cluster) ;;
  versions)
    printf 'os=%s\nnginx=%s\nnginx_min=%s\nwrk=%s\nwrk_min=%s\n' \
      "$(. /etc/os-release && echo "$PRETTY_NAME")" "$(nginx_version)" "$NGINX_MIN" "$(wrk_version)" "$WRK_MIN"
    exit 0 ;;
  registry) mkdir -p "$IB_CACHE"; registry_from_debian; exit 0 ;;
  apt) [ $# -gt 1 ] || die "tools.sh apt needs package names"; mkdir -p "$IB_CACHE"; shift; apt_tools "$@"; exit 0 ;;
  *) die "unknown mode '$1': tools.sh [task|cluster|versions|registry|apt PACKAGE...]" ;;
esac
mkdir -p "$IB_CACHE"
# One build at a time per cache: two (a test suite's and a benchmark's, say) would build into
# the same directories and move each other's files away. The second waits; the lock ends
# with this process.
exec {build_lock}>"$IB_CACHE/.build.lock"
flock -n "$build_lock" || { say tools "waiting for another build into $IB_CACHE to finish"; flock "$build_lock"; }
go_tool task "$TASK_VERSION" "$IB_TASK_DIR" github.com/go-task/task/v3/cmd/task
[ "${1:-all}" = task ] && exit 0

command -v node >/dev/null || APT_PACKAGES="$APT_PACKAGES nodejs" # unit tests of the k6 lib
# shellcheck disable=SC2086
apt_tools $APT_PACKAGES
# The cluster's nginx image (a debootstrap: mostly waiting on the mirror, ~1 min cold) from the
# start, beside the Go builds below.
if [ "${1:-all}" = cluster ]; then
  # shellcheck disable=SC2086
  apt_tools $CLUSTER_APT_PACKAGES
  bash "$IB_ROOT/bench/platforms/local/images.sh" nginx & IMAGE_PID=$!
fi
check_min nginx "$(nginx_version)" "$NGINX_MIN"
check_min wrk "$(wrk_version)" "$WRK_MIN"
command -v npm >/dev/null || die "npm is not installed: the live page and the browser tests need Node.js and npm (Debian: apt install nodejs npm)"
# The venv and the pages (downloads, then a bundle) beside the Go builds (CPU): the fresh
# machine's longest waits at once.
python_and_pages & AUX_PID=$!
k6_build
go_tool kustomize "$KUSTOMIZE_VERSION" "$IB_KUSTOMIZE_DIR" sigs.k8s.io/kustomize/kustomize/v5
go_tool kubeconform "$KUBECONFORM_VERSION" "$IB_KUBECONFORM_DIR" github.com/yannh/kubeconform/cmd/kubeconform
# What helm's Makefile stamps into a release build: its version and the Kubernetes version
# `helm template` assumes without a cluster.
hv=helm.sh/helm/v3/internal/version hc=helm.sh/helm/v3/pkg
go_tool helm "$HELM_VERSION" "$IB_HELM_DIR" helm.sh/helm/v3/cmd/helm \
  "-X $hv.version=$HELM_VERSION -X $hv.metadata= -X $hc/chartutil.k8sVersionMajor=${HELM_K8S_VERSION%.*} -X $hc/chartutil.k8sVersionMinor=${HELM_K8S_VERSION#*.} -X $hc/lint/rules.k8sVersionMajor=${HELM_K8S_VERSION%.*} -X $hc/lint/rules.k8sVersionMinor=${HELM_K8S_VERSION#*.}"
wait "$AUX_PID" || exit 1
AUX_PID=''
say tools "k6 $K6_VERSION, kustomize $KUSTOMIZE_VERSION, kubeconform $KUBECONFORM_VERSION, helm $HELM_VERSION, task $TASK_VERSION, nginx $(nginx_version), wrk $(wrk_version) ready"
[ "${1:-all}" = cluster ] || exit 0
# Kubernetes' binaries (Go links: CPU) beside the other images (the nginx one, started above,
# finished first: images.sh would build it a second time).
bash "$IB_ROOT/bench/platforms/local/build.sh" & BUILD_PID=$!
wait "$IMAGE_PID" || exit 1
IMAGE_PID=''
bash "$IB_ROOT/bench/platforms/local/images.sh" || exit 1
wait "$BUILD_PID" || exit 1
BUILD_PID=''
say tools "cluster: Kubernetes $KUBE_VERSION, etcd $(etcd --version 2>/dev/null | awk 'NR==1{print $3}'), containerd $(containerd --version | awk '{print $3}'), images ready"
