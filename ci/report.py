#!/usr/bin/env python3
"""The report: one run's page, and a comparison of several runs, from the files a run writes.

  report.py fetch RUN_DIR --prometheus URL   the run's time series -> RUN_DIR/timeseries.json
  report.py render RUN_DIR                   RUN_DIR/report.html, report.md, charts/*.png
  report.py index DIR... [--out DIR]         report.html, report.md comparing every run found
  report.py check PAGE.html                  every image and local link of a page exists

Prometheus is read only through the signal contract (monitoring/README.md: the bench:* rules
and k6's own series), never raw metrics. Bad input: one line `error: ...` and exit 2; a page
that fails `check` exits 1. Only the standard library and matplotlib (ci/tools/requirements.txt)."""
import argparse
import html
import json
import math
import os
import re
import statistics
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

# summary.json .correlation.signals: name -> (unit, recording rule, meaning), in the contract's order.
SIGNALS = {
    "ingress_cpu_cores": ("cores", "bench:ingress_cpu_cores:rate", "ingress CPU used"),
    "ingress_cpu_limit_cores": ("cores", "bench:ingress_cpu_limit:cores", "ingress CPU it may use (limit or exclusive cpuset)"),
    "ingress_cpu_utilization": ("ratio", "bench:ingress_cpu_utilization:ratio", "ingress CPU used / may use"),
    "rps_per_ingress_core": ("rate", "bench:rps_per_ingress_core:ratio", "server requests/s per ingress core"),
    "server_rps": ("rate", "bench:server_requests:rate", "requests/s counted by the ingress"),
    "ingress_connections": ("count", "bench:ingress_connections:active", "connections open at the ingress"),
    "nic_transmit_bits": ("bits", "bench:nic_transmit_bits:rate", "ingress NIC transmit"),
    "nic_receive_bits": ("bits", "bench:nic_receive_bits:rate", "ingress NIC receive"),
    "link_capacity_bits": ("bits", "bench:link_capacity:bits", "declared link capacity"),
    "nic_utilization": ("ratio", "bench:nic_utilization:ratio", "max(transmit, receive) / link capacity"),
    "nic_drops": ("pps", "bench:nic_drops:rate", "packets dropped at the ingress NIC"),
    "backend_cpu_cores": ("cores", "bench:backend_cpu_cores:rate", "backend CPU used"),
    "backend_cpu_utilization": ("ratio", "bench:backend_cpu_utilization:ratio", "backend CPU used / may use"),
    "loadgen_cpu_cores": ("cores", "bench:loadgen_cpu_cores:rate", "load generator (k6) CPU used"),
    "loadgen_cpu_utilization": ("ratio", "bench:loadgen_cpu_utilization:ratio", "k6 CPU used / the CPUs it may use"),
}
# verdict.limit -> the utilization that names it (the bar drawn in red).
LIMIT_SIGNAL = {"ingress-cpu": "ingress_cpu_utilization", "nic": "nic_utilization",
                "backend": "backend_cpu_utilization", "load-generator": "loadgen_cpu_utilization"}
CHARTS = ("timeline.png", "utilization.png")  # render removes only these, so a stale chart never survives
PROM_MAX_POINTS = 11000  # Prometheus refuses a range query of more points per series


def query_ranges(testid):
    """timeseries.json's series -> PromQL. k6 tags every sample with testid (k6/lib), the rest
    is the contract; utilizations are combined with max and rates with sum if several come back."""
    sel = f"{{testid={json.dumps(testid)}}}"  # a JSON string is a valid PromQL string literal
    q = {"client_rps": f"sum(rate(k6_http_reqs_total{sel}[5s]))"}
    for p in (50, 95, 99):  # k6_http_req_duration_seconds is a native histogram (remote write)
        q[f"p{p}_ms"] = f"1000 * histogram_quantile({p / 100}, sum(rate(k6_http_req_duration_seconds{sel}[5s])))"
    q.update(ingress_cpu_cores="sum(bench:ingress_cpu_cores:rate)",
             ingress_cpu_utilization="bench:ingress_cpu_utilization:ratio",
             nic_utilization="bench:nic_utilization:ratio",
             server_rps="bench:server_requests:rate",
             loadgen_cpu_utilization="bench:loadgen_cpu_utilization:ratio")
    return q


