"""The report (the package bench/report): a real run's files (ci/tests/fixtures/report/, copied from results/)
with the end-of-run correlation and verdict added as bench.sh writes them, rendered and then
opened in a real browser (headless Chromium). No lab, cluster or Prometheus: fetch is tested
against an address that refuses and against a stand-in speaking Prometheus' HTTP API.
IB_REPORT_RUNS=dir1:dir2 puts real runs (with their own timeseries.json, if any) in place of the
fixture in the last test; they are copied, never written to."""
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import matplotlib.image
import pytest

from conftest import browser_env

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "ci/tests/fixtures/report"
RUN = FIXTURES / "20261121T155928Z-rps-nginx-lb-default"  # a recorded run: 4,658 req/s
SERIES = ["client_rps", "p50_ms", "p95_ms", "p99_ms", "ingress_cpu_cores", "ingress_cpu_utilization",
          "nic_utilization", "server_rps", "loadgen_cpu_utilization"]
VERDICT = "ingress CPU-bound: 0.97 of 1 core (97%); NIC 0.5% of 10 Gbit/s; load generator 68% CPU"
RULE = "bench:ingress_cpu_utilization:ratio 0.97 >= 0.90"
PNG = b"\x89PNG\r\n\x1a\n"


def report(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench/report"), *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)


def read(d, name):
    return json.loads((d / name).read_text())


def window(d):
    meta = read(d, "meta.json")
    end = datetime.fromisoformat(meta["finished_at"].replace("Z", "+00:00")).timestamp()
    return end - meta["run_seconds"], end


def with_correlation(src, dst, **verdict):
    """A copy of a real run with .correlation and .verdict as the lead's bench.sh adds them."""
    shutil.copytree(src, dst)
    s = read(dst, "summary.json")
    start, end = window(dst)
    rps = s["result"]["rps"]
    s["correlation"] = {
        "source": "prometheus", "url": "http://127.0.0.1:9090", "window": {"start": start, "end": end},
        "signals": {"ingress_cpu_cores": 0.97, "ingress_cpu_limit_cores": 1, "ingress_cpu_utilization": 0.97,
                    "rps_per_ingress_core": rps / 0.97, "server_rps": rps, "ingress_connections": 50,
                    "nic_transmit_bits": 4.9e7, "nic_receive_bits": 3.1e6, "link_capacity_bits": 1e10,
                    "nic_utilization": 0.0049, "nic_drops": 0, "loadgen_cpu_cores": 0.68, "loadgen_cpu_utilization": 0.68},
        "missing": {"backend_cpu_cores": "no series with role backend (the backends' PodMonitor has no targets)",
                    "backend_cpu_utilization": "no series with role backend (the backends' PodMonitor has no targets)"}}
    s["verdict"] = {"limit": "ingress-cpu", "valid": True, "rule": RULE, "text": VERDICT, **verdict}
    (dst / "summary.json").write_text(json.dumps(s, indent=2))
    return dst


def write_timeseries(d, drop=()):
    """Plausible 1 s series over the run's window: RPS near the mean, latency near the
    percentiles, the ingress CPU near its limit (what the verdict says)."""
    r = read(d, "summary.json")["result"]
    start, end = window(d)
    ts = [start + i for i in range(int(end - start) + 1)]
    wave = lambda base, amp: [[t, base * (1 + amp * math.sin(i / 2))] for i, t in enumerate(ts)]
    series = {"client_rps": wave(r["rps"], 0.06), "server_rps": wave(r["rps"] * 1.001, 0.06),
              "p50_ms": wave(r["p50_ms"], 0.1), "p95_ms": wave(r["p95_ms"], 0.1), "p99_ms": wave(r["p99_ms"], 0.1),
              "ingress_cpu_cores": wave(0.95, 0.02), "ingress_cpu_utilization": wave(0.95, 0.02),
              "nic_utilization": wave(0.005, 0.1), "loadgen_cpu_utilization": wave(0.68, 0.05)}
    missing = {n: "no samples between ... for bench:server_requests:rate" for n in drop}
    (d / "timeseries.json").write_text(json.dumps({
        "prometheus": "http://127.0.0.1:9090", "start": start, "end": end, "step": 1,
        "series": {n: v for n, v in series.items() if n not in drop}, "missing": missing}))


@pytest.fixture
def rendered(tmp_path):
    d = with_correlation(RUN, tmp_path / RUN.name)
    write_timeseries(d)
    r = report("render", d)
    assert r.returncode == 0, r.stderr
    return d


# ---------------------------------------------------------------- the browser check

def chromium():
    exe = shutil.which("chromium")
    if not exe:
        pytest.fail("chromium is not installed: the report is checked in a real browser; "
                    "install it with 'apt-get install -y --no-install-recommends chromium'")
    return exe


def browser(page, profile, *mode):
    # A throwaway profile, and none of Chromium's own network traffic.
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--hide-scrollbars", "--window-size=1280,2000", *mode, page.as_uri()],
                          capture_output=True, text=True, timeout=120, env=browser_env(profile.parent))


