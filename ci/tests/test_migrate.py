"""bench:migrate on the local cluster: an overlay's behaviour probed.
Its verdicts (a variant against itself says "no change" once its interval decides, undecided
before) are proved on recorded rounds (test_recorded.py). Bad input is one line before anything
is deployed."""
import os
import sys

import pytest

from conftest import ROOT, UNMONITORED, one_error, task

def migrate_module():
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
    import migrate as m
    return m


@pytest.mark.takes_monitoring_down  # deployed unmonitored
@pytest.mark.usefixtures("local_cluster")
def test_an_overlays_behaviour_is_probed_from_where_k6_runs():
    """bench:migrate's behaviour part on a side it deploys: the overlay up, then every request of
    the built-in list sent by k6/probe/probe.js from the client's network namespace, each on a
    connection of its own, the TLS ones to its 443. (The whole migration, its alternated rounds
    and its table, between two ingresses on the cluster: test_chart_stack.py; the LB against
    Envoy Gateway on recorded answers and rounds: test_recorded.py.)"""
    m = migrate_module()
    import probes
    answers = m.behaviour("FROM", dict(os.environ, FROM="nginx-lb-default", **UNMONITORED), probes.BUILT_IN)
    assert [a["status"] for a in answers] == [200, 200, 200, 200, 200, 404, 405, 200, 200, 200], answers
    # the bodies' sizes: the payloads (HEAD none), nginx's error pages
    assert [a["body"] for a in answers][:5] == [1024, 0, 1048576, 0, 1024], answers
    assert m.differences(probes.BUILT_IN, answers, answers) == []


@pytest.mark.parametrize("settings,error", [
    ({"TO": "envoy-gateway-default"}, "FROM and TO are both needed"),
    ({"FROM": "nginx-lb-default", "TO": "no-such-variant"}, "TO: "),
    ({"FROM": "nginx-lb-default", "TO": "envoy-gateway-default", "CHANGES": "explode"}, "CHANGES"),
    ({"FROM": "nginx-lb-default", "TO": "envoy-gateway-default", "ROUNDS": "3", "BUDGET": "4m"}, "not both"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "ROUNDS": "2"}, "ROUNDS must be at least 3 for a comparison"),
    ({"FROM": "edge", "TO": "nginx-lb-full", "FROM_INGRESS_PODS": "edge/app=edge", "FROM_TARGET": "http://edge.edge.svc"},
     "FROM: INGRESS_PODS names an ingress you run on the cluster of PLATFORM=external (KUBECONFIG): set PLATFORM=external"),
    # changes under load: a side's own kinds, bench:change's refusals for an ingress you run
    ({"FROM": "edge", "TO": "gate", "FROM_INGRESS_PODS": "edge/app=edge", "TO_INGRESS_PODS": "gate/app=gate", "CHANGES": "scale"},
     "CHANGES: scale on FROM (edge), an ingress you run: its kinds are rollout, kill-backend, route"),
    ({"FROM": "edge", "TO": "gate", "FROM_INGRESS_PODS": "edge/app=edge", "TO_INGRESS_PODS": "gate/app=gate", "TO_CHANGES": "rollout"},
     "TO: CHANGE=rollout restarts your ingress's workload (kubectl rollout restart) on your cluster under load: set ALLOW_CHANGE=1 to confirm"),
    ({"FROM": "edge", "TO": "gate", "FROM_INGRESS_PODS": "edge/app=edge", "TO_INGRESS_PODS": "gate/app=gate", "TO_CHANGES": "route",
      "ALLOW_CHANGE": "1", "BACKEND_PODS": "shop/app=web"}, "TO: CHANGE=route adds a route to your ingress: name what it attaches to (ROUTE_PARENT="),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "FROM_CHANGES": "rollout"},
     "CHANGES: rollout is for an ingress you run; an overlay's (FROM, nginx-lb-default) are scale, route"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "TO_CHANGES": "explode"}, "TO_CHANGES: unknown CHANGES 'explode'"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "PROBES": "/nonexistent/requests.txt"},
     "PROBES=/nonexistent/requests.txt: cannot read it (No such file or directory)"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "PROBES": "gateway/eg"}, "PROBES=gateway/eg: give ingress/CLASS or gateway/NAMESPACE/NAME"),
    ({"FROM": "nginx-lb-default", "TO": "nginx-lb-full", "FROM_TARGT": "http://x"}, "unknown setting 'FROM_TARGT'"),
])
def test_bad_input_is_one_line_before_anything_runs(tmp_path, settings, error):
    results = tmp_path / "results"
    r = task("bench:migrate", f"RESULTS_ROOT={results}", *(f"{k}={v}" for k, v in settings.items()))
    assert r.returncode == 1 and error in one_error(r), r.stderr
    assert not results.exists()


def test_the_requests_a_file_or_the_clusters_routes_give():
    """PROBES: a file's lines, an IngressClass's rules, a Gateway's HTTPRoutes (recorded
    objects), each a request with its own Host where it names one; a line of another shape is
    refused with its number."""
    sys.path[:0] = [str(ROOT / "bench/run")]
    import probes
    from cases import Bad
    ingresses = {"items": [
        {"metadata": {"name": "shop", "namespace": "shop"}, "spec": {"ingressClassName": "nginx", "rules": [
            {"host": "shop.example", "http": {"paths": [{"path": "/cart", "pathType": "Prefix"}, {"path": "/", "pathType": "Prefix"}]}},
            {"http": {"paths": [{"path": "/health", "pathType": "Exact"}]}}]}},
        {"metadata": {"name": "old", "namespace": "a", "annotations": {"kubernetes.io/ingress.class": "nginx"}},
         "spec": {"rules": [{"http": {"paths": [{"pathType": "ImplementationSpecific"}]}}]}},
        {"metadata": {"name": "other", "namespace": "b"}, "spec": {"ingressClassName": "traefik", "rules": [{"http": {"paths": [{"path": "/t"}]}}]}}]}
    assert [probes.label(p) for p in probes.ingress_routes(ingresses, "nginx")] == [
        "GET /cart (Host: shop.example)", "GET / (Host: shop.example)", "GET /health", "GET /"]
    routes = {"items": [
        {"metadata": {"name": "r", "namespace": "shop"}, "spec": {"parentRefs": [{"name": "eg", "namespace": "gw"}],
                                                                   "hostnames": ["a.example", "b.example"],
                                                                   "rules": [{"matches": [{"path": {"value": "/api"}, "method": "POST"}]}, {}]}},
        {"metadata": {"name": "same-ns", "namespace": "gw"}, "spec": {"parentRefs": [{"name": "eg"}], "rules": [{}]}},
        {"metadata": {"name": "elsewhere", "namespace": "shop"}, "spec": {"parentRefs": [{"name": "eg"}], "rules": [{}]}}]}
    assert [probes.label(p) for p in probes.gateway_routes(routes, "gw", "eg")] == [
        "POST /api (Host: a.example)", "GET / (Host: a.example)", "POST /api (Host: b.example)", "GET / (Host: b.example)", "GET /"]
    f = ROOT / "ci/tests/fixtures/existing/requests.txt"
    assert [probes.label(p) for p in probes.from_file(f)] == ["GET /1kb.bin", "HEAD /1kb.bin (Host: shop.example)", "POST /api"]
    bad = f.parent / "bad-requests.txt"
    with pytest.raises(Bad) as e:
        probes.from_file(bad)
    assert str(e.value) == f"PROBES={bad}: line 2 is not '[METHOD] [HOST]/PATH' (METHOD one of GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH): FETCH /x"
