"""./task test:time: the suite's minutes as CI sees them. RUNS (3) times in a row: a fresh clone
of HEAD in a directory of its own (0700, under TMPDIR), `bash .ci/run` there with CI=true and
an empty IB_CACHE (Go's caches are the user's, warm once anything was built: each run says
which, and is held to that case's budget), each output line
timed; before and after it, a control the suite has no part in (a fixed Python loop on one
core), so that an hour's speed shows as the control's, not as the suite's. After every run it
writes docs/results/<date>-suite-time/ (runs.json; result.md: each run's minutes by phase, the
control, what each stream waited for the other, the tests per tier, the ten slowest tests) and
removes the clone and its cache; a failed run's clone is kept and named. A set in
docs/results/ (the default, or --out there) gets its row in the results' index.
A tree with uncommitted changes is refused: the clone is of HEAD.

  ci/tests/suite_time.py [--runs N] [--out DIR]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/run"))
import publish  # noqa: E402  (the results' stamp and index, as every published set has them)
from repeatability import Parser  # noqa: E402  (its errors one line, as every other of the suite)

# The suite's budgets (CONTRIBUTING.md): with Go's caches warm, and with every cache empty (a
# new machine: Go builds Kubernetes, k6 and Envoy Gateway from nothing).
BUDGET_S = {"warm": 30 * 60, "empty": 40 * 60}
# ci/tests/run.sh's lines that end each phase: the tools, builds and unit tests before pytest,
# the tests alone, the two streams at once, the machine's compare after them.
PHASES = (("setup", "static and end to end on the lab and the local cluster (pytest)"),
          ("alone", "the lab's stream and the local cluster's, at once"),
          ("streams", "the machine as found (ci/tests/machine_state.py compare)"))
STREAM_END = re.compile(r"^\[(machine|lab|cluster)\] (\d+ (?:passed|failed).*) in ([\d.]+)s")
WAITED = re.compile(r"^\[(lab|cluster)\] \w+ stream waited for (.*)$")
# The control: a loop on one core, no I/O, reads the host's speed beside each run, so that a
# change in the suite's minutes can be told from a change in the host's.
CONTROL = [sys.executable, "-c", "s = 0\nfor i in range(5_000_000):\n    s += i"]


def phases(lines):
    """LINES: (seconds since the start, text). The seconds of each phase, the last one (the
    compare) to the last line; a phase whose end never came is missing."""
    ends, out, last = {}, {}, 0.0
    for t, text in lines:
        for name, marker in PHASES:
            if name not in ends and marker in text:
                ends[name] = t
    for name, _ in PHASES:
        if name in ends:
            out[name] = round(ends[name] - last, 1)
            last = ends[name]
    if "streams" in ends and lines:
        out["compare"] = round(lines[-1][0] - last, 1)
    return out


def streams(lines):
    """Each pytest session's closing counts and seconds, and what each of the two streams waited for."""
    ended, waited = {}, {}
    for _, text in lines:
        if m := STREAM_END.match(text):
            ended[m[1]] = {"result": m[2], "seconds": float(m[3])}
        elif m := WAITED.match(text):
            waited[m[1]] = m[2]
    return ended, waited


def slowest(logs, n=10):
    """The N slowest tests of the JUnit files in LOGS (setup, call and teardown together)."""
    cases = []
    for f in sorted(Path(logs).glob("test-*-last.xml")):
        stream = f.name[len("test-"):-len("-last.xml")]
        for c in ET.parse(f).getroot().iter("testcase"):
            cases.append((float(c.get("time") or 0), stream, f"{c.get('classname', '').split('.')[-1]}.py::{c.get('name')}"))
    return [{"seconds": round(s, 1), "stream": st, "test": name} for s, st, name in sorted(cases, reverse=True)[:n]], len(cases)


def fast_tier(clone, env):
    """How many tests the fast tier runs (pytest's collection in the clone, its own venv)."""
    r = subprocess.run(["bash", "-c", '. bench/lib.sh && exec "$IB_VENV/bin/python" -m pytest --collect-only -q -p no:cacheprovider ci/tests'],
                       cwd=clone, env={**env, "IB_TEST_TIER": "fast"}, capture_output=True, text=True)
    m = re.search(r"^(\d+)(?:/\d+)? tests? collected", r.stdout, re.M)
    return int(m[1]) if m else None


def control(rounds=5):
    """The control's seconds, the median of ROUNDS."""
    times = []
    for _ in range(rounds):
        t0 = time.monotonic()
        subprocess.run(CONTROL, check=True)
        times.append(time.monotonic() - t0)
    return round(statistics.median(times), 3)