SVG = "{http://www.w3.org/2000/svg}"


def svg_of(path):
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg" and root.get("width") == "1100", path
    return root


def lines_drawn(path):
    """(colour, dash) of each line a chart drew through its points."""
    return sorted(((p.get("stroke"), p.get("stroke-dasharray")) for p in svg_of(path).iter(SVG + "polyline")), key=str)


def chart_blue(img):
    """Pixels of the timeline's first line colour (#1f77b4): nothing else on the page uses it,
    so they are there only if the chart image was drawn."""
    rgb = img[..., :3]
    return int((abs(rgb - [31 / 255, 119 / 255, 180 / 255]).max(axis=-1) < 0.1).sum())


def page_problems(page, tmp_path, headline, chart=True):
    """What a reader would see wrong: a missing image or link (report check), a DOM without
    the headline, a blank screenshot, or no chart where one should be."""
    problems = []
    c = report("check", page)
    if c.returncode != 0:
        problems.append(c.stderr.strip())
    dom = browser(page, tmp_path / "profile", "--dump-dom")
    m = re.search(r'<div class="cards" id="headline">(.*?)</div></div>', dom.stdout, re.S)
    if not m or headline not in m.group(1):
        problems.append(f"the DOM has no headline with {headline!r}")
    shot = tmp_path / f"shot-{len(list(tmp_path.glob('shot-*')))}.png"
    browser(page, tmp_path / "profile", f"--screenshot={shot}")
    if not shot.is_file() or shot.read_bytes()[:8] != PNG:
        return problems + ["no screenshot"]
    img = matplotlib.image.imread(shot)
    if img[..., :3].std() < 0.03:
        problems.append(f"blank screenshot (pixel std {img[..., :3].std():.4f})")
    if chart and chart_blue(img) < 500:
        problems.append(f"no chart visible ({chart_blue(img)} chart pixels)")
    return problems


# ---------------------------------------------------------------- render

