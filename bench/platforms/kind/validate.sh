#!/usr/bin/env bash
# bench/platforms/kind/validate.sh [FILE]: checks a kind cluster config (default bench/platforms/kind/cluster.yaml)
# offline with bench/platforms/kind/validate, a small Go program on kind's own v1alpha4 types (see its
# main.go), and prints what the cluster will be. kind cannot run on the project's machines
# (no container engine), so this is its validation. The program is built once per source
# version into $IB_CACHE, like the pinned tools.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

FILE=${1:-$IB_ROOT/bench/platforms/kind/cluster.yaml}
SRC=$IB_ROOT/bench/platforms/kind/validate
[ -f "$FILE" ] || die "no kind config at $FILE"

# Keyed by the program's own sources (go.mod pins kind and Kubernetes), so an edit or a bump
# builds beside the old binary and an unchanged checkout reuses it.
key=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)
bin=$IB_CACHE/kind-validate-$key/kind-validate
if [ ! -x "$bin" ]; then
  need_go "bench/platforms/kind/validate"
  say kind "building bench/platforms/kind/validate ($(awk '$1 == "sigs.k8s.io/kind" {print "kind " $2}' "$SRC/go.mod")) with $(go env GOVERSION)"
  mkdir -p "$IB_CACHE"
  tmp=$(mktemp -d "$IB_CACHE/.build-XXXXXX")
  # go.sum pins every module by hash.
  if ! (cd "$SRC" && GOFLAGS=-mod=mod gocmd build -trimpath -o "$tmp/kind-validate" .) >"$tmp.log" 2>&1; then
    tail -n 5 "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"
    die "go build of bench/platforms/kind/validate failed (last lines above)"
  fi
  mkdir -p "$(dirname "$bin")" && mv "$tmp/kind-validate" "$bin" && rm -rf "$tmp" "$tmp.log"
fi
out=$("$bin" "$FILE" 2>&1) || die "$out"
say kind "$out"
