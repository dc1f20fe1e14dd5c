#!/usr/bin/env bash
# The whole suite: unit tests of the k6 lib (node), then static and end-to-end tests on the
# real lab (pytest). Needs root: the lab uses network namespaces.
# `run.sh fast` (./task test:fast): the tests that need no lab, no cluster and no load (unit,
# static, offline, bad input, generated views; conftest.py's tier_guard holds them to it).
set -euo pipefail
. "$(dirname "$0")/../../bench/lib.sh"
need_root "the test suite"
tier=all
if [ "${1:-}" = fast ]; then tier=fast; shift; fi
export IB_TEST_TIER=$tier
command -v node >/dev/null || die "node (18 or newer) runs the k6 lib's unit tests: install nodejs"
cd "$IB_ROOT"
# One suite at a time: two would share ports 80/443, /run/ingress-bench and 198.18.0.0/15 and
# read each other's cluster as a leftover. Every clone of one user shares the cache; an
# advisory lock on its directory creates nothing and ends with this process.
mkdir -p "$IB_CACHE"
exec {suite_lock}<"$IB_CACHE"
flock -n "$suite_lock" || die "another run of the test suite holds $IB_CACHE (fuser -v $IB_CACHE shows it): wait for it or stop it"
# The unit runs' logs: a directory of this run's own (never a fixed name under /tmp, which
# another user could have planted), removed on exit unless a step failed: then it is kept
# and its path printed.
logs=$(mktemp -d "${TMPDIR:-/tmp}/ingress-bench-test.XXXXXX")
keep_logs=0
trap 'if [ "$keep_logs" = 1 ]; then echo "logs kept in $logs" >&2; else rm -rf "$logs"; fi' EXIT
failed() { keep_logs=1; cat "$logs/$1"; die "$2"; }
# The whole machine before anything of ours runs (ci/tests/machine_state.py: sysctls,
# rulesets, qdiscs, links, routes, netns, mounts, cgroups, listening sockets), compared when
# the suite ends: every up's down must have left it as found. Nothing of ours may be up now,
# or the suite's downs would show as differences.
for p in lab local; do
  if [ "$p" = lab ]; then bash bench/platforms/lab.sh status >/dev/null 2>&1 || continue
  else bash bench/platforms/local/cluster.sh status >/dev/null 2>&1 || continue; fi
  die "the $p platform is up: the suite compares the machine before and after it; run './task ${p/local/cluster}:down' first"
done
# Half of a lab or a cluster is not "up" but would be in the snapshot all the same: another
# suite's (under another IB_CACHE) in the middle of an up or a down, or an interrupted one's
# (a killed session leaves links, mounts and state with no process behind them).
pieces() { { [ -e /run/ingress-bench ] && echo /run/ingress-bench
  ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^(ibench|ibv-)/ {sub(/@.*/, "", $2); print "link " $2}'
  ip netns list 2>/dev/null | awk -v p="$LAB_NS_PREFIX" 'index($1, p) == 1 {print "netns " $1}'; } | LC_ALL=C sort | paste -sd' '; }
left=$(pieces)
if [ -n "$left" ]; then
  live=$(bash bench/platforms/down.sh live | sort -un | paste -sd' ')
  [ -z "$live" ] || die "pieces of ingress-bench are on this machine ($left) and processes of it run ($live): another run is going on; wait for it to end"
  # Nothing of ours runs: what is left is ours and dead, and the downs remove exactly that.
  say test "an interrupted run left pieces ($left): './task down' removes them"
  out=$(bash bench/platforms/down.sh 2>&1) || { echo "$out" >&2; die "'./task down' failed on what an interrupted run left"; }
  left=$(pieces)
  [ -z "$left" ] || die "pieces of ingress-bench that no down removes are on this machine ($left): remove them, or the suite would report them as its own"