class Bad(Exception):
    """Bad input: main() prints it as one line and exits 2."""


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def say(tag, text):  # the suite's progress format (ci/lib.sh say)
    print(f"{tag:<13} {text}", file=sys.stderr)


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise Bad(f"{path} is not readable JSON: {e}")


# ---------------------------------------------------------------- a run's files

class Run:
    def __init__(self, path):
        d = Path(path)
        if not d.is_dir():
            raise Bad(f"{d}: no such run directory")
        for f in ("meta.json", "summary.json"):
            if not (d / f).is_file():
                raise Bad(f"{d} is not a run directory: it has no {f}")
        self.dir, self.meta, self.summary = d, read_json(d / "meta.json"), read_json(d / "summary.json")
        if not isinstance(self.meta, dict) or not isinstance(self.summary, dict) \
                or not isinstance(self.summary.get("result"), dict) or not num(self.summary["result"].get("rps")):
            raise Bad(f"{d}/summary.json has no .result.rps: not a finished run")

    def _part(self, key):
        v = self.summary.get(key)
        return v if isinstance(v, dict) else {}

    result = property(lambda s: s.summary["result"])
    client = property(lambda s: s._part("client"))
    server = property(lambda s: s._part("server"))
    correlation = property(lambda s: s._part("correlation"))
    verdict = property(lambda s: s._part("verdict"))
    testid = property(lambda s: str(s.meta.get("testid") or s.dir.name))
    scenario = property(lambda s: str(s.meta.get("scenario") or s.result.get("scenario") or "?"))
    variant = property(lambda s: str(s.meta.get("variant") or "?"))
    platform = property(lambda s: str(s.meta.get("platform") or "?"))
    target = property(lambda s: str(s.meta.get("target") or ""))
    scheme = property(lambda s: urllib.parse.urlsplit(s.target).scheme or "?")
    path = property(lambda s: urllib.parse.urlsplit(s.target).path or "/")
    invalid = property(lambda s: s.verdict.get("valid") is False)

    def value(self):
        """The scenario's headline number: Gbit/s for throughput, requests (or handshakes) per second."""
        return self.result.get("gbit_per_s") if self.scenario == "throughput" else self.result.get("rps")

    def window(self):
        """The run's time range: the correlation's window, else meta's end minus its length."""
        w = self.correlation.get("window")
        if isinstance(w, dict) and num(w.get("start")) and num(w.get("end")) and w["end"] > w["start"]:
            return float(w["start"]), float(w["end"])
        try:
            end = datetime.fromisoformat(str(self.meta["finished_at"]).replace("Z", "+00:00")).timestamp()
            seconds = float(self.meta["run_seconds"])
        except (KeyError, TypeError, ValueError):
            raise Bad(f"{self.dir}: no time window (summary.json has no .correlation.window, "
                      f"meta.json no finished_at and run_seconds)")
        return end - seconds, end

    def cpus(self):
        """(variant without its CPU part, ingress CPUs): an overlay named -<N>cpu, the lab's
        workers-<N> knob, else the CPUs in placement.server_cpus (the ingress's cpuset)."""
        v = self.variant
        m = re.search(r"-(\d+)cpus?$", v)
        if m:
            return v[:m.start()], int(m.group(1))
        m = re.search(r"(?:^|\+)workers-(\d+)(?=\+|$)", v)
        if m:
            return (v[:m.start()] + v[m.end():]).strip("+") or "default", int(m.group(1))
        return v, cpu_count(str((self.meta.get("placement") or {}).get("server_cpus") or ""))


def cpu_count(cpu_list):  # taskset/cpuset list "0-1,3" -> 3
    n = 0
    for part in filter(None, cpu_list.split(",")):
        a, _, b = part.partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            return None
        n += int(b) - int(a) + 1 if b else 1
    return n or None


# ---------------------------------------------------------------- fetch

class Unreachable(Exception):
    pass


class QueryFailed(Exception):
    pass


