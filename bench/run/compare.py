"""bench/run/compare.py: `./task bench:compare BASE=variant HEAD=variant` — did HEAD make the
ingress slower, or is that noise?

Both sides run the same scenario (SCENARIO, default rps) in alternating rounds on the matrix
runner (bench/run/matrix.py: every run a real bench.sh run, order rotated each round: base head,
head base, ...), ROUNDS of each (default 5, at least 3). Per metric (req/s, or Gbit/s for
throughput; p95 and p99 latency): each side's median and coefficient of variation, and the
ratio HEAD/BASE (the geometric mean of the rounds' ratios) with its t 95 % confidence
interval (bench/report/stats.py); the rate per ingress CPU too (its cgroup time), and when the sides had
different ingress CPU (each probed its own share: INGRESS_CPU=auto) that one is judged, as
seed 002 compares. The gates, Kong's release gates by default:
  - a regression only when the WHOLE interval is past the tolerance: req/s more than
    GATE_RATE_DROP % down, p95 more than GATE_P95_RISE % up, p99 more than GATE_P99_RISE % up;
  - UNSTABLE, no verdict, when either side's req/s (Gbit/s) CV is over GATE_CV_MAX %: the
    machine was too noisy to tell (more rounds, longer runs, or a quieter machine).
BUDGET=<duration> instead of ROUNDS: rounds until the gates decide (the matrix's stopping rule,
after its noise probe): each gated metric's interval wholly past its tolerance (a regression)
or wholly on the safe side of it, from the third round on (a regression stops them then).
DECIDE=change (bench:migrate's question, "did anything change?"): the rounds stop when the
judged rate's interval lies wholly within ±GATE_RATE_DROP % of 1 or wholly outside it (the
latencies are shown, not waited for).
When the budget would end first: UNDECIDED, the intervals that straddle their tolerance and
the spread said.
Exit codes: 0 no regression; 99 a regression (a gate crossed, as a crossed threshold is);
98 unstable, or undecided within BUDGET; 1 bad input or a run that failed.

Baselines: BASELINE_SAVE=name keeps HEAD's runs (their directories, each with meta.json: the
machine, kernel, CPU count and tool versions) in RESULTS_ROOT/baselines/<name>/; without BASE
or BASELINE only HEAD is measured. BASELINE=name compares HEAD with that saved side instead
of measuring BASE (no alternation is possible then: a drift of the machine since it was saved
falls on HEAD alone); a baseline from another machine, kernel, CPU count or tool version is
said first, one line per difference.
"""
import json
import os
import re
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs, medians)
from report.run import profile  # noqa: E402
from report.stats import ratio_interval, paired_ratio_interval, stats  # noqa: E402

SIDES = ("base", "head")
# What a side is measured by: the scenario's headline (its profile: higher is better) and two latencies.
LATENCIES = [("p95", "result.p95_ms", "GATE_P95_RISE"), ("p99", "result.p99_ms", "GATE_P99_RISE")]
EXIT = {"pass": 0, "regression": 99, "unstable": 98, "undecided": 98}
MIN_ROUNDS = 3  # a median and an interval of fewer say nothing


def checked_rounds(rounds):
    """ROUNDS of a comparison (this one's, bench:migrate's): at least MIN_ROUNDS, else bad input."""
    if rounds < MIN_ROUNDS:
        raise mx.Bad(f"ROUNDS must be at least {MIN_ROUNDS} for a comparison (a median and an interval of fewer say nothing), got {rounds}")
    return rounds


def number_setting(env, name, reg):
    return float(env.get(name) or reg[name]["default"])


def metrics(scenario):
    h = profile(scenario)["headline"]
    path, unit, fmt = h["path"], h["unit"], h["format"]
    out = [{"key": "rate", "title": unit, "value": path, "format": fmt, "better": "higher", "gate": "GATE_RATE_DROP"},
           {"key": "per_cpu", "title": f"{unit} per ingress CPU", "value": "cpu.per_ingress_cpu.value", "format": fmt,
            "better": "higher", "gate": "GATE_RATE_DROP"}]
    out += [{"key": k, "title": f"{k} ms", "value": v, "format": ".3g", "better": "lower", "gate": g} for k, v, g in LATENCIES]
    return out


def baselines_dir(env):
    return Path(env.get("RESULTS_ROOT") or mx.ROOT / "results").resolve() / "baselines"


