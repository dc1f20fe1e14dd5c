"""The statistics' verdicts on rounds recorded from real runs here (ci/tests/fixtures/rounds/,
written from bench:evidence's matrices: each run's figures as the matrix runner read them), so
that a verdict's arithmetic is proved exactly, whatever the host's noise today: a seed
relation decided or undecided by its rounds and its interval's level, the matrix's stopping
rule, and bench:compare's pass, regression and unstable."""
import copy
import json
import sys

import pytest

from conftest import ROOT, table_row

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


def test_every_seed_relation_is_a_row_and_a_hop_needs_its_nodes():
    """bench:seeds' case list with the runs of one round recorded on the one-node cluster: every
    relation the list states has its row and a measured ratio; one round has no spread, so each
    says "undecided", but seed 003's NodePort losses, which come from the hop between its nodes:
    on one node those two rows say "not here" (each run's meta.json counted its nodes), whatever
    the rounds; on four nodes they are judged. (Every case of the list deploys:
    test_cluster_overlays; each run's nodes counted: test_nodes.py.)"""
    m = mx.load(ROOT / "bench/run/matrices/seeds.yaml", {}, mx.registry())
    fx = recorded("seeds-one-node")
    assert m["columns"] == fx["columns"]
    tables.compute(m, fx["runs"])
    listed = [r["title"] for r in m["ratios"]]
    hop = [r["title"] for r in m["ratios"] if r["seed"]["nodes"]]
    assert hop == ["003: LB -> NodePort vs LB -> Pod, 10 pods, 4 KB", "003: LB -> NodePort vs LB -> Pod, 10 pods, 100 KB"]
    said = {r["title"]: (r["holds"], r.get("not_here")) for r in m["ratios"] if r["interval"]}
    assert said == {t: ("not here", "needs 2 nodes, ran on 1") if t in hop else ("undecided", None) for t in listed}
    for c in m["cases"]:
        c["env"] = {}
    m["given"] = {}
    table = tables.markdown(m, 1, ROOT, False)
    for t in hop:
        assert "not here (needs 2 nodes, ran on 1)" in table_row(table, t), table
    # The same round as four nodes record it (each run's meta.json: the default cluster): the
    # hop is there, and its rows are judged like the rest.
    m = mx.load(ROOT / "bench/run/matrices/seeds.yaml", {}, mx.registry())
    tables.compute(m, [{**run, "nodes": 4} for run in fx["runs"]])
    assert {r["title"]: (r["holds"], r.get("not_here")) for r in m["ratios"] if r["interval"]} == {t: ("undecided", None) for t in listed}


def migrate_module():
    import migrate
    return migrate


def compared(name, rounds, env, budgeted=True):
    """bench:compare's rows and verdict on a recording's first ROUNDS rounds, and its stopping
    rule's word after them."""
    mts, reg = compare.metrics("rps"), mx.registry()
    runs = [r for r in recorded(name)["runs"] if r["round"] <= rounds]
    _, values, cpus = compare.measured(runs, mts)
    rows, verdict, _, _, _, _ = compare.verdict_of(values, cpus, mts, None, env, reg, budgeted=budgeted)
    return rows, verdict, compare.decided(runs, mts, None, env, reg)


@pytest.mark.parametrize("tolerance, rounds, stops, verdict", [
    # the rate's interval straddles +20 % until the fifth round, then lies within ±20 %
    ("20", 4, None, "undecided: rps req/s straddle ±20 %"),
    ("20", 5, "the rate decided", "no change (within ±20 %)"),
    # ±10 %: 0.890–1.097× after all eight rounds (the recorded run said so too)
    ("10", 8, None, "undecided: rps req/s straddle ±10 %"),
    # one round is a point, not an interval: it decides nothing
    ("20", 1, None, "undecided: rps req/s straddle ±20 %"),
])
def test_migrate_a_variant_against_itself(tolerance, rounds, stops, verdict):
    """bench:migrate FROM=TO on its recorded rounds: its comparison stops (BUDGET) at the round
    the rate's interval lies wholly within ±GATE_RATE_DROP, and the verdict says no change;
    before, or at a tolerance it straddles, undecided."""
    migrate = migrate_module()
    tol = int(tolerance) / 100
    rows, _, stopped = compared("migrate-itself", rounds, {"DECIDE": "change", "GATE_RATE_DROP": tolerance})
    assert stopped == stops
    speed = migrate.speed_rows("rps", {"metrics": rows}, tol)
    assert migrate.verdict_of(speed, [], tol) == verdict
    rate = next(r for r in speed if r["judged"])
    assert rate["metric"] == "req/s" and rate["says"] == ("no change" if stops else "undecided"), rate


