"""bench:soak's arithmetic and figures (bench/run/soak.py's soak.json): each figure's slope over
the soak's windows with a HAC interval, the drift verdict against the control, the page
(soak.md) and the chart (soak.png).

A window is one load of SOAK_WINDOW, the subject's and the control's alternating; its figures
are points in time (the window's middle, hours from the soak's start). Windows in a row are
autocorrelated (the host's slow quarter hour, a heap that grows in steps), so an ordinary
least-squares interval is too narrow: the slope's variance is Newey and West's (Bartlett
weights, lag floor(4 (n/100)^(2/9)), at most n - 2), the interval Student's t with n - 2
degrees of freedom."""
import math

from .charts import pyplot
from .stats import t_quantile

LEVEL = 0.95
# Fewer windows than this on a side give no verdict: the HAC variance of a handful of
# autocorrelated points is too small to trust (a one-minute soak of 5 windows named a -800 %/h
# "drift" of the client's CPU per request, its first windows' warm-up).
MIN_WINDOWS = 10
# The figures, and the drift each may show before the verdict names it, in % of its mean per
# hour: a slope whose whole interval lies beyond this is a drift; one whose whole interval lies
# within it is none; anything else is undecided. CPU per request and p99 are judged against the
# control (the subject's slope less the control's: the host slowing down moves both), memory
# and connections on the subject alone (the host's speed does not grow a heap).
# The working set is shown, not judged: it holds the page cache of the files the ingress
# writes (its access log grows it by the log's size; the kernel gives it back under pressure),
# so an ingress that logs would always drift there; RSS is its own memory.
FIGURES = {
    # key: (what, unit, drift %/h or None: not judged, against the control)
    "p99_ms": ("p99", "ms", 20.0, True),
    "ingress_us_per_request": ("ingress CPU per request", "µs", 10.0, True),
    "ingress_working_set_mib": ("ingress memory, working set", "MiB", None, False),
    "ingress_rss_mib": ("ingress memory, RSS", "MiB", 5.0, False),
    "client_us_per_request": ("client CPU per request", "µs", 10.0, True),
    "client_rss_mib": ("client memory, peak RSS", "MiB", 5.0, False),
    "connections_open": ("connections open at the ingress", "", 10.0, False),
}


def hac_lag(n):
    return max(0, min(n - 2, math.floor(4 * (n / 100) ** (2 / 9))))


