"""bench:evidence (bench/run/evidence.py): the claims file read and checked, the interval level a
union bound gives, the verdict's arithmetic against a statement's edges, the exact intervals of
counts, the result set assembled from stamped parts, bad input refused before anything starts,
and the command end to end on the lab with claims constructed to decide (a variant against
itself within a range five times wide, a rate above 1 req/s, the same rate below it)."""
import json
import math
import sys

import pytest
import yaml

from conftest import ROOT, k6_running, lab_leftovers, one_error, task

sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
import evidence  # noqa: E402
import evidence_claims  # noqa: E402
import evidence_rounds  # noqa: E402
import evidence_set  # noqa: E402
from report.doc import check_page  # noqa: E402
from report.stats import binomial_interval, mean_interval, poisson_ratio_interval, ratio_interval  # noqa: E402

SPEC = evidence_claims.load()


def test_every_claim_names_what_measures_it():
    """Each matrix claim's relation is in its run's case list with a seed block (what it
    expects); every other claim has its own run; every run has a claim."""
    for c in SPEC["claims"]:
        run = SPEC["runs"][c["run"]]
        if run["kind"] == "matrix":
            ratios = {r["title"]: r for r in yaml.safe_load(evidence.matrix_path(run, SPEC).read_text())["ratios"]}
            assert c["relation"] in ratios and ratios[c["relation"]]["seed"]["expect"] in ("higher", "lower", "equal"), c
        else:
            assert run["claims"] == [c], c
    assert SPEC["runs"] and all(r["claims"] for r in SPEC["runs"].values())


def test_each_interval_is_at_the_union_bounds_level():
    """1 - alpha / (claims x looks): looks are the rounds from the run's first deciding one to its most."""
    n = len(SPEC["claims"])
    for r in SPEC["runs"].values():
        assert r["looks"] == r["max_rounds"] - evidence_claims.FIRST[r["kind"]] + 1
        assert r["level"] == pytest.approx(1 - SPEC["alpha"] / (n * r["looks"]))


@pytest.mark.parametrize("low, high, expect, says", [
    (1.10, 1.30, {"above": 1}, "holds"), (0.80, 0.95, {"above": 1}, "does not hold"), (0.90, 1.10, {"above": 1}, "undecided"),
    (0.40, 0.60, {"below": 1}, "holds"), (1.01, 1.20, {"below": 1}, "does not hold"), (0.95, 1.05, {"below": 1}, "undecided"),
    (0.85, 1.20, {"between": [0.8, 1.25]}, "holds"), (1.30, 1.50, {"between": [0.8, 1.25]}, "does not hold"),
    (0.50, 0.70, {"between": [0.8, 1.25]}, "does not hold"), (0.70, 1.00, {"between": [0.8, 1.25]}, "undecided"),
])
def test_the_verdict_is_where_the_interval_lies(low, high, expect, says):
    iv = {"ratio": (low + high) / 2, "low": low, "high": high}
    assert evidence_claims.verdict(iv, expect, rounds=3, first=2) == says
    assert evidence_claims.verdict(iv, expect, rounds=1, first=2) == "undecided"  # before the first round that can decide


def test_exact_intervals_of_counts():
    """Clopper-Pearson's published values (0 of 10: 0-0.3085; 5 of 10: 0.1871-0.8129), and the
    Poisson ratio's: none of 259 events on one side, equal exposures, at 99.9 %: its upper
    end is the binomial's for 0 of 259, as odds."""
    assert binomial_interval(0, 10)["high"] == pytest.approx(0.30850, abs=1e-5)
    five = binomial_interval(5, 10)
    assert (five["low"], five["high"]) == (pytest.approx(0.18709, abs=1e-5), pytest.approx(0.81291, abs=1e-5))
    iv = poisson_ratio_interval(0, 1000, 259, 1000, 0.999)
    p = 1 - 0.0005 ** (1 / 259)  # 0 of n: the upper end solves (1 - p)^n = (1 - level) / 2
    assert (iv["ratio"], iv["low"], iv["high"]) == (0, 0, pytest.approx(p / (1 - p), rel=1e-6))
    assert poisson_ratio_interval(0, 1000, 0, 1000) is None  # no event either side: no rate to divide
    m = mean_interval([0.90, 0.92, 0.94], 0.95)  # mean 0.92, sd 0.02, t(0.975, 2) = 4.303
    assert (m["low"], m["high"]) == (pytest.approx(0.92 - 4.3027 * 0.02 / math.sqrt(3), abs=1e-4),
                                     pytest.approx(0.92 + 4.3027 * 0.02 / math.sqrt(3), abs=1e-4))


