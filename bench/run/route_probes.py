"""bench:routes' probes and readings: when each route answers as it should (a GET on a
connection of its own, every route in turn), the route objects a Gateway API variant takes, and
what a role's cgroup says of its CPU and memory."""
import asyncio
import copy
import re
import time
from pathlib import Path

PREFIX = "/routes/"  # route I is the exact path /routes/I (I from 1); /routes/0 is never one
PROBES_PER_S = 1000  # the probes' ceiling: new connections the ingress serves beside the load
PARALLEL = 16
LABEL = "ingress-bench/routes"  # on every HTTPRoute bench:routes makes, beside the variant's own
INDEX = "ingress-bench/route"  # and its number I: a removal is one request (a label selector), not one a route
TO = "/1kb.bin"  # what every route serves: the load's payload


async def _status(addr, path, host, timeout):
    """The status line's code of one GET of PATH on a new connection, or None."""
    w = None
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(addr, 80), timeout)
        w.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        line = await asyncio.wait_for(r.readline(), timeout)
        return int(line.split()[1])
    except (OSError, asyncio.TimeoutError, ValueError, IndexError):
        return None
    finally:
        if w is not None:
            w.close()


def status(addr, path, host, timeout=2.0):
    return asyncio.run(_status(addr, path, host, timeout))


async def _watch(addr, host, paths, want, t0_ms, deadline, stop):
    pending, found, before, sent, rounds = list(paths), {}, {}, 0, []
    sem = asyncio.Semaphore(PARALLEL)
    began = time.monotonic()

    async def one(path):
        nonlocal sent
        async with sem:
            # Paced: the n-th probe of the watch no earlier than n / PROBES_PER_S s in.
            await asyncio.sleep(max(0.0, began + sent / PROBES_PER_S - time.monotonic()))
            sent += 1
            asked = time.time() * 1000 - t0_ms
            if await _status(addr, path, host, 1.0) == want:
                found[path] = (before.get(path, 0.0), time.time() * 1000 - t0_ms)
            else:
                before[path] = asked
    while pending and time.monotonic() < deadline and not stop():
        r0 = time.monotonic()
        await asyncio.gather(*(one(p) for p in pending))
        rounds.append((time.monotonic() - r0) * 1000)
        pending = [p for p in pending if p not in found]
        if pending:
            await asyncio.sleep(0.02)
    return found, sent, rounds


def watch(addr, host, paths, want, t0_ms, within_s, stop=lambda: False):
    """Probes each of PATHS (new connections, in turn, at most PROBES_PER_S) until it answers
    WANT: ({path: (after, by)}, probes sent, each round's ms): the route changed after AFTER
    (ms from T0_MS: when its last probe that did not answer so was sent, 0 if none) and by BY
    (its answer). A path not found within WITHIN_S (or once STOP() holds) is missing."""
    return asyncio.run(_watch(addr, host, list(paths), want, t0_ms, time.monotonic() + within_s, stop))


def selectors(lo, hi, most=1000):
    """Label selectors for routes LO+1 to HI, at most MOST numbers each: the API server deletes
    a collection in one request (by names, kubectl asks for each in turn: 990 of them took over
    5 minutes while Envoy Gateway re-translated its routes after each)."""
    return [f"{INDEX} in ({','.join(map(str, range(a, min(hi, a + most - 1) + 1)))})" for a in range(lo + 1, hi + 1, most)]


def paths(lo, hi):
    """The paths of routes LO+1 to HI."""
    return [f"{PREFIX}{i}" for i in range(lo + 1, hi + 1)]


def httproutes(route, lo, hi):
    """Routes LO+1 to HI as HTTPRoutes beside ROUTE (the variant's, as built): each its own
    object on the same parent and host, an exact path rewritten to the load's path, to the
    same backends."""
    out = []
    for i in range(lo + 1, hi + 1):
        r = {"apiVersion": route["apiVersion"], "kind": "HTTPRoute",
             "metadata": {"name": f"bench-route-{i}", "namespace": route["metadata"].get("namespace", "ingress-bench"),
                          "labels": {LABEL: "1", INDEX: str(i)}},
             "spec": {"parentRefs": copy.deepcopy(route["spec"]["parentRefs"]), "hostnames": list(route["spec"].get("hostnames") or []),
                      "rules": [{"matches": [{"path": {"type": "Exact", "value": f"{PREFIX}{i}"}}],
                                 "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": TO}}}],
                                 "backendRefs": copy.deepcopy(route["spec"]["rules"][0]["backendRefs"])}]}}
        out.append(r)
    return out



