"""The CPU sweep in the local cluster: its machinery with two fractional CPU amounts. Every seed
relation's row is proved on a recorded bench:seeds round (test_recorded.py). Which variant is
faster, and whether a seed's relation holds here, are claims: bench:evidence measures them
(bench/run/claims.yaml)."""
import json
from pathlib import Path

import pytest

from conftest import LATENCY_UNJUDGED, UNMONITORED, VALIDITY_UNJUDGED, task

# GATE_CV_MAX 30: this VM's identical runs vary by 15-20 % (test_compare.py).
SHORT = {"PLATFORM": "local", "DURATION": "3s", "CONNECTIONS": "50", "GATE_CV_MAX": "30", **LATENCY_UNJUDGED}


def args(**more):
    return [f"{k}={v}" for k, v in {**SHORT, **more}.items()]


def only(results, pattern):
    dirs = sorted(Path(results).glob(pattern))
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.mark.takes_monitoring_down  # its matrix, unmonitored
def test_the_sweep_machinery_with_two_fractional_amounts(local_cluster, tmp_path):
    """INGRESS_CPUS="500m 1" (the variant with INGRESS_CPU set, no copied overlay): two rows in
    that order, the first the efficiency's reference, each run's ingress had the amount as its
    CPU limit (its cgroup's quota, read by the run). (How the rate scales with the CPU is a
    claim: bench:evidence's rate-scales-with-ingress-cpu.)"""
    results = tmp_path / "results"
    r = task("bench:sweep", "INGRESS_CPUS=500m 1", "SCENARIOS=rps", "ROUNDS=1", "VARIANT=nginx-lb-full",
             f"RESULTS_ROOT={results}", *args(**VALIDITY_UNJUDGED, **UNMONITORED), timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    d = only(results, "sweep-*")
    doc = json.loads((d / "sweep.json").read_text())
    assert [row["cpu"] for row in doc["rows"]] == ["500m", "1"]
    half, one = (row["rps"] for row in doc["rows"])
    # exact: efficiency against linear, (value / the smallest amount's) / (1 / 0.5)
    assert half["efficiency"] == 1.0 and one["efficiency"] == pytest.approx(one["median"] / half["median"] / 2), doc["rows"]
    for run in json.loads((d / "matrix.json").read_text())["runs"]:
        limit = json.loads((Path(run["dir"]) / "summary.json").read_text())["cpu"]["ingress_cpus"]
        assert limit == (0.5 if run["case"].startswith("cpu-500m") else 1), (run["case"], limit)
    table = (d / "sweep.md").read_text()
    assert "| CPUs | RPS (median) | CV | vs linear |" in table and "| 500m |" in table