def test_a_control_runs_failures_are_a_proportion_of_its_requests():
    """A control run's rounds: the failed requests of all its rounds over their requests, in
    Clopper and Pearson's exact interval at the run's level; none failed in 120,000 decides
    "below 1 in 10,000" at the claims file's level, 60,000 do not yet."""
    run = SPEC["runs"]["control-cluster"]
    rounds = [{"events": 0, "requests": 60_000}, {"events": 0, "requests": 60_000}]
    one, two = (evidence_rounds.interval_of(run, rounds[:n], run["level"]) for n in (1, 2))
    assert two == binomial_interval(0, 120_000, run["level"]) and two["ratio"] == 0
    assert [evidence_claims.verdict(iv, {"below": 0.0001}, n, evidence_claims.FIRST["control"]) for n, iv in ((1, one), (2, two))] == ["undecided", "holds"]


def test_a_calibration_round_is_the_clients_cpu_per_request_over_wrks():
    """A calibrate.sh round's runs (its runs.jsonl): the client's CPU per request over wrk's on
    the claim's case, the other cases' runs aside; a round without wrk's run is a failed round;
    the rounds' ratios are judged as a ratio (their geometric mean, a t interval on the logs)."""
    runs = [{"case": "http-1kb", "client": "wrk", "cpu_us_per_request": 12.0, "rps": 60000},
            {"case": "http-1kb", "client": "k6 native", "cpu_us_per_request": 15.0, "rps": 50000},
            {"case": "tls-handshakes", "client": "wrk", "cpu_us_per_request": 400.0, "rps": 2000}]
    got = evidence_rounds.calibration_figure(runs, "http-1kb", "native")
    assert got == {"value": 1.25, "cpu_us_per_request": 15.0, "wrk_cpu_us_per_request": 12.0, "rps": 50000, "wrk_rps": 60000}
    with pytest.raises(evidence_rounds.Failed, match="calibrate.sh measured no k6 native run of tls-handshakes"):
        evidence_rounds.calibration_figure(runs, "tls-handshakes", "native")
    # HTTP/2: h2load's run is the reference, wrk has none
    h2 = [{"case": "h2c-1kb-m10", "client": "h2load", "cpu_us_per_request": 16.0, "rps": 48000},
          {"case": "h2c-1kb-m10", "client": "k6 native", "cpu_us_per_request": 20.0, "rps": 50000}]
    assert evidence_rounds.calibration_figure(h2, "h2c-1kb-m10", "native")["value"] == 1.25
    with pytest.raises(evidence_rounds.Failed, match="calibrate.sh measured no h2load run of h2c-1kb-m10"):
        evidence_rounds.calibration_figure(h2[1:], "h2c-1kb-m10", "native")
    run = SPEC["runs"]["calibration-http"]
    iv = evidence_rounds.interval_of(run, [{"value": 1.25}, {"value": 1.1}], run["level"])
    assert iv == ratio_interval([1.25, 1.1], [1.0], run["level"])


def test_a_parts_paths_inside_the_checkout_are_relative_to_it():
    inside = f"{ROOT}/results/evidence-x/run"
    assert evidence_set.checkout_relative({"dir": inside, "rounds": [{"dir": inside + "/r1"}], "n": 3, "other": "/elsewhere/x"}) == \
        {"dir": "results/evidence-x/run", "rounds": [{"dir": "results/evidence-x/run/r1"}], "n": 3, "other": "/elsewhere/x"}


def part(claims, finished, failed=None):
    return {"run": "r", "kind": "signal", "started": finished, "finished": finished, "commit": "c" * 40, "dirty": False,
            "machine": {"cpus": 2}, "settings": {}, "budget": "1m", "max_rounds": 3, "looks": 2, "alpha": 0.05,
            "claims_in_file": 3, "level": 0.99, "stopped": "decided", "failed": failed, "results_dir": "/x",
            "claims": {cid: {"expect": {"above": 1}, "interval": {"ratio": v, "low": v - 0.1, "high": v + 0.1}, "verdict": says,
                             "rounds": 2, "figure": "f"} for cid, (v, says) in claims.items()}}


