"""The live page (dashboards/live/, issue 31): the dashboard's panels rendered by Perses in
Debian's chromium (ci/tests/page.cjs), served by the run's own Prometheus at /user/. On the lab:
opened while a 20 s run loads, its request-rate series gains points (live, not a snapshot);
the run's view afterwards (live.url, which the report links): no console error, every panel
with data, the p99 and error stats the summary's, a screenshot in the run's directory; the
Prometheus stopped under the open page: one line says so. On the local cluster: the same view
after a run there."""
import html
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import K6_UNJUDGED, LAB, ROOT, VALIDITY_UNJUDGED, Run, browser_env, sh, task
from queries import empty_by_design

def browser_dir():
    return sh("bash", "-c", ". bench/lib.sh && echo $IB_BROWSER_DIR").stdout.strip()


def viewer(url, shot, seconds, lab):
    """page.cjs's command line. A lab run's page is watched from the lab's client namespace:
    Chromium fails every request in flight (but on loopback) when an interface of its namespace
    comes or goes (ERR_NETWORK_CHANGED), and the cluster's stream makes and removes pods' links
    on the host meanwhile; the client's namespace has only the lab's own link. A cluster run's
    page is watched from the host, in a quiet test."""
    ns = ["ip", "netns", "exec", LAB["LAB_CLIENT_NS"]] if lab else []
    return [*ns, "node", "ci/tests/page.cjs", url, str(shot), str(seconds)]


