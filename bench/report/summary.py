"""summary.json, assembled in one place. k6's handleSummary (k6/lib/summary.js) writes the run's
summary.json with what k6 knows (result, settings, correlation, verdict, k6); what only the
runner measures is added here, and a distributed run's segments are merged here:

  assemble  (bench.sh)        .client from k6's CPU times, .server from nginx's stub_status
                              before and after the load; the lines bench.sh prints
  segments  (distributed.sh)  the segments' k6 summaries summed, .server from stub_status

The schema is what every reader (report, matrices, calibrate, tests) reads; numbers are written
as jq wrote them (a whole float as an integer, two-space indent), so a file is byte-for-byte
what bench.sh's jq made. summary.json is replaced whole, never left half-written."""
import json
import re
from bisect import bisect_right
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from itertools import accumulate

from .change import merged_timeline
from .fmt import num
from .run import Bad, contract, profile, read_json


# Where a reading's counts come from (bench/lib/k6.sh stub_counts): its source's name in the
# summary, and whether reading it is itself a request on a new connection that it counts.
SOURCES = {"nginx": ("nginx stub_status", 1, "nginx"), "envoy": ("Envoy statistics", 0, "Envoy"),
           # an existing ingress's own counter, read from its Prometheus (bench/lib/existing.sh)
           "prometheus": ("the ingress's counter in its Prometheus", 0, "the ingress (its counter in its Prometheus)")}


def stub_reading(text):
    """`accepts requests [source]` (bench/lib/k6.sh stub_counts) -> (accepts, requests, source);
    empty -> None. Without a source: nginx's stub_status."""
    if not text.strip():
        return None
    m = re.fullmatch(r"\s*(\d+)\s+(\d+)(?:\s+(\w+))?\s*", text)
    if not m or (m[3] or "nginx") not in SOURCES:
        raise Bad(f"a server reading is 'ACCEPTS REQUESTS [{'|'.join(SOURCES)}]', got '{text}'")
    return int(m[1]), int(m[2]), m[3] or "nginx"


def served(before, after):
    """(requests, connections accepted) between two readings. A stub_status read is itself a
    request on a new connection (the first one is inside `before`): minus one each."""
    own = SOURCES[after[2]][1]  # (the sources' entries: the summary's name, own requests, who counted)
    return after[1] - before[1] - own, after[0] - before[0] - own


def per(a, b):
    """a / b, or None (JSON null) when there is nothing to divide by."""
    return a / b if num(a) and num(b) and b > 0 else None


def client(result, wall, user, sys_, cpus):
    """The load generator's own CPU: user + system of k6 over the wall time and its CPUs."""
    cpu = user + sys_
    requests = result.get("requests")
    return {"cpu_seconds": cpu, "wall_seconds": wall, "cpus": cpus,
            "cpu_us_per_request": per(cpu * 1e6, requests), "utilization": per(cpu, wall * cpus)}


def usage_reading(text):
    """`bench/platforms/monitoring/cgroups.sh usage`'s lines -> {"at": s, "roles": {role: CPU-s},
    "host": CPU-s, "steal": CPU-s, "cpus": {role: cores}, "period": {role: µs}, "throttled":
    {role: [periods, throttled periods, throttled ns]}, "busy": [the client node's CPUs, CPU-s]
    (where read)}; empty -> None."""
    if not text.strip():
        return None
    out = {"roles": {}, "cpus": {}, "period": {}, "throttled": {}}
    for line in text.strip().splitlines():
        f = line.split()
        try:
            if f[0] in ("cpus", "period") and len(f) == 3:
                out[f[0]][f[1]] = float(f[2])
            elif f[0] == "busy" and len(f) == 3:
                out["busy"] = [f[1], int(f[2]) / 1e9]
            elif f[0] == "throttled" and len(f) == 5:
                out["throttled"][f[1]] = [int(f[2]), int(f[3]), int(f[4])]
            elif len(f) == 2 and f[0] in ("at", "host", "steal"):
                out[f[0]] = int(f[1]) / 1e9
            elif len(f) == 2:
                out["roles"][f[0]] = int(f[1]) / 1e9
            else:
                raise ValueError
        except ValueError:
            raise Bad(f"a CPU usage reading is 'ROLE NS', 'cpus ROLE N', 'period ROLE US', 'throttled ROLE PERIODS THROTTLED NS', "
                      f"'busy CPUS NS', 'host NS', 'steal NS' or 'at NS', got '{line}'") from None
    if "at" not in out or "host" not in out:
        raise Bad("a CPU usage reading needs its 'at' and 'host' lines")
    return out




