"""The rounds of `./task bench:evidence` (bench/run/evidence.py): a matrix run through the matrix
runner's own stopping rule, every other kind a round at a time (bench:capacity, bench:change,
bench.sh, calibrate.sh) until its claim decides, and the interval each kind's figures make."""
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs)
from evidence_claims import FIRST, WORDS, figure_text, from_seed, verdict  # noqa: E402
from report.relations import round_ratios  # noqa: E402
from report.stats import binomial_interval, mean_interval, poisson_ratio_interval, ratio_interval  # noqa: E402


class Failed(Exception):
    """A run of a round did not finish: its one-line reason."""


def results_root(env):
    return Path(env.get("RESULTS_ROOT") or mx.ROOT / "results").resolve()


def run_matrix(run, prepared, env, stamp):
    """A matrix run: the matrix runner's rounds, until every relation decides at the run's level
    (its own stopping rule), within the budget and the most rounds."""
    m, e, path = prepared
    e["RESULTS_ROOT"] = str(results_root(env) / f"evidence-{stamp}")
    rc, doc = mx.run_matrix(m, e, run["max_rounds"], f"{run['name']}-{path.stem}", path.read_text())
    out = {"dir": doc["dir"], "stopped": doc.get("stopped"), "noise": doc.get("noise"), "claims": {}}
    by = {r["title"]: r for r in doc["ratios"]}
    for c in run["claims"]:
        r = by[c["relation"]]
        n = max((x["round"] for x in doc["runs"] if x["case"] in (r["of"], r["to"])), default=0)
        words = WORDS[r.get("holds", "undecided")] if r["interval"] else "undecided"
        out["claims"][c["id"]] = {
            "expect": from_seed(r["seed"]), "interval": r["interval"], "verdict": words, "rounds": n,
            "decided_at": r.get("decided_at"), "not_here": r.get("not_here"), "judged_on": r.get("judged_on"),
            "figure": "ratio", "of": r["of"], "to": r["to"], "round_ratios": round_ratios(r, doc["runs"]),
            "sides": {side: [x["values"].get(r["column"]) for x in doc["runs"] if x["case"] == r[side] and x["status"] in ("passed", "crossed")]
                      for side in ("of", "to") if r[side]}}
    failed = [x for x in doc["runs"] if x["status"] == "failed"]
    if failed:
        out["failed"] = f"{len(failed)} of {len(doc['runs'])} runs failed: {failed[0]['case']} round {failed[0].get('round')}: {failed[0]['reason']}"
    return out


def script_run(cmd, e, log):
    """One run of a runner (bench:capacity, bench:change, bench.sh) with environment E, its
    output in LOG; its new results directory under E's RESULTS_ROOT; Failed on a run that
    failed otherwise than by a crossed threshold."""
    root = Path(e["RESULTS_ROOT"])
    dirs = lambda: {d for d in root.iterdir() if d.is_dir()} if root.is_dir() else set()  # noqa: E731
    before = dirs()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, cwd=mx.ROOT, env=e, stdout=f, stderr=subprocess.STDOUT).returncode
    new = sorted(dirs() - before)
    if rc not in (0, 99) or len(new) != 1:
        raise Failed(f"{' '.join(cmd[-2:])} exited {rc}: {mx.error_line(Path(log).read_text())}")
    return new[0], rc


def capacity_round(run, e, where, n):
    d, _ = script_run([sys.executable, str(mx.ROOT / "bench/run/capacity.py")], e, where / "logs" / f"capacity-r{n}.log")
    doc = json.loads((d / "capacity.json").read_text())
    if not doc.get("capacity") or not doc.get("closed_rps"):
        raise Failed(f"round {n}: no capacity found ({doc.get('why')})")
    return {"value": doc["capacity"] / doc["closed_rps"], "capacity": doc["capacity"], "closed_rps": doc["closed_rps"], "dir": str(d)}


