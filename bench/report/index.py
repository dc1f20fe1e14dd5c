"""index: several runs compared: every run in one table, then the seeds' tables (by ingress CPU
count, default vs tuned, HTTP vs HTTPS, bare metal vs Kubernetes) for the cases measured both
ways, medians of repeated runs."""
import os
from pathlib import Path

from .doc import Doc, Link, write_doc
from .fmt import f_int, f_ms, f_pct, num, say
from .run import Bad, Run, catalog, f_headline
from .stats import stats


def find_runs(paths):
    runs, skipped, seen = [], [], set()
    for p in map(Path, paths):
        if not p.is_dir():
            raise Bad(f"{p}: no such directory")
        if (p / "meta.json").exists():  # named explicitly: a broken run is an error
            found, explicit = [p], True
        else:
            found, explicit = [], False
            for d, sub, files in os.walk(p):
                sub.sort()
                if "meta.json" in files:
                    found.append(Path(d))
                    sub.clear()  # a run's own subdirectories (charts/) hold no runs
            if not found:
                raise Bad(f"{p} holds no runs (directories with meta.json and summary.json)")
        for d in found:
            if d.resolve() in seen:
                continue
            seen.add(d.resolve())
            try:
                runs.append(Run(d))
            except Bad as e:
                if explicit:
                    raise
                skipped.append(str(e))
    if not runs:
        raise Bad("no finished runs: " + "; ".join(skipped))
    return runs, skipped


CASE = ("platform", "scenario", "scheme", "path", "model", "connections", "reuse", "variant")


def case_of(run):
    return {"platform": run.platform, "scenario": run.scenario, "scheme": run.scheme, "path": run.path,
            "model": str(run.result.get("model") or "closed"), "connections": run.meta.get("connections"),
            "reuse": run.meta.get("connection_reuse", True) is not False, "variant": run.variant}


def case_label(c, drop=None):
    head = [c["scenario"]] + ([c["scheme"]] if drop != "scheme" else []) + [c["path"]]
    tail = [f"{c['connections']} connections"] + ([] if c["reuse"] else ["new connection per request"]) \
        + ([c["model"]] if c["model"] != "closed" else [])  # k6/lib/summary.js: "open <rate>/s"
    return " ".join(head) + ", " + ", ".join(tail)


class Agg:
    """Repeated runs of one case and variant: median of the headline number (the suite's
    comparisons alternate cases and report medians, as single runs vary ±25 % on a VM)."""

    def __init__(self, runs):
        self.runs, self.scenario = runs, runs[0].scenario
        self.value = stats([r.value() for r in runs if num(r.value())]).get("median")
        self.invalid = sum(r.invalid for r in runs)

    def text(self):
        t = f_headline(self.scenario, self.value) + (f" (median of {len(self.runs)})" if len(self.runs) > 1 else "")
        return t + (" ⚠" if self.invalid else "")


def ratio(a, b):
    return f"{a.value / b.value:.2f}×" if num(a.value) and num(b.value) and b.value else "–"


def grouped(runs, without=()):
    groups = {}
    for run in runs:
        c = case_of(run)
        groups.setdefault(tuple((k, c[k]) for k in CASE if k not in without), []).append(run)
    return groups


def pairs(runs, field, first, second):
    """Cases measured with both values of field, all else equal: (case, a, Agg(a), b, Agg(b))."""
    out = []
    for key, rs in grouped(runs, without=(field,)).items():
        by = {}
        for run in rs:
            by.setdefault(case_of(run)[field], []).append(run)
        for a in [v for v in by if first(v)]:
            for b in [v for v in by if second(a, v)]:
                out.append((dict(key), a, Agg(by[a]), b, Agg(by[b])))
    return out


def tuned_of(default, v):  # the catalog's `tunes`: nginx-lb-full tunes nginx-lb-default
    return (catalog().get(v) or {}).get("tunes") == default


def has_tuned(v):
    return any(o.get("tunes") == v for o in catalog().values())


def index_doc(runs, skipped, paths, out):
    runs = sorted(runs, key=lambda r: (str(r.meta.get("finished_at") or ""), r.testid))
    doc = Doc(f"ingress-bench: {len(runs)} runs", "Runs found under " + ", ".join(map(str, paths)), wide=True)
    runs_section(doc, runs, skipped, out)
    absent = []
    flagged = by_cpu_section(doc, runs, absent)
    flagged |= pairs_sections(doc, runs, absent)
    if flagged:
        doc.add("p", "⚠ at least one of these runs was limited by the load generator (verdict not valid): "
                     "that number measures the client, not the ingress.", cls="warn")
    if absent:
        doc.add("h2", "Not shown")
        doc.add("p", "Not shown, for lack of runs: " + "; ".join(absent) + ".", id="absent")
    return doc


def link(run, out):
    """The run's page (or its summary), relative to the index at OUT."""
    for f in ("report.html", "summary.txt", "summary.json"):
        if (run.dir / f).exists():
            return Link(run.testid, os.path.relpath(run.dir / f, out))


