"""Gateway API on the local cluster: Envoy Gateway, built from its module, reconciles the Gateway
and HTTPRoute of components/gateway-api; k6 loads through the Envoy it runs, whose own
statistics agree with k6's count; leaving the variant leaves nothing of it. And, without a
cluster: its control plane is what its chart renders, and its custom resources are validated
against the pinned CRDs' schemas."""
import json
import os
import shutil
from pathlib import Path

import pytest

from changes import agrees, bench_change, covered
from conftest import K6_UNJUDGED, ROOT, VALIDITY_UNJUDGED, kubectl, sh, task, within

VARIANT = "envoy-gateway-default"


def condition(conditions, kind):
    return next((c["status"] for c in conditions if c["type"] == kind), None)


@pytest.mark.usefixtures("local_cluster")
def test_envoy_gateway_programs_the_gateway_and_envoy_counts_what_k6_sent(bench):
    # The validity threshold out of reach: k6, beside the ingress on this node's two CPUs, may be the limit.
    run = bench("rps", PLATFORM="local", VARIANT=VARIANT, DURATION="5s", **VALIDITY_UNJUDGED)
    assert run.rc == 0, run.err
    r = run.result
    assert r["requests"] > 0 and r["errors"] == 0, r
    gw = json.loads(kubectl("-n", "ingress-bench", "get", "gateway", "bench", "-o", "json").stdout)
    assert condition(gw["status"]["conditions"], "Programmed") == "True", gw["status"]
    assert {l["name"]: l["attachedRoutes"] for l in gw["status"]["listeners"]} == {"http": 1, "https": 1}, gw["status"]
    route = json.loads(kubectl("-n", "ingress-bench", "get", "httproute", "bench", "-o", "json").stdout)
    parent = route["status"]["parents"][0]
    assert parent["controllerName"] == "gateway.envoyproxy.io/gatewayclass-controller"
    assert condition(parent["conditions"], "Accepted") == condition(parent["conditions"], "ResolvedRefs") == "True", parent
    # The server's count is Envoy's own, on the gateway's listeners only.
    srv = run.summary["server"]
    # exact: the requests in flight at the end, at most one per connection
    assert srv["source"] == "Envoy statistics" and within(r["requests"], srv["requests"], 0.01), (r["requests"], srv)
    # Monitoring read the proxy: its CPU from cAdvisor, its requests from its statistics, and
    # the verdict from them.
    s = run.summary["correlation"]["signals"]
    assert s["ingress_cpu_cores"] > 0 and s["ingress_cpu_limit_cores"] == 1, s
    # (a 5 s run's rules average in its ramp: the rate is read, not matched to k6's here)
    # exact: a 2 s scrape's rate of a counter k6's requests bound, plus the probes' few
    assert 0 < s["server_rps"] <= r["rps"] * 1.05, (s["server_rps"], r["rps"])
    assert run.summary["verdict"]["limit"] not in (None, "unknown"), run.summary["verdict"]


@pytest.mark.usefixtures("local_cluster")
def test_tls_through_the_gateway_is_a_full_handshake_per_request(bench):
    # Monitored as the runs beside it: a deploy without the monitoring component between two
    # with it rolls the gateway's proxies twice.
    run = bench("tps", PLATFORM="local", VARIANT=VARIANT)
    assert run.rc == 0, run.err
    r, srv = run.result, run.summary["server"]
    assert r["requests"] > 0 and r["errors"] == 0, r
    # a new connection per request, each accepted by the gateway's HTTPS listener
    # exact: the requests in flight at the end, at most one per connection
    assert within(r["requests"], srv["requests"], 0.01) and within(srv["connections_accepted"], srv["requests"], 0.01), srv
    # The confirmation pass before the load, by Envoy's own statistics: TLS 1.2 with the seed's
    # suite on every handshake, none resumed (Envoy Gateway gives no tickets by default), and
    # every TLS connection HTTP/1.1, each with its one request.
    rec = srv["tls"]["record"]
    n = rec["connections"]
    assert (rec["protocols"], rec["ciphers"], rec["groups"], rec["http"], rec["resumed"], rec["requests"]) == (
        {"TLSv1.2": n}, {"ECDHE-RSA-AES256-GCM-SHA384": n}, {"X25519": n}, {"HTTP/1.1": n}, 0, n), rec


