"""The signal contract (monitoring/signals.yaml), loaded and checked: what the Python consumers
import. monitoring/generate.py writes the rule files, k6/lib/signals.js and the README table
from the same data.

  load(root)            the contract: {"window", "groups", "platforms", "signals"}, validated
  public(c)             the records consumers may read (not the internal helpers)
  report_signals(root)  summary key -> (unit, record, meaning), bench/report.py's SIGNALS
  saturation(root)      record -> the verdict's saturation level (dashboards/generate.py)
  inlined(c, p, record) the rule's expression on platform p with every bench:* rule it reads
                        written out: the same value as one query, without the rules loaded
  fill(expr, **values)  an expression's $placeholders filled in

Bad data raises ContractError with one line naming the signal. Needs only PyYAML."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FILE = "monitoring/signals.yaml"
PLATFORMS = ("cluster", "lab", "existing")
# What an expression may leave to be filled in, per platform: the window everywhere; on an
# existing ingress also its pods', the backends' and the runners' label matchers, those of its
# nodes' node-exporters and NIC devices, and the declared link capacity, known only when a run
# begins (monitoring/rulefile.py existing, k6/lib/correlation.js).
PLACEHOLDERS = {"cluster": {"window"}, "lab": {"window"}, "existing": {"window", "ingress", "backend", "loadgen", "link", "nodes", "nic"}}
PLACEHOLDER = re.compile(r"\$([a-z]+)")
# unit -> the report's formatting code (bench/report.py f_signal).
UNITS = {"cores": "cores", "0–1": "ratio", "req/s": "rate", "req/s per core": "rate",
         "connections": "count", "bit/s": "bits", "packets/s": "pps"}
# A recording rule's name: level:metric:operations (Prometheus' naming convention).
RECORD = re.compile(r"bench:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*")
FIELDS = {"record", "key", "labels", "unit", "meaning", "source", "expr", "note", "internal", "group",
          "saturation", "verdict"}


class ContractError(ValueError):
    pass


def per_platform(value):
    """A field given once for every platform, or per platform: {platform: text} (absent: None)."""
    if isinstance(value, dict):
        return {p: value.get(p) for p in PLATFORMS}
    return {p: value for p in PLATFORMS}


def window_seconds(c):
    return int(c["window"][:-1])


def interval_seconds(c):
    """How often the signals' group is evaluated on the project's platforms."""
    return int(c["groups"][0]["interval"][:-1])


def window_for(c, interval):
    """The rules' window at another evaluation (and scrape) interval: as many samples as the
    contract's window holds at its own (three)."""
    return interval * window_seconds(c) // interval_seconds(c)