fi
python3 ci/tests/machine_state.py snapshot "$logs/machine-before.json"
say test "unit: k6/lib (node --test)"
# The test files named, not the folder: Node 21+ reads a directory argument as a module to
# run (MODULE_NOT_FOUND) where 18 and 20 searched it for tests.
node --test k6/lib/*.test.js >"$logs/unit.log" 2>&1 || failed unit.log "k6 lib unit tests failed"
# Its closing counts: "# pass N" (TAP, Node 18-22 without a TTY) or "ℹ pass N" (spec, Node 23+).
grep -E '^(#|ℹ) (pass|fail) ' "$logs/unit.log" | paste -sd' ' >&2
say test "generated: the settings registry's views (bench/settings/generate.py --check)"
python "$IB_ROOT/bench/settings/generate.py" --check || exit 1
say test "generated: the signal contract's views (monitoring/generate.py --check)"
python "$IB_ROOT/monitoring/generate.py" --check || exit 1
say test "docs: every task, setting, link and anchor they name (ci/checks/docs.py)"
python "$IB_ROOT/ci/checks/docs.py" || exit 1
say test "unit: xk6, the native engine (go test)"
# -mod=mod may write requirements into go.mod: that would change the extension's hash, and so
# the k6 binary and image names (bench/lib.sh IB_K6_EXT), under the tools built a moment ago.
# -trimpath and gocmd's static build: the flags of k6's build, whose compiled packages the test
# then reuses (with other flags a fresh clone compiled k6's whole tree again: 52 s).
mods=$(cat xk6/go.mod xk6/go.sum | sha256sum)
(cd xk6 && GOFLAGS="-mod=mod -trimpath" gocmd test ./... >"$logs/go-unit.log" 2>&1) ||
  failed go-unit.log "xk6 unit tests failed"
[ "$(cat xk6/go.mod xk6/go.sum | sha256sum)" = "$mods" ] ||
  die "go test rewrote xk6/go.mod or go.sum (git diff xk6/ shows what): commit that, then run the tests again"
tail -n1 "$logs/go-unit.log" >&2
# Every image an end-to-end test deploys, built before pytest: a cold build inside a test
# counted against its timeout (the first Envoy Gateway run's 300 s in a fresh clone) and
# against the suite's tiers. No-ops once cached.
if [ "$tier" = all ]; then
  say test "the images the tests deploy: monitoring's and Envoy Gateway's (bench/platforms/local/images.sh)"
  bash bench/platforms/local/images.sh monitoring
  bash bench/platforms/local/images.sh gateway
  say test "static and end to end on the lab and the local cluster (pytest)"
else
  say test "static, offline and bad input (pytest, the fast tier: no lab, no cluster, no load)"
fi
# Results of test runs go to pytest's temporary directories, never into results/. The whole
# output is kept too, for a failure seen only in a log's last lines (CI).
# --durations: the slowest tests, in every run's own output; the
# JUnit file keeps every test's time, for finding where the suite's budget goes.
mkdir -p "$IB_CACHE/logs"
set -o pipefail
rc=0
PYTEST=(pytest -q -rs -p no:cacheprovider --durations=25 --durations-min=10)
if [ "$tier" = all ] && [ $# = 0 ]; then
  # The whole suite as three sessions (ci/tests/conftest.py, STREAM): the tests that compare
  # the whole machine, alone; then the lab's stream and the local cluster's at once (most of
  # a cluster test's time is waiting on Kubernetes and Prometheus, while the machine idles).
  # Their loads never overlap (bench/lib/k6.sh load_lock), a quiet test runs while the other
  # stream is between tests (IB_TEST_LOCKS: the quiet lock's directory). Each its own temporary
  # directory, JUnit file and log; the output of both, each line prefixed with its stream.
  export IB_TEST_LOCKS=$logs
  stream() { # NAME
    IB_TEST_STREAM=$1 "${PYTEST[@]}" --basetemp="$logs/tmp-$1" --junitxml="$IB_CACHE/logs/test-$1-last.xml" ci/tests 2>&1 |
      tee "$IB_CACHE/logs/test-$1-last.log" | sed -u "s/^/[$1] /"
  }
  say test "the tests that compare the whole machine before and after, alone"
  stream machine || rc=1
  say test "the lab's stream and the local cluster's, at once"
  # The cluster's stream is the longer: its loads go before the lab's when both wait.
  IB_LOAD_YIELD=1 stream lab & lab=$!
  stream cluster & cluster=$!
  wait "$lab" || rc=1
  wait "$cluster" || rc=1
  # A failed test's files (each test's tmp_path) stay for its diagnosis.
  [ "$rc" = 0 ] || keep_logs=1
else
  "${PYTEST[@]}" --junitxml="$IB_CACHE/logs/test-$tier-last.xml" ci/tests "$@" 2>&1 | tee "$IB_CACHE/logs/test-$tier-last.log" || rc=$?
fi
say test "the machine as found (ci/tests/machine_state.py compare)"
python3 ci/tests/machine_state.py compare "$logs/machine-before.json" || { keep_logs=1; rc=1; }
exit $rc