def query_range(base, query, start, end, step, timeout):
    url = base.rstrip("/") + "/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}s"})
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:  # Prometheus explains a refused query in the body
        try:
            why = json.load(e).get("error", "")
        except ValueError:
            why = ""
        raise QueryFailed(f"Prometheus answered HTTP {e.code}{': ' + why if why else ''}")
    except urllib.error.URLError as e:
        raise Unreachable(getattr(e.reason, "strerror", None) or str(e.reason))
    except (TimeoutError, OSError) as e:
        raise Unreachable(str(e) or type(e).__name__)
    except ValueError:
        raise QueryFailed("the answer is not Prometheus API JSON")
    if not isinstance(body, dict) or body.get("status") != "success":
        raise QueryFailed(f"Prometheus answered {str(body.get('error') if isinstance(body, dict) else body)[:200]}")
    return (body.get("data") or {}).get("result") or []


def combine(result, how):
    """Several series -> one [[t, v], ...]; NaN and Inf (a quantile of no requests) are dropped."""
    points = {}
    for series in result:
        for t, v in series.get("values") or []:
            v = float(v)
            if math.isfinite(v):
                points.setdefault(float(t), []).append(v)
    return [[t, how(vs)] for t, vs in sorted(points.items())]


def fetch(run, prometheus, timeout):
    start, end = run.window()
    step = max(1, math.ceil((end - start) / PROM_MAX_POINTS))
    series, missing, unreachable = {}, {}, None
    for name, query in query_ranges(run.testid).items():
        if unreachable:  # one refused connection says it for every series, without waiting again
            missing[name] = unreachable
            continue
        try:
            points = combine(query_range(prometheus, query, start, end, step, timeout),
                             max if name.endswith("utilization") else sum)
        except Unreachable as e:
            unreachable = missing[name] = f"Prometheus at {prometheus} unreachable: {e}"
            continue
        except QueryFailed as e:
            missing[name] = f"{e} (query: {query})"
            continue
        if points:
            series[name] = points
        else:
            missing[name] = f"no samples between {iso(start)} and {iso(end)} for {query}"
    out = run.dir / "timeseries.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"prometheus": prometheus, "start": start, "end": end, "step": step,
                               "series": series, "missing": missing}, indent=1) + "\n")
    tmp.replace(out)
    n = len(series) + len(missing)
    if unreachable and not series:
        say("timeseries", f"0/{n} series: {unreachable}; the report says so ({out})")
    elif missing:
        first = next(iter(missing))
        say("timeseries", f"{len(series)}/{n} series from {prometheus}; missing {', '.join(missing)} "
                          f"({first}: {missing[first]}) -> {out}")
    else:
        say("timeseries", f"{n}/{n} series from {prometheus}, {end - start:.0f} s at {step} s -> {out}")


def load_timeseries(run):
    """(timeseries or None, why there is none). A broken file is a reason, not an error: a
    report must still be possible."""
    path = run.dir / "timeseries.json"
    if not path.exists():
        return None, f"this run has no timeseries.json (`ci/report.py fetch {run.dir} --prometheus URL` writes it)"
    try:
        ts = json.loads(path.read_text())
        assert isinstance(ts.get("series"), dict) and num(ts.get("start")) and num(ts.get("end"))
        ts.setdefault("missing", {})
    except (OSError, ValueError, AssertionError, AttributeError) as e:
        return None, f"timeseries.json is unreadable ({e or 'not the expected shape'})"
    if not any(ts["series"].values()):
        reasons = sorted(set(ts["missing"].values()))
        return ts, "Prometheus returned no series: " + ("; ".join(reasons) if reasons else "no reason recorded")
    return ts, None


# ---------------------------------------------------------------- formatting

def f_int(v):
    return f"{v:,.0f}" if num(v) else "–"


def f_ms(v):  # three significant digits, as summary.txt prints them
    return "–" if not num(v) else f"{v:,.0f} ms" if v >= 100 else f"{v:.3g} ms"


def f_pct(v, digits=1):
    return f"{100 * v:.{digits}f}%" if num(v) else "–"


def f_bits(v):
    if not num(v):
        return "–"
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} bit/s"


