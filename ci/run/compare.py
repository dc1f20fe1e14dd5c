"""ci/run/compare.py: `./task bench:compare BASE=variant HEAD=variant` — did HEAD make the
ingress slower, or is that noise?

Both sides run the same scenario (SCENARIO, default rps) in alternating rounds on the matrix
runner (ci/run/matrix.py: every run a real bench.sh run, order rotated each round: base head,
head base, ...), ROUNDS of each (default 5, at least 3). Per metric (req/s, or Gbit/s for
throughput; p95 and p99 latency): each side's median and coefficient of variation, and the
ratio HEAD/BASE of the medians with its bootstrap 95 % confidence interval
(ci/report/stats.py); the rate per ingress CPU too (its cgroup time), and when the sides had
different ingress CPU (each probed its own share: INGRESS_CPU=auto) that one is judged, as
seed 002 compares. The gates, Kong's release gates by default:
  - a regression only when the WHOLE interval is past the tolerance: req/s more than
    GATE_RATE_DROP % down, p95 more than GATE_P95_RISE % up, p99 more than GATE_P99_RISE % up;
  - UNSTABLE, no verdict, when either side's req/s (Gbit/s) CV is over GATE_CV_MAX %: the
    machine was too noisy to tell (more rounds, longer runs, or a quieter machine).
Exit codes: 0 no regression; 99 a regression (a gate crossed, as a crossed threshold is);
98 unstable; 1 bad input or a run that failed.

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
from report.stats import median_ratio_interval, stats  # noqa: E402

SIDES = ("base", "head")
# What a side is measured by: the scenario's rate (higher is better) and two latencies.
RATE = {"rps": ("result.rps", "req/s", ",.0f"), "tps": ("result.rps", "req/s", ",.0f"),
        "throughput": ("result.gbit_per_s", "Gbit/s", ".3f")}
LATENCIES = [("p95", "result.p95_ms", "GATE_P95_RISE"), ("p99", "result.p99_ms", "GATE_P99_RISE")]
EXIT = {"pass": 0, "regression": 99, "unstable": 98}


def number_setting(env, name, reg):
    return float(env.get(name) or reg[name]["default"])


def metrics(scenario):
    path, unit, fmt = RATE[scenario]
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
    """{tools, host} (ci/lib.sh host_description) as flat "host.kernel": value pairs."""
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
    if len(cpus["base"]) == len(cpus["head"]) == 1 and cpus["base"] != cpus["head"] and all(values[s].get("per_cpu") for s in SIDES):
        side = lambda s: "/".join(format(x, "g") for x in cpus[s])  # noqa: E731
        return "per_cpu", f"judged per ingress CPU: base had {side('base')} CPU, head {side('head')}"
    return "rate", "judged on the rate" + (f": both sides had {'/'.join(format(x, 'g') for x in cpus['head'])} ingress CPU" if cpus["head"] else "")


def judge(m, base_values, head_values, env, reg, judged="rate"):
    """Per metric: medians, CVs, the interval and what it says; and the whole comparison's
    verdict. Of the two rates only JUDGED counts (the other is shown)."""
    rows, cv_max = [], number_setting(env, "GATE_CV_MAX", reg)
    for mt in m:
        b, h = base_values.get(mt["key"], []), head_values.get(mt["key"], [])
        tol = number_setting(env, mt["gate"], reg) / 100
        iv = median_ratio_interval(h, b)
        row = dict(mt, base=stats(b), head=stats(h), interval=iv, tolerance=tol)
        if mt["key"] in ("rate", "per_cpu") and mt["key"] != judged:
            row["says"] = "shown, not judged"
        elif iv is None:
            row["says"] = "no value"
        else:
            # lo..hi: the interval as "how much better" (above 1: better) for either direction.
            # "better" and "worse" only when the whole interval says so; a regression when it
            # is wholly past the tolerance.
            lo, hi = (iv["low"], iv["high"]) if mt["better"] == "higher" else (1 / iv["high"], 1 / iv["low"])
            if (iv["high"] < 1 - tol) if mt["better"] == "higher" else (iv["low"] > 1 + tol):
                row["says"] = "REGRESSION"
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
    else:
        verdict = "pass"
        why = "no gate crossed"
    return rows, verdict, why


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
    names = [n for n in ("BASE", "HEAD", "BASELINE", "BASELINE_SAVE", "SCENARIO", "ROUNDS",
                         "GATE_RATE_DROP", "GATE_P95_RISE", "GATE_P99_RISE", "GATE_CV_MAX") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    head, base, baseline, save = (env.get(k) for k in ("HEAD", "BASE", "BASELINE", "BASELINE_SAVE"))
    if not head:
        raise mx.Bad("HEAD is not set: ./task bench:compare BASE=<variant> HEAD=<variant> (or BASELINE=<saved name> HEAD=<variant>)")
    if base and baseline:
        raise mx.Bad("give BASE (a variant measured now) or BASELINE (a saved side), not both")
    if not base and not baseline and not save:
        raise mx.Bad("nothing to compare HEAD with: set BASE=<variant> or BASELINE=<saved name> (or BASELINE_SAVE=<name> to save HEAD)")
    rounds = int(env.get("ROUNDS") or 5)
    if rounds < 3:
        raise mx.Bad(f"ROUNDS must be at least 3 for a comparison (a median and an interval of fewer say nothing), got {rounds}")
    scenario = env.get("SCENARIO") or reg["SCENARIO"]["default"]
    if save and (baselines_dir(env) / save).exists():
        raise mx.Bad(f"baseline '{save}' exists already in {baselines_dir(env)}: baselines are never overwritten (choose another name)")
    saved = load_baseline(env, baseline, scenario) if baseline else None
    mts = metrics(scenario)
    sides = ([("base", base)] if base else []) + [("head", head)]
    doc = {"title": f"compare: {scenario}, " + (f"base {base}" if base else f"baseline '{baseline}' ({saved['variant']})" if saved else "HEAD alone")
                    + f" vs head {head}",
           "rounds": rounds,
           "cases": [{"name": s, "scenario": scenario, "variant": v} for s, v in sides],
           "columns": [{"title": "variant", "field": "variant"}]
           + [{"key": mt["key"], "title": mt["title"], "value": mt["value"], "format": mt["format"], "spread": True} for mt in mts]}
    env["ROUNDS"] = str(rounds)
    try:
        m = mx.parse(doc, "bench:compare", reg)
        mx.resolve(m, env, reg)
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
    done = {c["name"]: [r for r in c["runs"] if r["status"] in ("passed", "crossed")] for c in mdoc["cases"]}
    values = {s: {mt["key"]: [r["values"][mt["key"]] for r in done.get(s, []) if mx.number(r["values"].get(mt["key"]))] for mt in mts}
              for s in SIDES}
    mdir = Path(mdoc["dir"])
    if save:
        d = save_baseline(env, save, {"dir": mdoc["dir"], "given": m["given"], "platform": m["cases"][-1]["platform"]},
                          scenario, head, done["head"], values["head"])
        mx.say("compare", f"HEAD's {len(done['head'])} runs saved as baseline '{save}': {d}/")
    cpus = {s: sorted({r["ingress_cpus"] for r in done.get(s, []) if r.get("ingress_cpus")}) for s in SIDES}
    if saved:
        values["base"], cpus["base"] = saved["values"], saved.get("ingress_cpus", [])
    if not base and not saved:
        return 0  # HEAD measured and saved: nothing to judge
    judged, how = rate_judged(cpus, values)
    rows, verdict, why = judge(mts, values["base"], values["head"], env, reg, judged)
    table = markdown(doc["title"], rows, verdict, why, rounds, notes + [how])
    (mdir / "compare.md").write_text(table)
    (mdir / "compare.json").write_text(json.dumps({"verdict": verdict, "why": why, "exit_code": EXIT[verdict], "notes": notes,
                                                   "judged_on": judged, "ingress_cpus": cpus,
                                                   "metrics": rows, "baseline": baseline, "base": base, "head": head}, indent=2) + "\n")
    print("\n" + table, end="", flush=True)
    return EXIT[verdict]


if __name__ == "__main__":
    mx.entry(main, sys.argv)
