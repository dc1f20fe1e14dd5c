# Building the pinned tools with this machine's Go (ci/tools/tools.sh, the platforms' builds).
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# need_go WHAT: Go on PATH, at least the version xk6/go.mod declares (the one source: k6
# v1.8 and the extension need it; every tool here is built with the same Go).
go_min() { awk '$1 == "go" {print $2; exit}' "$IB_ROOT/xk6/go.mod"; }
need_go() {
  local min v
  min=$(go_min)
  command -v go >/dev/null || die "building $1 needs Go $min or newer: install it from go.dev (or your distribution), then re-run"
  v=$(go env GOVERSION 2>/dev/null); v=${v#go}
  [ "$(printf '%s\n%s\n' "$min" "$v" | sort -V | head -n1)" = "$min" ] ||
    die "building $1 needs Go $min or newer, found go$v: install a newer one from go.dev, then re-run"
}
# gocmd ARGS...: the go command as every build here runs it: this machine's Go only (the
# proxy here serves modules, never toolchains), static binaries, and the compiler's garbage
# collector relaxed for the build alone (GOGC=400: cold builds 15 % faster here, CoreDNS 93
# and 102 s against 80 and 84 s, alternated; memory is not short). Never exported: k6 is a Go
# program, and its collector is part of what a run measures. No DWARF compiled: every binary
# is linked with -s, which drops it (a cold helm build 87 and 95 s against 78 and 69 s,
# alternated); GOFLAGS applies it to the commands that know the flag.
gocmd() { GOTOOLCHAIN=local CGO_ENABLED=0 GOGC=${IB_BUILD_GOGC:-400} GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false" go "$@"; }
# debian_mirror WHY: the machine's own apt mirror, read from its sources (never a hard-coded
# host: only what this machine's apt already reaches).
debian_mirror() {
  local m
  m=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1)
  [ -n "$m" ] || die "no Debian mirror found in /etc/apt/sources.list*: needed $1"
  echo "$m"
}