def test_the_set_is_assembled_from_the_newest_part_of_each_claim(tmp_path):
    """Three claims: 'a' measured twice (the newer part wins, whenever the parts ran), 'b' in a
    run that failed before it decided (failed), 'c' never (not run); the page links each part."""
    spec = {"file": "claims.yaml", "alpha": 0.05, "claims": [{"id": i, "says": f"{i} says", "run": "r"} for i in "abc"]}
    (tmp_path / "parts").mkdir()
    for name, p in (("r-2.json", part({"a": (2.0, "holds")}, "2026-11-28T10:00:00+00:00")),
                    ("r-1.json", part({"a": (0.5, "does not hold")}, "2026-11-27T10:00:00+00:00")),
                    ("s-1.json", part({"b": (1.0, "undecided")}, "2026-11-28T09:00:00+00:00", failed="a run failed"))):
        (tmp_path / "parts" / name).write_text(json.dumps(p))
    doc = evidence_set.assemble(tmp_path, spec)
    rows = {r["id"]: r for r in doc["claims"]}
    assert [(i, rows[i]["verdict"]) for i in "abc"] == [("a", "holds"), ("b", "failed"), ("c", "not run")]
    assert rows["a"]["part"] == "parts/r-2.json" and rows["a"]["interval"]["ratio"] == 2.0
    assert doc["counts"] == {"holds": 1, "undecided": 0, "not here": 0, "not run": 1, "does not hold": 0, "failed": 1}
    assert doc["exit_code"] == 1
    assert json.loads((tmp_path / "evidence.json").read_text()) == doc
    assert check_page(tmp_path / "index.html") == []
    assert (tmp_path / "index.html").read_text().count('href="parts/') == 2
    assert "| a | a says | above 1 | 2 (1.9–2.1) |" in (tmp_path / "evidence.md").read_text()


CLAIMS = {"alpha": 0.05, "runs": {"r": {"kind": "signal", "scenario": "rps", "value": "result.rps", "budget": "1m", "max_rounds": 3,
                                        "settings": {"PLATFORM": "lab"}}},
          "claims": [{"id": "fast", "run": "r", "says": "it serves", "expect": {"above": 1}}]}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("alpha"), "needs alpha, runs and claims, and nothing else"),
    (lambda d: d.update(alpha=0.7), "alpha must be a number between 0 and 0.5"),
    (lambda d: d["runs"]["r"].update(kind="soak"), "run 'r': kind must be one of matrix, capacity, change, control, signal, calibration"),
    (lambda d: d["runs"]["r"].update(kind="control"), "run 'r': needs of"),
    (lambda d: d["runs"]["r"].update(kind="control", of="nginx-lb-default", settings={"PLATFORM": "lab", "DURATION": "12s"}),
     "run 'r': CHANGE_AT 10s and DURATION 12s: the load needs 3 s or more before the change"),
    (lambda d: d["runs"]["r"].update(kind="calibration", case="http-1kb"), "run 'r': needs client"),
    (lambda d: d["runs"]["r"].update(kind="calibration", case="grpc", client="native"),
     "run 'r': unknown CASES 'grpc' (known: http-1kb, https-1kb, tls-handshakes, tls13-handshakes, tls13-p256-handshakes, tls13-hybrid-handshakes, tls12-resumed, tls13-resumed, tls12-session-id, throughput-1mb, h2c-1kb-m1, h2c-1kb-m10, h2-1kb-m10)"),
    (lambda d: d["runs"]["r"].update(budget="soon"), "run 'r': budget must be a duration like 5m"),
    (lambda d: d["runs"]["r"].update(max_rounds=1), "run 'r': max_rounds must be a whole number from 2 to 99"),
    (lambda d: d["runs"]["r"].pop("value"), "run 'r': needs value"),
    (lambda d: d["claims"][0].update(run="other"), "claim 1 (fast): run must name a run of the file"),
    (lambda d: d["claims"][0].update(expect={"near": 1}), "claim 1 (fast): expect must be {above: x}"),
    (lambda d: d["claims"].append(dict(d["claims"][0])), "claim 2: id 'fast' is listed twice"),
    (lambda d: d["runs"]["r"]["settings"].update(DURATION="long"), "DURATION must"),
    (lambda d: d["runs"]["r"]["settings"].update(VARIANT="turbo"), "unknown variant 'turbo'"),
])
def test_bad_claims_are_one_line_before_anything_starts(change, message, lab_down, tmp_path):
    doc = json.loads(json.dumps(CLAIMS))
    change(doc)
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(doc))
    r = task("bench:evidence", f"EVIDENCE_CLAIMS={tmp_path / 'claims.yaml'}", f"EVIDENCE_DIR={tmp_path / 'set'}",
             f"RESULTS_ROOT={tmp_path / 'results'}")
    assert r.returncode == 1 and message in one_error(r), r.stderr
    assert not (tmp_path / "set").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("args, message", [
    (["CLAIMS=nothing-of-ours"], "CLAIMS: no claim of bench/run/claims.yaml has an id or run starting with 'nothing-of-ours'"),
    (["CLAIMS=Seed004"], "CLAIMS must be claim ids or run names"),
    (["EVIDENCE_ASSEMBLE=1"], "has no parts to assemble"),
])
def test_bad_input_to_evidence_is_one_line(args, message, lab_down, tmp_path):
    r = task("bench:evidence", f"EVIDENCE_DIR={tmp_path / 'set'}", f"RESULTS_ROOT={tmp_path / 'results'}", *args)
    assert r.returncode == 1 and message in one_error(r), r.stderr
    assert not (tmp_path / "set").exists() and not (tmp_path / "results").exists()