def f_signal(unit, v):
    if not num(v):
        return "–"
    return {"cores": f"{v:.2f} cores", "ratio": f_pct(v), "rate": f"{f_int(v)}/s", "count": f_int(v),
            "bits": f_bits(v), "pps": f"{v:.3g} packets/s"}.get(unit, f"{v:.4g}")


def f_value(scenario, v):
    return "–" if not num(v) else f"{v:.3g} Gbit/s" if scenario == "throughput" else f"{f_int(v)}/s"


def f_any(v):
    if isinstance(v, dict):
        return ", ".join(f"{k}: {f_any(x)}" for k, x in v.items()) or "–"
    if isinstance(v, list):
        return ", ".join(f_any(x) for x in v) or "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "–" if v is None else "yes" if v is True else "no" if v is False else str(v)


# ---------------------------------------------------------------- one page, two formats

class Link:
    def __init__(self, text, href):
        self.text, self.href = text, href


class Doc:
    """A page as blocks, written as HTML and as Markdown from the same content."""

    def __init__(self, title, subtitle, wide=False):
        self.title, self.subtitle, self.wide, self.blocks = title, subtitle, wide, []

    def add(self, kind, *args, **kw):
        self.blocks.append((kind, args, kw))

    def html(self):
        e = html.escape
        body = '<body class="wide">' if self.wide else "<body>"
        out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
               f"<title>{e(self.title)}</title><style>{CSS}</style></head>{body}",
               f"<h1>{e(self.title)}</h1>", f'<p class="sub">{e(self.subtitle)}</p>']

        def cell(c):
            if isinstance(c, Link):
                return f'<a href="{e(urllib.parse.quote(c.href))}">{e(c.text)}</a>'
            return e(str(c))

        for kind, a, kw in self.blocks:
            ident = f' id="{e(kw["id"])}"' if kw.get("id") else ""
            if kind == "h2":
                out.append(f"<h2{ident}>{e(a[0])}</h2>")
            elif kind == "p":
                cls = f' class="{kw["cls"]}"' if kw.get("cls") else ""
                out.append(f"<p{ident}{cls}>{cell(a[0])}</p>")
            elif kind == "cards":
                out.append(f'<div class="cards"{ident}>' + "".join(
                    f'<div class="card"><div class="v">{e(v)}</div><div class="l">{e(l)}</div></div>'
                    for l, v in a[0]) + "</div>")
            elif kind == "table":
                head = "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in a[0]) + "</tr></thead>" if any(a[0]) else ""
                out.append(f"<table{ident}>{head}<tbody>" + "".join(
                               "<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in a[1])
                           + "</tbody></table>")
            elif kind == "img":
                out.append(f'<figure{ident}><img src="{e(urllib.parse.quote(a[0]))}" alt="{e(a[1])}">'
                           f"<figcaption>{e(a[2])}</figcaption></figure>")
        out.append("</body></html>\n")
        return "\n".join(out)

    def markdown(self):
        def cell(c):
            t = f"[{c.text}]({urllib.parse.quote(c.href)})" if isinstance(c, Link) else str(c)
            return t.replace("|", "\\|").replace("\n", " ")

        def table(head, rows):
            return "\n".join(["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
                             + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])

        out = [f"# {self.title}", "", self.subtitle]
        for kind, a, kw in self.blocks:
            out.append("")
            if kind == "h2":
                out.append(f"## {a[0]}")
            elif kind == "p":
                out.append(("**" + cell(a[0]) + "**") if kw.get("cls") else cell(a[0]))
            elif kind == "cards":
                out.append(table([l for l, _ in a[0]], [[v for _, v in a[0]]]))
            elif kind == "table":
                out.append(table(a[0], a[1]))
            elif kind == "img":
                out.append(f"![{a[1]}]({urllib.parse.quote(a[0])})\n\n*{a[2]}*")
        return "\n".join(out) + "\n"


CSS = """
body{font:15px/1.45 system-ui,sans-serif;color:#222;max-width:1120px;margin:0 auto;padding:16px 24px}body.wide{max-width:1500px}
h1{font-size:24px;margin:8px 0 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.sub{color:#666;margin:2px 0 12px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card .v{font-size:22px;font-weight:600}.card .l{color:#666;font-size:13px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 9px;text-align:left;vertical-align:top}
th{background:#f4f4f4}
.pass,.fail,.warn{padding:6px 12px;border-radius:6px;font-weight:600}
.pass{background:#e3f4e3}.fail{background:#fbe1e1}.warn{background:#fdf1d6}
figure{margin:8px 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#666;font-size:13px}
a{color:#6a3d9a}
"""


def write_doc(doc, out_dir):
    for name, text in (("report.html", doc.html()), ("report.md", doc.markdown())):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out_dir / name)


