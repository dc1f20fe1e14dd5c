"""bench:routes' figures (bench/run/routes.py's routes.json): the step table, its one-line
progress, the scale-down's memory against the way up, and the chart (routes.png)."""
import math

from .charts import pyplot

HOW = {"reload": "its configuration rendered and nginx reloaded (one reload a step)",
       "httproute": "one HTTPRoute per route through the API server, programmed by its controller (xDS)"}
MIB = 1024 * 1024


def rank(values, p):
    """The nearest-rank P quantile of VALUES (sorted), or None."""
    return values[max(0, math.ceil(p * len(values)) - 1)] if values else None


def propagation(row, key="found_ms"):
    """(p50, p99, max) ms from the step's start to its routes' answers (KEY after_ms: to the
    last probe each route did not answer so: the lower bounds)."""
    f = row.get(key) or []
    return rank(f, 0.5), rank(f, 0.99), f[-1] if f else None


def bounded(row):
    """The routes' times as "p50 / p99 / max", each the answer's, after the lower bound's."""
    hi, lo = propagation(row), propagation(row, "after_ms")
    return " / ".join(f"{h:,.0f}" + ("" if lo[0] is None else f" (≥ {l:,.0f})") for h, l in zip(hi, lo))


def mib(v):
    return "—" if v is None else f"{v / MIB:.1f}"


def side(rest, name):
    s = rest.get(name)
    return "—" if not s else f"{s['cpu_cores']:.3f} CPU, {mib(s['working_set_bytes'])} / {mib(s['rss_bytes'])} MiB"


def errors(a):
    d = a["during"]
    return "—" if not d else f"{d['errors']:,} of {d['requests']:,}" + (
        " (" + ", ".join(f"{n} {k}" for k, n in d["by_kind"].items()) + ")" if d["errors"] else "")


def p99s(a):
    def ms(x):
        return "—" if not x or x.get("p99_ms") is None else f"{x['p99_ms']:.1f}"
    return f"{ms(a['during'])} / {ms(a['before'])}" + (f" (the load ended {a['outlasted_ms'] / 1000:.1f} s before the last route)"
                                                       if a.get("outlasted_ms") else "")


def change_text(row):
    n, prev = row["routes"], row["from"]
    return f"+{n - prev:,}" if n > prev else f"−{prev - n:,}"


def step_line(row):
    m, a = row["marks"], row["analysis"]
    answer = "answering 200" if m["want"] == 200 else f"answering {m['want']} again"
    return (f"{row['from']:,} -> {row['routes']:,} routes: each {answer} "
            f"by p50 / p99 / max {bounded(row)} ms ({m['probes']:,} probes, rounds up to {m['round_ms']:,.0f} ms); "
            f"the load: {errors(a)} failed, p99 {p99s(a)} ms; {row['updates']} configuration updates; at rest: data plane {side(row['rest'], 'data_plane')}"
            + (f", controller {side(row['rest'], 'controller')}" if "controller" in row["rest"] else ""))


def scale_down(result):
    """The last step's memory at rest against the first time its count was reached, or None."""
    rows = result["rows"]
    last = rows[-1]
    earlier = next((r for r in rows[:-1] if r["routes"] == last["routes"]), None)
    if earlier is None or len(rows) < 2:
        return None
    out = {"routes": last["routes"], "step": rows.index(earlier)}
    for name in ("data_plane", "controller"):
        a, b = earlier["rest"].get(name), last["rest"].get(name)
        if a and b and a.get("working_set_bytes") is not None:
            out[name] = {k: [a[k], b[k]] for k in ("working_set_bytes", "rss_bytes")}
    return out