@pytest.mark.usefixtures("local_cluster")
def test_a_route_added_and_edited_under_load_through_the_gateway(tmp_path):
    """CHANGE=route on Envoy Gateway: the HTTPRoute applied with a rule added and the load's
    rule edited (a response header); Envoy Gateway programs Envoy, which serves the new route
    and the header on new connections (both marked) while the load's connections keep
    theirs: no request fails. Envoy's statistics, less the change's probes, agree with the
    client; afterwards the route is as built."""
    r, doc, run = bench_change(tmp_path, "route", {"PLATFORM": "local", "VARIANT": VARIANT, "DURATION": "16s", "CHANGE_AT": "5s", "RATE": "2000",
                                                   **K6_UNJUDGED, **VALIDITY_UNJUDGED})
    # The load's thresholds out of reach (a latency rise while Envoy takes the new configuration
    # is the host's): what is tested is the route's programming and the counts.
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    a = doc["analysis"]
    assert {"start", "serving", "edited", "end"} <= set(a["marks_ms"]), a["marks_ms"]
    assert a["serving_after_ms"] > 0 and a["edited_after_ms"] > 0, a
    # Sends the open model never made (every connection waiting: a starved client) are not
    # requests that failed.
    assert {k: n for k, n in a["run"]["by_kind"].items() if k != "dropped"} == {}, (a["run"], doc["verdict"])
    covered(doc, run, 16)
    agrees(doc)
    # exact: the wait ends on a 200 of each of the two probes
    assert doc["server"]["probes"] >= 2, doc["server"]
    route = json.loads(kubectl("-n", "ingress-bench", "get", "httproute", "bench", "-o", "json").stdout)
    assert len(route["spec"]["rules"]) == 1 and not route["spec"]["rules"][0].get("filters"), route["spec"]