def change_round(run, sides, where, n):
    """Both sides' change, the order alternated by round: each side's STATUS responses and
    requests during the change (the change's window, bench/report/change.py)."""
    got = {}
    for side in (("of", "to") if n % 2 else ("to", "of")):
        e = dict(sides[side], CHANGE=run["change"])
        d, _ = script_run([sys.executable, str(mx.ROOT / "bench/run/change.py")], e, where / "logs" / f"change-{side}-r{n}.log")
        doc = json.loads(next(d.glob("change/change.json")).read_text())
        a = doc["analysis"]
        window = a["during"] or a["run"]
        got[side] = {"events": window["statuses"].get(run["status"], 0), "requests": window["requests"],
                     "errors": window["errors"], "by_kind": window["by_kind"], "dir": str(d)}
    return got


def control_round(run, e, where, n):
    """bench:change CHANGE=none on OF: the load a change would get, and nothing changed: its
    failed requests (the open model's sends never made are no requests) and requests."""
    d, _ = script_run([sys.executable, str(mx.ROOT / "bench/run/change.py")], dict(e, CHANGE="none"),
                      where / "logs" / f"control-r{n}.log")
    a = json.loads(next(d.glob("change/change.json")).read_text())["analysis"]
    dropped = a["run"]["by_kind"].get("dropped", 0)
    return {"events": a["run"]["errors"] - dropped, "requests": a["run"]["requests"] - dropped,
            "by_kind": a["run"]["by_kind"], "disruption": a["disruption"], "dir": str(d)}


def signal_round(run, e, where, n):
    d, rc = script_run(["bash", str(mx.ROOT / "bench/run/bench.sh"), run["scenario"]], e, where / "logs" / f"signal-r{n}.log")
    summary = json.loads((d / "summary.json").read_text())
    v = mx.lookup(summary, run["value"])
    if not mx.number(v):
        raise Failed(f"round {n}: {run['value']} has no value in {d}/summary.json")
    return {"value": v, "verdict": (summary.get("verdict") or {}).get("limit"), "exit": rc, "dir": str(d)}


def calibration_settings(run):
    """One round of calibrate.sh: wrk and CLIENT on CASE, each alone on the same client CPU, no
    long runs."""
    return {"CASES": run["case"], "CLIENTS": f"wrk {run['client']}", "ROUNDS": "1", "LONG": "0"}


def calibration_figure(runs, case, client):
    """A calibrate.sh round's runs (its runs.jsonl): CLIENT's CPU per request over the
    reference client's on CASE: wrk's, h2load's on HTTP/2 (calibrate.sh runs it in wrk's place)."""
    by = {r["client"]: r for r in runs if r["case"] == case}
    ref = "h2load" if case.startswith("h2") else "wrk"
    k6, wrk = by.get(f"k6 {client}"), by.get(ref)
    if not k6 or not wrk:
        raise Failed(f"calibrate.sh measured no {ref if k6 else 'k6 ' + client} run of {case}")
    return {"value": k6["cpu_us_per_request"] / wrk["cpu_us_per_request"], "cpu_us_per_request": k6["cpu_us_per_request"],
            "wrk_cpu_us_per_request": wrk["cpu_us_per_request"], "rps": k6["rps"], "wrk_rps": wrk["rps"]}


