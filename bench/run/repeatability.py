"""bench:repeatability: does `./task bench:rps` give the same answer run after run on this
machine? RUNS (5) times, alternated: the quick start with the local cluster taken down before it
(a cold up), again with the cluster left up, and on the lab (the cluster down). Before each, a
control the tool has no part in: wrk against the lab's LB for 5 s, one core each, so that a
noisy hour shows as the control's spread, not as a pass or a fail of the tool. Writes
docs/results/<date>-repeatability/ (result.json, result.md: each run's share, rounds, median
and interval, throttling, steal and p99; per mode the spread of the runs' answers beside the
control's; each run's rounds.json and summary.txt; the rounds' own directories under
results/), its row in docs/results/README.md when the set is there, and prints the table.
Leaves the machine as it found it: both platforms down.

  bench/run/repeatability.py [--runs N] [--out DIR]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import publish  # the results' index, as every published set has it

ROOT = Path(__file__).resolve().parents[2]
MODES = ("cluster-down", "cluster-up", "lab")
BOUNDS = {"cv_percent": 5.0, "rps_within_percent": 10.0}  # the issue's: one command, one answer
WRK = ["ip", "netns", "exec", "ibench-client", "taskset", "-c", "0", "wrk", "-t1", "-c50", "-d5s",
       "-H", "Host: bench.ingress.test", "http://198.18.0.2/1kb.bin"]  # bench/platforms/lab.env


def sh(*args, log=None, env=None):
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if log:
        with open(log, "a") as f:
            # paths relative to the checkout: the log is committed with the result
            f.write(f"$ {' '.join(args)}\n{r.stdout}{r.stderr}exit {r.returncode}\n".replace(f"{ROOT}/", ""))
    return r


def control(log):
    """wrk's req/s against the lab's LB, holding the machine's load lock (bench/lib/k6.sh)."""
    r = sh("bash", "-c", '. bench/lib.sh && load_lock && exec "$@"', "-", *WRK, log=log)
    m = re.search(r"Requests/sec:\s+([\d.]+)", r.stdout)
    if r.returncode or not m or "Non-2xx" in r.stdout or "Socket errors" in r.stdout:
        sys.exit(f"error: the wrk control failed: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return float(m[1])


def quick_start(mode, i, out, log):
    """One `./task bench:rps` (its default rounds), its answer from rounds.json."""
    if mode == "cluster-down":
        sh("./task", "cluster:down", log=log)
    results = out / "runs" / f"{mode}-{i}"
    env = {"PLATFORM": "lab"} if mode == "lab" else {}
    t0 = time.monotonic()
    r = sh("./task", "bench:rps", f"RESULTS_ROOT={results}", env=env, log=log)
    wall = time.monotonic() - t0
    if mode == "lab":  # the lab's Prometheus would run beside the cluster's runs
        sh("./task", "monitoring:down", "PLATFORM=lab", log=log)
    docs = list(results.glob("*/rounds.json"))
    if len(docs) != 1:
        sys.exit(f"error: {mode} run {i} wrote no rounds.json (exit {r.returncode}): see {log}")
    doc = json.loads(docs[0].read_text())
    # The result set keeps each run's rounds.json and summary.txt; the rounds' own directories
    # (reports, k6's dashboards: megabytes) go to results/, which is not committed.
    keep = ROOT / "results" / out.name / results.name
    for d in [x for x in docs[0].parent.iterdir() if x.is_dir()]:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.move(str(d), keep / d.name)
    rounds = doc["rounds"]
    return {"mode": mode, "run": i, "exit": r.returncode, "wall_s": round(wall, 1), "dir": str(docs[0].parent.relative_to(out)),
            "counted": doc["counted"], "rounds": len(rounds), "limit": doc["limit"],
            "ingress_cpu": sorted({x["ingress_cpu"] for x in rounds if x["ingress_cpu"] is not None}),
            "rps": doc["headline"]["median"], "per_ingress_cpu": doc["per_ingress_cpu"]["median"],
            "interval": doc["per_ingress_cpu"]["interval"],
            "p99_ms": [x["p99_ms"] for x in rounds], "throttled_s": [x["throttled_seconds"] for x in rounds],
            "steal_cpus": [x["steal_cpus"] for x in rounds], "valid": [x["valid"] for x in rounds]}


def spread(values):
    values = [v for v in values if v]
    if len(values) < 2:
        return {"values": values}
    med = statistics.median(values)
    return {"values": values, "median": med, "cv_percent": statistics.stdev(values) / statistics.fmean(values) * 100,
            "max_from_median_percent": max(abs(v / med - 1) for v in values) * 100}


def summary(runs, controls):
    out = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        per_cpu, rps = spread([r["per_ingress_cpu"] for r in mine]), spread([r["rps"] for r in mine])
        ok = (per_cpu.get("cv_percent") is not None and per_cpu["cv_percent"] <= BOUNDS["cv_percent"]
              and rps.get("max_from_median_percent", 100) <= BOUNDS["rps_within_percent"]
              and all(all(r["valid"]) and r["counted"] == r["rounds"] for r in mine))
        out[mode] = {"per_ingress_cpu": per_cpu, "rps": rps, "control_rps": spread(controls[mode]),
                     "every_round_valid": all(all(r["valid"]) for r in mine), "within_bounds": ok}
    return out


def table(s):
    rows = ["| mode | runs' answers, req/s per ingress CPU | CV | req/s, farthest from their median | every round valid | control (wrk) CV | within the bounds |",
            "|---|---|---|---|---|---|---|"]
    for mode, m in s.items():
        p, r, c = m["per_ingress_cpu"], m["rps"], m["control_rps"]
        rows.append(f"| {mode} | {', '.join(f'{v:,.0f}' for v in p['values'])} | {p.get('cv_percent', 0):.1f} % | "
                    f"{r.get('max_from_median_percent', 0):.1f} % | {'yes' if m['every_round_valid'] else 'no'} | "
                    f"{c.get('cv_percent', 0):.1f} % | {'yes' if m['within_bounds'] else 'no'} |")
    return "\n".join(rows)


def headline(s):
    """The set's line in the results' index: per mode its spread, the control's and the verdict."""
    cv = lambda m, k: f"{s[m][k].get('cv_percent', 0):.1f} %"  # noqa: E731
    kept = [m for m in s if s[m]["within_bounds"]]
    return (f"the quick start {len(s[MODES[0]]['per_ingress_cpu']['values'])} times a mode: per-ingress-CPU CV "
            + ", ".join(f"{cv(m, 'per_ingress_cpu')} {m}" for m in s)
            + " (the wrk control's " + ", ".join(cv(m, "control_rps") for m in s) + "): "
            + ("within the bounds in every mode" if len(kept) == len(s)
               else f"within the bounds in {', '.join(kept) or 'no mode'}"))


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error of the suite
        sys.exit(f"error: {message}")


def main():
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.runs < 2:
        sys.exit("error: --runs must be at least 2: a spread needs two runs")
    day = datetime.datetime.now(datetime.timezone.utc)
    out = Path(a.out or ROOT / "docs/results" / f"{day:%Y-%m-%d}-repeatability")
    if out.exists():
        sys.exit(f"error: {out} exists already: results are never overwritten (--out another)")
    out.mkdir(parents=True)
    log = out / "log.txt"
    if sh("./task", "lab:up", log=log).returncode:
        sys.exit(f"error: the lab did not come up: see {log}")
    runs, controls = [], {m: [] for m in MODES}
    try:
        for i in range(1, a.runs + 1):
            for mode in MODES:
                if mode == "lab":
                    sh("./task", "cluster:down", log=log)
                controls[mode].append(control(log))
                runs.append({**quick_start(mode, i, out, log), "control_rps": controls[mode][-1]})
                r = runs[-1]
                print(f"{mode} {i}: {r['rps'] or 0:,.0f} req/s, {r['per_ingress_cpu'] or 0:,.0f} req/s per ingress CPU "
                      f"({r['counted']}/{r['rounds']} rounds), control {r['control_rps']:,.0f} req/s, {r['wall_s']:.0f} s",
                      file=sys.stderr)
    finally:
        sh("./task", "down", log=log)
    s = summary(runs, controls)
    rev = sh("git", "describe", "--always", "--dirty").stdout.strip()
    machine = {"cpus": os.cpu_count(), "kernel": os.uname().release}
    (out / "result.json").write_text(json.dumps({"date": day.isoformat(timespec="seconds"), "commit": rev, "machine": machine,
                                                 "bounds": BOUNDS, "summary": s, "runs": runs}, indent=1) + "\n")
    md = [f"# `./task bench:rps` run after run ({day:%Y-%m-%d})", "",
          f"Written by `bench/run/repeatability.py` at {rev} on {machine['cpus']} CPUs, kernel {machine['kernel']}. "
          f"{a.runs} runs of each mode, alternated; each run is the quick start's default rounds (3 of 10 s, "
          "their median); before each, wrk against the lab's LB (5 s, one core each) as a control. "
          f"Bounds: the runs' per-ingress-CPU answers within a CV of {BOUNDS['cv_percent']:g} %, their req/s within "
          f"± {BOUNDS['rps_within_percent']:g} % of their median, every round valid.", "", table(s), "",
          "Each run (result.json has every round's p99, throttling and steal):", "",
          "| mode | run | req/s | per ingress CPU | interval | share | rounds counted | wall | control |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        i = r["interval"]
        within = f"{i['low']:,.0f}-{i['high']:,.0f}" if i else "-"
        md.append(f"| {r['mode']} | {r['run']} | {r['rps'] or 0:,.0f} | {r['per_ingress_cpu'] or 0:,.0f} | {within} | "
                  f"{', '.join(f'{c:g}' for c in r['ingress_cpu'])} | {r['counted']}/{r['rounds']} | {r['wall_s']:.0f} s | "
                  f"{r['control_rps']:,.0f} |")
    (out / "result.md").write_text("\n".join(md) + "\n")
    if publish.in_results(out):
        publish.add_to_index(publish.INDEX, f"{day:%Y-%m-%d}", out.name, "result.md", "./task bench:repeatability", headline(s))
    print(table(s))
    print(f"results: {out}/result.md", file=sys.stderr)


if __name__ == "__main__":
    main()
