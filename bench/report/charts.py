"""The run page's charts: the timeline over the run and the end-of-run utilizations, drawn as
SVG by hand (every run renders them: matplotlib's import and layout took 1.4 s of CPU a run,
on a machine whose two CPUs the load shares); pyplot() for the rarer pages' charts (a change,
a matrix's relations, a capacity's knee)."""
import math
from html import escape

from .fmt import f_int, f_pct, num
from .run import LIMIT_SIGNAL

# render removes only these, so a stale chart never survives (the .png: an older version's)
CHARTS = ("timeline.svg", "utilization.svg", "change.png", "timeline.png", "utilization.png")
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on a CI machine
    import matplotlib.pyplot as plt
    return plt


def ticks(top, n=5):
    """Round steps (1, 2, 5 x 10^k) from 0 to at most TOP, about N of them."""
    if not top > 0:
        return [0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top / step + 1e-9) + 1)]


def label(v):
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:g}"


class Svg:
    def __init__(self, w, h):
        self.w, self.h, self.out = w, h, []

    def add(self, s):
        self.out.append(s)

    def text(self, x, y, s, size=12, anchor="start", color="#333", transform=None):
        t = f' transform="{transform}"' if transform else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}"{t}>{escape(s)}</text>')

    def line(self, x1, y1, x2, y2, color="#999", width=0.8, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="{width}"{d}/>')

    def save(self, path):
        path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" viewBox="0 0 {self.w} {self.h}" {FONT}>'
                        f'<rect width="{self.w}" height="{self.h}" fill="#fff"/>' + "\n".join(self.out) + "</svg>\n")


