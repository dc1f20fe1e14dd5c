"""render: one run's page (report.html, report.md, charts/) from its files."""
import json
import sys

from . import change as chg
from .charts import CHARTS, draw_timeline, draw_utilization
from .doc import Doc, Link, check_page, write_doc
from .fmt import f_any, f_int, f_ms, f_pct, f_signal, iso, num, say
from .run import LIMIT_SIGNAL, SIGNALS, dig, f_headline, load_timeseries, profile


def run_doc(run, ts, ts_why, charts):
    doc = Doc(f"ingress-bench: {run.scenario} · {run.variant} · {run.platform}",
              f"run {run.testid}, finished {run.meta.get('finished_at', '?')}, target {run.target or '?'}")
    headline(doc, run.scenario, run.result)
    verdict_section(doc, run.verdict)
    result_section(doc, run.result)
    charts_section(doc, run.result, ts, ts_why, charts)
    agreement_section(doc, run.result, run.server, run.client)
    signals = signals_section(doc, run.correlation)
    missing_section(doc, run.correlation, signals, ts, ts_why)
    meta_section(doc, run)
    return doc


def headline(doc, scenario, r):
    """The headline figures, one card each: the scenario's own first (its profile's), then
    the latencies, the errors and whichever of the rate and the bandwidth it is not."""
    h = profile(scenario)["headline"]
    first = (h["unit"], f_headline(scenario, dig({"result": r}, h["path"]), unit=False))
    others = [("requests/s", "result.rps", f_int(r.get("rps"))),
              ("Gbit/s received", "result.gbit_per_s", f"{r['gbit_per_s']:.3g}" if num(r.get("gbit_per_s")) else "–")]
    cards = [first, ("p50", f_ms(r.get("p50_ms"))), ("p95", f_ms(r.get("p95_ms"))), ("p99", f_ms(r.get("p99_ms"))),
             ("max", f_ms(r.get("max_ms"))), ("errors", f"{f_pct(r.get('error_rate'), 3)} ({f_int(r.get('errors'))})")]
    cards += [(label, v) for label, path, v in others if path != h["path"]] + [("requests", f_int(r.get("requests")))]
    if num(r.get("tls_handshake_avg_ms")) and r["tls_handshake_avg_ms"] > 0:
        cards.append(("TLS handshake avg", f_ms(r["tls_handshake_avg_ms"])))
    if str(r.get("model")).startswith("open") or (num(r.get("dropped_iterations")) and r["dropped_iterations"] > 0):
        cards.append(("dropped iterations", f_int(r.get("dropped_iterations"))))
    doc.add("cards", cards, id="headline")


def verdict_section(doc, vd):
    """What limited the run, and whether the numbers measure the ingress."""
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


def result_section(doc, r):
    """PASS or FAIL, and each threshold."""
    th = [t for t in r.get("thresholds") or [] if isinstance(t, dict)]
    ok = sum(1 for t in th if t.get("ok"))
    doc.add("h2", "Result", id="result")
    doc.add("p", f"{'PASS' if r.get('passed') else 'FAIL'} ({ok}/{len(th)} thresholds)",
            cls="pass" if r.get("passed") else "fail")
    if th:
        doc.add("table", ["metric", "threshold", "result"],
                [[t.get("metric", "?"), t.get("expr", "?"), "pass" if t.get("ok") else "FAIL"] for t in th])


def charts_section(doc, r, ts, ts_why, charts):
    """The charts over the run, or why there are none."""
    doc.add("h2", "Over the run", id="charts")
    if "timeline.svg" in charts:
        doc.add("img", "charts/timeline.svg", "requests/s, latency and utilization over the run",
                f"From {ts.get('prometheus', '?')} at {ts.get('step', '?')} s steps, {iso(ts['start'])} to "
                f"{iso(ts['end'])}. Dotted line: the run's mean {f_int(r.get('rps'))} req/s.")
    else:
        doc.add("p", f"No time series chart: {ts_why}", cls="warn", id="no-timeseries")
    if "utilization.svg" in charts:
        doc.add("img", "charts/utilization.svg", "utilization at the end of the run",
                "End-of-run correlation: the resource the verdict names in red; dashed: 100%.")


def agreement_section(doc, r, srv, c):
    """The client's count beside the server's, and the load generator's CPU."""
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


