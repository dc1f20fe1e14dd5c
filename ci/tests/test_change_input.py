"""bench:change's bad input (issue 17): one line and exit 1 before anything is deployed; and its
disruption rule. A module of its own: no cluster is up while it runs (test_change.py's is down
by then)."""
from pathlib import Path

import pytest

from conftest import task


@pytest.mark.parametrize("args, message", [
    (["CHANGE=explode"], "unknown CHANGE 'explode' (known: none, reload, scale, kill-backend, kill-node, rollout, kill-ingress, route)"),
    ([], "CHANGE is not set: ./task bench:change CHANGE=<none|reload|scale|kill-backend|kill-node|rollout|kill-ingress|route>"),
    (["CHANGE=kill-node"], "CHANGE=kill-node loses a backends node of its own while the ingress and the client keep theirs: NODES=3 or more "
                           "(the local cluster has 1 node)"),
    (["CHANGE=kill-node", "NODES=2"], "NODES=3 or more (the local cluster has 2 nodes)"),
    (["CHANGE=kill-node", "NODES=3", "CHANGE_AT=5s", "DURATION=20s"], "the load needs 3 s or more before the change (its steady state) and 25 s"),
    (["CHANGE=kill-node", "PLATFORM=lab"], "CHANGE=kill-node needs the local cluster (PLATFORM=local): the lab has none, reload, kill-backend"),
    (["CHANGE=scale"], "CHANGE=scale needs more than one backend pod (N -> 1 -> N): overlay nginx-lb-default has 1"),
    (["CHANGE=reload", "RELOAD_TO=nodeport-direct"], "RELOAD_TO=nodeport-direct has no nginx-lb configuration"),
    (["CHANGE=scale", "RELOAD_TO=nginx-lb-full"], "RELOAD_TO is CHANGE=reload's: unset it for CHANGE=scale"),
    (["CHANGE=kill-ingress", "VARIANT=nodeport-direct"], "CHANGE=kill-ingress needs an nginx-lb ingress"),
    (["CHANGE=route", "VARIANT=nodeport-direct"], "CHANGE=route needs an nginx-lb ingress or a Gateway API variant's HTTPRoute 'bench'; overlay nodeport-direct has neither"),
    (["CHANGE=route", "PLATFORM=lab"], "CHANGE=route needs the local cluster (PLATFORM=local): the lab has none, reload, kill-backend"),
    (["CHANGE=reload", "CHANGE_AT=25s"], "the load needs 3 s or more before the change"),
    (["CHANGE=reload", "LOAD_SHARE=150"], "LOAD_SHARE must be"),
    (["CHANGE=reload", "PLATFORM=external"], "bench:change runs on the local cluster or the lab (PLATFORM=local|lab), got PLATFORM=external"),
    (["CHANGE=reload", "TARGET=http://198.18.0.2/"], "bench:change changes what it runs (the local cluster or the lab): unset TARGET"),
    (["CHANGE=scale", "PLATFORM=lab"], "CHANGE=scale needs the local cluster (PLATFORM=local): the lab has none, reload, kill-backend"),
    (["CHANGE=reload", "PLATFORM=lab", "RELOAD_TO=workers-9"], "unknown variant 'workers-9'"),
    # an ingress you run: what makes sense on someone else's, and only on the user's word
    (["CHANGE=reload", "PLATFORM=external", "INGRESS_PODS=edge/app=edge", "TARGET=http://edge.edge.svc"],
     "CHANGE=reload on an ingress you run: its kinds are none, rollout, kill-backend, route"),
    (["CHANGE=rollout", "PLATFORM=external", "INGRESS_PODS=edge/app=edge", "TARGET=http://edge.edge.svc"],
     "CHANGE=rollout restarts your ingress's workload (kubectl rollout restart) on your cluster under load: set ALLOW_CHANGE=1 to confirm"),
    (["CHANGE=kill-backend", "PLATFORM=external", "INGRESS_PODS=edge/app=edge", "TARGET=http://edge.edge.svc", "ALLOW_CHANGE=1"],
     "CHANGE=kill-backend deletes one of your backends' pods: name them (BACKEND_PODS)"),
    (["CHANGE=route", "PLATFORM=external", "INGRESS_PODS=edge/app=edge", "TARGET=http://edge.edge.svc", "ALLOW_CHANGE=1",
      "BACKEND_PODS=shop/app=web"], "CHANGE=route adds a route to your ingress: name what it attaches to (ROUTE_PARENT=ingressclass/NAME or "),
    (["CHANGE=route", "PLATFORM=external", "INGRESS_PODS=edge/app=edge", "TARGET=http://edge.edge.svc", "ALLOW_CHANGE=1",
      "BACKEND_PODS=shop/app=web", "ROUTE_PARENT=gateway/gate"], "ROUTE_PARENT must be ingressclass/NAME or gateway/NAMESPACE/NAME"),
    (["CHANGE=reload", "PLATFORM=lab", "VARIANT=nginx-lb-basic-clusterip-10pods-graceful"], "uses component backend-replicas-10, which the bare-metal lab cannot reproduce"),
])
def test_bad_input_is_one_line_before_anything_starts(args, message, tmp_path, lab_down):
    """Each mistake: one error line, exit 1, no results directory, no cluster and no lab brought up
    (the cluster's state a directory of the test's own: the suite's cluster stream may have its
    cluster up meanwhile)."""
    results, cluster = tmp_path / "results", tmp_path / "cluster"
    r = task("bench:change", f"RESULTS_ROOT={results}", *args, env={"IB_CLUSTER_STATE": str(cluster)})
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1 and message in errors[0], r.stderr[-2000:]
    assert not results.exists() and not cluster.exists()


