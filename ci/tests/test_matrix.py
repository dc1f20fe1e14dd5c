"""The matrix runner (bench/run/matrix.py, `./task bench:matrix MATRIX=...`): real runs on the lab
through ./task as a user types it. A crossed threshold in one case is recorded in the table and
the other cases run; a run that fails otherwise is recorded with its reason and the matrix goes
on; MONITORING=0 runs with the stack down; a bad case list is one line and starts nothing."""
import importlib.util
import json
import statistics
from pathlib import Path

import pytest
import yaml

from conftest import LATENCY_UNJUDGED, ROOT, VALIDITY_UNJUDGED, k6_running, sh, table_row, task

SHORT = {"DURATION": "1s", "CONNECTIONS": "10", **LATENCY_UNJUDGED, **VALIDITY_UNJUDGED}


def matrix_module():
    """bench/run/matrix.py as a module, for its pure parts (compute, judge_ratio)."""
    spec = importlib.util.spec_from_file_location("matrix", ROOT / "bench/run/matrix.py")
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)
    return matrix


def case_list(tmp_path, cases, **top):
    path = tmp_path / "cases.yaml"
    doc = {"title": "test matrix", "defaults": SHORT, "cases": cases,
           "columns": [{"title": "variant", "field": "variant"},
                       {"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"},
                       {"key": "k6_cpu", "title": "k6 CPU over the run", "value": "client.utilization", "scale": 100, "format": ".0f", "unit": "%"}],
           **top}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def the_matrix(results):
    """The one matrix directory a run made under RESULTS_ROOT, and its matrix.json."""
    dirs = sorted(Path(results).iterdir())
    assert len(dirs) == 1, dirs
    return dirs[0], json.loads((dirs[0] / "matrix.json").read_text())