# ---------------------------------------------------------------- charts (matplotlib, Agg)

def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on a CI machine
    import matplotlib.pyplot as plt
    return plt


def draw_timeline(ts, path, mean):
    """RPS, latency and utilization over the run, one panel each on a shared time axis, so a
    drop in RPS lines up with the CPU or NIC that saturated."""
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


# ---------------------------------------------------------------- render: one run

def run_doc(run, ts, ts_why, charts):
    r, m, c, srv, corr, vd = run.result, run.meta, run.client, run.server, run.correlation, run.verdict
    doc = Doc(f"ingress-bench: {run.scenario} · {run.variant} · {run.platform}",
              f"run {run.testid}, finished {m.get('finished_at', '?')}, target {run.target or '?'}")

    rate_label = "TLS handshakes/s" if run.scenario == "tps" else "requests/s"
    cards = [(rate_label, f_int(r.get("rps"))), ("p50", f_ms(r.get("p50_ms"))), ("p95", f_ms(r.get("p95_ms"))),
             ("p99", f_ms(r.get("p99_ms"))), ("max", f_ms(r.get("max_ms"))),
             ("errors", f"{f_pct(r.get('error_rate'), 3)} ({f_int(r.get('errors'))})"),
             ("Gbit/s received", f"{r['gbit_per_s']:.3g}" if num(r.get("gbit_per_s")) else "–"),
             ("requests", f_int(r.get("requests")))]
    if run.scenario == "throughput":
        cards.insert(0, cards.pop(6))
    if num(r.get("tls_handshake_avg_ms")) and r["tls_handshake_avg_ms"] > 0:
        cards.append(("TLS handshake avg", f_ms(r["tls_handshake_avg_ms"])))
    if str(r.get("model")).startswith("open") or (num(r.get("dropped_iterations")) and r["dropped_iterations"] > 0):
        cards.append(("dropped iterations", f_int(r.get("dropped_iterations"))))
    doc.add("cards", cards, id="headline")

    doc.add("h2", "Verdict: what limited the run", id="verdict")
    if vd:
        valid = vd.get("valid")
        doc.add("p", str(vd.get("text") or f"limit: {vd.get('limit', '?')}"),
                cls="warn" if valid is False or vd.get("limit") in (None, "unknown") else "pass", id="verdict-text")
        doc.add("table", ["limit", "valid", "rule that decided"], [[
            vd.get("limit", "–"),
            "no: the load generator limited the run, so the numbers measure the client, not the ingress"
            if valid is False else "yes" if valid is True else "–",
            vd.get("rule", "–")]])
    else:
        doc.add("p", "No verdict: summary.json has no .verdict (a run from before the end-of-run "
                     "correlation, or one without Prometheus).", cls="warn", id="verdict-text")

    th = [t for t in r.get("thresholds") or [] if isinstance(t, dict)]
    ok = sum(1 for t in th if t.get("ok"))
    doc.add("h2", "Result", id="result")
    doc.add("p", f"{'PASS' if r.get('passed') else 'FAIL'} ({ok}/{len(th)} thresholds)",
            cls="pass" if r.get("passed") else "fail")
    if th:
        doc.add("table", ["metric", "threshold", "result"],
                [[t.get("metric", "?"), t.get("expr", "?"), "pass" if t.get("ok") else "FAIL"] for t in th])

    doc.add("h2", "Over the run", id="charts")
    if "timeline.png" in charts:
        doc.add("img", "charts/timeline.png", "requests/s, latency and utilization over the run",
                f"From {ts.get('prometheus', '?')} at {ts.get('step', '?')} s steps, {iso(ts['start'])} to "
                f"{iso(ts['end'])}. Dotted line: the run's mean {f_int(r.get('rps'))} req/s.")
    else:
        doc.add("p", f"No time series chart: {ts_why}", cls="warn", id="no-timeseries")
    if "utilization.png" in charts:
        doc.add("img", "charts/utilization.png", "utilization at the end of the run",
                "End-of-run correlation: the resource the verdict names in red; dashed: 100%.")

    doc.add("h2", "Client and server", id="agreement")
    rows = [["requests counted by k6", f_int(r.get("requests"))]]
    if srv:
        ratio = srv.get("client_over_server")
        agree = "–" if not num(ratio) else f"{ratio:.3f} (" + (
            "agree within 1%" if abs(ratio - 1) <= 0.01 else f"differ by {100 * abs(ratio - 1):.1f}%") + ")"
        rows += [[f"requests counted by the server ({srv.get('source', '?')})", f_int(srv.get("requests"))],
                 ["client / server", agree],
                 ["connections accepted by the server", f"{f_int(srv.get('connections_accepted'))} (k6 connections: {f_int(r.get('connections'))})"]]
    else:
        rows.append(["requests counted by the server", "no server-side count in summary.json"])
    if c:
        rows.append(["load generator", f"{c.get('cpu_seconds', 0):.3g} CPU-s, {f_int(c.get('cpu_us_per_request'))} µs per request, "
                                       f"{f_pct(c.get('utilization'))} of {f_any(c.get('cpus'))} CPU" if num(c.get("cpu_seconds")) else f_any(c)])
    doc.add("table", ["", ""], rows)

    doc.add("h2", "Correlation signals", id="signals")
    signals = corr.get("signals") if isinstance(corr.get("signals"), dict) else {}
    if corr:
        w = corr.get("window") or {}
        when = f", {iso(w['start'])} to {iso(w['end'])}" if num(w.get("start")) and num(w.get("end")) else ""
        at = f" at {corr['url']}" if corr.get("url") else " (no Prometheus URL configured)"
        doc.add("p", f"From {corr.get('source', '?')}{at}{when}.")
        rows = [[n, f_signal(SIGNALS[n][0], signals[n]), SIGNALS[n][1], SIGNALS[n][2]] for n in SIGNALS if num(signals.get(n))]
        rows += [[n, f"{v:.4g}", "–", "(not in the contract)"] for n, v in signals.items() if n not in SIGNALS and num(v)]
        if rows:
            doc.add("table", ["signal", "value", "rule", "meaning"], rows)
        else:
            doc.add("p", "No signal has a value.")
    else:
        doc.add("p", "No correlation: summary.json has no .correlation (a run from before it existed, "
                     "or one without Prometheus).", cls="warn")

    doc.add("h2", "Missing correlations", id="missing")
    gone = []
    if corr:
        why = corr.get("missing") if isinstance(corr.get("missing"), dict) else {}
        gone += [[n, "end-of-run correlation", str(why[n])] for n in why]
        gone += [[n, "end-of-run correlation", "absent, no reason recorded"] for n in SIGNALS
                 if not num(signals.get(n)) and n not in why]
    else:
        gone.append(["every signal", "end-of-run correlation", "summary.json has no .correlation"])
    if ts:
        gone += [[n, "time series", str(v)] for n, v in ts["missing"].items()]
    else:
        gone.append(["every series", "time series", ts_why])
    if gone:
        doc.add("table", ["signal", "where", "why"], gone)
    else:
        doc.add("p", "None: every correlation signal and time series is present.")

    doc.add("h2", "Run", id="meta")
    first = ["testid", "scenario", "variant", "platform", "target", "host_header", "connections", "rate", "duration",
             "connection_reuse", "run_seconds", "finished_at", "git_revision", "tools", "host", "placement", "knob_files", "lab_backends"]
    keys = [k for k in first if k in m] + [k for k in m if k not in first]
    doc.add("table", ["", ""], [[k, f_any(m[k])] for k in keys] + [["model", f_any(r.get("model"))], ["results", str(run.dir)]])
    files = {"summary.txt": "k6's summary as printed", "summary.json": "result, client, server, correlation, verdict",
             "meta.json": "run metadata", "k6.log": "k6's log", "timeseries.json": "the series charted above"}
    doc.add("table", ["file", "holds"], [[Link(f, f), what] for f, what in files.items() if (run.dir / f).exists()])
    return doc


