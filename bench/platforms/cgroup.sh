# shellcheck shell=bash
# cgroups as this host mounts them, for the cgroup sampler (monitoring/cgroups.sh) and the
# local cluster's kubelet root (local/cluster.sh). Sourced after bench/lib.sh (die).
# Three layouts, told apart by the mount table alone (never by guessed paths: a plain
# directory named like a hierarchy is not one, and writing there fills the root filesystem):
#   v1      one "cgroup" mount per controller set (cpu and cpuacct co-mounted or apart)
#   hybrid  v1 plus a cgroup2 mount (e.g. /sys/fs/cgroup/unified): the kubelet, runc and we use v1
#   v2      only a cgroup2 mount (unified; current Debian, Ubuntu, Fedora): one tree
# IB_CGROUP_MOUNTS names the mount table to read (default /proc/mounts): tests point it at a
# fixture hierarchy laid out under a temporary directory.

# The kubelet's controllers on v2 (pkg/kubelet/cm: getSupportedUnifiedControllers, cpu
# cpuset memory hugetlb pids, intersected with the root's): it validates its cgroupRoot by
# reading that root's cgroup.controllers, i.e. its parent's subtree_control. hugetlb is
# optional (not every kernel has it); the others the pods' limits and the static CPU manager need.
CG_KUBELET_NEEDS="cpu cpuset memory pids"
CG_KUBELET_OPTIONAL="hugetlb"
# On v1 it validates the cgroupRoot's path in each of these hierarchies (cgroup_v1_manager_linux.go).
CG_KUBELET_NEEDS_V1="cpu cpuacct cpuset memory pids"

# cg_detect: sets CG_MODE (v1, hybrid, v2), CG_UNIFIED (the cgroup2 mount), CG_V1_MOUNTS (every
# v1 hierarchy) and CG_HIER (v1 controller -> its mount). Dies on a table without cgroups.
cg_detect() {
  local mounts=${IB_CGROUP_MOUNTS:-/proc/mounts} mnt type opts rest o
  CG_MODE='' CG_UNIFIED='' CG_V1_MOUNTS=()
  declare -gA CG_HIER=()
  [ -r "$mounts" ] || die "cannot read the mount table $mounts (IB_CGROUP_MOUNTS)"
  while read -r _ mnt type opts rest; do
    case $type in
      cgroup) CG_V1_MOUNTS+=("$mnt"); for o in ${opts//,/ }; do CG_HIER[$o]=$mnt; done ;;
      cgroup2) [ -n "$CG_UNIFIED" ] || CG_UNIFIED=$mnt ;;
    esac
  done <"$mounts"
  if [ "${#CG_V1_MOUNTS[@]}" -gt 0 ]; then
    CG_MODE=v1; [ -z "$CG_UNIFIED" ] || CG_MODE=hybrid
  elif [ -n "$CG_UNIFIED" ]; then
    CG_MODE=v2
    [ -f "$CG_UNIFIED/cgroup.controllers" ] || die "cgroup2 at $CG_UNIFIED has no cgroup.controllers (not a cgroup2 filesystem?)"
  else
    die "no cgroup hierarchy mounted: $mounts lists neither a cgroup v1 controller nor a cgroup2 filesystem"
  fi
}

# cg_need_v1 WHAT CTRL...: dies naming the first v1 controller that is not mounted.
cg_need_v1() {
  local what=$1 c; shift
  for c; do [ -n "${CG_HIER[$c]:-}" ] || die "cgroup v1 without the $c controller mounted ($what needs it; mounted: ${!CG_HIER[*]})"; done
}

# cg_path CTRL REL: the directory of group REL (like ingress-bench/loadgen) in CTRL's hierarchy.
cg_path() {
  if [ "$CG_MODE" = v2 ]; then echo "$CG_UNIFIED/${2#/}"
  else cg_need_v1 "group $2" "$1"; echo "${CG_HIER[$1]}/${2#/}"; fi
}

# cg_hierarchies: every hierarchy a group of ours can have a directory in: on hybrid also the
# cgroup2 mount, where runc makes each container's group beside its v1 ones.
cg_hierarchies() {
  if [ "$CG_MODE" != v2 ]; then printf '%s\n' "${CG_V1_MOUNTS[@]}"; fi
  if [ "$CG_MODE" != v1 ]; then echo "$CG_UNIFIED"; fi
}

