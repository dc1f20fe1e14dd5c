"""bench:change on the bare-metal lab (issue 17: "on the lab, the same where it applies"): the
lab's LB reloaded in place and a backend's nginx stopped and started, under a steady open-model
load; the marks from the lab script's return, the client's counts beside the LB's access log,
and the lab as the variant made it afterwards. The machine as found once the lab is down."""
import json
from pathlib import Path

import pytest

from changes import bench_change
from conftest import K6_UNJUDGED, LAB, LAB_STATE, STREAM, lab_leftovers, sh

# bench:change's shortest load: 3 s before the change, 10 s from its start (a reload and a
# backend's second down are over well within it).
# The sends' lateness is not these tests' subject (the client's CPU is shared with the cluster
# stream's work): LATE_MAX out of reach.
SHORT = {"PLATFORM": "lab", "MONITORING": "0", "DURATION": "13s", "CHANGE_AT": "3s", "RATE": "2000", "LATE_MAX": "1"}
LOAD_MS = 13000


@pytest.fixture(scope="module", autouse=True)
def lab():
    """The machine without the lab (an earlier lab test's goes down first), and as found once
    the lab is down after the changes. In the lab's stream, beside the cluster's, the machine
    changes with that stream's cluster: nothing of the lab is left, and ci/tests/run.sh
    compares the whole machine once both streams have ended."""
    import machine_state
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    assert lab_leftovers() == [], "the lab's down left part of it"
    before = None if STREAM else machine_state.snapshot()
    yield
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    assert lab_leftovers() == [], "lab:down left part of the lab"
    if before is not None:
        assert machine_state.diff(before, machine_state.snapshot()) == [], "lab:down must leave the machine as it found it"


def change(tmp_path, kind, **settings):
    r, doc, _ = bench_change(tmp_path, kind, {**SHORT, **settings})
    assert doc["platform"] == "lab"
    return r, doc, doc["analysis"]


def failed_ms(doc):
    """The start of the first and the end of the last of the run's 100 ms slots with a failed
    request (the timeline the analysis reads; its disruption adds slow slots, and a busy host
    makes those anywhere)."""
    timeline = json.loads((Path(doc["run"]) / "timeline.json").read_text())
    failed = [s["i"] for s in timeline["slots"] if set(s["outcomes"]) - {"ok"}]
    return failed[0] * timeline["slot_ms"], (failed[-1] + 1) * timeline["slot_ms"]


def exact(doc):
    """The client's responses and status errors are exactly the LB's access log's."""
    s = doc["server"]
    assert s["counted"] and s["agree"], s
    assert s["responses"] == s["client_responses"] and s["status_errors"] == s["client_status_errors"], s


def at_change_at(marks):
    """The change started CHANGE_AT (3 s) after the load's first request, within k6's start-up
    (the runner counts from k6's log appearing, before the first request goes out)."""
    return 2000 <= marks["start"] <= 4000


def status(path):
    return sh("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", f"http://{path}").stdout


def test_the_control_run_and_a_reload(tmp_path):
    """No change: nothing marked, every open-model request sent and logged, exit 99 exactly when
    one failed (that none does is a claim: bench:evidence's a-control-run-fails-nothing-lab). A reload
    into other knobs (workers 1): marked, the new configuration answering /generation before the
    end, only the errors a reload causes (keep-alive connections closed by old workers), the log
    agreeing; afterwards the LB runs the variant's own configuration again (the same master)."""
    r, doc, a = change(tmp_path, "none", **K6_UNJUDGED)
    # k6's checks (rate==1) are the one threshold in reach: crossed exactly when a request failed
    assert r.returncode == (99 if a["run"]["errors"] - a["run"]["by_kind"].get("dropped", 0) else 0), (r.returncode, a["run"])
    assert a["marks_ms"] == {} and a["run"]["requests"] == 2000 * LOAD_MS // 1000, a
    exact(doc)
    master = (LAB_STATE / "lb/logs/nginx.pid").read_text()

    r, doc, a = change(tmp_path, "reload", RELOAD_TO="workers-1")
    # 99 when a connection closed under a request: the scenario's http_req_failed threshold is 0.01 %.
    assert r.returncode == (99 if a["run"]["errors"] else 0), r.stderr[-3000:]
    m = a["marks_ms"]
    assert at_change_at(m) and m["start"] < m["serving"] == m["end"] < LOAD_MS, m
    assert set(a["run"]["by_kind"]) <= {"closed", "reset"}, a["run"]
    assert a["during"]["errors"] == a["run"]["errors"]  # none outside the change
    exact(doc)
    assert (LAB_STATE / "lb/variant").read_text().strip() == "nginx-lb-default"
    conf = (LAB_STATE / "lb/nginx.conf").read_text()
    assert "worker_processes 1;" not in conf and "return 200 \"2\\n\";" in conf  # reloaded twice: the change, then back
    assert (LAB_STATE / "lb/logs/nginx.pid").read_text() == master


def test_a_stopped_backend_the_lb_retries_around(tmp_path):
    """Backend 1 of 2 stopped for BACKEND_DOWN_S: marked start < down < end; the LB's default
    proxy_next_upstream sends what it had for it to backend 2, so no request fails, and the
    access log shows the retries; backend 1 answers again afterwards."""
    r, doc, a = change(tmp_path, "kill-backend")
    assert r.returncode == 0, r.stderr[-3000:]
    m = a["marks_ms"]
    assert at_change_at(m) and m["start"] < m["down"] <= m["end"] - 1000 and m["end"] < LOAD_MS, m
    assert a["run"]["errors"] == 0 and doc["verdict"].startswith("no request failed"), doc["verdict"]
    exact(doc)
    assert status(f"{LAB['LAB_BACKEND_NET']}.{int(LAB['LAB_BACKEND_OCTET0']) + 1}/1kb.bin") == "200"


def test_the_only_backend_stopped_fails_exactly_while_it_is_down(tmp_path):
    """LAB_BACKENDS=1: every request while the backend is down is a 502, the access log's 502s
    are the client's, the failed slots lie between the change's start and end marks (the marks
    are when it happened), the verdict names the stopped backend, and CHANGE_ERRORS_MAX=0 is
    crossed (exit 99)."""
    r, doc, a = change(tmp_path, "kill-backend", LAB_BACKENDS="1", CHANGE_ERRORS_MAX="0")
    assert r.returncode == 99, r.stderr[-3000:]
    assert set(a["run"]["by_kind"]) == {"status"} and set(a["run"]["statuses"]) == {"502"}, a["run"]
    assert a["run"]["errors"] > 1000 and a["during"]["errors"] == a["run"]["errors"], a
    exact(doc)
    m, (first, end) = a["marks_ms"], failed_ms(doc)
    # exact: the timeline's 100 ms slots
    assert m["start"] - m["start"] % 100 <= first and end <= m["end"] + 100, (m, first, end)
    assert end - first >= 1000 and a["disruption"]["ms"] >= end - first  # down for BACKEND_DOWN_S at least
    assert "the only backend was stopped" in doc["verdict"] and "CROSSED" in doc["gate"]
