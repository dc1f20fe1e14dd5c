#!/usr/bin/env bash
# Proves the suite on another Debian release, as a user of it would run it: a debootstrap root
# of SUITE (default trixie, Debian 13) with only what the README asks for (bash, git, Go from
# go.dev), where `./task tools` installs everything from that release's archive and
# `./task bench:rps PLATFORM=lab` passes. Prints both outputs with their wall times.
#   ci/checks/distro.sh [SUITE]        DURATION (default 10s) is the run's length
# The root is cached under $IB_CACHE/distro/SUITE (debootstrap minbase, ~1-2 min cold); each
# proof runs in a fresh copy of it, deleted afterwards, so every run installs from scratch.
# Shared with the host: the Go toolchain (/usr/local/go, read-only, as installed from go.dev),
# the Go module cache (only downloads: every binary is built in the root) and the kernel (the
# lab's bridge and namespaces are the host kernel's, so the host's lab must be down).
# Everything is mounted in a private mount namespace: nothing is mounted on the host, and the
# mounts vanish with it even if this script is killed.
set -euo pipefail
. "$(dirname "$0")/../../bench/lib.sh"

SUITE=${1:-trixie}
DURATION=${DURATION:-10s}
[[ $SUITE =~ ^[a-z]+$ ]] || die "SUITE '$(printf %q "$SUITE")' is not a Debian release name (e.g. trixie)"
[[ $DURATION =~ ^[1-9][0-9]*[sm]$ ]] || die "DURATION '$(printf %q "$DURATION")' is not a duration like 10s or 1m"
need_root "the distribution proof"
for t in debootstrap unshare chroot git; do command -v $t >/dev/null || die "the distribution proof needs $t"; done
need_go "the distribution proof (the host's Go is bound into its root)"
GOROOT_HOST=$(go env GOROOT)
! ip link show ibench0 >/dev/null 2>&1 || die "the host's lab is up (bridge ibench0): the proof's lab uses the same kernel; run 'bash bench/platforms/lab.sh down' first"
MIRROR=$(debian_mirror "to debootstrap the distribution")