def render(run):
    ts, ts_why = load_timeseries(run)
    charts_dir = run.dir / "charts"
    charts_dir.mkdir(exist_ok=True)
    for name in CHARTS:
        (charts_dir / name).unlink(missing_ok=True)
    charts = set()
    if ts and not ts_why:
        draw_timeline(ts, charts_dir / "timeline.png", run.result.get("rps"))
        charts.add("timeline.png")
    signals = run.correlation.get("signals") or {}
    if isinstance(signals, dict) and any(num(signals.get(n)) for n in LIMIT_SIGNAL.values()):
        draw_utilization(signals, run.verdict.get("limit"), charts_dir / "utilization.png")
        charts.add("utilization.png")
    if not charts and not any(charts_dir.iterdir()):
        charts_dir.rmdir()
    write_doc(run_doc(run, ts, ts_why, charts), run.dir)
    problems = check_page(run.dir / "report.html")
    if problems:  # never expected: the page and its charts are written together
        print(f"error: {run.dir}/report.html: {'; '.join(problems)}", file=sys.stderr)
        return 1
    say("report", f"{run.dir}/report.html ({len(charts)} charts{'' if 'timeline.png' in charts else ', no time series'})")
    return 0


# ---------------------------------------------------------------- index: several runs

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
        vals = [r.value() for r in runs if num(r.value())]
        self.value = statistics.median(vals) if vals else None
        self.invalid = sum(r.invalid for r in runs)

    def text(self):
        t = f_value(self.scenario, self.value) + (f" (median of {len(self.runs)})" if len(self.runs) > 1 else "")
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


