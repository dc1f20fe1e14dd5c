"""The whole machine's state, as far as anything of ours could change it: every sysctl
(counters left out), the full iptables/ip6tables (and nft) rulesets, qdiscs, links, routes,
network namespaces, mounts, cgroups, listening sockets, our processes, a kubelet's log
directories and the entries of the user's home (and its .cache and .config).

    python ci/tests/machine_state.py snapshot FILE   write the state to FILE (JSON)
    python ci/tests/machine_state.py compare FILE    exit 1 and print the differences from FILE

snapshot() and diff(before, after) are the same from Python (the cluster tests).

A test session's snapshot leaves out the processes, and the sockets they listen on, that
another session of the suite started (their environment's IB_TEST_SESSION: ci/tests/conftest.py):
the two streams run at once. diff(..., beside_lab=True) leaves out the lab's kernel objects
too, which the lab's stream makes and removes on its own meanwhile."""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys

# Keys that change on an idle machine (two snapshots a minute apart with nothing running:
# kernel counters and random values), not settings anyone made.
VOLATILE_SYSCTLS = {
    "fs.dentry-state", "fs.file-nr", "fs.inode-nr", "fs.inode-state",  # cache and handle counts
    "kernel.ns_last_pid",  # the last pid handed out
    "kernel.random.uuid", "kernel.random.entropy_avail",  # a new value at each read
    "net.netfilter.nf_conntrack_count",  # live connections
}
# Counters that move with any sync(2) or quota lookup (fs.quota.syncs changed across a cluster's up).
VOLATILE_PREFIXES = ("fs.quota.",)

# cgroups the init system makes and removes on its own, one per command or login: this
# machine's PID 1 (process_api) one per command it runs (seen going away during a test run),
# systemd one scope per login session.
VOLATILE_CGROUP_PARENTS = ("process_api", "user.slice")

# Our programs (their comm, 15 characters at most): the cluster's, the lab's, the load's.
OUR_COMMS = {"etcd", "containerd", "containerd-shim", "kube-apiserver", "kube-controller", "kube-scheduler",
             "kubelet", "kube-proxy", "coredns", "pause", "nginx", "k6", "prometheus", "node_exporter",
             "operator", "prometheus-conf", "nginx-prometheu", "prometheus-ngin"}


