"""bench/run/cases.py: a matrix's case list, read and checked before anything starts (the runner:
bench/run/matrix.py; its numbers and tables: bench/run/tables.py). Every setting's name and value is
checked against the registry (bench/settings/settings.yaml, through bench/settings/settings.tsv and node),
and each case as bench/run/bench.sh would check it (the platform's driver: pf_check, then
k6_validate). Bad input is one line `error: ...`, exit 1, nothing started or written.

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
      variant: nginx-lb-...  optional: else VARIANT, else the platform's default
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
                           means with its Welch t 95 % interval (bench/report/stats.py):
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
import functools
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

TOP_FIELDS = ("title", "rounds", "budget", "platforms", "defaults", "cases", "columns", "ratios")
CASE_FIELDS = ("name", "scenario", "platform", "variant", "settings", "group", "baseline")
COLUMN_FIELDS = ("key", "title", "field", "setting", "value", "vs_baseline", "scale", "format", "unit", "spread")
COLUMN_KINDS = ("field", "setting", "value", "vs_baseline")
RATIO_FIELDS = ("title", "of", "to", "per", "column", "show", "seed")
SEED_FIELDS = ("figure", "text", "expect", "range", "nodes")
EXPECTS = ("higher", "lower", "equal")
CASE_ATTRS = ("name", "scenario", "platform", "variant")
SHOWS = ("ratio", "percent_below")
# A case's settings are carried to its run: those that reach one (bench/run/bench.sh and what it
# calls). The registry's other paths (calibrate, report, the matrix itself) mean nothing there.
RUN_REACHES = {"k6", "pods", "lab", "deploy", "monitoring", "distributed"}
CASE_OWN = {"PLATFORM": "platform", "VARIANT": "variant", "SCENARIO": "scenario"}
RUNNER_OWN = ("TESTID", "RESULTS_ROOT")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
CPUS = len(os.sched_getaffinity(0))
PLACEHOLDERS = {"{last_cpu}": str(CPUS - 1), "{cpus}": str(CPUS)}
DEFAULT_COLUMNS = [{"title": "platform", "field": "platform"}, {"title": "variant", "field": "variant"},
                   {"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]
DURATION = re.compile(r"(?:\d+(?:ms|s|m|h))+")


class Bad(Exception):
    """Bad input: one line, before anything starts."""


def duration_s(text):
    """A k6 duration (30s, 1m30s, 1500ms, 2h) in seconds; Bad on anything else. The one parser
    of Python (k6/lib/settings.js durationMs and bash's duration_ms are the others: one table
    of cases in ci/tests/test_settings.py holds all three)."""
    if not isinstance(text, str) or not re.fullmatch(r"(\d+(ms|s|m|h))+", text):
        raise Bad(f"{text!r} is not a duration like 30s, 1m30s or 1500ms")
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", text))


def say(tag, text):
    print(f"{tag:<13} {text}", file=sys.stderr, flush=True)


def shell(script, *args, env=None):
    """bash with bench/lib.sh sourced: SCRIPT, its positional parameters ARGS."""
    return subprocess.run(["bash", "-c", f'. "{ROOT}/bench/lib.sh" || exit 1\n{script}', "matrix", *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True)


@functools.lru_cache(maxsize=1)
def envoy_own():
    """Envoy's own listeners and connection managers in its statistics (its admin, Envoy
    Gateway's stats and readiness ones), never a client's: bench/lib/k6.sh ENVOY_OWN_STATS."""
    return re.compile(shell('printf %s "$ENVOY_OWN_STATS"').stdout)


def enter_client_side(env):
    """This process again where the platform's client side runs (pf_client_netns: on our cluster
    the client node's network namespace, the cluster brought up first), for a runner that
    reaches the cluster's addresses itself; nothing on other platforms or when there."""
    r = shell("load_platform && pf_client_netns", env=env)
    if r.returncode != 0:
        raise Bad(error_line(r.stderr + r.stdout))
    ns = (r.stdout.strip().splitlines() or [""])[-1]
    if ns and os.stat("/proc/self/ns/net").st_ino != os.stat(ns).st_ino:
        os.execvp("nsenter", ["nsenter", f"--net={ns}", sys.executable, *sys.argv])


def error_line(text):
    """The one-line error a script said (its last `error:` line), without the prefix."""
    lines = [l[len("error: "):] for l in text.splitlines() if l.startswith("error: ")]
    return lines[-1] if lines else (text.strip().splitlines() or [""])[-1]


# --- the settings registry (bench/settings/settings.yaml) -------------------------------------

REGISTRY = ROOT / "bench/settings/settings.yaml"