def signals_section(doc, corr):
    """The correlation signals over their window; returns them."""
    doc.add("h2", "Correlation signals", id="signals")
    signals = corr.get("signals") if isinstance(corr.get("signals"), dict) else {}
    if corr:
        w = corr.get("window") or {}
        when = f", {iso(w['start'])} to {iso(w['end'])}" if num(w.get("start")) and num(w.get("end")) else ""
        at = f" at {corr['url']}" if corr.get("url") else " (no Prometheus URL configured)"
        if num(w.get("from")) and num(w.get("to")) and num(w.get("load_start")):
            when = (f": each signal the mean of {f_int(w.get('evaluations'))} evaluations of its rule, from "
                    f"{w['from'] - w['load_start']:.0f} to {w['to'] - w['load_start']:.0f} s into the load"
                    + (" (its steady part: shaded in the chart)" if w.get("steady") else
                       " (the load was too short for a steady part: its ramp is in them)"))
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

    return signals


def missing_section(doc, corr, signals, ts, ts_why):
    """Every signal or series the run lacks, and why."""
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


def meta_section(doc, run):
    """The run's metadata and files."""
    doc.add("h2", "Run", id="meta")
    m, r = run.meta, run.result
    first = ["testid", "scenario", "variant", "platform", "target", "host_header", "connections", "rate", "duration",
             "connection_reuse", "run_seconds", "finished_at", "git_revision", "tools", "host", "placement", "knob_files", "lab_backends"]
    keys = [k for k in first if k in m] + [k for k in m if k not in first]
    doc.add("table", ["", ""], [[k, f_any(m[k])] for k in keys] + [["model", f_any(r.get("model"))], ["results", str(run.dir)]])
    files = {"summary.txt": "k6's summary as printed", "summary.json": "result, client, server, correlation, verdict",
             "meta.json": "run metadata", "k6.log": "k6's log", "timeseries.json": "the series charted above"}
    doc.add("table", ["file", "holds"], [[Link(f, f), what] for f, what in files.items() if (run.dir / f).exists()])
    live = run.dir / "live.url"  # bench/run/bench.sh: the live page's view of the run, where it was served
    if live.is_file():
        doc.add("p", Link("The live page: this run on the dashboard's panels (its Prometheus must be up)", live.read_text().strip()))


def render(run):
    ts, ts_why = load_timeseries(run)
    charts_dir = run.dir / "charts"
    charts_dir.mkdir(exist_ok=True)
    for name in CHARTS:
        (charts_dir / name).unlink(missing_ok=True)
    charts = set()
    if ts and not ts_why:
        w = run.correlation.get("window") or {}
        draw_timeline(ts, charts_dir / "timeline.svg", run.result.get("rps"),
                      (w["from"], w["to"]) if num(w.get("from")) and num(w.get("to")) else None)
        charts.add("timeline.svg")
    signals = run.correlation.get("signals") or {}
    if isinstance(signals, dict) and any(num(signals.get(n)) for n in LIMIT_SIGNAL.values()):
        draw_utilization(signals, run.verdict.get("limit"), charts_dir / "utilization.svg")
        charts.add("utilization.svg")
    doc = run_doc(run, ts, ts_why, charts)
    changed = chg.load(run.dir)  # bench:change's run: its timeline and figures first
    if changed:
        a, slots = chg.analyse(json.loads((run.dir / "timeline.json").read_text()), changed["marks_unix_ms"])
        chg.draw(slots, a, changed["change"], charts_dir / "change.png", changed.get("events") or ())
        charts.add("change.png")
        doc.add("h2", f"Change under load: {changed['change']}", id="change")
        doc.add("p", changed["verdict"], cls="pass" if not a["run"]["errors"] and not a["disruption"] else "warn", id="change-verdict")
        doc.add("img", "charts/change.png", "change timeline", "requests/s by outcome and p50/p99 per 100 ms; the change's marks; "
                "the disruption window shaded")
        doc.add("p", Link("change.md: the change's figures (errors during it, disruption window, p99 before/during, the server's count)", "change.md"))
    if not charts and not any(charts_dir.iterdir()):
        charts_dir.rmdir()
    write_doc(doc, run.dir)
    problems = check_page(run.dir / "report.html")
    if problems:  # never expected: the page and its charts are written together
        print(f"error: {run.dir}/report.html: {'; '.join(problems)}", file=sys.stderr)
        return 1
    say("report", f"{run.dir}/report.html ({len(charts)} charts{'' if 'timeline.svg' in charts else ', no time series'})")
    return 0