@pytest.mark.e2e
def test_a_crossed_threshold_is_recorded_and_the_other_cases_run(tmp_path):
    cases = [{"name": "default", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-default"},
             {"name": "tuned", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-full"},
             {"name": "floor", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-default",
              "settings": {"RPS_MIN": "1e9"}}]
    path = case_list(tmp_path, cases, ratios=[{"title": "floor vs default", "of": "floor", "to": "default", "column": "rps"}])
    results = tmp_path / "results"
    r = task("bench:matrix", f"MATRIX={path}", "ROUNDS=2", f"RESULTS_ROOT={results}", timeout=900)
    assert r.returncode == 99, r.stderr
    assert not [l for l in r.stderr.splitlines() if l.startswith("error:")], r.stderr
    mdir, doc = the_matrix(results)
    assert doc["exit_code"] == 99 and doc["rounds"] == 2
    for name in ("table.md", "matrix.json", "cases.yaml", "logs"):
        assert (mdir / name).exists(), name

    # Every case once per round, the order rotated each round (round-robin).
    assert [(run["round"], run["case"]) for run in doc["runs"]] == [
        (1, "default"), (1, "tuned"), (1, "floor"), (2, "tuned"), (2, "floor"), (2, "default")]
    testids = [run["testid"] for run in doc["runs"]]
    assert len(set(testids)) == 6
    # Every run's directory is kept, is what bench.sh wrote for that TESTID, and is listed.
    table_file = (mdir / "table.md").read_text()
    for run in doc["runs"]:
        d = Path(run["dir"])
        assert d.parent == mdir and d.name == run["testid"] and (d / "summary.json").exists()
        meta = json.loads((d / "meta.json").read_text())
        assert meta["testid"] == run["testid"] and meta["settings"]["DURATION"] == SHORT["DURATION"]
        assert f"{d.name}/" in table_file
        assert run["status"] == ("crossed" if run["case"] == "floor" else "passed"), run

    by = {c["name"]: c for c in doc["cases"]}
    # The crossed case: recorded as crossed, with its numbers; the threshold it crossed is said.
    assert by["floor"]["counts"] == {"passed": 0, "crossed": 2, "failed": 0}
    assert by["floor"]["runs"] and all(run["crossed"] == ["http_reqs rate>=1000000000"] for run in by["floor"]["runs"])
    assert by["floor"]["settings"] == {"RPS_MIN": "1e9"}
    for name, c in by.items():
        # One place for the numbers: the medians and spread are those of the runs' own summaries.
        rps = [json.loads((Path(run["dir"]) / "summary.json").read_text())["result"]["rps"] for run in c["runs"]]
        s = c["stats"]["rps"]
        assert s["n"] == 2 and rps and all(v > 0 for v in rps)
        assert s["median"] == pytest.approx(statistics.median(rps))
        assert (s["min"], s["max"]) == (pytest.approx(min(rps)), pytest.approx(max(rps)))
        assert s["cv_percent"] == pytest.approx(statistics.stdev(rps) / statistics.fmean(rps) * 100)
        # exact: a share of k6's CPUs; above 100 % only by its start, outside the wall clock
        assert 0 < c["stats"]["k6_cpu"]["median"] <= 150
    ratio = doc["ratios"][0]  # of the cases' geometric means (bench/report/stats.py ratio_interval)
    gmean = lambda c: statistics.geometric_mean(by[c]["stats"]["rps"]["values"])  # noqa: E731
    assert ratio["value"] == pytest.approx(gmean("floor") / gmean("default"))

    # The table (printed, and in table.md): the crossed case with its median, the others passed.
    for table in (r.stdout, table_file):
        floor = table_row(table, "floor")
        assert floor[-1] == "2/2 crossed"
        assert floor[2] == f"{by['floor']['stats']['rps']['median']:,.0f}"
        assert table_row(table, "default")[-1] == "2/2 passed" and table_row(table, "tuned")[-1] == "2/2 passed"
        assert table_row(table, "tuned")[1] == "nginx-lb-full"
        assert "floor crossed a threshold in rounds 1, 2: http_reqs rate>=1000000000" in table
        assert f"- floor vs default: {ratio['value']:.2f}x" in table


@pytest.mark.e2e
def test_a_failed_run_is_recorded_and_the_matrix_goes_on(tmp_path):
    # In the lab's range, but no host holds it: k6's setup refuses (bench.sh exits 1).
    cases = [{"name": "gone", "scenario": "rps", "platform": "lab", "settings": {"TARGET": "http://198.18.0.250"}},
             {"name": "there", "scenario": "rps", "platform": "lab"}]
    results = tmp_path / "results"
    r = task("bench:matrix", f"MATRIX={case_list(tmp_path, cases)}", "ROUNDS=1", f"RESULTS_ROOT={results}", timeout=600)
    assert r.returncode == 1, r.stderr
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "1 of 2 runs failed: case gone round 1: k6 rps did not finish" in errors[0], r.stderr
    assert "target http://198.18.0.250/1kb.bin not ready" in errors[0]
    mdir, doc = the_matrix(results)
    gone, there = doc["runs"]
    assert gone["status"] == "failed" and "no route to host" in gone["reason"] and Path(gone["log"]).exists()
    assert there["status"] == "passed" and Path(there["dir"], "summary.json").exists()
    assert table_row(r.stdout, "gone")[-1] == "1/1 failed" and table_row(r.stdout, "gone")[2] == "—"
    assert table_row(r.stdout, "there")[-1] == "1/1 passed" and float(table_row(r.stdout, "there")[2].replace(",", "")) > 0
    assert f"- gone round 1 failed: {gone['reason']}" in r.stdout
    assert not k6_running()


@pytest.mark.e2e
def test_monitoring_off_runs_with_the_stack_down(tmp_path):
    """MONITORING=0 in a case takes the platform's monitoring down before its run (as
    bench:overhead measures it), once: a second such run finds it down still; the next case
    with monitoring brings it up again."""
    cases = [{"name": "off", "scenario": "rps", "platform": "lab", "settings": {"MONITORING": 0}},
             {"name": "off-again", "scenario": "rps", "platform": "lab", "settings": {"MONITORING": 0}},
             {"name": "on", "scenario": "rps", "platform": "lab", "settings": {"MONITORING": 1}}]
    results = tmp_path / "results"
    r = task("bench:matrix", f"MATRIX={case_list(tmp_path, cases)}", "ROUNDS=1", f"RESULTS_ROOT={results}", timeout=600)
    assert r.returncode == 0, r.stderr
    mdir, doc = the_matrix(results)
    off, again, on = doc["runs"]
    assert "monitoring    down (lab)" in Path(off["log"]).read_text()
    assert "monitoring    down" not in Path(again["log"]).read_text()
    assert json.loads(Path(again["dir"], "summary.json").read_text())["correlation"].get("url") is None
    assert json.loads(Path(off["dir"], "summary.json").read_text())["settings"]["MONITORING"] == "0"
    # Started afresh (not "up: <url>", which says it was up already).
    assert "monitoring    up: Prometheus" in Path(on["log"]).read_text()
    assert json.loads(Path(on["dir"], "summary.json").read_text())["correlation"]["url"]
    assert table_row(r.stdout, "off")[-1] == "1/1 passed" and table_row(r.stdout, "on")[-1] == "1/1 passed"


LAB_CASE = {"name": "a", "scenario": "rps", "platform": "lab"}


@pytest.mark.parametrize("cases, message", [
    ([{**LAB_CASE, "settings": {"RPS_MINN": 1}}],
     "case 'a': settings: unknown setting 'RPS_MINN' (did you mean RPS_MIN? every setting: docs/reference/settings.md)"),
    ([LAB_CASE, {**LAB_CASE, "name": "b", "setings": {"RPS_MIN": 1}}], "case 2: unknown field 'setings' (known: name, scenario, platform, variant, settings, group, baseline)"),
    ([LAB_CASE, {**LAB_CASE, "name": "b", "variant": "turbo"}], "case 'b': unknown variant 'turbo'"),
    ([{**LAB_CASE, "scenario": "latency"}], "case 'a': unknown scenario 'latency' (known: rps, tps, throughput)"),
    ([{**LAB_CASE, "settings": {"ROUNDS": 2}}], "case 'a': settings: ROUNDS does not reach a run"),
    ([{**LAB_CASE, "settings": {"VARIANT": "default"}}], "case 'a': settings: VARIANT is the case's 'variant' field"),
    ([{**LAB_CASE, "settings": {"P95_MS": "fast"}}], "case 'a': P95_MS must be a number, got 'fast'"),
    ([{**LAB_CASE, "scenario": "tps", "settings": {"SCHEME": "http"}}], "case 'a': the tps scenario measures TLS handshakes: SCHEME must be https"),
    ([LAB_CASE, LAB_CASE], "case 'a' is listed twice"),
])
def test_a_bad_case_list_is_one_line_and_starts_nothing(cases, message, lab_down, tmp_path):
    results = tmp_path / "results"
    r = task("bench:matrix", f"MATRIX={case_list(tmp_path, cases)}", f"RESULTS_ROOT={results}")
    assert r.returncode == 1, r.stderr
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "matrix   " not in r.stderr and not results.exists()


def test_no_case_list_is_one_line(tmp_path):
    r = task("bench:matrix", f"RESULTS_ROOT={tmp_path / 'results'}")
    assert r.returncode == 1
    assert [l for l in r.stderr.splitlines() if l.startswith("error:")] == [
        "error: name a case list: MATRIX=path.yaml (bench/run/matrices/ holds the seeds' lists)"]


@pytest.mark.parametrize("name, cases", [("seeds", 22), ("overhead", 2)])
def test_the_seeds_case_lists_check(name, cases):
    """bench:seeds and bench:overhead are case lists: each passes every check (--check: the
    plan, nothing started)."""
    r = sh("bash", "-c", f". bench/lib.sh && exec python bench/run/matrix.py --check bench/run/matrices/{name}.yaml")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == cases + 1 and lines[-1] == f"{cases} cases × {5 if name == 'overhead' else 3} rounds"
    if name == "seeds":  # seed 004's client opens a connection per request, as ab without -k
        assert all("NO_REUSE=1" in l for l in lines if l.startswith("s004-"))


def test_relations_runs_one_seeds_ratios_and_their_cases(tmp_path):
    """RELATIONS=004: seed 004's three ratios and the three cases they compare (the plan, nothing
    started); seed 003's six, nine cases (its 1-pod 100 KB cases are in no ratio). A prefix no ratio has,
    or a value the setting refuses, is one error line and starts nothing."""
    def check(relations):
        return sh("bash", "-c", ". bench/lib.sh && exec python bench/run/matrix.py --check bench/run/matrices/seeds.yaml",
                  env={"RELATIONS": relations, "RESULTS_ROOT": str(tmp_path / "results")})
    r = check("004")
    assert r.returncode == 0, r.stderr
    assert [l.split(":")[0] for l in r.stdout.splitlines()[:-1]] == ["s004-nodeport", "s004-ingress-default", "s004-ingress-keepalive"]
    r = check("003:")
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "9 cases × 3 rounds", r.stdout
    r = check("s003-nodeport-10")  # a case's name: the rows measuring it, with their baselines
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "4 cases × 3 rounds", r.stdout
    for value, message in (("009", "error: RELATIONS: no ratio of bench/run/matrices/seeds.yaml has a title or case starting with '009'"),
                           ("004|002", "error: RELATIONS must be title or case prefixes separated by spaces, got '004|002'")):
        r = check(value)
        assert r.returncode == 1 and [l for l in r.stderr.splitlines() if l.startswith("error:")] == [message], r.stderr
        assert not (tmp_path / "results").exists()


def test_spread_is_median_min_max_and_cv():
    matrix = matrix_module()
    s = matrix.stats([90.0, 110.0, 100.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (100.0, 90.0, 110.0, 3)
    assert s["cv_percent"] == pytest.approx(10.0)
    assert matrix.stats([5.0])["cv_percent"] is None  # one round: no spread to speak of
    assert matrix.stats(["0", "0", "1"])["text"] == ["0", "1"]  # a CPU list: the values seen


def test_a_relation_decides_only_when_its_interval_does():
    """A seed relation: 'yes' when the whole 95 % interval is on the seed's side of 1 (or
    inside its range for 'equal'), 'no' when wholly on the other, 'undecided' when it straddles;
    the same values always give the same interval."""
    matrix = matrix_module()

    def judged(expect, of, to, rng=None):
        r = {"of": "a", "to": "b", "per": None, "show": "ratio", "seed": {"figure": 1, "text": "", "expect": expect, "range": rng}}
        matrix.judge_ratio(r, of, to)
        return r

    tight_half = judged("lower", [50, 51, 49], [100, 101, 99], [0.4, 0.6])
    assert (tight_half["holds"], tight_half["in_range"]) == ("yes", True)
    assert tight_half["interval"]["high"] < 1 and tight_half["interval"]["ratio"] == pytest.approx(0.5, abs=1e-3)
    assert judged("higher", [50, 51, 49], [100, 101, 99])["holds"] == "no"
    assert judged("lower", [60, 130, 95], [100, 101, 99])["holds"] == "undecided"
    assert judged("equal", [100, 102, 99], [101, 100, 99], [0.9, 1.1])["holds"] == "yes"
    assert judged("equal", [70, 72, 71], [101, 100, 99], [0.9, 1.1])["holds"] == "no"
    assert judged("lower", [50], [100])["holds"] == "undecided"  # one round: no spread to judge by
    assert matrix.ratio_interval([3, 1, 2], [5, 4, 6]) == matrix.ratio_interval([1, 2, 3], [4, 5, 6])


def test_the_intervals_hold_what_they_say():
    """The intervals' 95 % is a coverage: on simulated identical sides (log-normal noise, CV
    15 %, as short lab runs here) the ratio's interval holds 1.0 in
    about 95 of 100 comparisons at the fewest rounds a comparison decides on, paired
    (bench:compare's alternated rounds) or apart (a saved baseline, a matrix's cases); and a
    real 20 % drop at a CV of 5 % is found in 5 rounds."""
    import math
    import random
    matrix = matrix_module()
    from report.stats import paired_ratio_interval  # on the path matrix.py puts it on
    rng = random.Random(7)
    side = lambda n, cv, f=1.0: [1000 * f * math.exp(rng.gauss(0, cv)) for _ in range(n)]  # noqa: E731
    trials = 400
    for interval in (matrix.ratio_interval, paired_ratio_interval):
        held = sum(iv["low"] <= 1 <= iv["high"] for iv in (interval(side(3, 0.15), side(3, 0.15)) for _ in range(trials)))
        # exact: a seeded simulation; 95 % of 400 give or take three binomial deviations (±13)
        assert 367 <= held <= 393, (interval.__name__, held)
        found = sum(iv["high"] < 1 for iv in (interval(side(5, 0.05, 0.8), side(5, 0.05)) for _ in range(100)))
        assert found >= 95, (interval.__name__, found)  # exact: seeded; the drop is 4 standard errors


def test_a_relation_whose_seed_needs_more_nodes_says_not_here():
    """A seed whose mechanism needs N nodes (seed 003's NodePort hop between nodes) says "not
    here" when a run of its cases had fewer (meta.json's nodes), whatever the interval; with
    enough nodes, or none counted (the lab), the interval decides."""
    matrix = matrix_module()

    def judged(nodes):
        m = {"cases": [{"name": n, "baseline": None} for n in "ab"], "columns": [{"key": "rps", "kind": "value"}],
             "ratios": [{"of": "a", "to": "b", "per": None, "show": "ratio", "column": "rps",
                         "seed": {"figure": 0.7, "text": "", "expect": "lower", "range": None, "nodes": 2}}]}
        runs = [{"case": c, "status": "passed", "nodes": nodes, "values": {"rps": v}}
                for c, vs in (("a", (50, 51, 49)), ("b", (100, 101, 99))) for v in vs]
        matrix.compute(m, runs)
        return m["ratios"][0]

    one = judged(1)
    assert (one["holds"], one["not_here"]) == ("not here", "needs 2 nodes, ran on 1") and one["interval"]["ratio"] == pytest.approx(0.5, abs=1e-3)
    assert judged(3)["holds"] == "yes" and "not_here" not in judged(3)
    assert judged(None)["holds"] == "yes"


def test_a_decided_relations_cases_run_no_more():
    """A budgeted matrix's next round (still_needed): the cases some undecided seed relation
    compares, and their baselines; a case every relation of which decided runs no more. Before
    the second round, or under a runner's own rule (bench:compare's gates), every case."""
    matrix = matrix_module()
    seed = lambda lo, hi: {"figure": 1.0, "text": "", "expect": "equal", "range": [lo, hi], "nodes": None}  # noqa: E731
    cases = [{"name": n, "baseline": "d" if n == "c" else None} for n in "abcde"]
    m = {"cases": cases, "columns": [{"key": "rps", "kind": "value"}],
         "ratios": [{"of": "a", "to": "b", "per": None, "show": "ratio", "column": "rps", "seed": seed(0.25, 4.0)},  # decides
                    {"of": "a", "to": "c", "per": None, "show": "ratio", "column": "rps", "seed": seed(0.999, 1.001)}]}  # cannot
    noisy = {"a": (100, 120, 90), "b": (101, 99, 100), "c": (110, 95, 100), "d": (1, 1, 1), "e": (5, 5, 5)}
    runs = [{"case": c, "status": "passed", "nodes": None, "values": {"rps": v}, "round": i + 1}
            for c, vs in noisy.items() for i, v in enumerate(vs)]
    assert [c["name"] for c in matrix.still_needed(m, runs, 3, cases)] == ["a", "c", "d"]
    assert [r["holds"] for r in m["ratios"]] == ["yes", "undecided"]
    assert matrix.still_needed(m, runs, 1, cases) == cases
    assert matrix.still_needed(dict(m, decide=lambda *a: None), runs, 3, cases) == cases


def test_sides_with_different_ingress_cpu_are_judged_per_cpu():
    """Each side probed its own share (INGRESS_CPU=auto): the relation divides what each served
    per CPU of its ingress (summary.json cpu.per_ingress_cpu), as seed 002 does, and says so;
    with the same CPU on both sides, the column itself."""
    matrix = matrix_module()

    def judged(cpus_b):
        m = {"cases": [{"name": n, "baseline": None} for n in "ab"], "columns": [{"key": "rps", "kind": "value"}],
             "ratios": [{"of": "a", "to": "b", "per": None, "show": "ratio", "column": "rps",
                         "seed": {"figure": 1.0, "text": "", "expect": "equal", "range": [0.9, 1.1], "nodes": None}}]}
        # a at 0.5 CPU serves half of b's req/s at 1 CPU: the same per CPU
        runs = [{"case": "a", "status": "passed", "nodes": 1, "ingress_cpus": 0.5, "per_cpu": v * 2, "values": {"rps": v}}
                for v in (5000, 5050, 4950)] + \
               [{"case": "b", "status": "passed", "nodes": 1, "ingress_cpus": cpus_b, "per_cpu": v / cpus_b, "values": {"rps": v}}
                for v in (10000, 10100, 9900)]
        matrix.compute(m, runs)
        return m["ratios"][0]

    per_cpu = judged(1.0)
    assert per_cpu["holds"] == "yes" and per_cpu["interval"]["ratio"] == pytest.approx(1.0), per_cpu
    assert matrix.judged_on(per_cpu) == "rps per ingress CPU (0.5 vs 1 CPU)"
    same = judged(0.5)
    assert same["holds"] == "no" and same["interval"]["ratio"] == pytest.approx(0.5) and matrix.judged_on(same) == "rps"


def test_a_relations_rounds_are_the_fewer_of_its_cases():
    """A budgeted matrix stops a case once its relations decide while its baseline runs on for
    another relation: a relation rests on the rounds of its case that stopped."""
    matrix = matrix_module()
    by = {"stopped": {"runs": [{"round": n} for n in (1, 2)]},
          "baseline": {"runs": [{"round": n} for n in range(1, 16)] + [{"status": "skipped"}]}}
    assert matrix.rounds_of({"of": "stopped", "to": "baseline"}, by) == 2
    assert matrix.rounds_of({"of": "baseline", "to": None}, by) == 15


@pytest.mark.e2e
def test_a_budget_shorter_than_a_round_ends_after_one(tmp_path):
    """BUDGET: a noise probe first (the spread now, and the rounds each relation's margin needs),
    then rounds until every seed relation decides or the budget would end in the next round: a
    budget shorter than one round ends after it, "undecided after 1 round" with the probe's
    spread, and the row says its rounds. (Rounds that go on until a relation decides, and stop
    there: the stopping rule on recorded rounds, test_recorded.py, and bench:evidence's
    matrix claims, test_evidence.py.)"""
    cases = [{"name": "a", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-full"},
             {"name": "b", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-full"}]
    ratio = {"title": "a vs b", "of": "a", "to": "b", "column": "rps",
             "seed": {"figure": 1.0, "text": "the same", "expect": "equal", "range": [0.25, 4.0]}}
    path = case_list(tmp_path, cases, ratios=[ratio])
    results = tmp_path / "results"
    r = task("bench:matrix", f"MATRIX={path}", "BUDGET=1s", f"RESULTS_ROOT={results}", timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    mdir, doc = the_matrix(results)
    noise = doc["noise"]
    assert noise["runs"] == 4 and noise["cv_percent"] is not None and noise["needs"]["a vs b"] >= 2, noise
    assert f"noise now: CV {noise['cv_percent']:.1f} % over 4 runs of {SHORT['DURATION']} of a" in r.stderr  # the rounds' DURATION
    assert doc["rounds"] == 1 and max(x["round"] for x in doc["runs"]) == 1, doc["stopped"]
    assert doc["stopped"].startswith("the budget (1s) would end in the next round"), doc["stopped"]
    assert doc["ratios"][0]["holds"] == "undecided", doc["ratios"][0]
    row = table_row(r.stdout, "a vs b")  # relation, seed, says, measured, interval, holds, ..., rounds
    assert row[5] == f"undecided after 1 round, spread {noise['cv_percent']:.1f} %" and row[-1] == "1", row
