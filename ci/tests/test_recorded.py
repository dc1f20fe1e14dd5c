"""The statistics' verdicts on rounds recorded from real runs here (ci/tests/fixtures/rounds/,
written from bench:evidence's matrices: each run's figures as the matrix runner read them), so
that a verdict's arithmetic is proved exactly, whatever the host's noise today: a seed
relation decided or undecided by its rounds and its interval's level, the matrix's stopping
rule, and bench:compare's pass, regression and unstable."""
import copy
import json
import sys

import pytest

from conftest import ROOT

sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
import compare  # noqa: E402
import matrix as mx  # noqa: E402
import tables  # noqa: E402

FIXTURES = ROOT / "ci/tests/fixtures/rounds"
# The level the recorded seed004 run had in bench:evidence: 9 claims, 7 looks each
EVIDENCE_LEVEL = 1 - 0.05 / (9 * 7)
KEEPALIVE, DEFAULT = "004: ingress keep-alive tuned vs default", "004: ingress (default knobs) vs NodePort"


def recorded(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def matrix_of(fx, level):
    return {"cases": copy.deepcopy(fx["cases"]), "columns": copy.deepcopy(fx["columns"]), "ratios": copy.deepcopy(fx["ratios"]),
            "level": level}


def holds(fx, level, rounds):
    m = matrix_of(fx, level)
    tables.compute(m, [r for r in fx["runs"] if r["round"] <= rounds])
    return {r["title"]: r["holds"] for r in m["ratios"]}


@pytest.mark.parametrize("level, rounds, keepalive, default", [
    (0.95, 1, "undecided", "undecided"),  # one round: no spread, nothing decided
    (0.95, 2, "yes", "undecided"),
    (0.95, 3, "yes", "yes"),
    (EVIDENCE_LEVEL, 3, "undecided", "undecided"),  # the union bound's wider interval needs more rounds
    (EVIDENCE_LEVEL, 4, "yes", "undecided"),
    (EVIDENCE_LEVEL, 7, "yes", "yes"),
])
def test_a_seed_relation_decides_by_its_rounds_and_level(level, rounds, keepalive, default):
    assert holds(recorded("seed004"), level, rounds) == {KEEPALIVE: keepalive, DEFAULT: default}


@pytest.mark.parametrize("level, stops_at", [(0.95, 3), (EVIDENCE_LEVEL, 7)])
def test_the_matrix_stops_at_the_first_round_every_relation_decided(level, stops_at):
    """relations_decided, round after round on the recorded runs: the round it first says so
    (bench:evidence's run stopped at 7, at its level)."""
    fx = recorded("seed004")
    m = matrix_of(fx, level)
    said = [r for r in range(1, 8) if mx.relations_decided(m, [x for x in fx["runs"] if x["round"] <= r], r)]
    assert said[0] == stops_at and said == list(range(stops_at, 8))


def sides(base, head):
    """The recorded tuned-vs-default rounds as bench:compare's sides (their latencies were not recorded)."""
    fx = recorded("tuned-cluster")
    values, cpus = {}, {}
    for side, case in (("base", base), ("head", head)):
        runs = sorted((r for r in fx["runs"] if r["case"] == case), key=lambda r: r["round"])
        values[side] = {"rate": [r["values"]["rps"] for r in runs], "per_cpu": [r["per_cpu"] for r in runs], "p95": [], "p99": []}
        cpus[side] = sorted({r["ingress_cpus"] for r in runs})
    return values, cpus


@pytest.mark.parametrize("base, head, env, verdict, says", [
    ("cluster-default", "cluster-tuned", {}, "pass", "better"),
    ("cluster-tuned", "cluster-default", {}, "regression", "REGRESSION"),
    # the recorded sides' CVs, 5.1 % and 9.0 %: over a 5 % gate, no verdict
    ("cluster-default", "cluster-tuned", {"GATE_CV_MAX": "5"}, "unstable", "better"),
])
def test_compare_on_recorded_rounds(base, head, env, verdict, says):
    """The sides had different ingress CPU (each probed its own share, 0.55 and 0.4): judged
    per ingress CPU, as seed 002 compares."""
    values, cpus = sides(base, head)
    rows, got, why, judged, _, _ = compare.verdict_of(values, cpus, compare.metrics("rps"), None, env, mx.registry())
    assert (got, judged) == (verdict, "per_cpu"), why
    assert {r["key"]: r["says"] for r in rows}["per_cpu"] == says
    assert {r["key"]: r["says"] for r in rows}["rate"] == "shown, not judged"
