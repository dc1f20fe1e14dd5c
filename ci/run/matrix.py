"""ci/run/matrix.py [--check] [CASES.yaml]: a matrix of benchmark runs from a declarative case list
(or MATRIX=CASES.yaml). `./task bench:matrix MATRIX=...`, and bench:seeds and bench:overhead
with their lists in ci/run/matrices/; bench:compare and bench:sweep build theirs (compare.py,
sweep.py) and run them here.

One place for what every comparison does:
  - the whole list is checked before anything starts: its fields, each setting's name and value
    against the registry (k6/lib/settings.js, through ci/settings/settings.tsv and node), and
    each case as ci/run/bench.sh would check it (the platform's driver: pf_check, then
    k6_validate). Bad input is one line `error: ...`, exit 1, nothing started or written;
  - every case runs once per round, ROUNDS rounds; the cases' order is rotated each round
    (round-robin: round r starts with case r), so a slow drift of the machine hits all cases
    alike. Each run is `bash ci/run/bench.sh SCENARIO` with the case's settings in its
    environment and a TESTID of its own, into RESULTS_ROOT/<matrix>-<UTC time>/<TESTID>/;
    every run's directory is kept and listed (table.md, matrix.json), its output is in logs/;
  - a crossed threshold (bench.sh exit 99) is recorded for that run and the matrix goes on; so
    does a run that fails otherwise (exit 1), recorded with its one-line reason;
  - per case and column: median, min/max and coefficient of variation over the rounds (runs
    that finished, crossed or not), and the ratios between cases' medians; printed as Markdown
    and written, with a JSON of every value, into the matrix's directory.
BUDGET (a duration; the list's budget when ROUNDS is not given): the rounds go on until every
seed relation decides (its interval says the direction holds or does not, or the seed needs more
nodes) or the next round would end past the budget; at least two rounds unless the budget ends
first, at most 99. First a noise probe (NOISE_RUNS runs of NOISE_DURATION of the first case)
measures the spread now and says how many rounds the relations' margins need. Each relation
says after how many rounds it decided, or "undecided after N rounds, spread X %".
--check: only the checks, and the plan (each case as it would run); nothing started.
Exit code (README, "Exit codes"): 0 every run passed; 99 a run crossed a threshold and none
failed otherwise; 1 a run failed otherwise, or bad input.

The case list (YAML):
  title: one line above the tables
  rounds: the default of ROUNDS (3 when absent)
  budget: 30m              optional, with seed relations: the default of BUDGET (below); ROUNDS
                           given alone still runs that many rounds
  platforms: [lab, local]  optional: the platforms the cases may resolve to
  defaults: {NAME: value}  settings of every case; a setting in the environment (or on the
                           task line) replaces them
  cases:                   each:
    - name: lab-default      [a-z0-9-]: the runs' TESTID is <name>-r<round>-<time>
      scenario: rps          a scenario (the SCENARIO setting's values)
      platform: lab          optional: else PLATFORM as every entry point resolves it
      variant: seed002-...   optional: else VARIANT, else the platform's default
      settings: {NAME: value}  what makes this case: they win over the environment.
                             MONITORING: 0 takes the platform's monitoring down before the
                             run (nothing of the stack runs, as bench:overhead measures it).
                             "{last_cpu}" and "{cpus}" in a value are this host's last CPU
                             and CPU count.
      group: heading         optional: one table per group
      baseline: case-name    optional: the case a vs_baseline column divides by
  columns:                 each one of (after the case's name; "runs" ends the row):
    - {title: platform, field: platform}     name, scenario, platform or variant
    - {title: payload, setting: PAYLOAD}     the case's value of a setting
    - {key: rps, title: req/s, value: result.rps, format: ",.0f", spread: true}
                             a number (or text) of each run's summary.json, or of its
                             meta.json when the path starts with meta.; scale multiplies,
                             format is Python's, unit is appended; spread adds min-max and
                             CV columns (the first value column has them unless one says so)
    - {key: vs, title: vs LB -> Pod, vs_baseline: rps}  the case's median over its baseline's
  ratios:                  lines under the tables, each a ratio of the cases' geometric
                           means with its Welch t 95 % interval (ci/report/stats.py):
    - {title: ..., of: case, to: case, column: rps, show: ratio}
                             show: ratio (of/to, "1.23x") or percent_below ((to-of)/to, "%");
                             per: NUMBER instead of to: the case's median over a constant
                             (a link's Gbit/s: throughput as a share of it)
      seed: {figure: 0.48, text: "11.7k vs 24.2k", expect: lower, range: [0.4, 0.6]}
                             a relation to a seed: its figure (as this ratio) and what it
                             says: expect higher or lower (the ratio's side of 1) or equal
                             (within range), range the size the seed supports. The table of
                             relations says per ratio whether the direction holds (yes, no, or
                             "undecided" when the interval straddles the boundary: too much
                             spread to tell) and whether the measured ratio is in the range;
                             nodes: N when the seed's mechanism needs N nodes (a NodePort's hop
                             between nodes): on fewer it says "not here" (the runs' meta.json)
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
from report.relations import relations_page  # noqa: E402
from report.stats import ratio_interval, stats  # noqa: E402  (one place, shared with the index)
TSV = ROOT / "ci/settings/settings.tsv"
BENCH = ROOT / "ci/run/bench.sh"
MONITORING_SH = ROOT / "ci/platforms/monitoring/monitoring.sh"

TOP_FIELDS = ("title", "rounds", "budget", "platforms", "defaults", "cases", "columns", "ratios")
# The noise probe before a budgeted matrix: 4 runs of 5 s of its first case (20 s of load).
NOISE_RUNS, NOISE_DURATION = 4, "5s"
MAX_ROUNDS = 99
CASE_FIELDS = ("name", "scenario", "platform", "variant", "settings", "group", "baseline")
COLUMN_FIELDS = ("key", "title", "field", "setting", "value", "vs_baseline", "scale", "format", "unit", "spread")
COLUMN_KINDS = ("field", "setting", "value", "vs_baseline")
RATIO_FIELDS = ("title", "of", "to", "per", "column", "show", "seed")
SEED_FIELDS = ("figure", "text", "expect", "range", "nodes")
EXPECTS = ("higher", "lower", "equal")
CASE_ATTRS = ("name", "scenario", "platform", "variant")
SHOWS = ("ratio", "percent_below")
# A case's settings are carried to its run: those that reach one (ci/run/bench.sh and what it
# calls). The registry's other paths (calibrate, report, the matrix itself) mean nothing there.
RUN_REACHES = {"k6", "pods", "lab", "deploy", "monitoring", "distributed"}
CASE_OWN = {"PLATFORM": "platform", "VARIANT": "variant", "SCENARIO": "scenario"}
RUNNER_OWN = ("TESTID", "RESULTS_ROOT")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
CPUS = len(os.sched_getaffinity(0))
PLACEHOLDERS = {"{last_cpu}": str(CPUS - 1), "{cpus}": str(CPUS)}
DEFAULT_COLUMNS = [{"title": "platform", "field": "platform"}, {"title": "variant", "field": "variant"},
                   {"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]


class Bad(Exception):
    """Bad input: one line, before anything starts."""


DURATION = re.compile(r"(?:\d+(?:ms|s|m|h))+")


def duration_s(text):
    """A k6 duration (checked by the registry first: settings.js durationMs) in seconds."""
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", text))


def say(tag, text):
    print(f"{tag:<13} {text}", file=sys.stderr, flush=True)


def shell(script, *args, env=None):
    """bash with ci/lib.sh sourced: SCRIPT, its positional parameters ARGS."""
    return subprocess.run(["bash", "-c", f'. "{ROOT}/ci/lib.sh" || exit 1\n{script}', "matrix", *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def error_line(text):
    """The one-line error a script said (its last `error:` line), without the prefix."""
    lines = [l[len("error: "):] for l in text.splitlines() if l.startswith("error: ")]
    return lines[-1] if lines else (text.strip().splitlines() or [""])[-1]


# --- the settings registry (its shell view, generated from k6/lib/settings.js) ---------------

def registry():
    reg = {}
    for line in TSV.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, reaches, default, values = (line.split("\t") + ["", "", ""])[:4]
        if reaches != "internal":  # set by the scripts for k6, never by users
            reg[name] = {"reaches": set(reaches.split(",")), "default": default, "values": values.split()}
    return reg


def closest(name):
    return shell('setting_closest "$1"', name).stdout.strip()


def check_values(jobs):
    """Each job {where, names, env}: every named setting's value in env by the registry's own
    rule (settings.js `setting`); raises Bad with the first one that breaks it."""
    js = ("const { setting } = await import(process.argv[1]);\n"
          "let text = ''; for await (const chunk of process.stdin) text += chunk;\n"
          "for (const job of JSON.parse(text)) {\n"
          "  try { for (const name of job.names) setting(job.env, name); }\n"
          "  catch (e) { console.log(job.where + e.message); process.exit(1); }\n"
          "}\n")
    url = (ROOT / "k6/lib/settings.js").as_uri()
    try:
        r = subprocess.run(["node", "--input-type=module", "-e", js, url], input=json.dumps(jobs),
                           capture_output=True, text=True, cwd=ROOT)
    except FileNotFoundError:
        raise Bad("node is not installed (it reads the settings registry): run './task tools'")
    if r.returncode != 0:
        raise Bad(r.stdout.strip() or f"node could not read the settings registry: {error_line(r.stderr)}")


# --- the case list ----------------------------------------------------------------------------

def scalar(value, where):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        text = str(value)
        for k, v in PLACEHOLDERS.items():
            text = text.replace(k, v)
        left = re.search(r"\{[a-z_]*\}", text)
        if left:
            raise Bad(f"{where}: unknown placeholder '{left.group(0)}' (known: {', '.join(PLACEHOLDERS)})")
        return text
    raise Bad(f"{where} must be a single value, got {type(value).__name__}")


def mapping(value, where, fields=None):
    if not isinstance(value, dict):
        raise Bad(f"{where} must be a mapping, got {type(value).__name__}")
    if fields is not None:
        for k in value:
            if k not in fields:
                raise Bad(f"{where}: unknown field '{k}' (known: {', '.join(fields)})")
    return value


def settings_of(value, where, reg):
    """A case's (or the defaults') NAME: value map, names checked against the registry."""
    out = {}
    for name, v in mapping(value, where).items():
        name = str(name)
        if name in CASE_OWN:
            raise Bad(f"{where}: {name} is the case's '{CASE_OWN[name]}' field, not one of its settings")
        if name in RUNNER_OWN:
            raise Bad(f"{where}: {name} is set by the matrix runner (one per run), not by a case")
        if name not in reg:
            raise Bad(f"{where}: unknown setting '{name}' (did you mean {closest(name)}? every setting: README.md, Settings)")
        if not reg[name]["reaches"] & RUN_REACHES:
            raise Bad(f"{where}: {name} does not reach a run (k6/lib/settings.js: {', '.join(sorted(reg[name]['reaches']))})")
        out[name] = scalar(v, f"{where}: {name}")
    return out


def load(path, env, reg):
    where = os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise Bad(f"cannot read the case list {where}: {e.strerror}")
    except yaml.YAMLError as e:
        raise Bad(f"{where} is not valid YAML: {' '.join(str(e).split())}")
    return parse(doc, where, reg)


def only_relations(m, prefixes):
    """RELATIONS: the ratios whose title starts with one of PREFIXES (space-separated), and the
    cases they compare with those cases' baselines; a prefix no title has is bad input."""
    if not prefixes:
        return m
    words = prefixes.split()
    if unknown := [w for w in words if not any(r["title"].startswith(w) for r in m["ratios"])]:
        raise Bad(f"RELATIONS: no ratio of {m['file']} has a title starting with {', '.join(repr(w) for w in unknown)}")
    m["ratios"] = [r for r in m["ratios"] if r["title"].startswith(tuple(words))]
    names = {c for r in m["ratios"] for c in (r["of"], r["to"]) if c}
    names |= {c["baseline"] for c in m["cases"] if c["name"] in names and c["baseline"]}
    m["cases"] = [c for c in m["cases"] if c["name"] in names]
    return m


