#!/usr/bin/env bash
# CPU accounting for what the suite runs outside Kubernetes (the lab's nginx, k6 on a host):
# one cgroup per role (v1: in the cpuacct and cpu hierarchies; v2: one group in the unified
# tree; bench/platforms/cgroup.sh), and a sampler that serves their counters to
# node-exporter's textfile collector, where the bench:* rules read them
# (bench_cgroup_cpu_seconds_total, bench_cgroup_cpus: monitoring/lab/rules.yaml,
# kustomize/components/monitoring/rules.yaml).
#   bench/platforms/monitoring/cgroups.sh run ROLE CMD...   run CMD (and its children) in ROLE's group
#   bench/platforms/monitoring/cgroups.sh sample DIR [ROLE=CPUS...]  write DIR/bench-cgroups.prom every
#                                                        second (ROLE=CPUS: a role outside our groups
#                                                        whose CPUs are fixed, as the local cluster's
#                                                        ingress node's)
#   bench/platforms/monitoring/cgroups.sh remove            remove the (empty) groups
#   bench/platforms/monitoring/cgroups.sh usage [CPUS] < GROUPS  CPU used so far by each role, and the host's
#                                                        (GROUPS: lines "ROLE REL": a group's path in
#                                                        every hierarchy, globs allowed; bench.sh reads
#                                                        it before and after the load)
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../../lib.sh"
# shellcheck source=bench/platforms/cgroup.sh
. "$IB_ROOT/bench/platforms/cgroup.sh"
GROUP=ingress-bench # every role's group lives below it
case "${1:-}" in
  run|sample|usage)
    cg_detect
    ACCT=$(cg_path cpuacct $GROUP); CPU=$(cg_path cpu $GROUP) ;; # one directory on v2
esac

# The sampler runs beside every monitored run, once a second: bash builtins only, results in
# variables rather than $(...) (each a fork), so its own CPU stays out of the measurement.
# It waits with read -t on a pipe nobody writes instead of forking sleep; mv, which keeps the
# collector from reading a half-written file, is its one fork a second: 0.8% of a core, with
# three groups (1.5% with sleep and a read per line of /proc/PID/status).

