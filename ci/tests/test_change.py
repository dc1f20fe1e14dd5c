"""bench:change on the local cluster: each change kind under a steady open-model load, its
timeline (the native engine's 100 ms slots) covering the change, the change marked when it
happened, the client's counts beside the ingress's access log. (A run without a change, at the rate from
a capacity run: test_change_lab.py on the lab, and the scale's own rate here; that it fails
nothing is a claim: bench:evidence's a-control-run-fails-nothing-cluster.) That components/graceful-shutdown turns a scale's 502s into none is a claim: bench:evidence's
graceful-shutdown-ends-the-502s."""
import json
import re

import pytest

from changes import agrees, bench_change, covered
from conftest import K6_UNJUDGED, KUBECONFIG, VALIDITY_UNJUDGED, sh

# Every k6 threshold that can be out of reach is: left is k6's checks (rate==1, k6/lib/options.js),
# crossed exactly when a request failed (exits_as_its_failures).
# The shortest load bench:change takes: 3 s before the change, 10 s from its start. A reload, a
# pod's kill and a route are over within a second or two here; a scale (its pods' rollouts) and
# an ingress rollout get 16 s, 5 s in (LONGER).
SHORT = {"PLATFORM": "local", "MONITORING": "0", "DURATION": "13s", "CHANGE_AT": "3s", "RATE": "2000", **K6_UNJUDGED, **VALIDITY_UNJUDGED}
LONGER = {"DURATION": "16s", "CHANGE_AT": "5s"}


def seconds(settings):
    return int(settings["DURATION"].rstrip("s"))


def failures(doc):
    """The requests that failed during the run (the open model's sends never made are not requests)."""
    run = doc["analysis"]["run"]
    return run["errors"] - run["by_kind"].get("dropped", 0)


def failed_kinds(doc):
    """The kinds of the requests that failed; sends the open model never made (every connection
    still waiting: a stalled host) are no request, and the verdict counts them."""
    kinds = doc["analysis"]["run"]["by_kind"]
    said = sum(int(n) for n in re.findall(r"(\d+) (?:more )?never sent", doc["verdict"]))
    assert said == kinds.get("dropped", 0), doc["verdict"]
    return set(kinds) - {"dropped"}


def exits_as_its_failures(r, doc):
    """Exit 99 exactly when a request failed (k6's checks threshold), else 0."""
    assert r.returncode == (99 if failures(doc) else 0), (r.returncode, doc["analysis"]["run"], r.stderr[-3000:])


def change(tmp_path, kind, **settings):
    return bench_change(tmp_path, kind, {**SHORT, **settings})


def kubectl(*args):
    return sh("kubectl", "-n", "ingress-bench", *args, env={"KUBECONFIG": KUBECONFIG})


pytestmark = pytest.mark.takes_monitoring_down  # bench:change at MONITORING=0


def test_reload_marks_the_new_configuration_and_restores_the_old(local_cluster, tmp_path):
    """A reload into seed 003's LB knobs (worker_connections 100000; its access log stays on): start and end marked, the new configuration
    answering (/generation) before the end, errors only of the kinds a reload causes (a
    keep-alive connection closed by an old worker), the server's count agreeing; afterwards
    the pod runs the variant's own configuration again."""
    r, doc, run = change(tmp_path, "reload", RELOAD_TO="nginx-lb-basic-clusterip-1pod")
    exits_as_its_failures(r, doc)
    a = doc["analysis"]
    # (how soon it served is a figure of the host's hour; covered() holds every mark inside the load)
    assert {"start", "end", "serving"} <= set(a["marks_ms"]) and a["serving_after_ms"] > 0, a["marks_ms"]
    assert failed_kinds(doc) <= {"closed", "reset"}, a["run"]
    covered(doc, run, seconds(SHORT))
    agrees(doc)
    conf = kubectl("exec", "deployment/nginx-lb", "-c", "nginx", "--", "cat", "/run/lb/conf/nginx.conf")
    assert "worker_connections 1024;" in conf.stdout and "worker_connections 100000;" not in conf.stdout, conf.stdout[:2000]


def test_a_route_added_and_edited_under_load_serves_and_is_undone(local_cluster, tmp_path):
    """CHANGE=route on the nginx LB: one reload adds a route and edits the load's (a response
    header); the added route's first 200 and the edit's first header marked; errors only of
    the kinds a reload causes; the access log agrees with the client (the change's probes ask
    for other paths); afterwards the LB renders neither."""
    r, doc, run = change(tmp_path, "route")
    exits_as_its_failures(r, doc)
    a = doc["analysis"]
    assert {"start", "serving", "edited", "end"} <= set(a["marks_ms"]), a["marks_ms"]
    assert a["serving_after_ms"] > 0 and a["edited_after_ms"] > 0, a
    # exact: the wait ends on a 200 of each of the two probes
    assert doc["marks_unix_ms"]["probes"].get("200", 0) >= 2, doc["marks_unix_ms"]
    assert failed_kinds(doc) <= {"closed", "reset"}, a["run"]
    covered(doc, run, seconds(SHORT))
    agrees(doc)
    assert "the added route's first 200 after" in (run / "change.md").read_text()
    conf = kubectl("exec", "deployment/nginx-lb", "-c", "nginx", "--", "cat", "/run/lb/conf/nginx.conf").stdout
    assert "location = /route-added" not in conf and "X-Bench-Route" not in conf and "location /" in conf, conf[-2000:]


