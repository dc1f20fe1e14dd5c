#!/usr/bin/env bash
# CPU accounting for what the suite runs outside Kubernetes (the lab's nginx, k6 on a host):
# one cgroup v1 cpuacct group per role, and a sampler that serves their counters to
# node-exporter's textfile collector, where the bench:* rules read them
# (bench_cgroup_cpu_seconds_total, bench_cgroup_cpus: monitoring/lab/rules.yaml,
# kustomize/components/monitoring/rules.yaml).
#   ci/platforms/monitoring/cgroups.sh run ROLE CMD...   run CMD (and its children) in ROLE's group
#   ci/platforms/monitoring/cgroups.sh sample DIR        write DIR/bench-cgroups.prom every second
#   ci/platforms/monitoring/cgroups.sh remove            remove the (empty) groups
set -euo pipefail
# The cpuacct and cpu hierarchies: co-mounted on most distributions, apart on some (these
# machines). Only a mounted hierarchy counts: a same-named plain directory does not.
hierarchy() { awk -v c="$1" '$3 == "cgroup" && index("," $4 ",", "," c ",") {print $2; exit}' /proc/mounts; }
ACCT=$(hierarchy cpuacct)/ingress-bench
CPU=$(hierarchy cpu)/ingress-bench

# The sampler runs beside every monitored run, once a second: bash builtins only, results in
# variables rather than $(...) (each a fork), so its own CPU stays out of the measurement
# (0.5% of a core; with awk and command substitutions it cost 2.2%).

# cpus_of ACCT_DIR: CPUS, the CPUs the group's first process may run on (taskset), one
# entry per CPU; empty for a group without processes.
cpus_of() {
  local pid k v r c
  CPUS=()
  read -r pid <"$1/cgroup.procs" 2>/dev/null || return 0
  while read -r k v; do [ "$k" = Cpus_allowed_list: ] && break; done <"/proc/$pid/status" 2>/dev/null || return 0
  for r in ${v//,/ }; do for ((c = ${r%-*}; c <= ${r#*-}; c++)); do CPUS+=("$c"); done; done
}

sample() {
  local dir=$1 d role usage quota period c
  mkdir -p "$dir"
  while :; do
    {
      echo "# HELP bench_cgroup_cpu_seconds_total CPU time of the suite's processes of a role (cgroup cpuacct)."
      echo "# TYPE bench_cgroup_cpu_seconds_total counter"
      for d in "$ACCT"/*/; do
        [ -d "$d" ] || continue
        role=${d%/}; role=${role##*/}; read -r usage <"$d/cpuacct.usage"
        printf 'bench_cgroup_cpu_seconds_total{role="%s"} %d.%09d\n' "$role" $((usage / 1000000000)) $((usage % 1000000000))
        # What the group may use: its CFS quota if it has one, else its CPUs (taskset). A
        # starved group reaches 1.0 of this, a free one does not.
        quota=-1; [ -f "$CPU/$role/cpu.cfs_quota_us" ] && { read -r quota <"$CPU/$role/cpu.cfs_quota_us"; read -r period <"$CPU/$role/cpu.cfs_period_us"; }
        cpus_of "$d"
        if [ "$quota" -gt 0 ]; then
          printf 'bench_cgroup_cpus{role="%s"} %d.%03d\n' "$role" $((quota / period)) $((quota * 1000 / period % 1000))
        elif [ "${#CPUS[@]}" -gt 0 ]; then
          echo "bench_cgroup_cpus{role=\"$role\"} ${#CPUS[@]}"
        fi
        # The rules judge how busy those CPUs are: a client starved by its neighbours is a
        # limit too.
        for c in "${CPUS[@]}"; do echo "bench_cgroup_cpu_allowed{role=\"$role\",cpu=\"$c\"} 1"; done
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
  *) echo "usage: ci/platforms/monitoring/cgroups.sh run ROLE CMD... | sample DIR | remove" >&2; exit 2 ;;
esac
