"""Interrupts lose nothing (issue 13, item 4): SIGINT or SIGTERM during a real run, sent to the
process group as a terminal's Ctrl-C is (or as a supervisor's kill of the group), on the real
lab and on the local cluster with real k6. The run stops within seconds, k6 with it, and its
directory holds what was measured, marked aborted and never passed; no scratch file stays.
Also: the results' filesystem filling up mid-run ends in one line; a k6 that is not the
suite's (anyone's, named k6) is neither blamed on the suite nor measured by it."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import FROM_A_TERMINAL, LATENCY_UNJUDGED, ROOT, k6_running, lab_leftovers, no_load, sh, stub, within

SCRATCH = "ingress-bench-run.*"  # bench.sh's per-run scratch directories (mktemp -d in TMPDIR)


def session_procs(sid):
    """Every process still in the session the run was started in."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "-s", str(sid)], capture_output=True, text=True).stdout
    return out.strip()


def interrupt(cmd, sig, env, after_k6_s=5, timeout=240):
    """Starts CMD in a session of its own, waits until its k6 runs and AFTER_K6_S more, sends
    SIG to its process group and waits for every process of the session to end. Returns
    (returncode, output, seconds from the signal until the session was empty)."""
    p = subprocess.Popen([*FROM_A_TERMINAL, *cmd], cwd=ROOT, env=dict(os.environ, **env), start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    while not k6_run_in(p.pid):
        assert p.poll() is None, f"ended before k6 started: {p.communicate()[0][-2000:]}"
        assert time.time() < deadline, "k6 did not start"
        time.sleep(0.2)
    time.sleep(after_k6_s)
    t0 = time.time()
    os.killpg(p.pid, sig)
    out = p.communicate(timeout=120)[0]
    while session_procs(p.pid) and time.time() - t0 < 60:
        time.sleep(0.1)
    return p.returncode, out, time.time() - t0


def k6_run_in(sid):
    """The session's `k6 run` has started (not the `k6 inspect` of the settings' check)."""
    return any(line.split(None, 1)[1].startswith("k6 run") for line in session_procs(sid).splitlines())


def run_tmp(tmp_path):
    """A TMPDIR of the run's own: what its scratch directory leaves is the run's, not that of
    a run of the other stream, which shares /tmp."""
    d = tmp_path / "tmp"
    d.mkdir()
    return d


def assert_aborted_run(root, out, sig_name, elapsed, tmp):
    """The run directory is complete with what was measured, marked aborted, nothing extra."""
    # Within the grace k6 gets (bench.sh stop_grace: gracefulStop 5 s + the teardown's 10 s
    # query timeout + 2 s) and the summary and report after it; most runs end in 3-8 s.
    # exact: bench.sh's stop_grace (17 s) + 3 s to the kill, and the report after it
    assert elapsed <= 25, f"the run took {elapsed:.1f} s to end after {sig_name}:\n{out[-3000:]}"
    runs = list(Path(root).iterdir())
    assert len(runs) == 1, runs
    d = runs[0]
    names = sorted(p.name for p in d.iterdir())
    assert not [n for n in names if n.startswith(".") or n.endswith((".new", ".tmp"))], names
    for f in ("summary.json", "summary.txt", "meta.json", "k6.log", "report.html", "timeseries.json"):
        assert f in names, f"{f} missing from {names}"
    s = json.loads((d / "summary.json").read_text())
    assert s["aborted"] is True and s["result"]["aborted"] is True, s.get("interrupted")
    assert s["result"]["passed"] is False
    assert s["interrupted"]["signal"] == sig_name and s["interrupted"]["k6_summary"] is True
    # exact: the signal is sent AFTER_K6_S (5) after k6 started
    assert 3 <= s["interrupted"]["after_seconds"] <= 15, s["interrupted"]
    # Cut short: far less than the 30 s asked for, yet measured.
    # exact: cut at about 5 s of the 30 asked
    assert 2 < s["result"]["seconds"] < 20, s["result"]["seconds"]
    assert s["result"]["requests"] > 0
    assert s["client"]["cpu_seconds"] > 0 and s["client"]["cpu_us_per_request"] > 0
    # The server counts a request when it reads it, k6 when its response is in: the requests in
    # flight when k6 stops (about one per connection: 22 with 20 measured) are nginx's only.
    client, server = s["result"]["requests"], s["server"]["requests"]
    assert 0 <= server - client <= 2 * s["result"]["connections"], (client, s["server"])
    # exact: the requests in flight at the stop, at most one per connection
    assert within(client, server, 0.01), (client, s["server"])
    text = (d / "summary.txt").read_text()
    assert f"ABORTED (interrupted after {s['interrupted']['after_seconds']} s by {sig_name})" in text
    assert "PASS" not in text and "PASS" not in out, out[-3000:]
    assert "ABORTED (interrupted after" in out
    assert "Traceback" not in out and "jq:" not in out
    assert not list(tmp.glob(SCRATCH)), "bench.sh's scratch directory was left behind"
    assert not k6_running(), "k6 still running after the interrupted run"
    return d, names, s


def record(name, d, names, s, out):
    """What the issue's closing note shows: the interrupted run's directory and summary.json."""
    keep = Path(os.environ.get("IB_CACHE", Path.home() / ".cache/ingress-bench")) / "logs" / "interrupts"
    keep.mkdir(parents=True, exist_ok=True)
    slim = {k: v for k, v in s.items() if k != "k6"}
    (keep / f"{name}.txt").write_text(f"$ ls {d.name}\n" + "\n".join(names) + "\n\n" + out +
                                      "\n\nsummary.json without .k6 (k6's full data):\n" + json.dumps(slim, indent=2) + "\n")


@pytest.fixture(scope="module")
def lab():
    r = sh("bash", "bench/platforms/lab.sh", "up", timeout=300)
    assert r.returncode == 0, r.stderr
    yield
    sh("bash", "bench/platforms/lab.sh", "down")  # its monitoring first
    assert lab_leftovers() == []


# Through ./task as a user types it (its exit code: 1 for anything but 0 and 99), and the
# script itself (130 for SIGINT, 143 for SIGTERM, as a shell reports a signal's death).
@pytest.mark.parametrize("sig,entry,expect_rc", [
    ("SIGINT", "task", {1}),
    ("SIGTERM", "task", {1, -signal.SIGTERM}),  # the wrapper bash itself dies of an untrapped SIGTERM
    ("SIGINT", "script", {130}),
    ("SIGTERM", "script", {143}),
])
def test_interrupted_lab_run_is_recorded_aborted(lab, sig, entry, expect_rc, tmp_path):
    root = tmp_path / "results"
    cmd = (["./task", "bench:rps", "PLATFORM=lab", "DURATION=30s", "CONNECTIONS=20", "ROUNDS=1"] if entry == "task"
           else ["bash", "bench/run/bench.sh", "rps"])
    tmp = run_tmp(tmp_path)
    env = {"RESULTS_ROOT": str(root), "PLATFORM": "lab", "DURATION": "30s", "CONNECTIONS": "20", "TMPDIR": str(tmp)}
    rc, out, elapsed = interrupt(cmd, getattr(signal, sig), env)
    assert rc in expect_rc, f"exit {rc}:\n{out[-3000:]}"
    d, names, s = assert_aborted_run(root, out, sig, elapsed, tmp)
    record(f"lab-{sig}-{entry}", d, names, s, out)
    # The lab as it was: up, counting, nothing of the run left in its namespaces. The run's
    # monitoring down first: its nginx exporter reads the LB's stub_status every 2 s, and each
    # read is a request (one fell between the two reads below once).
    assert sh("bash", "bench/platforms/lab.sh", "status").returncode == 0
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "down", env={"PLATFORM": "lab"}).returncode == 0
    a = stub()
    assert stub()[1] == a[1] + 1, "the LB is still serving requests nobody sent"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_matrix_lets_its_run_stop_as_a_run_alone_does(lab, tmp_path, sig):
    """Ctrl-C (or a supervisor's SIGTERM) to a matrix's process group (bench/run/matrix.py): the
    run under way, in a group of its own, gets the signal once from the matrix and its graceful
    stop, as a run alone does (its summary marked aborted by that signal, its scratch removed,
    no k6 left); the matrix records it interrupted and says so in one line."""
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump({"title": "interrupted", "defaults": {"DURATION": "30s", "CONNECTIONS": "20"},
                                     "cases": [{"name": "one", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-full"}]}))
    tmp, root = run_tmp(tmp_path), tmp_path / "results"
    cmd = ["bash", "-c", '. bench/lib.sh && exec "$IB_VENV/bin/python" bench/run/matrix.py "$1"', "-", str(cases)]
    rc, out, elapsed = interrupt(cmd, getattr(signal, sig), {"RESULTS_ROOT": str(root), "ROUNDS": "1", "TMPDIR": str(tmp)})
    assert rc == 1 and out.rstrip().splitlines()[-1].startswith("error: interrupted; 1 of 1 runs failed"), out[-3000:]
    # exact: bench.sh's stop_grace (17 s) + 3 s to the kill, and the report after it
    assert elapsed <= 25, out[-3000:]
    [mdir] = root.iterdir()
    [run] = json.loads((mdir / "matrix.json").read_text())["runs"]
    assert (run["status"], run["reason"]) == ("failed", "interrupted"), run
    s = json.loads((Path(run["dir"]) / "summary.json").read_text())
    assert s.get("aborted") is True and s["interrupted"]["signal"] == sig and s["interrupted"]["k6_summary"] is True, s
    assert not list(tmp.glob(SCRATCH)) and not k6_running()


def test_a_signal_as_k6_starts_stops_it_and_leaves_no_run(lab, tmp_path):
    """Ctrl-C in the instant between k6's start and bench.sh knowing its job (bash runs a trap
    between two commands; BENCH_FAILPOINT=signal-at-fork sends it there): k6 is stopped, never
    left running the 30 s asked, and since nothing was sent no run directory stays; exit 130."""
    tmp = run_tmp(tmp_path)
    root = tmp_path / "results"
    r = sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "lab", "DURATION": "30s", "CONNECTIONS": "20", "TMPDIR": str(tmp),
                                                 "RESULTS_ROOT": str(root), "BENCH_FAILPOINT": "signal-at-fork"}, timeout=120)
    assert r.returncode == 130, r.stdout[-2000:] + r.stderr[-2000:]
    assert not k6_running(), "k6 left running by an interrupt at its start"
    assert not list(root.glob("*")), list(root.glob("*"))
    assert "before it sent a request" in r.stdout + r.stderr
    assert not list(tmp.glob(SCRATCH))


def test_a_finished_run_is_not_marked(lab, bench):
    """The mark is the signal's, not a side effect: an uninterrupted run has no `aborted`."""
    r = bench("rps", DURATION="2s")
    assert r.rc == 0, r.err
    assert "aborted" not in r.summary and "aborted" not in r.result and r.result["passed"] is True
    assert not [p.name for p in r.dir.iterdir() if p.name.startswith(".")]


def test_a_run_waits_for_another_runs_load_and_says_so(lab, tmp_path):
    """One load at a time on a machine (bench/lib/k6.sh load_lock): while another run's load
    holds the lock (here the test), a run says once that it waits and starts no k6; once the
    lock is free it runs, and passes."""
    root = tmp_path / "results"
    env = dict(os.environ, PLATFORM="lab", RESULTS_ROOT=str(root), DURATION="2s", CONNECTIONS="20", MONITORING="0",
               **LATENCY_UNJUDGED)
    with no_load():
        p = subprocess.Popen(["bash", "bench/run/bench.sh", "rps"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        said = []
        while (line := p.stderr.readline()) and not line.startswith("load "):
            said.append(line)
        assert line.startswith("load          waiting for another run's load on this machine to end"), "".join(said)
        time.sleep(2)
        assert p.poll() is None and not k6_running()
    out, rest = p.communicate(timeout=120)
    assert p.returncode == 0, rest
    assert "waiting for another run's load" not in rest
    assert len(list(root.iterdir())) == 1


@pytest.mark.parametrize("start, holds", [("setsid", True), ("without_our_fds setsid", False)])
def test_a_daemon_started_under_the_load_lock_does_not_keep_it(start, holds, tmp_path):
    """A daemon inherits every descriptor open where it starts: one started in a run that holds
    the machine's load lock (the monitoring sampler, restarted by a probe's deploy) kept it, and
    every later run waited for ever. Started through without_our_fds (bench/lib/util.sh, as the
    cluster's, the lab's and monitoring's daemons are), it leaves the lock with the run."""
    daemon = subprocess.run(["bash", "-c", f'. bench/lib.sh; load_lock; {start} sleep 60 >/dev/null 2>&1 </dev/null & echo $!'],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "IB_CACHE": str(tmp_path), "IB_LOAD_LOCKED": ""})
    try:
        assert daemon.returncode == 0, daemon.stderr
        free = subprocess.run(["flock", "-n", str(tmp_path / "load.lock"), "true"]).returncode == 0
    finally:
        os.kill(int(daemon.stdout.split()[-1]), 9)
    assert free is not holds


def test_a_daemon_started_without_our_fds_writes_its_stderr_where_its_caller_said(tmp_path):
    """The descriptors closed are the caller's, not the command's own: its stdout and stderr go
    to the log its caller redirected them to (the cluster's daemons log on stderr: the kubelet's
    log was empty, and a node that never registered could not say why), and a descriptor the
    caller held open is not inherited."""
    log = tmp_path / "daemon.log"
    run = subprocess.run(["bash", "-c", '. bench/lib.sh; exec 7>/dev/null; (without_our_fds sh -c "echo out; echo err >&2; ls /proc/\\$\\$/fd") >"$1" 2>&1', "-", str(log)],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert log.read_text().split() == ["out", "err", "0", "1", "2"]


def test_a_waiting_run_goes_before_a_yielding_one(tmp_path):
    """IB_LOAD_YIELD=1 (the suite's lab stream) lets a run that waits without it take the load
    first, whichever asked first: the lock held here, a yielding run waits, then another; once
    the lock is free the second has it, and the yielding one only after it."""
    order = tmp_path / "order"
    take = '. bench/lib.sh; load_lock; echo "$1" >> "$2"; sleep 1'

    def waiter(name, yielding):
        p = subprocess.Popen(["bash", "-c", take, "-", name, str(order)], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "IB_LOAD_YIELD": yielding, "IB_LOAD_LOCKED": ""})
        line = p.stderr.readline()
        assert line.startswith("load          waiting for another run's load"), line
        return p
    with no_load():
        procs = [waiter("yielding", "1"), waiter("first", "0")]
        time.sleep(1.5)  # each through a turn of its wait
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()  # a load of the other stream may come between
    assert order.read_text().split() == ["first", "yielding"]


def test_full_disk_mid_run_is_one_line(lab, tmp_path):
    """A results filesystem that fills up during the run: one `error:` line naming it, exit
    non-zero, no tool's own message (jq, a Python traceback)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "ingress-bench-test", str(mnt)], check=True)
    try:
        r = sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "lab", "RESULTS_ROOT": str(mnt / "results"),
                                                      "DURATION": "3s", "CONNECTIONS": "20"})
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        assert r.returncode != 0, r.stderr
        assert len(errors) == 1 and ("No space left on device" in errors[0] or "KiB left" in errors[0]), r.stderr
        assert "Traceback" not in r.stderr and "jq:" not in r.stderr, r.stderr
        assert not k6_running()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def foreign_k6(tmp_path):
    """Someone else's k6: /bin/sleep copied as k6, running beside the suite (started without
    this session's mark, as anyone else's is)."""
    fake = tmp_path / "bin" / "k6"
    fake.parent.mkdir()
    shutil.copy("/bin/sleep", fake)
    p = subprocess.Popen([str(fake), "600"], env={k: v for k, v in os.environ.items() if k != "IB_TEST_SESSION"})
    yield p
    p.kill()
    p.wait()


def test_a_foreign_k6_is_not_the_suites(foreign_k6, lab_down):
    """The bad-input fixture (lab_down) asks whether the suite left a k6 running: a k6 that
    is not ours is seen on the host and not counted, so the check passes beside it."""
    assert str(foreign_k6.pid) in sh("pgrep", "-x", "k6").stdout.split()
    assert str(foreign_k6.pid) not in k6_running()
    r = sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "lab", "DURATION": "zero"})
    assert r.returncode != 0 and r.stderr.startswith("error:")


def report(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench/report"), *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


FIXTURE = ROOT / "ci/tests/fixtures/report/20261121T155928Z-rps-nginx-lb-default"


@pytest.mark.parametrize("k6_wrote", [True, False])
def test_summary_of_an_aborted_run(k6_wrote, tmp_path):
    """`bench/report summary --aborted`: with k6's summary (its graceful stop) the run is kept and
    marked; without one (k6 killed) a bare result stands, marked the same, never passed."""
    d = tmp_path / "run"
    d.mkdir()
    if k6_wrote:
        s = json.loads((FIXTURE / "summary.json").read_text())
        for part in ("client", "server"):
            del s[part]
        assert s["result"]["passed"] is True
        (d / "summary.json").write_text(json.dumps(s))
        (d / "summary.txt").write_text("k6 rps ...\nresult        PASS (4/4 thresholds)\ntarget        x\n")
    n = s["result"]["requests"] if k6_wrote else 0
    r = report("summary", d, "--times", "6.0", "1.0", "0.5", "--cpus", 1, "--stub-before", "10 100",
               "--stub-after", f"12 {100 + n + 1}", "--aborted", 5, "--signal", "SIGINT")
    assert r.returncode == 0, r.stderr
    out = json.loads((d / "summary.json").read_text())
    assert out["aborted"] is True and out["result"]["aborted"] is True and out["result"]["passed"] is False
    assert out["interrupted"] == {"signal": "SIGINT", "after_seconds": 5, "k6_summary": k6_wrote}
    assert out["client"]["cpu_seconds"] == 1.5 and out["server"]["requests"] == n
    text = (d / "summary.txt").read_text()
    assert "result        ABORTED (interrupted after 5 s by SIGINT)" in text and "PASS" not in text
    assert [p.name for p in d.iterdir() if p.name not in ("summary.json", "summary.txt")] == []


def test_summary_on_a_full_disk_is_one_line(tmp_path):
    """Python's own write error (ENOSPC) as one line naming the file, not a traceback."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "ingress-bench-test", str(mnt)], check=True)
    try:
        s = json.loads((FIXTURE / "summary.json").read_text())
        (mnt / "summary.json").write_text(json.dumps(s["result"] and {"result": s["result"]}))
        r = report("summary", mnt, "--times", "6.0", "1.0", "0.5", "--cpus", 1)
        assert r.returncode != 0
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: cannot write ") and "No space left" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_interrupted_local_run_is_recorded_aborted(local_cluster, tmp_path):
    """The local cluster: k6 on the host against the deployed ingress, interrupted the same
    way; the ingress's count read after the stop agrees with k6's."""
    root = tmp_path / "results"
    tmp = run_tmp(tmp_path)
    rc, out, elapsed = interrupt(["./task", "bench:rps", "PLATFORM=local", "DURATION=30s", "CONNECTIONS=20", "ROUNDS=1"],
                                 signal.SIGINT, {"RESULTS_ROOT": str(root), "TMPDIR": str(tmp)}, timeout=900)
    assert rc == 1, f"exit {rc}:\n{out[-3000:]}"
    d, names, s = assert_aborted_run(root, out, "SIGINT", elapsed, tmp)
    record("local-SIGINT-task", d, names, s, out)


def killed_session(platform_script):
    """What a killed terminal or a restarted machine session leaves: every process of the
    platform dead at once (SIGKILL), its links, namespaces, mounts and state in place."""
    pids = sh("bash", platform_script, "procs").stdout.split()
    assert pids, f"{platform_script} reports no process of its own while up"
    sh("kill", "-KILL", *pids)
    deadline = time.time() + 30
    while sh("bash", platform_script, "procs").stdout.split() and time.time() < deadline:
        time.sleep(0.2)
    assert not sh("bash", platform_script, "procs").stdout.split(), "processes survived SIGKILL"


@pytest.mark.e2e
@pytest.mark.whole_machine  # ./task down: every platform of ours
@pytest.mark.parametrize("platform_script", ["bench/platforms/lab.sh", "bench/platforms/local/cluster.sh"])
def test_task_down_removes_what_a_killed_session_left(platform_script, lab_down):
    """CI once found a killed session's cluster (its bridge, veths, 39 mounts, no process) and
    the suite refused to start; `./task down`, which the suite now runs itself in that case,
    brings the machine back to what it was."""
    import machine_state
    before = machine_state.snapshot()
    up = sh("bash", platform_script, "up", timeout=600)
    assert up.returncode == 0, up.stderr
    killed_session(platform_script)
    assert machine_state.diff(before, machine_state.snapshot()) != [], "the killed platform left nothing to remove"
    down = sh("./task", "down", timeout=300)
    assert down.returncode == 0, down.stderr
    assert machine_state.diff(before, machine_state.snapshot()) == []
    again = sh("./task", "down", timeout=300)
    assert again.returncode == 0 and machine_state.diff(before, machine_state.snapshot()) == [], "down is idempotent"
