"""The native engine's open model on the real lab (xk6/pacing.go): the rate asked is the rate
sent, latency counts from when each request was due (coordinated omission corrected, as wrk2
does) with the service time beside it, and sends the client could not make on time are
counted and fail the run."""
import os
import re
import subprocess
import time

import pytest

from conftest import K6_UNJUDGED, LAB, ROOT, Run, k6_running, sh, within

BACKEND = f"http://{LAB['LAB_BACKEND_NET']}.{int(LAB['LAB_BACKEND_OCTET0']) + 1}"
BACKEND_NS = f"{LAB['LAB_NS_PREFIX']}be1"  # bench/platforms/lab.sh add_host be<i>
WRK = ["ip", "netns", "exec", LAB["LAB_CLIENT_NS"], "taskset", "-c", "0", "wrk", "-t1", "-c50", "-d2s",
       "-H", "Host: bench.ingress.test", f"http://{LAB['LAB_LB_IP']}/1kb.bin"]


@pytest.fixture(scope="module")
def lab_rate():
    """What the lab's LB serves now (wrk, the reference client, 2 s, holding the load lock):
    the rates these tests ask are shares of it, as the host's speed changes by the hour (the
    same LB served 16,400 req/s one day and 3,300 another)."""
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    r = sh("bash", "-c", '. bench/lib.sh && load_lock && exec "$@"', "-", *WRK)
    m = re.search(r"Requests/sec:\s+([\d.]+)", r.stdout)
    assert r.returncode == 0 and m and "Non-2xx" not in r.stdout, r.stdout + r.stderr
    return float(m[1])


def stopped(pids, seconds):
    """PIDS held still for SECONDS (SIGSTOP, then SIGCONT)."""
    sh("kill", "-STOP", *pids)
    time.sleep(seconds)
    sh("kill", "-CONT", *pids)


@pytest.mark.parametrize("share", [0.1, 0.25, 0.4])  # of what the LB serves now
def test_the_rate_asked_is_the_rate_sent(bench, lab_rate, share):
    """Every slot of RATE x DURATION sent (within 1%), none dropped; the client's CPU per request
    is reported. Whether the client sent each on time is the host's in a slow hour (a stalled
    vCPU delays a paced send as it would any process): its threshold is out of reach here, and
    the client stopped on purpose is what proves it below."""
    rate = int(round(share * lab_rate, -2))
    run = bench("rps", ENGINE="native", RATE=str(rate), DURATION="4s", MONITORING="0", LATE_MAX="1")
    assert run.rc == 0, run.why
    r = run.result
    sent = r["requests"] - 1  # setup's readiness GET
    # exact: the open model sends RATE x 4 s; 1 % for the slots at its edges
    assert within(sent, rate * 4, 0.01), (sent, rate * 4)
    assert r["sends_dropped"] == 0 and r["errors"] == 0
    # exact: service time never exceeds the time from the due time; 1 % for the histograms' buckets
    assert 0 < r["service_p99_ms"] <= r["p99_ms"] * 1.01  # from the send vs from the due time
    assert run.summary["client"]["cpu_us_per_request"] > 0
    # exact: the requests in flight at the end, at most one per connection
    assert within(sent, run.summary["server"]["requests"] - 1, 0.01)  # the LB counted the same
    assert "open model" in run.out and f"of {rate:,} req/s asked" in run.out


def test_a_stopped_client_counts_its_own_late_sends_and_fails_their_threshold(bench_async, lab_rate):
    """k6 itself stopped mid-run (SIGSTOP): the sends due meanwhile go out late, each on a
    connection that has been free since long before (consecutive slots take consecutive
    connections, and the pause holds fewer slots than half the connections), so every one is
    the client's own late send. Still every slot is sent, and LATE_MAX at a third of what the
    stop makes fails the run (exit 99) on bench_sends_client_late by name. A slow hour only
    adds late sends."""
    rate, connections, duration = int(round(0.15 * lab_rate, -2)), 200, 5
    pause = min(0.3, 0.5 * connections / rate)
    late_max = f"{pause / (3 * duration):.4f}"  # a third of the stop's sends, as a share of the run's
    run = bench_async("rps", ENGINE="native", RATE=str(rate), CONNECTIONS=str(connections), DURATION=f"{duration}s",
                      MONITORING="0", **{**K6_UNJUDGED, "LATE_MAX": late_max})
    run.wait_for_load()
    time.sleep(1.5)
    pids = k6_running(load_only=True)
    assert len(pids) == 1, pids
    stopped(pids, pause)
    r = run.result()
    assert run.rc == 99, run.err
    failed = {t["metric"] for t in r["thresholds"] if not t["ok"]}
    assert failed == {"bench_sends_client_late"}, r["thresholds"]
    # exact: the slots due during the pause set here, less those at its edges
    assert r["sends_client_late"] >= 0.7 * rate * pause, (r["sends_client_late"], rate * pause)
    # exact: the backlog is sent once k6 runs again; 1 % for the slots at the run's edges
    assert r["sends_dropped"] == 0 and within(r["requests"] - 1, rate * duration, 0.01), r


