"""Shared helpers for the end-to-end suite: every test drives the real scripts (ci/bench.sh,
ci/lab.sh) against the real lab: nginx processes in network namespaces, real k6."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB_STATE = Path(os.environ.get("IB_LAB_STATE", "/run/ingress-bench/lab"))
STUB = "http://198.18.0.2:8080/stub_status"  # ci/lab.sh LB_IP and LB_STATUS_PORT


class Run:
    def __init__(self, proc, results_root):
        self.rc, self.out, self.err = proc.returncode, proc.stdout, proc.stderr
        dirs = sorted(Path(results_root).iterdir()) if Path(results_root).exists() else []
        self.dir = dirs[-1] if dirs else None
        path = self.dir / "summary.json" if self.dir else None
        self.summary = json.loads(path.read_text()) if path and path.exists() else None

    @property
    def result(self):
        return self.summary["result"]

    def metric(self, name):
        return self.summary["k6"]["metrics"][name]["values"]

    def error_lines(self):
        return [l for l in self.err.splitlines() if l.startswith("error:")]


def sh(*args, env=None, timeout=300):
    full = dict(os.environ, **(env or {}))
    return subprocess.run(args, cwd=ROOT, env=full, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def bench(tmp_path):
    """bench(scenario, **env) -> Run: one ci/bench.sh run with results under tmp_path."""
    def run(scenario, **env):
        root = tmp_path / f"results-{len(list(tmp_path.iterdir()))}"
        # The lab unless a test names the platform (the tool's default is the local cluster).
        env = {"PLATFORM": "lab", "RESULTS_ROOT": str(root), "DURATION": "3s", "CONNECTIONS": "20", **env}
        return Run(sh("bash", "ci/bench.sh", scenario, env=env), root)
    return run


def lab_leftovers():
    """Everything of the lab that could outlive it: namespaces, bridge, nginx, state files."""
    found = []
    netns = sh("ip", "netns", "list").stdout
    found += [l.split()[0] for l in netns.splitlines() if l.startswith("ibench-")]
    if sh("ip", "link", "show", "ibench0").returncode == 0:
        found.append("bridge ibench0")
    procs = sh("pgrep", "-af", f"nginx: .* -p {LAB_STATE}/").stdout.strip()
    if procs:
        found.append(procs)
    if LAB_STATE.exists():
        found.append(str(LAB_STATE))
    return found


def k6_running():
    return sh("pgrep", "-x", "k6").stdout.strip()


def stub():
    text = subprocess.run(["curl", "-s", "--max-time", "3", STUB], capture_output=True, text=True).stdout
    accepts, handled, requests = map(int, text.splitlines()[2].split())
    return accepts, requests


@pytest.fixture(scope="session", autouse=True)
def lab_is_removed_after_the_suite():
    yield
    sh("bash", "ci/lab.sh", "down")
    left = lab_leftovers()
    assert not left, f"lab leftovers after the suite: {left}"


def within(a, b, fraction):
    return abs(a - b) <= fraction * max(a, b)


LOG_FIELDS = re.compile(r"conn=(\d+) reqs=(\d+) tls=(\S+) reused=(\S)")
