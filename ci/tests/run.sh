#!/usr/bin/env bash
# The whole suite: unit tests of the k6 lib (node), then static and end-to-end tests on the
# real lab (pytest). Needs root: the lab uses network namespaces.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_root "the test suite"
command -v node >/dev/null || die "node (18 or newer) runs the k6 lib's unit tests: install nodejs"
cd "$IB_ROOT"
say test "unit: k6/lib (node --test)"
node --test k6/lib/ >/tmp/ingress-bench-unit.log 2>&1 || { cat /tmp/ingress-bench-unit.log; die "k6 lib unit tests failed"; }
grep -E '^# (pass|fail)' /tmp/ingress-bench-unit.log | paste -sd' ' >&2
say test "generated: the settings registry's views (ci/settings/generate.mjs --check)"
node "$IB_ROOT/ci/settings/generate.mjs" --check || exit 1
say test "generated: the signal contract's views (monitoring/generate.py --check)"
python "$IB_ROOT/monitoring/generate.py" --check || exit 1
say test "unit: xk6, the native engine (go test)"
(cd xk6 && GOTOOLCHAIN=local GOFLAGS=-mod=mod go test ./... >/tmp/ingress-bench-go-unit.log 2>&1) ||
  { cat /tmp/ingress-bench-go-unit.log; die "xk6 unit tests failed"; }
tail -n1 /tmp/ingress-bench-go-unit.log >&2
say test "static and end to end on the lab (pytest)"
# Results of test runs go to pytest's temporary directories, never into results/. The whole
# output is kept too, for a failure seen only in a log's last lines (CI).
mkdir -p "$IB_CACHE/logs"
set -o pipefail
pytest -q -rs -p no:cacheprovider ci/tests "$@" 2>&1 | tee "$IB_CACHE/logs/test-last.log"