def test_migrate_says_a_behaviour_difference_whatever_the_speed():
    migrate = migrate_module()
    rows, _, _ = compared("migrate-itself", 5, {"DECIDE": "change", "GATE_RATE_DROP": "20"})
    diffs = [["GET http://…/1kb.bin (Host: other.example)", "status", 200, 404]]
    assert migrate.verdict_of(migrate.speed_rows("rps", {"metrics": rows}, 0.2), diffs, 0.2) == "changed: 1 behaviour difference(s)"


def test_migrate_whose_comparison_failed_is_incomplete_not_no_change():
    """A scenario whose comparison failed measured nothing: the verdict says what failed, never
    "no change"; a change that was measured is still said first."""
    migrate = migrate_module()
    failed = ["bench:compare of tps failed: the run failed"]
    assert migrate.verdict_of([], [], 0.1, failed) == "incomplete: bench:compare of tps failed: the run failed"
    diffs = [["GET http://…/1kb.bin (Host: other.example)", "status", 200, 404]]
    assert migrate.verdict_of([], diffs, 0.1, failed) == "changed: 1 behaviour difference(s)"


def test_compare_a_variant_against_itself_decides_no_change():
    """bench:compare BASE=HEAD with a budget and wide gates (70 % drop, +200 % latency) on the
    recorded rounds: every gate decided at the third round, the rate's interval holding 1.0
    and clear of the tolerance, no regression: pass."""
    wide = {"GATE_RATE_DROP": "70", "GATE_P95_RISE": "200", "GATE_P99_RISE": "200", "GATE_CV_MAX": "30"}
    assert compared("migrate-itself", 2, wide)[2] is None
    rows, verdict, stopped = compared("migrate-itself", 3, wide)
    rate = next(r for r in rows if r["key"] == "rate")
    assert (stopped, verdict, rate["says"]) == ("every gate decided", "pass", "no change"), rate
    # exact: GATE_RATE_DROP's 70 %: "every gate decided" means the interval clears it
    assert 0.3 <= rate["interval"]["low"] <= 1.0 <= rate["interval"]["high"], rate
    assert [r["key"] for r in rows if r["decided"]] == ["rate", "per_cpu", "p95", "p99"], rows


def test_migrate_nginx_to_envoy_gateway_on_recorded_answers_and_rounds():
    """bench:migrate FROM=nginx-lb-default TO=envoy-gateway-default, recorded: the same probes
    answered by both, compared: the LB's one server block takes any Host where the Gateway
    routes bench.ingress.test only (200 against 404), the scenarios' own requests get the same
    status and body; three rounds of the rate decide "faster" past +10 %; the verdict names
    both."""
    migrate = migrate_module()
    fx = recorded("migrate-envoy")
    import probes
    assert [len(fx["answers"][s]) for s in ("FROM", "TO")] == [len(probes.BUILT_IN)] * 2
    diffs = migrate.differences(probes.BUILT_IN, fx["answers"]["FROM"], fx["answers"]["TO"])
    said = {(p, what): (x, y) for p, what, x, y in diffs}
    assert said[("GET http://…/1kb.bin (Host: other.example)", "status")] == (200, 404), said
    assert [k for k in said if k[0] in ("GET http://…/1kb.bin", "GET https://…/1kb.bin") and k[1] in ("status", "body bytes")] == []
    rows, _, _ = compared("migrate-envoy", 3, {"DECIDE": "change", "GATE_RATE_DROP": "10"}, budgeted=False)
    speed = migrate.speed_rows("rps", {"metrics": rows}, 0.1)
    rate = next(r for r in speed if r["judged"])
    # exact: "faster" is the interval wholly past +10 %
    assert rate["says"] == "faster" and rate["low"] > 1.1, rate
    assert migrate.verdict_of(speed, diffs, 0.1) == \
        f"changed: rps req/s faster ({rate['ratio']:.3f}×, {rate['low']:.3f}–{rate['high']:.3f}); {len(diffs)} behaviour difference(s)"