def environ_of(pid):
    """The process's environment as a dict of bytes ({} once it has ended). A process whose
    leader thread has exited while others run on (live()) reads as empty from the leader: the
    environment is read through a live thread's."""
    for path in (f"/proc/{pid}/environ", *sorted(glob.glob(f"/proc/{pid}/task/*/environ"))):
        try:
            with open(path, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        if env != [b""]:
            return dict(e.split(b"=", 1) for e in env if b"=" in e)
    return {}


def argv_of(pid):
    """The process's arguments as a list of bytes ([] once it has ended)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:  # ended meanwhile
        return []


def session_of(pid):
    """The test session that started the process (its environment's IB_TEST_SESSION), or None."""
    mark = environ_of(pid).get(b"IB_TEST_SESSION")
    return mark.decode() if mark is not None else None


def another_sessions(pid):
    """The process was started by another test session than this one (run outside a session,
    as by ci/tests/run.sh's own compare, every process is counted)."""
    mine = os.environ.get("IB_TEST_SESSION")
    theirs = session_of(pid) if mine else None
    return theirs is not None and theirs != mine


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def lines(text_or_lines):
    ls = text_or_lines.splitlines() if isinstance(text_or_lines, str) else text_or_lines
    return sorted(l for l in ls if l.strip())


def sysctls():
    out = {}
    for l in run("sysctl", "-a").splitlines():
        k, sep, v = l.partition(" = ")
        if sep and k not in VOLATILE_SYSCTLS and not k.startswith(VOLATILE_PREFIXES):
            out[k] = v
    return out


def ruleset(cmd):
    """iptables-save without its comment lines and packet counters, and without tables that
    hold nothing: with iptables-nft a table, once used, stays as empty built-in chains with
    policy ACCEPT, which filters exactly as no table at all (and iptables cannot delete it)."""
    if not shutil.which(cmd):
        return []
    out, table = [], []
    for l in run(cmd).splitlines():
        if l.startswith("#") or not l.strip():
            continue
        table.append(re.sub(r" \[\d+:\d+\]$", "", l))
        if l == "COMMIT":
            if any(t.startswith("-") or (t.startswith(":") and not t.endswith(" ACCEPT")) for t in table):
                out += table
            table = []
    return sorted(out + table)


def cgroups():
    """Every cgroup directory of every hierarchy, less those below VOLATILE_CGROUP_PARENTS."""
    out = []
    for d in run("find", "/sys/fs/cgroup", "-type", "d").splitlines():
        parts = d.split("/")  # "", sys, fs, cgroup, [v1 hierarchy,] group, ...
        if not any(p in parts[4:-1] for p in VOLATILE_CGROUP_PARENTS):
            out.append(d)
    return sorted(out)


def socket_owners():
    """{socket inode: [pid, ...]} from every thread's descriptors: ss names no process for the
    sockets of a process whose leader thread has exited (it reads /proc/PID/fd, the leader's)."""
    owners = collections.defaultdict(set)
    for fd in glob.glob("/proc/[0-9]*/task/*/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:  # ended or closed meanwhile
            continue
        if target.startswith("socket:["):
            owners[target[8:-1]].add(fd.split("/")[2])
    return owners


def listening():
    """Protocol and local address of every listening socket (queue lengths vary), but those of
    another session's processes."""
    out, owners = [], None
    for l in run("ss", "-Hltnupe").splitlines():
        f = l.split()
        pids = re.findall(r"pid=(\d+)", l)
        if not pids and (ino := re.search(r"\bino:(\d+)", l)):
            owners = socket_owners() if owners is None else owners
            pids = sorted(owners.get(ino.group(1), ()))
        if len(f) >= 5 and not (pids and all(another_sessions(p) for p in pids)):
            out.append(" ".join((f[0], f[4])))
    return sorted(out)


def live(pid):
    """A thread of the process is not a zombie: zombies are dead, reaped late by this PID 1,
    but a killed process's leader thread is one while its other threads may still be exiting
    and holding the process's files, a listening socket among them."""
    for t in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            with open(t) as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":
            return True
    return False


def our_processes():
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm not in OUR_COMMS or not live(pid) or another_sessions(pid):
                continue
            with open(f"/proc/{pid}/cmdline") as f:
                procs.append(f.read().replace("\0", " ").strip() or comm)
        except (OSError, ValueError):
            continue
    return sorted(procs)


def home():
    """The entries of the user's home and of its .cache and .config: a tool's own files
    (kubectl's discovery cache, matplotlib's font list, a browser's profile) belong in
    IB_CACHE or a run's own directory."""
    h = os.path.expanduser("~")
    return sorted(f"{d}/{n}" for d in (h, f"{h}/.cache", f"{h}/.config") if os.path.isdir(d) for n in os.listdir(d))


def snapshot():
    return {
        "sysctl": sysctls(),
        "iptables": ruleset("iptables-save"),
        "ip6tables": ruleset("ip6tables-save"),
        "nft": lines(run("nft", "list", "ruleset")) if shutil.which("nft") else [],
        "qdiscs": lines(run("tc", "qdisc", "show")),
        "links": lines(run("ip", "-o", "link")),
        "routes": lines(run("ip", "route", "show", "table", "all")),
        "routes6": lines(run("ip", "-6", "route", "show", "table", "all")),
        "netns": lines(run("ip", "netns", "list")),
        "mounts": lines(open("/proc/mounts").read()),
        "cgroups": cgroups(),
        "listening": listening(),
        "processes": our_processes(),
        "home": home(),
        # A kubelet's default log places (pods' logs and its symlinks to them).
        "var_log": sorted(f"{d}/{n}" for d in ("/var/log/pods", "/var/log/containers") if os.path.isdir(d) for n in os.listdir(d)),
    }


# The lab's kernel objects (bench/platforms/lab.sh, bench/platforms/lab.env): its bridge and its
# hosts' veths on it (ibench0, ibv-HOST) with their routes, sysctls and qdiscs; its namespaces
# (LAB_NS_PREFIX, in /run/netns, and the mount the first one made there: the cluster pins its
# nodes' and pods' elsewhere); its range's blackhole; and the cgroups of the suite's roles on
# the host (bench/platforms/monitoring/cgroups.sh: the lab's nginx, k6 on the host).
LAB_DEV = r"(?:ibench0|ibv-[\w-]+)"
LAB_NS = re.search(r"^LAB_NS_PREFIX=(\S+)", open(os.path.join(os.path.dirname(__file__), "../../bench/platforms/lab.env")).read(), re.M).group(1)
LAB_LINE = re.compile("|".join([
    rf"^links: [-+] \d+: {LAB_DEV}[:@]",
    rf"^(routes|routes6|qdiscs): .*\bdev {LAB_DEV}\b", r"^routes: [-+] blackhole 198\.18\.0\.0/15\b",
    rf"^sysctl: net\.ipv[46]\.(conf|neigh)\.{LAB_DEV}\.",
    rf"^netns: [-+] {LAB_NS}", rf"^mounts: [-+] \S+ /run/netns(/{LAB_NS}\S*)? ",
    r"^cgroups: [-+] /sys/fs/cgroup/[^/]+/ingress-bench(/|$)"]))


def diff(before, after, beside_lab=False):
    """The differences, one readable line each: '<part>: - line' was there, '+ line' is new;
    beside_lab: but those of the lab's kernel objects (LAB_LINE)."""
    return [l for l in full_diff(before, after) if not (beside_lab and LAB_LINE.search(l))]


def full_diff(before, after):
    out = []
    for part in sorted(set(before) | set(after)):
        b, a = before.get(part), after.get(part)
        if isinstance(b, dict) or isinstance(a, dict):
            b, a = b or {}, a or {}
            for k in sorted(set(b) | set(a)):
                if b.get(k) != a.get(k):
                    out.append(f"{part}: {k}: {b.get(k, '(absent)')} -> {a.get(k, '(absent)')}")
            continue
        cb, ca = collections.Counter(b or []), collections.Counter(a or [])
        out += [f"{part}: - {l}" for l in sorted((cb - ca).elements())]
        out += [f"{part}: + {l}" for l in sorted((ca - cb).elements())]
    return out


def main(argv):
    if len(argv) != 3 or argv[1] not in ("snapshot", "compare"):
        print("error: usage: machine_state.py snapshot FILE | compare FILE", file=sys.stderr)
        return 2
    if argv[1] == "snapshot":
        state = snapshot()
        with open(argv[2], "w") as f:
            json.dump(state, f)
        return 0
    try:
        with open(argv[2]) as f:
            before = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: cannot read the snapshot {argv[2]}: {e}", file=sys.stderr)
        return 2
    changes = diff(before, snapshot())
    for l in changes:
        print(l)
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