# The ingress throttled for at least this share of the window: a request arriving then waits
# for the quota's next period (up to its length: 100 ms, 5 ms on the local cluster's ingress
# node), so at least 1 in 100 requests carries such a wait. Where a period is half of p99 or
# more, that wait is most of p99: p99 is the quota's, not the server's.
QUOTA_SHAPES_P99 = 0.01


def cpu(result, scenario, before, after, client_cpu_s, server_requests):
    """The CPU time each role used between the two readings around the load (their cgroups:
    the ingress's containers without the metrics sidecar, the backends', the host's every CPU),
    and the seeds' unit: what the ingress served per CPU-second of its own (requests: the
    server's count where there is one; throughput: the bits k6 received). None without both
    readings; a role missing from either (a pod replaced) has no figure."""
    if not (before and after):
        return None
    secs = after["at"] - before["at"]
    used = {r: after["roles"][r] - before["roles"][r] for r in after["roles"] if r in before["roles"]}
    ingress = used.get("ingress")
    out = {"source": "cgroups", "seconds": secs, "ingress_cpu_seconds": ingress,
           "ingress_cpus": after["cpus"].get("ingress"), "ingress_cfs_period_us": after["period"].get("ingress"),
           "backend_cpu_seconds": used.get("backend"), "host_cpu_seconds": after["host"] - before["host"]}
    out["other_cpu_seconds"] = out["host_cpu_seconds"] - sum(v for v in (ingress, used.get("backend"), client_cpu_s) if v)
    # The ingress on a node of its own: what else ran on the client node's CPUs, beside k6 and
    # the backends (their node shares those CPUs in the default layout), is what the client side
    # lost; the rest of the host's other work ran on the ingress's node.
    b0, b1 = before.get("busy"), after.get("busy")
    if b0 and b1 and b0[0] == b1[0]:
        out["client_node"] = {"cpus": b1[0], "busy_cpu_seconds": b1[1] - b0[1],
                              "other_cpu_seconds": b1[1] - b0[1] - sum(v for v in (used.get("backend"), client_cpu_s) if v)}
    if "steal" in before and "steal" in after:
        out["steal_cpus"] = (after["steal"] - before["steal"]) / secs
    t0, t1 = before.get("throttled", {}).get("ingress"), after.get("throttled", {}).get("ingress")
    if t0 and t1:
        periods, throttled, waited = (b - a for a, b in zip(t0, t1))
        waited /= 1e9
        out["ingress_throttling"] = {"periods": periods, "throttled_periods": throttled, "throttled_seconds": waited,
                                     "quota_shapes_p99": waited >= QUOTA_SHAPES_P99 * secs}
    unit = profile(scenario)["headline"]["unit"]  # what the headline counts, per second
    served_ = result.get("gbit_per_s", 0) * result.get("seconds", 0) if unit == "Gbit/s" else \
        server_requests if server_requests is not None else result.get("requests")
    out["per_ingress_cpu"] = {"value": per(served_, ingress), "unit": unit}
    return out


