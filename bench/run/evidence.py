"""bench/run/evidence.py: `./task bench:evidence` — every physical claim the project makes,
measured here in rounds until each decides, and written as a dated result set.

The claims are data, bench/run/claims.yaml: each claim's statement (the docs quote it) and the
runs that measure them (a kind, settings, a time budget, the most rounds). Per run, rounds until
every claim of it decides, each round real runs of the product's own commands (the matrix
runner, bench:capacity, bench:change, bench.sh, calibrate.sh): a claim HOLDS when its interval lies wholly on
the side its statement says, DOES NOT HOLD when wholly on the other, and is UNDECIDED when the
run's budget or its most rounds end first (the interval straddles the statement's edge: too
much spread to tell).

The false-alarm rate. Many claims, each looked at after every round until it decides, would at
95 % each make a spurious "does not hold" likely. The file's alpha (5 %) is the chance that any
true claim is decided against, whatever the claims' dependence: Bonferroni's union bound over
the N claims of the file and the L looks of each claim's run (every round from the first that
can decide up to its most rounds) gives each interval the level 1 - alpha / (N x L). N counts
every claim of the file, so a subset run (CLAIMS) judges at the same level as the whole.

The result set, OUT (default docs/results/<UTC date>-evidence/):
  parts/<run>-<UTC time>.json  one per run, stamped: the commit, the machine (CPUs, kernel, CPU
                               model, the steal time during the run), the settings, the level,
                               the rounds and every round's figures; never overwritten
  evidence.json, evidence.md,  the set, assembled from the newest part of each claim, whenever
  index.html                   it ran (a set can be made of parts run at different times: each
                               row says when and on which commit); rebuilt, never hand-edited
The runs' own directories go to RESULTS_ROOT (default results/) as every run's do.
CLAIMS=words: only the claims whose id, or whose run's name, starts with one of these words.
EVIDENCE_ASSEMBLE=1: no run, only the set assembled again from its parts.
Exit, for the claims this invocation ran: 1 bad input (one line, nothing started) or a run that
failed (its part is written and says so); else 99 when a claim was decided against its
statement (at most alpha of the time when all are true); else 0 (undecided ones included).
"""
import json
import math
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs)
from cases import DURATION, keep_relations  # noqa: E402
from report.doc import Doc, Link  # noqa: E402
from report.relations import round_ratios  # noqa: E402
from report.stats import binomial_interval, mean_interval, poisson_ratio_interval, ratio_interval  # noqa: E402

CLAIMS_FILE = mx.ROOT / "bench/run/claims.yaml"
MATRICES = mx.ROOT / "bench/run/matrices"
KINDS = {"matrix": ("matrix",), "capacity": (), "change": ("change", "of", "to", "status"), "control": ("of",),
         "signal": ("scenario", "value"), "calibration": ("case", "client")}
RUN_FIELDS = {"kind", "settings", "budget", "max_rounds", "matrix", "change", "of", "to", "status", "scenario", "value",
              "case", "client"}
# The first round that can decide: two for a spread (a t interval), one for counts (exact).
FIRST = {"matrix": 2, "capacity": 2, "change": 1, "control": 1, "signal": 2, "calibration": 2}
WORDS = {"yes": "holds", "no": "does not hold", "undecided": "undecided", "not here": "not here"}
EXIT = {"holds": 0, "undecided": 0, "not here": 0, "not run": 0, "does not hold": 99, "failed": 1}


class Failed(Exception):
    """A run of a round did not finish: its one-line reason."""


# --- the claims file --------------------------------------------------------------------------

