"""bench/run/capacity.py: `./task bench:capacity`, the highest rate the target serves within an SLO.

A closed-model run (CONNECTIONS, as `wrk -c N`) first measures the rate the target reaches
when pushed; then open-model runs (RATE, paced by the native engine: xk6/pacing.go) at a
share of it climb a ladder (70 %, 85 %, 100 %, 110 %, then 15 % more a step) until one does not hold, and bisect
between the highest rate that held and the lowest that did not until they are within
CAPACITY_PRECISION of each other. A rate holds when its run passes every threshold with
P99_MS set to SLO_P99_MS: p99 latency from each request's due time (coordinated omission
corrected), no errors, nothing dropped, the client on time, and, with monitoring, a valid
verdict. A rate that fails on the client's own limits (its CPU, its late sends) ends the
search: above it the number would be the client's.

Each step is `bash bench/run/bench.sh SCENARIO` (bench/run/matrix.py's run_one: the same checks,
logs and reading of a run as every matrix), DURATION long, into
RESULTS_ROOT/capacity-<scenario>-<UTC time>/. Written there: capacity.json (every step),
report.html and report.md (the steps' table and the knee chart: latency against offered
load, the capacity marked), knee.png. Everything is checked before the first run: bad input
is one line `error: ...`, exit 1, nothing started.
Exit code: 0 a capacity found; 99 no rate held the SLO, or the client was the limit; 1 a run
failed otherwise, bad input, or an interrupt.
"""
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix  # noqa: E402  (its checks and its runs: one place for what a run is)
from matrix import Bad, say  # noqa: E402
from report.charts import pyplot  # noqa: E402
from report.doc import Doc, Link, write_doc  # noqa: E402
from report.fmt import f_int, f_ms, num  # noqa: E402

LADDER = (0.70, 0.85, 1.00, 1.10)  # shares of the closed model's rate, climbed until one fails
DOWN = 0.5  # below the ladder's first rung: halved, at most twice, before giving up
# Above its last rung: 15 % more a step until one fails. A closed model with few connections is
# latency-bound and can under-read (20 connections at a 3.1 ms p50: 6.7k req/s, where the open
# model then held 7.35k), so its rate is where the search starts, not its ceiling.
UP = 1.15
MAX_STEPS = 14  # open-model runs, ladder and bisection together
# Thresholds that say the client, not the target, was the limit (k6/lib/options.js).
CLIENT_LIMITS = ("bench_sends_client_late", "bench_loadgen_cpu_utilization")
COLUMNS = [{"key": k, "kind": "value", "title": "req/s" if k == "rps" else k, "format": ",.0f", "value": v} for k, v in (
    ("rps", "result.rps"), ("requests", "result.requests"), ("p50_ms", "result.p50_ms"), ("p99_ms", "result.p99_ms"),
    ("service_p99_ms", "result.service_p99_ms"), ("late", "result.sends_late"), ("client_late", "result.sends_client_late"),
    ("dropped", "result.sends_dropped"), ("errors", "result.errors"), ("cpu_us", "client.cpu_us_per_request"),
    ("server_requests", "server.requests"), ("limit", "verdict.limit"))]


def checked(env, reg):
    """The search's own settings, by the registry's rules, and the case every step runs."""
    for name, why in (("RATE", "it chooses the rate of each step"), ("P99_MS", "each step's p99 limit is SLO_P99_MS")):
        if env.get(name):
            raise Bad(f"bench:capacity: unset {name}: {why}")
    matrix.check_values([{"where": "", "names": ["SLO_P99_MS", "CAPACITY_PRECISION", "SCENARIO"], "env": env}])
    slo = float(env.get("SLO_P99_MS") or reg["SLO_P99_MS"]["default"])
    precision = float(env.get("CAPACITY_PRECISION") or reg["CAPACITY_PRECISION"]["default"])
    if slo <= 0:
        raise Bad(f"SLO_P99_MS must be more than 0 ms, got '{env.get('SLO_P99_MS')}'")
    if not 0.001 <= precision <= 0.5:
        raise Bad(f"CAPACITY_PRECISION must be from 0.001 to 0.5 (a share of the rate), got '{env.get('CAPACITY_PRECISION')}'")
    scenario = env.get("SCENARIO") or reg["SCENARIO"]["default"]
    m = {"file": "bench:capacity", "title": "capacity", "rounds": 1, "defaults": {}, "platforms": None, "ratios": [], "columns": COLUMNS,
         "cases": [{"name": "capacity", "scenario": scenario, "platform": None, "variant": None, "settings": {},
                    "group": None, "baseline": None}]}
    matrix.resolve(m, env, reg)  # the settings given, the platform's checks, k6's: as bench.sh does
    return m, slo, precision


def limited_by_client(run):
    return any(t.split()[0] in CLIENT_LIMITS for t in run["crossed"])


