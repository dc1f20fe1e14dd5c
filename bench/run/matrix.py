"""bench/run/matrix.py [--check] [CASES.yaml]: a matrix of benchmark runs from a declarative case list
(or MATRIX=CASES.yaml). `./task bench:matrix MATRIX=...`, and bench:seeds and bench:overhead
with their lists in bench/run/matrices/; bench:compare and bench:sweep build theirs (compare.py,
sweep.py) and run them here.

One place for what every comparison does:
  - the whole list is checked before anything starts: its fields, each setting's name and value
    against the registry (bench/settings/settings.yaml, through bench/settings/settings.tsv and node), and
    each case as bench/run/bench.sh would check it (the platform's driver: pf_check, then
    k6_validate). Bad input is one line `error: ...`, exit 1, nothing started or written;
  - every case runs once per round, ROUNDS rounds; the cases' order is rotated each round
    (round-robin: round r starts with case r), so a slow drift of the machine hits all cases
    alike. Each run is `bash bench/run/bench.sh SCENARIO` with the case's settings in its
    environment and a TESTID of its own, into RESULTS_ROOT/<matrix>-<UTC time>/<TESTID>/;
    every run's directory is kept and listed (table.md, matrix.json), its output is in logs/;
  - a crossed threshold (bench.sh exit 99) is recorded for that run and the matrix goes on; so
    does a run that fails otherwise (exit 1), recorded with its one-line reason;
  - per case and column: median, min/max and coefficient of variation over the rounds (runs
    that finished, crossed or not), and the ratios between cases (geometric means); printed as Markdown
    and written, with a JSON of every value, into the matrix's directory.
BUDGET (a duration; the list's budget when ROUNDS is not given): the rounds go on until every
seed relation decides (its interval says the direction holds or does not, or the seed needs more
nodes) or the next round would end past the budget; at least two rounds unless the budget ends
first, at most 99. First a noise probe (NOISE_RUNS runs of the first case, as long as the rounds'
runs up to NOISE_DURATION) measures the spread now and says how many rounds the relations'
margins need. Once a relation has decided (from the second round), its cases run no more unless
an undecided one compares them too: the budget goes to the relations still open. Each relation
says after how many rounds it decided, or "undecided after N rounds, spread X %"; each case how
many runs it had.
--check: only the checks, and the plan (each case as it would run); nothing started.
Exit code (docs/reference/exit-codes.md): 0 every run passed; 99 a run crossed a threshold and none
failed otherwise; 1 a run failed otherwise, or bad input.
The case list's format and its checks: bench/run/cases.py; the numbers and tables: bench/run/tables.py.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
# The runners built on this one (compare, sweep, throttle, capacity, change) reach the case
# list's checks and the tables through it, as mx.NAME: one import for "what a run is".
from cases import (CPUS, Bad, check_values, default_of, duration_s, traits, error_line, load, number, only_relations,  # noqa: E402,F401
                   parse, platforms, registry, resolve, say, shell, side_settings, existing_checked, at_once, enter_client_side, envoy_own)
from report.relations import relations_page  # noqa: E402
import publish  # noqa: E402  (PUBLISH=1: the set in docs/results/)
from report.stats import ratio_interval, stats  # noqa: E402,F401  (one place, shared with the index)
from tables import compute, fmt, judge_ratio, judged_on, markdown, rounds_of, run_listing  # noqa: E402,F401
BENCH = ROOT / "bench/run/bench.sh"
MONITORING_SH = ROOT / "bench/platforms/monitoring/monitoring.sh"
# The noise probe before a budgeted matrix: 4 runs of its first case, each as long as the
# matrix's runs up to 5 s (20 s of load at most). A run's spread depends on its length: runs of
# the rounds' own length measure theirs; longer rounds vary less than 5 s runs, so their
# estimate errs on the side of more rounds.
NOISE_RUNS, NOISE_DURATION = 4, "5s"
MAX_ROUNDS = 99


# --- the runs ------------------------------------------------------------------------------------

def lookup(doc, path):
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def read_run(run, m):
    """A finished run's values (one per value column) and the thresholds it crossed."""
    d = Path(run["dir"])
    try:
        summary = json.loads((d / "summary.json").read_text())
        # An in-cluster run's (bench/run/distributed.sh): its figures at the top, and no meta.json
        # (the machine is the pods' nodes).
        distributed = "per_segment" in summary
        summary = dict(summary, result=summary) if distributed else summary
        meta = {} if distributed else json.loads((d / "meta.json").read_text())
    except (OSError, ValueError) as e:
        run.update(status="failed", reason=f"no readable summary.json/meta.json in {d} ({e.__class__.__name__})")
        return
    for col in m["columns"]:
        if col["kind"] != "value":
            continue
        path = col["value"]
        v = lookup(meta, path[len("meta."):]) if path.startswith("meta.") else lookup(summary, path)
        if number(v) and "scale" in col:
            v = v * col["scale"]
        run["values"][col["key"]] = v
    run["crossed"] = [f"{t.get('metric')} {t.get('expr')}" for t in lookup(summary, "result.thresholds") or [] if not t.get("ok")]
    run["nodes"] = meta.get("nodes")  # the cluster's nodes (None on the lab): a seed may need more
    # The ingress's CPU (its cgroup: quota or CPUs) and the headline per CPU of it (summary.json .cpu).
    run["ingress_cpus"], run["per_cpu"] = lookup(summary, "cpu.ingress_cpus"), lookup(summary, "cpu.per_ingress_cpu.value")