def parse(doc, where, reg):
    """A case list (its YAML's document) checked and normalised; WHERE names it in errors."""
    mapping(doc, where, TOP_FIELDS)
    m = {"file": where, "title": str(doc.get("title") or Path(where).stem)}
    rounds = doc.get("rounds", 3)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 99:
        raise Bad(f"{where}: rounds must be a whole number from 1 to 99, got '{rounds}'")
    m["rounds"] = rounds
    budget = doc.get("budget")
    if budget is not None and not (isinstance(budget, str) and DURATION.fullmatch(budget) and duration_s(budget) > 0):
        raise Bad(f"{where}: budget must be a duration like 30m or 1h30m, got '{budget}'")
    m["budget"] = budget
    platforms = doc.get("platforms")
    if platforms is not None:
        if not isinstance(platforms, list) or not platforms or any(p not in reg["PLATFORM"]["values"] for p in platforms):
            raise Bad(f"{where}: platforms must be a list of {', '.join(reg['PLATFORM']['values'])}, got {platforms}")
    m["platforms"] = platforms
    m["defaults"] = settings_of(doc.get("defaults") or {}, f"{where}: defaults", reg)

    cases = doc.get("cases")
    if not isinstance(cases, list) or not cases:
        raise Bad(f"{where}: cases must be a list of at least one case")
    m["cases"], names = [], set()
    for i, c in enumerate(cases, 1):
        mapping(c, f"{where}: case {i}", CASE_FIELDS)
        name = str(c.get("name", ""))
        if not NAME.match(name):
            raise Bad(f"{where}: case {i}: name must be lower-case letters, digits and '-', got '{name}'")
        if name in names:
            raise Bad(f"{where}: case '{name}' is listed twice")
        names.add(name)
        at = f"{where}: case '{name}'"
        scenario = c.get("scenario")
        if scenario not in reg["SCENARIO"]["values"]:
            raise Bad(f"{at}: unknown scenario '{scenario}' (known: {', '.join(reg['SCENARIO']['values'])})")
        platform = c.get("platform")
        if platform is not None and platform not in reg["PLATFORM"]["values"]:
            raise Bad(f"{at}: unknown platform '{platform}' (known: {', '.join(reg['PLATFORM']['values'])})")
        variant = c.get("variant")
        m["cases"].append({"name": name, "scenario": scenario, "platform": platform,
                           "variant": None if variant is None else scalar(variant, f"{at}: variant"),
                           "settings": settings_of(c.get("settings") or {}, f"{at}: settings", reg),
                           "group": None if c.get("group") is None else str(c["group"]), "baseline": c.get("baseline")})
    for c in m["cases"]:
        if c["baseline"] is not None and c["baseline"] not in names:
            raise Bad(f"{where}: case '{c['name']}': baseline '{c['baseline']}' is not a case of the list")

    cols = doc.get("columns", DEFAULT_COLUMNS)
    if not isinstance(cols, list) or not cols:
        raise Bad(f"{where}: columns must be a list")
    m["columns"], keys = [], {}
    for i, col in enumerate(cols, 1):
        at = f"{where}: column {i}"
        mapping(col, at, COLUMN_FIELDS)
        kinds = [k for k in COLUMN_KINDS if k in col]
        if len(kinds) != 1:
            raise Bad(f"{at}: give exactly one of {', '.join(COLUMN_KINDS)}")
        col = dict(col, kind=kinds[0], title=str(col.get("title") or col.get("key") or col[kinds[0]]))
        if col["kind"] == "field" and col["field"] not in CASE_ATTRS:
            raise Bad(f"{at}: field must be one of {', '.join(CASE_ATTRS)}, got '{col['field']}'")
        if col["kind"] == "setting" and col["setting"] not in reg:
            raise Bad(f"{at}: unknown setting '{col['setting']}' (did you mean {closest(str(col['setting']))}?)")
        if col["kind"] == "value" and not re.match(r"^[A-Za-z_][^.\s]*(\.[^.\s]+)*$", str(col["value"])):
            raise Bad(f"{at}: value must be a path like result.rps or meta.placement.client_cpus, got '{col['value']}'")
        if col["kind"] in ("value", "vs_baseline"):
            key = col.get("key")
            if not isinstance(key, str) or not NAME.match(key.replace("_", "-")) or key in keys:
                raise Bad(f"{at}: a value column needs a key of its own (letters, digits, '_', '-'), got '{key}'")
            keys[key] = col
        if "scale" in col and (isinstance(col["scale"], bool) or not isinstance(col["scale"], (int, float))):
            raise Bad(f"{at}: scale must be a number, got '{col['scale']}'")
        try:
            format(1.5, str(col.get("format", ".4g")))
        except ValueError:
            raise Bad(f"{at}: format must be a Python format like ',.0f' or '.2f', got '{col['format']}'")
        m["columns"].append(col)
    values = [c for c in m["columns"] if c["kind"] == "value"]
    for col in m["columns"]:
        if col["kind"] == "vs_baseline" and (col["vs_baseline"] not in keys or keys[col["vs_baseline"]]["kind"] != "value"):
            raise Bad(f"{where}: column '{col['title']}': vs_baseline must name a value column's key, got '{col['vs_baseline']}'")
    if values and not any("spread" in c for c in values):
        values[0]["spread"] = True

    m["ratios"] = []
    for i, r in enumerate(doc.get("ratios") or [], 1):
        at = f"{where}: ratio {i}"
        mapping(r, at, RATIO_FIELDS)
        if ("to" in r) == ("per" in r):
            raise Bad(f"{at}: give to (a case) or per (a number), one of them")
        for end in ("of", "to") if "to" in r else ("of",):
            if r.get(end) not in names:
                raise Bad(f"{at}: {end} must name a case of the list, got '{r.get(end)}'")
        per = r.get("per")
        if per is not None and (isinstance(per, bool) or not isinstance(per, (int, float)) or per <= 0):
            raise Bad(f"{at}: per must be a number above 0, got '{per}'")
        column = r.get("column", values[0]["key"] if values else None)
        if column not in keys or keys[column]["kind"] != "value":
            raise Bad(f"{at}: column must name a value column's key, got '{column}'")
        show = r.get("show", "ratio")
        if show not in SHOWS:
            raise Bad(f"{at}: show must be one of {', '.join(SHOWS)}, got '{show}'")
        seed = r.get("seed")
        if seed is not None:
            mapping(seed, f"{at}: seed", SEED_FIELDS)
            if not number(seed.get("figure")) or seed.get("expect") not in EXPECTS:
                raise Bad(f"{at}: seed needs a figure (a number) and expect ({', '.join(EXPECTS)})")
            rng = seed.get("range")
            if rng is not None and not (isinstance(rng, list) and len(rng) == 2 and all(map(number, rng)) and rng[0] < rng[1]):
                raise Bad(f"{at}: seed range must be [low, high], got '{rng}'")
            if seed["expect"] == "equal" and rng is None:
                raise Bad(f"{at}: a seed that expects equal needs the range it calls equal")
            nodes = seed.get("nodes")
            if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2):
                raise Bad(f"{at}: seed nodes (the nodes its mechanism needs) must be a whole number of at least 2, got '{nodes}'")
            seed = {"figure": seed["figure"], "text": str(seed.get("text") or ""), "expect": seed["expect"], "range": rng, "nodes": nodes}
        m["ratios"].append({"title": str(r.get("title") or f"{r['of']} vs {r.get('to', per)}"), "of": r["of"], "to": r.get("to"),
                            "per": per, "column": column, "show": show, "seed": seed})
    return m