def tuned_of(default, v):  # seed002-nginx-lb-default pairs with -tuned; seed004's with -keepalive
    toks = default.split("-")
    return v in ("-".join(alt if t == "default" else t for t in toks) for alt in ("tuned", "keepalive"))


def index_doc(runs, skipped, paths, out):
    runs = sorted(runs, key=lambda r: (str(r.meta.get("finished_at") or ""), r.testid))
    doc = Doc(f"ingress-bench: {len(runs)} runs", "Runs found under " + ", ".join(map(str, paths)), wide=True)
    flagged = False

    def link(run):
        for f in ("report.html", "summary.txt", "summary.json"):
            if (run.dir / f).exists():
                return Link(run.testid, os.path.relpath(run.dir / f, out))

    doc.add("h2", "Runs", id="runs")
    rows = []
    for run in runs:
        r, vd = run.result, run.verdict
        limit = (vd.get("limit", "?") + (" (not valid)" if run.invalid else "")) if vd else "–"
        rows.append([link(run), run.scenario, run.variant, run.platform, run.scheme, f_int(run.meta.get("connections")),
                     f_value(run.scenario, run.value()), f_ms(r.get("p99_ms")),
                     f"{f_pct(r.get('error_rate'), 3)} ({f_int(r.get('errors'))})", "PASS" if r.get("passed") else "FAIL",
                     limit, f_pct(run.client.get("utilization"))])
    doc.add("table", ["run", "scenario", "variant", "platform", "scheme", "connections", "result", "p99",
                      "errors", "thresholds", "limit (verdict)", "k6 CPU"], rows)
    if skipped:
        doc.add("p", f"Skipped {len(skipped)} unfinished or unreadable: " + "; ".join(skipped), cls="warn")

    absent = []
    # RPS by ingress CPU count (seed 002's tables): one variant measured at several CPU counts.
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
                      "an overlay ending -<N>cpu, or different placement.server_cpus)")

    sections = [
        ("Default vs tuned", "default-vs-tuned", "variant", lambda v: "default" in v.split("-"), tuned_of,
         ["default", "tuned", "tuned/default"],
         "default vs tuned (needs runs of a ...-default variant and its ...-tuned or ...-keepalive in the same case)"),
        ("HTTP vs HTTPS", "http-vs-https", "scheme", lambda v: v == "http", lambda a, v: v == "https",
         ["HTTP", "HTTPS", "HTTPS/HTTP"], "HTTP vs HTTPS (needs http and https runs of one variant and case)"),
        ("Bare metal (lab) vs Kubernetes", "lab-vs-kubernetes", "platform", lambda v: v == "lab",
         lambda a, v: v in ("local", "external"), ["lab", "Kubernetes", "Kubernetes/lab"],
         "bare metal vs Kubernetes (needs lab and local or external runs of one variant and case)"),
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
    if flagged:
        doc.add("p", "⚠ at least one of these runs was limited by the load generator (verdict not valid): "
                     "that number measures the client, not the ingress.", cls="warn")
    if absent:
        doc.add("h2", "Not shown")
        doc.add("p", "Not shown, for lack of runs: " + "; ".join(absent) + ".", id="absent")
    return doc


def index(paths, out):
    runs, skipped = find_runs(paths)
    out = Path(out) if out else Path(os.path.commonpath([str(r.dir.resolve().parent) for r in runs]))
    if (out / "meta.json").exists():
        raise Bad(f"{out} is a run directory: its report.html is the run's own page (use --out)")
    out.mkdir(parents=True, exist_ok=True)
    write_doc(index_doc(runs, skipped, paths, out), out)
    say("index", f"{out}/report.html ({len(runs)} runs{f', {len(skipped)} skipped' if skipped else ''})")


# ---------------------------------------------------------------- check

class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.refs.append(("img", a.get("src") or ""))
        elif tag == "a" and a.get("href"):
            self.refs.append(("a", a["href"]))


def check_page(page):
    """Problems of a page: an image that is missing, empty or not a PNG, a local link to
    nothing. Remote links and fragments are not followed."""
    page = Path(page)
    parser = Refs()
    parser.feed(page.read_text())
    problems = []
    for tag, ref in parser.refs:
        u = urllib.parse.urlsplit(ref)
        if u.scheme or u.netloc or (not u.path and tag == "a"):
            continue
        f = page.parent / urllib.parse.unquote(u.path)
        if not f.is_file():
            problems.append(f"{ref} is missing")
        elif tag == "img":
            with f.open("rb") as fh:
                if fh.read(8) != b"\x89PNG\r\n\x1a\n":
                    problems.append(f"{ref} is not a PNG")
    return problems


# ---------------------------------------------------------------- CLI

class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error of the suite
        raise Bad(message)


def main(argv=None):
    p = Parser(prog="report.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="fetch|render|index|check")
    f = sub.add_parser("fetch", help="query Prometheus for the run's time series -> RUN_DIR/timeseries.json")
    f.add_argument("run_dir")
    f.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    f.add_argument("--timeout", type=float, default=10, help="seconds per query (default 10)")
    r = sub.add_parser("render", help="RUN_DIR/report.html, report.md and charts/")
    r.add_argument("run_dir")
    i = sub.add_parser("index", help="report.html and report.md comparing several runs")
    i.add_argument("paths", nargs="+", metavar="ROOT_OR_RUN")
    i.add_argument("--out", help="directory for the report (default: the runs' common parent)")
    c = sub.add_parser("check", help="every image and local link of a page exists (exit 1 if not)")
    c.add_argument("page")
    try:
        a = p.parse_args(argv)
        if a.cmd == "fetch":
            u = urllib.parse.urlsplit(a.prometheus)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise Bad(f"--prometheus must be an http(s) URL, got '{a.prometheus}'")
            fetch(Run(a.run_dir), a.prometheus, a.timeout)
        elif a.cmd == "render":
            return render(Run(a.run_dir))
        elif a.cmd == "index":
            index(a.paths, a.out)
        else:
            if not Path(a.page).is_file():
                raise Bad(f"{a.page}: no such page")
            problems = check_page(a.page)
            if problems:
                print(f"error: {a.page}: {'; '.join(problems)}", file=sys.stderr)
                return 1
    except Bad as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
