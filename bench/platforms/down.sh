#!/usr/bin/env bash
# Everything of ingress-bench on this machine, down: the lab and the local cluster, each with
# its monitoring, and whatever an interrupted run of either left (a killed session leaves
# links, mounts and state with no process behind them). Each down removes only what its up
# made; both are idempotent.
#   bench/platforms/down.sh          both downs
#   bench/platforms/down.sh live     print the pids of every live process of ours: the platforms'
#                                 and any of their scripts running (an up or down half done)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
P=$IB_ROOT/bench/platforms

case "${1:-}" in
  live)
    # Any checkout's scripts: another suite's up has files and links before its first process.
    pgrep -f -- "bench/platforms/((lab|local/cluster|monitoring/monitoring|monitoring/chart)\.sh (up|down)|down\.sh\$)" || true
    bash "$P/lab.sh" procs; bash "$P/local/cluster.sh" procs ;;
  "") need_root "down"; bash "$P/lab.sh" down; bash "$P/local/cluster.sh" down ;;
  *) die "usage: bench/platforms/down.sh [live]" ;;
esac
