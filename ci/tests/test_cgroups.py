"""cgroups on every layout (bench/platforms/cgroup.sh, bench/platforms/monitoring/cgroups.sh): v1 and
unified v2 hierarchies laid out as fixtures under tmp (a mount table saying where they are;
IB_CGROUP_MOUNTS), read by the real sampler; the kubelet root's preparation and its restore;
unsupported layouts refused in one line with nothing written. Then the real kernel: this
machine's v1 hierarchies, and its cgroup2 mount (/sys/fs/cgroup/unified, hybrid) used alone as
a v2 host would, against the CPU time /proc gives a busy loop. Fixtures live under tmp only:
nothing of them is written below /sys/fs/cgroup."""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, sh

CGROUPS = "bench/platforms/monitoring/cgroups.sh"
LIB = ". bench/lib.sh; . bench/platforms/cgroup.sh; cg_detect; "
UNIFIED = Path("/sys/fs/cgroup/unified")  # this machine's empty cgroup2 mount (hybrid)
V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"  # a Debian 12 root's


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_fixture(tmp, controllers=V2_CONTROLLERS, subtree="cpu io"):
    """A cgroup2 root as the kernel shows it, and a mount table putting cgroup2 there (and the
    tmpfs a v1 host would have, so only the table tells them apart)."""
    root = tmp / "sys/fs/cgroup"
    for name, text in {"cgroup.controllers": controllers, "cgroup.subtree_control": subtree,
                       "cgroup.procs": "1\n", "cpu.stat": "usage_usec 9\n"}.items():
        write(root / name, text + "\n")
    mounts = tmp / "mounts"
    mounts.write_text(f"proc /proc proc rw 0 0\ncgroup2 {root} cgroup2 rw,nosuid,nodev,noexec 0 0\n")
    return mounts, root


def v1_fixture(tmp, hierarchies=("cpu", "cpuacct", "cpuset", "memory", "pids", "name=systemd")):
    """v1: one mount per controller (cpu and cpuacct apart, as on this machine), a cgroup2 at
    unified (hybrid), the root cpuset's CPUs and memory nodes."""
    base = tmp / "sys/fs/cgroup"
    lines = [f"tmpfs {base} tmpfs rw,mode=755 0 0"]
    for h in hierarchies:
        d = base / h.replace("name=", "")
        write(d / "cgroup.procs", "1\n")
        lines.append(f"cgroup {d} cgroup rw,relatime,{h} 0 0")
    write(base / "unified/cgroup.controllers", "\n")
    lines.append(f"cgroup2 {base / 'unified'} cgroup2 rw 0 0")
    if "cpuset" in hierarchies:
        write(base / "cpuset/cpuset.cpus", "0-1\n")
        write(base / "cpuset/cpuset.mems", "0\n")
    mounts = tmp / "mounts"
    mounts.write_text("\n".join(lines) + "\n")
    return mounts, base