def cpu_lines(c, s, host_cpus):
    """The run's CPU line and its answer: what limited it, at how much ingress CPU, the headline
    and the headline per ingress CPU."""
    f = c["per_ingress_cpu"]
    if c["ingress_cpu_seconds"] is None:
        return [f"{'cpu':<14}no ingress CPU count (no ingress group, or its pod was replaced during the run); "
                f"host {c['host_cpu_seconds'] / c['seconds']:.2f} of {host_cpus} CPUs"]
    limit = c["ingress_cpus"]
    used = c["ingress_cpu_seconds"] / c["seconds"]
    of = f" of {limit:g}" if limit else ""
    def amount(v):
        return "n/a" if v is None else f"{v:.2f}" if f["unit"] == "Gbit/s" else f"{jq_round(v):,}"
    lines = [f"{'cpu':<14}ingress {used:.2f}{of} CPU, backends "
             + ("n/a" if c["backend_cpu_seconds"] is None else f"{c['backend_cpu_seconds'] / c['seconds']:.2f}")
             + f", host {c['host_cpu_seconds'] / c['seconds']:.2f} of {host_cpus} CPUs (cgroups): "
             f"{amount(f['value'])} {f['unit']} per ingress CPU"]
    lines += latency_lines(c, s["result"].get("p99_ms"))
    v = s.get("verdict") or {}
    head = s["result"].get("gbit_per_s") if f["unit"] == "Gbit/s" else s["result"].get("rps")
    if v.get("limit") and head is not None:
        bound = {"unknown": "limit unknown", "none": "nothing saturated"}.get(v["limit"], f"{v['limit']}-bound") + \
            ("" if v.get("valid", True) else " (NOT VALID for the ingress)")
        lines.append(f"{'answer':<14}{bound} at {limit:g} ingress CPU: {amount(head)} {f['unit']}, "
                     f"{amount(f['value'])} {f['unit']} per ingress CPU" if limit else
                     f"{'answer':<14}{bound}: {amount(head)} {f['unit']}, {amount(f['value'])} {f['unit']} per ingress CPU")
    return lines


def latency_lines(c, p99_ms):
    """What shaped the latency: the ingress's CFS throttling in the window and the host's steal,
    and, when the ingress waited on its quota for QUOTA_SHAPES_P99 of the window or more, that
    p99 is the quota's (a period of half of p99 or more) or holds waits on it (a shorter one)."""
    t = c.get("ingress_throttling")
    if not t:
        return []
    said = (f"the ingress was throttled in {t['throttled_periods']:,} of {t['periods']:,} CFS periods, "
            f"{t['throttled_seconds']:.2f} s of the {c['seconds']:.1f} s window"
            + (f" (a quota of {c['ingress_cpus']:g} CPU per {c['ingress_cfs_period_us'] / 1000:g} ms)"
               if c.get("ingress_cpus") and c.get("ingress_cfs_period_us") else "")
            + (f"; steal {c['steal_cpus']:.2f} CPU" if c.get("steal_cpus") is not None else ""))
    if t["quota_shapes_p99"] and p99_ms is not None:
        period_ms = (c.get("ingress_cfs_period_us") or 100_000) / 1000  # the kernel's default
        if period_ms >= p99_ms / 2:
            return [f"{'latency':<14}p99 {p99_ms:.1f} ms is the CPU quota's, not the server's: {said}"]
        return [f"{'latency':<14}p99 {p99_ms:.1f} ms holds waits on the CPU quota, each at most its {period_ms:g} ms period: {said}"]
    return [f"{'latency':<14}{said[0].upper()}{said[1:]}"]


def server(client_requests, before, after):
    requests, accepted = served(before, after)
    return {"source": SOURCES[after[2]][0], "requests": requests, "connections_accepted": accepted,
            "client_over_server": per(client_requests, requests)}


# ---------------------------------------------------------------- jq's numbers

def jq_round(v):  # C's round(): halves away from zero
    return int(Decimal(v).to_integral_value(ROUND_HALF_UP))


