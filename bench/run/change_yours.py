"""What bench:change (bench/run/change.py) does to an ingress the user runs (INGRESS_PODS) on
the user's cluster: the workload that owns its pods restarted, or one of its backends' pods
deleted, beside an in-cluster load; the marks as change_actions.py records them."""
import json
import subprocess
import time

import matrix as mx
from change_actions import NS, WAIT_S, Cluster, now_ms, wait_until


class Yours:
    """An ingress the user runs and its backends, on the user's cluster (INGRESS_PODS and
    BACKEND_PODS: NAMESPACE/SELECTOR or NAMESPACE/service/NAME): the workload that owns each
    side's pods (a Deployment, DaemonSet or StatefulSet), found before the load, restarted
    (rollout) or one of its pods deleted (kill-backend) through the user's KUBECONFIG; nothing
    else of theirs is touched, and nothing is restored: their controllers bring it back."""
    def __init__(self, env, ingress, backends=None):
        self.env = env
        self.sides = {"ingress": self.workload("INGRESS_PODS", ingress)}
        if backends:
            self.sides["backend"] = self.workload("BACKEND_PODS", backends)

    def kubectl(self, ns, *args, timeout=60):
        r = subprocess.run(["kubectl", "-n", ns, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        return r.stdout

    def workload(self, setting, spec):
        """{ns, selector, kind, name}: SPEC's pods and the workload that owns them, or bad input."""
        ns, sel = spec.split("/", 1)
        if sel.startswith("service/"):
            svc = json.loads(self.kubectl(ns, "get", "service", sel.removeprefix("service/"), "-o", "json"))
            sel = ",".join(f"{k}={v}" for k, v in (svc["spec"].get("selector") or {}).items())
        w = {"ns": ns, "selector": sel}
        pods = self.live(w)
        if not pods:
            raise mx.Bad(f"{setting}={spec}: no running pod")
        owner = next(iter(pods[0]["metadata"].get("ownerReferences") or []), {})
        if owner.get("kind") == "ReplicaSet":
            rs = json.loads(self.kubectl(ns, "get", "replicaset", owner["name"], "-o", "json"))
            owner = next(iter(rs["metadata"].get("ownerReferences") or []), {})
        if owner.get("kind") not in ("Deployment", "DaemonSet", "StatefulSet"):
            raise mx.Bad(f"{setting}={spec}: its pods are not a Deployment's, a DaemonSet's or a StatefulSet's, which a change restarts or recreates")
        return dict(w, kind=owner["kind"].lower(), name=owner["name"])

    def live(self, w):
        """W's pods not being deleted."""
        pods = json.loads(self.kubectl(w["ns"], "get", "pods", "-l", w["selector"], "-o", "json"))["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def ready(self, w):
        return [p["metadata"]["name"] for p in self.live(w)
                if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions") or [])]

    def said(self, kind):
        w = self.sides["ingress" if kind == "rollout" else "backend"]
        return f"{w['kind']} {w['ns']}/{w['name']}"

    def change(self, kind, marks):
        if kind == "rollout":  # the ingress's workload restarted, until its rollout is complete
            w = self.sides["ingress"]
            marks["start"] = now_ms()
            self.kubectl(w["ns"], "rollout", "restart", f"{w['kind']}/{w['name']}")
            self.kubectl(w["ns"], "rollout", "status", f"{w['kind']}/{w['name']}", f"--timeout={WAIT_S}s", timeout=WAIT_S + 10)
            marks["end"] = now_ms()
        elif kind == "kill-backend":  # one backend pod deleted, until as many are ready again
            w = self.sides["backend"]
            before = self.ready(w)
            victim = before[0]
            marks["start"] = now_ms()
            self.kubectl(w["ns"], "delete", "pod", victim, "--wait=false")
            marks["end"] = wait_until(lambda: victim not in self.live_names(w) and len(self.ready(w)) >= len(before),
                                      f"the {self.said(kind)} whole again")

    def running(self, testid):
        """The runners of the run TESTID (their Job, bench/run/distributed.sh) are running."""
        pods = json.loads(self.kubectl(NS, "get", "pods", "-l", f"job-name=k6-{testid}", "-o", "json"))["items"]
        return bool(pods) and all(p.get("status", {}).get("phase") == "Running" for p in pods)

    def live_names(self, w):
        return [p["metadata"]["name"] for p in self.live(w)]

    def events(self, since_ms):
        """The events of the sides' namespaces from SINCE_MS on (Cluster.events' reading)."""
        seen = [e for ns in sorted({w["ns"] for w in self.sides.values()}) for e in Cluster(self.env, None, ns=ns).events(since_ms)]
        return sorted(seen, key=lambda x: x["unix_ms"])


def changer(kind, c, run_dir, at_s, marks, failures):
    """change_actions.changer on a user's cluster: k6 has started once its runners' pods run,
    and a second more for k6 to start in them; then CHANGE_AT."""
    try:
        wait_until(lambda: c.running(run_dir.name), "k6's pods running", timeout=600, every=0.2)
        time.sleep(1 + at_s)
        if kind != "none":
            c.change(kind, marks)
    except Exception as e:  # noqa: BLE001  (said by the main thread, after the run)
        failures.append(f"the change ({kind}) did not complete: {e}")
