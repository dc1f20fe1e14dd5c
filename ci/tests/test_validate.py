"""Offline validation (bench/validate/validate.sh): every overlay in overlays/ passes, and each kind of
broken overlay stops it with one line naming the overlay and the reason. The broken overlays
are built in a temporary OVERLAYS_DIR on top of the real kustomize/base."""
import os

import pytest

from conftest import ROOT, sh

OVERLAYS = sorted(p.name for p in (ROOT / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
CONTROLLER_OVERLAYS = ["nginx-inc-default", "nginx-inc-full",
                       "ingress-nginx-default", "ingress-nginx-keepalive"]


# No server-side dry-run by default: these run in the lab's stream, and the dry-run applies
# namespaces and CRDs to the local cluster, which is the cluster stream's and mid-deploy. The
# dry-run is test_cluster_overlays.py's, on the cluster that stream owns (dry_run="auto").
def validate(overlays_dir, dry_run="0"):
    return sh("bash", "bench/validate/validate.sh", env={"VALIDATE_DRY_RUN": dry_run, "OVERLAYS_DIR": str(overlays_dir)}, timeout=600)


def overlay(root, name, kustomization, files=None):
    """A temporary overlay ROOT/NAME on the real base, with FILES {name: text} beside it;
    '{base}' in the text is the base's path relative to it (kustomize refuses absolute paths
    to directories)."""
    d = root / name
    d.mkdir(parents=True)
    base = os.path.relpath(ROOT / "kustomize/base", d)
    # Like every real overlay, the pins of the images component last.
    images = os.path.relpath(ROOT / "kustomize/components/images", d)
    (d / "kustomization.yaml").write_text(kustomization.replace("{base}", base) + f"components: [{images}]\n")
    for filename, text in (files or {}).items():
        (d / filename).write_text(text)
    return d


# An overlay that adds one local Deployment, labelled like the project's objects.
WITH_WEB = """resources: [{base}, web.yaml]
labels:
  - pairs: {app.kubernetes.io/part-of: ingress-bench}
    includeSelectors: false
"""


def web(image="docker.io/library/nginx:1.22.1", resources="{requests: {memory: 8Mi}, limits: {memory: 8Mi}}",
        extra=""):
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {image}
          resources: {resources}{extra}
"""


def test_the_controller_overlays_exist():
    assert set(CONTROLLER_OVERLAYS) <= set(OVERLAYS)


def test_every_overlay_validates():
    """Every overlay of overlays/, its own line each (a failure names its overlay: below)."""
    r = validate(ROOT / "overlays")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("validate") and "objects ok (k8s 1.33, 1.34" in l]
    assert sorted(l.split()[1].rstrip(":") for l in lines) == OVERLAYS, r.stderr


def test_only_directories_with_a_kustomization_are_overlays(tmp_path):
    (tmp_path / "notes").mkdir()
    overlay(tmp_path, "good", WITH_WEB, {"web.yaml": web()})
    r = validate(tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("validate") and "objects ok" in l]
    assert len(lines) == 1 and "good: 5 objects ok (k8s 1.33, 1.34" in lines[0], r.stderr


def test_no_overlay_at_all_is_an_error(tmp_path):
    r = validate(tmp_path)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1] == f"error: no overlay (a directory with a kustomization.yaml) in {tmp_path}"


def test_a_dry_run_setting_it_does_not_know_is_one_line(tmp_path):
    r = validate(tmp_path, dry_run="yes")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["error: VALIDATE_DRY_RUN must be auto or 0, not 'yes'"]


BROKEN = {
    # name: (kustomization, files, the error line after "error: <name>: ")
    "does-not-build": ("resources: [{base}, missing.yaml]\n", {},
                       "kustomize build: accumulating resources: accumulation err='accumulating resources from 'missing.yaml'"),
    "unknown-field": (WITH_WEB, {"web.yaml": web(extra="\n          imagePullPolicyy: Always")},
                      "kubeconform (Kubernetes 1.33.0): Deployment web is invalid: at '/spec/template/spec/containers/0':"
                      " additional properties 'imagePullPolicyy' not allowed"),
    "latest-tag": (WITH_WEB, {"web.yaml": web(image="docker.io/library/busybox:latest")},
                   "Deployment/web: container web: image 'docker.io/library/busybox:latest' uses the tag latest: pin a version"),
    "no-tag": (WITH_WEB, {"web.yaml": web(image="docker.io/library/nginx")},
               "Deployment/web: container web: image 'docker.io/library/nginx' has no tag: pin a version"),
    "not-overridable": (WITH_WEB, {"web.yaml": web(image="quay.io/example/web:1.0")},
                        "Deployment/web: container web: image 'quay.io/example/web' is in no images: list of the"
                        " overlay's kustomizations, so it cannot be overridden in one place"),
    "no-resources": (WITH_WEB, {"web.yaml": web(resources="{}")},
                     "Deployment/web: container web: resources.requests must be set (memory at least)"),
    "no-memory-limit": (WITH_WEB, {"web.yaml": web(resources="{requests: {memory: 8Mi}, limits: {cpu: 100m}}")},
                        "Deployment/web: container web: resources.limits must be set (memory at least)"),
    "missing-part-of": ("resources: [{base}, extra.yaml]\n",
                        {"extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"},
                        "ConfigMap/extra: label app.kubernetes.io/part-of: ingress-bench is missing"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_broken_overlay_stops_validation_with_one_line(name, tmp_path):
    kustomization, files, reason = BROKEN[name]
    overlay(tmp_path, name, kustomization, files)
    overlay(tmp_path, "zz-good", WITH_WEB, {"web.yaml": web()})  # sorted after: never reached
    r = validate(tmp_path)
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {name}: {reason}"), r.stderr
    assert "\n" not in errors[0] and "zz-good" not in r.stderr