# A scale's load: LOAD_SHARE (50 %) of what the variant serves with one backend pod, the probe
# bench:change runs first; a fixed rate overran the one pod left on a slower hour (issue 27).
# Only CHANGE_ERRORS_MAX judges the run (the k6 thresholds out of reach): exit 99 means the gate.
SCALE = {**{k: v for k, v in SHORT.items() if k != "RATE"}, **LONGER, **K6_UNJUDGED, "CHANGE_ERRORS_MAX": "0"}


def test_scale_marks_the_endpoints_and_counts_the_502s_the_ingress_logged(local_cluster, tmp_path):
    """Backends 10 -> 1 -> 10 behind the LB's ClusterIP: the load from the one-pod probe, the
    scale down and back marked, the client's 502s (if any) are the access log's; the new pods
    serve, or the verdict says why not (seed 003's LB keeps its upstream keep-alive connections
    to the pods they were opened to). Besides 502s, a request the LB sent on a keep-alive
    connection to a pod whose network was already gone waits for an answer that never comes:
    the client's REQUEST_TIMEOUT ends it first (a timeout; 6 of 209 errors once), and the open
    model's sends due on that connection meanwhile are never made (dropped: 16,950 behind 22
    timeouts once, at 7,021 req/s on 50 connections)."""
    r, doc, run = bench_change(tmp_path, "scale", {**SCALE, "VARIANT": "nginx-lb-basic-clusterip-10pods"})
    # CHANGE_ERRORS_MAX=0 is in reach: crossed (99) exactly when a request failed during the
    # change (the open model's sends never made are not failures)
    d = doc["analysis"]["during"] or doc["analysis"]["run"]
    failed = d["errors"] - d["by_kind"].get("dropped", 0)
    # and k6's checks threshold (rate==1) exactly when a request of the run failed, before,
    # during or after the change (303 502s before a scale's start once)
    assert r.returncode == (99 if failed or failures(doc) else 0), (r.returncode, doc["gate"], r.stderr[-3000:])
    assert doc["gate"].startswith(f"CHANGE_ERRORS_MAX=0: {failed} failed during the change: {'CROSSED' if failed else 'ok'}"), doc["gate"]
    probe = json.loads((run.parent / "probe" / "summary.json").read_text())["result"]
    assert doc["rate"] == round(probe["rps"] * 0.5) and "with 1 backend pod" in doc["rate_from"], doc["rate_from"]
    a = doc["analysis"]
    assert a["marks_ms"]["start"] < a["marks_ms"]["down"] < a["marks_ms"]["end"], a["marks_ms"]
    assert "serving" in a["marks_ms"] or "kube-proxy balances connections, not requests" in doc["verdict"], doc
    # (sends never made: behind requests that timed out, or a node the pod churn starved: 180
    # with no timeout in one run here)
    assert failed_kinds(doc) <= {"status", "timeout"} and set(a["run"]["statuses"]) <= {"502"}, a["run"]
    covered(doc, run, seconds(SCALE))
    agrees(doc)
    assert len(kubectl("get", "pods", "-l", "app.kubernetes.io/name=backend", "-o", "name").stdout.split()) == 10


def test_scale_behind_addresses_resolved_at_start_never_serves_the_new_pods(local_cluster, tmp_path):
    """The LB resolving the pods' addresses once at its start (path-lb-pods): the new pods of a
    scale never get a request, and the verdict says why; the ingress is recreated afterwards."""
    r, doc, run = change(tmp_path, "scale", VARIANT="nginx-lb-basic-pods-10pods", **LONGER)
    exits_as_its_failures(r, doc)
    notes = doc["marks_unix_ms"]["notes"]
    assert notes["not_serving"] == notes["new"] == 9, notes
    assert "resolved at its start" in doc["verdict"]
    assert "its pod recreated" in r.stderr


@pytest.mark.parametrize("kind, settings", [
    ("kill-backend", {"VARIANT": "nginx-lb-basic-clusterip-10pods"}),
    ("kill-ingress", {}),
    ("rollout", {"INGRESS_CPU": "500m", **LONGER})])
def test_pod_changes_are_marked_and_counted(kind, settings, local_cluster, tmp_path):
    """A backend pod deleted (nine others serve), the ingress pod deleted, the ingress rolled:
    each marked, its errors counted by kind; where the ingress pod lives on, the server agrees."""
    r, doc, run = change(tmp_path, kind, **settings)
    exits_as_its_failures(r, doc)
    a = doc["analysis"]
    assert {"start", "end"} <= set(a["marks_ms"]) and a["change_ms"] > 0, a
    covered(doc, run, seconds({**SHORT, **settings}))
    # The cluster's own record agrees with the marks: the pod's kill (or the rollout's scaling)
    # is an event at the change's start, to its whole-second resolution.
    reason, obj = {"kill-backend": ("Killing", "Pod/backend-"), "kill-ingress": ("Killing", "Pod/nginx-lb-"),
                   "rollout": ("ScalingReplicaSet", "Deployment/nginx-lb")}[kind]
    m = doc["marks_unix_ms"]
    # exact: events carry whole seconds
    assert any(e["reason"] == reason and e["object"].startswith(obj) and m["start"] - 1000 < e["unix_ms"] <= m["end"]
               for e in doc["events"]), (m, doc["events"])
    if kind == "kill-backend":
        agrees(doc)
    else:
        assert not doc["server"]["counted"] and "replaced" in doc["server"]["why"]
        assert a["run"]["errors"] > 0 and a["disruption"], a  # one ingress pod: a gap nothing hides
