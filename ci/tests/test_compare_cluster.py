"""bench:compare, the CPU sweep and bench:seeds in the local cluster (issue 16): the tuned LB
against the default both ways, the sweep's machinery with two fractional CPU amounts, and
every seed relation's row with the shortest durations that still decide."""
import json
from pathlib import Path

import pytest
import yaml

from conftest import LATENCY_UNJUDGED, ROOT, UNMONITORED, lab_leftovers, sh, table_row, task

# GATE_CV_MAX 30: this VM's identical runs vary by 15-20 % (test_compare.py).
SHORT = {"PLATFORM": "local", "DURATION": "3s", "CONNECTIONS": "50", "GATE_CV_MAX": "30", **LATENCY_UNJUDGED}


def args(**more):
    return [f"{k}={v}" for k, v in {**SHORT, **more}.items()]


def only(results, pattern):
    dirs = sorted(Path(results).glob(pattern))
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.fixture(scope="module")
def tuned_vs_default(local_cluster, tmp_path_factory):
    """BASE=default HEAD=tuned, alternated in the cluster, rounds until the gates decide (BUDGET:
    three in a quiet hour; in a noisy one, such as c27's, three 3 s rounds gave tuned/default
    1.54, 2.35 and 1.52, an interval of 0.95-3.27), HEAD's runs saved as baseline 'tuned'
    (BASELINE_SAVE): (the result, compare.json, RESULTS_ROOT)."""
    results = tmp_path_factory.mktemp("compare") / "results"
    r = task("bench:compare", "BASE=nginx-lb-default", "HEAD=nginx-lb-full", "BUDGET=5m", "BASELINE_SAVE=tuned",
             f"RESULTS_ROOT={results}", *args(**UNMONITORED), timeout=1200)
    return r, json.loads((only(results, "compare-*") / "compare.json").read_text()), results


def rate_of(doc):
    return next(m for m in doc["metrics"] if m["key"] == "rate")


@pytest.mark.leaves_monitoring_down  # UNMONITORED: the compares' gates are k6's figures
def test_tuned_against_default_is_better(tuned_vs_default):
    """Tuned is faster with an interval that excludes 1.0: pass, exit 0; HEAD's runs saved."""
    r, doc, results = tuned_vs_default
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rate = rate_of(doc)
    assert doc["verdict"] == "pass", doc["why"]
    assert rate["interval"]["low"] > 1.0 and rate["says"] == "better", rate["interval"]
    assert json.loads((results / "baselines/tuned/baseline.json").read_text())["variant"] == "nginx-lb-full"


@pytest.mark.leaves_monitoring_down
def test_default_against_the_saved_tuned_is_a_regression_found_early(tuned_vs_default, tmp_path):
    """The reverse, as a CI job runs it: HEAD=default measured now against the saved tuned
    runs (BASELINE), rounds until the gates decide (BUDGET): a regression (a gate's whole
    interval past its tolerance) stops them before the budget ends, exit 99. The rate's gate is
    GATE_RATE_DROP's 10 %; when the saved side is spread wide, the latency gates (+15 % p95,
    +20 % p99) may decide first: whichever says REGRESSION, its interval is past its gate."""
    _, _, results = tuned_vs_default
    r = task("bench:compare", "BASELINE=tuned", "HEAD=nginx-lb-default", "BUDGET=10m", f"RESULTS_ROOT={results}", *args(**UNMONITORED),
             timeout=1200)
    assert r.returncode == 99, r.stdout[-3000:] + r.stderr[-2000:]
    doc = json.loads(sorted(results.glob("compare-*/compare.json"))[-1].read_text())
    rate = rate_of(doc)
    assert doc["verdict"] == "regression" and doc["baseline"] == "tuned", doc["why"]
    assert doc["rounds"] >= 3 and doc["stopped"].startswith("a regression"), doc["stopped"]
    gates = {"rate": ("high", 0.9, "req/s", "past −10 %"), "p95": ("low", 1.15, "p95 ms", "past +15 %"),
             "p99": ("low", 1.2, "p99 ms", "past +20 %")}  # GATE_RATE_DROP, GATE_P95_RISE, GATE_P99_RISE
    said = [m for m in doc["metrics"] if m.get("says") == "REGRESSION"]
    assert said and all(m["key"] in gates for m in said), doc["metrics"]
    for m in said:
        end, gate, name, text = gates[m["key"]]
        assert (m["interval"][end] < gate) if end == "high" else (m["interval"][end] > gate), m
        assert name in doc["why"] and text in doc["why"], doc["why"]
    assert rate["says"] in ("REGRESSION", "worse, within tolerance"), rate  # never better, never equal