# cg_join REL PID: makes group REL where CPU is accounted and limited, and memory accounted
# (v1: in the memory hierarchy too, where one is mounted: bench:routes reads the LB's
# working set and RSS there), and moves PID into it.
cg_join() {
  local d dirs
  if [ "$CG_MODE" = v2 ]; then dirs=("$CG_UNIFIED")
  else
    cg_need_v1 "the group $1" cpuacct cpu
    dirs=("${CG_HIER[cpuacct]}"); [ "${CG_HIER[cpu]}" = "${dirs[0]}" ] || dirs+=("${CG_HIER[cpu]}")
    [ -z "${CG_HIER[memory]:-}" ] || dirs+=("${CG_HIER[memory]}")
  fi
  # Another run's remove (a lab's down) may take the empty group away between the mkdir and
  # the move: it is made again.
  local try
  for d in "${dirs[@]}"; do
    for try in 1 2 3; do
      mkdir -p "$d/${1#/}" || die "cannot make cgroup $d/${1#/}"
      { echo "$2" >"$d/${1#/}/cgroup.procs"; } 2>/dev/null && continue 2
    done
    die "cannot move pid $2 into cgroup $d/${1#/}"
  done
}

# The sampler's readers: called every second, so bash builtins only and results in variables.
# cg_usage_ns DIR: CG_NS, the group's CPU time in ns (v1 cpuacct.usage, v2 cpu.stat usage_usec).
# shellcheck disable=SC2034 # CG_NS, CG_QUOTA, CG_PERIOD: the callers' results
cg_usage_ns() {
  local k v
  CG_NS=0
  if [ "$CG_MODE" = v2 ]; then
    while read -r k v; do [ "$k" = usage_usec ] && { CG_NS=$((v * 1000)); break; }; done <"$1/cpu.stat"
  else
    read -r CG_NS <"$1/cpuacct.usage"
  fi
}

# cg_quota DIR: CG_QUOTA and CG_PERIOD in µs, CG_QUOTA -1 without a limit (v1
# cpu.cfs_quota_us/cfs_period_us; v2 cpu.max "max 100000" or "50000 100000"; no such file
# where the cpu controller is not enabled for the group).
# shellcheck disable=SC2034
cg_quota() {
  CG_QUOTA=-1 CG_PERIOD=100000
  if [ "$CG_MODE" = v2 ]; then
    [ -f "$1/cpu.max" ] && read -r CG_QUOTA CG_PERIOD <"$1/cpu.max"
    [ "$CG_QUOTA" != max ] || CG_QUOTA=-1
  elif [ -f "$1/cpu.cfs_quota_us" ]; then
    read -r CG_QUOTA <"$1/cpu.cfs_quota_us"; read -r CG_PERIOD <"$1/cpu.cfs_period_us"
  fi
}

# cg_throttled DIR: CG_PERIODS, CG_THROTTLED and CG_THROTTLED_NS, the group's CFS periods so
# far, those in which it was throttled and the time it spent throttled (v1 cpu.stat
# nr_periods, nr_throttled, throttled_time in ns; v2 the same with throttled_usec).
# shellcheck disable=SC2034
cg_throttled() {
  local k v
  CG_PERIODS=0 CG_THROTTLED=0 CG_THROTTLED_NS=0
  [ -f "$1/cpu.stat" ] || return 0
  while read -r k v; do
    case $k in
      nr_periods) CG_PERIODS=$v ;;
      nr_throttled) CG_THROTTLED=$v ;;
      throttled_time) CG_THROTTLED_NS=$v ;;
      throttled_usec) CG_THROTTLED_NS=$((v * 1000)) ;;
    esac
  done <"$1/cpu.stat"
}

# cg_cpuset REL: the CPUs group REL's cpuset grants (v1 cpuset.cpus, v2 cpuset.cpus.effective).
cg_cpuset() {
  local d f=cpuset.cpus
  d=$(cg_path cpuset "$1") || return 1
  [ "$CG_MODE" != v2 ] || f=cpuset.cpus.effective
  cat "$d/$f"
}

# cg_procs DIR: every pid in DIR and the groups below it.
cg_procs() { [ -d "$1" ] && find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null || true; }

# cg_remove_tree REL: removes group REL and those below it, deepest first, in every hierarchy.
# rmdir removes only empty groups: one still holding a process stays.
cg_remove_tree() {
  local h
  while read -r h; do
    [ -d "$h/${1#/}" ] && find "$h/${1#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < <(cg_hierarchies)
}

# cg_subtree_set DIR WORD...: writes the +ctrl / -ctrl words to DIR's subtree_control in one
# write, which the kernel applies whole or not at all.
cg_subtree_set() {
  local d=$1 why; shift
  { echo "$*" >"$d/cgroup.subtree_control"; } 2>/dev/null && return 0
  why="the kernel refused"
  [ "$d" = "$CG_UNIFIED" ] || [ ! -s "$d/cgroup.procs" ] || why="it holds processes, and cgroup v2 lets only leaf groups hold them"
  die "cannot write '$*' to $d/cgroup.subtree_control: $why"
}

