"""bench/run/tables.py: a matrix's numbers and tables: per case and value column the median,
min/max and CV over its rounds (bench/report/stats.py), the ratios between cases with their
intervals and, for a seed's relation, whether its direction holds; the Markdown of it all.
Pure: the runner (bench/run/matrix.py) hands it the runs."""
import os

from cases import CPUS, number
from report.relations import figure
from report.run import catalog
from report.stats import ratio_interval, stats


def fmt(v, col):
    if v is None:
        return "—"
    if not number(v):
        return str(v)
    return format(v, col.get("format", ".4g")) + str(col.get("unit", ""))


# --- the numbers: medians and spread (bench/report/stats.py), ratios -------------------------

def compute(m, runs):
    by = {c["name"]: c for c in m["cases"]}
    for c in m["cases"]:
        mine = [r for r in runs if r["case"] == c["name"]]
        c["runs"] = mine
        c["counts"] = {s: sum(r["status"] == s for r in mine) for s in ("passed", "crossed", "failed")}
        done = [r for r in mine if r["status"] in ("passed", "crossed")]
        c["stats"] = {col["key"]: stats([r["values"][col["key"]] for r in done if r["values"].get(col["key"]) is not None])
                      for col in m["columns"] if col["kind"] == "value"}

    def median(case, key):
        return by[case]["stats"].get(key, {}).get("median")

    def values(case, key):
        return [v for v in by[case]["stats"].get(key, {}).get("values", []) if number(v)]

    for c in m["cases"]:
        c["vs_baseline"] = {}
        for col in m["columns"]:
            if col["kind"] == "vs_baseline" and c["baseline"]:
                a, b = median(c["name"], col["vs_baseline"]), median(c["baseline"], col["vs_baseline"])
                c["vs_baseline"][col["key"]] = a / b if a is not None and b else None
    def cpus(case):
        return sorted({x["ingress_cpus"] for x in by[case]["runs"] if x["status"] in ("passed", "crossed") and x.get("ingress_cpus")})

    for r in m["ratios"]:
        of, to = values(r["of"], r["column"]), [r["per"]] if r["to"] is None else values(r["to"], r["column"])
        # Sides with different ingress CPU are compared per CPU of it, as seed 002 does (each
        # probed its own share, INGRESS_CPU=auto); with the same (or a side whose CPU varied
        # over its rounds), on the column itself.
        r["judged_on"] = {"column": r["column"], "per_ingress_cpu": False}
        if r["to"] and len(cpus(r["of"])) == len(cpus(r["to"])) == 1 and cpus(r["of"]) != cpus(r["to"]):
            per_cpu = [[x["per_cpu"] for x in by[c]["runs"] if x["status"] in ("passed", "crossed") and number(x.get("per_cpu"))]
                       for c in (r["of"], r["to"])]
            if all(per_cpu):
                of, to = per_cpu
                r["judged_on"] = {"column": r["column"], "per_ingress_cpu": True, "cpus": [cpus(r["of"]), cpus(r["to"])]}
        judge_ratio(r, of, to, m.get("level", 0.95))
        cvs = [stats(v).get("cv_percent") for v in (of, to if r["to"] else [])]
        r["spread"] = max((x for x in cvs if x is not None), default=None)  # the sides' larger CV, %
        # A seed whose mechanism needs more nodes than its runs had (each run's meta.json):
        # the ratio is still measured and shown, but it cannot say whether the seed holds.
        need = r["seed"] and r["seed"]["nodes"]
        had = [x["nodes"] for c in (r["of"], r["to"]) if c for x in by[c]["runs"] if x.get("nodes")] if need else []
        if need and had and min(had) < need:
            r["holds"] = "not here"
            r["not_here"] = f"needs {need} nodes, ran on {min(had):g}"
        # A case some of whose runs measured the client (the verdict's limit, bench.sh's
        # summary.json: verdict.limit, when a column reads it).
        r["client_bound"] = [c for c in (r["of"], r["to"]) if c and "load-generator" in by[c]["stats"].get("limit", {}).get("text", [])]