def prom(path):
    """{(name, ((label, value), ...)): value} of a textfile the sampler wrote."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2))))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def series(samples, name, role):
    return {k[1]: v for k, v in samples.items() if k[0] == name and ("role", role) in k[1]}


class Sampler:
    """cgroups.sh sample DIR in the background; read() waits for a file written after `since`."""
    def __init__(self, out, mounts=None):
        env = dict(os.environ, **({"IB_CGROUP_MOUNTS": str(mounts)} if mounts else {}))
        self.file = out / "bench-cgroups.prom"
        self.proc = subprocess.Popen(["bash", CGROUPS, "sample", str(out)], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)

    def read(self, since=0.0):
        for _ in range(50):
            if self.file.exists() and self.file.stat().st_mtime > since:
                return prom(self.file)
            assert self.proc.poll() is None, self.proc.stderr.read()
            time.sleep(0.1)
        raise AssertionError("the sampler wrote nothing within 5 s")

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=5)


@pytest.fixture
def sampler():
    started = []
    def start(out, mounts=None):
        started.append(Sampler(out, mounts))
        return started[-1]
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def pinned():
    """pinned(cpus) -> pid of a sleeping process restricted to those CPUs (taskset)."""
    procs = []
    def start(cpus):
        procs.append(subprocess.Popen(["taskset", "-c", cpus, "sleep", "60"]))
        time.sleep(0.1)
        return procs[-1].pid
    yield start
    for p in procs:
        p.kill()
        p.wait()


def allowed(pid):
    line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("Cpus_allowed_list:"))
    cpus = []
    for r in line.split()[1].split(","):
        a, _, b = r.partition("-")
        cpus += range(int(a), int(b or a) + 1)
    return [str(c) for c in cpus]


def test_sampler_reads_a_v2_hierarchy(tmp_path, sampler, pinned):
    """cpu.stat's usage_usec as seconds, cpu.max's quota as CPUs, else the first process's
    CPUs; a group without a process has no CPU lines; a changed counter is read again."""
    mounts, root = v2_fixture(tmp_path)
    g = root / "ingress-bench"
    write(g / "loadgen/cpu.stat", "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
    write(g / "loadgen/cpu.max", "50000 100000\n")
    write(g / "loadgen/cgroup.procs", f"{pinned('0')}\n")
    lb_pid = pinned("0-1")
    write(g / "lb/cpu.stat", "usage_usec 42\n")
    write(g / "lb/cpu.max", "max 100000\n")
    write(g / "lb/cgroup.procs", f"{lb_pid}\n")
    write(g / "idle/cpu.stat", "usage_usec 7000000\n")
    write(g / "idle/cgroup.procs", "")
    s = sampler(tmp_path / "out", mounts)
    m = s.read()
    assert series(m, "bench_cgroup_cpu_seconds_total", "loadgen") == {(("role", "loadgen"),): 1.234567}
    assert series(m, "bench_cgroup_cpus", "loadgen") == {(("role", "loadgen"),): 0.5}
    assert series(m, "bench_cgroup_cpu_allowed", "loadgen") == {(("cpu", "0"), ("role", "loadgen")): 1}
    assert series(m, "bench_cgroup_cpu_seconds_total", "lb") == {(("role", "lb"),): 0.000042}
    assert series(m, "bench_cgroup_cpus", "lb") == {(("role", "lb"),): len(allowed(lb_pid))}
    assert {k[0][1] for k in series(m, "bench_cgroup_cpu_allowed", "lb")} == set(allowed(lb_pid))
    assert series(m, "bench_cgroup_cpu_seconds_total", "idle") == {(("role", "idle"),): 7.0}
    assert not series(m, "bench_cgroup_cpus", "idle") and not series(m, "bench_cgroup_cpu_allowed", "idle")
    # Only the groups: the root's own cpu.stat is not a role.
    assert {dict(k[1])["role"] for k in m} == {"loadgen", "lb", "idle"}
    t = time.time()
    write(g / "loadgen/cpu.stat", "usage_usec 2500000001\n")
    assert series(s.read(since=t), "bench_cgroup_cpu_seconds_total", "loadgen") == {(("role", "loadgen"),): 2500.000001}


def test_sampler_reads_a_v1_hierarchy(tmp_path, sampler, pinned):
    """cpuacct.usage in ns from the cpuacct hierarchy, the CFS quota from the cpu one (mounted apart)."""
    mounts, base = v1_fixture(tmp_path)
    write(base / "cpuacct/ingress-bench/loadgen/cpuacct.usage", "987654321012\n")
    write(base / "cpuacct/ingress-bench/loadgen/cgroup.procs", f"{pinned('1')}\n")
    write(base / "cpu/ingress-bench/loadgen/cpu.cfs_quota_us", "150000\n")
    write(base / "cpu/ingress-bench/loadgen/cpu.cfs_period_us", "100000\n")
    write(base / "cpuacct/ingress-bench/lb/cpuacct.usage", "5\n")
    write(base / "cpuacct/ingress-bench/lb/cgroup.procs", f"{pinned('0')}\n")
    write(base / "cpu/ingress-bench/lb/cpu.cfs_quota_us", "-1\n")
    write(base / "cpu/ingress-bench/lb/cpu.cfs_period_us", "100000\n")
    m = sampler(tmp_path / "out", mounts).read()
    assert series(m, "bench_cgroup_cpu_seconds_total", "loadgen") == {(("role", "loadgen"),): 987.654321012}
    assert series(m, "bench_cgroup_cpus", "loadgen") == {(("role", "loadgen"),): 1.5}
    assert series(m, "bench_cgroup_cpu_allowed", "loadgen") == {(("cpu", "1"), ("role", "loadgen")): 1}
    assert series(m, "bench_cgroup_cpu_seconds_total", "lb") == {(("role", "lb"),): 5e-9}
    assert series(m, "bench_cgroup_cpus", "lb") == {(("role", "lb"),): 1}


@pytest.mark.parametrize("layout", ["v2", "v1"])
def test_usage_sums_a_quota_roles_throttling_and_reads_the_hosts_steal(tmp_path, layout):
    """usage: a role under a CFS quota gets one throttled line, its groups' periods, throttled
    periods and throttled time summed (v1 throttled_time in ns, v2 throttled_usec); a role
    without a quota none, whatever its cpu.stat says; the host's steal from /proc/stat."""
    mounts, base = (v2_fixture if layout == "v2" else v1_fixture)(tmp_path)
    groups = {"ingress-bench/ingress/a": (100, 7, 123456789, 50000), "ingress-bench/ingress/b": (50, 3, 1000, 50000),
              "ingress-bench/backend/c": (80, 9, 5000, -1)}
    for rel, (periods, throttled, ns, quota) in groups.items():
        if layout == "v2":
            write(base / rel / "cpu.stat", f"usage_usec 10\nnr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec {ns // 1000}\n")
            write(base / rel / "cpu.max", f"{quota if quota > 0 else 'max'} 100000\n")
        else:
            write(base / "cpuacct" / rel / "cpuacct.usage", "10000\n")
            write(base / "cpu" / rel / "cpu.stat", f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {ns}\n")
            write(base / "cpu" / rel / "cpu.cfs_quota_us", f"{quota}\n")
            write(base / "cpu" / rel / "cpu.cfs_period_us", "100000\n")
    roles = "".join(f"{rel.split('/')[1]} /{rel}\n" for rel in groups)
    r = subprocess.run(["bash", CGROUPS, "usage"], cwd=ROOT, env=dict(os.environ, IB_CGROUP_MOUNTS=str(mounts)),
                       input=roles, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    ns = 123456789 + 1000 if layout == "v1" else 123456000 + 1000
    assert [l for l in lines if l.startswith("throttled ")] == [f"throttled ingress 150 10 {ns}"], lines
    steal = [l for l in lines if l.startswith("steal ")]
    assert len(steal) == 1 and re.fullmatch(r"steal \d+", steal[0]), lines


def test_usage_with_cpus_reads_those_cpus_busy_time(tmp_path):
    """usage CPUS: "busy CPUS NS", the busy jiffies (user, nice, system, irq, softirq, steal; 10
    ms each) of those CPUs' lines of /proc/stat only, beside the host's from its first line (a
    /proc/stat of four CPUs mounted over the real one, in a mount namespace of the test's)."""
    mounts, _ = v1_fixture(tmp_path)
    stat = tmp_path / "stat"
    stat.write_text("cpu  1000 100 400 9000 50 0 30 20 0 0\n" + "".join(
        f"cpu{i} {100 * (i + 1)} 1 {10 * (i + 1)} 2000 5 0 {i} 7 0 0\n" for i in range(4)) + "intr 1 2 3\nctxt 4\n")
    r = subprocess.run(["unshare", "-m", "bash", "-c", f'mount --bind {stat} /proc/stat && exec bash "$0" usage 1,3', CGROUPS],
                       cwd=ROOT, env=dict(os.environ, IB_CGROUP_MOUNTS=str(mounts)), input="", capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # cpu1: 200 + 1 + 20 + 1 + 7, cpu3: 400 + 1 + 40 + 3 + 7
    assert [l for l in r.stdout.splitlines() if not l.startswith("at ")] == [
        "host 15500000000", "steal 200000000", f"busy 1,3 {(229 + 451) * 10**7}"], r.stdout


@pytest.mark.parametrize("layout", ["v2", "v1 apart", "v1 co-mounted", "v1 without memory"])
def test_run_moves_its_pid_into_the_role_group(tmp_path, layout):
    """run writes the pid CMD then has (exec keeps it) into the role's cgroup.procs: once on
    v2, in the cpuacct, cpu and memory hierarchies on v1 (once where cpu and cpuacct are
    co-mounted; memory where it is mounted)."""
    if layout == "v2":
        mounts, root = v2_fixture(tmp_path)
        dirs = [root]
    elif layout == "v1 apart":
        mounts, base = v1_fixture(tmp_path)
        dirs = [base / "cpuacct", base / "cpu", base / "memory"]
    elif layout == "v1 without memory":
        mounts, base = v1_fixture(tmp_path, ("cpu,cpuacct", "cpuset", "pids"))
        dirs = [base / "cpu,cpuacct"]
    else:
        mounts, base = v1_fixture(tmp_path, ("cpu,cpuacct", "cpuset", "memory", "pids"))
        dirs = [base / "cpu,cpuacct", base / "memory"]
    r = sh("bash", CGROUPS, "run", "loadgen", "sh", "-c", "echo $$", env={"IB_CGROUP_MOUNTS": str(mounts)})
    assert r.returncode == 0, r.stderr
    pid = r.stdout.strip()
    for d in dirs:
        assert (d / "ingress-bench/loadgen/cgroup.procs").read_text() == pid + "\n"
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("ingress-bench/loadgen/cgroup.procs"))
    assert written == sorted(str((d / "ingress-bench/loadgen/cgroup.procs").relative_to(tmp_path)) for d in dirs)


@pytest.mark.parametrize("layout", ["v2", "v1"])
def test_remove_removes_only_our_empty_groups(tmp_path, layout):
    """Our groups, deepest first, in every hierarchy (on hybrid also the cgroup2 mount, where
    runc puts the kubelet's pods too); a group still holding something (here: a file, as a
    busy cgroup refuses rmdir) stays, and so does every group that is not ours."""
    mounts, base = (v2_fixture if layout == "v2" else v1_fixture)(tmp_path)
    hier = [base] if layout == "v2" else [base / h for h in ("cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "unified")]
    for h in hier:
        for d in ("ingress-bench/loadgen", "ingress-bench/lb/deeper", "ingress-bench-other/x", "system.slice/a"):
            (h / d).mkdir(parents=True)
    write(hier[0] / "ingress-bench/busy/cgroup.procs", "123\n")
    before = {p for p in tmp_path.rglob("*")}
    r = sh("bash", CGROUPS, "remove", env={"IB_CGROUP_MOUNTS": str(mounts)})
    assert r.returncode == 0, r.stderr
    gone = {str(p.relative_to(tmp_path)) for p in before - set(tmp_path.rglob("*"))}
    ours = {str((h / d).relative_to(tmp_path)) for h in hier
            for d in ("ingress-bench/loadgen", "ingress-bench/lb/deeper", "ingress-bench/lb")}
    ours |= {str((h / "ingress-bench").relative_to(tmp_path)) for h in hier[1:]}
    assert gone == ours


def kubelet_root(mounts, saved, rel="/ibench"):
    return sh("bash", "-c", "set -euo pipefail; " + LIB + 'cg_kubelet_root_prepare "$1" "$2"', "_", rel, str(saved),
              env={"IB_CGROUP_MOUNTS": str(mounts)})


def kubelet_root_restore(mounts, saved):
    return sh("bash", "-c", "set -euo pipefail; " + LIB + 'cg_kubelet_root_restore "$1"', "_", str(saved),
              env={"IB_CGROUP_MOUNTS": str(mounts)})


def test_kubelet_root_on_v2_enables_the_kubelets_controllers_and_restore_puts_them_back(tmp_path):
    """The root's subtree_control gets exactly the kubelet's controllers the kernel offers (one
    write, as the kernel applies it whole), so /ibench's cgroup.controllers passes the
    kubelet's check; /ibench's own too. After the kubelet enabled everything (runc does) and its
    groups are gone, the restore disables exactly what was not there before."""
    mounts, root = v2_fixture(tmp_path, subtree="cpu io")
    saved = tmp_path / "saved"
    r = kubelet_root(mounts, saved)
    assert r.returncode == 0, r.stderr
    words = {"+cpu", "+cpuset", "+memory", "+pids", "+hugetlb"}
    assert set((root / "cgroup.subtree_control").read_text().split()) == words
    assert set((root / "ibench/cgroup.subtree_control").read_text().split()) == words
    assert saved.read_text() == f"{root}\tcpu io\n"  # /ibench is new: made, not recorded
    # What the kernel shows once the kubelet's runc enabled all it offers; then down removes /ibench.
    (root / "cgroup.subtree_control").write_text(V2_CONTROLLERS + "\n")
    for p in sorted((root / "ibench").rglob("*"), reverse=True) + [root / "ibench"]:
        p.rmdir() if p.is_dir() else p.unlink()
    r = kubelet_root_restore(mounts, saved)
    assert r.returncode == 0, r.stderr
    assert set((root / "cgroup.subtree_control").read_text().split()) == {"-cpuset", "-memory", "-hugetlb", "-pids", "-rdma", "-misc"}
    assert not saved.exists()
    # Without hugetlb in the kernel, it is not asked for.
    mounts, root = v2_fixture(tmp_path / "nohugetlb", controllers="cpuset cpu io memory pids", subtree="")
    assert kubelet_root(mounts, tmp_path / "saved2").returncode == 0
    assert set((root / "cgroup.subtree_control").read_text().split()) == {"+cpu", "+cpuset", "+memory", "+pids"}


def test_kubelet_root_on_v1_is_made_in_every_hierarchy_with_its_cpuset(tmp_path):
    mounts, base = v1_fixture(tmp_path)
    saved = tmp_path / "saved"
    r = kubelet_root(mounts, saved)
    assert r.returncode == 0, r.stderr
    made = sorted(str(p.relative_to(base)) for p in base.glob("*/ibench"))
    assert made == ["cpu/ibench", "cpuacct/ibench", "cpuset/ibench", "memory/ibench", "pids/ibench", "systemd/ibench"]
    assert (base / "cpuset/ibench/cpuset.cpus").read_text() == "0-1\n"
    assert (base / "cpuset/ibench/cpuset.mems").read_text() == "0\n"
    assert not saved.exists() and kubelet_root_restore(mounts, saved).returncode == 0


def one_error(r, starts):
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: " + starts), r.stderr


def test_unsupported_layouts_refused_in_one_line_with_nothing_written(tmp_path):
    # The bug this replaces: plain directories named like hierarchies, nothing mounted there.
    base = tmp_path / "sys/fs/cgroup"
    for h in ("cpu", "cpuacct"):
        (base / h).mkdir(parents=True)
    mounts = tmp_path / "mounts"
    mounts.write_text(f"tmpfs {base} tmpfs rw 0 0\nproc /proc proc rw 0 0\n")
    env = {"IB_CGROUP_MOUNTS": str(mounts)}
    one_error(sh("bash", CGROUPS, "run", "loadgen", "true", env=env), "no cgroup hierarchy mounted")
    one_error(sh("bash", CGROUPS, "sample", str(tmp_path / "out"), env=env), "no cgroup hierarchy mounted")
    assert not (tmp_path / "out").exists() and not list(base.rglob("ingress-bench"))
    # v1 without cpuacct: the sampler and run need it.
    mounts, base = v1_fixture(tmp_path / "nocpuacct", ("cpu", "cpuset", "memory", "pids"))
    env = {"IB_CGROUP_MOUNTS": str(mounts)}
    one_error(sh("bash", CGROUPS, "run", "loadgen", "true", env=env), "cgroup v1 without the cpuacct controller mounted")
    one_error(kubelet_root(mounts, tmp_path / "saved"), "cgroup v1 without the cpuacct controller mounted")
    assert not list(base.rglob("ingress-bench")) and not list(base.rglob("ibench"))
    # v2 whose root offers no cpu controller (e.g. a container given only some).
    mounts, root = v2_fixture(tmp_path / "nocpu", controllers="memory pids", subtree="")
    one_error(kubelet_root(mounts, tmp_path / "saved"), "cgroup v2 without the cpu controller at the root")
    assert not (root / "ibench").exists() and not (tmp_path / "saved").exists()
    assert (root / "cgroup.subtree_control").read_text() == "\n"
    # An unreadable mount table.
    one_error(sh("bash", CGROUPS, "remove", env={"IB_CGROUP_MOUNTS": str(tmp_path / "missing")}), "cannot read the mount table")


def busy_in_group(role, mounts=None):
    """A busy loop on CPU 0 run by cgroups.sh in ROLE's group; its pid. It ends by itself after
    30 s (the tests stop it after 3): a suite killed in the middle (SIGTERM skips the finally
    that kills it) once left it burning a CPU under the next suite's benchmarks."""
    env = {"IB_CGROUP_MOUNTS": str(mounts)} if mounts else {}
    p = subprocess.Popen(["bash", CGROUPS, "run", role, "taskset", "-c", "0", "bash", "-c", "while [ $SECONDS -lt 30 ]; do :; done"],
                         cwd=ROOT, env=dict(os.environ, **env))
    return p


def cpu_seconds(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def measure_busy_loop(tmp_path, sampler, role, mounts=None):
    """The sampler's counter for a busy loop's group against the loop's own CPU time."""
    out = tmp_path / "out"
    s = sampler(out, mounts)
    p = busy_in_group(role, mounts)
    try:
        # CPU time, not wall time: CPU 0 is shared with whatever else runs (the cluster's stream).
        deadline = time.time() + 60
        while cpu_seconds(p.pid) < 1.5:  # enough to compare the two to 10 %
            assert time.time() < deadline, f"the busy loop got {cpu_seconds(p.pid):.2f} CPU-s in 60 s"
            time.sleep(0.2)
        p.send_signal(signal.SIGSTOP)  # both counters hold still while they are compared
        t = time.time()
        m = s.read(since=t + 0.05)
        own = cpu_seconds(p.pid)
    finally:
        p.kill()
        p.wait()
    return m, own


@pytest.mark.skipif(not Path("/sys/fs/cgroup/cpuacct/cpuacct.usage").exists(), reason="no cgroup v1 cpuacct here")
def test_real_v1_counter_matches_the_processes_cpu_time(tmp_path, sampler):
    role = f"test-{os.getpid()}"
    try:
        m, own = measure_busy_loop(tmp_path, sampler, role)
        got = series(m, "bench_cgroup_cpu_seconds_total", role)[(("role", role),)]
        assert abs(got - own) <= 0.1 * own, (got, own)
        assert series(m, "bench_cgroup_cpu_allowed", role) == {(("cpu", "0"), ("role", role)): 1}
    finally:
        time.sleep(0.2)
        assert sh("bash", CGROUPS, "remove").returncode == 0
    assert not list(Path("/sys/fs/cgroup").glob(f"*/ingress-bench/{role}"))


def unified_state():
    return (UNIFIED / "cgroup.subtree_control").read_text(), sorted(p.name for p in UNIFIED.iterdir() if p.is_dir())


@pytest.mark.skipif(not (UNIFIED / "cgroup.controllers").exists(), reason="no cgroup2 mount beside v1 here")
def test_real_v2_via_this_machines_cgroup2_mount(tmp_path, sampler):
    """The kernel's cgroup2 (mounted at /sys/fs/cgroup/unified, beside v1) read as a v2 host's
    only hierarchy: the sampler's cpu.stat counter against /proc; the kernel accepts the
    kubelet root's one-write enabling and the restore (with the controllers it offers there)
    and ends as found."""
    before = unified_state()
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup2 {UNIFIED} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    role = f"test-{os.getpid()}"
    try:
        m, own = measure_busy_loop(tmp_path, sampler, role, mounts)
        got = series(m, "bench_cgroup_cpu_seconds_total", role)[(("role", role),)]
        assert abs(got - own) <= 0.1 * own, (got, own)
        time.sleep(0.2)
        assert sh("bash", CGROUPS, "remove", env={"IB_CGROUP_MOUNTS": str(mounts)}).returncode == 0
        offered = (UNIFIED / "cgroup.controllers").read_text().split()
        if offered:
            # Only what this kernel binds to cgroup2 here: the real check of cpu & co is above.
            saved, rel = tmp_path / "saved", f"ibench-test-{os.getpid()}"
            r = sh("bash", "-c", "set -euo pipefail; " + LIB + 'CG_KUBELET_NEEDS=""; CG_KUBELET_OPTIONAL="$3"; '
                   'cg_kubelet_root_prepare "$1" "$2"', "_", rel, str(saved), " ".join(offered),
                   env={"IB_CGROUP_MOUNTS": str(mounts)})
            assert r.returncode == 0, r.stderr
            assert set((UNIFIED / "cgroup.subtree_control").read_text().split()) == set(offered)
            assert set((UNIFIED / rel / "cgroup.controllers").read_text().split()) == set(offered)
            (UNIFIED / rel / "pods").mkdir()  # a group the kubelet would make below its root
            r = sh("bash", "-c", "set -euo pipefail; " + LIB + 'cg_remove_tree "$1"; cg_kubelet_root_restore "$2"',
                   "_", rel, str(saved), env={"IB_CGROUP_MOUNTS": str(mounts)})
            assert r.returncode == 0, r.stderr
    finally:
        for d in sorted(UNIFIED.glob(f"*/{role}")) + sorted(UNIFIED.glob("ibench-test-*/*")) + sorted(UNIFIED.glob("ibench-test-*")):
            d.rmdir()
    assert unified_state() == before