def blank_run(c, extra, testid, mdir):
    return {"case": c["name"], "testid": testid, "settings": extra, "dir": str(mdir / testid),
            "log": str(mdir / "logs" / f"{testid}.log"), "rc": None, "status": None, "reason": None, "crossed": [], "values": {}}


def run_to_its_end(args, **kwargs):
    """A run's exit code, its own handling of an interrupt included: on Ctrl-C bench.sh stops
    k6 gracefully, writes the summary of what was measured and removes its scratch, which takes
    seconds; subprocess.run would SIGKILL it a quarter of a second in (the run lost, its scratch
    left in TMPDIR). The run has a process group of its own and gets each SIGINT or SIGTERM this
    process gets, passed on once, as bench.sh's k6 gets bench.sh's: a terminal's Ctrl-C reaches
    the foreground group only, and bash does not take the same signal twice a few milliseconds
    apart reliably (its trap can run in the middle of its parser's work and fail). A second
    signal, the user insisting, is passed on too. The interrupt goes on up once the run ended."""
    got = []

    def term(sig, _frame):
        got.append(sig)
        raise KeyboardInterrupt

    old, interrupted = signal.signal(signal.SIGTERM, term), False
    try:
        with subprocess.Popen(args, process_group=0, **kwargs) as p:
            while True:
                try:
                    p.wait()
                    break
                except KeyboardInterrupt:
                    interrupted = True
                    p.send_signal(got.pop() if got else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, old)
    if interrupted:
        raise KeyboardInterrupt
    return p.returncode