def runs_section(doc, runs, skipped, out):
    """Every run, one row each, linked to its report."""
    doc.add("h2", "Runs", id="runs")
    rows = []
    for run in runs:
        r, vd = run.result, run.verdict
        limit = (vd.get("limit", "?") + (" (not valid)" if run.invalid else "")) if vd else "–"
        rows.append([link(run, out), run.scenario, run.variant, run.platform, run.scheme, f_int(run.meta.get("connections")),
                     f_headline(run.scenario, run.value()), f_ms(r.get("p99_ms")),
                     f"{f_pct(r.get('error_rate'), 3)} ({f_int(r.get('errors'))})", "PASS" if r.get("passed") else "FAIL",
                     limit, f_pct(run.client.get("utilization"))])
    doc.add("table", ["run", "scenario", "variant", "platform", "scheme", "connections", "result", "p99",
                      "errors", "thresholds", "limit (verdict)", "k6 CPU"], rows)
    if skipped:
        doc.add("p", f"Skipped {len(skipped)} unfinished or unreadable: " + "; ".join(skipped), cls="warn")


def by_cpu_section(doc, runs, absent):
    """Seed 002's tables: one variant measured at several CPU counts. True when a run in them
    was not valid; what it lacks goes to ABSENT."""
    flagged = False
    by_variant = {}
    for run in runs:
        base, n = run.cpus()
        if n:
            by_variant.setdefault((run.platform, base), {}).setdefault(n, []).append(run)
    cpu_tables = {k: v for k, v in by_variant.items() if len(v) > 1}
    if cpu_tables:
        doc.add("h2", "Results by ingress CPU count", id="by-cpu")
        for (platform, base), by_n in sorted(cpu_tables.items()):
            cols = sorted({(r.scenario, r.scheme, r.path) for rs in by_n.values() for r in rs})
            rows = []
            for n in sorted(by_n):
                cells = []
                for col in cols:
                    rs = [r for r in by_n[n] if (r.scenario, r.scheme, r.path) == col]
                    cells.append(Agg(rs).text() if rs else "–")
                    flagged |= any(r.invalid for r in rs)
                rows.append([str(n)] + cells)
            doc.add("p", f"{base} on {platform}")
            doc.add("table", ["CPUs"] + [f"{s} {sc} {p}" for s, sc, p in cols], rows)
    else:
        absent.append("results by ingress CPU count (needs one variant at two or more CPU counts: "
                      "an overlay with its catalog's cpus, a lab workers knob, or different placement.server_cpus)")
    return flagged


def pairs_sections(doc, runs, absent):
    """Default vs tuned, HTTP vs HTTPS, lab vs Kubernetes: the same case on both sides. True
    when a run in them was not valid; what they lack goes to ABSENT."""
    flagged = False
    cluster = {run.platform: run.cluster for run in runs}
    sections = [
        ("Default vs tuned", "default-vs-tuned", "variant", has_tuned, tuned_of,
         ["default", "tuned", "tuned/default"],
         "default vs tuned (needs runs of an overlay and of the one overlays/catalog.yaml says tunes it, in the same case)"),
        ("HTTP vs HTTPS", "http-vs-https", "scheme", lambda v: v == "http", lambda a, v: v == "https",
         ["HTTP", "HTTPS", "HTTPS/HTTP"], "HTTP vs HTTPS (needs http and https runs of one variant and case)"),
        ("Bare metal (lab) vs Kubernetes", "lab-vs-kubernetes", "platform", lambda v: cluster[v] == "none",
         lambda a, v: cluster[v] != "none", ["lab", "Kubernetes", "Kubernetes/lab"],
         "bare metal vs Kubernetes (needs runs of one variant and case on a platform without a cluster and on one with)"),
    ]
    for title, ident, field, first, second, heads, why in sections:
        found = pairs(runs, field, first, second)
        if not found:
            absent.append(why)
            continue
        doc.add("h2", title, id=ident)
        rows = []
        for c, a, aa, b, bb in sorted(found, key=lambda x: [str(v) for v in x[0].values()] + [x[1], x[3]]):
            flagged |= bool(aa.invalid or bb.invalid)
            who = [c["platform"]] if field != "platform" else []
            what = [c["variant"]] if field != "variant" else []
            if field == "variant":
                rows.append(who + [case_label(c), f"{a}: {aa.text()}", f"{b}: {bb.text()}", ratio(bb, aa)])
            else:
                rows.append(who + what + [case_label(c, field), f"{a}: {aa.text()}" if field == "platform" else aa.text(),
                                          f"{b}: {bb.text()}" if field == "platform" else bb.text(), ratio(bb, aa)])
        lead = (["platform"] if field != "platform" else []) + (["variant"] if field != "variant" else [])
        doc.add("table", lead + ["case"] + heads, rows)
    return flagged


def index(paths, out):
    runs, skipped = find_runs(paths)
    out = Path(out) if out else Path(os.path.commonpath([str(r.dir.resolve().parent) for r in runs]))
    if (out / "meta.json").exists():
        raise Bad(f"{out} is a run directory: its report.html is the run's own page (use --out)")
    out.mkdir(parents=True, exist_ok=True)
    write_doc(index_doc(runs, skipped, paths, out), out)
    say("index", f"{out}/report.html ({len(runs)} runs{f', {len(skipped)} skipped' if skipped else ''})")