def judge_ratio(r, of, to, level=0.95):
    """A ratio's median, interval (at LEVEL: bench:evidence asks for more than 95 %, one share
    of its false-alarm rate) and text; with a seed, whether its direction holds."""
    iv = ratio_interval(of, to, level)
    r["interval"] = iv
    r["value"] = iv and iv["ratio"]
    if iv is None:
        r["text"] = f"n/a (no finished run of {r['of'] if not of else r['to']})"
    elif r["show"] == "ratio":
        r["text"] = f"{iv['ratio']:.2f}x ({level * 100:g} % interval {iv['low']:.2f}–{iv['high']:.2f})"
    else:
        r["text"] = f"{(1 - iv['ratio']) * 100:.1f} % ({level * 100:g} % interval {(1 - iv['high']) * 100:.1f}–{(1 - iv['low']) * 100:.1f})"
    seed = r["seed"]
    if not seed:
        return
    if iv is None or min(len(of), len(to) if r["to"] else 2) < 2:
        r["holds"] = "undecided"  # one round has no spread to judge by
    elif seed["expect"] == "equal":
        lo, hi = seed["range"]
        r["holds"] = "yes" if lo <= iv["low"] and iv["high"] <= hi else "no" if iv["high"] < lo or iv["low"] > hi else "undecided"
    else:
        above, below = iv["low"] > 1, iv["high"] < 1
        r["holds"] = ("yes" if above else "no" if below else "undecided") if seed["expect"] == "higher" else \
            ("yes" if below else "no" if above else "undecided")
    rng = seed["range"]
    r["in_range"] = None if iv is None or rng is None else rng[0] <= iv["ratio"] <= rng[1]


def runs_cell(c):
    n = len(c["runs"])
    k = c["counts"]
    if not k["crossed"] and not k["failed"]:
        return f"{k['passed']}/{n} passed"
    return ", ".join(f"{k[s]}/{n} {s}" for s in ("crossed", "failed", "passed") if k[s])


def markdown(m, rounds, mdir, interrupted):
    given = m["given"]
    fewer = m.get("budget_s") and not interrupted and any(len({x["round"] for x in c["runs"] if x.get("round")}) < rounds for c in m["cases"])
    lines = [f"{m['title']}: median of {'up to ' if fewer else ''}{rounds} round{'s' if rounds > 1 else ''}"
             f"{' (a case whose relations had all decided ran no more: its runs in its row)' if fewer else ''}, the cases' order rotated each round; "
             f"{' '.join(f'{k}={v}' for k, v in given.items())}{'; ' if given else ''}{CPUS} CPUs"]
    groups = list(dict.fromkeys(c["group"] for c in m["cases"]))
    for g in groups:
        lines += [""] + ([g, ""] if g else [])
        head = ["case"]
        for col in m["columns"]:
            if col["kind"] == "value" and col.get("spread"):
                head += [f"{col['title']} (median)", "min–max", "CV"]
            else:
                head.append(col["title"])
        head.append("runs")
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in (c for c in m["cases"] if c["group"] == g):
            row = [c["name"]]
            for col in m["columns"]:
                kind = col["kind"]
                if kind == "field":
                    row.append(str(c[col["field"]]))
                elif kind == "setting":
                    row.append(c["env"].get(col["setting"]) or "—")
                elif kind == "vs_baseline":
                    v = c["vs_baseline"].get(col["key"])
                    row.append("—" if v is None else f"{v:.2f}x")
                else:
                    s = c["stats"][col["key"]]
                    if "text" in s:
                        row.append(" / ".join(s["text"]))
                    else:
                        row.append(fmt(s.get("median"), col))
                    if col.get("spread"):
                        both = "median" in s
                        row.append(f"{fmt(s['min'], col)}–{fmt(s['max'], col)}" if both else "—")
                        row.append("—" if not both or s["cv_percent"] is None else f"{s['cv_percent']:.1f}%")
            row.append(runs_cell(c))
            lines.append("| " + " | ".join(row).replace("\n", " ") + " |")
    notes = [f"- {r['title']}: {r['text']}, on {judged_on(r)}" for r in m["ratios"] if not r["seed"]]
    lines += relations_table(m) + variants_listing(m)
    for c in m["cases"]:
        crossed = [r for r in c["runs"] if r["status"] == "crossed"]
        if crossed:
            what = sorted({t for r in crossed for t in r["crossed"]})
            notes.append(f"- {c['name']} crossed a threshold in round{'s' if len(crossed) > 1 else ''} "
                         f"{', '.join(str(r['round']) for r in crossed)}: {'; '.join(what) or 'see its summary.txt'}")
        for r in c["runs"]:
            if r["status"] == "failed":
                notes.append(f"- {c['name']} round {r['round']} failed: {r['reason']} (log: {os.path.relpath(r['log'], mdir)})")
    if interrupted:
        notes.append("- interrupted: the rounds after the last run listed did not run")
    lines += [""] + notes if notes else []
    lines += ["", f"Results: {mdir}/ (table.md, matrix.json; each run's directory and logs/)"]
    return "\n".join(lines) + "\n"