def as_jq(v):
    """Numbers as jq writes them: a whole value without a fraction (the rest: the shortest repr,
    as both print it)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e17:
        return int(v)
    if isinstance(v, dict):
        return {k: as_jq(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_jq(x) for x in v]
    return v


def write(path, summary):
    tmp = path.with_suffix(".json.new")
    tmp.write_text(json.dumps(as_jq(summary), indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def agreement(client_over_server):  # as the lines print it: three decimals, "–" for null
    return "–" if client_over_server is None else json.dumps(as_jq(jq_round(client_over_server * 1000) / 1000))


# ---------------------------------------------------------------- the two assemblies

def k6_summary(path):
    s = read_json(path)
    if not isinstance(s, dict) or not isinstance(s.get("result"), dict):
        raise Bad(f"{path} has no .result: k6 did not write its summary")
    return s


RESULT_LINE = re.compile(r"^result( +)(PASS|FAIL) \(.*$", re.M)


def mark_aborted(run_dir, s, after_seconds, signal):
    """A run cut short by a signal: never passed, whatever its thresholds said of the part
    that ran. `aborted` at the top and in `result` (absent: the run finished); summary.txt's
    result line says so. Without k6's summary (k6 had to be killed) a bare result stands."""
    s.setdefault("result", {"requests": None})
    s["aborted"] = s["result"]["aborted"] = True
    s["result"]["passed"] = False
    s["interrupted"] = {"signal": signal, "after_seconds": after_seconds, "k6_summary": "k6" in s}
    txt = run_dir / "summary.txt"
    text = txt.read_text() if txt.is_file() else ""
    line = f"ABORTED (interrupted after {after_seconds} s by {signal})"
    text, n = RESULT_LINE.subn(lambda m: f"result{m.group(1)}{line}", text)
    txt.write_text(text if n else text + f"{'result':<14}{line}\n")


def assemble(run_dir, times, cpus, before, after, aborted=None, signal=None, usage=(None, None), host_cpus=None):
    """bench.sh's run: RUN_DIR/summary.json (k6's) + .client + .server (when both readings
    exist) + .cpu (when both USAGE readings exist) -> RUN_DIR/summary.json; the client, server
    and CPU lines, also added to summary.txt. ABORTED: the seconds after which SIGNAL cut the
    run short (mark_aborted)."""
    path = run_dir / "summary.json"
    try:
        s = k6_summary(path)
    except Bad:
        if aborted is None:
            raise
        s = {}  # stopped before k6 wrote one
    if aborted is not None:
        mark_aborted(run_dir, s, aborted, signal or "a signal")
    wall, user, sys_ = times
    c = s["client"] = client(s["result"], wall, user, sys_, cpus)
    util = "–" if c["utilization"] is None else jq_round(c["utilization"] * 100)
    lines = [f"client        k6 used {json.dumps(as_jq(jq_round(c['cpu_seconds'] * 100) / 100))} CPU-s: "
             f"{jq_round(c['cpu_us_per_request'] or 0)} µs per request, {util}% of {cpus} CPU"]
    if before and after:
        srv = s["server"] = server(s["result"].get("requests"), before, after)
        lines.append(f"server        {srv['requests']} requests, {srv['connections_accepted']} connections counted "
                     f"by {SOURCES[after[2]][2]} (client/server {agreement(srv['client_over_server'])})")
    else:
        lines.append("server        no server-side count (no stub_status for this target)")
    # What the server negotiated, by its own record (bench/run/tls_record.py, before the load).
    if (run_dir / "tls.json").is_file():
        t = s.setdefault("server", {})["tls"] = json.loads((run_dir / "tls.json").read_text())
        lines.append(f"tls           {t['line']}")
    c = cpu(s["result"], s.get("settings", {}).get("SCENARIO") or s["result"].get("scenario"), *usage,
            c["cpu_seconds"], s.get("server", {}).get("requests"))
    if c:
        s["cpu"] = c
        lines += cpu_lines(c, s, host_cpus)
    write(path, s)
    with (run_dir / "summary.txt").open("a") as txt:
        txt.write("".join(f"{line}\n" for line in lines))
    return lines


# The latency thresholds (k6/lib/options.js): the native engine's histogram Gauges, or the
# Trend on the JS path. A distributed run judges them on all segments' requests together.
LATENCY_THRESHOLD = re.compile(r"^(?:value|p\((\d+)\))<([\d.]+)$")
LATENCY_METRICS = {"bench_http_req_duration_p95": 95, "bench_http_req_duration_p99": 99, "http_req_duration": None}


