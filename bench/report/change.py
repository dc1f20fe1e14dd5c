"""A change under load, from a run's timeline.json (the native engine's 100 ms slots,
xk6/timeline.go) and the change's marks (bench/run/change.py): per slot the requests, errors by
kind and p50/p99; the steady state before the change; errors during it; the disruption
window; p99 during vs before; and the chart (charts/change.png on the run's report page)."""
import json

from .charts import pyplot

# A request failed by what the client saw; "dropped": never sent (due in the open model while
# every connection still waited for an answer, until the run's end): offered load not served.
ERROR_KINDS = ("status", "reset", "refused", "timeout", "closed", "other", "dropped")
STEADY_SKIP_S = 1.0  # the run's first second (dials, warm-up) is not its steady state
SETTLE_S = 1.0  # "during" runs until a second after the change's end: requests in flight then
SLOW_FACTOR = 3  # slots slower than 3x the steady p99 are disrupted, as an error is, when
SLOW_RUN = 3  # at least this many in a row (300 ms): shorter runs were this VM's noise


def percentile(buckets, p):
    """The value at rank p*(n-1) of [[value, count], ...] (ascending), as k6's Trend reads one."""
    n = sum(c for _, c in buckets)
    if not n:
        return None
    rank, seen = p * (n - 1), 0
    for v, c in buckets:
        seen += c
        if seen > rank:
            return v
    return buckets[-1][0]


def merged(slots):
    out = {}
    for s in slots:
        for v, c in s["latency"]:
            out[v] = out.get(v, 0) + c
    return sorted(out.items())


def merged_timeline(parts):
    """The timelines of a distributed run's segments (each pod's own origin, its k6's start) as
    one: each slot moved to the earliest origin's grid (to the nearest slot: within half a slot,
    50 ms) and its counts, statuses and latency buckets added."""
    origin, slot = min(t["origin_ms"] for t in parts), parts[0]["slot_ms"]
    by = {}
    for t in parts:
        shift = round((t["origin_ms"] - origin) / slot)
        for s in t["slots"]:
            into = by.setdefault(s["i"] + shift, {"i": s["i"] + shift, "outcomes": {}, "statuses": {}, "others": {}, "latency": {}})
            for key in ("outcomes", "statuses", "others"):
                for k, n in (s.get(key) or {}).items():
                    into[key][k] = into[key].get(k, 0) + n
            for v, n in s["latency"]:
                into["latency"][v] = into["latency"].get(v, 0) + n
    slots = [dict(x, latency=[[v, n] for v, n in sorted(x["latency"].items())]) for _, x in sorted(by.items())]
    return {"origin_ms": origin, "slot_ms": slot, "relative_error": max(t["relative_error"] for t in parts),
            "beyond": sum(t["beyond"] for t in parts), "segments": len(parts), "slots": slots}


def slots_of(tl):
    """Every slot from the first to the last, empty ones too, with its time (ms from origin)."""
    by = {s["i"]: s for s in tl["slots"]}
    last = max(by) if by else -1
    out = []
    for i in range(last + 1):
        s = by.get(i, {"i": i, "outcomes": {}, "statuses": {}, "latency": []})
        o = s["outcomes"]
        errors = {k: o.get(k, 0) for k in ERROR_KINDS if o.get(k)}
        out.append({"i": i, "t_ms": i * tl["slot_ms"], "ok": o.get("ok", 0), "errors": errors, "n_errors": sum(errors.values()),
                    "statuses": s["statuses"], "others": s.get("others") or {}, "latency": s["latency"],
                    "p50_ms": percentile(s["latency"], 0.5), "p99_ms": percentile(s["latency"], 0.99)})
    return out


def window(slots, lo_ms, hi_ms):
    return [s for s in slots if lo_ms <= s["t_ms"] < hi_ms]


def totals(slots):
    kinds, statuses, others = {}, {}, {}
    for s in slots:
        for into, what in ((kinds, s["errors"]), (statuses, s["statuses"]), (others, s["others"])):
            for k, n in what.items():
                into[k] = into.get(k, 0) + n
    requests = sum(s["ok"] + s["n_errors"] for s in slots)
    errors = sum(kinds.values())
    return {"requests": requests, "errors": errors, "share": errors / requests if requests else 0.0,
            "by_kind": kinds, "statuses": statuses, "others": others, "p99_ms": percentile(merged(slots), 0.99)}