def search(m, slo, precision, mdir, stamp):
    """The probe, then the ladder and the bisection; returns (probe, steps, capacity, why)."""
    c = m["cases"][0]
    say("capacity", f"closed model: {c['env'].get('CONNECTIONS') or 'default'} connections, {c['scenario']} on {c['platform']} ({c['variant']})")
    probe = matrix.run_one(c, {}, f"closed-{stamp}", mdir, m)
    say("capacity", f"closed model: {matrix.outcome(probe, COLUMNS[0])}")
    if probe["status"] == "failed":
        raise RuntimeError(f"the closed-model run failed: {probe['reason']}")
    if limited_by_client(probe):
        return probe, [], None, "the client saturated in the closed model: its rate is the client's, not the target's (more client CPUs, or ENGINE=native)"
    top = probe["values"]["rps"]
    steps, lo, hi = [], None, None

    def step(rate):
        run = matrix.run_one(c, {"RATE": str(rate), "P99_MS": f"{slo:g}"}, f"rate-{rate}-{stamp}", mdir, m)
        run["rate"] = rate
        steps.append(run)
        held = run["status"] == "passed"
        say("capacity", f"{f_int(rate)} req/s asked ({rate / top:.0%} of the closed model's): "
                        f"p99 {f_ms(run['values'].get('p99_ms'))}, {'held' if held else matrix.outcome(run)}")
        if run["status"] == "failed":
            raise RuntimeError(f"the run at {rate} req/s failed: {run['reason']}")
        return held

    for share in LADDER:
        rate = round(top * share)
        if step(rate):
            lo = rate
            continue
        hi = rate
        break
    while lo is not None and hi is None and len(steps) < MAX_STEPS and not limited_by_client(steps[-1]):
        rate = round(steps[-1]["rate"] * UP)
        if step(rate):
            lo = rate
        else:
            hi = rate
    while lo is None and len(steps) < 3:  # even the ladder's first rung did not hold: lower
        if limited_by_client(steps[-1]):
            break
        rate = round(steps[-1]["rate"] * DOWN)
        if step(rate):
            lo = rate
        else:
            hi = rate
    while lo is not None and hi is not None and hi - lo > precision * hi and len(steps) < MAX_STEPS:
        if limited_by_client(steps[-1]):
            break
        mid = round((lo + hi) / 2)
        if step(mid):
            lo = mid
        else:
            hi = mid
    if steps and steps[-1]["status"] == "crossed" and limited_by_client(steps[-1]):
        return probe, steps, None, (f"the client could not send {f_int(steps[-1]['rate'])} req/s on time "
                                    f"({'; '.join(steps[-1]['crossed'])}): the search stopped where the client's limit began")
    if lo is None:
        return probe, steps, None, f"no rate held p99 < {slo:g} ms, down to {f_int(steps[-1]['rate'])} req/s"
    if hi is None:
        return probe, steps, lo, (f"every rate held, up to {f_int(lo)} req/s ({lo / top:.0%} of the closed model's) in {MAX_STEPS} "
                                  "steps: a lower bound")
    return probe, steps, lo, f"between {f_int(lo)} (held) and {f_int(hi)} req/s (did not)"


def draw_knee(probe, steps, capacity, slo, path):
    """Latency against offered load, one point per step, the SLO and the capacity marked;
    under it, the rate achieved against the rate asked."""
    plt = pyplot()
    pts = sorted(steps, key=lambda s: s["rate"])
    x = [s["rate"] for s in pts]
    fig, (lat, got) = plt.subplots(2, 1, sharex=True, figsize=(10, 7.5), dpi=100, layout="constrained",
                                   gridspec_kw={"height_ratios": [2, 1]})
    for key, text, color in (("p99_ms", "p99 from the due time", "#d62728"), ("service_p99_ms", "p99 service time (from the send)", "#ff7f0e"),
                             ("p50_ms", "p50", "#2ca02c")):
        ys = [s["values"].get(key) for s in pts]
        if any(num(y) for y in ys):
            lat.plot([a for a, y in zip(x, ys) if num(y)], [y for y in ys if num(y)], marker="o", color=color, label=text)
    for s in pts:  # held or not, as the search judged it
        y = s["values"].get("p99_ms")
        if num(y):
            lat.plot(s["rate"], y, marker="o", ms=11, mfc="none", mec="#2ca02c" if s["status"] == "passed" else "#d62728")
    lat.axhline(slo, color="#555", ls="--", lw=1, label=f"SLO: p99 < {slo:g} ms")
    closed = probe["values"].get("rps")
    for ax in (lat, got):
        if capacity:
            ax.axvline(capacity, color="#2ca02c", ls=":", lw=1.5, label=f"capacity {f_int(capacity)} req/s" if ax is lat else None)
        if num(closed):
            ax.axvline(closed, color="#1f77b4", ls=":", lw=1, label=f"closed model {f_int(closed)} req/s" if ax is lat else None)
        ax.grid(alpha=0.3)
    lat.set_yscale("log")
    lat.set_ylabel("latency (ms, log)")
    lat.legend(fontsize=8, loc="upper left")
    got.plot(x, x, color="#999", ls="--", lw=1, label="asked")
    got.plot(x, [s["values"].get("rps") for s in pts], marker="o", color="#1f77b4", label="achieved (k6)")
    got.set_ylabel("req/s")
    got.set_xlabel("offered load (req/s asked)")
    got.legend(fontsize=8, loc="upper left")
    fig.savefig(path)
    plt.close(fig)