def load(path=CLAIMS_FILE):
    """The claims file, checked: its runs and claims; Bad (one line) on anything wrong."""
    where = os.path.relpath(path, mx.ROOT)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise mx.Bad(f"cannot read {where}: {' '.join(str(e).split())}")
    if not isinstance(doc, dict) or set(doc) != {"alpha", "runs", "claims"}:
        raise mx.Bad(f"{where}: needs alpha, runs and claims, and nothing else")
    alpha = doc["alpha"]
    if not mx.number(alpha) or not 0 < alpha < 0.5:
        raise mx.Bad(f"{where}: alpha must be a number between 0 and 0.5, got '{alpha}'")
    runs = {}
    for name, r in (doc["runs"] or {}).items():
        at = f"{where}: run '{name}'"
        if not isinstance(r, dict) or r.get("kind") not in KINDS:
            raise mx.Bad(f"{at}: kind must be one of {', '.join(KINDS)}")
        if extra := set(r) - RUN_FIELDS:
            raise mx.Bad(f"{at}: unknown field {sorted(extra)[0]}")
        if missing := [f for f in ("budget", "max_rounds") + KINDS[r["kind"]] if r.get(f) in (None, "")]:
            raise mx.Bad(f"{at}: needs {missing[0]}")
        if not DURATION.fullmatch(str(r["budget"])):
            raise mx.Bad(f"{at}: budget must be a duration like 5m, got '{r['budget']}'")
        first = FIRST[r["kind"]]
        if not isinstance(r["max_rounds"], int) or not first <= r["max_rounds"] <= mx.MAX_ROUNDS:
            raise mx.Bad(f"{at}: max_rounds must be a whole number from {first} to {mx.MAX_ROUNDS}")
        runs[name] = dict(r, name=name, settings={k: str(v) for k, v in (r.get("settings") or {}).items()},
                          looks=r["max_rounds"] - first + 1, claims=[])
    claims, ids = [], set()
    for i, c in enumerate(doc["claims"] or [], 1):
        at = f"{where}: claim {i}"
        if not isinstance(c, dict) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", str(c.get("id", ""))):
            raise mx.Bad(f"{at}: id must be lower-case letters, digits and '-'")
        if c["id"] in ids:
            raise mx.Bad(f"{at}: id '{c['id']}' is listed twice")
        ids.add(c["id"])
        if c.get("run") not in runs:
            raise mx.Bad(f"{at} ({c['id']}): run must name a run of the file, got '{c.get('run')}'")
        if not str(c.get("says") or "").strip():
            raise mx.Bad(f"{at} ({c['id']}): says (the project's statement) is empty")
        run = runs[c["run"]]
        if run["kind"] == "matrix":
            if not c.get("relation") or "expect" in c:
                raise mx.Bad(f"{at} ({c['id']}): a matrix run's claim names its relation (whose seed block says what it expects), no expect")
        else:
            c["expect"] = expectation(c.get("expect"), f"{at} ({c['id']})")
            if run["claims"]:
                raise mx.Bad(f"{at} ({c['id']}): a {run['kind']} run measures one figure: one claim each")
        claim = dict(c, order=i)
        run["claims"].append(claim)
        claims.append(claim)
    for r in runs.values():
        r["level"] = 1 - alpha / (len(claims) * r["looks"])
    return {"file": where, "dir": Path(path).resolve().parent, "alpha": alpha, "runs": runs, "claims": claims}


def expectation(e, at):
    """{above: x} | {below: x} | {between: [low, high]}, checked; as (low edge, high edge)."""
    if isinstance(e, dict) and len(e) == 1:
        (k, v), = e.items()
        if k in ("above", "below") and mx.number(v):
            return {k: v}
        if k == "between" and isinstance(v, list) and len(v) == 2 and all(map(mx.number, v)) and v[0] < v[1]:
            return {k: v}
    raise mx.Bad(f"{at}: expect must be {{above: x}}, {{below: x}} or {{between: [low, high]}}, got {e!r}")


def from_seed(seed):
    """A relation's seed block as an expectation: its side of 1, or its range."""
    return {"higher": {"above": 1}, "lower": {"below": 1}, "equal": {"between": seed["range"]}}[seed["expect"]]


def verdict(iv, expect, rounds, first):
    """holds / does not hold / undecided: where the interval IV lies against EXPECT's edges
    (undecided before the run's first deciding round: one round has no spread)."""
    if iv is None or rounds < first:
        return "undecided"
    lo, hi = iv["low"], iv["high"]
    if "above" in expect:
        return "holds" if lo > expect["above"] else "does not hold" if hi < expect["above"] else "undecided"
    if "below" in expect:
        return "holds" if hi < expect["below"] else "does not hold" if lo > expect["below"] else "undecided"
    a, b = expect["between"]
    return "holds" if a <= lo and hi <= b else "does not hold" if hi < a or lo > b else "undecided"


def stated(expect):
    if "above" in expect:
        return f"above {expect['above']:g}"
    if "below" in expect:
        return f"below {expect['below']:g}"
    return f"within {expect['between'][0]:g}–{expect['between'][1]:g}"