def percentiles(histograms, qs=(0.5, 0.95, 0.99)):
    """The percentiles of every request of HISTOGRAMS together (each the native engine's export,
    xk6/latency.go: [[bucket value ms, count], ...] of one binary, so equal buckets have equal
    values), by k6's Trend rule: rank q*(n-1), interpolated between its two neighbours. None
    when there is nothing to merge."""
    counts = Counter()
    for h in histograms:
        for value, n in h["buckets"]:
            counts[value] += n
    if not counts:
        return None
    values = sorted(counts)
    cum = list(accumulate(counts[v] for v in values))

    def at(rank):
        return values[bisect_right(cum, rank)]
    out = {}
    for q in qs:
        r = q * (cum[-1] - 1)
        lo = int(r)
        v = at(lo)
        if r > lo:
            v += (at(lo + 1) - v) * (r - lo)
        out[f"p{round(q * 100)}_ms"] = v
    return out


def run_thresholds(results, merged):
    """The run's thresholds: the latency ones on the merged percentiles, every other one as the
    segments judged it (a rate or a count is the segment's own)."""
    out = []
    for r in results:
        for t in r.get("thresholds", []):
            m = LATENCY_THRESHOLD.match(t["expr"])
            if merged and t["metric"] in LATENCY_METRICS and m:
                p = LATENCY_METRICS[t["metric"]] or int(m[1])
                t = {**t, "ok": merged[f"p{p}_ms"] < float(m[2]), "value": merged[f"p{p}_ms"], "merged": True}
                if t in out:
                    continue
            out.append(t)
    return out


def run_verdict(verdicts):
    """The run's verdict from its segments' (each from its own pod's correlation): the first
    limit in the contract's verdict order that any segment reached (one client-bound runner
    makes the run NOT VALID), else "unknown" if any segment could not tell, else "none"."""
    order = [s["verdict"]["limit"] for s in sorted((s for s in contract.load()["signals"] if s.get("verdict")),
                                                    key=lambda s: s["verdict"]["order"])] + ["unknown", "none"]
    known = [v for v in verdicts if isinstance(v, dict) and v.get("limit") in order]
    if not known:
        return None
    worst = min(known, key=lambda v: order.index(v["limit"]))
    return {**worst, "segments": [v.get("limit") if isinstance(v, dict) else None for v in verdicts]}


def prometheus_cpu(reading, result, served_requests, throttling=None):
    """An ingress you run: its CPU seconds before and after the load and the CPUs it may use,
    as its Prometheus read them (READING, "-" for none): the summary's cpu, with the headline
    per CPU-second of the ingress's own (requests: its count; throughput: the bits k6 received);
    with THROTTLING (its CFS periods and throttled ones before and after, "PERIODS/THROTTLED" or
    "-"), the periods of the load and the share of them it was throttled in."""
    before, after, cpus = (None if v == "-" else float(v) for v in reading)
    used = after - before if before is not None and after is not None else None
    unit = profile(result["scenario"])["headline"]["unit"]
    served_ = result["gbit_per_s"] * result["seconds"] if unit == "Gbit/s" else served_requests
    out = {"source": "prometheus", "ingress_cpu_seconds": used, "ingress_cpus": cpus,
           "per_ingress_cpu": {"value": per(served_, used), "unit": unit}}
    if throttling:
        try:
            t0, t1 = (None if v == "-" else [round(float(x)) for x in v.split("/")] for v in throttling)
            if (t0 and len(t0) != 2) or (t1 and len(t1) != 2):
                raise ValueError
        except ValueError:
            raise Bad(f"--ingress-throttling takes PERIODS/THROTTLED or '-', got {' '.join(throttling)}") from None
        if t0 and t1:
            periods, throttled = t1[0] - t0[0], t1[1] - t0[1]
            out["ingress_throttling"] = {"periods": periods, "throttled_periods": throttled, "throttled_ratio": per(throttled, periods)}
        else:  # none at all (no quota), or one read only (its pods replaced under the load): unknown
            out["ingress_throttling"] = None if not (t0 or t1) else {"periods": None, "throttled_periods": None, "throttled_ratio": None}
    return out


