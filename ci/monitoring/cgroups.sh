#!/usr/bin/env bash
# CPU accounting for what the suite runs outside Kubernetes (the lab's nginx, k6 on a host):
# one cgroup v1 cpuacct group per role, and a sampler that serves their counters to
# node-exporter's textfile collector, where the bench:* rules read them
# (bench_cgroup_cpu_seconds_total, bench_cgroup_cpus: monitoring/lab/rules.yaml,
# kustomize/components/monitoring/rules.yaml).
#   ci/monitoring/cgroups.sh run ROLE CMD...   run CMD (and its children) in ROLE's group
#   ci/monitoring/cgroups.sh sample DIR        write DIR/bench-cgroups.prom every second
#   ci/monitoring/cgroups.sh remove            remove the (empty) groups
set -euo pipefail
# The cpuacct and cpu hierarchies: co-mounted on most distributions, apart on some (these
# machines). Only a mounted hierarchy counts: a same-named plain directory does not.
hierarchy() { awk -v c="$1" '$3 == "cgroup" && index("," $4 ",", "," c ",") {print $2; exit}' /proc/mounts; }
ACCT=$(hierarchy cpuacct)/ingress-bench
CPU=$(hierarchy cpu)/ingress-bench

# cpu_count LIST: how many CPUs a list like "0-1,3" names.
cpu_count() {
  local n=0 r; for r in ${1//,/ }; do n=$((n + ${r#*-} - ${r%-*} + 1)); done; echo "$n"
}

# The CPUs a group may use: its CFS quota if it has one, else the CPUs its first process is
# allowed (taskset). A starved group reaches 1.0 of this, a free one does not.
group_cpus() { # ACCT_DIR ROLE
  local quota period pid list
  quota=-1; [ -f "$CPU/$2/cpu.cfs_quota_us" ] && { read -r quota <"$CPU/$2/cpu.cfs_quota_us"; read -r period <"$CPU/$2/cpu.cfs_period_us"; }
  if [ "$quota" -gt 0 ]; then awk -v q="$quota" -v p="$period" 'BEGIN {printf "%.3f\n", q / p}'; return; fi
  read -r pid <"$1/cgroup.procs" 2>/dev/null || return 0
  list=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
  [ -n "$list" ] && cpu_count "$list"
}

# allowed_cpus ACCT_DIR: each CPU the group's first process may run on, one per line. The
# rules judge how busy those CPUs are: a client starved by its neighbours is a limit too.
allowed_cpus() {
  local pid list r c
  read -r pid <"$1/cgroup.procs" 2>/dev/null || return 0
  list=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
  for r in ${list//,/ }; do for c in $(seq "${r%-*}" "${r#*-}"); do echo "$c"; done; done
}

sample() {
  local dir=$1 d role usage cpus
  mkdir -p "$dir"
  while :; do
    {
      echo "# HELP bench_cgroup_cpu_seconds_total CPU time of the suite's processes of a role (cgroup cpuacct)."
      echo "# TYPE bench_cgroup_cpu_seconds_total counter"
      for d in "$ACCT"/*/; do
        [ -d "$d" ] || continue
        role=$(basename "$d"); read -r usage <"$d/cpuacct.usage"
        echo "bench_cgroup_cpu_seconds_total{role=\"$role\"} $(awk -v u="$usage" 'BEGIN {printf "%.6f", u / 1e9}')"
        cpus=$(group_cpus "$d" "$role"); [ -n "$cpus" ] && echo "bench_cgroup_cpus{role=\"$role\"} $cpus"
        for c in $(allowed_cpus "$d"); do echo "bench_cgroup_cpu_allowed{role=\"$role\",cpu=\"$c\"} 1"; done
      done
    } >"$dir/.bench-cgroups.prom.tmp"
    mv "$dir/.bench-cgroups.prom.tmp" "$dir/bench-cgroups.prom" # never a half-written file
    sleep 1
  done
}

case "${1:-}" in
  run)
    for h in "$ACCT" "$CPU"; do mkdir -p "$h/$2" && echo $$ >"$h/$2/cgroup.procs"; done
    shift 2; exec "$@" ;;
  sample) sample "$2" ;;
  remove)
    for h in "$ACCT" "$CPU"; do
      [ -d "$h" ] || continue
      for d in "$h"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
      rmdir "$h" 2>/dev/null || true
    done ;;
  *) echo "usage: ci/monitoring/cgroups.sh run ROLE CMD... | sample DIR | remove" >&2; exit 2 ;;
esac