def analyse(tl, marks):
    """The change's figures. marks: unix ms of "start" and "end" (none for CHANGE=none) and of
    anything else the change observed ("serving": its new configuration or endpoints served, or
    the added route; "edited": the edited route in effect)."""
    origin, slot = tl["origin_ms"], tl["slot_ms"]
    slots = slots_of(tl)
    run_end = len(slots) * slot
    rel = {k: v - origin for k, v in marks.items() if isinstance(v, (int, float))}
    # A mark read from the load's own requests (scale's "serving": the new pods' request
    # counters, polled every 200 ms) may be read after the load's end, but what it saw was
    # served by then.
    for k in marks.get("read_from_load", ()):
        if k in rel:
            rel[k] = min(rel[k], run_end)
    start, end = rel.get("start"), rel.get("end")
    # The slot the change starts in is the change's: its requests may fail from that instant
    # (a backend stopped 44 ms into a slot failed 29 of it), and 100 ms is the resolution.
    first = start - start % slot if start is not None else None
    steady = window(slots, STEADY_SKIP_S * 1000, first if start is not None else run_end)
    before = totals(steady)
    slow_ms = before["p99_ms"] * SLOW_FACTOR if before["p99_ms"] else None
    # Disrupted slots: an error, or p99 past 3x the steady one for SLOW_RUN slots in a row.
    # Change-free runs showed shorter ones: one 40 ms slot among 150 of 1-20 ms (steady p99
    # 11 ms), and two slots at the load's 10th second (steady p99 5.5 ms), where k6's web
    # dashboard aggregates. Looked for from the steady state's start, so a change-free run
    # must show none at all.
    seen = window(slots, STEADY_SKIP_S * 1000, run_end)
    slow = [bool(slow_ms and s["p99_ms"] is not None and s["p99_ms"] > slow_ms) for s in seen]
    in_run = [False] * len(seen)
    i = 0
    while i < len(seen):
        j = i
        while j < len(seen) and slow[j]:
            j += 1
        if j - i >= SLOW_RUN:
            in_run[i:j] = [True] * (j - i)
        i = j + 1
    hit = [s for s, long_slow in zip(seen, in_run) if s["n_errors"] or long_slow]
    disruption = {"from_ms": hit[0]["t_ms"], "to_ms": hit[-1]["t_ms"] + slot, "ms": hit[-1]["t_ms"] + slot - hit[0]["t_ms"],
                  "slots": len(hit)} if hit else None
    # During: from the change's start to the later of its end (and a second for requests in
    # flight) and the disruption's end: what it caused after it was "done" (an ingress still
    # sending to removed endpoints) counts too.
    until = None if start is None or end is None else max(end + SETTLE_S * 1000, disruption["to_ms"] if disruption else 0)
    during = totals(window(slots, first, until)) if until is not None else None
    out = {"origin_ms": origin, "slot_ms": slot, "marks_ms": rel, "steady_from_ms": STEADY_SKIP_S * 1000,
           "before": before, "during": during, "after": totals(window(slots, until, run_end)) if until is not None else None, "during_ms": [first, until] if until else None,
           "run": totals(slots), "slow_ms": slow_ms, "disruption": disruption,
           "change_ms": end - start if start is not None and end is not None else None}
    if end is not None and end > run_end:
        # A change slower than the load (a scale back up on a starved node) ends after it:
        # what it did from the load's end on was not measured.
        out["outlasted_ms"] = end - run_end
    if "serving" in rel and start is not None:
        out["serving_after_ms"] = rel["serving"] - start
    if "edited" in rel and start is not None:
        out["edited_after_ms"] = rel["edited"] - start
    return out, slots


def draw(slots, a, kind, path, events=()):
    """Three panels on one time axis: requests/s answered, failed requests per 100 ms by kind
    (stacked; a few among thousands would not show on the first), p50/p99 per 100 ms; the
    change's marks, the Kubernetes events (ticks on the first panel's floor) and the disruption
    window shaded."""
    plt = pyplot()
    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(10, 6.4), dpi=100, sharex=True, layout="constrained",
                                           gridspec_kw={"height_ratios": [3, 2, 3]})
    t = [s["t_ms"] / 1000 for s in slots]
    width = a["slot_ms"] / 1000
    top.step(t, [s["ok"] * 1000 / a["slot_ms"] for s in slots], where="post", color="#2ca02c", lw=1, label="answered 2xx/3xx")
    top.set_ylabel("requests/s")
    top.set_ylim(bottom=0)
    if events:
        top.plot([(e["unix_ms"] - a["origin_ms"]) / 1000 for e in events], [0] * len(events), "|", color="#555", ms=10, mew=1.2,
                 clip_on=False, label="Kubernetes events (whole s)")
    colors = {"status": "#d62728", "reset": "#9467bd", "refused": "#8c564b", "timeout": "#ff7f0e", "closed": "#e377c2", "other": "#7f7f7f", "dropped": "#bcbd22"}
    base = [0] * len(slots)
    for k in ERROR_KINDS:
        ys = [s["errors"].get(k, 0) for s in slots]
        if any(ys):
            mid.bar(t, ys, width=width, bottom=base, align="edge", color=colors[k], label=k)
            base = [b + y for b, y in zip(base, ys)]
    if not any(base):
        mid.text(0.5, 0.5, "no failed request", transform=mid.transAxes, ha="center", va="center", color="#2ca02c")
    mid.set_ylabel("failed / 100 ms")
    for key, y, name in (("p50_ms", "#1f77b4", "p50"), ("p99_ms", "#d62728", "p99")):
        bottom.step(t, [s[key] if s[key] is not None else float("nan") for s in slots], where="post", color=y, lw=1, label=name)
    if a["slow_ms"]:
        bottom.axhline(a["slow_ms"], color="#999", ls=":", lw=1, label=f"{SLOW_FACTOR}× steady p99")
    bottom.set_yscale("log")
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("seconds from the load's start (100 ms slots, by each request's send)")
    for ax in (top, mid, bottom):
        if a["disruption"]:
            ax.axvspan(a["disruption"]["from_ms"] / 1000, a["disruption"]["to_ms"] / 1000, color="#d62728", alpha=0.08,
                       label="disruption" if ax is top else None)
        for name, ms in a["marks_ms"].items():
            ax.axvline(ms / 1000, color="#000", ls="--" if name == "start" else "-.", lw=0.9)
            if ax is top:
                ax.annotate(name, (ms / 1000, 1), xycoords=("data", "axes fraction"), fontsize=8, rotation=90, va="top", ha="right")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    top.set_title(f"change: {kind}")
    fig.savefig(path)
    plt.close(fig)


def load(run_dir):
    """A run's change.json, or None when it has no change."""
    c = run_dir / "change.json"
    if not c.is_file():
        return None
    return json.loads(c.read_text())