# --- cgroups -------------------------------------------------------------------------------

def mounts():
    """{controller: mount} of this host's cgroup hierarchies (v2: {"": mount})."""
    out = {}
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mnt, kind, opts = line.split()[:4]
        if kind == "cgroup":
            for o in opts.split(","):
                out.setdefault(o, mnt)
        elif kind == "cgroup2":
            out.setdefault("", mnt)
    return out


def of_pid(pid):
    """{controller: directory} of PID's cgroups (v2: its one group under "")."""
    m, out = mounts(), {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, rel = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else [""]):
            if c in m:
                out[c] = f"{m[c]}{rel}"
    return out


def of_container(kubelet_root, pod_uid, container_id):
    """{controller: directory} of a container of our local cluster's pods (the kubelet's cgroup
    root, its QoS class's group or none, the pod's, the container's)."""
    m, out = mounts(), {}
    for c in ("cpuacct", "memory", ""):
        if c not in m:
            continue
        hits = [d for pattern in (f"{kubelet_root}/kubepods", f"{kubelet_root}/node-*/kubepods")
                for q in ("", "*/") for d in Path(m[c]).glob(f"{pattern.lstrip('/')}/{q}pod{pod_uid}/{container_id}")]
        if hits:
            out[c] = str(hits[0])
    return out


def reading(dirs):
    """What a group's files say now: {"cpu_ns", "working_set_bytes", "rss_bytes", "at"} (working
    set: usage less inactive file pages, as cAdvisor and the kubelet count it; RSS: anonymous
    memory), from the v1 cpuacct and memory hierarchies or the v2 group."""
    out = {"at": time.monotonic(), "dirs": dirs}
    if "" in dirs and "cpuacct" not in dirs:  # v2
        d = Path(dirs[""])
        stat = dict(l.split() for l in (d / "cpu.stat").read_text().splitlines())
        out["cpu_ns"] = int(stat["usage_usec"]) * 1000
        mem = dict(l.split() for l in (d / "memory.stat").read_text().splitlines())
        out["working_set_bytes"] = max(0, int((d / "memory.current").read_text()) - int(mem.get("inactive_file", 0)))
        out["rss_bytes"] = int(mem.get("anon", 0))
        return out
    out["cpu_ns"] = int((Path(dirs["cpuacct"]) / "cpuacct.usage").read_text())
    if "memory" in dirs:
        d = Path(dirs["memory"])
        mem = dict(l.split() for l in (d / "memory.stat").read_text().splitlines())
        out["working_set_bytes"] = max(0, int((d / "memory.usage_in_bytes").read_text()) - int(mem.get("total_inactive_file", 0)))
        out["rss_bytes"] = int(mem.get("total_rss", 0))
    return out


def at_rest(first, last):
    """CPU cores between two readings, and the last's memory."""
    return {"cpu_cores": (last["cpu_ns"] - first["cpu_ns"]) / 1e9 / max(1e-9, last["at"] - first["at"]),
            "working_set_bytes": last.get("working_set_bytes"), "rss_bytes": last.get("rss_bytes"),
            "cgroup": last["dirs"].get("memory") or last["dirs"].get("")}


RECONFIGURING = re.compile(r"signal 1 \(SIGHUP\) received.*reconfiguring")


def nginx_reloads(error_log):
    """The reloads an nginx master logged (notice level: nginx.conf.tmpl's error_log)."""
    return sum(1 for l in error_log.splitlines() if RECONFIGURING.search(l))


def rds_reloads(prometheus_text, own):
    """Envoy's route configuration reloads (RDS config_reload: a fetch that changed its routes)
    of its busiest route table: each listener of the gateway (HTTP, HTTPS) has one, which every
    change reaches (OWN: its own listeners' pattern, left out)."""
    tables = {}
    for l in prometheus_text.splitlines():
        if l.startswith("envoy_http_rds_config_reload{") and not own.search(l):
            tables[l.rsplit(None, 1)[0]] = int(float(l.split()[-1]))
    return max(tables.values(), default=0)