# cpus_of ACCT_DIR: CPUS, the CPUs the group's first process may run on (taskset), one
# entry per CPU; empty for a group without processes.
# mapfile: read line by line, bash re-reads /proc/PID/status from its start for each line
# (1.9 ms a call here, against 0.4 ms).
cpus_of() {
  local pid l v=''
  CPUS=()
  read -r pid <"$1/cgroup.procs" 2>/dev/null || return 0
  mapfile -t STATUS <"/proc/$pid/status" 2>/dev/null || return 0
  for l in "${STATUS[@]}"; do [[ $l == Cpus_allowed_list:* ]] && { v=${l#*:}; break; }; done
  expand_cpus "$v"
}

# expand_cpus LIST: CPUS, the CPUs of a list like 0,2-3, one an element.
expand_cpus() {
  local r c
  CPUS=()
  for r in ${1//,/ }; do for ((c = ${r%-*}; c <= ${r#*-}; c++)); do CPUS+=("$c"); done; done
}

sample() {
  local dir=$1 d role c tick fixed=() kv
  shift
  # Roles whose CPUs are fixed outside our groups: published as they are given, each second,
  # so the rules judge how busy those CPUs are (an ingress starved on its node by the host's
  # steal or a neighbour reads as the limit it is, as the lab's LB does).
  for kv in "$@"; do
    expand_cpus "${kv#*=}"
    for c in "${CPUS[@]}"; do fixed+=("bench_cgroup_cpu_allowed{role=\"${kv%%=*}\",cpu=\"$c\"} 1"); done
  done
  mkdir -p "$dir"
  exec {tick}<> <(:) # a pipe nobody writes: read -t on it is a sleep without a fork
  while :; do
    {
      echo "# HELP bench_cgroup_cpu_seconds_total CPU time of the suite's processes of a role (cgroup cpuacct or cpu.stat)."
      echo "# TYPE bench_cgroup_cpu_seconds_total counter"
      for d in "$ACCT"/*/; do
        [ -d "$d" ] || continue
        role=${d%/}; role=${role##*/}; cg_usage_ns "$d"
        printf 'bench_cgroup_cpu_seconds_total{role="%s"} %d.%09d\n' "$role" $((CG_NS / 1000000000)) $((CG_NS % 1000000000))
        # What the group may use: its CFS quota if it has one, else its CPUs (taskset). A
        # starved group reaches 1.0 of this, a free one does not.
        cg_quota "$CPU/$role"; cpus_of "$d"
        if [ "$CG_QUOTA" -gt 0 ]; then
          printf 'bench_cgroup_cpus{role="%s"} %d.%03d\n' "$role" $((CG_QUOTA / CG_PERIOD)) $((CG_QUOTA * 1000 / CG_PERIOD % 1000))
        elif [ "${#CPUS[@]}" -gt 0 ]; then
          echo "bench_cgroup_cpus{role=\"$role\"} ${#CPUS[@]}"
        fi
        # The rules judge how busy those CPUs are: a client starved by its neighbours is a
        # limit too.
        for c in "${CPUS[@]}"; do echo "bench_cgroup_cpu_allowed{role=\"$role\",cpu=\"$c\"} 1"; done
      done
      [ "${#fixed[@]}" = 0 ] || printf '%s\n' "${fixed[@]}"
    } >"$dir/.bench-cgroups.prom.tmp"
    mv "$dir/.bench-cgroups.prom.tmp" "$dir/bench-cgroups.prom" # never a half-written file
    read -r -t 1 -u "$tick" || true
  done
}

# usage: "ROLE NS" per role (the groups' CPU time summed), "host NS" (every CPU's busy time,
# /proc/stat, jiffies of 10 ms), "steal NS" (the time a hypervisor ran others on our CPUs, the
# same way), "cpus ROLE N" (what the first group of a role may use: its CFS quota in cores,
# else the CPUs its first process may run on), "period ROLE US" (its CFS period), "throttled
# ROLE PERIODS THROTTLED NS" (a role under a quota: its groups' CFS periods, those throttled,
# the time throttled, summed) and "at NS" (the reading's time, ns since the epoch). A role
# whose groups are all gone (a pod replaced) prints nothing: its count is unknown, never 0.
# With CPUS (a list like 0,2-3): "busy CPUS NS", those CPUs' busy time the same way (the client
# node's, where the client side runs beside whatever else the host places there).
usage() {
  local role rel d cpu seen=() busy want name u n s i si st
  expand_cpus "$1"; want=${CPUS[*]}
  declare -A ns=() periods=() throttled=() throttled_ns=()
  while read -r role rel; do
    for d in $(cg_path cpuacct "$rel"); do # the glob expands here
      [ -d "$d" ] || continue
      cg_usage_ns "$d"; ns[$role]=$(( ${ns[$role]:-0} + CG_NS ))
      cpu=$(cg_path cpu "${d#"$(cg_path cpuacct /)"}")
      cg_quota "$cpu"
      if [ "$CG_QUOTA" -gt 0 ]; then
        cg_throttled "$cpu"
        periods[$role]=$(( ${periods[$role]:-0} + CG_PERIODS )) throttled[$role]=$(( ${throttled[$role]:-0} + CG_THROTTLED ))
        throttled_ns[$role]=$(( ${throttled_ns[$role]:-0} + CG_THROTTLED_NS ))
      fi
      [[ " ${seen[*]} " == *" $role "* ]] && continue
      seen+=("$role")
      if [ "$CG_QUOTA" -gt 0 ]; then
        printf 'cpus %s %d.%03d\nperiod %s %d\n' "$role" $((CG_QUOTA / CG_PERIOD)) $((CG_QUOTA * 1000 / CG_PERIOD % 1000)) "$role" "$CG_PERIOD"
      else
        cpus_of "$d" # its processes' CPUs: the pod's cpuset, the lab's taskset
        [ "${#CPUS[@]}" = 0 ] || echo "cpus $role ${#CPUS[@]}"
      fi
    done
  done
  for role in "${!ns[@]}"; do echo "$role ${ns[$role]}"; done
  for role in "${!periods[@]}"; do echo "throttled $role ${periods[$role]} ${throttled[$role]} ${throttled_ns[$role]}"; done
  read -r _ u n s _ _ i si st _ </proc/stat
  busy=$((u + n + s + i + si + st)); echo "host $((busy * 10000000))"
  echo "steal $((st * 10000000))"
  if [ -n "$want" ]; then
    busy=0
    while read -r name u n s _ _ i si st _; do
      [[ $name == cpu[0-9]* && " $want " == *" ${name#cpu} "* ]] && busy=$((busy + u + n + s + i + si + st))
    done </proc/stat
    echo "busy $1 $((busy * 10000000))"
  fi
  echo "at ${EPOCHREALTIME/./}000"
}

case "${1:-}" in
  usage) usage "${2:-}" ;;
  run) cg_join "$GROUP/$2" $$; shift 2; exec "$@" ;;
  sample) shift; sample "$@" ;;
  remove) cg_detect; cg_remove_tree $GROUP ;;
  *) echo "usage: bench/platforms/monitoring/cgroups.sh run ROLE CMD... | sample DIR [ROLE=CPUS...] | remove | usage [CPUS]" >&2; exit 2 ;;
esac