def nic_share(reading):
    """An ingress you run: the bytes its pods and its nodes' NICs carried, each read before and
    after the load as "PODS/NICS" ("none" for none): the summary's network, the pods' share of
    what crossed the NICs. Above 1, part of the pods' traffic never crossed a NIC (a client or
    backends on the ingress's own node); unknown where either read lacks either."""
    try:
        (p0, n0), (p1, n1) = ([None if x == "none" else float(x) for x in v.split("/")] for v in reading)
    except ValueError:
        raise Bad(f"--ingress-nic takes PODS/NICS (bytes or 'none'), got {' '.join(reading)}") from None
    pods = p1 - p0 if p0 is not None and p1 is not None else None
    nics = n1 - n0 if n0 is not None and n1 is not None else None
    return {"ingress_pods_bytes": pods, "nic_bytes": nics, "ingress_share": per(pods, nics)}


def nic_share_line(n):
    """An ingress you run's share of its nodes' NIC traffic."""
    if n["nic_bytes"] is None:
        return f"{'nic share':<14}not known: no node-exporter counters of its nodes' NIC in its Prometheus in both reads (NODE_NIC names the devices)"
    if n["ingress_pods_bytes"] is None:
        return (f"{'nic share':<14}its nodes' NIC carried {n['nic_bytes'] / 1e6:,.1f} MB; the ingress's pods' own not known "
                "(no cAdvisor network counters of theirs: pods on the host's network, or replaced during the run)")
    share = "n/a" if n["ingress_share"] is None else f"{n['ingress_share'] * 100:.0f}%"
    return (f"{'nic share':<14}the ingress's pods sent and received {n['ingress_pods_bytes'] / 1e6:,.1f} MB, its nodes' NIC "
            f"carried {n['nic_bytes'] / 1e6:,.1f} MB: {share}" + (" (above 100%: part of theirs stayed on the node)"
                                                                   if (n["ingress_share"] or 0) > 1 else " (the rest: its neighbours')"))


def throttling_line(c):
    """An ingress you run's throttling line, from its Prometheus's cAdvisor counters."""
    t = c["ingress_throttling"]
    if t is None:
        return (f"{'throttling':<14}no CFS period counters of the ingress's containers in its Prometheus "
                "(no CPU quota, nothing to throttle; or cAdvisor's series of them are dropped)")
    if t["periods"] is None:
        return f"{'throttling':<14}not counted: one of the two reads found no CFS period counters (its pods replaced during the run)"
    ratio = "n/a" if t["throttled_ratio"] is None else f"{t['throttled_ratio'] * 100:.0f}%"
    return (f"{'throttling':<14}the ingress throttled in {t['throttled_periods']:,} of its {t['periods']:,} CFS periods ({ratio}; "
            "its Prometheus's cAdvisor counters, summed over its pods' containers)")


