"""bench/run/sweep.py: `./task bench:sweep INGRESS_CPUS="1 2 4 8 16 24"` — seed 002's tables:
requests per second, TLS handshakes per second and 1 MB throughput by the ingress's CPU count,
with each figure's scaling efficiency against linear.

Each amount is the variant (VARIANT) deployed with INGRESS_CPU set to it (deploy.sh: the
ingress container's request = limit; whole cores are pinned by the static CPU manager, a
fraction is a CFS quota): a component parameter, never a copied overlay. The runs are cases
of the one matrix runner (bench/run/matrix.py): every amount × scenario (SCENARIOS, default the
three) once per round, ROUNDS rounds (default 3), order rotated; medians and spread. Then one
table in seed 002's shape: a row per amount, a column per scenario, and each one's scaling
efficiency: (value / value at the smallest amount) / (amount / smallest amount), 100 % being
linear. Exit codes as the matrix runner's.
"""
import json
import os
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner)
from report.run import profile  # noqa: E402


def figure(scenario):
    """A scenario's figure in seed 002's tables: its profile's headline."""
    return profile(scenario)["headline"]


def cores(quantity):
    """A Kubernetes CPU quantity (500m, 0.5, 2) in cores."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def slug(quantity):
    return re.sub(r"[^a-z0-9]", "-", quantity.lower())


def table(amounts, scenarios, by):
    """Seed 002's shape: CPUs | each scenario's median | its efficiency against linear."""
    head = ["CPUs"] + [x for s in scenarios for x in (f"{figure(s)['title']} (median)", "CV", "vs linear")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = []
    first = {s: by.get((amounts[0], s), {}).get("median") for s in scenarios}
    for q in amounts:
        row, doc = [q], {"cpu": q, "cores": cores(q)}
        for s in scenarios:
            st = by.get((q, s), {})
            v, f = st.get("median"), figure(s)["format"]
            eff = v / first[s] / (cores(q) / cores(amounts[0])) if v is not None and first[s] else None
            row += ["—" if v is None else format(v, f), "—" if st.get("cv_percent") is None else f"{st['cv_percent']:.1f} %",
                    "—" if eff is None else f"{eff * 100:.0f} %"]
            doc[s] = {"median": v, "cv_percent": st.get("cv_percent"), "efficiency": eff, "values": st.get("values")}
        lines.append("| " + " | ".join(row) + " |")
        rows.append(doc)
    return lines, rows


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    names = [n for n in ("INGRESS_CPUS", "SCENARIOS", "ROUNDS", "INGRESS_CPU") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    if env.get("INGRESS_CPU") not in (None, "", "auto", "overlay"):  # (the default's words: no amount)
        raise mx.Bad("INGRESS_CPU is the sweep's to set, one amount per run: give the amounts as INGRESS_CPUS")
    given = env.get("INGRESS_CPUS", "")
    if not given:
        raise mx.Bad('INGRESS_CPUS is not set: the ingress CPU amounts to sweep, like INGRESS_CPUS="500m 1" (seed 002: "1 2 4 8 16 24")')
    amounts = sorted(dict.fromkeys(re.split(r"[ ,]+", given.strip())), key=cores)
    if len({cores(q) for q in amounts}) != len(amounts):
        raise mx.Bad(f"INGRESS_CPUS names one amount twice ({given})")
    scenarios = (env.get("SCENARIOS") or reg["SCENARIOS"]["default"]).split()
    doc = {"title": f"CPU sweep of the ingress: {', '.join(scenarios)} at {' / '.join(amounts)} CPU",
           "rounds": 3, "platforms": mx.platforms(cluster=("own", "user")),
           "cases": [{"name": f"cpu-{slug(q)}-{s}", "scenario": s, "settings": {"INGRESS_CPU": q}, "group": f"{q} CPU"}
                     for q in amounts for s in scenarios],
           "columns": [{"title": "platform", "field": "platform"}, {"title": "variant", "field": "variant"},
                       {"title": "CPU", "setting": "INGRESS_CPU"},
                       {"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f", "spread": True},
                       {"key": "gbit", "title": "Gbit/s", "value": "result.gbit_per_s", "format": ".3f"},
                       {"key": "per_cpu", "title": "per ingress CPU (its cgroup)", "value": "cpu.per_ingress_cpu.value", "format": ",.4g"},
                       {"key": "ingress_cpu", "title": "ingress CPU busy", "value": "correlation.signals.ingress_cpu_utilization",
                        "scale": 100, "format": ".0f", "unit": "%"}]}
    m = mx.parse(doc, "bench:sweep", reg)
    rounds = mx.resolve(m, env, reg)
    rc, mdoc = mx.run_matrix(m, env, rounds, "sweep", yaml.safe_dump(doc, sort_keys=False))
    by = {}
    for q in amounts:
        for s in scenarios:
            key = figure(s)["key"]
            by[(q, s)] = next(c for c in mdoc["cases"] if c["name"] == f"cpu-{slug(q)}-{s}")["stats"].get(key, {})
    lines, rows = table(amounts, scenarios, by)
    variant = m["cases"][0]["variant"]
    text = "\n".join([f"Seed 002's shape: {variant} on {m['cases'][0]['platform']}, by the ingress's CPU (INGRESS_CPU); "
                      f"medians of {rounds} round{'s' if rounds > 1 else ''}; \"vs linear\": the figure over the smallest "
                      f"amount's, per CPU (100 % = linear)", ""] + lines) + "\n"
    mdir = Path(mdoc["dir"])
    (mdir / "sweep.md").write_text(text)
    (mdir / "sweep.json").write_text(json.dumps({"variant": variant, "amounts": amounts, "scenarios": scenarios,
                                                 "rounds": rounds, "rows": rows}, indent=2) + "\n")
    print("\n" + text, end="", flush=True)
    return rc


if __name__ == "__main__":
    mx.entry(main, sys.argv)