def go_caches():
    """Go's build cache as this run starts: "empty" (no build output in it yet) or "warm"."""
    r = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True)
    cache = Path(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None
    return "warm" if cache and cache.is_dir() and any(d.is_dir() for d in cache.iterdir()) else "empty"


def one_run(i, out):
    """A fresh clone's `.ci/run`, timed: its record."""
    where = Path(tempfile.mkdtemp(prefix="ingress-bench-suite-"))  # 0700
    clone, cache = where / "ingress-bench", where / "cache"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "CI": "true", "IB_CACHE": str(cache)}
    go = go_caches()
    before = control()
    started = datetime.datetime.now(datetime.timezone.utc)
    cpu_before = publish.cpu_times()
    t0, lines = time.monotonic(), []
    log = where / "run.log"
    p = subprocess.Popen(["bash", ".ci/run"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        with open(log, "w") as f:
            for text in p.stdout:
                t = time.monotonic() - t0
                lines.append((t, text.rstrip("\n")))
                f.write(f"{t:8.1f} {text}")
        rc = p.wait()
    except KeyboardInterrupt:  # the run's own traps take its platforms down
        os.killpg(p.pid, signal.SIGINT)
        p.wait()
        sys.exit(f"error: interrupted; the run's clone and log are kept in {where}")
    wall = time.monotonic() - t0
    steal = publish.steal_percent(cpu_before)
    ended, waited = streams(lines)
    slow, total = slowest(cache / "logs")
    record = {"run": i, "started": started.isoformat(timespec="seconds"), "exit_code": rc, "wall_s": round(wall, 1),
              "go_caches": go, "budget_s": BUDGET_S[go], "within_budget": wall <= BUDGET_S[go], "phases_s": phases(lines), "sessions": ended, "waited": waited,
              "tests": {"all": total, "fast": fast_tier(clone, env)}, "steal_percent": steal,
              "control_s": [before, control()], "slowest": slow}
    if rc == 0:
        shutil.rmtree(where)
    else:
        record["kept"] = str(where)
        shutil.copy2(log, out / f"run-{i}.log")
    return record


def minutes(s):
    """S seconds as m:ss, rounded to the second."""
    if s is None:
        return "-"
    s = round(s)
    return f"{s // 60}:{s % 60:02d}"


def write(out, day, stamp, runs):
    (out / "runs.json").write_text(json.dumps({**stamp, "budgets_s": BUDGET_S, "runs": runs}, indent=1) + "\n")
    md = [f"# The test suite's minutes ({day:%Y-%m-%d})", "",
          f"Written by `./task test:time` at {stamp['commit'][:12]} on {stamp['machine']['cpus']} CPUs "
          f"({stamp['machine']['cpu_model']}), kernel {stamp['machine']['kernel']}. Each run: a fresh clone in a 0700 directory, "
          "`CI=true bash .ci/run` with an empty `IB_CACHE`, Go's build caches as the machine had them. "
          f"The budget: {BUDGET_S['warm'] // 60} minutes with Go's caches warm, {BUDGET_S['empty'] // 60} with them empty too. Phases: tools, builds and unit tests; the tests that need the whole "
          "machine, alone; the lab's stream and the cluster's at once; the machine's compare. The control: a fixed "
          "Python loop on one core (5 million additions), the median seconds of 5, before and after the run: "
          "the host's speed beside the suite's minutes.", "",
          "| run | started (UTC) | Go's caches | exit | total | within budget | tools, builds, unit | alone | two streams | compare | lab stream | cluster stream | steal | control (s, before / after) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ph, se = r["phases_s"], r["sessions"]
        md.append(f"| {r['run']} | {r['started'][11:16]} | {r['go_caches']} | {r['exit_code']} | {minutes(r['wall_s'])} | "
                  f"{'yes' if r['within_budget'] else 'no'} | {minutes(ph.get('setup'))} | {minutes(ph.get('alone'))} | "
                  f"{minutes(ph.get('streams'))} | {minutes(ph.get('compare'))} | "
                  f"{minutes(se.get('lab', {}).get('seconds'))} | {minutes(se.get('cluster', {}).get('seconds'))} | {r['steal_percent']} % | "
                  f"{' / '.join(f'{c:.2f}' for c in r.get('control_s', [])) or '-'} |")
    md += ["", "What each stream waited for the other:", ""]
    md += [f"- run {r['run']}, {s} stream: {w}" for r in runs for s, w in sorted(r["waited"].items())]
    last = runs[-1]
    md += ["", f"Tests: {last['tests']['all']} pytest tests in `./task test`, {last['tests']['fast']} of them in `./task test:fast` "
           "(both also run k6/lib's node tests and xk6's go tests).", "",
           f"The ten slowest tests of run {last['run']} (setup, call and teardown):", "", "| seconds | stream | test |", "|---|---|---|"]
    md += [f"| {s['seconds']:.1f} | {s['stream']} | `{s['test']}` |" for s in last["slowest"]]
    (out / "result.md").write_text("\n".join(md) + "\n")


def main():
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.runs < 1:
        sys.exit("error: --runs must be at least 1")
    day = datetime.datetime.now(datetime.timezone.utc)
    out = Path(a.out) if a.out else None
    try:
        out = out or publish.check("suite-time", ROOT, day)
        if a.out and out.exists():
            raise publish.Refused(f"{out} exists already: results are never overwritten (--out another)")
        if publish.commit(ROOT)["dirty"]:
            raise publish.Refused("the tree has uncommitted changes: the runs are of a clone of HEAD (commit first)")
        machine = publish.machine()
    except publish.Refused as e:
        sys.exit(f"error: {e}")
    out.mkdir(parents=True)
    stamp = {"date": f"{day:%Y-%m-%d}", "written_by": "./task test:time", **publish.commit(ROOT),
             "machine": machine}
    runs = []
    for i in range(1, a.runs + 1):
        runs.append(one_run(i, out))
        r = runs[-1]
        print(f"run {i}: exit {r['exit_code']}, {minutes(r['wall_s'])} ({', '.join(f'{k} {minutes(v)}' for k, v in r['phases_s'].items())})",
              file=sys.stderr)
        write(out, day, stamp, runs)
    if publish.in_results(out):
        publish.add_to_index(publish.INDEX, stamp["date"], out.name, "result.md", "./task test:time",
                             f"the suite's minutes, {a.runs} fresh run{'s in a row' if a.runs > 1 else ''}: "
                             + ", ".join(f"{minutes(r['wall_s'])}{'' if r['exit_code'] == 0 else ' (failed)'}"
                                         + (" with Go's caches empty" if r["go_caches"] == "empty" else "") for r in runs)
                             + " (the control " + ", ".join(f"{r['control_s'][0]:.2f} s" for r in runs) + ")")
    print((out / "result.md").read_text())
    sys.exit(max(r["exit_code"] for r in runs))


if __name__ == "__main__":
    main()
