"""A matrix's page (report.html, report.md, relations/*.png in its directory): the table of
its relations to the seeds (bench/run/tables.py computes them) and one chart per relation: the
seed's figure and range beside the measured ratio, its 95 % interval and each round's ratio,
so "holds", "no" and "undecided" can be seen, not only read."""
import re

from .charts import pyplot
from .doc import Doc, Link, write_doc
from .fmt import num

VERDICT = {"yes": "#2ca02c", "no": "#d62728", "undecided": "#ff7f0e", "not here": "#7f7f7f"}


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def figure(sd):
    """A seed's figure and its text, or the text alone (a claim with a direction, no figure)."""
    return " ".join(x for x in ("" if sd["figure"] is None else f"{sd['figure']:g}×", f"({sd['text']})" if sd["text"] else "") if x) or "—"


def draw_relation(r, rounds, path):
    """One relation on a ratio axis: 1.0 (no difference), the seed's range (band) and figure
    (diamond), the measured median with its interval (bar), the rounds' own ratios (dots)."""
    plt = pyplot()
    sd, iv = r["seed"], r["interval"]
    fig, ax = plt.subplots(figsize=(8, 1.7), dpi=100, layout="constrained")
    xs = [1.0] + ([sd["figure"]] if sd["figure"] is not None else []) + (sd["range"] or []) + ([iv["low"], iv["high"]] if iv else []) + rounds
    lo, hi = min(xs), max(xs)
    pad = (hi - lo) * 0.12 or 0.1
    ax.set_xlim(max(0, lo - pad), hi + pad)
    ax.axvline(1.0, color="#999", ls="--", lw=0.9)
    if sd["range"]:
        ax.axvspan(*sd["range"], color="#1f77b4", alpha=0.12, label=f"seed's range {sd['range'][0]:g}–{sd['range'][1]:g}")
    if sd["figure"] is not None:
        ax.plot([sd["figure"]], [1], marker="D", color="#1f77b4", ms=8, ls="", label=f"seed {sd['figure']:g}×")
    color = VERDICT.get(r.get("holds"), "#555")
    if iv:
        ax.errorbar([iv["ratio"]], [0], xerr=[[iv["ratio"] - iv["low"]], [iv["high"] - iv["ratio"]]], fmt="o", color=color,
                    capsize=5, ms=7, label=f"measured {iv['ratio']:.2f}× (95 % {iv['low']:.2f}–{iv['high']:.2f}): {r.get('holds')}")
    if rounds:
        ax.plot(rounds, [-0.35] * len(rounds), "|", color="#555", ms=10, label="each round's ratio")
    ax.set_ylim(-0.8, 1.6)
    ax.set_yticks([1, 0], ["seed", "here"])
    ax.set_xlabel(f"{r['title']} (ratio)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.05), fontsize=8, frameon=False)
    fig.savefig(path)
    plt.close(fig)


def round_ratios(r, runs):
    """Each round's own ratio (of's run over to's of the same round): the spread the interval summarises."""
    def by_round(case):
        return {x["round"]: x["values"].get(r["column"]) for x in runs if x["case"] == case and x["status"] in ("passed", "crossed")}
    of = by_round(r["of"])
    to = by_round(r["to"]) if r["to"] else {k: r["per"] for k in of}
    return [of[k] / to[k] for k in sorted(of) if num(of[k]) and num(to.get(k)) and to[k]]


def relations_page(mdir, m, runs):
    """Writes the matrix's page when it has relations to the seeds; returns its path or None."""
    rel = [r for r in m["ratios"] if r["seed"]]
    if not rel:
        return None
    (mdir / "relations").mkdir(exist_ok=True)
    doc = Doc(f"ingress-bench: {m['title']}", f"matrix {mdir.name}: {len(m['cases'])} cases, "
              f"{len({x['round'] for x in runs})} rounds; the tables below and every run's directory are in this folder")
    doc.add("h2", "Relations to the seeds", id="relations")
    rows = []
    for r in rel:
        sd, iv = r["seed"], r["interval"]
        rows.append([r["title"], figure(sd),
                     {"higher": "above 1", "lower": "below 1", "equal": "equal"}[sd["expect"]]
                     + (f" ({sd['range'][0]:g}–{sd['range'][1]:g})" if sd["range"] else ""),
                     ("–" if not iv else f"{iv['ratio']:.2f}×") + (" ⚠ client-bound" if r.get("client_bound") else ""),
                     "–" if not iv else f"{iv['low']:.2f}–{iv['high']:.2f}",
                     r.get("holds", "undecided") + (f" ({r['not_here']})" if r.get("not_here") else ""), {None: "–", True: "yes", False: "no"}[r.get("in_range")]])
    doc.add("table", ["relation", "seed", "seed says", "measured", "95 % interval", "direction holds", "in the seed's range"], rows)
    for r in rel:
        png = f"relations/{slug(r['title'])}.png"
        draw_relation(r, round_ratios(r, runs), mdir / png)
        doc.add("img", png, r["title"], f"{r['title']}: {r['of']} over {r['to'] or r['per']} ({r['column']})")
    doc.add("h2", "All cases", id="cases")
    doc.add("p", Link("table.md: every case's medians, spread and runs", "table.md"))
    write_doc(doc, mdir)
    return mdir / "report.html"