def report(doc_data, mdir):
    d, c = doc_data, doc_data["case"]
    doc = Doc(f"Capacity: {c['scenario']} on {c['platform']}, {c['variant']}",
              f"{d['started']}; SLO p99 < {d['slo_p99_ms']:g} ms from the due time; steps of {c['env'].get('DURATION') or matrix.default_of('DURATION')}; "
              f"precision {d['precision']:.1%}")
    doc.add("cards", [("capacity (req/s)", f_int(d["capacity"])), ("closed model (req/s)", f_int(d["closed_rps"])),
                      ("capacity / closed", f"{d['capacity'] / d['closed_rps']:.0%}" if d["capacity"] and d["closed_rps"] else "–")])
    doc.add("p", d["why"], cls="pass" if d["exit_code"] == 0 else "fail")
    if (mdir / "knee.png").exists():
        doc.add("img", "knee.png", "latency against offered load", "Each open-model step: p99 from the due time (circled green: held, red: did not), "
                "the service time's p99 and the p50; below, the rate achieved against the rate asked.")
    doc.add("h2", "Steps, in the order they ran")
    rows = []
    for s in [d["closed"]] + d["steps"]:
        v = s["values"]
        rows.append([f_int(s.get("rate")) if s.get("rate") else "closed model", f_int(v.get("rps")), f_ms(v.get("p50_ms")),
                     f_ms(v.get("p99_ms")), f_ms(v.get("service_p99_ms")), f_int(v.get("late")), f_int(v.get("dropped")),
                     f_int(v.get("errors")), "held" if s["status"] == "passed" else "; ".join(s["crossed"]) or s["status"],
                     Link(Path(s["dir"]).name, f"{Path(s['dir']).name}/report.html") if s["dir"] else "–"])
    doc.add("table", ["asked (req/s)", "achieved", "p50", "p99 (from due)", "p99 service", "late", "dropped", "errors", "judged", "run"], rows)
    write_doc(doc, mdir)
    return doc


def main():
    env = dict(os.environ)
    reg = matrix.registry()
    m, slo, precision = checked(env, reg)
    c = m["cases"][0]
    if os.geteuid() != 0 and matrix.traits(c["platform"])["root"] == "1":
        raise Bad("bench:capacity needs root on the lab and the local cluster: run it as root")
    mdir, stamp = matrix.new_results_dir(env, f"capacity-{c['scenario']}")
    (mdir / "logs").mkdir()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    say("capacity", f"SLO p99 < {slo:g} ms, precision {precision:.1%} -> {mdir}/")
    failure = None
    try:
        probe, steps, capacity, why = search(m, slo, precision, mdir, stamp)
    except RuntimeError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted"
    if failure:
        print(f"error: bench:capacity: {failure} (logs: {mdir}/logs/)", file=sys.stderr)
        return 1
    rc = 0 if capacity else 99
    doc = {"scenario": c["scenario"], "platform": c["platform"], "variant": c["variant"], "started": started,
           "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "slo_p99_ms": slo, "precision": precision,
           "closed_rps": probe["values"].get("rps"), "capacity": capacity, "why": why, "exit_code": rc,
           "closed": probe, "steps": steps, "case": {k: c[k] for k in ("scenario", "platform", "variant", "env")}}
    doc["case"]["env"] = {k: v for k, v in c["env"].items() if k in reg}  # the settings, not the whole environment
    if steps:
        draw_knee(probe, steps, capacity, slo, mdir / "knee.png")
    (mdir / "capacity.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(report(doc, mdir).markdown().split("\n## ")[1].split("\n", 1)[1].strip() + "\n", flush=True)
    ratio = f" ({capacity / doc['closed_rps']:.0%} of the closed model's {f_int(doc['closed_rps'])})" if capacity and doc["closed_rps"] else ""
    say("capacity", f"{f_int(capacity) + ' req/s' if capacity else 'none'} held p99 < {slo:g} ms{ratio}: {why}")
    say("results", f"{mdir}/ (report: {mdir}/report.html)")
    return rc


if __name__ == "__main__":
    matrix.entry(main)