def run_one(c, extra, testid, mdir, m, round_=None):
    """One run of case c (its environment plus the settings in extra) as TESTID into mdir,
    its output in mdir/logs/; returns the run: status passed, crossed (exit 99: the thresholds
    it crossed) or failed (its one-line reason), and its values of m's value columns. RUN_HOOK
    runs first, in the run's log (ROUND_: the run's round, for the hook)."""
    run = blank_run(c, extra, testid, mdir)
    env = dict(c["env"], **extra, TESTID=testid, RESULTS_ROOT=str(mdir))
    with open(run["log"], "w") as log:
        if env.get("RUN_HOOK"):
            hook = subprocess.run(["bash", "-c", env["RUN_HOOK"]], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  env=dict(env, IB_CASE=c["name"], IB_ROUND=str(round_ or ""), IB_TESTID=testid))
            if hook.returncode != 0:
                run.update(rc=1, status="failed", reason=f"RUN_HOOK exited {hook.returncode}")
        # MONITORING=0: nothing of the stack runs, not only that this run ignores it. Taken
        # down once per platform until a run with monitoring on there (bench:overhead
        # alternates), not before each run: a down is a second or two of kubectl calls.
        off, down_on = env.get("MONITORING") in ("0", "false"), m.setdefault("monitoring_down", set())
        if run["status"] is None and off and traits(c["platform"])["monitoring"] in ("host", "operator") and c["platform"] not in down_on:
            down = subprocess.run(["bash", str(MONITORING_SH), "down"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            if down.returncode != 0:
                run.update(rc=1, status="failed", reason="the platform's monitoring did not go down")
            else:
                down_on.add(c["platform"])
        if not off:
            down_on.discard(c["platform"])
        if run["status"] is None:
            run["rc"] = run_to_its_end(["bash", str(BENCH), c["scenario"]], cwd=ROOT, env=env,
                                       stdout=log, stderr=subprocess.STDOUT)
    if not Path(run["dir"]).is_dir():
        run["dir"] = None  # the run stopped before it made one
    elif (meta := Path(run["dir"]) / "meta.json").is_file():
        # The share the case's first run probed (INGRESS_CPU=auto): its later rounds run at it,
        # like with like, without probing again.
        budget = json.loads(meta.read_text()).get("ingress_budget") or {}
        if budget.get("source") == "probe":
            c["env"]["INGRESS_CPU"] = budget["ingress_cpu"]
    if run["status"] is None:
        if run["rc"] in (0, 99) and run["dir"]:
            run["status"] = "passed" if run["rc"] == 0 else "crossed"
            read_run(run, m)
        else:
            run["status"] = "failed"
            run["reason"] = error_line(Path(run["log"]).read_text()) or f"exit {run['rc']}"
    return run


def outcome(run, col=None):
    """A finished run in a few words: its first value column's figure and its status."""
    shown = f"{fmt(run['values'].get(col['key']), col)} {col['title']}, " if col and run["status"] != "failed" else ""
    return shown + {"passed": "passed", "crossed": f"crossed ({'; '.join(run['crossed'])})",
                    "failed": f"FAILED: {run['reason']}"}[run["status"]]


def execute(m, rounds, mdir, stamp):
    """Every case once per round, the order rotated each round; ROUNDS rounds, or with a budget
    (m["budget_s"]) until every seed relation decides or the budget would end (stopping()):
    then a round runs only the cases some undecided relation compares (still_needed).
    Returns the runs in order and whether an interrupt stopped them."""
    (mdir / "logs").mkdir()
    cases, runs = m["cases"], []
    first = next((c for c in m["columns"] if c["kind"] == "value"), None)
    budget, started = m.get("budget_s"), time.monotonic()
    last = m.get("max_rounds", MAX_ROUNDS) if budget else rounds
    wall = {}  # case -> its runs' wall seconds: the next round's estimate
    try:
        if budget and m.get("noise_probe", True):
            m["noise"] = noise_probe(m, mdir, stamp, first)
        for r in range(1, last + 1):
            n = len(cases)
            for c in cases[(r - 1) % n:] + cases[:(r - 1) % n]:
                testid = f"{c['name']}-r{r}-{stamp}"
                runs.append(dict(blank_run(c, {}, testid, mdir), round=r, order=len(runs) + 1))  # what an interrupt marks
                t0 = time.monotonic()
                runs[-1].update(run_one(c, {}, testid, mdir, m, r))
                wall.setdefault(c["name"], []).append(time.monotonic() - t0)
                say("matrix", f"{c['name']} round {r}/{rounds if not budget else '…'}: {outcome(runs[-1], first)}")
            if not budget:
                continue
            now = time.monotonic()
            nxt = still_needed(m, runs, r, cases)
            per_round = sum(sum(wall[c["name"]]) / len(wall[c["name"]]) for c in nxt)
            if why := stopping(m, runs, r, now - started, per_round, budget):
                say("matrix", f"stopped after round {r}: {why}")
                m["stopped"] = why
                break
            if len(nxt) < len(cases):
                gone = [c["name"] for c in cases if c not in nxt]
                say("matrix", f"round {r + 1} on: {len(nxt)} of {len(cases)} cases, those undecided relations compare "
                              f"({', '.join(gone)}: every relation of theirs decided)")
                cases = nxt
    except KeyboardInterrupt:
        if runs and runs[-1]["status"] is None:
            runs[-1].update(status="failed", reason="interrupted")
        return runs, True
    return runs, False


def still_needed(m, runs, r, cases):
    """The cases of CASES a budgeted matrix's next round runs: those an undecided seed relation
    compares (and their baselines); all of them under a runner's own rule (bench:compare's
    gates) or before min_rounds. A decided relation's cases then run no more: more rounds for
    the relations the budget is still deciding."""
    if m.get("decide") or r < m.get("min_rounds", 2):
        return cases
    relations_decided(m, runs, r)
    want = {x[end] for x in m["ratios"] if x["seed"] and not decided(x) for end in ("of", "to") if x.get(end)}
    want |= {c["baseline"] for c in cases if c["name"] in want and c["baseline"]}
    return [c for c in cases if c["name"] in want] or cases


def decided(r):
    return r.get("holds") in ("yes", "no", "not here")


def relations_decided(m, runs, r):
    """A budgeted matrix's rule: every seed relation decided (its interval says the direction
    holds or does not, or the seed needs more nodes). Each relation's round of decision is kept
    (it can lose it again as rounds add)."""
    compute(m, runs)
    for x in (x for x in m["ratios"] if x["seed"]):
        x["decided_at"] = (x.get("decided_at") or r) if decided(x) else None
    return "every relation decided" if all(decided(x) for x in m["ratios"] if x["seed"]) else None


def stopping(m, runs, r, elapsed, per_round, budget):
    """After round r of a budgeted matrix (ELAPSED seconds since it started, the noise probe
    included; PER_ROUND a round's mean): why to stop now, or None. What decides is the list's
    (relations_decided) or its runner's (m["decide"]: bench:compare's gates), from
    m["min_rounds"] rounds on (2: a spread to judge by)."""
    why = m.get("decide", relations_decided)(m, runs, r)
    if why and r >= m.get("min_rounds", 2):
        return f"{why} ({elapsed / 60:.1f} min)"
    if elapsed + per_round > budget:
        return f"the budget ({m['budget_text']}) would end in the next round ({elapsed / 60:.1f} min so far)"
    if r == m.get("max_rounds", MAX_ROUNDS):
        return f"{r} rounds, the most allowed"
    return None


def seed_margins(m):
    """Each seed relation's margin: the distance from the seed's figure to where its direction
    flips (1 for higher/lower, its range's edge for equal), as a share of the figure."""
    out = {}
    for r in (r for r in m["ratios"] if r["seed"]):
        sd = r["seed"]
        if sd["figure"] is None:  # a direction alone: no margin to size the rounds by
            continue
        out[r["title"]] = min(abs(sd["figure"] - e) for e in sd["range"]) / sd["figure"] if sd["expect"] == "equal" \
            else abs(sd["figure"] - 1) / max(sd["figure"], 1)
    return out


def noise_probe(m, mdir, stamp, col):
    """The spread now: NOISE_RUNS runs of NOISE_DURATION of the first case, their CV, and the
    rounds each relation needs for its interval to clear its margin (seed_margins, or the
    runner's m["margins"]: bench:compare's gates): n ~ 2 (1.96 x CV / margin)^2 for a ratio of
    two means (a ratio's variance is the sum of its sides'; at few rounds t exceeds 1.96)."""
    c = m["cases"][0]
    own = c["env"].get("DURATION") or registry()["DURATION"]["default"]
    duration = own if duration_s(own) < duration_s(NOISE_DURATION) else NOISE_DURATION
    values = []
    for i in range(1, NOISE_RUNS + 1):
        run = run_one(c, {"DURATION": duration}, f"noise-{i}-{stamp}", mdir, m)
        v = run["values"].get(col["key"]) if col else None
        if number(v):
            values.append(v)
    s = stats(values)
    cv = s.get("cv_percent")
    out = {"case": c["name"], "runs": len(values), "duration": duration, "cv_percent": cv, "needs": {}}
    for title, margin in (m.get("margins") or seed_margins(m)).items():
        out["needs"][title] = None if not cv or not margin else max(m.get("min_rounds", 2), math.ceil(2 * (1.96 * cv / 100 / margin) ** 2))
    needs = [v for v in out["needs"].values() if v]
    what = m.get("margins_of", "the relations' margins")
    say("matrix", f"noise now: CV {'n/a' if cv is None else f'{cv:.1f} %'} over {len(values)} runs of {duration} of {c['name']}"
                  + (f"; {what} need {min(needs)}–{max(needs)} alternated rounds (median {sorted(needs)[len(needs) // 2]})" if needs else ""))
    return out


def new_results_dir(env, name):
    """RESULTS_ROOT/<name>-<UTC time>/, new, and its time stamp (the runs' TESTIDs end with it)."""
    results = Path(env.get("RESULTS_ROOT") or ROOT / "results").resolve()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    mdir = results / f"{name}-{stamp}"
    try:
        results.mkdir(parents=True, exist_ok=True)
        mdir.mkdir()
    except FileExistsError:
        raise Bad(f"results directory {mdir} exists already: results are never overwritten")
    return mdir, stamp


def main(argv):
    env = dict(os.environ)
    reg = registry()
    check_only = "--check" in argv[1:]
    args = [a for a in argv[1:] if a != "--check"]
    path = args[0] if args else env.get("MATRIX", "")
    if not path:
        raise Bad("name a case list: MATRIX=path.yaml (bench/run/matrices/ holds the seeds' lists)")
    check_values([{"where": "", "names": ["RELATIONS"], "env": env}])  # before it picks cases
    m = only_relations(load(Path(path).resolve(), env, reg), env.get("RELATIONS"))
    rounds = resolve(m, env, reg)
    if check_only:  # the plan, checked; nothing started
        for c in m["cases"]:
            settings = " ".join(f"{k}={v}" for k, v in {**m["given"], **c["settings"]}.items())
            print(f"{c['name']}: {c['scenario']} on {c['platform']}, {c['variant']}{', ' if settings else ''}{settings}")
        print(f"{len(m['cases'])} cases × {rounds} rounds")
        return 0
    out = None
    if env.get("PUBLISH") == "1":  # the set's folder and a committed tree, before the load
        try:
            out = publish.check(publish.set_name(Path(path).stem, env.get("RELATIONS")))
        except publish.Refused as e:
            raise Bad(f"PUBLISH=1: {e}")
    steal = publish.cpu_times()
    rc, doc = run_matrix(m, env, rounds, Path(path).stem, Path(path).read_text())
    if out:
        settings = {**m["given"], **{k: env[k] for k in ("RELATIONS", "BUDGET", "ROUNDS") if env.get(k)}}
        publish.publish(doc["dir"], doc, out, path, settings, steal)
        say("publish", f"{os.path.relpath(out, ROOT)}/ (listed in docs/results/README.md)")
    return rc


def run_matrix(m, env, rounds, name, cases_text):
    """Runs the checked matrix m into RESULTS_ROOT/<name>-<time>/ (its case list kept there as
    cases.yaml), writes table.md and matrix.json, prints the table; returns (exit code, the
    matrix.json document). The runners built on this one (compare, sweep, seeds) add theirs."""
    if os.geteuid() != 0 and any(traits(c["platform"])["root"] == "1" for c in m["cases"]):
        raise Bad(f"the matrix {m['file']} needs root (network namespaces, nginx on ports 80/443): run it as root")
    mdir, stamp = new_results_dir(env, name)
    (mdir / "cases.yaml").write_text(cases_text)
    for c in m["cases"]:
        replaced = [k for k, v in c["settings"].items() if env.get(k) and env[k] != v]
        for k in replaced:
            say("matrix", f"note: case {c['name']} runs with {k}={c['settings'][k]}, not the environment's {env[k]}")
    total = len(m["cases"]) * rounds
    plan = f"rounds until every relation decides, within {m['budget_text']}" if m.get("budget_s") else \
        f"{rounds} round{'s' if rounds > 1 else ''} = {total} run{'s' if total > 1 else ''}"
    say("matrix", f"{m['file']}: {len(m['cases'])} case{'s' if len(m['cases']) > 1 else ''} × {plan} -> {mdir}/")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs, interrupted = execute(m, rounds, mdir, stamp)
    rounds = max((r["round"] for r in runs), default=rounds)  # a budget decides how many
    compute(m, runs)
    failed = [r for r in runs if r["status"] == "failed"]
    crossed = [r for r in runs if r["status"] == "crossed"]
    rc = 1 if failed or interrupted else 99 if crossed else 0
    table = markdown(m, rounds, mdir, interrupted)
    (mdir / "table.md").write_text(table + run_listing(runs, mdir))
    doc = {"matrix": m["file"], "title": m["title"], "id": mdir.name, "dir": str(mdir), "started": started,
           "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rounds": rounds, "cpus": CPUS,
           "interrupted": interrupted, "exit_code": rc, "budget_s": m.get("budget_s"), "noise": m.get("noise"),
           "stopped": m.get("stopped"),
           "columns": [{k: v for k, v in col.items()} for col in m["columns"]],
           "cases": [{k: c[k] for k in ("name", "scenario", "platform", "variant", "group", "baseline", "settings",
                                        "counts", "stats", "vs_baseline")} | {"runs": c["runs"]} for c in m["cases"]],
           "ratios": m["ratios"], "runs": runs}
    (mdir / "matrix.json").write_text(json.dumps(doc, indent=2) + "\n")
    page = relations_page(mdir, m, runs)
    print("\n" + table + (f"\nPage: {page} (the relations' table and one chart per relation)\n" if page else ""), end="", flush=True)
    if failed or interrupted:
        first = failed[0] if failed else None
        why = f": case {first['case']} round {first['round']}: {first['reason']}" if first else ""
        print(f"error: {'interrupted; ' if interrupted else ''}{len(failed)} of {len(runs)} runs failed{why} (table: {mdir}/table.md)",
              file=sys.stderr)
    return rc, doc


def entry(main, *args):
    """A runner's exit: its code, or bad input (and an interrupt) as one `error:` line, 1."""
    try:
        sys.exit(main(*args))
    except Bad as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    entry(main, sys.argv)
