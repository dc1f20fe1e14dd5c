"""Overlays and deploy on the local cluster, for real: every overlay through the API server's
dry run, deploy applying only what changed, and deploy's refusals (an unknown overlay, an image
that is not local, the external platform without its opt-in, a deploy that never becomes ready,
no cluster up): one line each, nothing applied."""
import json
import urllib.request
import re
import shutil

import pytest

from conftest import KUBECONFIG, ROOT, kubectl, one_error, sh, urlopen

pytestmark = pytest.mark.usefixtures("local_cluster")


def test_every_overlay_passes_server_side_dry_run():
    r = sh("bash", "bench/validate/validate.sh", timeout=600)
    assert r.returncode == 0, r.stderr
    overlays = sorted(p.name for p in (ROOT / "overlays").iterdir() if (p / "kustomization.yaml").exists())
    lines = [l for l in r.stderr.splitlines() if "server dry-run on the local cluster" in l]
    assert len(lines) == len(overlays) >= 7
    # Only NGINX Gateway Fabric's NginxProxy goes unchecked, and its line says so.
    unchecked = [l for l in lines if "not validated" in l]
    assert unchecked == ["validate      nginx-gateway-fabric-default: 17 objects ok (k8s 1.33, 1.34, server dry-run on the local "
                         "cluster); not validated: NginxProxy (no CRD of it can be had here)"], unchecked


def test_an_overlay_only_the_api_server_refuses_is_named(tmp_path):
    """Every overlay goes through one dry-run apply; when the API server refuses one (a memory
    request above its limit: valid to the schemas and the policy), it is found and named in
    one line."""
    from test_validate import WITH_WEB, overlay, validate, web
    overlay(tmp_path, "a-good", WITH_WEB, {"web.yaml": web()})
    overlay(tmp_path, "b-over", WITH_WEB, {"web.yaml": web(resources="{requests: {memory: 16Mi}, limits: {memory: 8Mi}}")})
    r = validate(tmp_path, dry_run="auto")  # the cluster this stream owns is up
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1, r.stderr
    assert errors[0].startswith("error: b-over: server-side dry-run: ") and "must be less than or equal to memory limit" in errors[0], errors


def deployed_variant():
    return kubectl("get", "ns", "ingress-bench", "-o", "jsonpath={.metadata.annotations.ingress-bench/variant}").stdout


def pod_uids(component):
    pods = json.loads(kubectl("-n", "ingress-bench", "get", "pods", "-l", f"app.kubernetes.io/component={component}", "-o", "json").stdout)
    return sorted(p["metadata"]["uid"] for p in pods["items"] if not p["metadata"].get("deletionTimestamp"))


@pytest.mark.unmonitored
def test_deploy_applies_only_what_changed():
    """The same overlay again applies nothing; a scale since (bench:change's, not undone) is
    undone by the next deploy; a switch to an overlay with the same backends replaces the
    ingress only, the backends' pods running on, relabelled as the new overlay's."""
    def deploy(variant):
        r = sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": variant, "MONITORING": "0"})
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() and http_ok(r.stdout.strip()), r.stdout
        return r.stderr

    deploy("nginx-lb-full")
    backends, ingress = pod_uids("backend"), pod_uids("ingress")
    assert backends and len(ingress) == 1, (backends, ingress)
    assert "deployed already, ready" in deploy("nginx-lb-full")
    assert (pod_uids("backend"), pod_uids("ingress")) == (backends, ingress)
    n = len(backends)
    assert kubectl("-n", "ingress-bench", "scale", "deployment/backend", f"--replicas={n + 1}").returncode == 0
    err = deploy("nginx-lb-full")
    assert "deployed already" not in err, err
    replicas = kubectl("-n", "ingress-bench", "get", "deployment/backend", "-o", "jsonpath={.spec.replicas}/{.status.readyReplicas}").stdout
    assert replicas == f"{n}/{n}", replicas
    backends = pod_uids("backend")
    err = deploy("nginx-lb-default")
    removed = re.search(r"removing overlay nginx-lb-full: (\d+) objects nginx-lb-default does not take over \(([^)]*)\)", err)
    assert removed and int(removed[1]) == len(removed[2].split()) and "deployment/nginx-lb" in removed[2].split() and "deployment/backend" not in removed[2].split(), err
    assert pod_uids("backend") == backends and pod_uids("ingress") != ingress
    labels = kubectl("-n", "ingress-bench", "get", "deployment/backend", "-o", "jsonpath={.metadata.labels.ingress-bench/variant}").stdout
    assert labels == "nginx-lb-default"