def picked(spec, words):
    """The runs to measure for CLAIMS=WORDS: those of the claims whose id or run starts with a word."""
    if not words:
        return list(spec["runs"].values())
    ws = words.split()
    if unknown := [w for w in ws if not any(c["id"].startswith(w) or c["run"].startswith(w) for c in spec["claims"])]:
        raise mx.Bad(f"CLAIMS: no claim of {spec['file']} has an id or run starting with {', '.join(repr(w) for w in unknown)}")
    names = {c["run"] for c in spec["claims"] if any(c["id"].startswith(w) or c["run"].startswith(w) for w in ws)}
    return [r for r in spec["runs"].values() if r["name"] in names]


# --- checks before anything starts ------------------------------------------------------------

def environment(run, env):
    """A run's environment: the user's, its own settings over it, and its budget."""
    return dict(env, **run["settings"])


def matrix_path(run, spec):
    """A matrix run's case list: a name in bench/run/matrices/, or a .yaml path (from the claims file's folder)."""
    m = str(run["matrix"])
    return spec["dir"] / m if m.endswith((".yaml", ".yml")) else MATRICES / f"{m}.yaml"


def matrix_of(run, env, reg, spec):
    """A matrix run's case list, kept to its claims' relations and resolved (every case checked
    as bench.sh would); its interval level and its most rounds."""
    path = matrix_path(run, spec)
    e = dict(environment(run, env), BUDGET=str(run["budget"]))
    e.pop("ROUNDS", None)
    m = mx.load(path, e, reg)
    titles = {c["relation"] for c in run["claims"]}
    if unknown := sorted(titles - {r["title"] for r in m["ratios"]}):
        raise mx.Bad(f"run '{run['name']}': {os.path.relpath(path, mx.ROOT)} has no relation '{unknown[0]}'")
    m = keep_relations(m, lambda r: r["title"] in titles)
    if unseeded := [r["title"] for r in m["ratios"] if not r["seed"]]:
        raise mx.Bad(f"run '{run['name']}': relation '{unseeded[0]}' has no seed block to say what it expects")
    # No noise probe: its forecast of the rounds needed is for a user's budget; here the most
    # rounds and the budget are the file's, and the probe's minute goes to rounds.
    m["level"], m["max_rounds"], m["noise_probe"] = run["level"], run["max_rounds"], False
    mx.resolve(m, e, reg)
    return m, e, path


def one_case(run, env, reg, scenario, variant=None):
    """A non-matrix run's case, checked as bench.sh would check it (the platform's driver, then
    k6's settings): its environment."""
    e = environment(run, env)
    m = {"file": f"run '{run['name']}'", "cases": [{"name": run["name"], "scenario": scenario, "platform": None,
                                                    "variant": variant, "settings": {}, "baseline": None}],
         "defaults": {}, "platforms": None, "ratios": [], "rounds": 1}
    mx.resolve(m, e, reg)
    return m["cases"][0]["env"]


def change_checked(run, e, kind, reg):
    """bench:change's own checks of a change or control run's settings (its load's length
    around the change), before the first round of any run."""
    import change
    try:
        change.checked(dict(e, CHANGE=kind), reg)
    except mx.Bad as err:
        raise mx.Bad(f"run '{run['name']}': {err}")


def checked(runs, env, reg, spec):
    """Every run's cases, resolved before the first round of any: bad input says so first."""
    out = {}
    for run in runs:
        mx.check_values([{"where": f"run '{run['name']}': ", "names": sorted(run["settings"]), "env": environment(run, env)}])
        if run["kind"] == "matrix":
            out[run["name"]] = matrix_of(run, env, reg, spec)
        elif run["kind"] == "change":
            out[run["name"]] = {side: one_case(run, env, reg, "rps", run[side]) for side in ("of", "to")}
            change_checked(run, out[run["name"]]["of"], run["change"], reg)
        elif run["kind"] == "control":
            out[run["name"]] = one_case(run, env, reg, "rps", run["of"])
            change_checked(run, out[run["name"]], "none", reg)
        elif run["kind"] == "calibration":  # calibrate.sh's own settings, checked as it checks them
            out[run["name"]] = dict(environment(run, env), **calibration_settings(run))
            mx.check_values([{"where": f"run '{run['name']}': ", "names": ["CASES", "CLIENTS"], "env": out[run["name"]]}])
        else:
            out[run["name"]] = one_case(run, env, reg, run.get("scenario", "rps"))
    return out


# --- the rounds -------------------------------------------------------------------------------

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
    """A calibrate.sh round's runs (its runs.jsonl): CLIENT's CPU per request over wrk's on CASE."""
    by = {r["client"]: r for r in runs if r["case"] == case}
    k6, wrk = by.get(f"k6 {client}"), by.get("wrk")
    if not k6 or not wrk:
        raise Failed(f"calibrate.sh measured no {'wrk' if k6 else 'k6 ' + client} run of {case}")
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