@pytest.mark.quiet  # the pause's late sends are told from the client's own by the connection's state
def test_a_stalled_target_shows_in_the_corrected_latency_not_the_service_time(bench_async, lab_rate):
    """The backend stopped for 200 ms mid-run (SIGSTOP): the requests due meanwhile wait, and
    their latency counts from when they were due, so the p99 shows the stall; the service time
    of the few requests in flight at the stop does not reach the p99. The late sends the target
    held (all late sends but the client's own) are about the requests due during the pause. (Whether the client itself was on time is the
    host's: its threshold is out of reach here.)"""
    rate, pause = int(round(0.15 * lab_rate, -2)), 0.2  # a backend alone serves more than the LB in front of it
    # Every k6 threshold out of reach: the subject is the figures, and whether the client sent
    # on time on a busy host is not (CI once crossed bench_sends_client_late here).
    run = bench_async("rps", ENGINE="native", RATE=str(rate), DURATION="5s", TARGET=BACKEND, MONITORING="0", **K6_UNJUDGED)
    run.wait_for_load()
    time.sleep(2)
    pids = sh("ip", "netns", "pids", BACKEND_NS).stdout.split()
    assert pids, "the backend runs no process"
    stopped(pids, pause)
    r = run.result()
    assert run.rc == 0, run.why
    # exact: the 200 ms pause set here, seen from the due time
    assert r["p99_ms"] >= 0.5 * pause * 1000, r  # the stall, seen from the due time
    # exact: the pause set here: only the few requests in flight at the stop wait it
    assert r["service_p99_ms"] < 0.25 * pause * 1000, r  # what the target took once asked
    # The late sends the target held: all late sends less the client's own (sent late with their
    # connection free, which a slow hour makes many of).
    held = r["sends_late"] - r["sends_client_late"]
    # exact: the sends due during the pause set here (RATE x 0.2 s), with the slots around it
    assert 0.7 * rate * pause <= held <= 1.5 * rate * pause, (r["sends_late"], r["sends_client_late"])
    assert r["sends_dropped"] == 0


def test_a_rate_that_cannot_be_sent_fails_on_dropped_sends(bench):
    """Two connections cannot carry 100,000 requests/s: the backlog is late, what is still due
    at the end is dropped, and that threshold fails the run (exit 99) with its name."""
    run = bench("rps", ENGINE="native", RATE="100000", CONNECTIONS="2", DURATION="2s", MONITORING="0")
    assert run.rc == 99, run.err
    r = run.result
    assert r["sends_dropped"] > 50000 and r["sends_late"] > 1000, r
    failed = {t["metric"] for t in r["thresholds"] if not t["ok"]}
    assert "bench_sends_dropped" in failed, r["thresholds"]
    assert "✗ bench_sends_dropped" in run.out


@pytest.fixture
def bench_async(tmp_path):
    """bench_async(scenario, **env): bench/run/bench.sh started in the background; wait_for_load()
    returns once its k6 sends, result() waits for the run and reads its summary."""
    class Async:
        def __init__(self, scenario, env):
            self.root = tmp_path / "results"
            env = {"PLATFORM": "lab", "RESULTS_ROOT": str(self.root), "CONNECTIONS": "20", **env}
            self.proc = subprocess.Popen(["bash", "bench/run/bench.sh", scenario], cwd=ROOT, env=dict(os.environ, **env),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def wait_for_load(self):
            for _ in range(600):
                if k6_running(load_only=True):  # this run's, not its probe's nor the other stream's
                    time.sleep(0.5)  # past setup's readiness request
                    return
                assert self.proc.poll() is None, self.proc.communicate()
                time.sleep(0.1)
            raise AssertionError("k6 did not start within 60 s")

        def result(self):
            out, err = self.proc.communicate(timeout=120)
            run = Run(subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err), self.root)
            self.rc, self.err, self.why = run.rc, run.err, run.why
            return run.result

    return lambda scenario, **env: Async(scenario, env)