def load_baseline(env, name, scenario):
    d = baselines_dir(env) / name
    try:
        saved = json.loads((d / "baseline.json").read_text())
    except (OSError, ValueError):
        known = sorted(p.parent.name for p in baselines_dir(env).glob("*/baseline.json"))
        raise mx.Bad(f"no saved baseline '{name}' in {baselines_dir(env)} (saved: {', '.join(known) or 'none'}; BASELINE_SAVE=name saves one)")
    if saved["scenario"] != scenario:
        raise mx.Bad(f"baseline '{name}' measured the {saved['scenario']} scenario, not {scenario}: set SCENARIO={saved['scenario']}")
    return saved


def described(doc):
    """{tools, host} (bench/lib/k6.sh host_description) as flat "host.kernel": value pairs."""
    return {f"{part}.{k}": v for part in ("tools", "host") for k, v in (doc.get(part) or {}).items()}


def this_machine():
    r = mx.shell("host_description")
    if r.returncode != 0:
        raise mx.Bad(f"cannot describe this machine: {mx.error_line(r.stderr)}")
    return described(json.loads(r.stdout))


def rate_judged(cpus, values):
    """The rate a comparison is judged on: per ingress CPU when the sides had different CPU
    (each probed its own share, INGRESS_CPU=auto; seed 002's unit), else the rate itself (a
    side whose CPU varied over its rounds is judged by what it served); and why, for the table."""
    if len(cpus["base"]) == len(cpus["head"]) == 1 and cpus["base"] != cpus["head"] and \
            all(any(v is not None for v in values[s].get("per_cpu") or []) for s in SIDES):
        side = lambda s: "/".join(format(x, "g") for x in cpus[s])  # noqa: E731
        return "per_cpu", f"judged per ingress CPU: base had {side('base')} CPU, head {side('head')}"
    return "rate", "judged on the rate" + (f": both sides had {'/'.join(format(x, 'g') for x in cpus['head'])} ingress CPU" if cpus["head"] else "")


def judge(m, base_values, head_values, env, reg, judged="rate", budgeted=False, noise_cv=None, paired=False):
    """Per metric: medians, CVs, the interval and what it says; and the whole comparison's
    verdict. Of the two rates only JUDGED counts (the other is shown). BUDGETED: the rounds
    were to go on until every gate decided, so one that did not leaves the comparison
    undecided rather than passed (its spread: the rate's, or before two rounds NOISE_CV's).
    PAIRED: the sides' lists are aligned by round (None where a run did not finish), and the
    interval is of the rounds' ratios (paired_ratio_interval): both sides ran in each round."""
    rows, cv_max = [], number_setting(env, "GATE_CV_MAX", reg)
    for mt in m:
        pb, ph = base_values.get(mt["key"], []), head_values.get(mt["key"], [])
        b, h = [v for v in pb if v is not None], [v for v in ph if v is not None]
        tol = number_setting(env, mt["gate"], reg) / 100
        iv = paired_ratio_interval(ph, pb) if paired else ratio_interval(h, b)
        row = dict(mt, base=stats(b), head=stats(h), interval=iv, tolerance=tol)
        # decided: the whole interval on one side of the tolerance (a regression, or none).
        row["decided"] = True
        if mt["key"] in ("rate", "per_cpu") and mt["key"] != judged:
            row["says"] = "shown, not judged"
        elif iv is None:
            row["says"], row["decided"] = "no value", False
        else:
            # lo..hi: the interval as "how much better" (above 1: better) for either direction.
            # "better" and "worse" only when the whole interval says so; a regression when it
            # is wholly past the tolerance.
            lo, hi = (iv["low"], iv["high"]) if mt["better"] == "higher" else (1 / iv["high"], 1 / iv["low"])
            edge = 1 - tol if mt["better"] == "higher" else 1 / (1 + tol)  # the tolerance, as lo..hi
            # (one round has no spread: its "interval" is a point, and decides nothing)
            # DECIDE=change: the judged rate decides "no change" only when it lies wholly within
            # ±tolerance, so the far edge (1 + tolerance) must be clear of it too.
            edges = (edge, 1 + tol) if env.get("DECIDE") == "change" and mt["key"] == judged else (edge,)
            row["decided"] = not any(lo < e <= hi for e in edges) and (iv.get("paired_rounds") or min(len(b), len(h))) >= 2
            if hi < edge:  # wholly past the tolerance: a regression, unless it is one round's point
                row["says"] = "REGRESSION" if row["decided"] else "worse, past the tolerance in one round"
            elif lo > 1:
                row["says"] = "better"
            elif hi < 1:
                row["says"] = "worse, within tolerance"
            else:
                row["says"] = "no change"
        rows.append(row)
    rate = next(r for r in rows if r["key"] == judged)
    noisy = [s for s in SIDES if (rate[s].get("cv_percent") or 0) > cv_max]
    if noisy:
        verdict = "unstable"
        why = "; ".join(f"{s}'s {rate['title']} varies {rate[s]['cv_percent']:.1f} % over its rounds" for s in noisy)
        why += f" (GATE_CV_MAX {cv_max:g} %): no verdict; more rounds, longer runs or a quieter machine"
    elif any(r["says"] == "REGRESSION" for r in rows):
        verdict = "regression"
        why = "; ".join(f"{r['title']} {r['interval']['low']:.3f}–{r['interval']['high']:.3f}× is past "
                        f"{'−' if r['better'] == 'higher' else '+'}{r['tolerance'] * 100:g} %" for r in rows if r["says"] == "REGRESSION")
    elif budgeted and (open_ := [r for r in rows if not r["decided"] and (env.get("DECIDE") != "change" or r["key"] == judged)]):
        verdict = "undecided"
        for r in open_:
            r["says"] = "undecided"
        spread = max((rate[s]["cv_percent"] for s in SIDES if rate[s].get("cv_percent") is not None), default=noise_cv)
        gate = lambda r: f"{'−' if r['better'] == 'higher' else '+'}{r['tolerance'] * 100:g} %"  # noqa: E731
        why = "; ".join(f"{r['title']} {r['interval']['low']:.3f}–{r['interval']['high']:.3f}× straddles {gate(r)}"
                        if r["interval"] and r["interval"]["low"] != r["interval"]["high"] else
                        f"{r['title']} has no interval to judge {gate(r)} by (one round)" for r in open_)
        why += f"; spread {'n/a' if spread is None else f'{spread:.1f} %'}: the budget ended first (a longer BUDGET or a quieter machine)"
    else:
        verdict = "pass"
        why = "no gate crossed"
    return rows, verdict, why