def resolve(m, env, reg):
    """Each case's environment, checked as bench.sh checks it, before anything starts."""
    # The settings in the environment that a run or the matrix reads, then each case's own.
    given = [n for n, s in reg.items() if env.get(n) and s["reaches"] & (RUN_REACHES | {"matrix"}) and n != "TESTID"]
    jobs = [{"where": "", "names": given, "env": env}]
    for c in m["cases"]:
        c["env"] = cenv = dict(env)
        for k, v in m["defaults"].items():
            if not cenv.get(k):
                cenv[k] = v
        cenv.update(c["settings"])
        for k in ("platform", "variant"):
            if c[k] is not None:
                cenv[k.upper()] = c[k]
        jobs.append({"where": f"{m['file']}: case '{c['name']}': ", "names": sorted(set(m["defaults"]) | set(c["settings"]) | {"VARIANT"}), "env": cenv})
    check_values(jobs)
    # What every case runs with unless it says otherwise: the defaults, or the environment's.
    m["given"] = {k: env.get(k) or v for k, v in m["defaults"].items()}
    rounds = int(env.get("ROUNDS") or m["rounds"])
    budget = env.get("BUDGET") or (m.get("budget") if not env.get("ROUNDS") else None)
    if budget and not any(r["seed"] for r in m["ratios"]) and "decide" not in m:
        raise Bad(f"{m['file']}: BUDGET runs rounds until the seed relations decide, and this list has none: set ROUNDS")
    m["budget_s"], m["budget_text"] = (duration_s(budget), budget) if budget else (None, None)
    # The case as bench.sh sees it: its platform resolved (ci/lib.sh platform(), the one place)
    # and checked by its driver (variant, target, CPU lists), then the scenario's k6 settings.
    allowed = " ".join(m["platforms"] or [])
    refusal = f"PLATFORM must be {' or '.join(m['platforms'] or [])} for this matrix, got"
    # set -e as in bench.sh: the driver's checks (lab.sh check ...) fail by their exit code.
    check = ('set -euo pipefail\n'
             'command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run \'./task tools\'"\n'
             'load_platform\n'
             '[ -z "$2" ] || [[ " $2 " == *" $PLATFORM "* ]] || die "$3 \'$PLATFORM\'"\n'
             'pf_check "$1"\n'
             'k6_validate "$1"\n'
             'echo "$PLATFORM $VARIANT"')
    for c in m["cases"]:
        r = shell(check, c["scenario"], allowed, refusal, env=c["env"])
        if r.returncode != 0:
            raise Bad(f"{m['file']}: case '{c['name']}': {error_line(r.stderr + r.stdout)}")
        c["platform"], c["variant"] = r.stdout.split()[-2:]
        c["env"].update(PLATFORM=c["platform"], VARIANT=c["variant"])
    return rounds