def calibration_round(run, e, where, n):
    out = where / f"calibrate-r{n}"
    log = where / "logs" / f"calibrate-r{n}.log"
    with open(log, "w") as f:
        rc = subprocess.run(["bash", str(mx.ROOT / "bench/run/calibrate.sh")], cwd=mx.ROOT, env=dict(e, RESULTS_ROOT=str(out)),
                            stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0 or not (out / "runs.jsonl").is_file():
        raise Failed(f"calibrate.sh exited {rc}: {mx.error_line(log.read_text())}")
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    return dict(calibration_figure(runs, run["case"], run["client"]), dir=str(out))


def interval_of(run, rounds, level):
    if run["kind"] == "change":
        k = {s: sum(r[s]["events"] for r in rounds) for s in ("of", "to")}
        n = {s: sum(r[s]["requests"] for r in rounds) for s in ("of", "to")}
        return poisson_ratio_interval(k["of"], n["of"], k["to"], n["to"], level)
    if run["kind"] == "control":
        return binomial_interval(sum(r["events"] for r in rounds), sum(r["requests"] for r in rounds), level)
    values = [r["value"] for r in rounds]
    # A signal is held to a bound on its own scale; a capacity's ratio to the closed model, or a
    # client's CPU per request to wrk's in the same round, is noise that multiplies: its
    # geometric mean and a t interval on the logs (the other side of ratio_interval a constant
    # 1, which counts as exact).
    return mean_interval(values, level) if run["kind"] == "signal" else ratio_interval(values, [1.0], level)


def run_rounds(run, prepared, env, stamp):
    """A run of another kind: a round at a time, until its claim decides at the run's level,
    or the next round would end past the budget, or the most rounds."""
    [claim] = run["claims"]
    where = results_root(env) / f"evidence-{stamp}" / run["name"]
    (where / "logs").mkdir(parents=True, exist_ok=True)
    if run["kind"] == "change":
        prepared = {s: dict(e, RESULTS_ROOT=str(where)) for s, e in prepared.items()}
    else:
        prepared = dict(prepared, RESULTS_ROOT=str(where))
    one = {"capacity": capacity_round, "change": change_round, "control": control_round, "signal": signal_round,
           "calibration": calibration_round}[run["kind"]]
    rounds, walls, stopped, failed, iv, says = [], [], None, None, None, "undecided"
    if run["kind"] not in ("change", "calibration"):  # (calibrate.sh brings up its own lab)
        # A 1 s run first, not measured: the platform, the variant and its monitoring up (a first
        # monitoring up builds images for minutes) before the budget's clock starts.
        mx.say("evidence", f"{run['name']}: a 1 s run first, to bring up what the rounds run on")
        try:
            script_run(["bash", str(mx.ROOT / "bench/run/bench.sh"), run.get("scenario", "rps")],
                       dict(prepared, DURATION="1s", RATE=""), where / "logs" / "warm-up.log")
        except Failed as e:
            failed = f"the warm-up run: {e}"
    budget, started = mx.duration_s(str(run["budget"])), time.monotonic()
    for n in range(1, run["max_rounds"] + 1):
        if failed:
            break
        t0 = time.monotonic()
        try:
            rounds.append(one(run, prepared, where, n))
        except Failed as e:
            failed = str(e)
            break
        walls.append(time.monotonic() - t0)
        iv = interval_of(run, rounds, run["level"])
        says = verdict(iv, claim["expect"], n, FIRST[run["kind"]])
        mx.say("evidence", f"{run['name']} round {n}: {figure_text(iv)} -> {says}")
        elapsed = time.monotonic() - started
        if says != "undecided":
            stopped = f"decided ({elapsed / 60:.1f} min)"
            break
        # The last round's time: the next one's estimate.
        if elapsed + walls[-1] > budget:
            stopped = f"the budget ({run['budget']}) would end in the next round ({elapsed / 60:.1f} min so far)"
            break
    else:
        stopped = f"{run['max_rounds']} rounds, the most allowed"
    out = {"dir": str(where), "stopped": stopped, "claims": {claim["id"]: {
        "expect": claim["expect"], "interval": iv, "verdict": says, "rounds": len(rounds),
        "figure": {"capacity": lambda: "capacity / closed model", "change": lambda: f"{run['status']}s per request, of / to",
                   "control": lambda: "failed requests per request, no change",
                   "signal": lambda: run["value"],
                   "calibration": lambda: f"client CPU per request, k6 {run.get('client')} / wrk ({run.get('case')})"}[run["kind"]](),
        "round_values": rounds}}}
    if failed:
        out["failed"] = failed
    return out