class Panel:
    """One plot area: data coordinates to the SVG's."""
    def __init__(self, svg, x, y, w, h, xmax, ymax):
        self.svg, self.x, self.y, self.w, self.h, self.xmax, self.ymax = svg, x, y, w, h, xmax or 1, ymax or 1

    def px(self, t):
        return self.x + self.w * t / self.xmax

    def py(self, v, ymax=None):
        return self.y + self.h * (1 - min(v, ymax or self.ymax) / (ymax or self.ymax))

    def frame(self, ylabel, xticks, xlabels):
        s = self.svg
        for v in ticks(self.ymax):
            s.line(self.x, self.py(v), self.x + self.w, self.py(v), "#e4e4e4", 1)
            s.text(self.x - 6, self.py(v) + 4, label(v), 11, "end")
        for t in xticks:
            s.line(self.px(t), self.y, self.px(t), self.y + self.h, "#e4e4e4", 1)
            if xlabels:
                s.text(self.px(t), self.y + self.h + 16, label(t), 11, "middle")
        s.add(f'<rect x="{self.x}" y="{self.y}" width="{self.w}" height="{self.h}" fill="none" stroke="#444" stroke-width="1"/>')
        s.text(self.x - 52, self.y + self.h / 2, ylabel, 12, "middle", transform=f"rotate(-90 {self.x - 52} {self.y + self.h / 2:.1f})")

    def polyline(self, pts, color, dash=False, markers=False, ymax=None):
        xy = [(self.px(t), self.py(v, ymax)) for t, v in pts]
        d = ' stroke-dasharray="7 4"' if dash else ""
        self.svg.add(f'<polyline fill="none" stroke="{color}" stroke-width="1.8"{d} points="'
                     + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>')
        if markers:
            self.svg.add("".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.2" fill="{color}"/>' for a, b in xy))


def legend(svg, x, y, entries):
    """Entries (text, colour, dash or None, kind: line or box) beside a panel, never over its lines."""
    for i, (text, color, dash, kind) in enumerate(entries):
        yy = y + 10 + 17 * i
        if kind == "box":
            svg.add(f'<rect x="{x}" y="{yy - 6}" width="22" height="10" fill="{color}" fill-opacity="0.35"/>')
        else:
            svg.line(x, yy, x + 22, yy, color, 1.8 if not dash or dash == "7 4" else 1.2, dash)
        svg.text(x + 28, yy + 4, text, 11)


def draw_timeline(ts, path, mean, window=None):
    """RPS, latency and utilization over the run, one panel each on a shared time axis, so a
    drop in RPS lines up with the CPU or NIC that saturated; shaded, the evaluations the
    signals and the verdict average (summary.json .correlation.window: from, to)."""
    s, missing, t0 = ts["series"], ts["missing"], ts["start"]
    panels = [("requests/s", 1, [("client_rps", "client (k6)", "#1f77b4"), ("server_rps", "server (ingress)", "#ff7f0e")]),
              ("latency (ms)", 1, [("p50_ms", "p50", "#2ca02c"), ("p95_ms", "p95", "#ff7f0e"), ("p99_ms", "p99", "#d62728")]),
              ("utilization (%)", 100, [("ingress_cpu_utilization", "ingress CPU", "#1f77b4"), ("nic_utilization", "NIC", "#9467bd"),
                                        ("loadgen_cpu_utilization", "load generator CPU", "#8c564b")])]
    xmax = max([t - t0 for _, _, lines in panels for name, _, _ in lines for t, _ in s.get(name) or []] + [ts["end"] - t0, 1])
    xt = ticks(xmax, 10)
    svg = Svg(1100, 840)
    left, width, height, gap, top0 = 80, 760, 232, 30, 12
    for i, (ylabel, scale, lines) in enumerate(panels):
        y = top0 + i * (height + gap)
        pts = {name: [(t - t0, v * scale) for t, v in s.get(name) or []] for name, _, _ in lines}
        # The run's mean on the rate panel's scale too: clamped to its top edge it would read as a rate.
        top = max([v for p in pts.values() for _, v in p] + [mean if i == 0 and num(mean) else 0])
        cores = [(t - t0, v) for t, v in s.get("ingress_cpu_cores") or []] if scale == 100 and not pts["ingress_cpu_utilization"] else []
        ymax = max(105, top * 1.08) if scale == 100 else (top * 1.15 if top else 1)
        p = Panel(svg, left, y, width, height, xmax, ymax)
        p.frame(ylabel, xt, i == len(panels) - 1)
        entries = []
        if window:
            a, b = p.px(max(0, window[0] - t0)), p.px(min(xmax, window[1] - t0))
            svg.add(f'<rect x="{a:.1f}" y="{y}" width="{max(0, b - a):.1f}" height="{height}" fill="#bbb" fill-opacity="0.25"/>')
            if i == 0:
                entries.append(("averaged for the verdict", "#bbb", None, "box"))
        if scale == 100:  # utilization: 100 % is the wall a resource hits
            svg.line(left, p.py(100), left + width, p.py(100), "#999", 0.8, "5 3")
        for name, text, color in lines:
            if pts[name]:  # dashed: the server's rate mostly lies on the client's line
                p.polyline(pts[name], color, dash=name == "server_rps", markers=len(pts[name]) < 40)
                entries.append((text, color, "7 4" if name == "server_rps" else None, "line"))
        if scale == 1 and i == 0 and num(mean):
            svg.line(left, p.py(mean), left + width, p.py(mean), "#1f77b4", 0.8, "2 2")
            entries.append((f"run mean {f_int(mean)}/s", "#1f77b4", "2 2", "line"))
        if cores:  # no limit known: the cores still show the load, on an axis of their own
            cmax = max(v for _, v in cores) * 1.15 or 1
            p.polyline(cores, "#17becf", ymax=cmax)
            for v in ticks(cmax, 4):
                svg.text(left + width + 6, p.py(v, cmax) + 4, label(v), 11)
            entries.append(("ingress CPU (cores, right)", "#17becf", None, "line"))
        absent = [f"{text}: {str(missing.get(name, 'no data'))[:110]}" for name, text, _ in lines if not pts[name]]
        for j, line in enumerate(reversed(["missing: " + absent[0]] + absent[1:] if absent else [])):
            svg.text(left + 8, y + height - 8 - 13 * j, line, 10, color="#555")
        legend(svg, left + width + (45 if cores else 14), y, entries)
    svg.text(left + width / 2, top0 + 3 * height + 2 * gap + 36, "seconds since the start of the run", 12, "middle")
    svg.save(path)


def draw_utilization(signals, limit, path):
    """End-of-run utilizations side by side; the one the verdict names in red."""
    rows = [("ingress CPU", "ingress_cpu_utilization"), ("NIC", "nic_utilization"),
            ("backend CPU", "backend_cpu_utilization"), ("load generator CPU", "loadgen_cpu_utilization")]
    xmax = max([110] + [100 * signals[n] + 12 for _, n in rows if num(signals.get(n))])
    svg = Svg(1100, 240)
    left, width, top, bar = 150, 900, 12, 40
    p = Panel(svg, left, top, width, bar * len(rows), xmax, 1)
    xt = ticks(xmax, 10)
    for t in xt:
        svg.line(p.px(t), top, p.px(t), top + bar * len(rows), "#e4e4e4", 1)
        svg.text(p.px(t), top + bar * len(rows) + 16, label(t), 11, "middle")
    for i, (text, name) in enumerate(rows):
        y = top + bar * i
        svg.text(left - 8, y + bar / 2 + 4, text, 12, "end")
        v = signals.get(name)
        if num(v):
            color = "#d62728" if LIMIT_SIGNAL.get(limit) == name else "#7f7f7f"
            svg.add(f'<rect x="{left}" y="{y + 6}" width="{max(0, p.px(100 * v) - left):.1f}" height="{bar - 12}" fill="{color}"/>')
            svg.text(p.px(100 * v) + 5, y + bar / 2 + 4, f_pct(v), 11)
        else:
            svg.text(left + 8, y + bar / 2 + 4, "not measured", 11, color="#777")
    svg.add(f'<rect x="{left}" y="{top}" width="{width}" height="{bar * len(rows)}" fill="none" stroke="#444" stroke-width="1"/>')
    svg.line(p.px(100), top, p.px(100), top + bar * len(rows), "#999", 0.8, "5 3")
    svg.text(left + width / 2, top + bar * len(rows) + 36, "utilization at the end of the run (%)", 12, "middle")
    svg.save(path)
