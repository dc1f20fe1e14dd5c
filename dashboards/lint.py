"""Dashboard linter: python dashboards/lint.py [FILE.json...] (default: every dashboards/*.json).
Prints one line per problem and exits 1 if there is any.

The rules keep a dashboard portable to any Grafana and any platform: a fixed uid; the datasource
variable on every panel, target, variable and annotation (never one instance's datasource uid);
a testid variable and a run annotation; unique panel ids; a unit on every panel that queries;
only defined variables; metric names from the signal contract only (bench:* rules, k6_* series);
and every k6 panel or annotation query filtered on the selected run.

queries(dashboard, testid) returns every query as PromQL with the variables filled in for one
run, to prove against a live Prometheus that each panel has data.
"""
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "monitoring"))
import signals as contract  # noqa: E402  (monitoring/signals.py: the signal contract)

DATASOURCE_VARIABLE = {"${datasource}", "$datasource"}

# Grafana's three variable forms: ${name} or ${name:format}, $name, [[name]] (deprecated).
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
# Label lists of aggregations and vector matching: label names, not metrics.
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", re.I)
# A bare {matchers} or [range] is skipped; a name followed by "(" is a function.
_TOKEN = re.compile(r"(\{[^}]*\}|\[[^\]]*\])|(?<![\w:.$])([A-Za-z_:][\w:]*)(?![\w:])\s*(\{[^}]*\})?(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
             "by", "without", "on", "ignoring", "group_left", "group_right"}
_LABEL_VALUES = re.compile(r"^\s*label_values\((.+),\s*(\w+)\s*\)\s*$", re.S)
_RUN_FILTER = re.compile(r'\btestid\s*=~?\s*"[^"]*\$testid\b')


def contract_rules(root=ROOT):
    """The bench:* names a dashboard may read: the signals of the contract (monitoring/signals.yaml),
    which every platform records. Its internal helpers stay out: not every platform has them."""
    return set(contract.public(contract.load(root)))


def variables_in(text):
    return [next(g for g in m.groups() if g) for m in _VARIABLE.finditer(text)]


def selectors(expr):
    """(metric name, {matchers} or "") of every series selector in a PromQL expression. String
    literals shrink to the variables they hold, so "${testid}" cannot end a {matchers} early."""
    expr = _STRING.sub(lambda m: '"' + "".join(f"${v}" for v in variables_in(m.group())) + '"', expr)
    return [(m[2], m[3] or "") for m in _TOKEN.finditer(_GROUPING.sub(" ", expr))
            if m[2] and m[2].lower() not in _KEYWORDS]


def _panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # a collapsed row holds its panels


def _sources(dash):
    """(kind, where, object, PromQL or None) for everything that names a datasource: panels (no
    query of their own), their targets, query variables, annotations. label_values(), Grafana's
    and not PromQL, becomes the PromQL query that returns the same label values: those of the
    series present anywhere in the time range (Grafana asks the series API for the range)."""
    for p in _panels(dash):
        where = f'panel {p.get("id")} "{p.get("title", "")}"'
        if p.get("targets") or p.get("datasource"):
            yield "panel", where, p, None
        for t in p.get("targets", []):
            yield "target", f"{where} target {t.get('refId')}", t, t.get("expr", "")
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query") or ""
            q = q.get("query", "") if isinstance(q, dict) else q
            yield "variable", f"variable {v.get('name')}", v, _LABEL_VALUES.sub(r"group by (\2) (last_over_time(\1[$__range]))", q)
    for a in dash.get("annotations", {}).get("list", []):
        if not a.get("builtIn"):  # Grafana's own annotations, on its own store
            yield "annotation", f'annotation "{a.get("name")}"', a, a.get("expr", "")


def _check_expr(expr, allowed, defined, run_filter):
    if not expr.strip():
        return ["empty query"]
    problems = [f"undefined variable ${v}" for v in variables_in(expr) if v not in defined and not v.startswith("__")]
    for name, matchers in selectors(expr):
        if not name.startswith("k6_") and name not in allowed:
            problems.append(f"{name} is neither a bench:* rule of the contract nor a k6_* series "
                            "(monitoring/signals.yaml)")
        elif name.startswith("k6_") and run_filter and not _RUN_FILTER.search(matchers):
            problems.append(f'{name} is not filtered on the selected run (testid=~"$testid")')
    return problems


def lint(dash, allowed):
    """Problems of one dashboard (a parsed JSON dict), given the allowed bench:* names."""
    problems = []
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(dash.get("uid") or "")):
        problems.append(f"uid {dash.get('uid')!r}: set a fixed uid (1-40 letters, digits, '-', '_')")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no variable 'datasource' of type datasource for prometheus")
    if variables.get("testid", {}).get("type") != "query":
        problems.append("no query variable 'testid' to select a run")
    if not any(kind == "annotation" and expr for kind, _, _, expr in _sources(dash)):
        problems.append("no annotation marking the runs")
    ids = Counter(p.get("id") for p in _panels(dash))
    problems += [f"panel id {i} is used by {n} panels" for i, n in ids.items() if n > 1 or i is None]
    for kind, where, obj, expr in _sources(dash):
        ref = obj.get("datasource")
        if (ref.get("uid") if isinstance(ref, dict) else ref) not in DATASOURCE_VARIABLE:
            problems.append(f"{where}: datasource {json.dumps(ref)} is not the variable ${{datasource}}")
        if kind == "panel" and not obj.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            problems.append(f"{where}: no unit")
        if expr is not None:
            problems += [f"{where}: {p}" for p in _check_expr(expr, allowed, variables, kind != "variable")]
    return problems


def queries(dash, testid, interval="20s", **values):
    """[(where, PromQL)] of every panel target, query variable and annotation, with the variables
    set for one run: $testid to testid, $__rate_interval and $__interval to interval (Grafana's
    rate interval is at least 4 scrape intervals; k6 writes every 5 s), a variable with an "All"
    option to its all-value unless values names it. ValueError for a variable left without one."""
    known = {v["name"]: v["allValue"] for v in dash.get("templating", {}).get("list", [])
             if v.get("includeAll") and v.get("allValue")}
    # $__range: the dashboard's time range (the run-wide stats), 5 minutes unless values sets it.
    known.update({"testid": testid, "__rate_interval": interval, "__interval": interval, "__range": "5m", **values})

    def value(m):
        name = next(g for g in m.groups() if g)
        if name not in known:
            raise ValueError(f"no value for ${name}: pass {name}=... to queries()")
        return known[name]
    return [(where, _VARIABLE.sub(value, expr)) for _, where, _, expr in _sources(dash) if expr is not None]


def main(argv):
    paths = [Path(a) for a in argv] or sorted(HERE.glob("*.json"))
    allowed = contract_rules()
    problems = []
    for path in paths:
        try:
            dash = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{os.path.relpath(path)}: cannot read: {e}")
            continue
        problems += [f"{os.path.relpath(path)}: {p}" for p in lint(dash, allowed)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