def replayed_search(fx, monkeypatch, tmp_path, edit=lambda steps: None):
    """bench:capacity's search with each run replayed from a recording (the closed model's, then
    each step's at the rate it asks), so the ladder, the bisection and the stop are its own."""
    import capacity
    steps = copy.deepcopy(fx["steps"])
    edit(steps)
    by_rate = {s["rate"]: s for s in steps}
    asked = []

    def run_one(c, extra, testid, mdir, m):
        if not extra:
            return copy.deepcopy(fx["closed"])
        asked.append(int(extra["RATE"]))
        return copy.deepcopy(by_rate[int(extra["RATE"])])
    monkeypatch.setattr(capacity.matrix, "run_one", run_one)
    m = {"cases": [{"name": "capacity", "scenario": "rps", "platform": "lab", "variant": "nginx-lb-default", "env": {"CONNECTIONS": "20"}}]}
    _, _, found, why = capacity.search(m, fx["slo_p99_ms"], fx["precision"], tmp_path, "replay")
    return found, why, asked


def test_capacity_search_on_a_recorded_ladder(monkeypatch, tmp_path):
    """The recorded search: 70 % and 85 % of the closed model's rate held, 100 % did not (p99
    past the SLO), bisected twice to within the precision: the capacity it found, the same
    steps in the same order."""
    fx = recorded("capacity-lab")
    found, why, asked = replayed_search(fx, monkeypatch, tmp_path)
    assert (found, why, asked) == (fx["capacity"], fx["why"], [s["rate"] for s in fx["steps"]])


def test_capacity_search_stops_where_the_client_is_the_limit(monkeypatch, tmp_path):
    """The same recording with the step past the knee crossed on the client's lateness: no
    capacity (the figure would be the client's), and the search says so at that step."""
    fx = recorded("capacity-lab")
    knee = next(s["rate"] for s in fx["steps"] if s["status"] == "crossed")

    def client_late(steps):
        next(s for s in steps if s["rate"] == knee)["crossed"] = ["bench_sends_client_late count<=0"]
    found, why, asked = replayed_search(fx, monkeypatch, tmp_path, client_late)
    assert found is None and asked[-1] == knee and why.startswith(f"the client could not send {knee:,} req/s on time"), why


def judged_change(name):
    """A recorded bench:change run analysed and judged again from its timeline and marks:
    (the recording, the analysis, the verdict)."""
    from report.change import analyse
    from change import verdict
    fx = recorded(name)
    a, _ = analyse(fx["timeline"], fx["marks_unix_ms"])
    notes = fx["marks_unix_ms"].get("notes") or {}
    return fx, a, verdict(fx["change"], a, fx["server"], fx["backends"], notes, fx["upstream"], fx["platform"] == "lab", fx["events"])


def test_requests_failed_outside_the_change_are_said_apart():
    """A scale whose run had 502s before its start and none during: the verdict says when they
    came, never that no request failed."""
    from change import verdict
    none = {"requests": 100, "errors": 0, "by_kind": {}, "statuses": {}, "others": {}, "p99_ms": 3.0}
    before = {**none, "errors": 303, "by_kind": {"status": 303}, "statuses": {"502": 303}}
    a = {"run": {**before, "requests": 300}, "during": none, "before": before, "after": none,
         "disruption": {"from_ms": 3800, "to_ms": 4700, "ms": 900, "slots": 9}, "slow_ms": 9.0}
    said = verdict("scale", a, {"retried": 0}, 10, {}, "clusterip")
    assert said == "303 failed before the change started (303× 502): not the change's, the state it started from or ended in", said