@pytest.mark.e2e
def test_evidence_end_to_end_on_the_lab_in_two_parts(tmp_path):
    """A constructed claims file on the lab, run as two invocations into one set (CLAIMS): the
    LB against itself within 0.1-10x (a margin that holds at a spread of 50 %, five times the
    widest of identical runs here) holds; a figure with no spread, the runs' 10 connections,
    decides at the second round: 'above 1' holds and 'below 1' does not, so the second
    invocation exits 99. The set has all three with their parts' stamps; the lab goes down
    afterwards."""
    (tmp_path / "self.yaml").write_text(yaml.safe_dump({
        "title": "itself", "defaults": {"DURATION": "1s", "CONNECTIONS": "10"},
        "cases": [{"name": "a", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-default"},
                  {"name": "b", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-default"}],
        "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f", "spread": True}],
        "ratios": [{"title": "a vs b", "of": "a", "to": "b", "seed": {"expect": "equal", "range": [0.1, 10]}}]}))
    lab = {"PLATFORM": "lab", "DURATION": "1s", "CONNECTIONS": "10", "MONITORING": "0", "P95_MS": "3600000", "P99_MS": "3600000"}
    # Budgets far past the rounds' own time: a budget is wall time, and in the suite the lab's
    # loads wait for the cluster stream's (bench/lib/k6.sh IB_LOAD_YIELD): a 2 m budget once ran
    # out before "same" had its deciding round. max_rounds bounds the work.
    doc = {"alpha": 0.05, "runs": {
        "itself": {"kind": "matrix", "matrix": str(tmp_path / "self.yaml"), "budget": "15m", "max_rounds": 3, "settings": lab},
        "up": {"kind": "signal", "scenario": "rps", "value": "result.connections", "budget": "10m", "max_rounds": 2, "settings": lab},
        "down": {"kind": "signal", "scenario": "rps", "value": "result.connections", "budget": "10m", "max_rounds": 2, "settings": lab}},
        "claims": [{"id": "same", "run": "itself", "relation": "a vs b", "says": "the LB is itself"},
                   {"id": "serves", "run": "up", "says": "more than one connection", "expect": {"above": 1}},
                   {"id": "stalls", "run": "down", "says": "less than one connection", "expect": {"below": 1}}]}
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(doc))
    given = [f"EVIDENCE_CLAIMS={tmp_path / 'claims.yaml'}", f"EVIDENCE_DIR={tmp_path / 'set'}", f"RESULTS_ROOT={tmp_path / 'results'}"]
    try:
        first = task("bench:evidence", "CLAIMS=same", *given, timeout=600)
        assert first.returncode == 0, first.stderr[-3000:]
        second = task("bench:evidence", "CLAIMS=serves stalls", *given, timeout=600)
        assert second.returncode == 99, second.stderr[-3000:]
    finally:
        task("lab:down")
    got = json.loads((tmp_path / "set/evidence.json").read_text())
    rows = {r["id"]: r for r in got["claims"]}
    assert {i: r["verdict"] for i, r in rows.items()} == {"same": "holds", "serves": "holds", "stalls": "does not hold"}
    assert rows["serves"]["rounds"] == rows["stalls"]["rounds"] == 2, rows  # no spread: decided at the first deciding round
    assert rows["serves"]["interval"] == {"ratio": 10, "low": 10, "high": 10, "level": rows["serves"]["level"], "n": 2}
    parts = sorted((tmp_path / "set/parts").glob("*.json"))
    assert [p.name.split("-2")[0] for p in parts] == ["down", "itself", "up"]
    stamp = json.loads(parts[1].read_text())
    assert stamp["commit"] and stamp["machine"]["cpus"] > 0 and stamp["machine"]["kernel"] and "steal_percent" in stamp["machine"]
    assert stamp["level"] == pytest.approx(1 - 0.05 / (3 * 2)) and stamp["settings"]["DURATION"] == "1s"
    # exact: a matrix claim decides from its second round (a spread to judge by)
    assert len(stamp["claims"]["same"]["round_ratios"]) == stamp["claims"]["same"]["rounds"] >= 2
    assert check_page(tmp_path / "set/index.html") == []
    assert lab_leftovers() == [] and not k6_running()