@pytest.mark.usefixtures("local_cluster")
def test_a_route_step_through_the_gateway(tmp_path):
    """bench:routes on Envoy Gateway: 20 HTTPRoutes created under load, each answering 200 on a
    new connection, then deleted, each answering as /routes/0 (never a route) does; Envoy
    counted its route table's reloads in each step; every reading at rest from the cgroups of
    the proxy's and the controller's containers; after, no HTTPRoute of the steps is left."""
    results = tmp_path / "results"
    r = task("bench:routes", f"RESULTS_ROOT={results}", "PLATFORM=local", f"VARIANT={VARIANT}", "ROUTE_STEPS=20,0", "DURATION=8s",
             "CHANGE_AT=3s", "RATE=2000", *(f"{k}={v}" for k, v in {**K6_UNJUDGED, **VALIDITY_UNJUDGED}.items()), timeout=900)
    docs = sorted(results.glob("routes-*/routes.json"))
    assert r.returncode == 0 and len(docs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(docs[0].read_text())
    assert doc["how"] == "httproute" and [row["routes"] for row in doc["rows"]] == [0, 20, 0]
    up, down = doc["rows"][1:]
    assert up["marks"]["want"] == 200 and len(up["found_ms"]) == 20, up["marks"]
    assert down["marks"]["want"] == doc["unrouted_status"] == 404 and len(down["found_ms"]) == 20, down["marks"]
    # A controller may batch changes: at least one reload of the route table a step.
    assert up["updates"] >= 1 and down["updates"] >= 1, (up["updates"], down["updates"])
    pods = {p["metadata"]["uid"] for sel in ("ingress-bench/role=ingress", "control-plane=envoy-gateway")
            for p in json.loads(kubectl("-n", "ingress-bench", "get", "pods", "-l", sel, "-o", "json").stdout)["items"]}
    for row in doc["rows"]:
        for side in ("data_plane", "controller"):
            d = row["rest"][side]
            assert any(f"pod{uid}/" in d["cgroup"] for uid in pods) and Path(d["cgroup"], "cgroup.procs").read_text().split(), d
            assert d["working_set_bytes"] > 0 and d["rss_bytes"] > 0, d
    assert kubectl("-n", "ingress-bench", "get", "httproute", "-l", "ingress-bench/routes=1", "-o", "name").stdout.strip() == ""


@pytest.mark.usefixtures("local_cluster")
def test_leaving_the_gateway_leaves_nothing_of_it():
    # Monitored as the runs before and after it (see the TLS test above).
    up = sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": VARIANT})
    assert up.returncode == 0, up.stderr
    assert kubectl("-n", "ingress-bench", "get", "pods", "-l", "ingress-bench/role=ingress", "-o", "name").stdout.strip()
    back = sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": "nginx-lb-default"})
    assert back.returncode == 0, back.stderr
    left = kubectl("-n", "ingress-bench", "get", "all,gateway,httproute,envoyproxy,serviceaccount,role,rolebinding,secret",
                   "-o", "name").stdout.split()
    assert [o for o in left if "envoy" in o or "gateway" in o or o.startswith("httproute")] == [], left
    assert kubectl("get", "gatewayclass,clusterrole,clusterrolebinding", "-o", "name").stdout.count("gateway") == 0


def test_the_control_plane_is_what_its_chart_renders():
    r = sh("bash", "kustomize/components/envoy-gateway/render.sh", "--check")
    assert r.returncode == 0, r.stderr


def test_a_field_the_crd_does_not_have_fails_validation(tmp_path):
    """kubeconform -strict holds the custom resources to the pinned CRDs' schemas, as the
    built-in kinds to Kubernetes': a misspelt EnvoyProxy field is one line, exit 1."""
    bad = tmp_path / "overlays" / "typo"
    bad.mkdir(parents=True)
    base = os.path.relpath(ROOT / "overlays" / VARIANT, bad)
    (bad / "kustomization.yaml").write_text(f"""resources: [{base}]
patches:
  - target: {{ kind: EnvoyProxy }}
    patch: |
      - {{ op: add, path: /spec/provider/kubernetes/envoyDeployment/replica, value: 2 }}
""")
    good = tmp_path / "overlays" / VARIANT
    shutil.copytree(ROOT / "overlays" / VARIANT, good)
    (good / "kustomization.yaml").write_text((good / "kustomization.yaml").read_text().replace("../../", os.path.relpath(ROOT, good) + "/"))
    from test_validate import validate  # its dry-run off: this test runs in the lab's stream
    r = validate(tmp_path / "overlays")
    assert r.returncode == 1, r.stderr
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: typo: kubeconform") and "replica" in errors[0], r.stderr


NGF = "nginx-gateway-fabric-default"


def built(variant):
    import yaml
    r = sh("kustomize", "build", f"overlays/{variant}")
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def test_nginx_gateway_fabrics_controller_serves_the_class_its_gateway_names():
    """NGINX Gateway Fabric cannot run here (module and images refused): what holds its overlay
    together is checked on the build instead. The controller's flags name the overlay's class
    and controller; the class's parameters are the overlay's NginxProxy; the certificates the
    Job makes are those the controller mounts and hands the agents; its Service selects its
    pod; the cluster-wide objects carry our names; every image is the one pin."""
    docs = built(NGF)
    one = lambda kind, **meta: [d for d in docs if d["kind"] == kind and all(d["metadata"].get(k) == v for k, v in meta.items())]  # noqa: E731
    (ctl,) = one("Deployment", name="nginx-gateway")
    c = ctl["spec"]["template"]["spec"]["containers"][0]
    flags = dict(a[2:].split("=", 1) for a in c["args"] if a.startswith("--"))
    (gw,), (gc,), (job,) = one("Gateway"), one("GatewayClass"), one("Job")
    assert flags["gatewayclass"] == gc["metadata"]["name"] == gw["spec"]["gatewayClassName"], (flags, gc["metadata"])
    assert flags["gateway-ctlr-name"] == gc["spec"]["controllerName"]
    ref = gc["spec"]["parametersRef"]
    assert one(ref["kind"], name=ref["name"], namespace=ref["namespace"]), ref
    gen = dict(a[2:].split("=", 1) for a in job["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--"))
    assert gen["agent-tls-secret"] == flags["agent-tls-secret"] and gen["service"] == flags["service"], (gen, flags)
    assert [v["secret"]["secretName"] for v in ctl["spec"]["template"]["spec"]["volumes"]] == [gen["server-tls-secret"]]
    (svc,) = one("Service", name=flags["service"])
    assert svc["spec"]["selector"].items() <= ctl["spec"]["template"]["metadata"]["labels"].items()
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")) == \
        [("ClusterRole", "ingress-bench-nginx-gateway"), ("ClusterRoleBinding", "ingress-bench-nginx-gateway")]
    images = {x["image"] for d in docs if d["kind"] in ("Deployment", "Job")
              for x in d["spec"]["template"]["spec"]["containers"] if "nginx-gateway-fabric" in x["image"]}
    assert images == {"ghcr.io/nginx/nginx-gateway-fabric:2.4.0"}, images
    # The NGINX pods' init container is the controller's image: its IMAGE_NAME, copied from the pin.
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["IMAGE_NAME"] == c["image"], env
