"""./task test:time's arithmetic on a recorded run (fixtures/suite: a fresh clone's `.ci/run`
output, each line with its second, and its three JUnit files cut to their slowest tests), and
its refusals of bad input, one line each before anything is cloned."""
import os
import sys
from pathlib import Path

from conftest import ROOT, one_error, sh

sys.path.insert(0, str(ROOT / "ci/tests"))
import suite_time  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures/suite"


def recorded():
    """The run's lines as suite_time.py timed them: (seconds since the start, text)."""
    return [(float(l[:8]), l[9:]) for l in (FIXTURE / "run.log").read_text().splitlines()]


def test_phases_are_the_seconds_between_run_shs_markers():
    # exact: the recorded seconds of the markers (689, 817, 2267) and of the last line (2267)
    assert suite_time.phases(recorded()) == {"setup": 689.0, "alone": 128.0, "streams": 1450.0, "compare": 0.0}


def test_a_phase_whose_end_never_came_is_missing():
    lines = [(0.0, "tools  building"), (600.0, "test          static and end to end on the lab and the local cluster (pytest)"),
             (700.0, "[machine] 1 failed")]
    assert suite_time.phases(lines) == {"setup": 600.0}


def test_each_sessions_counts_and_each_streams_waits_are_read():
    ended, waited = suite_time.streams(recorded())
    assert ended == {"machine": {"result": "15 passed, 621 deselected", "seconds": 127.17},
                     "lab": {"result": "547 passed, 89 deselected", "seconds": 1407.98},
                     "cluster": {"result": "71 passed, 565 deselected", "seconds": 1449.61}}
    assert waited == {"lab": "the quiet lock: 294 s, 8 times; the other stream's loads: 70 s, 12 times",
                      "cluster": "the quiet lock: 34 s, 6 times; the other stream's loads: 22 s, 4 times"}


def test_the_slowest_tests_across_the_streams_junit_files():
    slow, total = suite_time.slowest(FIXTURE, n=3)
    assert total == 9  # exact: the fixture's 4 + 3 + 2 test cases
    assert [(s["seconds"], s["stream"], s["test"]) for s in slow] == [
        (73.0, "cluster", "test_nodes.py::test_a_later_run_keeps_the_clusters_share_and_a_busy_host_is_refused"),
        (71.5, "cluster", "test_cluster_e2e.py::test_throughput_through_a_1g_link_is_read_against_its_capacity"),
        (70.1, "cluster", "test_change.py::test_scale_marks_the_endpoints_and_counts_the_502s_the_ingress_logged")]


def test_minutes():
    assert [suite_time.minutes(s) for s in (0, 59.6, 60, 1807.4, None)] == ["0:00", "1:00", "1:00", "30:07", "-"]


def test_bad_runs_and_an_existing_result_set_are_one_line(tmp_path):
    clones = lambda: sorted(Path(os.environ.get("TMPDIR", "/tmp")).glob("ingress-bench-suite-*"))  # noqa: E731
    before = clones()
    for args, says in ((["--runs", "0"], "--runs must be at least 1"), (["--runs", "x"], "invalid int value"),
                       (["--out", str(tmp_path)], "exists already")):
        err = one_error(sh(sys.executable, "ci/tests/suite_time.py", *args, timeout=60))
        assert says in err, err
    assert clones() == before, "bad input must clone nothing"


def test_each_run_is_written_with_its_control(tmp_path):
    stamp = {"date": "2026-12-04", "commit": "0123456789abcdef", "machine": {"cpus": 2, "cpu_model": "x", "kernel": "k"}}
    run = {"run": 1, "started": "2026-12-04T20:51:00+00:00", "go_caches": "warm", "exit_code": 0, "wall_s": 1778.0, "within_budget": True,
           "phases_s": {"setup": 95.0}, "sessions": {}, "waited": {}, "tests": {"all": 639, "fast": 479},
           "steal_percent": 0.04, "control_s": [0.612, 0.634], "slowest": []}
    suite_time.write(tmp_path, suite_time.datetime.date(2026, 12, 4), stamp, [run])
    rows = [l for l in (tmp_path / "result.md").read_text().splitlines() if l.startswith("| 1 |")]
    assert rows == ["| 1 | 20:51 | warm | 0 | 29:38 | yes | 1:35 | - | - | - | - | - | 0.04 % | 0.61 / 0.63 |"]


def test_a_run_is_held_to_the_budget_of_its_go_caches(tmp_path, monkeypatch):
    """Go's build cache empty as the run starts (a new machine): the 40-minute budget; any build
    output in it: the 30-minute one."""
    cache = tmp_path / "go-build"
    monkeypatch.setenv("GOCACHE", str(cache))
    assert suite_time.go_caches() == "empty"  # not there
    cache.mkdir()
    (cache / "README").write_text("x")
    assert suite_time.go_caches() == "empty"  # Go's own files only
    (cache / "00").mkdir()
    assert suite_time.go_caches() == "warm"
    assert suite_time.BUDGET_S == {"warm": 30 * 60, "empty": 40 * 60}