def page(url, shot, seconds, lab=True):
    """The page at URL watched for SECONDS in chromium: page.cjs's JSON."""
    env = browser_env(Path(shot).parent, IB_BROWSER_DIR=browser_dir())
    r = subprocess.run(viewer(url, shot, seconds, lab), cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=seconds + 150)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def watching(url, shot, seconds):
    """page.cjs watching URL from the lab's client namespace, once it says it has the page's
    first answer: (the process, to communicate with)."""
    proc = subprocess.Popen(viewer(url, shot, seconds, True), cwd=ROOT, env=browser_env(Path(shot).parent, IB_BROWSER_DIR=browser_dir()),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    while (line := proc.stderr.readline()) and line != "page.cjs: ready\n":
        seen.append(line)
    assert line, "".join(seen)
    return proc


def has_data(panel):
    """What the page shows: a stat's value, a time series' legend rows below its header."""
    text = panel["text"]
    return bool(text) and "No data" not in text and text.split() != ["Name", "Avg", "Max"]


def shown(p99_text):
    """A stat's value as shown ("6.15ms", "1.2s") in seconds."""
    m = re.fullmatch(r"([\d.]+)\s*(ms|s|µs)", p99_text.strip())
    assert m, p99_text
    return float(m[1]) * {"ms": 1e-3, "s": 1.0, "µs": 1e-6}[m[2]]


def assert_the_runs_view(run, shot, lab=True):
    """The run's view (its live.url): loads without an error, every panel has data but those
    empty by design, and the stats show the summary's p99 (within one bucket of the native
    engine's classic histogram, 12.5 % wide at most), its count of requests exactly, and its
    errors."""
    url = (run.dir / "live.url").read_text().strip()
    testid = json.loads((run.dir / "meta.json").read_text())["testid"]
    assert "/user/?start=" in url and f"&var-testid={testid}&" in url, url
    assert html.escape(url) in (run.dir / "report.html").read_text()  # the report links it
    view = page(url, shot, 6, lab)
    assert view["errors"] == [] and view["status"] == "", (view["errors"], view["status"])
    titles = [p["title"] for p in view["panels"]]
    assert len(titles) == len(json.loads((ROOT / "dashboards/live/ingress-bench.perses.json").read_text())["spec"]["panels"]), titles
    empty = [(p["title"], p["text"][:80]) for p in view["panels"] if not has_data(p) and not empty_by_design(p["title"])]
    assert empty == [], empty
    stat = {}
    for p in view["panels"]:  # the summary row's stats first: "Errors" is a time series too
        stat.setdefault(p["title"], p["text"])
    p99 = run.summary["result"]["p99_ms"] / 1000
    # exact: one bucket of the native engine's classic histogram (8 per power of two: 1.125x
    # the last at most; xk6/latency.go)
    assert abs(shown(stat["p99 latency"]) / p99 - 1) <= 0.125, (stat["p99 latency"], p99)
    assert int(stat["Requests"].replace(",", "")) == run.summary["result"]["requests"], (stat["Requests"], run.summary["result"])
    assert run.summary["result"]["errors"] == 0 and stat["Errors"].strip() in ("0%", "0.00%", "0"), stat["Errors"]
    assert shot.stat().st_size > 10_000
    return view


@pytest.fixture(scope="module")
def lab_live(tmp_path_factory):
    """A 20 s lab run watched on its live page from before its load to past its end: (the run,
    the page as watched). The page is opened first, at the address bench.sh gives a run of this
    TESTID (live_view), and the run starts once the page has its first answer: opened when the
    run prints it, the page's own load (its script parsed beside a k6 and an nginx that fill
    both CPUs) took 14 s on a quiet host and longer than the load beside the cluster's stream,
    and the page then watched a finished series. An open-model run at a low rate, so that the
    page is not starved either (the browser shares the machine with k6); neither its validity
    nor its thresholds are this test's subject."""
    root = tmp_path_factory.mktemp("live")
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "up", env={"PLATFORM": "lab"}).returncode == 0
    testid = f"live-{os.getpid()}"
    made = sh("bash", "-c", '. bench/lib.sh && load_platform && testid=$1 SCENARIO=rps VARIANT=$DEFAULT_OVERLAY && now=$(($(date +%s) * 1000)) && '
              'live_view "$(pf_prometheus)" "$now" $((now + 120000)) 2s', "live", testid, env={"PLATFORM": "lab"})
    assert made.returncode == 0 and made.stdout.startswith("http://"), made.stderr
    page_proc = watching(made.stdout.strip(), tmp_path_factory.mktemp("live-during") / "during.png", 40)
    env = dict(os.environ, PLATFORM="lab", RESULTS_ROOT=str(root), DURATION="20s", RATE="200", CONNECTIONS="20", TESTID=testid,
               **K6_UNJUDGED, **VALIDITY_UNJUDGED)
    proc = subprocess.run(["bash", "bench/run/bench.sh", "rps"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out, err = page_proc.communicate(timeout=150)
    assert page_proc.returncode == 0, err[-2000:]
    return Run(proc, root), {**json.loads(out), "url": made.stdout.strip()}


def test_the_live_page_follows_a_lab_run(lab_live):
    """Watched through the load: no error, the run gave it as its live page, and the
    request-rate answers it fetched (every 2 s) grew: the last had more points than the first
    with any, the series following the run."""
    run, watched = lab_live
    assert run.rc == 0, run.err[-3000:]
    given = re.search(r"^monitoring    live page (\S+)$", run.err, re.M)
    assert given and given[1].split("&var-", 1)[1] == watched["url"].split("&var-", 1)[1], (given, watched["url"])
    assert watched["errors"] == [], watched["errors"]
    rps = [q for q in watched["queries"] if q["query"].startswith("sum by (testid) (rate(k6_http_reqs_total{")
           and q["status"] == 200 and q["points"]]
    points = [max(q["points"]) for q in rps]
    assert len(points) >= 3 and points[-1] > points[0], points
    print(f"\nthe request-rate series as fetched: {points} points")


def test_the_runs_view_on_the_lab_is_the_summarys(lab_live):
    run, _ = lab_live
    assert run.rc == 0, run.err[-3000:]
    assert_the_runs_view(run, run.dir / "live.png")


def test_the_page_says_when_its_prometheus_is_down(lab_live, tmp_path):
    """The lab's Prometheus stopped once the page has its first answer (page.cjs says when: a
    fixed wait raced the browser's start, and the page's own files, which Prometheus serves,
    were gone before it loaded): its status line says so, in one line. The page is the last
    test of the lab's monitoring: it comes back for the next run."""
    run, _ = lab_live
    page_proc = watching((run.dir / "live.url").read_text().strip(), tmp_path / "down.png", 8)
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "down", env={"PLATFORM": "lab"}).returncode == 0
    out, err = page_proc.communicate(timeout=120)
    assert page_proc.returncode == 0, err
    status = json.loads(out)["status"]
    assert status.startswith("Prometheus at ") and " is down (" in status and "\n" not in status, status


@pytest.mark.quiet  # watched from the host, where the lab's stream makes and removes links
def test_the_runs_view_on_the_local_cluster(local_cluster, bench):
    """The suite's one-node cluster at the overlay's CPU, where k6 is the limit: the page's
    subject is the panels, not the verdict (REQUIRE_VALID=0)."""
    run = bench("rps", PLATFORM="local", DURATION="10s", **VALIDITY_UNJUDGED)
    assert run.rc == 0, run.err[-3000:]
    assert "monitoring    live page http" in run.err
    assert_the_runs_view(run, run.dir / "live.png", lab=False)


def test_task_dashboard_gives_the_last_runs_view(lab_live, tmp_path):
    """./task dashboard: the last run's view, as its live.url says; no run with a page, or a
    run without one: one line, exit 1."""
    run, _ = lab_live
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "up", env={"PLATFORM": "lab"}).returncode == 0
    r = task("dashboard", env={"RESULTS_ROOT": str(run.dir.parent)})
    assert r.returncode == 0 and r.stderr.strip() == f"dashboard     {(run.dir / 'live.url').read_text().strip()}", r.stderr
    r = task("dashboard", env={"RESULTS_ROOT": str(tmp_path)})
    assert r.returncode == 1 and r.stderr.strip() == f"error: no run under {tmp_path} has a live page: ./task bench:rps (monitoring on) makes one", r.stderr
    r = task("dashboard", env={"RUN": str(tmp_path)})
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "has no live page" in r.stderr, r.stderr
