"""bench:routes (routes by the thousand, under load): its bad input, the arithmetic of its
table, and a step of 20 routes up and back down on the bare-metal lab's LB, whose own log says
what was probed and reloaded. Envoy Gateway's step is test_gateway.py's (the shared cluster)."""
import json
import re
import sys
from pathlib import Path

import pytest

from conftest import K6_UNJUDGED, LAB_STATE, ROOT, lab_leftovers, sh, task

sys.path.insert(0, str(ROOT / "bench"))
from report.routes import bounded, propagation, rank, scale_down  # noqa: E402


def bench_routes(tmp_path, settings):
    """./task bench:routes with SETTINGS: (the result, its routes.json)."""
    results = tmp_path / "results"
    r = task("bench:routes", f"RESULTS_ROOT={results}", *(f"{k}={v}" for k, v in settings.items()), timeout=900)
    docs = sorted(results.glob("routes-*/routes.json"))
    assert len(docs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    return r, json.loads(docs[0].read_text())


@pytest.mark.parametrize("args, message", [
    (["ROUTE_STEPS=10,10"], "ROUTE_STEPS=10,10: step 2 (10) changes nothing: each count must differ from the one before it"),
    (["ROUTE_STEPS=0,10"], "ROUTE_STEPS=0,10: step 1 (0) changes nothing"),
    (["ROUTE_STEPS=10,30000"], "ROUTE_STEPS=10,30000: step 2 asks for 30,000 routes, more than 20,000"),
    (["ROUTE_STEPS=ten"], "ROUTE_STEPS"),
    (["PLATFORM=external"], "bench:routes runs on the local cluster or the lab (PLATFORM=local|lab), got PLATFORM=external"),
    (["TARGET=http://198.18.0.2/"], "bench:routes adds routes to what it deploys (the local cluster or the lab): unset TARGET and INGRESS_PODS"),
    (["VARIANT=nodeport-direct"], "VARIANT=nodeport-direct takes no routes here: bench:routes needs an nginx-lb"),
    (["CHANGE_AT=2s"], "CHANGE_AT 2s and DURATION 20s: each step's load needs 3 s or more before its routes change and 5 s or more after"),
    (["DURATION=8s"], "CHANGE_AT 5s and DURATION 8s"),
    (["SCENARIO=tps"], "bench:routes runs the rps scenario"),
    (["PLATFORM=lab", "VARIANT=workers-9"], "unknown variant 'workers-9'"),
])
def test_bad_input_is_one_line_before_anything_starts(args, message, tmp_path, lab_down):
    """Each mistake: one error line, exit 1, no results directory, no cluster and no lab up."""
    results, cluster = tmp_path / "results", tmp_path / "cluster"
    r = task("bench:routes", f"RESULTS_ROOT={results}", *args, env={"IB_CLUSTER_STATE": str(cluster)})
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1 and message in errors[0], r.stderr[-2000:]
    assert not results.exists() and not cluster.exists() and lab_leftovers() == []


def test_the_tables_figures_from_recorded_steps():
    """Nearest-rank quantiles of the routes' answers, and the scale-down line: the last step
    against the first step at its count (the variant as deployed for 0)."""
    assert rank([], 0.5) is None
    assert rank([5.0], 0.99) == 5.0
    answers = [float(i) for i in range(1, 201)]  # 200 routes, 1..200 ms
    # exact: ceil(0.5 * 200) = 100th, ceil(0.99 * 200) = 198th
    assert propagation({"found_ms": answers}) == (100.0, 198.0, 200.0)
    # each quantile of the answers beside the same quantile of the lower bounds
    assert bounded({"found_ms": [10.0, 20.0], "after_ms": [0.0, 5.0]}) == "10 (≥ 0) / 20 (≥ 5) / 20 (≥ 5)"
    mem = lambda ws, rss: {"data_plane": {"working_set_bytes": ws, "rss_bytes": rss, "cpu_cores": 0.0}}  # noqa: E731
    rows = [{"routes": 0, "rest": mem(10, 5)}, {"routes": 10, "rest": mem(20, 6)}, {"routes": 100, "rest": mem(40, 8)},
            {"routes": 10, "rest": mem(30, 7)}]
    assert scale_down({"rows": rows}) == {"routes": 10, "step": 1, "data_plane": {"working_set_bytes": [20, 30], "rss_bytes": [6, 7]}}
    assert scale_down({"rows": rows[:3]}) is None  # 100 was never reached before


def test_a_removal_is_a_few_label_selectors_naming_each_route_once():
    """Routes 11 to 2,500 removed: selectors of at most 1,000 numbers, each route in one."""
    sys.path.insert(0, str(ROOT / "bench/run"))
    from route_probes import selectors
    sel = selectors(10, 2500)
    numbers = [int(x) for s in sel for x in s.split("(", 1)[1].rstrip(")").split(",")]
    assert len(sel) == 3 and all(s.startswith("ingress-bench/route in (") for s in sel)
    assert numbers == list(range(11, 2501))


@pytest.fixture(scope="module")
def lab_step(tmp_path_factory):
    """20 routes added and removed on the lab's LB under a load, the lab down first and after."""
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    tmp = tmp_path_factory.mktemp("routes")
    r, doc = bench_routes(tmp, {"PLATFORM": "lab", "MONITORING": "0", "ROUTE_STEPS": "20,0", "DURATION": "8s", "CHANGE_AT": "3s",
                                "RATE": "2000", **K6_UNJUDGED})
    log = (LAB_STATE / "lb/logs/access.log").read_text().splitlines()
    conf = (LAB_STATE / "lb/nginx.conf").read_text()
    pid = (LAB_STATE / "lb/logs/nginx.pid").read_text().strip()
    yield r, doc, log, conf, pid
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    assert lab_leftovers() == []


@pytest.mark.e2e
def test_every_added_route_answers_and_every_removed_one_answers_as_unrouted(lab_step):
    """Each of the 20 routes probed until its first 200, then, removed, until it answers as
    /routes/0 (never a route) does; the LB's log says so route by route: 404s while it was
    not yet there, 200 from its first answer (again while the removal had not taken), and
    one 404 last, where the watch stopped asking. The variant as deployed after (no route left
    in the LB's configuration)."""
    r, doc, log, conf, _ = lab_step
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert [row["routes"] for row in doc["rows"]] == [0, 20, 0]
    up, down = doc["rows"][1:]
    assert up["marks"]["want"] == 200 and up["marks"]["routes"] == 20 and len(up["found_ms"]) == 20, up["marks"]
    assert doc["unrouted_status"] == 404  # exact: the backends' answer for a path they lack (the LB's location / sends it there)
    assert down["marks"]["want"] == 404 and down["marks"]["routes"] == 20 and len(down["found_ms"]) == 20, down["marks"]
    answered = {}
    for m in re.finditer(r'"GET /routes/(\d+) HTTP/1.1" (\d+) ', "\n".join(log)):
        answered.setdefault(int(m[1]), []).append(m[2])
    assert answered.pop(0) == ["404"]  # the one probe of what a path that is no route answers
    assert sorted(answered) == list(range(1, 21)), sorted(answered)
    for i, statuses in answered.items():
        assert re.fullmatch(r"(404 )*(200 )+404 ", " ".join(statuses) + " "), (i, statuses)
    assert "location = /routes/" not in conf
    assert "Back at 0 routes, against the first time there (as deployed)" in r.stdout


@pytest.mark.e2e
def test_each_step_is_one_reload_nginx_logged_and_memory_is_the_lbs_cgroups(lab_step):
    """nginx's own record (its error log's "reconfiguring"): one reload for each step; every
    reading at rest from the LB's memory group (the one its master is in)."""
    r, doc, _, _, pid = lab_step
    assert [row["updates"] for row in doc["rows"][1:]] == [1, 1]
    for row in doc["rows"]:
        d = row["rest"]["data_plane"]
        assert pid in Path(d["cgroup"], "cgroup.procs").read_text().split(), d
        assert d["working_set_bytes"] > 0 and d["rss_bytes"] > 0, d
