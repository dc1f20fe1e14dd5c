"""The suite's streams (ci/tests/streams.py): a quiet test waiting for the other stream to be
between tests goes before that stream's next test; a quiet_load test holds that stream only
through its loads (bench/lib/k6.sh quiet_lock)."""
import fcntl
import os
import subprocess
import threading
import time

import streams
from conftest import ROOT


class Item:
    def __init__(self, quiet, marker="quiet"):
        self.quiet, self.marker = quiet, marker

    def get_closest_marker(self, name):
        return self.quiet if name == self.marker else None


def test_a_waiting_quiet_test_goes_before_the_other_streams_next(tmp_path, monkeypatch):
    """The lab's test of the moment holds the shared lock; a quiet cluster test waits for it,
    and the lab's next test, asking after it, begins only once the quiet one has ended."""
    monkeypatch.setattr(streams, "STREAM", "cluster")
    monkeypatch.setenv("IB_TEST_LOCKS", str(tmp_path))
    began, done = [], threading.Event()

    def test(name, quiet, until):
        protocol = streams.pytest_runtest_protocol(Item(quiet), None)
        next(protocol)  # the locks taken: the test runs
        began.append(name)
        until.wait(10)
        protocol.close()

    with open(tmp_path / "quiet.lock", "a") as current:
        fcntl.flock(current, fcntl.LOCK_SH)
        quiet = threading.Thread(target=test, args=("quiet", True, done))
        quiet.start()
        time.sleep(0.5)  # waiting: it holds the turn
        ends = threading.Event()
        ends.set()
        after = threading.Thread(target=test, args=("next", False, ends))
        after.start()
        time.sleep(0.5)
        assert began == []
    # the current test ended: the quiet one begins, the next waits for its end
    time.sleep(0.5)
    assert began == ["quiet"]
    done.set()
    quiet.join(5)
    after.join(15)
    assert began == ["quiet", "next"]


def test_a_quiet_load_holds_the_other_stream_only_through_its_load(tmp_path, monkeypatch):
    """A quiet_load test begins while the other stream's test of the moment holds the shared
    lock; its load waits for that test to end, then the other stream's next test waits for the
    load's end (not the test's); after the test its loads take no quiet lock."""
    monkeypatch.setattr(streams, "STREAM", "lab")
    monkeypatch.setenv("IB_TEST_LOCKS", str(tmp_path))
    monkeypatch.delenv("IB_TEST_QUIET", raising=False)
    loaded, ended = tmp_path / "loaded", tmp_path / "ended"
    # ENDED is made just before the unlock: a test that began after the load ended sees it
    load = '. bench/lib.sh; load_lock; touch "$1"; sleep 2; touch "$2"; load_unlock; sleep 30'
    other = []

    def other_stream_test():
        protocol = streams.pytest_runtest_protocol(Item(None), None)
        next(protocol)
        other.append(ended.exists())  # whether the load had ended when this test began
        protocol.close()

    with open(tmp_path / "quiet.lock", "a") as current:
        fcntl.flock(current, fcntl.LOCK_SH)  # the other stream's test of the moment
        protocol = streams.pytest_runtest_protocol(Item(True, "quiet_load"), None)
        next(protocol)  # began beside it
        assert os.environ["IB_TEST_QUIET"] == str(tmp_path)
        p = subprocess.Popen(["bash", "-c", load, "-", str(loaded), str(ended)], cwd=ROOT,
                             env={**os.environ, "IB_LOAD_LOCKED": ""}, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert not loaded.exists(), "the load began while the other stream's test ran"
    for _ in range(1200):  # the machine's load lock may be the other stream's for a while
        if loaded.exists():
            break
        time.sleep(0.1)
    assert loaded.exists(), p.stderr.read() if p.poll() is not None else "the load never began"
    after = threading.Thread(target=other_stream_test)
    after.start()
    after.join(60)
    # exact: the other stream's next test began once the load ended, while the process lived on
    assert other == [True] and p.poll() is None
    p.kill()
    p.wait()
    protocol.close()
    assert "IB_TEST_QUIET" not in os.environ
