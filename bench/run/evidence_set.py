"""The result set of `./task bench:evidence` (bench/run/evidence.py): each run's part, stamped
(the commit, the machine, the steal time, the settings, every round), and the set assembled
from the newest part of each claim (evidence.json, evidence.md, index.html)."""
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, rounds, runs)
from evidence_claims import EXIT, figure_text, stated  # noqa: E402
from publish import commit, cpu_times, machine, steal_percent  # noqa: E402,F401  (the stamp's parts: one source)
from report.doc import Doc, Link  # noqa: E402


def write_part(out, run, result, spec, started, steal0, stamp):
    part = {"run": run["name"], "kind": run["kind"], "started": started,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **commit(),
            "machine": dict(machine(), steal_percent=steal_percent(steal0)),
            "settings": run["settings"], "budget": str(run["budget"]), "max_rounds": run["max_rounds"], "looks": run["looks"],
            "alpha": spec["alpha"], "claims_in_file": len(spec["claims"]), "level": run["level"],
            "stopped": result.get("stopped"), "failed": result.get("failed"), "results_dir": result.get("dir"),
            "claims": result["claims"]}
    (out / "parts").mkdir(parents=True, exist_ok=True)
    path = out / "parts" / f"{run['name']}-{stamp}.json"
    if path.exists():
        raise mx.Bad(f"{path} exists already: parts are never overwritten")
    path.write_text(json.dumps(checkout_relative(part), indent=2) + "\n")
    return path


def checkout_relative(value):
    """VALUE with every path inside the checkout made relative to it: a part is published, and
    where this machine keeps the checkout is no part of what was measured."""
    if isinstance(value, dict):
        return {k: checkout_relative(v) for k, v in value.items()}
    if isinstance(value, list):
        return [checkout_relative(v) for v in value]
    if isinstance(value, str) and value.startswith(f"{mx.ROOT}/"):
        return os.path.relpath(value, mx.ROOT)
    return value


def assemble(out, spec):
    """The set from the newest part of each claim: evidence.json, evidence.md and index.html.
    A claim no part has is "not run"; a part's run that failed leaves its claims "failed"."""
    parts = [(json.loads(p.read_text()), p.name) for p in sorted((out / "parts").glob("*.json"))]
    newest = {}
    for part, name in sorted(parts, key=lambda x: x[0]["finished"]):
        for cid, res in part["claims"].items():
            newest[cid] = (part, name, res)
    rows = []
    for c in spec["claims"]:
        if c["id"] not in newest:
            rows.append({"id": c["id"], "says": c["says"], "run": c["run"], "verdict": "not run"})
            continue
        part, name, res = newest[c["id"]]
        says = "failed" if part.get("failed") and res["verdict"] == "undecided" else res["verdict"]
        rows.append({"id": c["id"], "says": c["says"], "run": c["run"], "verdict": says, "expect": res["expect"],
                     "figure": res["figure"], "interval": res["interval"], "rounds": res["rounds"], "level": part["level"],
                     "part": f"parts/{name}", "finished": part["finished"], "commit": part["commit"], "dirty": part["dirty"],
                     "stopped": part["stopped"], "failed": part.get("failed"), "not_here": res.get("not_here")})
    worst = max((EXIT[r["verdict"]] for r in rows), default=0)
    doc = {"claims_file": spec["file"], "alpha": spec["alpha"], "claims": rows,
           "correction": "Bonferroni over the file's claims and each run's looks: level 1 - alpha / (claims x looks)",
           "counts": {w: sum(r["verdict"] == w for r in rows) for w in EXIT}, "exit_code": 1 if worst == 1 else worst}
    (out / "evidence.json").write_text(json.dumps(doc, indent=2) + "\n")
    page = Doc("ingress-bench: the project's claims, measured",
               f"{len(rows)} claims of {spec['file']}; the false-alarm rate across them {spec['alpha']:.0%} "
               "(each interval at 1 − alpha / (claims × looks): a union bound over the claims and the rounds each was judged at)")
    page.add("cards", [(w, str(n)) for w, n in doc["counts"].items() if n])
    used = {name: part for part, name, _ in newest.values()}
    machines = sorted({f"{m.get('cpu_model')}, {m.get('cpus')} CPUs, kernel {m.get('kernel')}" for m in (p["machine"] for p in used.values())})
    steal = [p["machine"].get("steal_percent") for p in used.values() if p["machine"].get("steal_percent") is not None]
    if machines:
        page.add("p", f"measured on {'; '.join(machines)}; CPU time stolen by the hypervisor during the runs: "
                      f"{min(steal):g}–{max(steal):g} %" if steal else f"measured on {'; '.join(machines)}")
    page.add("table", ["claim", "the project says", "states", "measured (interval)", "level", "rounds", "verdict", "when"],
             [[r["id"], r["says"], stated(r["expect"]) if r.get("expect") else "—", figure_text(r.get("interval")),
               f"{r['level'] * 100:.3g} %" if r.get("level") else "—", r.get("rounds", "—"),
               r["verdict"] + (f" ({r['not_here']})" if r.get("not_here") else "") + (f": {r['failed']}" if r.get("failed") else ""),
               Link(f"{r['finished'][:16]} on {(r['commit'] or '?')[:12]}{' (dirty)' if r['dirty'] else ''}", r["part"]) if r.get("part") else "—"]
              for r in rows])
    page.add("p", "measured: the figure each claim is about (a ratio of the sides' geometric means, a mean, or a ratio of "
                  "rates of counts) with its interval at the level shown; each part (linked) keeps every round's figures, "
                  "the commit, the machine and the settings it ran with.")
    (out / "index.html").write_text(page.html())
    (out / "evidence.md").write_text(page.markdown())
    return doc