def test_render_writes_page_markdown_and_charts(rendered):
    d = rendered
    for name in ("report.html", "report.md", "charts/timeline.svg", "charts/utilization.svg"):
        assert (d / name).is_file(), name
    assert sorted(p.name for p in (d / "charts").iterdir()) == ["timeline.svg", "utilization.svg"]
    # Every series of the fixture a line of its colour (the server's dashed), the run's mean
    # dotted; the verdict's resource (ingress CPU) the one red bar of four.
    assert lines_drawn(d / "charts/timeline.svg") == sorted(
        [("#1f77b4", None), ("#ff7f0e", "7 4"), ("#2ca02c", None), ("#ff7f0e", None), ("#d62728", None),
         ("#1f77b4", None), ("#9467bd", None), ("#8c564b", None)], key=str), lines_drawn(d / "charts/timeline.svg")
    bars = [r.get("fill") for r in svg_of(d / "charts/utilization.svg").iter(SVG + "rect") if r.get("height") == "28"]
    assert bars == ["#d62728", "#7f7f7f", "#7f7f7f"], bars  # the backends' CPU is not in the fixture: "not measured"
    page, md = (d / "report.html").read_text(), (d / "report.md").read_text()
    for text in (VERDICT, html.escape(RULE), "4,658", "9.41 ms", "23.3 ms", "26.9 ms", "PASS (4/4 thresholds)",
                 "p(95)&lt;250", "agree within 1%", "nginx stub_status", "bench:nic_utilization:ratio", "97.0%",
                 "the backends&#x27; PodMonitor has no targets", "nginx-lb-default", "4a407d7-dirty"):
        assert text in page, text
    for text in (VERDICT, RULE, "4,658", "p(95)<250", "![requests/s, latency and utilization over the run](charts/timeline.svg)"):
        assert text in md, text
    assert "<script" not in page and 'src="charts/timeline.svg"' in page
    assert report("check", d / "report.html").returncode == 0


def test_rendered_page_in_a_browser(rendered, tmp_path):
    assert page_problems(rendered / "report.html", tmp_path, "4,658") == []


def test_broken_pages_are_detected(rendered, tmp_path):
    """The checks above fail on a page a reader would find broken."""
    page = rendered / "report.html"
    (rendered / "charts/timeline.svg").unlink()
    problems = page_problems(page, tmp_path, "4,658")
    assert any("charts/timeline.svg is missing" in p for p in problems), problems
    assert any(p.startswith("no chart visible") for p in problems), problems
    page.write_text(re.sub(r'<div class="cards" id="headline">.*?</div></div>', "", page.read_text(), flags=re.S))
    assert any("no headline" in p for p in page_problems(page, tmp_path, "4,658", chart=False))
    page.write_text("<!DOCTYPE html><html><body></body></html>")
    assert any(p.startswith("blank screenshot") for p in page_problems(page, tmp_path, "4,658", chart=False))


def test_an_old_run_without_correlation_or_time_series(tmp_path):
    """A run from before the correlation existed still gets a page, which says what it lacks."""
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    r = report("render", d)
    assert r.returncode == 0, r.stderr
    page = (d / "report.html").read_text()
    assert "No verdict: summary.json has no .verdict" in page
    assert "No correlation: summary.json has no .correlation" in page
    assert "No time series chart: this run has no timeseries.json" in page
    assert "<img" not in page and not (d / "charts").exists()
    assert "4,658" in page and report("check", d / "report.html").returncode == 0


def test_partial_time_series_and_a_load_generator_limited_run(tmp_path):
    d = with_correlation(RUN, tmp_path / "run", limit="load-generator", valid=False,
                         rule="bench:loadgen_cpu_utilization:ratio 0.98 >= 0.90", text="load generator CPU-bound: k6 98% of 1 CPU")
    write_timeseries(d, drop=("server_rps",))
    s = read(d, "summary.json")
    s["result"].update(model="open 5000/s", dropped_iterations=1234)  # as k6/lib/summary.js writes it
    (d / "summary.json").write_text(json.dumps(s))
    (d / "charts").mkdir()
    (d / "charts/timeline.png").write_bytes(b"stale")  # a previous render's chart never survives (an older version's .png)
    assert report("render", d).returncode == 0
    page = (d / "report.html").read_text()
    assert "no: the load generator limited the run" in page and "load generator CPU-bound" in page
    assert "no samples between ... for bench:server_requests:rate" in page
    assert re.search(r"1,234</div><div class=\"l\">dropped iterations", page) and "open 5000/s" in page
    assert sorted(p.name for p in (d / "charts").iterdir()) == ["timeline.svg", "utilization.svg"]
    assert ("#ff7f0e", "7 4") not in lines_drawn(d / "charts/timeline.svg")  # no server line: its series missing


