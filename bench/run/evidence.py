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

Here: every run's settings checked before any starts, and the runs in turn. The claims file and
the verdicts: evidence_claims.py; the rounds of each kind: evidence_rounds.py; the parts and the
set: evidence_set.py.
"""
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs)
from cases import keep_relations  # noqa: E402
from evidence_claims import CLAIMS_FILE, figure_text, load, picked  # noqa: E402
from evidence_rounds import calibration_settings, run_matrix, run_rounds  # noqa: E402
from evidence_set import assemble, cpu_times, write_part  # noqa: E402

MATRICES = mx.ROOT / "bench/run/matrices"


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