def load(root=ROOT):
    # libyaml's safe loader where PyYAML has it: a run's report steps read the contract often
    c = yaml.load((Path(root) / FILE).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    _validate(c)
    return c


def _validate(c):
    def bad(what):
        raise ContractError(f"{FILE}: {what}")
    if not re.fullmatch(r"[1-9][0-9]*s", str(c.get("window"))):
        bad(f"window {c.get('window')!r}: a whole number of seconds, as '6s'")
    groups = [g["name"] for g in c["groups"]]
    records = {}
    for i, s in enumerate(c["signals"]):
        rec = s.get("record", f"signal #{i + 1}")
        if not RECORD.fullmatch(str(rec)):
            bad(f"{rec}: a record is named bench:<level>:<operation>")
        if rec in records:
            bad(f"{rec} is listed twice")
        if set(s) - FIELDS:
            bad(f"{rec}: unknown fields {sorted(set(s) - FIELDS)}")
        s.setdefault("group", groups[0])
        if s["group"] not in groups:
            bad(f"{rec}: group {s['group']!r} is not one of {groups}")
        records[rec] = s
    seen, keys, orders = set(), set(), set()
    for s in c["signals"]:
        rec = s["record"]
        if not s.get("meaning"):
            bad(f"{rec}: no meaning")
        if "unit" in s and s["unit"] not in UNITS:
            bad(f"{rec}: unit {s['unit']!r} is not one of {list(UNITS)}")
        if isinstance(s.get("expr"), dict) and set(s["expr"]) - set(PLATFORMS):
            bad(f"{rec}: expr for unknown platforms {sorted(set(s['expr']) - set(PLATFORMS))}")
        exprs = per_platform(s.get("expr"))
        if not s.get("internal"):
            missing = [p for p, e in exprs.items() if not e]
            if missing:
                bad(f"{rec}: no expr for {', '.join(missing)} (every signal consumers read is on every platform)")
            if "unit" not in s or not s.get("source"):
                bad(f"{rec}: no unit or no source (the README's words for how each platform computes it)")
        elif s.get("key") or s.get("saturation") is not None:
            bad(f"{rec}: an internal helper has no summary key and no saturation level")
        for p, e in exprs.items():
            if not e:
                continue
            extra = sorted(set(PLACEHOLDER.findall(e)) - PLACEHOLDERS[p])
            if extra or "$" in PLACEHOLDER.sub("", e):
                bad(f"{rec}: expr for {p} holds a '$' other than "
                    f"{', '.join('$' + n for n in sorted(PLACEHOLDERS[p]))}")
            for dep in sorted(set(RECORD.findall(e)) - {rec}):
                if dep not in records:
                    bad(f"{rec} reads {dep}, which is not a signal of the contract")
                if not per_platform(records[dep].get("expr"))[p]:
                    bad(f"{rec} reads {dep}, which has no rule on {p}")
                if p == "existing" and re.search(re.escape(dep) + r"\s*\{", e):
                    bad(f"{rec} selects from {dep} on {p}: its rules are also one query, where a "
                        "rule read is its expression written out, which takes no label matcher")
                # Order is evaluation order: what a rule reads in its own group comes before it.
                if records[dep]["group"] == s["group"] and dep not in seen:
                    bad(f"{rec} reads {dep}, which comes after it in group {s['group']}: "
                        "a group's rules are evaluated in order")
        if s.get("key"):
            if not re.fullmatch(r"[a-z][a-z0-9_]*", s["key"]) or s["key"] in keys:
                bad(f"{rec}: key {s['key']!r} is not a unique snake_case name")
            keys.add(s["key"])
        sat, verdict = s.get("saturation"), s.get("verdict")
        if (sat is None) != (verdict is None):
            bad(f"{rec}: a saturation level and a verdict go together")
        if sat is not None:
            if not s.get("key") or isinstance(sat, bool) or not (isinstance(sat, (int, float)) and 0 < sat <= 1):
                bad(f"{rec}: saturation {sat!r} needs a summary key and a level in (0, 1]")
            if set(verdict) - {"order", "limit", "why", "valid"} or not verdict.get("limit") or not verdict.get("why"):
                bad(f"{rec}: verdict needs order, limit, why (and optionally valid)")
            if verdict.get("order") in orders:
                bad(f"{rec}: verdict order {verdict.get('order')} is taken")
            orders.add(verdict.get("order"))
        seen.add(rec)
    if sorted(orders) != list(range(1, len(orders) + 1)):
        bad(f"verdict orders {sorted(orders)} are not 1..{len(orders)}")


def public(c):
    """The records consumers may read, in the contract's order."""
    return [s["record"] for s in c["signals"] if not s.get("internal")]


def keyed(c):
    """The signals of the k6 summary (those with a key), in the contract's order."""
    return [s for s in c["signals"] if s.get("key")]


def limits(c):
    """The verdict's saturation signals, in the verdict's order."""
    return sorted((s for s in c["signals"] if s.get("verdict")), key=lambda s: s["verdict"]["order"])


def report_signals(root=ROOT):
    """summary.json .correlation.signals: key -> (unit, recording rule, meaning), in the contract's order."""
    return {s["key"]: (UNITS[s["unit"]], s["record"], s["meaning"]) for s in keyed(load(root))}


def saturation(root=ROOT):
    """record -> the level at or above which the verdict calls it saturated."""
    return {s["record"]: s["saturation"] for s in limits(load(root))}


def inlined(c, platform, record):
    """The expression of RECORD on PLATFORM with every bench:* rule it reads replaced by that
    rule's own expression (recursively, in parentheses): what the rule evaluates to, as one
    query. Placeholders stay for fill()."""
    exprs = {s["record"]: per_platform(s.get("expr"))[platform] for s in c["signals"]}

    def expand(rec):
        return RECORD.sub(lambda m: f"({expand(m.group(0))})" if m.group(0) != rec else m.group(0),
                          " ".join(exprs[rec].split()))
    return expand(record)


def fill(expr, **values):
    """EXPR with each $name replaced by values[name] (a KeyError names one not given)."""
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), expr)