def http_ok(addr):
    req = urllib.request.Request(f"http://{addr}/1kb.bin", headers={"Host": "bench.ingress.test"})
    with urlopen(req, timeout=5) as r:
        return r.status == 200 and len(r.read()) == 1024


def test_unknown_overlay_is_refused_before_anything_is_applied():
    before = deployed_variant()
    err = one_error(sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": "seed999-nope"}))
    assert "unknown overlay 'seed999-nope'" in err and "nginx-lb-default" in err
    assert deployed_variant() == before


@pytest.mark.parametrize("variant, image", [("nginx-inc-default", "docker.io/nginx/nginx-ingress:5.6.1"),
                                            ("nginx-gateway-fabric-default", "ghcr.io/nginx/nginx-gateway-fabric:2.4.0")])
def test_overlay_whose_image_is_not_local_is_refused_before_apply(variant, image):
    before = deployed_variant()
    err = one_error(sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": variant, "MONITORING": "0"}))
    assert f"image {image}" in err and "not on the local node" in err
    assert deployed_variant() == before


def test_a_users_cluster_without_nginx_gateway_fabrics_crds_is_one_line():
    """Its CRDs are the cluster owner's to install: this cluster, taken as a user's, has Gateway
    API's (ours, applied first) and not NGINX Gateway Fabric's. Nothing is applied."""
    assert sh("bash", "-c", ". bench/lib.sh && gateway_crds_up", env={"KUBECONFIG": KUBECONFIG}).returncode == 0
    before = deployed_variant(), kubectl("get", "gatewayclass,clusterrole", "-o", "name").stdout
    err = one_error(sh("bash", "bench/platforms/deploy.sh", env={
        "PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG, "IMAGE_SET": "upstream",
        "VARIANT": "nginx-gateway-fabric-default", "MONITORING": "0"}))
    assert err == "error: the cluster has no NGINX Gateway Fabric CRDs: install those of release 2.4.0 (its deploy/crds.yaml), then re-run", err
    assert (deployed_variant(), kubectl("get", "gatewayclass,clusterrole", "-o", "name").stdout) == before


def test_external_platform_needs_the_opt_in():
    err = one_error(sh("bash", "bench/platforms/deploy.sh", env={"PLATFORM": "external", "KUBECONFIG": KUBECONFIG}))
    assert "ALLOW_EXTERNAL_CLUSTER=1" in err


@pytest.mark.unmonitored
def test_deploy_that_never_becomes_ready_names_the_reason():
    """A knob value nginx rejects: the LB crash-loops; deploy gives up after DEPLOY_TIMEOUT
    with the pod's own reason."""
    comp = ROOT / "kustomize/components/tuning-test-broken"
    overlay = ROOT / "overlays/test-broken"
    try:
        comp.mkdir()
        (comp / "nginx.env").write_text("WORKER_CONNECTIONS=lots\n")
        (comp / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nconfigMapGenerator:\n"
            "  - name: nginx-lb-knobs\n    behavior: merge\n    envs: [nginx.env]\n")
        overlay.mkdir()
        (overlay / "kustomization.yaml").write_text(
            "resources: [../../kustomize/base]\ncomponents:\n  - ../../kustomize/components/nginx-lb\n"
            "  - ../../kustomize/components/tuning-test-broken\n  - ../../kustomize/components/images\n")
        err = one_error(sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": "test-broken", "DEPLOY_TIMEOUT": "15", "MONITORING": "0"}, timeout=120))
        assert "deployment.apps/nginx-lb not ready after 15s" in err
        assert any(reason in err for reason in ("CrashLoopBackOff", "Error")), err
    finally:
        shutil.rmtree(comp, ignore_errors=True)
        shutil.rmtree(overlay, ignore_errors=True)


@pytest.mark.takes_the_cluster_down
def test_cluster_not_up_is_one_line():
    assert sh("bash", "bench/platforms/local/cluster.sh", "down").returncode == 0
    err = one_error(sh("bash", "bench/platforms/deploy.sh"))
    assert "the local cluster is not up: run './task cluster:up'" in err
    assert sh("bash", "bench/platforms/local/cluster.sh", "status").returncode == 1