def test_a_disruption_is_an_error_or_three_slow_slots_in_a_row():
    """The disruption rule (bench/report/change.py): any failed request, or p99 above 3x the
    steady p99 (before the change) for 300 ms in a row; one or two slow slots are not one."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from report.change import analyse

    def run(p99s, errors_at=(), start=1500):
        slots = [{"i": i, "outcomes": {"ok": 100, **({"status": 1} if i in errors_at else {})},
                  "statuses": {"502": 1} if i in errors_at else {}, "latency": [[v, 100]]} for i, v in enumerate(p99s)]
        return analyse({"origin_ms": 0, "slot_ms": 100, "slots": slots}, {"start": start, "end": 1600})[0]

    steady = [1.0] * 40
    assert run(steady)["disruption"] is None
    assert run(steady[:20] + [10, 10] + steady[22:])["disruption"] is None
    assert run(steady[:20] + [10, 10, 1, 10, 10, 10] + steady[26:])["disruption"] == {"from_ms": 2300, "to_ms": 2600, "ms": 300, "slots": 3}
    lone_error = run(steady, errors_at=(30,))
    assert lone_error["disruption"]["from_ms"] == 3000 and lone_error["during"]["errors"] == 1
    # The slot the change starts in (1544 ms: 1500-1600) is the change's, not the steady state's.
    in_its_slot = run(steady, errors_at=(15,), start=1544)
    assert in_its_slot["during"]["errors"] == 1 and in_its_slot["before"]["errors"] == 0 and in_its_slot["during_ms"][0] == 1500


def test_a_mark_read_from_the_loads_requests_after_its_end_is_at_its_end():
    """Scale's "serving" is read from the new pods' request counters every 200 ms: a reading
    after the load's last slot saw a request of the load, so the mark is the timeline's end;
    a mark the change made itself (its end) is kept where it was made."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from report.change import analyse
    slots = [{"i": i, "outcomes": {"ok": 100}, "statuses": {}, "latency": [[1.0, 100]]} for i in range(40)]
    marks = {"start": 1500, "end": 4100, "serving": 4150, "read_from_load": ["serving"]}
    a = analyse({"origin_ms": 0, "slot_ms": 100, "slots": slots}, marks)[0]
    assert a["marks_ms"] == {"start": 1500, "end": 4100, "serving": 4000} and a["serving_after_ms"] == 2500, a["marks_ms"]


def test_the_verdict_names_a_replacement_the_scheduler_could_not_place():
    """From the cluster's events: a FailedScheduling for the new pod during a disruption is
    named, with the wait until its Scheduled event; without a disruption it is not."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "run"))
    from change import verdict
    events = [{"unix_ms": 1000, "reason": "FailedScheduling", "object": "Pod/nginx-lb-x",
               "message": "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate"},
              {"unix_ms": 6000, "reason": "Scheduled", "object": "Pod/nginx-lb-x", "message": "Successfully assigned"}]
    run = {"errors": 3, "by_kind": {"refused": 3}, "statuses": {}, "others": {}}
    a = {"run": run, "during": run, "disruption": {"ms": 300}}
    v = verdict("kill-ingress", a, {}, 1, {}, None, events=events)
    assert "the new pod (Pod/nginx-lb-x) could not be scheduled for 5 s: 0/1 nodes are available: 1 Insufficient cpu (" in v, v
    calm = {"errors": 0, "by_kind": {}, "statuses": {}, "others": {}}
    assert "scheduled" not in verdict("kill-ingress", {"run": calm, "during": calm, "disruption": None}, {}, 1, {}, None, events=events)


def test_a_distributed_runs_timelines_are_one_on_the_earliest_segments_grid():
    """bench/report/change.py merged_timeline: each pod's slots moved to the earliest origin's
    grid, to the nearest slot (230 ms later: two slots), and added outcome by outcome, status
    by status and latency bucket by bucket."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from report.change import merged_timeline
    a = {"origin_ms": 1000, "slot_ms": 100, "relative_error": 0.03, "beyond": 0, "slots": [
        {"i": 0, "outcomes": {"ok": 5}, "statuses": {}, "others": {}, "latency": [[1.0, 5]]},
        {"i": 2, "outcomes": {"ok": 3, "status": 1}, "statuses": {"502": 1}, "others": {}, "latency": [[1.0, 2], [2.0, 2]]}]}
    b = {"origin_ms": 1230, "slot_ms": 100, "relative_error": 0.03, "beyond": 1, "slots": [
        {"i": 0, "outcomes": {"ok": 4, "reset": 1}, "statuses": {}, "others": {}, "latency": [[2.0, 4], [4.0, 1]]}]}
    assert merged_timeline([b, a]) == {"origin_ms": 1000, "slot_ms": 100, "relative_error": 0.03, "beyond": 1, "segments": 2, "slots": [
        {"i": 0, "outcomes": {"ok": 5}, "statuses": {}, "others": {}, "latency": [[1.0, 5]]},
        {"i": 2, "outcomes": {"ok": 7, "status": 1, "reset": 1}, "statuses": {"502": 1}, "others": {},
         "latency": [[1.0, 2], [2.0, 6], [4.0, 1]]}]}