# --- the runs ------------------------------------------------------------------------------------

def lookup(doc, path):
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def read_run(run, m):
    """A finished run's values (one per value column) and the thresholds it crossed."""
    d = Path(run["dir"])
    try:
        summary = json.loads((d / "summary.json").read_text())
        meta = json.loads((d / "meta.json").read_text())
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


def fmt(v, col):
    if v is None:
        return "—"
    if not number(v):
        return str(v)
    return format(v, col.get("format", ".4g")) + str(col.get("unit", ""))


def blank_run(c, extra, testid, mdir):
    return {"case": c["name"], "testid": testid, "settings": extra, "dir": str(mdir / testid),
            "log": str(mdir / "logs" / f"{testid}.log"), "rc": None, "status": None, "reason": None, "crossed": [], "values": {}}


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
        if run["status"] is None and off and c["platform"] in ("lab", "local") and c["platform"] not in down_on:
            down = subprocess.run(["bash", str(MONITORING_SH), "down"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            if down.returncode != 0:
                run.update(rc=1, status="failed", reason="the platform's monitoring did not go down")
            else:
                down_on.add(c["platform"])
        if not off:
            down_on.discard(c["platform"])
        if run["status"] is None:
            run["rc"] = subprocess.run(["bash", str(BENCH), c["scenario"]], cwd=ROOT, env=env,
                                       stdout=log, stderr=subprocess.STDOUT).returncode
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
    (m["budget_s"]) until every seed relation decides or the budget would end (stopping()).
    Returns the runs in order and whether an interrupt stopped them."""
    (mdir / "logs").mkdir()
    cases, runs, n = m["cases"], [], len(m["cases"])
    first = next((c for c in m["columns"] if c["kind"] == "value"), None)
    budget, started = m.get("budget_s"), time.monotonic()
    last = MAX_ROUNDS if budget else rounds
    try:
        if budget:
            m["noise"] = noise_probe(m, mdir, stamp, first)
        rounds_from = time.monotonic()
        for r in range(1, last + 1):
            for c in cases[(r - 1) % n:] + cases[:(r - 1) % n]:
                testid = f"{c['name']}-r{r}-{stamp}"
                runs.append(dict(blank_run(c, {}, testid, mdir), round=r, order=len(runs) + 1))  # what an interrupt marks
                runs[-1].update(run_one(c, {}, testid, mdir, m, r))
                say("matrix", f"{c['name']} round {r}/{rounds if not budget else '…'}: {outcome(runs[-1], first)}")
            now = time.monotonic()
            if budget and (why := stopping(m, runs, r, now - started, (now - rounds_from) / r, budget)):
                say("matrix", f"stopped after round {r}: {why}")
                m["stopped"] = why
                break
    except KeyboardInterrupt:
        if runs and runs[-1]["status"] is None:
            runs[-1].update(status="failed", reason="interrupted")
        return runs, True
    return runs, False


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
    if r == MAX_ROUNDS:
        return f"{MAX_ROUNDS} rounds"
    return None


def seed_margins(m):
    """Each seed relation's margin: the distance from the seed's figure to where its direction
    flips (1 for higher/lower, its range's edge for equal), as a share of the figure."""
    out = {}
    for r in (r for r in m["ratios"] if r["seed"]):
        sd = r["seed"]
        out[r["title"]] = min(abs(sd["figure"] - e) for e in sd["range"]) / sd["figure"] if sd["expect"] == "equal" \
            else abs(sd["figure"] - 1) / max(sd["figure"], 1)
    return out


def noise_probe(m, mdir, stamp, col):
    """The spread now: NOISE_RUNS runs of NOISE_DURATION of the first case, their CV, and the
    rounds each relation needs for its interval to clear its margin (seed_margins, or the
    runner's m["margins"]: bench:compare's gates): n ~ 2 (1.96 x CV / margin)^2 for a ratio of
    two means (a ratio's variance is the sum of its sides'; at few rounds t exceeds 1.96)."""
    c = m["cases"][0]
    values = []
    for i in range(1, NOISE_RUNS + 1):
        run = run_one(c, {"DURATION": NOISE_DURATION}, f"noise-{i}-{stamp}", mdir, m)
        v = run["values"].get(col["key"]) if col else None
        if number(v):
            values.append(v)
    s = stats(values)
    cv = s.get("cv_percent")
    out = {"case": c["name"], "runs": len(values), "duration": NOISE_DURATION, "cv_percent": cv, "needs": {}}
    for title, margin in (m.get("margins") or seed_margins(m)).items():
        out["needs"][title] = None if not cv or not margin else max(m.get("min_rounds", 2), math.ceil(2 * (1.96 * cv / 100 / margin) ** 2))
    needs = [v for v in out["needs"].values() if v]
    what = m.get("margins_of", "the relations' margins")
    say("matrix", f"noise now: CV {'n/a' if cv is None else f'{cv:.1f} %'} over {len(values)} runs of {NOISE_DURATION} of {c['name']}"
                  + (f"; {what} need {min(needs)}–{max(needs)} alternated rounds (median {sorted(needs)[len(needs) // 2]})" if needs else ""))
    return out


# --- the numbers: medians and spread (ci/report/stats.py), ratios -------------------------

def compute(m, runs):
    by = {c["name"]: c for c in m["cases"]}
    for c in m["cases"]:
        mine = [r for r in runs if r["case"] == c["name"]]
        c["runs"] = mine
        c["counts"] = {s: sum(r["status"] == s for r in mine) for s in ("passed", "crossed", "failed")}
        done = [r for r in mine if r["status"] in ("passed", "crossed")]
        c["stats"] = {col["key"]: stats([r["values"][col["key"]] for r in done if r["values"].get(col["key"]) is not None])
                      for col in m["columns"] if col["kind"] == "value"}

    def median(case, key):
        return by[case]["stats"].get(key, {}).get("median")

    def values(case, key):
        return [v for v in by[case]["stats"].get(key, {}).get("values", []) if number(v)]

    for c in m["cases"]:
        c["vs_baseline"] = {}
        for col in m["columns"]:
            if col["kind"] == "vs_baseline" and c["baseline"]:
                a, b = median(c["name"], col["vs_baseline"]), median(c["baseline"], col["vs_baseline"])
                c["vs_baseline"][col["key"]] = a / b if a is not None and b else None
    def cpus(case):
        return sorted({x["ingress_cpus"] for x in by[case]["runs"] if x["status"] in ("passed", "crossed") and x.get("ingress_cpus")})

    for r in m["ratios"]:
        of, to = values(r["of"], r["column"]), [r["per"]] if r["to"] is None else values(r["to"], r["column"])
        # Sides with different ingress CPU are compared per CPU of it, as seed 002 does (each
        # probed its own share, INGRESS_CPU=auto); with the same (or a side whose CPU varied
        # over its rounds), on the column itself.
        r["judged_on"] = {"column": r["column"], "per_ingress_cpu": False}
        if r["to"] and len(cpus(r["of"])) == len(cpus(r["to"])) == 1 and cpus(r["of"]) != cpus(r["to"]):
            per_cpu = [[x["per_cpu"] for x in by[c]["runs"] if x["status"] in ("passed", "crossed") and number(x.get("per_cpu"))]
                       for c in (r["of"], r["to"])]
            if all(per_cpu):
                of, to = per_cpu
                r["judged_on"] = {"column": r["column"], "per_ingress_cpu": True, "cpus": [cpus(r["of"]), cpus(r["to"])]}
        judge_ratio(r, of, to)
        cvs = [stats(v).get("cv_percent") for v in (of, to if r["to"] else [])]
        r["spread"] = max((x for x in cvs if x is not None), default=None)  # the sides' larger CV, %
        # A seed whose mechanism needs more nodes than its runs had (each run's meta.json):
        # the ratio is still measured and shown, but it cannot say whether the seed holds.
        need = r["seed"] and r["seed"]["nodes"]
        had = [x["nodes"] for c in (r["of"], r["to"]) if c for x in by[c]["runs"] if x.get("nodes")] if need else []
        if need and had and min(had) < need:
            r["holds"] = "not here"
            r["not_here"] = f"needs {need} nodes, ran on {min(had):g}"
        # A case some of whose runs measured the client (the verdict's limit, bench.sh's
        # summary.json: verdict.limit, when a column reads it).
        r["client_bound"] = [c for c in (r["of"], r["to"]) if c and "load-generator" in by[c]["stats"].get("limit", {}).get("text", [])]


def judge_ratio(r, of, to):
    """A ratio's median, interval and text; with a seed, whether its direction holds."""
    iv = ratio_interval(of, to)
    r["interval"] = iv
    r["value"] = iv and iv["ratio"]
    if iv is None:
        r["text"] = f"n/a (no finished run of {r['of'] if not of else r['to']})"
    elif r["show"] == "ratio":
        r["text"] = f"{iv['ratio']:.2f}x (95 % interval {iv['low']:.2f}–{iv['high']:.2f})"
    else:
        r["text"] = f"{(1 - iv['ratio']) * 100:.1f} % (95 % interval {(1 - iv['high']) * 100:.1f}–{(1 - iv['low']) * 100:.1f})"
    seed = r["seed"]
    if not seed:
        return
    if iv is None or min(len(of), len(to) if r["to"] else 2) < 2:
        r["holds"] = "undecided"  # one round has no spread to judge by
    elif seed["expect"] == "equal":
        lo, hi = seed["range"]
        r["holds"] = "yes" if lo <= iv["low"] and iv["high"] <= hi else "no" if iv["high"] < lo or iv["low"] > hi else "undecided"
    else:
        above, below = iv["low"] > 1, iv["high"] < 1
        r["holds"] = ("yes" if above else "no" if below else "undecided") if seed["expect"] == "higher" else \
            ("yes" if below else "no" if above else "undecided")
    rng = seed["range"]
    r["in_range"] = None if iv is None or rng is None else rng[0] <= iv["ratio"] <= rng[1]


def runs_cell(c):
    n = len(c["runs"])
    k = c["counts"]
    if not k["crossed"] and not k["failed"]:
        return f"{k['passed']}/{n} passed"
    return ", ".join(f"{k[s]}/{n} {s}" for s in ("crossed", "failed", "passed") if k[s])


def markdown(m, rounds, mdir, interrupted):
    given = m["given"]
    lines = [f"{m['title']}: median of {rounds} round{'s' if rounds > 1 else ''}, the cases' order rotated each round; "
             f"{' '.join(f'{k}={v}' for k, v in given.items())}{'; ' if given else ''}{CPUS} CPUs"]
    groups = list(dict.fromkeys(c["group"] for c in m["cases"]))
    for g in groups:
        lines += [""] + ([g, ""] if g else [])
        head = ["case"]
        for col in m["columns"]:
            if col["kind"] == "value" and col.get("spread"):
                head += [f"{col['title']} (median)", "min–max", "CV"]
            else:
                head.append(col["title"])
        head.append("runs")
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in (c for c in m["cases"] if c["group"] == g):
            row = [c["name"]]
            for col in m["columns"]:
                kind = col["kind"]
                if kind == "field":
                    row.append(str(c[col["field"]]))
                elif kind == "setting":
                    row.append(c["env"].get(col["setting"]) or "—")
                elif kind == "vs_baseline":
                    v = c["vs_baseline"].get(col["key"])
                    row.append("—" if v is None else f"{v:.2f}x")
                else:
                    s = c["stats"][col["key"]]
                    if "text" in s:
                        row.append(" / ".join(s["text"]))
                    else:
                        row.append(fmt(s.get("median"), col))
                    if col.get("spread"):
                        both = "median" in s
                        row.append(f"{fmt(s['min'], col)}–{fmt(s['max'], col)}" if both else "—")
                        row.append("—" if not both or s["cv_percent"] is None else f"{s['cv_percent']:.1f}%")
            row.append(runs_cell(c))
            lines.append("| " + " | ".join(row).replace("\n", " ") + " |")
    notes = [f"- {r['title']}: {r['text']}, on {judged_on(r)}" for r in m["ratios"] if not r["seed"]]
    lines += relations_table(m)
    for c in m["cases"]:
        crossed = [r for r in c["runs"] if r["status"] == "crossed"]
        if crossed:
            what = sorted({t for r in crossed for t in r["crossed"]})
            notes.append(f"- {c['name']} crossed a threshold in round{'s' if len(crossed) > 1 else ''} "
                         f"{', '.join(str(r['round']) for r in crossed)}: {'; '.join(what) or 'see its summary.txt'}")
        for r in c["runs"]:
            if r["status"] == "failed":
                notes.append(f"- {c['name']} round {r['round']} failed: {r['reason']} (log: {os.path.relpath(r['log'], mdir)})")
    if interrupted:
        notes.append("- interrupted: the rounds after the last run listed did not run")
    lines += [""] + notes if notes else []
    lines += ["", f"Results: {mdir}/ (table.md, matrix.json; each run's directory and logs/)"]
    return "\n".join(lines) + "\n"


def rounds_of(r, by):
    """The rounds a ratio's cases ran (finished or not)."""
    return max((x["round"] for c in (r["of"], r["to"]) if c for x in by[c]["runs"] if x.get("round")), default=0)


def judged_on(r):
    """What a ratio divides: the column's figure, or that figure per ingress CPU (each side's
    CPU said) when the sides had different CPU."""
    j = r.get("judged_on") or {}
    if not j.get("per_ingress_cpu"):
        return j.get("column", "")
    of, to = ("/".join(format(x, "g") for x in side) for side in j["cpus"])
    return f"{j['column']} per ingress CPU ({of} vs {to} CPU)"


def relations_table(m):
    """The ratios that hold a seed's figure: the seed's, the measured one, and what they say."""
    rows = [r for r in m["ratios"] if r["seed"]]
    if not rows:
        return []
    by = {c["name"]: c for c in m["cases"]}

    def cv(case, key):
        v = by[case]["stats"].get(key, {}).get("cv_percent")
        return "—" if v is None else f"{v:.0f} %"

    out = ["", "Relations to the seeds (each a ratio of geometric means; the interval is Welch's t 95 % one; "
           "\"undecided\": the interval straddles what the seed says, too much spread to tell):", "",
           "| relation | seed | seed says | measured | 95 % interval | direction holds | in the seed's range | CV of / to | judged on | rounds |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sd, iv = r["seed"], r["interval"]
        says = {"higher": "above 1", "lower": "below 1", "equal": "equal"}[sd["expect"]]
        if sd["range"]:
            says += f" ({sd['range'][0]:g}–{sd['range'][1]:g})"
        seed = f"{sd['figure']:g}×" + (f" ({sd['text']})" if sd["text"] else "")
        got = "—" if not iv else f"{iv['ratio']:.2f}×"
        span = "—" if not iv else f"{iv['low']:.2f}–{iv['high']:.2f}"
        rng = {None: "—", True: "yes", False: "no"}[r.get("in_range")]
        spread = f"{cv(r['of'], r['column'])} / {cv(r['to'], r['column']) if r['to'] else 'constant'}"
        holds = r.get("holds", "undecided") + (f" ({r['not_here']})" if r.get("not_here") else "")
        n = rounds_of(r, by)
        if r.get("holds", "undecided") == "undecided":
            noise = (m.get("noise") or {}).get("cv_percent")
            now = r.get("spread") if r.get("spread") is not None else noise
            holds = f"undecided after {n} round{'s' if n != 1 else ''}, spread {'n/a' if now is None else f'{now:.1f} %'}"
        out.append(f"| {r['title']} | {seed} | {says} | {got}{' ⚠' if r.get('client_bound') else ''} | {span} | "
                   f"{holds} | {rng} | {spread} | {judged_on(r)} | {r.get('decided_at') or n} |")
    bound = sorted({c for r in rows for c in r.get("client_bound") or []})
    if bound:
        out += ["", f"⚠ the load generator was the limit (verdict not valid) in runs of {', '.join(bound)}: "
                "those figures measure k6, and a ratio with them understates the servers' difference"]
    return out


def run_listing(runs, mdir):
    out = ["", "Runs, in the order they ran:", "", "| # | case | round | status | directory |", "|---|---|---|---|---|"]
    for r in runs:
        status = r["status"] + (f": {r['reason']}" if r["reason"] else "")
        where = f"{os.path.relpath(r['dir'], mdir)}/" if r["dir"] else "none (the run stopped before it made one)"
        out.append(f"| {r['order']} | {r['case']} | {r['round']} | {status} | {where} |")
    return "\n".join(out) + "\n"


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
        raise Bad("name a case list: MATRIX=path.yaml (ci/run/matrices/ holds the seeds' lists)")
    check_values([{"where": "", "names": ["RELATIONS"], "env": env}])  # before it picks cases
    m = only_relations(load(Path(path).resolve(), env, reg), env.get("RELATIONS"))
    rounds = resolve(m, env, reg)
    if check_only:  # the plan, checked; nothing started
        for c in m["cases"]:
            settings = " ".join(f"{k}={v}" for k, v in {**m["given"], **c["settings"]}.items())
            print(f"{c['name']}: {c['scenario']} on {c['platform']}, {c['variant']}{', ' if settings else ''}{settings}")
        print(f"{len(m['cases'])} cases × {rounds} rounds")
        return 0
    rc, _ = run_matrix(m, env, rounds, Path(path).stem, Path(path).read_text())
    return rc


def run_matrix(m, env, rounds, name, cases_text):
    """Runs the checked matrix m into RESULTS_ROOT/<name>-<time>/ (its case list kept there as
    cases.yaml), writes table.md and matrix.json, prints the table; returns (exit code, the
    matrix.json document). The runners built on this one (compare, sweep, seeds) add theirs."""
    if os.geteuid() != 0 and any(c["platform"] in ("lab", "local") for c in m["cases"]):
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