def rounds_of(r, by):
    """The rounds a ratio rests on: the fewer of its cases' (finished or not). A budgeted matrix
    stops a case once its relations decide while its baseline may run on for another relation."""
    return min((max((x["round"] for x in by[c]["runs"] if x.get("round")), default=0) for c in (r["of"], r["to"]) if c), default=0)


def judged_on(r):
    """What a ratio divides: the column's figure, or that figure per ingress CPU (each side's
    CPU said) when the sides had different CPU."""
    j = r.get("judged_on") or {}
    if not j.get("per_ingress_cpu"):
        return j.get("column", "")
    of, to = ("/".join(format(x, "g") for x in side) for side in j["cpus"])
    return f"{j['column']} per ingress CPU ({of} vs {to} CPU)"


def relations_table(m):
    """The ratios that hold a seed's figure: the seed's, the measured one, and what they say."""
    rows = [r for r in m["ratios"] if r["seed"]]
    if not rows:
        return []
    by = {c["name"]: c for c in m["cases"]}

    def cv(case, key):
        v = by[case]["stats"].get(key, {}).get("cv_percent")
        return "—" if v is None else f"{v:.0f} %"

    level = f"{m.get('level', 0.95) * 100:g} %"
    out = ["", f"Relations to the seeds (each a ratio of geometric means; the interval is Welch's t {level} one; "
           "\"undecided\": the interval straddles what the seed says, too much spread to tell):", "",
           f"| relation | seed | seed says | measured | {level} interval | direction holds | in the seed's range | CV of / to | judged on | rounds |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sd, iv = r["seed"], r["interval"]
        says = {"higher": "above 1", "lower": "below 1", "equal": "equal"}[sd["expect"]]
        if sd["range"]:
            says += f" ({sd['range'][0]:g}–{sd['range'][1]:g})"
        seed = figure(sd)
        got = "—" if not iv else f"{iv['ratio']:.2f}×"
        span = "—" if not iv else f"{iv['low']:.2f}–{iv['high']:.2f}"
        rng = {None: "—", True: "yes", False: "no"}[r.get("in_range")]
        spread = f"{cv(r['of'], r['column'])} / {cv(r['to'], r['column']) if r['to'] else 'constant'}"
        holds = r.get("holds", "undecided") + (f" ({r['not_here']})" if r.get("not_here") else "")
        n = rounds_of(r, by)
        if r.get("holds", "undecided") == "undecided":
            noise = (m.get("noise") or {}).get("cv_percent")
            now = r.get("spread") if r.get("spread") is not None else noise
            holds = f"undecided after {n} round{'s' if n != 1 else ''}, spread {'n/a' if now is None else f'{now:.1f} %'}"
        out.append(f"| {r['title']} | {seed} | {says} | {got}{' ⚠' if r.get('client_bound') else ''} | {span} | "
                   f"{holds} | {rng} | {spread} | {judged_on(r)} | {r.get('decided_at') or n} |")
    bound = sorted({c for r in rows for c in r.get("client_bound") or []})
    if bound:
        out += ["", f"⚠ the load generator was the limit (verdict not valid) in runs of {', '.join(bound)}: "
                "those figures measure k6, and a ratio with them understates the servers' difference"]
    return out


def variants_listing(m):
    """What each overlay the cases ran is, and the seeds it reproduces (overlays/catalog.yaml)."""
    known = catalog()
    out = [f"- `{v}` (seed {'/'.join(known[v]['seeds'])}): {known[v]['shows']}"
           for v in dict.fromkeys(c["variant"] for c in m["cases"]) if v in known]
    return ["", "Variants (overlays/catalog.yaml):", ""] + out if out else []


def run_listing(runs, mdir):
    out = ["", "Runs, in the order they ran:", "", "| # | case | round | status | directory |", "|---|---|---|---|---|"]
    for r in runs:
        status = r["status"] + (f": {r['reason']}" if r["reason"] else "")
        where = f"{os.path.relpath(r['dir'], mdir)}/" if r["dir"] else "none (the run stopped before it made one)"
        out.append(f"| {r['order']} | {r['case']} | {r['round']} | {status} | {where} |")
    return "\n".join(out) + "\n"
