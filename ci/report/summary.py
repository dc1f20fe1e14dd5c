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
from decimal import ROUND_HALF_UP, Decimal

from .fmt import num
from .run import Bad, read_json


def stub_reading(text):
    """`accepts requests` (ci/lib.sh stub_counts) -> (accepts, requests); empty -> None."""
    if not text.strip():
        return None
    if not re.fullmatch(r"\s*\d+\s+\d+\s*", text):
        raise Bad(f"a stub_status reading is 'ACCEPTS REQUESTS', got '{text}'")
    accepts, requests = map(int, text.split())
    return accepts, requests


def served(before, after):
    """(requests, connections accepted) between two stub_status readings. The second read is
    itself a request on a new connection (the first one is inside `before`): minus one each."""
    return after[1] - before[1] - 1, after[0] - before[0] - 1


def per(a, b):
    """a / b, or None (JSON null) when there is nothing to divide by."""
    return a / b if num(a) and num(b) and b > 0 else None


def client(result, wall, user, sys_, cpus):
    """The load generator's own CPU: user + system of k6 over the wall time and its CPUs."""
    cpu = user + sys_
    requests = result.get("requests")
    return {"cpu_seconds": cpu, "wall_seconds": wall, "cpus": cpus,
            "cpu_us_per_request": per(cpu * 1e6, requests), "utilization": per(cpu, wall * cpus)}


def server(client_requests, before, after):
    requests, accepted = served(before, after)
    return {"source": "nginx stub_status", "requests": requests, "connections_accepted": accepted,
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


def assemble(run_dir, times, cpus, before, after, aborted=None, signal=None):
    """bench.sh's run: RUN_DIR/summary.json (k6's) + .client + .server (when both readings
    exist) -> RUN_DIR/summary.json; the client and server lines, also added to summary.txt.
    ABORTED: the seconds after which SIGNAL cut the run short (mark_aborted)."""
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
                     f"by nginx (client/server {agreement(srv['client_over_server'])})")
    else:
        lines.append("server        no server-side count (no stub_status for this target)")
    write(path, s)
    with (run_dir / "summary.txt").open("a") as txt:
        txt.write("".join(f"{line}\n" for line in lines))
    return lines


def segments(run_dir, testid, variant, platform, before, after, aborted=None, signal=None):
    """distributed.sh's run: RUN_DIR/segment-<i>.json (each pod's k6 summary) summed, with the
    ingress's count -> RUN_DIR/summary.json; returns the lines it prints. ABORTED: the
    seconds after which SIGNAL cut the run short (never passed then)."""
    files = sorted(run_dir.glob("segment-*.json"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
    if not files:
        raise Bad(f"{run_dir} has no segment-<i>.json")
    if not (before and after):
        raise Bad(f"no stub_status from the ingress of {variant}: the request count cannot be checked (results in {run_dir}/)")
    results = [k6_summary(f)["result"] for f in files]
    requests, _ = served(before, after)
    s = {"testid": testid, "variant": variant, "platform": platform, "segments": len(results),
         "requests": sum(r["requests"] for r in results), "rps": sum(r["rps"] for r in results),
         "errors": sum(r["errors"] for r in results), "passed": all(r["passed"] for r in results),
         "per_segment": [{"requests": r["requests"], "rps": r["rps"], "connections": r["connections"]} for r in results],
         "server": {"requests": requests}}
    s["server"]["client_over_server"] = per(s["requests"], requests)
    if aborted is not None:
        s["aborted"], s["passed"] = True, False
        s["interrupted"] = {"signal": signal or "a signal", "after_seconds": aborted}
    write(run_dir / "summary.json", s)
    parts = " + ".join(str(jq_round(p["rps"])) for p in s["per_segment"])
    lines = [f"k6 {s['segments']} segments → {jq_round(s['rps'])} req/s in all ({parts}), {s['requests']} requests, "
             f"errors {s['errors']}"]
    if aborted is not None:
        lines.append(f"{'result':<14}ABORTED (interrupted after {aborted} s by {s['interrupted']['signal']})")
    return lines + [f"server        {requests} requests counted by nginx "
                    f"(client/server {agreement(s['server']['client_over_server'])})"]
