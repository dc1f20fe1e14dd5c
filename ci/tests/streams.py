"""The suite's streams (ci/tests/run.sh), a pytest plugin (conftest.py loads it). `./task test`
runs the suite as three pytest sessions. First, alone, the tests that need the whole machine to
themselves (whole_machine: a cluster and the lab up together, `./task down`) and the quiet
tests that need no cluster. Then two at once: the lab's stream (every test that needs no local
cluster: the fast tier first, then the lab's) and the cluster's (the modules with a cluster of
their own, own_cluster, then the shared local cluster's). A load waits for the other stream's
(bench/lib/k6.sh load_lock); a cluster test whose subject the other stream's work could change
(quiet) runs while the lab's stream is between tests (pytest_runtest_protocol below); the
cluster stream's comparisons of the machine leave the lab's objects out (machine_state.diff
beside_lab). IB_TEST_STREAM unset: one session runs every test (a developer's selection; the
fast tier)."""
import fcntl
import os
import time
from pathlib import Path

import pytest

STREAM = os.environ.get("IB_TEST_STREAM", "")
# What this stream waited for the other, for the session's closing lines: where the suite's
# minutes go when the two streams take turns (seconds, times).
WAITS = {"the quiet lock": [0.0, 0], "the other stream's loads": [0.0, 0]}


def waited(what, seconds):
    if seconds > 0:
        WAITS[what][0] += seconds
        WAITS[what][1] += 1


def stream_of(item):
    if item.get_closest_marker("whole_machine"):
        return "machine"
    if "local_cluster" in item.fixturenames or item.get_closest_marker("own_cluster"):
        return "cluster"
    # A quiet test without a cluster runs alone, where the machine is quiet by construction:
    # in the lab's stream it waited for the cluster stream's test of the moment to end (a
    # minute, some of them) and then held that stream up.
    return "machine" if item.get_closest_marker("quiet") else "lab"


def pytest_configure(config):
    config.addinivalue_line("markers", "whole_machine: needs the whole machine to itself (a cluster and the lab up together, "
                                       "./task down): runs alone, before the lab's and the cluster's streams")
    config.addinivalue_line("markers", "own_cluster: brings a local cluster of its own up: in the cluster's stream, before "
                                       "the shared cluster")
    config.addinivalue_line("markers", "quiet: its subject is a verdict, a sent rate or a page the other stream's work can "
                                       "change: alone before the streams, or (a cluster's) while the lab's stream is between tests")


def pytest_collection_modifyitems(config, items):
    """In a stream, its own tests only."""
    if not STREAM:
        return
    other = [i for i in items if stream_of(i) != STREAM]
    config.hook.pytest_deselected(items=other)
    items[:] = [i for i in items if stream_of(i) == STREAM]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """In the two streams at once, each test holds a shared lock for its whole protocol (the
    setup of the fixtures it is first to need and their teardown included); a quiet test holds
    it exclusively, so it runs while the other stream is between tests. Its loads still take
    the load lock (bench/lib/k6.sh): the quiet lock is another file."""
    if STREAM not in ("lab", "cluster"):
        yield
        return
    # A waiting quiet test goes before the next test of the other stream: flock grants no turns,
    # and the other stream, taking the lock back as each of its tests began, kept one waiting
    # through several. It holds turn.lock while it waits; a test takes the shared lock only
    # through turn.lock, so only while no quiet test waits.
    locks = Path(os.environ["IB_TEST_LOCKS"])
    quiet = item.get_closest_marker("quiet")
    with open(locks / "quiet.lock", "a") as f:
        t0 = time.monotonic()
        with open(locks / "turn.lock", "a") as turn:
            fcntl.flock(turn, fcntl.LOCK_EX)
            fcntl.flock(f, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        waited("the quiet lock", round(time.monotonic() - t0, 1))
        yield


def pytest_terminal_summary(terminalreporter):
    if STREAM in ("lab", "cluster"):
        terminalreporter.write_line(f"{STREAM} stream waited for " + "; ".join(
            f"{what}: {secs:.0f} s, {n} times" for what, (secs, n) in WAITS.items()))
