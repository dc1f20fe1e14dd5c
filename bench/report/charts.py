"""The run page's charts (matplotlib, Agg): the timeline over the run and the end-of-run
utilizations."""
from .fmt import f_int, f_pct, num
from .run import LIMIT_SIGNAL

CHARTS = ("timeline.png", "utilization.png", "change.png")  # render removes only these, so a stale chart never survives


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on a CI machine
    import matplotlib.pyplot as plt
    return plt


def draw_timeline(ts, path, mean, window=None):
    """RPS, latency and utilization over the run, one panel each on a shared time axis, so a
    drop in RPS lines up with the CPU or NIC that saturated; shaded, the evaluations the
    signals and the verdict average (summary.json .correlation.window: from, to)."""
    plt = pyplot()
    s, missing, t0 = ts["series"], ts["missing"], ts["start"]
    panels = [("requests/s", 1, [("client_rps", "client (k6)", "#1f77b4"), ("server_rps", "server (ingress)", "#ff7f0e")]),
              ("latency (ms)", 1, [("p50_ms", "p50", "#2ca02c"), ("p95_ms", "p95", "#ff7f0e"), ("p99_ms", "p99", "#d62728")]),
              ("utilization (%)", 100, [("ingress_cpu_utilization", "ingress CPU", "#1f77b4"), ("nic_utilization", "NIC", "#9467bd"),
                                        ("loadgen_cpu_utilization", "load generator CPU", "#8c564b")])]
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(11, 8.4), dpi=100, layout="constrained")
    for ax, (label, scale, lines) in zip(axes, panels):
        top, right = 0, 1.01
        for name, text, color in lines:
            pts = s.get(name) or []
            if pts:
                ys = [v * scale for _, v in pts]
                ax.plot([t - t0 for t, _ in pts], ys, label=text, color=color, lw=1.8, ls="--" if name == "server_rps" else "-",
                        marker="." if len(pts) < 40 else None)  # dashed: it mostly lies on the client's line
                top = max(top, max(ys))
        absent = [f"{text}: {str(missing.get(name, 'no data'))[:110]}" for name, text, _ in lines if not s.get(name)]
        if absent:
            ax.text(0.01, 0.04, "missing: " + "\n".join(absent), transform=ax.transAxes, fontsize=7.5, color="#555", va="bottom")
        if scale == 100:  # utilization: 100 % is the wall a resource hits
            ax.axhline(100, color="#999", ls="--", lw=0.8)
            ax.set_ylim(0, max(105, top * 1.08))
            cores = s.get("ingress_cpu_cores") or []
            if cores and not s.get("ingress_cpu_utilization"):  # no limit known: the cores still show the load
                ax2, right = ax.twinx(), 1.08
                ax2.plot([t - t0 for t, _ in cores], [v for _, v in cores], color="#17becf", lw=1.8, label="ingress CPU (cores, right)")
                ax2.set_ylim(0, max(v for _, v in cores) * 1.15 or 1)
                ax2.set_ylabel("cores")
                ax2.legend(loc="lower left", bbox_to_anchor=(right, 0), fontsize=8)
        else:
            ax.set_ylim(0, top * 1.15 if top else 1)
        if label == "requests/s" and num(mean):
            ax.axhline(mean, color="#1f77b4", ls=":", lw=0.8, label=f"run mean {f_int(mean)}/s")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if window:
            ax.axvspan(window[0] - t0, window[1] - t0, color="#bbb", alpha=0.25, lw=0,
                       label="averaged for the verdict" if ax is axes[0] else None)
        if ax.get_legend_handles_labels()[0]:  # beside the panel, never over the lines
            ax.legend(loc="upper left", bbox_to_anchor=(right, 1), fontsize=8)
    axes[-1].set_xlabel("seconds since the start of the run")
    fig.savefig(path)
    plt.close(fig)


def draw_utilization(signals, limit, path):
    """End-of-run utilizations side by side; the one the verdict names in red."""
    rows = [("ingress CPU", "ingress_cpu_utilization"), ("NIC", "nic_utilization"),
            ("backend CPU", "backend_cpu_utilization"), ("load generator CPU", "loadgen_cpu_utilization")]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 2.4), dpi=100, layout="constrained")
    for i, (text, name) in enumerate(rows):
        v = signals.get(name)
        if num(v):
            ax.barh(i, 100 * v, color="#d62728" if LIMIT_SIGNAL.get(limit) == name else "#7f7f7f")
            ax.text(100 * v + 1, i, f_pct(v), va="center", fontsize=9)
        else:
            ax.text(1, i, "not measured", va="center", fontsize=9, color="#777")
    ax.set_yticks(range(len(rows)), [t for t, _ in rows])
    ax.invert_yaxis()
    ax.axvline(100, color="#999", ls="--", lw=0.8)
    ax.set_xlim(0, max([110] + [100 * signals[n] + 12 for _, n in rows if num(signals.get(n))]))
    ax.set_xlabel("utilization at the end of the run (%)")
    fig.savefig(path)
    plt.close(fig)