# --- the stamp and the parts ------------------------------------------------------------------

def cpu_times():
    """/proc/stat's first line: (steal, total) jiffies of every CPU."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return f[7] if len(f) > 7 else 0, sum(f)


def commit():
    git = lambda *a: subprocess.run(["git", "-C", str(mx.ROOT), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def machine():
    r = mx.shell("host_description")
    if r.returncode != 0:
        raise mx.Bad(f"cannot describe this machine: {mx.error_line(r.stderr)}")
    return json.loads(r.stdout)["host"]


def write_part(out, run, result, spec, started, steal0, stamp):
    steal1 = cpu_times()
    part = {"run": run["name"], "kind": run["kind"], "started": started,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **commit(),
            "machine": dict(machine(), steal_percent=round(100 * (steal1[0] - steal0[0]) / max(1, steal1[1] - steal0[1]), 2)),
            "settings": run["settings"], "budget": str(run["budget"]), "max_rounds": run["max_rounds"], "looks": run["looks"],
            "alpha": spec["alpha"], "claims_in_file": len(spec["claims"]), "level": run["level"],
            "stopped": result.get("stopped"), "failed": result.get("failed"), "results_dir": result.get("dir"),
            "claims": result["claims"]}
    (out / "parts").mkdir(parents=True, exist_ok=True)
    path = out / "parts" / f"{run['name']}-{stamp}.json"
    if path.exists():
        raise mx.Bad(f"{path} exists already: parts are never overwritten")
    path.write_text(json.dumps(checkout_relative(part), indent=2) + "\n")
    return path


def checkout_relative(value):
    """VALUE with every path inside the checkout made relative to it: a part is published, and
    where this machine keeps the checkout is no part of what was measured."""
    if isinstance(value, dict):
        return {k: checkout_relative(v) for k, v in value.items()}
    if isinstance(value, list):
        return [checkout_relative(v) for v in value]
    if isinstance(value, str) and value.startswith(f"{mx.ROOT}/"):
        return os.path.relpath(value, mx.ROOT)
    return value


# --- the set ----------------------------------------------------------------------------------

def figure_text(iv, digits=3):
    if not iv:
        return "—"
    if iv["low"] == iv["high"] == iv["ratio"] and iv.get("n", iv.get("paired_rounds", 2)) < 2:
        return f"{iv['ratio']:.{digits}g} (one round: no interval)"
    return f"{iv['ratio']:.{digits}g} ({iv['low']:.{digits}g}–{iv['high']:.{digits}g})"


def assemble(out, spec):
    """The set from the newest part of each claim: evidence.json, evidence.md and index.html.
    A claim no part has is "not run"; a part's run that failed leaves its claims "failed"."""
    parts = [(json.loads(p.read_text()), p.name) for p in sorted((out / "parts").glob("*.json"))]
    newest = {}
    for part, name in sorted(parts, key=lambda x: x[0]["finished"]):
        for cid, res in part["claims"].items():
            newest[cid] = (part, name, res)
    rows = []
    for c in spec["claims"]:
        if c["id"] not in newest:
            rows.append({"id": c["id"], "says": c["says"], "run": c["run"], "verdict": "not run"})
            continue
        part, name, res = newest[c["id"]]
        says = "failed" if part.get("failed") and res["verdict"] == "undecided" else res["verdict"]
        rows.append({"id": c["id"], "says": c["says"], "run": c["run"], "verdict": says, "expect": res["expect"],
                     "figure": res["figure"], "interval": res["interval"], "rounds": res["rounds"], "level": part["level"],
                     "part": f"parts/{name}", "finished": part["finished"], "commit": part["commit"], "dirty": part["dirty"],
                     "stopped": part["stopped"], "failed": part.get("failed"), "not_here": res.get("not_here")})
    worst = max((EXIT[r["verdict"]] for r in rows), default=0)
    doc = {"claims_file": spec["file"], "alpha": spec["alpha"], "claims": rows,
           "correction": "Bonferroni over the file's claims and each run's looks: level 1 - alpha / (claims x looks)",
           "counts": {w: sum(r["verdict"] == w for r in rows) for w in EXIT}, "exit_code": 1 if worst == 1 else worst}
    (out / "evidence.json").write_text(json.dumps(doc, indent=2) + "\n")
    page = Doc("ingress-bench: the project's claims, measured",
               f"{len(rows)} claims of {spec['file']}; the false-alarm rate across them {spec['alpha']:.0%} "
               "(each interval at 1 − alpha / (claims × looks): a union bound over the claims and the rounds each was judged at)")
    page.add("cards", [(w, str(n)) for w, n in doc["counts"].items() if n])
    used = {name: part for part, name, _ in newest.values()}
    machines = sorted({f"{m.get('cpu_model')}, {m.get('cpus')} CPUs, kernel {m.get('kernel')}" for m in (p["machine"] for p in used.values())})
    steal = [p["machine"].get("steal_percent") for p in used.values() if p["machine"].get("steal_percent") is not None]
    if machines:
        page.add("p", f"measured on {'; '.join(machines)}; CPU time stolen by the hypervisor during the runs: "
                      f"{min(steal):g}–{max(steal):g} %" if steal else f"measured on {'; '.join(machines)}")
    page.add("table", ["claim", "the project says", "states", "measured (interval)", "level", "rounds", "verdict", "when"],
             [[r["id"], r["says"], stated(r["expect"]) if r.get("expect") else "—", figure_text(r.get("interval")),
               f"{r['level'] * 100:.3g} %" if r.get("level") else "—", r.get("rounds", "—"),
               r["verdict"] + (f" ({r['not_here']})" if r.get("not_here") else "") + (f": {r['failed']}" if r.get("failed") else ""),
               Link(f"{r['finished'][:16]} on {(r['commit'] or '?')[:12]}{' (dirty)' if r['dirty'] else ''}", r["part"]) if r.get("part") else "—"]
              for r in rows])
    page.add("p", "measured: the figure each claim is about (a ratio of the sides' geometric means, a mean, or a ratio of "
                  "rates of counts) with its interval at the level shown; each part (linked) keeps every round's figures, "
                  "the commit, the machine and the settings it ran with.")
    (out / "index.html").write_text(page.html())
    (out / "evidence.md").write_text(page.markdown())
    return doc


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    mx.check_values([{"where": "", "names": [n for n in ("CLAIMS", "EVIDENCE_DIR", "EVIDENCE_ASSEMBLE", "EVIDENCE_CLAIMS") if env.get(n)],
                      "env": env}])
    spec = load(Path(env.get("EVIDENCE_CLAIMS") or CLAIMS_FILE))
    out = Path(env.get("EVIDENCE_DIR") or mx.ROOT / "docs/results" / f"{datetime.now(timezone.utc):%Y-%m-%d}-evidence").resolve()
    runs = picked(spec, env.get("CLAIMS"))
    if env.get("EVIDENCE_ASSEMBLE") in ("1", "true"):
        if not (out / "parts").is_dir():
            raise mx.Bad(f"EVIDENCE_ASSEMBLE: {out} has no parts to assemble")
        doc = assemble(out, spec)
        print((out / "evidence.md").read_text(), end="")
        return doc["exit_code"]
    if os.geteuid() != 0:
        raise mx.Bad("bench:evidence needs root (the lab's network namespaces, the local cluster): run it as root")
    prepared = checked(runs, env, reg, spec)
    for run in runs:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        started, steal0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), cpu_times()
        mx.say("evidence", f"run '{run['name']}' ({run['kind']}): {', '.join(c['id'] for c in run['claims'])}; "
                           f"interval level {run['level'] * 100:.3g} %, at most {run['max_rounds']} rounds within {run['budget']}")
        result = (run_matrix if run["kind"] == "matrix" else run_rounds)(run, prepared[run["name"]], env, stamp)
        run["part"] = write_part(out, run, result, spec, started, steal0, stamp)
        run["result"] = result
        for cid, res in result["claims"].items():
            mx.say("evidence", f"{cid}: {res['verdict']}, {figure_text(res['interval'])} after {res['rounds']} rounds")
        if result.get("failed"):
            mx.say("evidence", f"run '{run['name']}' failed: {result['failed']} ({run['part']})")
    assemble(out, spec)
    print((out / "evidence.md").read_text(), end="")
    mx.say("evidence", f"{out}/ (index.html, evidence.md, evidence.json, parts/)")
    # This invocation's runs decide its exit: a failed run first (the evidence is incomplete),
    # then a claim decided against its statement.
    if any(r["result"].get("failed") for r in runs):
        return 1
    return 99 if any(res["verdict"] == "does not hold" for r in runs for res in r["result"]["claims"].values()) else 0


if __name__ == "__main__":
    mx.entry(main, sys.argv)