def test_sends_never_made_outside_the_change_are_counted_apart():
    """A scale whose open model dropped sends before the change's start as well as during it:
    the verdict's counts of sends never made add up to the run's."""
    from change import verdict
    none = {"requests": 100, "errors": 0, "by_kind": {}, "statuses": {}, "others": {}, "p99_ms": 3.0}
    during = {**none, "errors": 43172, "by_kind": {"dropped": 43172}}
    a = {"run": {**none, "errors": 43629, "by_kind": {"dropped": 43629}}, "during": during, "before": none, "after": none,
         "disruption": None, "slow_ms": 9.0}
    said = verdict("scale", a, {"retried": 0}, 10, {}, "clusterip")
    assert said.startswith("43172 never sent: due while") and said.endswith("; 457 more never sent outside the change's window"), said


def test_a_control_runs_recorded_timeline_has_no_disruption():
    """CHANGE=none on the cluster: nothing marked, every slot of the open model answered, no
    window of errors or slow slots, and the verdict says so: what the run said."""
    fx, a, said = judged_change("change-none-cluster")
    assert (a, said) == (fx["analysis"], fx["verdict"])
    assert a["marks_ms"] == {} and a["during"] is None and a["disruption"] is None and a["run"]["errors"] == 0, a
    assert said == "no request failed and latency stayed within 3x the steady p99"


def test_a_killed_backend_among_ten_is_a_latency_disruption_only():
    """A backend pod of ten deleted at 3 s: no request failed (the LB's upstreams moved on),
    but four slots in a row past 3x the steady p99 make a 400 ms disruption from the change's
    slot, and the verdict names it: what the run said."""
    fx, a, said = judged_change("change-kill-backend-10pods")
    assert (a, said) == (fx["analysis"], fx["verdict"])
    assert a["run"]["errors"] == 0 and a["disruption"] == {"from_ms": 3000, "to_ms": 3400, "ms": 400, "slots": 4}, a
    assert said.startswith("no request failed, but latency rose past ") and said.endswith("for 400 ms"), said


def test_the_only_backend_killed_is_a_disruption_with_each_kind_of_error_named():
    """The one backend pod deleted at 3 s: its 502s (the access log's too), the requests sent
    to the gone pod that timed out, and the open model's sends never made behind them, each
    counted from the change's slot (2.9 s) to the load's end, and the verdict names each with
    why: what the run said."""
    fx, a, said = judged_change("change-kill-backend-1pod")
    assert (a, said) == (fx["analysis"], fx["verdict"])
    d = a["during"]
    assert a["during_ms"] == [2900, 13000] and d["by_kind"] == {"status": 1194, "timeout": 50, "dropped": 16447}, a
    assert d["statuses"] == {"502": 1194} and a["disruption"]["from_ms"] == 3000, a
    assert said.startswith("1194× 502: the only backend pod was deleted: the ingress had nowhere to send until it was back "
                           "(its access log says the same); 50 timed out: ") and "16447 never sent" in said, said


def test_a_change_that_outlasts_the_load_says_what_was_not_measured():
    """A scale back to ten pods on a starved node ended 17.5 s into a 16 s load: the analysis
    keeps the end mark where it was and counts what the load saw, and the verdict ends saying
    the change outlasted the load by 1.5 s (what the run said, then that)."""
    fx, a, said = judged_change("change-scale-outlasted")
    assert a == {**fx["analysis"], "outlasted_ms": 1467}, a
    assert said == fx["verdict"] + "; the change ended 1.5 s after the load: what it did from the load's end on was not measured " \
        "(a longer DURATION)", said