def test_the_sweep_machinery_with_two_fractional_amounts(local_cluster, tmp_path):
    """INGRESS_CPUS="500m 1" (the variant with INGRESS_CPU set, no copied overlay): two rows,
    req/s grows with CPU, each run's ingress had the amount as its CPU limit."""
    results = tmp_path / "results"
    r = task("bench:sweep", "INGRESS_CPUS=500m 1", "SCENARIOS=rps", "ROUNDS=2", "VARIANT=nginx-lb-full",
             f"RESULTS_ROOT={results}", *args(), timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    d = only(results, "sweep-*")
    doc = json.loads((d / "sweep.json").read_text())
    assert [row["cpu"] for row in doc["rows"]] == ["500m", "1"]
    half, one = (row["rps"]["median"] for row in doc["rows"])
    # noise: 1.64x measured (README "CPU sweeps"), 1.29x in a run where the 1-CPU runs met k6's
    # ceiling on the other CPU (README "CPU sweeps"): the direction only
    assert one > half, (half, one)
    assert doc["rows"][0]["rps"]["efficiency"] == 1.0
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
    ratio and a verdict word (one round decides nothing: test_seed_004_directions decides; the
    rows are this test's subject, not their figures, so its 24 runs are as short as k6 runs).
    Seed 003's NodePort losses come from the hop between its 5 nodes: on this one-node cluster
    those two rows say "not here" (each run's meta.json counts the nodes), whatever the rounds."""
    results = tmp_path / "results"
    r = task("bench:seeds", "ROUNDS=1", "DURATION=1s", "CONNECTIONS=50", "MONITORING=0", f"RESULTS_ROOT={results}", timeout=3600)
    assert r.returncode in (0, 99), r.stdout[-3000:] + r.stderr[-2000:]
    d = only(results, "seeds-*")
    ratios = {x["title"]: x for x in json.loads((d / "matrix.json").read_text())["ratios"]}
    listed = [x["title"] for x in yaml.safe_load((ROOT / "bench/run/matrices/seeds.yaml").read_text())["ratios"]]
    assert sorted(ratios) == sorted(listed)
    for title in listed:
        assert ratios[title]["interval"] and ratios[title]["holds"] in ("yes", "no", "undecided", "not here"), title
        assert f"| {title} |" in r.stdout
    hop = [t for t in listed if ratios[t]["seed"]["nodes"]]
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


@pytest.mark.leaves_monitoring_down
def test_seed_004_directions(local_cluster, tmp_path):
    """RELATIONS=004: seed 004's relations and only the cases they compare, 2 s runs in rounds
    until every relation decides (BUDGET): keep-alive to the 60m backends ~2x the default, the
    default ingress below NodePort, each decided by its interval (a fixed count of rounds
    cannot be enough on a machine whose spread changes by the hour). Its "equal" row (keep-alive
    1.3-1.55x NodePort on this 2-CPU node: "no" once its interval clears 1.05) is not asserted,
    nor are seed 003's: k6 shares its CPU with the backends here, and identical runs vary
    15-20 %, wider than those seeds' ±3-5 %."""
    results = tmp_path / "results"
    r = task("bench:seeds", "RELATIONS=004", "BUDGET=5m", "DURATION=2s", "CONNECTIONS=50", "MONITORING=0", f"RESULTS_ROOT={results}",
             timeout=1200)
    assert r.returncode in (0, 99), r.stdout[-3000:] + r.stderr[-2000:]
    doc = json.loads((only(results, "seeds-*") / "matrix.json").read_text())
    ratios = {x["title"]: x for x in doc["ratios"]}
    assert sorted(ratios) == ["004: ingress (default knobs) vs NodePort", "004: ingress keep-alive tuned vs NodePort",
                              "004: ingress keep-alive tuned vs default"]
    assert sorted({x["case"] for x in doc["runs"]}) == ["s004-ingress-default", "s004-ingress-keepalive", "s004-nodeport"]
    # (the "equal" row, 1.3-1.55x here, may take the budget to clear its 1.05 edge: how it stopped is not asserted)
    assert doc["stopped"], doc
    for title in ("004: ingress keep-alive tuned vs default", "004: ingress (default knobs) vs NodePort"):
        assert ratios[title]["holds"] == "yes", (title, ratios[title]["text"], ratios[title]["holds"], ratios[title].get("spread"))
