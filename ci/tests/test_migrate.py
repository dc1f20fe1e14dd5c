"""bench:migrate on the local cluster: the default LB against the tuned one.
Its verdicts (a variant against itself says "no change" once its interval decides, undecided
before) are proved on recorded rounds (test_recorded.py). Bad input is one line before anything
is deployed."""
import json
import sys

import pytest

from conftest import ROOT, UNMONITORED, one_error, task

# Short: the table's shape and its intervals are the subject, not the figures (the
# migration's own figures come from a run with the defaults). Unmonitored: the rates per CPU come from the
# cgroups, the behaviour from the probes.
SHORT = {"SCENARIOS": "rps", "DURATION": "3s", "CHANGES": "", **UNMONITORED}


def migrate(tmp_path, **settings):
    results = tmp_path / "results"
    r = task("bench:migrate", f"RESULTS_ROOT={results}", *(f"{k}={v}" for k, v in {**SHORT, **settings}.items()), timeout=900)
    runs = sorted(results.glob("migrate-*"))
    assert len(runs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    return r, json.loads((runs[0] / "migrate.json").read_text()), runs[0]


def migrate_module():
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
    import migrate as m
    return m


def says(row, tol):
    """The migration table's word for a rate: its interval wholly within ±TOL of 1, or past it."""
    lo, hi = row["low"], row["high"]
    return "no change" if lo >= 1 - tol and hi <= 1 + tol else "faster" if lo > 1 + tol else "slower" if hi < 1 - tol else "undecided"


@pytest.mark.takes_monitoring_down  # its comparison's matrix, unmonitored
@pytest.mark.usefixtures("local_cluster")
def test_a_migration_is_one_table_with_intervals_and_a_behaviour_diff(tmp_path):
    """The default LB to the tuned one: the comparison's alternated rounds (each a deploy of its
    side) in one table, every probe answered by both sides and diffed. (The LB to Envoy Gateway,
    its 404 for a host no route takes, on recorded answers and rounds: test_recorded.py; Envoy
    Gateway deployed, run and left: test_gateway.py.)"""
    r, doc, d = migrate(tmp_path, FROM="nginx-lb-default", TO="nginx-lb-full", ROUNDS="3")
    assert r.returncode == 0, r.stderr[-3000:]
    per_cpu = next(x for x in doc["speed"] if x["scenario"] == "rps" and "per ingress CPU" in x["metric"])
    for row in (next(x for x in doc["speed"] if (x["scenario"], x["metric"]) == ("rps", "req/s")), per_cpu):
        # three rounds (a comparison's fewest): a spread, so an interval; what the row says is where it lies against ±tolerance
        assert row["from"] > 0 and row["to"] > 0 and row["low"] < row["high"], row
        assert row["says"] == (says(row, doc["tolerance"]) if row["judged"] else "shown"), (row, doc["tolerance"])
    assert doc["verdict"] == migrate_module().verdict_of(doc["speed"], doc["behaviour"]["differences"], doc["tolerance"], doc["failed"])
    # The same requests, answered by both: every probe answered on both sides, and the
    # differences are those of their answers.
    a = doc["behaviour"]["answers"]
    assert [len(a["FROM"]), len(a["TO"])] == [len(doc["behaviour"]["probes"])] * 2, a
    both = a["FROM"] + a["TO"]
    assert both and all(x["status"] for x in both), a
    assert doc["behaviour"]["differences"] == [list(x) for x in migrate_module().differences(a["FROM"], a["TO"])]
    # One page: the table and the behaviour section in it.
    page = (d / "report.md").read_text()
    assert "| rps | req/s |" in page and "95 % interval" in page, page
    assert (d / "report.html").exists()


@pytest.mark.parametrize("settings,error", [
    ({"TO": "envoy-gateway-default"}, "FROM and TO are both needed"),
    ({"FROM": "nginx-lb-default", "TO": "no-such-variant"}, "TO: "),
    ({"FROM": "nginx-lb-default", "TO": "envoy-gateway-default", "CHANGES": "explode"}, "CHANGES"),
    ({"FROM": "nginx-lb-default", "TO": "envoy-gateway-default", "ROUNDS": "3", "BUDGET": "4m"}, "not both"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "ROUNDS": "2"}, "ROUNDS must be at least 3 for a comparison"),
])
def test_bad_input_is_one_line_before_anything_runs(tmp_path, settings, error):
    results = tmp_path / "results"
    r = task("bench:migrate", f"RESULTS_ROOT={results}", *(f"{k}={v}" for k, v in settings.items()))
    assert r.returncode == 1 and error in one_error(r), r.stderr
    assert not results.exists()
