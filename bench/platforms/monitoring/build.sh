#!/usr/bin/env bash
# Builds the monitoring binaries into $IB_CACHE, keyed by version (a no-op when present):
# Prometheus + promtool (the lab's host Prometheus, the rule tests, the cluster's image) and
# prometheus-operator + prometheus-config-reloader (the local cluster's operator).
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"

# wrapper_build DIR MODULE VERSION PKG... : `go build` each PKG (a path inside MODULE) into DIR.
# The wrapper module requires MODULE and copies its non-local replace directives, which is
# what `go install MODULE/cmd/x@v` refuses to do; local ones (./pkg/...) become requires of
# the same version, published as their own modules.
# With sd="name...", MODULE is Prometheus built as its docs describe a custom build (its
# plugins.yml): MODULE's own source, replaced by a copy whose plugins/plugins.go registers only
# those service discoveries. Every Prometheus here reads kubernetes_sd (the operator's configs)
# or static targets; the other 23 pull in the cloud SDKs, most of a cold build.
wrapper_build() {
  local dir=$1 mod=$2 ver=$3; shift 3
  local p missing=
  for p in "$@"; do [ -x "$dir/$(basename "$p")" ] || missing=1; done
  [ -z "$missing" ] && return 0
  need_go "$mod $ver"
  local src=$IB_CACHE/src/$(basename "$mod")-$ver got gomod
  mkdir -p "$src"
  got=$(gocmd mod download -json "$mod@$ver") || die "the module proxy did not serve $mod@$ver"
  gomod=$(jq -r .GoMod <<<"$got")
  {
    echo "module ingress-bench/$(basename "$mod")-build"
    echo "go $(awk '$1 == "go" {print $2; exit}' "$gomod")"
    echo "require $mod $ver"
    # single-line and block replace forms: "replace a v => b v2" / "a v => b v2"
    sed -nE 's/^(replace[[:space:]]+)?[[:space:]]*([^ ()]+)( [^ ]+)? => (\.\/[^ ]+)$/\2/p' "$gomod" | sed "s|.*|require & $ver|"
    sed -nE 's/^(replace[[:space:]]+)?[[:space:]]*([^ ()]+( [^ ]+)? => [^. ][^ ]* [^ ]+)$/replace \2/p' "$gomod"
    [ -z "${sd:-}" ] || echo "replace $mod => ./module"
  } >"$src/go.mod"
  if [ -n "${sd:-}" ]; then
    rm -rf "$src/module" && cp -r "$(jq -r .Dir <<<"$got")" "$src/module" && chmod -R u+w "$src/module"
    { echo "// The service discoveries bench/platforms/monitoring/build.sh keeps (sd)."
      echo "package plugins"; for p in $sd; do echo "import _ \"$mod/discovery/$p\""; done; } >"$src/module/plugins/plugins.go"
  fi
  say monitoring "building $(basename "$mod") $ver ($(for p in "$@"; do basename "$p"; done | paste -sd' ')) with $(go env GOVERSION): cold 3-5 min, cached after"
  (
    cd "$src"
    GOFLAGS=-mod=mod gocmd get "$mod@$ver" >"$src/get.log" 2>&1 || { tail -n 5 "$src/get.log" >&2; die "go get $mod@$ver failed (log: $src/get.log)"; }
    # One go build for the missing binaries: each one's link overlaps the other's compiles.
    # Version stamped the way Prometheus' own build does (promu), so `--version` is honest.
    local p pkgs=()
    for p in "$@"; do [ -x "$dir/$(basename "$p")" ] || pkgs+=("$p"); done
    mkdir -p "$src/bin" "$dir"
    GOFLAGS=-mod=mod gocmd build -trimpath \
      -ldflags="-s -X github.com/prometheus/common/version.Version=${version_stamp:-${ver#v}} -X github.com/prometheus/common/version.Branch=release" \
      -o "$src/bin/" "${pkgs[@]}" >"$src/build.log" 2>&1 ||
      { tail -n 5 "$src/build.log" >&2; die "go build of ${pkgs[*]##*/} failed (log: $src/build.log)"; }
    for p in "${pkgs[@]##*/}"; do mv "$src/bin/$p" "$dir/$p"; done
  )
}

sd=kubernetes version_stamp=${PROMETHEUS_VERSION#v} wrapper_build "$IB_PROMETHEUS_DIR" github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
[ "${1:-all}" = prometheus ] && exit 0
wrapper_build "$IB_OPERATOR_DIR" github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
  github.com/prometheus-operator/prometheus-operator/cmd/operator github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