# cg_kubelet_root_prepare REL SAVED: makes the kubelet's cgroupRoot REL. v1: in every hierarchy,
# its cpuset given the parent's CPUs and memory nodes (a new cpuset starts empty). v2: once,
# with the kubelet's controllers enabled in the subtree_control of each group above it and of
# its own (its pods are created below it); SAVED records each existing group's subtree_control
# as found, for cg_kubelet_root_restore. The kubelet itself (runc's fs2 CreateCgroupPath)
# enables every controller the root offers on the way to its pods, so the record is taken
# before it runs and the restore puts back exactly the recorded line.
cg_kubelet_root_prepare() {
  local rel=${1#/} saved=$2 c want=() avail=" " part d parent line
  if [ "$CG_MODE" != v2 ]; then
    # shellcheck disable=SC2086 # one argument per controller
    cg_need_v1 "the kubelet" $CG_KUBELET_NEEDS_V1
    for d in "${CG_V1_MOUNTS[@]}"; do mkdir -p "$d/$rel" || die "cannot make cgroup $d/$rel"; done
    parent=${CG_HIER[cpuset]}
    for part in ${rel//\// }; do
      d=$parent/$part
      for c in cpuset.cpus cpuset.mems; do
        line=''; read -r line 2>/dev/null <"$d/$c" || true
        [ -n "$line" ] || cat "$parent/$c" >"$d/$c" || die "cannot give cgroup $d its parent's $c"
      done
      parent=$d
    done
    return 0
  fi
  read -r line <"$CG_UNIFIED/cgroup.controllers" || true
  avail+="$line "
  for c in $CG_KUBELET_NEEDS; do
    [[ $avail == *" $c "* ]] || die "cgroup v2 without the $c controller at the root: $CG_UNIFIED/cgroup.controllers offers '${line:-nothing}', the kubelet needs $CG_KUBELET_NEEDS"
    want+=("+$c")
  done
  for c in $CG_KUBELET_OPTIONAL; do [[ $avail != *" $c "* ]] || want+=("+$c"); done
  : >"$saved"
  d=$CG_UNIFIED
  for part in "" ${rel//\// }; do
    d=${d%/}${part:+/$part}
    if [ -d "$d" ] && [ -f "$d/cgroup.subtree_control" ]; then
      line=''; read -r line <"$d/cgroup.subtree_control" || true
      printf '%s\t%s\n' "$d" "$line" >>"$saved"
    else
      mkdir "$d" || die "cannot make cgroup $d"
    fi
    cg_subtree_set "$d" "${want[@]}"
  done
}

# cg_node_group REL CPUS: a node's cgroup root below the kubelets' (prepared): in every
# hierarchy, its cpuset CPUS (v1: and its parent's memory nodes); on v2 with the controllers
# its parent hands down handed on below it, as the kubelet needs them.
cg_node_group() {
  local rel=${1#/} d line
  if [ "$CG_MODE" != v2 ]; then
    for d in "${CG_V1_MOUNTS[@]}"; do mkdir -p "$d/$rel" || die "cannot make cgroup $d/$rel"; done
    d=${CG_HIER[cpuset]}/$rel
    cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems" && echo "$2" >"$d/cpuset.cpus" || die "cannot confine cgroup $d to CPUs $2"
    return 0
  fi
  d=$CG_UNIFIED/$rel
  mkdir -p "$d" && echo "$2" >"$d/cpuset.cpus" || die "cannot confine cgroup $d to CPUs $2"
  read -r line <"$(dirname "$d")/cgroup.subtree_control" || true
  [ -z "$line" ] || echo "$line" | sed 's/[a-z_][a-z_]*/+&/g' >"$d/cgroup.subtree_control" || die "cannot enable controllers below cgroup $d"
}

# cg_kubelet_root_restore SAVED: after the kubelet's groups are gone, sets each recorded
# subtree_control back to what cg_kubelet_root_prepare found: controllers enabled since are
# disabled, disabled ones enabled. No record (v1, or never prepared): nothing to do.
cg_kubelet_root_restore() {
  local d was now c words
  [ -f "$1" ] || return 0
  # Deepest first: a controller a child still delegates cannot be taken from its parent.
  while IFS=$'\t' read -r d was; do
    [ -f "$d/cgroup.subtree_control" ] || continue
    now=''; read -r now <"$d/cgroup.subtree_control" || true
    words=()
    for c in $now; do [[ " $was " == *" $c "* ]] || words+=("-$c"); done
    for c in $was; do [[ " $now " == *" $c "* ]] || words+=("+$c"); done
    [ "${#words[@]}" -eq 0 ] || cg_subtree_set "$d" "${words[@]}"
  done < <(tac "$1")
  rm -f "$1"
}