def slope(ts, ys):
    """OLS slope of YS on TS with its Newey-West standard error: {"slope", "se", "n", "lag",
    "mean"}; None with fewer than 3 points."""
    pts = [(t, y) for t, y in zip(ts, ys) if y is not None]
    n = len(pts)
    if n < 3:
        return None
    mt, my = sum(t for t, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((t - mt) ** 2 for t, _ in pts)
    if sxx == 0:
        return None
    b = sum((t - mt) * (y - my) for t, y in pts) / sxx
    a = my - b * mt
    # The slope's score terms: (t - mean t) * residual; their long-run variance, Bartlett-weighted.
    u = [(t - mt) * (y - a - b * t) for t, y in pts]
    lag = hac_lag(n)
    s = sum(x * x for x in u)
    for k in range(1, lag + 1):
        s += 2 * (1 - k / (lag + 1)) * sum(u[i] * u[i - k] for i in range(k, n))
    return {"slope": b, "se": math.sqrt(max(0.0, s)) / sxx, "n": n, "lag": lag, "mean": my}


def judged(key, subject, control):
    """A figure's verdict from its slopes: {"per_hour_pct": [estimate, lo, hi] of the judged
    slope in % of the subject's mean per hour, "verdict": drift | none | undecided, ...}."""
    what, unit, size, against = FIGURES[key]
    out = {"what": what, "unit": unit, "drift_pct_per_h": size, "against_control": against and control is not None}
    if subject is None or not subject["mean"]:
        return dict(out, verdict="undecided", why="fewer than 3 windows with this figure")
    if size is None:
        return dict(out, verdict="shown", why="not judged (the page cache of the files it writes)")
    if subject["n"] < MIN_WINDOWS or (out["against_control"] and control["n"] < MIN_WINDOWS):
        return dict(out, verdict="undecided", why=f"fewer than {MIN_WINDOWS} windows a side")
    b, se, df = subject["slope"], subject["se"], subject["n"] - 2
    if out["against_control"]:
        # The control's slope in its own units' share of its mean, taken off the subject's: the
        # host's drift as a share of each; the variances add (the two series are independent).
        rel_c = control["slope"] / control["mean"] if control["mean"] else 0.0
        b = b - rel_c * subject["mean"]
        se = math.sqrt(se ** 2 + (control["se"] / control["mean"] * subject["mean"]) ** 2 if control["mean"] else se ** 2)
        df = min(df, control["n"] - 2)
    half = t_quantile(1 - (1 - LEVEL) / 2, df) * se
    pct = [100 * x / subject["mean"] for x in (b, b - half, b + half)]
    if pct[1] > size or pct[2] < -size:
        verdict = "drift"
    elif -size <= pct[1] and pct[2] <= size:
        verdict = "none"
    else:
        verdict = "undecided"
    return dict(out, per_hour_pct=pct, verdict=verdict)


def analyse(windows):
    """Each figure's slopes (the subject's, the control's) and verdict; the soak's verdict: the
    drifts it names, else none, else undecided."""
    sub = [w for w in windows if w["side"] == "subject"]
    con = [w for w in windows if w["side"] == "control"]
    figures = {}
    for key in FIGURES:
        s = slope([w["t_h"] for w in sub], [w["figures"].get(key) for w in sub])
        c = slope([w["t_h"] for w in con], [w["figures"].get(key) for w in con]) if con else None
        figures[key] = dict(judged(key, s, c), subject=s, control=c)
    drifts = [k for k, f in figures.items() if f["verdict"] == "drift"]
    open_ = [k for k, f in figures.items() if f["verdict"] == "undecided"]
    why = {}
    for k in open_:
        why.setdefault(figures[k].get("why", "an interval reaching past its size: a longer soak decides"), []).append(figures[k]["what"])
    verdict = ("drift: " + ", ".join(f"{figures[k]['what']} {figures[k]['per_hour_pct'][0]:+.1f} %/h" for k in drifts) if drifts else
               "no drift: every judged figure's slope within its stated size" if not open_ else
               "undecided: " + "; ".join(f"{', '.join(names)} ({reason})" for reason, names in why.items()))
    return {"figures": figures, "verdict": verdict, "drifts": drifts}


def page(doc):
    """soak.md: the settings, each figure's slope and verdict, the windows."""
    a = doc["analysis"]
    lines = [f"# Soak: {doc['variant']} ({doc['platform']})", "",
             f"{doc['rate']:,} req/s, open model ({doc['rate_from']}), in windows of {doc['window']} alternating with the control "
             f"({doc['control']}, the same rate): {doc['subject_windows']} windows of the subject and {doc['control_windows']} of the control "
             f"in {doc['elapsed_s'] / 60:.0f} minutes. Slopes: least squares over the windows' middles, {LEVEL:.0%} intervals from "
             "Newey-West (HAC) variances; CPU per request and p99 against the control's slope.", "",
             f"**Verdict: {a['verdict']}.**", "",
             "| figure | subject mean | subject slope /h | control slope /h | judged (%/h, interval) | size | verdict |",
             "|---|---|---|---|---|---|---|"]
    for key, f in a["figures"].items():
        s, c = f["subject"], f["control"]
        def per_h(x):
            return "—" if not x else f"{x['slope']:+.3g} ± {x['se']:.2g} (n {x['n']}, lag {x['lag']})"
        judged_ = f.get("why", "—") if "per_hour_pct" not in f else "{:+.1f} ({:+.1f} … {:+.1f})".format(*f["per_hour_pct"])
        size = "—" if f["drift_pct_per_h"] is None else f"±{f['drift_pct_per_h']:g}"
        mean = "—" if not s else f"{s['mean']:.3g} {f['unit']}"
        vs = " (vs control)" if f["against_control"] else ""
        lines.append(f"| {f['what']}{vs} | {mean} | {per_h(s)} | {per_h(c)} | {judged_} | {size} | {f['verdict']} |")
    lines += ["", "![the windows](soak.png)", "", "| window | side | from (min) | requests | p99 (ms) | ingress µs/req | ingress WS / RSS (MiB) | "
              "client µs/req | client peak RSS (MiB) | connections open |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i, w in enumerate(doc["windows"], 1):
        f = w["figures"]

        def v(k, fmt):
            return "—" if f.get(k) is None else format(f[k], fmt)
        lines.append(f"| {i} | {w['side']} | {w['from_s'] / 60:.1f} | {w['requests']:,} | {v('p99_ms', '.2f')} | {v('ingress_us_per_request', '.1f')} | "
                     f"{v('ingress_working_set_mib', '.1f')} / {v('ingress_rss_mib', '.1f')} | {v('client_us_per_request', '.1f')} | "
                     f"{v('client_rss_mib', '.1f')} | {v('connections_open', '.0f')} |")
    return "\n".join(lines) + "\n"


def chart(doc, path):
    """One panel a figure: the subject's windows and the control's against the soak's minutes,
    each with its fitted line."""
    plt = pyplot()
    keys = [k for k in FIGURES if any(w["figures"].get(k) is not None for w in doc["windows"])]
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 1.8 * len(keys) + 0.6), dpi=100, sharex=True, layout="constrained")
    for ax, key in zip(axes if len(keys) > 1 else [axes], keys):
        f = doc["analysis"]["figures"][key]
        for side, color in (("subject", "#1f77b4"), ("control", "#888")):
            ws = [w for w in doc["windows"] if w["side"] == side and w["figures"].get(key) is not None]
            ax.plot([w["t_h"] * 60 for w in ws], [w["figures"][key] for w in ws], "o", ms=3, color=color, label=side)
            fit = f[side if side == "subject" else "control"]
            if fit and ws:
                t0, t1 = ws[0]["t_h"], ws[-1]["t_h"]
                a = fit["mean"] - fit["slope"] * sum(w["t_h"] for w in ws) / len(ws)
                ax.plot([t0 * 60, t1 * 60], [a + fit["slope"] * t0, a + fit["slope"] * t1], "-", color=color, lw=1)
        ax.set_ylabel(f"{FIGURES[key][0]}\n({FIGURES[key][1] or 'count'})", fontsize=8)
        ax.set_title(f"{f['what']}: {f['verdict']}", fontsize=8, loc="left")
    (axes[-1] if len(keys) > 1 else axes).set_xlabel("minutes from the soak's start")
    (axes[0] if len(keys) > 1 else axes).legend(loc="upper right", fontsize=8, frameon=False)
    fig.savefig(path)
    plt.close(fig)