@functools.lru_cache(maxsize=None)
def registry_doc():
    # libyaml's safe loader where PyYAML has it: 0.05 s for the registry, not 0.3
    return yaml.load(REGISTRY.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def registry():
    """The user settings by name, as the registry declares them: the paths each reaches, its
    default ('' for none), its values (enum, list), type and entry points' own defaults."""
    doc = registry_doc()
    lists = {"scenarios": doc["scenarios"], "payloads": list(doc["payloads"])}
    return {s["name"]: {"reaches": set(s["reaches"]), "default": s.get("default") or "", "type": s["type"],
                        "values": lists[s["values"]] if isinstance(s.get("values"), str) else s.get("values") or [],
                        "defaults": dict(s.get("defaults") or {})} for s in doc["settings"]}


def traits(platform):
    """A platform's traits as its driver declares them (bench/platforms/drivers/PLATFORM.sh,
    PF_TRAITS: root, k6, cluster, monitoring; bench/platforms/driver.sh says what each means)."""
    m = re.search(r"^PF_TRAITS='(.*)'$", (ROOT / f"bench/platforms/drivers/{platform}.sh").read_text(), re.M)
    return dict(t.split("=", 1) for t in m.group(1).split())


def platforms(**want):
    """The platforms whose traits have the values given (cluster="own", or a tuple of values
    accepted: cluster=("own", "none")), in the registry's order."""
    return [p for p in registry()["PLATFORM"]["values"]
            if all(traits(p)[k] in (v if isinstance(v, tuple) else (v,)) for k, v in want.items())]


def default_of(name, entry=None):
    """NAME's default for the entry point ENTRY (its own where the registry declares one)."""
    s = registry()[name]
    return s["defaults"].get(entry, s["default"]) if entry else s["default"]


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
            raise Bad(f"{where}: unknown setting '{name}' (did you mean {closest(name)}? every setting: docs/reference/settings.md)")
        if not reg[name]["reaches"] & RUN_REACHES:
            raise Bad(f"{where}: {name} does not reach a run (bench/settings/settings.yaml: {', '.join(sorted(reg[name]['reaches']))})")
        out[name] = scalar(v, f"{where}: {name}")
    return out


def side_settings(env, side, reg):
    """The settings given for one side of a comparison only, SIDE_NAME=value (BASE_TARGET,
    FROM_INGRESS_PODS, ...) for NAME a setting a run reads: {NAME: value}, checked as a case's."""
    given = {k[len(side) + 1:]: v for k, v in env.items() if k.startswith(side + "_") and v}
    return settings_of({k: v for k, v in given.items() if k in reg}, side, reg)


def at_once(jobs):
    """Each of JOBS ({name: callable}) in a thread of its own (each waits on a cluster): their
    results by name; the first Bad raised again, with its name."""
    out, errors = {}, {}

    def run(k, f):
        try:
            out[k] = f()
        except Bad as e:
            errors[k] = e
    threads = [threading.Thread(target=run, args=kv) for kv in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in jobs:
        if k in errors:
            raise Bad(f"{k}: {errors[k]}")
    return out


def existing_checked(env):
    """An ingress you run (INGRESS_PODS), checked as its run checks it before the load: its
    pods, its backends', its Prometheus, its counter, its TARGET's requests counted by its pods
    (bench/lib/existing.sh), its lines said."""
    r = shell('set -euo pipefail; load_platform; existing_platform; pf_check rps; need_external_cluster "loads an ingress you run on"\n'
              'existing_up; [ "${IB_TARGET_CHECKED:-}" = 1 ] || existing_target', env=env)
    sys.stderr.write("".join(l + "\n" for l in r.stderr.splitlines() if l.startswith("existing ")))
    return r


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
    """RELATIONS: the ratios whose title, or the name of the case they measure (`of`), starts
    with one of PREFIXES (space-separated), and the cases they compare with those cases'
    baselines; a prefix no ratio has is bad input."""
    if not prefixes:
        return m
    words = tuple(prefixes.split())

    def picked(r, w):
        return r["title"].startswith(w) or (r.get("of") or "").startswith(w)
    if unknown := [w for w in words if not any(picked(r, w) for r in m["ratios"])]:
        raise Bad(f"RELATIONS: no ratio of {m['file']} has a title or case starting with {', '.join(repr(w) for w in unknown)}")
    return keep_relations(m, lambda r: any(picked(r, w) for w in words))


def keep_relations(m, pick):
    """M with only the ratios PICK takes, and the cases they compare with those cases' baselines."""
    m["ratios"] = [r for r in m["ratios"] if pick(r)]
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
    m["cases"] = parse_cases(doc.get("cases"), where, reg)
    m["columns"], keys = parse_columns(doc.get("columns", DEFAULT_COLUMNS), where, reg)
    m["ratios"] = parse_ratios(doc.get("ratios") or [], where, {c["name"] for c in m["cases"]}, keys)
    return m


def parse_cases(cases, where, reg):
    """The list's cases, each checked: name, scenario, platform, variant, settings, baseline."""
    if not isinstance(cases, list) or not cases:
        raise Bad(f"{where}: cases must be a list of at least one case")
    out, names = [], set()
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
        out.append({"name": name, "scenario": scenario, "platform": platform,
                    "variant": None if variant is None else scalar(variant, f"{at}: variant"),
                    "settings": settings_of(c.get("settings") or {}, f"{at}: settings", reg),
                    "group": None if c.get("group") is None else str(c["group"]), "baseline": c.get("baseline")})
    for c in out:
        if c["baseline"] is not None and c["baseline"] not in names:
            raise Bad(f"{where}: case '{c['name']}': baseline '{c['baseline']}' is not a case of the list")
    return out


def parse_columns(cols, where, reg):
    """The table's columns, each checked, and the value columns by key: (columns, keys)."""
    if not isinstance(cols, list) or not cols:
        raise Bad(f"{where}: columns must be a list")
    out, keys = [], {}
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
        out.append(col)
    values = [c for c in out if c["kind"] == "value"]
    for col in out:
        if col["kind"] == "vs_baseline" and (col["vs_baseline"] not in keys or keys[col["vs_baseline"]]["kind"] != "value"):
            raise Bad(f"{where}: column '{col['title']}': vs_baseline must name a value column's key, got '{col['vs_baseline']}'")
    if values and not any("spread" in c for c in values):
        values[0]["spread"] = True
    return out, keys


def parse_ratios(ratios, where, names, keys):
    """The ratios between cases (or per a number), each with its seed's figure when it has one."""
    values = [c for c in keys.values() if c["kind"] == "value"]
    out = []
    for i, r in enumerate(ratios, 1):
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
            # A figure is the seed's number; a claim of the project's own (bench/run/claims.yaml)
            # may state a direction alone.
            if ("figure" in seed and not number(seed["figure"])) or seed.get("expect") not in EXPECTS:
                raise Bad(f"{at}: seed needs expect ({', '.join(EXPECTS)}) and, if it has a figure, a number")
            rng = seed.get("range")
            if rng is not None and not (isinstance(rng, list) and len(rng) == 2 and all(map(number, rng)) and rng[0] < rng[1]):
                raise Bad(f"{at}: seed range must be [low, high], got '{rng}'")
            if seed["expect"] == "equal" and rng is None:
                raise Bad(f"{at}: a seed that expects equal needs the range it calls equal")
            nodes = seed.get("nodes")
            if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2):
                raise Bad(f"{at}: seed nodes (the nodes its mechanism needs) must be a whole number of at least 2, got '{nodes}'")
            seed = {"figure": seed.get("figure"), "text": str(seed.get("text") or ""), "expect": seed["expect"], "range": rng, "nodes": nodes}
        out.append({"title": str(r.get("title") or f"{r['of']} vs {r.get('to', per)}"), "of": r["of"], "to": r.get("to"),
                    "per": per, "column": column, "show": show, "seed": seed})
    return out


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
    # The case as bench.sh sees it: its platform resolved (bench/lib.sh platform(), the one place)
    # and checked by its driver (variant, target, CPU lists), then the scenario's k6 settings.
    allowed = " ".join(m["platforms"] or [])
    refusal = f"PLATFORM must be {' or '.join(m['platforms'] or [])} for this matrix, got"
    # set -e as in bench.sh: the driver's checks (lab.sh check ...) fail by their exit code.
    check = ('set -euo pipefail\n'
             'command -v k6 >/dev/null || die "k6 $K6_VERSION is not installed: run \'./task tools\'"\n'
             'load_platform\n'
             '[ -z "$2" ] || [[ " $2 " == *" $PLATFORM "* ]] || die "$3 \'$PLATFORM\'"\n'
             'pf_check "$1"\n'
             # as the pods see it where k6 runs in pods (distributed.sh): a Service name is theirs
             '[ "$(pf_trait k6)" != pods ] || export KUBERNETES_SERVICE_HOST=${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc}\n'
             'k6_validate "$1"\n'
             'echo "$PLATFORM $VARIANT"')
    for c in m["cases"]:
        r = shell(check, c["scenario"], allowed, refusal, env=c["env"])
        if r.returncode != 0:
            raise Bad(f"{m['file']}: case '{c['name']}': {error_line(r.stderr + r.stdout)}")
        c["platform"], c["variant"] = r.stdout.split()[-2:]
        c["env"].update(PLATFORM=c["platform"], VARIANT=c["variant"])
    return rounds


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)
