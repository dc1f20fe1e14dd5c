"""The claims file (bench/run/claims.yaml) of `./task bench:evidence`: read and checked, each
claim's expectation, and the verdict an interval gives against it (bench/run/evidence.py)."""
import os
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs)
from cases import DURATION  # noqa: E402

CLAIMS_FILE = mx.ROOT / "bench/run/claims.yaml"
KINDS = {"matrix": ("matrix",), "capacity": (), "change": ("change", "of", "to", "status"), "control": ("of",),
         "signal": ("scenario", "value"), "calibration": ("case", "client")}
RUN_FIELDS = {"kind", "settings", "budget", "max_rounds", "matrix", "change", "of", "to", "status", "scenario", "value",
              "case", "client"}
# The first round that can decide: two for a spread (a t interval), one for counts (exact).
FIRST = {"matrix": 2, "capacity": 2, "change": 1, "control": 1, "signal": 2, "calibration": 2}
WORDS = {"yes": "holds", "no": "does not hold", "undecided": "undecided", "not here": "not here"}
EXIT = {"holds": 0, "undecided": 0, "not here": 0, "not run": 0, "does not hold": 99, "failed": 1}



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


def figure_text(iv, digits=3):
    if not iv:
        return "—"
    if iv["low"] == iv["high"] == iv["ratio"] and iv.get("n", iv.get("paired_rounds", 2)) < 2:
        return f"{iv['ratio']:.{digits}g} (one round: no interval)"
    return f"{iv['ratio']:.{digits}g} ({iv['low']:.{digits}g}–{iv['high']:.{digits}g})"


def picked(spec, words):
    """The runs to measure for CLAIMS=WORDS: those of the claims whose id or run starts with a word."""
    if not words:
        return list(spec["runs"].values())
    ws = words.split()
    if unknown := [w for w in ws if not any(c["id"].startswith(w) or c["run"].startswith(w) for c in spec["claims"])]:
        raise mx.Bad(f"CLAIMS: no claim of {spec['file']} has an id or run starting with {', '.join(repr(w) for w in unknown)}")
    names = {c["run"] for c in spec["claims"] if any(c["id"].startswith(w) or c["run"].startswith(w) for w in ws)}
    return [r for r in spec["runs"].values() if r["name"] in names]
