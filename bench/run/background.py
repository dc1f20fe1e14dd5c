"""bench:background: what the local cluster itself costs, per component, at rest and under the
quick start's load, on the CPUs the load shares with it. --rounds (3) times, alternated: --rest
(30) seconds with nothing running, then a `./task bench:rps ROUNDS=1` of --duration (30) seconds,
read inside its load. A component is what this cluster started, found by
structure: a daemon of the cluster's state directory (its session: etcd, the API server, the
controller manager, the scheduler, each node's kubelet, containerd and kube-proxy), the
containerd shims of that directory, and each pod's cgroups below the kubelets' cgroup root
(by namespace and owner). The rest of the host's busy time is "other". Prints the table and
writes docs/results/<date>-background/ (result.json, result.md; per component the median of
the rounds and their range, CPUs). Leaves the cluster as it found it (up stays up).

  bench/run/background.py --state DIR --cgroup NAME [--rounds N] [--rest S] [--duration S] [--out DIR]
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repeatability import ROOT, Parser, sh  # noqa: E402  (one way to run a task and log it)

HZ = os.sysconf("SC_CLK_TCK")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # v1 (this machine); v2 below
UNIFIED = Path("/sys/fs/cgroup")


def procs():
    """pid -> (session, comm, cpu seconds incl. reaped children, cmdline)"""
    out = {}
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            with open(f"/proc/{d.name}/stat") as f:
                s = f.read()
            with open(f"/proc/{d.name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        v = s[s.rindex(")") + 2:].split()
        # fields after comm: state ppid pgrp session ... utime(14) stime cutime cstime (1-based in stat)
        out[int(d.name)] = (int(v[3]), comm, sum(int(x) for x in v[11:15]) / HZ, cmd)
    return out


class Cluster:
    def __init__(self, state, cgroup):
        self.state, self.cgroup = Path(state), cgroup
        self.daemons = {p.name: int(p.read_text()) for p in (self.state / "pids").iterdir() if p.read_text().strip().isdigit()}
        self.pods = {}  # pod uid -> component

    def name_pods(self):
        r = sh("kubectl", "--kubeconfig", str(self.state / "pki/admin.kubeconfig"), "get", "pods", "-A", "-o", "json")
        if r.returncode:
            sys.exit(f"error: cannot list the cluster's pods: {r.stderr.strip()[:200]}")
        for p in json.loads(r.stdout)["items"]:
            m, owner = p["metadata"], (p["metadata"].get("ownerReferences") or [{}])[0]
            name = owner.get("name") or m["name"]
            if owner.get("kind") == "ReplicaSet":
                name = name.rsplit("-", 1)[0]
            self.pods[m["uid"]] = f"pod {m['namespace']}/{name}"  # cgroupfs: pod<uid>

    def pod_groups(self):
        """component -> cumulative CPU seconds of its pods' cgroups (each pod's own group, which
        holds its containers')."""
        base = CPUACCT / self.cgroup if CPUACCT.is_dir() else UNIFIED / self.cgroup
        out = {}
        for d, dirs, _ in os.walk(base):
            leaf = os.path.basename(d)
            if not leaf.startswith("pod"):
                continue
            dirs.clear()
            uid = leaf[3:]
            try:
                if CPUACCT.is_dir():
                    secs = int(Path(d, "cpuacct.usage").read_text()) / 1e9
                else:
                    secs = int(Path(d, "cpu.stat").read_text().split()[1]) / 1e6
            except (OSError, ValueError, IndexError):
                continue
            name = self.pods.get(uid) or "pod (unnamed)"
            out[name] = out.get(name, 0) + secs
        return out

    def reading(self, ps):
        """component -> cumulative CPU seconds, and the host's busy seconds."""
        out = {}
        by_session = {}
        for sid, _, secs, _ in ps.values():
            by_session[sid] = by_session.get(sid, 0) + secs
        for name, pid in self.daemons.items():
            comp = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name  # kubelet-3 -> kubelet
            out[comp] = out.get(comp, 0) + by_session.get(pid, 0)
        shims = f"-address {self.state}/"
        out["containerd shims"] = sum(secs for (_, comm, secs, cmd) in ps.values()
                                      if comm.startswith("containerd-shim") and shims in cmd)
        # The load's client (a host process in the client node's namespace: bench.sh).
        out["k6 (the load)"] = sum(secs for (_, comm, secs, _) in ps.values() if comm == "k6")
        out.update(self.pod_groups())
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        out["host busy"] = (v[0] + v[1] + v[2] + v[5] + v[6]) / HZ  # user, nice, system, irq, softirq
        return out


def rates(a, b):
    secs = b["at"] - a["at"]
    out = {k: (b["cpu"][k] - a["cpu"].get(k, b["cpu"][k])) / secs for k in b["cpu"]}
    named = sum(v for k, v in out.items() if k != "host busy")
    out["other"] = out["host busy"] - named
    return out


