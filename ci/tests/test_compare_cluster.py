"""The CPU sweep and bench:seeds in the local cluster: the sweep's machinery with two fractional
CPU amounts, and every seed relation's row from the shortest runs k6 makes. Which variant is
faster, and whether a seed's relation holds here, are claims: bench:evidence measures them
(bench/run/claims.yaml)."""
import json
from pathlib import Path

import pytest
import yaml

from conftest import LATENCY_UNJUDGED, ROOT, VALIDITY_UNJUDGED, lab_leftovers, sh, table_row, task

# GATE_CV_MAX 30: this VM's identical runs vary by 15-20 % (test_compare.py).
SHORT = {"PLATFORM": "local", "DURATION": "3s", "CONNECTIONS": "50", "GATE_CV_MAX": "30", **LATENCY_UNJUDGED}


def args(**more):
    return [f"{k}={v}" for k, v in {**SHORT, **more}.items()]


def only(results, pattern):
    dirs = sorted(Path(results).glob(pattern))
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_the_sweep_machinery_with_two_fractional_amounts(local_cluster, tmp_path):
    """INGRESS_CPUS="500m 1" (the variant with INGRESS_CPU set, no copied overlay): two rows in
    that order, the first the efficiency's reference, each run's ingress had the amount as its
    CPU limit. (How the rate scales with the CPU is a claim: bench:evidence's
    rate-scales-with-ingress-cpu.)"""
    results = tmp_path / "results"
    r = task("bench:sweep", "INGRESS_CPUS=500m 1", "SCENARIOS=rps", "ROUNDS=1", "VARIANT=nginx-lb-full",
             f"RESULTS_ROOT={results}", *args(**VALIDITY_UNJUDGED), timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    d = only(results, "sweep-*")
    doc = json.loads((d / "sweep.json").read_text())
    assert [row["cpu"] for row in doc["rows"]] == ["500m", "1"]
    half, one = (row["rps"] for row in doc["rows"])
    # exact: efficiency against linear, (value / the smallest amount's) / (1 / 0.5)
    assert half["efficiency"] == 1.0 and one["efficiency"] == pytest.approx(one["median"] / half["median"] / 2), doc["rows"]
    for run in json.loads((d / "matrix.json").read_text())["runs"]:
        limit = json.loads((Path(run["dir"]) / "summary.json").read_text())["correlation"]["signals"]["ingress_cpu_limit_cores"]
        assert limit == pytest.approx(0.5 if run["case"].startswith("cpu-500m") else 1.0), run["case"]
    table = (d / "sweep.md").read_text()
    assert "| CPUs | RPS (median) | CV | vs linear |" in table and "| 500m |" in table


@pytest.fixture
def lab_down_after():
    yield
    sh("bash", "bench/platforms/lab.sh", "down")
    assert lab_leftovers() == []


@pytest.mark.leaves_monitoring_down  # its MONITORING=0 takes it down
def test_seeds_every_relation(local_cluster, lab_down_after, tmp_path):
    """bench:seeds, one round of 1 s, monitoring off: every relation's row, each with a measured
    ratio; one round has no spread, so every relation says "undecided", but seed 003's NodePort
    losses, which come from the hop between its 5 nodes: on this one-node cluster those two
    rows say "not here" (each run's meta.json counts the nodes), whatever the rounds. The rows
    are this test's subject, not their figures (bench:evidence judges those), so its 24 runs
    are as short as k6 runs, with the thresholds out of reach: exit 0."""
    results = tmp_path / "results"
    r = task("bench:seeds", "ROUNDS=1", "DURATION=1s", "CONNECTIONS=50", "MONITORING=0", f"RESULTS_ROOT={results}",
             *(f"{k}={v}" for k, v in {**LATENCY_UNJUDGED, **VALIDITY_UNJUDGED}.items()), timeout=3600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    d = only(results, "seeds-*")
    ratios = {x["title"]: x for x in json.loads((d / "matrix.json").read_text())["ratios"]}
    listed = [x["title"] for x in yaml.safe_load((ROOT / "bench/run/matrices/seeds.yaml").read_text())["ratios"]]
    assert sorted(ratios) == sorted(listed)
    hop = [t for t in listed if ratios[t]["seed"]["nodes"]]
    for title in listed:
        assert ratios[title]["interval"] and ratios[title]["holds"] == ("not here" if title in hop else "undecided"), ratios[title]
        assert f"| {title} |" in r.stdout
    assert hop == ["003: LB -> NodePort vs LB -> Pod, 10 pods, 4 KB", "003: LB -> NodePort vs LB -> Pod, 10 pods, 100 KB"]
    for title in hop:
        assert (ratios[title]["holds"], ratios[title]["not_here"]) == ("not here", "needs 2 nodes, ran on 1"), ratios[title]
        assert "not here (needs 2 nodes, ran on 1)" in table_row(r.stdout, title)
    runs = json.loads((d / "matrix.json").read_text())["runs"]
    assert {x["nodes"] for x in runs if x["case"].startswith(("s003", "s004"))} == {1}
    assert {x["nodes"] for x in runs if x["case"].startswith("s001-lab")} == {None}
    page = (d / "report.html").read_text()
    assert page.count('<img src="relations/') == len(listed)
    assert sh("bash", "-c", f". bench/lib.sh && python bench/report check {d}/report.html").returncode == 0