BASE=$IB_CACHE/distro/$SUITE
WORK='' INNER=''
# Every process whose root is the proof's root (nginx, prometheus, k6 left by an interrupted
# run): ours, found by their root, not by name.
root_pids() { [ -n "$WORK" ] || return 0; local p; for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" = "$WORK/root" ] && echo "${p#/proc/}"; done; return 0; }
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  if [ -n "$INNER" ]; then # interrupted: stop what runs in the root, then let it take the lab down
    for pid in $(root_pids); do kill -TERM "$pid" 2>/dev/null || true; done
    kill -TERM "$INNER" 2>/dev/null || true; wait "$INNER" 2>/dev/null || true
  fi
  for pid in $(root_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  # The lab's host-side objects, had the namespace's own teardown not run (killed): the bridge
  # and blackhole route it made in the shared kernel.
  ip link del ibench0 2>/dev/null || true
  ip route del blackhole "$LAB_RANGE" 2>/dev/null || true
  [ -z "$WORK" ] || rm -rf --one-file-system "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ ! -f "$BASE/.complete" ]; then
  mkdir -p "$IB_CACHE/distro"; rm -rf "$BASE"
  WORK=$(mktemp -d "$IB_CACHE/distro/.build-XXXXXX")
  say distro "debootstrap --variant=minbase $SUITE from $MIRROR (cold ~1-2 min)"
  t0=$SECONDS
  debootstrap --variant=minbase --include=ca-certificates,git "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 5 "$WORK/debootstrap.log" >&2; die "debootstrap $SUITE failed (last lines above)"; }
  rm -f "$WORK/root/var/cache/apt/archives/"*.deb
  mv "$WORK/root" "$BASE" && touch "$BASE/.complete"
  say distro "root ready in $((SECONDS - t0)) s"
  rm -rf "$WORK"; WORK=''
fi

WORK=$(mktemp -d "$IB_CACHE/distro/.run-XXXXXX")
cp -a "$BASE" "$WORK/root"
ROOT=$WORK/root
# The host's local certificate authorities, as the user's machine has its own: Go's module
# downloads go through the same HTTPS path as the host's.
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$ROOT/etc/pip.conf"
# The committed tree, as a user's clone is (not the working tree's uncommitted edits).
git clone -q --no-hardlinks "$IB_ROOT" "$ROOT/root/ingress-bench"
COMMIT=$(git -C "$ROOT/root/ingress-bench" rev-parse --short HEAD)
GOMODCACHE_HOST=$(go env GOMODCACHE)
mkdir -p "$GOMODCACHE_HOST" "$ROOT/usr/local/go" "$ROOT/root/go/pkg/mod" "$IB_CACHE/distro/$SUITE-apt"

# The proof's environment: a login's, plus how this host reaches the registries: its Go
# settings (module proxy) and, where set, its proxy and certificate settings (pip, npm and
# curl bring their own trust stores otherwise).
hostenv=()
for v in GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOINSECURE GOFLAGS; do
  val=$(go env "$v"); [ -z "$val" ] || hostenv+=("$v=$val")
done
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY SSL_CERT_FILE SSL_CERT_DIR \
  PIP_CERT PIP_INDEX_URL REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
  [ -z "${!v:-}" ] || hostenv+=("$v=${!v}")
done

# Runs in the private mount namespace: mounts, then the two commands in the chroot.
inner() {
  set -euo pipefail
  # The root a mount point of its own: `ip netns exec` remounts / (--make-rslave), which fails
  # on a plain directory.
  mount --bind "$ROOT" "$ROOT"
  mount -t proc proc "$ROOT/proc"
  mount --rbind /sys "$ROOT/sys"
  mount --rbind /dev "$ROOT/dev"
  mount -t tmpfs -o mode=0755 tmpfs "$ROOT/run" # the lab's netns files and state: the root's own
  mount --bind "$GOROOT_HOST" "$ROOT/usr/local/go" && mount -o remount,bind,ro "$ROOT/usr/local/go"
  mount --bind "$GOMODCACHE_HOST" "$ROOT/root/go/pkg/mod"
  mount --bind "$IB_CACHE/distro/$SUITE-apt" "$ROOT/var/cache/apt/archives" # downloads only
  in_root() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
      PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${hostenv[@]}" \
      bash -c "cd /root/ingress-bench && $1"
  }
  # Whatever happens, the lab (its processes, namespaces, bridge, cgroups) goes down from inside.
  trap 'in_root "bash bench/platforms/lab.sh down" >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  in_root 'update-ca-certificates >/dev/null 2>&1'
  # shellcheck disable=SC2016 # expanded in the root
  say distro "$(in_root '. /etc/os-release && echo "$PRETTY_NAME"'), $(in_root 'go version'), checkout $COMMIT"
  local t0 rc=0
  for cmd in "./task tools" "./task bench:rps PLATFORM=lab DURATION=$DURATION"; do
    echo "===== $cmd"
    t0=$SECONDS
    in_root "$cmd" 2>&1 || rc=$?
    echo "===== $cmd: exit $rc, wall $((SECONDS - t0)) s"
    [ $rc = 0 ] || return $rc
  done
  echo "===== versions found"
  in_root 'bash ci/tools/tools.sh versions'
}
export -f inner say
export ROOT GOROOT_HOST GOMODCACHE_HOST IB_CACHE SUITE COMMIT DURATION
HOSTENV_LIST=$(printf '%q ' "${hostenv[@]}") && export HOSTENV_LIST
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount --propagation private -- bash -c 'eval "hostenv=($HOSTENV_LIST)"; inner' &
INNER=$!
rc=0; wait "$INNER" || rc=$?
INNER=''
[ $rc = 0 ] || die "the $SUITE proof failed (exit $rc; output above)"
say distro "$SUITE: ./task tools and ./task bench:rps PLATFORM=lab passed"
