"""The suite's streams (ci/tests/streams.py): a quiet test waiting for the other stream to be
between tests goes before that stream's next test."""
import fcntl
import threading
import time

import streams


class Item:
    def __init__(self, quiet):
        self.quiet = quiet

    def get_closest_marker(self, name):
        return self.quiet if name == "quiet" else None


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