def test_a_run_whose_correlation_found_no_prometheus(tmp_path):
    """What k6/lib/summary.js writes without PROMETHEUS_URL: every signal missing, verdict unknown."""
    d = with_correlation(RUN, tmp_path / "run", limit="unknown", rule="no data for bench:loadgen_cpu_utilization:ratio",
                         text="unknown: nothing measured saturated, but loadgen_cpu_utilization could not be measured")
    s = read(d, "summary.json")
    s["correlation"].update(url=None, signals={}, missing={n: "no Prometheus configured (PROMETHEUS_URL unset)" for n in [
        "ingress_cpu_cores", "ingress_cpu_utilization", "nic_utilization", "loadgen_cpu_utilization"]})
    (d / "summary.json").write_text(json.dumps(s))
    assert report("render", d).returncode == 0
    page = (d / "report.html").read_text()
    assert "From prometheus (no Prometheus URL configured)" in page and "No signal has a value." in page
    assert page.count("no Prometheus configured (PROMETHEUS_URL unset)") == 4
    assert page.count("absent, no reason recorded") == 11  # the contract's other signals
    assert "unknown: nothing measured saturated" in page and not (d / "charts").exists()


# ---------------------------------------------------------------- fetch

def test_fetch_from_an_unreachable_prometheus_still_allows_a_report(tmp_path):
    d = with_correlation(RUN, tmp_path / "run")
    r = report("fetch", d, "--prometheus", "http://127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "unreachable" in r.stderr
    ts = read(d, "timeseries.json")
    assert ts["series"] == {} and sorted(ts["missing"]) == sorted(SERIES)
    assert all("http://127.0.0.1:9 unreachable: Connection refused" in v for v in ts["missing"].values())
    assert (ts["start"], ts["end"], ts["step"]) == (*window(d), 1)
    assert report("render", d).returncode == 0
    page = (d / "report.html").read_text()
    assert "No time series chart: Prometheus returned no series" in page and "Connection refused" in page


class FakePrometheus(BaseHTTPRequestHandler):
    """Prometheus' /api/v1/query_range: matrices for some queries, an empty result, a refused query."""
    seen = []

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        self.seen.append((u.path, {k: v[0] for k, v in q.items()}))
        query, start = q["query"][0], float(q["start"][0])
        values = lambda v: [[start + i, str(v)] for i in range(5)]
        if query == "bench:server_requests:rate":
            return self.answer(400, {"status": "error", "errorType": "bad_data", "error": "parse error: stand-in refuses"})
        if query == "bench:nic_utilization:ratio":
            return self.answer(200, {"status": "success", "data": {"resultType": "matrix", "result": []}})
        result = [{"metric": {}, "values": values(0.5)}]
        if query == "bench:loadgen_cpu_utilization:ratio":  # two series: the busier one counts
            result.append({"metric": {"pod": "b"}, "values": values(0.9)})
        if "histogram_quantile(0.99" in query:
            result[0]["values"][0][1] = "NaN"  # no requests in that step
        return self.answer(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def test_fetch_queries_the_contract_over_the_run_window(tmp_path):
    d = with_correlation(RUN, tmp_path / "run")
    s = read(d, "summary.json")
    s["correlation"]["window"] = {"start": 1795276770.0, "end": 1795276780.0}  # wins over meta's times
    (d / "summary.json").write_text(json.dumps(s))
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = report("fetch", d, "--prometheus", f"http://127.0.0.1:{server.server_port}/")
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "7/9 series" in r.stderr
    queries = {q["query"] for path, q in FakePrometheus.seen}
    assert {p for p, _ in FakePrometheus.seen} == {"/api/v1/query_range"}
    assert FakePrometheus.seen and all((q["start"], q["end"], q["step"]) == ("1795276770.000", "1795276780.000", "1s") for _, q in FakePrometheus.seen)
    assert f'sum(rate(k6_http_reqs_total{{testid="{RUN.name}"}}[6s]))' in queries
    assert (f'1000 * (histogram_quantile(0.95, sum by (le) (rate(k6_bench_http_req_duration_buckets_total{{testid="{RUN.name}"}}[6s])))'
            f' or histogram_quantile(0.95, sum(rate(k6_http_req_duration_seconds{{testid="{RUN.name}"}}[6s]))))') in queries
    assert {"sum(bench:ingress_cpu_cores:rate)", "bench:ingress_cpu_utilization:ratio"} <= queries
    ts = read(d, "timeseries.json")
    assert sorted(ts["series"]) == sorted(set(SERIES) - {"server_rps", "nic_utilization"})
    assert ts["series"]["client_rps"][0] == [1795276770.0, 0.5]
    assert {v for _, v in ts["series"]["loadgen_cpu_utilization"]} == {0.9}
    assert len(ts["series"]["p99_ms"]) == 4  # the NaN step dropped
    assert "parse error: stand-in refuses" in ts["missing"]["server_rps"]
    assert ts["missing"]["nic_utilization"].startswith("no samples between")
    assert report("render", d).returncode == 0
    assert "parse error: stand-in refuses" in (d / "report.html").read_text()


# ---------------------------------------------------------------- bad input

def not_a_run(tmp):
    tmp.mkdir()
    return tmp


def broken_json(tmp):
    shutil.copytree(RUN, tmp)
    (tmp / "summary.json").write_text("{")
    return tmp


def unfinished(tmp):
    shutil.copytree(RUN, tmp)
    (tmp / "summary.json").write_text('{"client": {}}')
    return tmp


def no_window(tmp):
    shutil.copytree(RUN, tmp)
    meta = read(tmp, "meta.json")
    del meta["finished_at"]
    (tmp / "meta.json").write_text(json.dumps(meta))
    return tmp


BAD = {
    "no such directory": (["render", "/nonexistent"], None, "/nonexistent: no such run directory"),
    "not a run": (["render", "{d}"], not_a_run, "is not a run directory: it has no meta.json"),
    "broken summary": (["render", "{d}"], broken_json, "summary.json is not readable JSON"),
    "unfinished run": (["render", "{d}"], unfinished, "has no .result.rps: not a finished run"),
    "no window": (["fetch", "{d}", "--prometheus", "http://127.0.0.1:9"], no_window, "no time window"),
    "bad URL": (["fetch", str(RUN), "--prometheus", "localhost:9090"], None, "--prometheus must be an http(s) URL"),
    "no URL": (["fetch", str(RUN)], None, "the following arguments are required: --prometheus"),
    "index of nothing": (["index", "{d}"], not_a_run, "holds no runs"),
    "index into a run": (["index", str(RUN), "--out", str(RUN)], None, "is a run directory"),
    "unknown command": (["draw", str(RUN)], None, "invalid choice: 'draw'"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    args, make, message = BAD[case]
    d = make(tmp_path / "run") if make else None
    before = sorted(p.name for p in RUN.iterdir())
    r = report(*[a.replace("{d}", str(d)) for a in args])
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ") and message in r.stderr, r.stderr
    assert not list(tmp_path.rglob("report.*")) and not list(tmp_path.rglob("timeseries.json"))
    assert sorted(p.name for p in RUN.iterdir()) == before, "the fixture is never written to"


# ---------------------------------------------------------------- index

def test_index_of_two_runs_compares_default_and_tuned(tmp_path):
    for name in ("local-nginx-lb-default-1", "local-nginx-lb-full-1"):
        shutil.copytree(FIXTURES / "compare" / name, tmp_path / "compare" / name)
    runs = sorted((tmp_path / "compare").iterdir())
    r = report("index", *runs)  # --out defaults to the runs' parent
    assert r.returncode == 0, r.stderr
    page, md = (tmp_path / "compare/report.html").read_text(), (tmp_path / "compare/report.md").read_text()
    assert 'id="default-vs-tuned"' in page
    # 11,125 / 4,818 req/s (the two real runs)
    assert "| local | rps http /1kb.bin, 50 connections | nginx-lb-default: 4,818 req/s | nginx-lb-full: 11,125 req/s | 2.31× |" in md
    assert 'id="by-cpu"' not in page and 'id="http-vs-https"' not in page
    assert re.search(r"Not shown, for lack of runs: results by ingress CPU count .*HTTP vs HTTPS", page)
    assert report("check", tmp_path / "compare/report.html").returncode == 0  # links to each run resolve


def test_index_of_a_tree_finds_cpu_counts_schemes_and_client_bound_runs(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "results")
    tuned = tmp_path / "results/compare/local-nginx-lb-full-1"
    two = tmp_path / "results/x/local-nginx-lb-full-2cpu-1"
    shutil.copytree(tuned, two)
    meta, s = read(two, "meta.json"), read(two, "summary.json")
    meta.update(variant="nginx-lb-full-2cpu", placement={"client_cpus": "2", "server_cpus": "0-1"})
    s["result"]["rps"] = 20000.0
    s["verdict"] = {"limit": "load-generator", "valid": False, "rule": "r", "text": "t"}
    (two / "meta.json").write_text(json.dumps(meta))
    (two / "summary.json").write_text(json.dumps(s))
    # The same overlay on a platform without a cluster (its driver's trait, in meta.json): the
    # bare-metal side of the lab-vs-Kubernetes table, whatever the platform is called.
    bare = tmp_path / "results/x/metal-nginx-lb-full-1"
    shutil.copytree(tuned, bare)
    meta, s = read(bare, "meta.json"), read(bare, "summary.json")
    meta.update(platform="metal", cluster="none")
    s["result"]["rps"] = 22250.0
    (bare / "meta.json").write_text(json.dumps(meta))
    (bare / "summary.json").write_text(json.dumps(s))
    (tmp_path / "results/x/crashed").mkdir()
    (tmp_path / "results/x/crashed/meta.json").write_text("{}")  # a run that never wrote its summary
    r = report("index", tmp_path / "results", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "out/report.md").read_text()
    assert "nginx-lb-full on local" in md
    assert "| 1 | 11,125 req/s |" in md and "| 2 | 20,000 req/s ⚠ |" in md
    assert "| lab | full | rps /1kb.bin, 50 connections | 6,758 req/s | 10,857 req/s | 1.61× |" in md
    assert "limited by the load generator" in md and "load-generator (not valid)" in md
    assert "Skipped 1 unfinished or unreadable" in md and "crashed" in md
    assert "| nginx-lb-full | rps http /1kb.bin, 50 connections | metal: 22,250 req/s | local: 11,125 req/s | 0.50× |" in md
    assert report("check", tmp_path / "out/report.html").returncode == 0


# ---------------------------------------------------------------- real runs as they are

@pytest.mark.parametrize("src", [p for p in os.environ.get("IB_REPORT_RUNS", "").split(":") if p] or [str(RUN)])
def test_a_real_run_renders(src, tmp_path):
    """Whatever a run holds (correlation, verdict, timeseries.json or not), its page is whole."""
    d = tmp_path / "run"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("report.*", "charts"))
    r = report("render", d)
    assert r.returncode == 0, r.stderr
    s = read(d, "summary.json")
    page = (d / "report.html").read_text()
    if s.get("verdict"):
        assert html.escape(s["verdict"]["text"]) in page
    assert page_problems(d / "report.html", tmp_path, f"{s['result']['rps']:,.0f}",
                         chart=(d / "charts/timeline.svg").exists()) == []