def segments(run_dir, testid, variant, platform, before, after, aborted=None, signal=None, ingress_cpu=None, throttling=None, nic=None):
    # A segment's own verdict stands, except on latency when the merged percentiles judge it.
    def segment_ok(r):
        return r["passed"] or bool(merged) and all(
            t["ok"] or (t["metric"] in LATENCY_METRICS and LATENCY_THRESHOLD.match(t["expr"])) for t in r.get("thresholds", []))

    """distributed.sh's run: RUN_DIR/segment-<i>.json (each pod's k6 summary) summed, with the
    ingress's count -> RUN_DIR/summary.json; returns the lines it prints. ABORTED: the
    seconds after which SIGNAL cut the run short (never passed then)."""
    files = sorted(run_dir.glob("segment-*.json"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
    if not files:
        raise Bad(f"{run_dir} has no segment-<i>.json")
    # An ingress you run whose counter read nothing after the load (its pods were replaced: a
    # rollout under load) has no count; the run stands without one. Ours always has one.
    uncounted = variant == "existing" and bool(before) and not after
    if not (before and after) and not uncounted:
        raise Bad(f"no stub_status from the ingress of {variant}: the request count cannot be checked (results in {run_dir}/)")
    full = [k6_summary(f) for f in files]
    results = [f["result"] for f in full]
    requests = None if uncounted else served(before, after)[0]
    # Percentiles of all the segments' requests together, from the native engine's histograms
    # (each within their relative error); the JS path's segments have none to merge.
    hists = [r.get("latency_histogram") for r in results]
    merged = percentiles(hists) if all(hists) else None
    thresholds = run_thresholds(results, merged)
    s = {"testid": testid, "variant": variant, "platform": platform, "segments": len(results),
         "requests": sum(r["requests"] for r in results), "rps": sum(r["rps"] for r in results),
         "errors": sum(r["errors"] for r in results),
         **(merged or {}),
         "latency": ({"merged": True, "relative_error": max(h["relative_error"] for h in hists),
                      "source": "the segments' native-engine histograms, merged"} if merged else
                     {"merged": False, "source": "none: ENGINE=js segments carry no mergeable histogram; each segment judged its own latency"}),
         "thresholds": thresholds, "passed": all(t["ok"] for t in thresholds) and all(map(segment_ok, results)),
         "per_segment": [{"requests": r["requests"], "rps": r["rps"], "connections": r["connections"],
                          "p50_ms": r.get("p50_ms"), "p95_ms": r.get("p95_ms"), "p99_ms": r.get("p99_ms")} for r in results],
         "server": {"requests": requests}}
    verdict = run_verdict([f.get("verdict") for f in full])
    if verdict:
        s["verdict"] = verdict
    s["server"]["client_over_server"] = per(s["requests"], requests)
    if ingress_cpu:
        gbit = sum(r.get("gbit_per_s") or 0 for r in results)
        s["cpu"] = prometheus_cpu(ingress_cpu, dict(results[0], gbit_per_s=gbit), requests, throttling)
    if nic:
        s["network"] = nic_share(nic)
    if aborted is not None:
        s["aborted"], s["passed"] = True, False
        s["interrupted"] = {"signal": signal or "a signal", "after_seconds": aborted}
    write(run_dir / "summary.json", s)
    # The segments' timelines, when the pods printed them (IB_TIMELINE): one, as a host run's.
    if timelines := sorted(run_dir.glob("timeline-*.json")):
        write(run_dir / "timeline.json", merged_timeline([json.loads(t.read_text()) for t in timelines]))
    parts = " + ".join(str(jq_round(p["rps"])) for p in s["per_segment"])
    lines = [f"k6 {s['segments']} segments → {jq_round(s['rps'])} req/s in all ({parts}), {s['requests']} requests, "
             f"errors {s['errors']}"]
    if merged:
        each = ", ".join(f"{p['p99_ms']:.2f}" for p in s["per_segment"])
        lines.append(f"latency       all segments: p50 {merged['p50_ms']:.2f} ms  p95 {merged['p95_ms']:.2f} ms  "
                     f"p99 {merged['p99_ms']:.2f} ms (merged histograms, ±{s['latency']['relative_error'] * 100:.1f}%); "
                     f"per segment p99 {each} ms")
    if aborted is not None:
        lines.append(f"{'result':<14}ABORTED (interrupted after {aborted} s by {s['interrupted']['signal']})")
    if verdict:
        lines.append(f"verdict       {verdict['text']} (segments: {', '.join(map(str, verdict['segments']))})")
    if s.get("cpu"):
        c, f = s["cpu"], s["cpu"]["per_ingress_cpu"]
        lines.append(f"{'cpu':<14}ingress {'n/a' if c['ingress_cpu_seconds'] is None else format(c['ingress_cpu_seconds'], '.2f')} CPU-seconds"
                     f" of {'n/a' if c['ingress_cpus'] is None else format(c['ingress_cpus'], 'g')} CPUs: "
                     f"{'n/a' if f['value'] is None else format(f['value'], ',.0f' if f['unit'] != 'Gbit/s' else '.2f')} {f['unit']} per ingress CPU"
                     " (its Prometheus's counters)")
        if "ingress_throttling" in c:
            lines.append(throttling_line(c))
    if s.get("network"):
        lines.append(nic_share_line(s["network"]))
    if uncounted:
        return lines + ["server        not counted: the ingress's counter read nothing after the load (the pods it was read on, "
                        "found before the load, were replaced)"]
    return lines + [f"server        {requests} requests counted by {SOURCES[after[2]][2]} "
                    f"(client/server {agreement(s['server']['client_over_server'])})"]