def measured(runs, mts):
    """Each side's finished runs; their values per metric, aligned by round (None where a side's
    run of that round did not finish or has no value); their ingress CPUs."""
    done = {s: [r for r in runs if r["case"] == s and r["status"] in ("passed", "crossed")] for s in SIDES}
    rounds = sorted({r["round"] for r in runs})
    value = lambda s, n, k: next((r["values"][k] for r in done[s] if r["round"] == n and mx.number(r["values"].get(k))), None)  # noqa: E731
    values = {s: {mt["key"]: [value(s, n, mt["key"]) for n in rounds] for mt in mts} for s in SIDES}
    cpus = {s: sorted({r["ingress_cpus"] for r in done[s] if r.get("ingress_cpus")}) for s in SIDES}
    return done, values, cpus


def markdown(title, rows, verdict, why, n, notes):
    lines = [title, ""] + [f"note: {x}" for x in notes] + ([""] if notes else [])
    lines += ["| metric | base (median) | base CV | head (median) | head CV | head/base | 95 % interval | says |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = lambda v: "—" if v is None else format(v, r["format"])  # noqa: E731
        cv = lambda s: "—" if s.get("cv_percent") is None else f"{s['cv_percent']:.1f} %"  # noqa: E731
        iv = r["interval"]
        lines.append(f"| {r['title']} | {f(r['base'].get('median'))} | {cv(r['base'])} | {f(r['head'].get('median'))} | "
                     f"{cv(r['head'])} | {'—' if not iv else format(iv['ratio'], '.3f') + '×'} | "
                     f"{'—' if not iv else format(iv['low'], '.3f') + '–' + format(iv['high'], '.3f')} | {r['says']} |")
    lines += ["", f"verdict: {verdict.upper() if verdict != 'pass' else 'PASS'} ({why}); rounds: {n}; exit {EXIT[verdict]}"]
    return "\n".join(lines) + "\n"


def verdict_of(values, cpus, mts, saved, env, reg, **how):
    """judge() on the sides' values (BASE's from a saved baseline when there is one): rows,
    verdict, why; the rate judged, the note that says why, and the sides' ingress CPUs."""
    if saved:  # measured apart: no rounds to pair
        values, cpus = dict(values, base=saved["values"]), dict(cpus, base=saved.get("ingress_cpus", []))
    judged, said = rate_judged(cpus, values)
    said += "; HEAD/BASE: " + ("HEAD's geometric mean over the saved runs' (they did not alternate)" if saved
                               else "the geometric mean of the rounds' ratios (each round ran both, back to back)")
    return (*judge(mts, values["base"], values["head"], env, reg, judged, paired=not saved, **how), judged, said, cpus)


def decided(runs, mts, saved, env, reg):
    """bench:compare's stopping rule (BUDGET): after a round, a regression, or every gate's
    interval on one side of its tolerance."""
    _, values, cpus = measured(runs, mts)
    rows, verdict, _, judged, *_ = verdict_of(values, cpus, mts, saved, env, reg)
    if verdict == "regression":
        return "a regression"
    if env.get("DECIDE") == "change":  # the rate's question alone; the latencies are shown
        return "the rate decided" if all(r["decided"] for r in rows if r["key"] == judged) else None
    return "every gate decided" if all(r["decided"] for r in rows) else None


def save_baseline(env, name, doc, scenario, variant, head_runs, values):
    d = baselines_dir(env) / name
    d.mkdir(parents=True)
    for r in head_runs:
        shutil.copytree(r["dir"], d / Path(r["dir"]).name)
    (d / "baseline.json").write_text(json.dumps({
        "name": name, "scenario": scenario, "variant": variant, "saved_from": doc["dir"], "settings": doc["given"],
        "platform": doc["platform"], "machine": described(json.loads((Path(head_runs[0]["dir"]) / "meta.json").read_text())),
        "values": values, "ingress_cpus": sorted({r["ingress_cpus"] for r in head_runs if r.get("ingress_cpus")}),
        "runs": [Path(r["dir"]).name for r in head_runs]}, indent=2) + "\n")
    return d


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    names = [n for n in ("BASE", "HEAD", "BASELINE", "BASELINE_SAVE", "SCENARIO", "ROUNDS", "BUDGET", "DECIDE",
                         "GATE_RATE_DROP", "GATE_P95_RISE", "GATE_P99_RISE", "GATE_CV_MAX") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    head, base, baseline, save = (env.get(k) for k in ("HEAD", "BASE", "BASELINE", "BASELINE_SAVE"))
    if not head:
        raise mx.Bad("HEAD is not set: ./task bench:compare BASE=<variant> HEAD=<variant> (or BASELINE=<saved name> HEAD=<variant>)")
    if base and baseline:
        raise mx.Bad("give BASE (a variant measured now) or BASELINE (a saved side), not both")
    if not base and not baseline and not save:
        raise mx.Bad("nothing to compare HEAD with: set BASE=<variant> or BASELINE=<saved name> (or BASELINE_SAVE=<name> to save HEAD)")
    if env.get("ROUNDS") and env.get("BUDGET"):
        raise mx.Bad("give ROUNDS (that many rounds) or BUDGET (rounds until the gates decide), not both")
    rounds = checked_rounds(int(env.get("ROUNDS") or 5))
    scenario = env.get("SCENARIO") or reg["SCENARIO"]["default"]
    if save and (baselines_dir(env) / save).exists():
        raise mx.Bad(f"baseline '{save}' exists already in {baselines_dir(env)}: baselines are never overwritten (choose another name)")
    saved = load_baseline(env, baseline, scenario) if baseline else None
    mts = metrics(scenario)
    sides = ([("base", base)] if base else []) + [("head", head)]
    # A side's own settings (BASE_TARGET=...); one with INGRESS_PODS is an ingress you run, which
    # BASE or HEAD names: its variant is then the platform's (external: existing).
    own = {s: mx.side_settings(env, s.upper(), mx.registry()) for s, _ in sides}
    ran = {s: bool(own[s].get("INGRESS_PODS") or env.get("INGRESS_PODS")) for s, _ in sides}
    # Checked before anything, as their runs would be (both at once), and not again in each run.
    checks = mx.at_once({s: (lambda s=s: mx.existing_checked(dict(env, **own[s]))) for s, _ in sides if ran[s]})
    for s, r in checks.items():
        if r.returncode != 0:
            raise mx.Bad(f"{s.upper()}: {mx.error_line(r.stderr)}")
    doc = {"title": f"compare: {scenario}, " + (f"base {base}" if base else f"baseline '{baseline}' ({saved['variant']})" if saved else "HEAD alone")
                    + f" vs head {head}",
           "rounds": rounds,
           "cases": [{"name": s, "scenario": scenario, **({} if ran[s] else {"variant": v}), **({"settings": own[s]} if own[s] else {})}
                     for s, v in sides],
           "columns": [{"title": "variant", "field": "variant"}]
           + [{"key": mt["key"], "title": mt["title"], "value": mt["value"], "format": mt["format"], "spread": True} for mt in mts]}
    if not env.get("BUDGET"):
        env["ROUNDS"] = str(rounds)
    try:
        m = mx.parse(doc, "bench:compare", reg)
        if env.get("BUDGET"):  # the matrix's stopping rule, with the gates as what decides
            m["decide"] = lambda m_, runs, r: decided(runs, mts, saved, env, reg)
            m["min_rounds"], m["margins_of"] = MIN_ROUNDS, "the rate's tolerance"
            m["margins"] = {"rate": number_setting(env, "GATE_RATE_DROP", reg) / 100}
        mx.resolve(m, env, reg)
        for c in m["cases"]:
            if ran[c["name"]]:
                c["env"]["IB_TARGET_CHECKED"] = "1"
    except mx.Bad as e:  # a side's error in the user's words: BASE or HEAD, not the case's name
        raise mx.Bad(re.sub(r"^bench:compare: case '(base|head)': ", lambda x: f"{x[1].upper()}: ", str(e)))
    notes = []
    if saved:
        platform = m["cases"][0]["platform"]
        if saved.get("platform") != platform:
            raise mx.Bad(f"baseline '{baseline}' was measured on PLATFORM={saved.get('platform')}, HEAD would run on {platform}")
        now = this_machine()
        notes += [f"the baseline is from another machine or toolset: {k} {saved['machine'].get(k)} then, {now.get(k)} now"
                  for k in sorted(saved["machine"].keys() | now.keys()) if saved["machine"].get(k) != now.get(k)]
        notes += [f"the baseline ran with {k}={saved['settings'].get(k)}, HEAD runs with {k}={m['given'].get(k)}"
                  for k in sorted(set(saved["settings"]) | set(m["given"])) if saved["settings"].get(k) != m["given"].get(k)]
        notes.append(f"the baseline's runs are from {saved['saved_from']}: they did not alternate with HEAD's")
        for x in notes:  # said first, before anything is measured
            print(f"note: {x}", file=sys.stderr, flush=True)
    rc, mdoc = mx.run_matrix(m, env, rounds, "compare", yaml.safe_dump(doc, sort_keys=False))
    if rc == 1:
        return 1
    done, values, cpus = measured(mdoc["runs"], mts)
    mdir = Path(mdoc["dir"])
    if save:
        d = save_baseline(env, save, {"dir": mdoc["dir"], "given": m["given"], "platform": m["cases"][-1]["platform"]},
                          scenario, head, done["head"], values["head"])
        mx.say("compare", f"HEAD's {len(done['head'])} runs saved as baseline '{save}': {d}/")
    if not base and not saved:
        return 0  # HEAD measured and saved: nothing to judge
    rows, verdict, why, judged, how, cpus = verdict_of(values, cpus, mts, saved, env, reg, budgeted=bool(env.get("BUDGET")),
                                                       noise_cv=(mdoc.get("noise") or {}).get("cv_percent"))
    rounds = mdoc["rounds"]
    if mdoc.get("stopped"):
        notes.append(f"rounds until the gates decide, within BUDGET {env['BUDGET']}: stopped after round {rounds}, {mdoc['stopped']}")
    table = markdown(doc["title"], rows, verdict, why, rounds, notes + [how])
    (mdir / "compare.md").write_text(table)
    (mdir / "compare.json").write_text(json.dumps({"verdict": verdict, "why": why, "exit_code": EXIT[verdict], "notes": notes,
                                                   "judged_on": judged, "ingress_cpus": cpus,
                                                   "rounds": rounds, "budget": env.get("BUDGET"), "stopped": mdoc.get("stopped"),
                                                   "metrics": rows, "baseline": baseline, "base": base, "head": head}, indent=2) + "\n")
    print("\n" + table, end="", flush=True)
    return EXIT[verdict]


if __name__ == "__main__":
    mx.entry(main, sys.argv)