def sample(cluster):
    return {"at": time.monotonic(), "cpu": cluster.reading(procs())}


def rest(cluster, secs):
    a = sample(cluster)
    time.sleep(secs)
    return rates(a, sample(cluster))


def load(cluster, secs, log):
    """One quick-start run; the rates between two readings inside its load: 4 s after it says
    k6 starts (its dashboard's line) and 4 s before its DURATION ends. Nothing is read
    meanwhile: its 3 s probe before the load counts the rest of the host, this script too."""
    p = subprocess.Popen(["./task", "bench:rps", "ROUNDS=1", f"DURATION={secs}s"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, readings, timer = [], [], None

    def measure():
        time.sleep(4)
        readings.append(sample(cluster))
        time.sleep(secs - 8)
        readings.append(sample(cluster))
    for line in p.stdout:
        lines.append(line)
        if timer is None and "k6 web dashboard" in line:  # bench.sh, as its load begins
            timer = threading.Thread(target=measure)
            timer.start()
    p.wait()
    if timer:
        timer.join()
    with open(log, "a") as f:
        f.write(f"$ ./task bench:rps ROUNDS=1 DURATION={secs}s\n{''.join(lines)}exit {p.returncode}\n".replace(f"{ROOT}/", ""))
    if p.returncode or len(readings) != 2:
        sys.exit(f"error: the load run failed (exit {p.returncode}): see {log}")
    return rates(*readings)


def main():
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state", required=True)
    p.add_argument("--cgroup", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rest", type=float, default=30)
    p.add_argument("--duration", type=int, default=30, help="the load's seconds")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.rounds < 1 or a.rest < 5 or a.duration < 15:
        sys.exit("error: --rounds must be at least 1, --rest at least 5 seconds and --duration at least 15")
    day = datetime.datetime.now(datetime.timezone.utc)
    out = Path(a.out or ROOT / "docs/results" / f"{day:%Y-%m-%d}-background")
    if out.exists():
        sys.exit(f"error: {out} exists already: results are never overwritten (--out another)")
    was_up = sh("./task", "cluster:status").returncode == 0
    out.mkdir(parents=True)
    log = out / "log.txt"
    try:
        # The quick start's state: the cluster, its monitoring and the default variant deployed.
        if sh("./task", "bench:rps", "ROUNDS=1", "DURATION=5s", log=log).returncode:
            sys.exit(f"error: the first run failed: see {log}")
        cluster = Cluster(a.state, a.cgroup)
        cluster.name_pods()
        time.sleep(10)
        rounds = []
        for i in range(1, a.rounds + 1):
            r = {"rest": rest(cluster, a.rest), "load": load(cluster, a.duration, log)}
            rounds.append(r)
            print(f"round {i}: at rest {r['rest']['host busy']:.2f} CPUs busy, under load {r['load']['host busy']:.2f}", file=sys.stderr)
    finally:
        if not was_up:
            sh("./task", "down", log=log)
    write(out, rounds, a, day)


def write(out, rounds, a, day):
    comps = sorted({k for r in rounds for w in r.values() for k in w}, key=lambda k: -statistics.median(
        r["load"].get(k, 0) for r in rounds))
    table = {}
    for k in comps:
        table[k] = {w: {"median": statistics.median(r[w].get(k, 0) for r in rounds),
                        "min": min(r[w].get(k, 0) for r in rounds), "max": max(r[w].get(k, 0) for r in rounds)}
                    for w in ("rest", "load")}
    rev = sh("git", "describe", "--always", "--dirty").stdout.strip()
    machine = {"cpus": os.cpu_count(), "kernel": os.uname().release}
    doc = {"date": f"{day:%Y-%m-%d}", "commit": rev, "machine": machine, "rounds": len(rounds), "rest_s": a.rest,
           "load": f"./task bench:rps ROUNDS=1 DURATION={a.duration}s", "components": table, "each_round": rounds}
    (out / "result.json").write_text(json.dumps(doc, indent=1) + "\n")
    md = [f"# The local cluster's own CPU, per component ({doc['date']})", "",
          f"Written by `bench/run/background.py` at {rev} on {machine['cpus']} CPUs, kernel {machine['kernel']}. "
          f"{len(rounds)} rounds, alternated: {a.rest:g} s at rest, then `{doc['load']}` read inside its load (from 4 s after its start to 4 s before its end). "
          "CPUs used (1 = one core busy), the median of the rounds and their range.", "",
          "| component | at rest | under load |", "|---|---|---|"]
    for k in comps:
        f = lambda w: f"{table[k][w]['median']:.3f} ({table[k][w]['min']:.3f}-{table[k][w]['max']:.3f})"
        md.append(f"| {k} | {f('rest')} | {f('load')} |")
    (out / "result.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