def page(result):
    """routes.md: the settings, the table and the scale-down line."""
    controller = any("controller" in r["rest"] for r in result["rows"])
    head = ["step", "routes", "change", "each route changed by p50 / p99 / max (ms; after ≥)", "probes (longest round, ms)",
            "load: failed during the step", "load p99 during / before (ms)", "updates", "data plane at rest: CPU, WS / RSS"]
    head += ["controller at rest: CPU, WS / RSS"] if controller else []
    lines = [f"# Routes under load: {result['variant']} ({result['platform']})", "",
             f"The routes: exact paths /routes/I to the load's payload on the same backends, {HOW[result['how']]}. "
             f"Each step under a load of its own: {result['rate']:,} req/s, open model ({result['rate_from']}), {result['duration']}, "
             f"the routes changed {result['change_at_s']:g} s into it. Each added route probed until its first 200, each removed one until it "
             f"answers {result['unrouted_status']} as a path that was never a route does, on new connections, every route in turn "
             f"(at most {result['probes_per_s']:,} probes/s): a route changed after its last probe that did not answer so (≥) and by "
             "its answer; the longest round bounds the gap. "
             "Updates: the reloads nginx logged, or Envoy's route configuration reloads (RDS). At rest: the load over and the routes "
             "settled, CPU over 5 s and memory (working set, RSS) from each one's cgroup.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, row in enumerate(result["rows"]):
        if i == 0:
            cells = ["as deployed", "0", "", "", "", "", "", str(row["updates_total"]) + " so far", side(row["rest"], "data_plane")]
        else:
            m = row["marks"]
            cells = [str(i), f"{row['routes']:,}", change_text(row), bounded(row),
                     f"{m['probes']:,} ({m['round_ms']:,.0f})", errors(row["analysis"]), p99s(row["analysis"]), str(row["updates"]),
                     side(row["rest"], "data_plane")]
        cells += [side(row["rest"], "controller")] if controller else []
        lines.append("| " + " | ".join(cells) + " |")
    down = scale_down(result)
    if down:
        said = [f"{name.replace('_', ' ')} working set {mib(v['working_set_bytes'][0])} → {mib(v['working_set_bytes'][1])} MiB, "
                f"RSS {mib(v['rss_bytes'][0])} → {mib(v['rss_bytes'][1])} MiB" for name, v in down.items() if isinstance(v, dict)]
        first = "as deployed" if down["step"] == 0 else f"step {down['step']}"
        lines += ["", f"Back at {down['routes']:,} routes, against the first time there ({first}): " + "; ".join(said) + "."]
    lines += ["", "![the steps](routes.png)"]
    return "\n".join(lines) + "\n"


def chart(result, path):
    """Per step (x: its route count, in the order visited): the propagation p50/p99, the load's
    p99 during the step, and each side's working set at rest."""
    plt = pyplot()
    rows = result["rows"]
    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(9, 7), dpi=100, sharex=True, layout="constrained")
    xs = list(range(len(rows)))
    steps = [propagation(r) if i else (None, None, None) for i, r in enumerate(rows)]
    for k, name, color in ((0, "p50", "#1f77b4"), (1, "p99", "#d62728")):
        top.plot(xs[1:], [s[k] for s in steps[1:]], "o-", color=color, label=f"each route changed by, {name}")
        top.plot(xs[1:], [propagation(r, "after_ms")[k] or float("nan") for r in rows[1:]], "o:", color=color, alpha=0.5,
                 label=f"after, {name}")
    top.set_ylabel("ms from the step's start")
    top.set_yscale("log")
    mid.plot(xs[1:], [(r["analysis"]["during"] or {}).get("p99_ms") for r in rows[1:]], "o-", color="#d62728", label="during the step")
    mid.plot(xs[1:], [(r["analysis"]["before"] or {}).get("p99_ms") for r in rows[1:]], "o--", color="#888", label="before it")
    mid.set_ylabel("the load's p99 (ms)")
    for name, color in (("data_plane", "#2ca02c"), ("controller", "#9467bd")):
        ws = [(r["rest"].get(name) or {}).get("working_set_bytes") for r in rows]
        if any(w is not None for w in ws):
            bottom.plot(xs, [w / MIB if w is not None else float("nan") for w in ws], "o-", color=color,
                        label=f"{name.replace('_', ' ')}, working set at rest")
    bottom.set_ylabel("MiB")
    bottom.set_xticks(xs, ["as deployed"] + [f"{r['routes']:,}" for r in rows[1:]])
    bottom.set_xlabel("routes, step by step")
    for ax in (top, mid, bottom):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=8, frameon=False)
    top.set_title(f"routes under load: {result['variant']} ({result['platform']})")
    fig.savefig(path)
    plt.close(fig)
