"""What bench:change (bench/run/change.py) does to an ingress the user runs (INGRESS_PODS) on
the user's cluster: the workload that owns its pods restarted, one of its backends' pods
deleted, or a route added to it, beside an in-cluster load; the marks as change_actions.py
records them."""
import json
import subprocess
import threading
import time

import matrix as mx
from change_actions import NS, WAIT_S, Cluster, now_ms, wait_until
from report.run import profile

# CHANGE=route's objects, in the namespace of ours: a route of ROUTE_PARENT's kind for
# ROUTE_HOST to a Service whose EndpointSlice holds the addresses of BACKEND_PODS (so nothing
# is made in the backends' namespace: no ReferenceGrant, no Service of theirs).
ROUTE = "route-added"
ROUTE_LABELS = {"app.kubernetes.io/part-of": "ingress-bench", "app.kubernetes.io/component": ROUTE}
ROUTE_HOST = mx.default_of("ROUTE_HOST")
# An HTTPRoute's answers carry this header (a filter every Gateway API implementation has), so
# its first is told from a route that already serves every host; an Ingress's, by its 200.
ROUTE_HEADER = ("X-Bench-Route", "added")
ROUTE_PROBE_S = 0.02  # the probe's pause between its requests


class Yours:
    """An ingress the user runs and its backends, on the user's cluster (INGRESS_PODS and
    BACKEND_PODS: NAMESPACE/SELECTOR or NAMESPACE/service/NAME): the workload that owns each
    side's pods (a Deployment, DaemonSet or StatefulSet), found before the load, restarted
    (rollout) or one of its pods deleted (kill-backend) through the user's KUBECONFIG; nothing
    else of theirs is touched, and nothing is restored: their controllers bring it back."""
    def __init__(self, env, ingress, backends=None, route_parent=None):
        self.env = env
        self.host = env.get("ROUTE_HOST") or ROUTE_HOST  # the added route's host name
        self.sides = {"ingress": self.workload("INGRESS_PODS", ingress)}
        if backends:
            self.sides["backend"] = self.workload("BACKEND_PODS", backends)
        self.parent = route_parent and self.route_parent(route_parent)
        self.probe = None

    def kubectl(self, ns, *args, timeout=60, input_=None):
        r = subprocess.run(["kubectl", "-n", ns, *args], env=self.env, capture_output=True, text=True, timeout=timeout, input=input_)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        return r.stdout

    def workload(self, setting, spec):
        """{ns, selector, kind, name}: SPEC's pods and the workload that owns them, or bad input."""
        ns, sel = spec.split("/", 1)
        if sel.startswith("service/"):
            svc = json.loads(self.kubectl(ns, "get", "service", sel.removeprefix("service/"), "-o", "json"))
            sel = ",".join(f"{k}={v}" for k, v in (svc["spec"].get("selector") or {}).items())
        w = {"ns": ns, "selector": sel, "spec": spec.split("/", 1)[1]}
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

    def ready(self, w, pods=None):
        """The names of W's ready pods (of PODS, W's live ones, when given)."""
        return [p["metadata"]["name"] for p in (self.live(w) if pods is None else pods)
                if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions") or [])]

    def said(self, kind):
        if kind == "route":
            return f"{self.parent['said']} for host {self.host} to the pods of BACKEND_PODS"
        w = self.sides["ingress" if kind == "rollout" else "backend"]
        return f"{w['kind']} {w['ns']}/{w['name']}"

    def route_parent(self, spec):
        """ROUTE_PARENT, ingressclass/NAME or gateway/NAMESPACE/NAME, as it is on the cluster:
        {kind, name, ns, said}, or bad input."""
        kind, _, rest = spec.partition("/")
        ns, _, name = rest.rpartition("/")
        args = ["get", "ingressclass" if kind == "ingressclass" else "gateway", name, "-o", "name"]
        r = subprocess.run(["kubectl", *(["-n", ns] if ns else []), *args], env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            where = f" in namespace {ns}" if ns else ""
            raise mx.Bad(f"ROUTE_PARENT={spec}: no {'IngressClass' if kind == 'ingressclass' else 'Gateway'} {name}{where} on the cluster")
        return {"kind": kind, "name": name, "ns": ns, "said": f"an {'Ingress of class' if kind == 'ingressclass' else 'HTTPRoute on Gateway'} {rest}"}

    def route_objects(self):
        """CHANGE=route's objects: the Service, its EndpointSlice (the backends' ready pods, on
        the port their Service sends to, or their first container port), and the route."""
        w = self.sides["backend"]
        live = self.live(w)
        pods = [p for p in live if p["metadata"]["name"] in self.ready(w, live) and p["status"].get("podIP")]
        port = self.backend_port(w, pods[0])
        meta = {"name": ROUTE, "namespace": NS, "labels": ROUTE_LABELS}
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}}
        eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
               "metadata": dict(meta, labels=dict(ROUTE_LABELS, **{"kubernetes.io/service-name": ROUTE,
                                                                   "endpointslice.kubernetes.io/managed-by": "ingress-bench"})),
               "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
               "endpoints": [{"addresses": [p["status"]["podIP"]], "conditions": {"ready": True}} for p in pods]}
        if self.parent["kind"] == "ingressclass":
            route = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
                     "spec": {"ingressClassName": self.parent["name"], "rules": [{"host": self.host, "http": {"paths": [
                         {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": ROUTE, "port": {"number": 80}}}}]}}]}}
        else:
            route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": meta,
                     "spec": {"parentRefs": [{"name": self.parent["name"], "namespace": self.parent["ns"]}], "hostnames": [self.host],
                              "rules": [{"backendRefs": [{"name": ROUTE, "port": 80}], "filters": [{
                                  "type": "ResponseHeaderModifier",
                                  "responseHeaderModifier": {"add": [{"name": ROUTE_HEADER[0], "value": ROUTE_HEADER[1]}]}}]}]}}
        return [svc, eps, route]

    def backend_port(self, w, pod):
        """The port BACKEND_PODS' Service sends to (by number, or its name among the pod's
        container ports), or the pod's first container port."""
        ports = [p for c in pod["spec"]["containers"] for p in c.get("ports") or []]
        target = None
        if w["spec"].startswith("service/"):
            svc = json.loads(self.kubectl(w["ns"], "get", "service", w["spec"].removeprefix("service/"), "-o", "json"))
            target = svc["spec"]["ports"][0].get("targetPort", svc["spec"]["ports"][0]["port"])
        if isinstance(target, int):
            return target
        port = next((p["containerPort"] for p in ports if target is None or p.get("name") == target), None)
        if port is None:
            raise mx.Bad(f"BACKEND_PODS={w['ns']}/{w['spec']}: no container port {target or ''} on its pods to route to".replace("  ", " "))
        return port

    def probe_start(self, path):
        """A pod of the runners' image that GETs TARGET's PATH with Host ROUTE_HOST, each on a
        connection of its own, every ROUTE_PROBE_S until it answers 200 (k6/probe/route.js):
        its lines ({t, status} at each new status) gathered as they come."""
        image = mx.shell("k6_image", env=self.env).stdout.strip()
        url = self.env["TARGET"].rstrip("/") + path
        self.probe = {"lines": [], "name": f"route-probe-{time.time_ns() % 10**9}"}
        proc = subprocess.Popen(
            ["kubectl", "-n", NS, "run", self.probe["name"], f"--image={image}", "--restart=Never", "--rm", "-i", "--quiet",
             f"--labels=app.kubernetes.io/part-of=ingress-bench,app.kubernetes.io/component={ROUTE}-probe",
             "--env=IB_ROUTE=" + json.dumps({"url": url, "host": self.host, "every_s": ROUTE_PROBE_S, "for_s": WAIT_S,
                                             "header": ROUTE_HEADER if self.parent["kind"] == "gateway" else None}),
             "--command", "--", "sh", "-c", "k6 run --quiet --no-color --log-format=raw - && sleep 1"],
            env=self.env, stdin=open(mx.ROOT / "k6/probe/route.js"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.probe["proc"] = proc

        def read():
            for line in proc.stdout:
                if line.startswith("@@route "):
                    self.probe["lines"].append(json.loads(line[len("@@route "):]))
        threading.Thread(target=read, daemon=True).start()

    def route_change(self, marks):
        """The route added once the probe has its first answer (not the added route's: an
        Ingress's ROUTE_HOST must not be served yet); ended at the added route's first answer
        (the pod's clock)."""
        lines = self.probe["lines"]
        wait_until(lambda: lines or self.probe["proc"].poll() is not None, "the route probe's first answer", timeout=60, every=0.05)
        if not lines:
            raise RuntimeError(f"the route probe's pod {self.probe['name']} gave no answer")
        if lines[0]["added"]:
            raise RuntimeError(f"the ingress already serves host {self.host} (200 before the route was added): "
                               "set ROUTE_HOST to one it does not serve")
        objects = self.route_objects()
        marks["start"] = now_ms()
        self.kubectl(NS, "apply", "-f", "-", input_=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        wait_until(lambda: any(x["added"] for x in lines) or self.probe["proc"].poll() is not None,
                   "the added route's first answer", every=0.05)
        first = next((x for x in lines if x["added"]), None)
        if first is None:
            raise RuntimeError(f"the added route did not answer within {WAIT_S} s (the last status: {lines[-1]['status']})")
        marks["serving"] = marks["end"] = max(first["t"], marks["start"])
        marks["probe"] = {"answers": lines, "every_s": ROUTE_PROBE_S}

    def restore(self, kind):
        """CHANGE=route's objects and its probe removed (the rest is the user's controllers')."""
        if kind != "route":
            return
        if self.probe and self.probe["proc"].poll() is None:
            self.probe["proc"].terminate()
        subprocess.run(["kubectl", "-n", NS, "delete", "ingress,httproute,service,endpointslice,pod", "-l",
                        f"app.kubernetes.io/component in ({ROUTE},{ROUTE}-probe)", "--ignore-not-found", "--wait=false"],
                       env=self.env, capture_output=True, timeout=60)

    def change(self, kind, marks):
        if kind == "rollout":  # the ingress's workload restarted, until its rollout is complete
            w = self.sides["ingress"]
            marks["start"] = now_ms()
            self.kubectl(w["ns"], "rollout", "restart", f"{w['kind']}/{w['name']}")
            self.kubectl(w["ns"], "rollout", "status", f"{w['kind']}/{w['name']}", f"--timeout={WAIT_S}s", timeout=WAIT_S + 10)
            marks["end"] = now_ms()
        elif kind == "route":
            self.route_change(marks)
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
        if kind == "route":  # its probe answering by the change, on the load's path
            c.probe_start(f"/{c.env.get('PAYLOAD') or profile('rps')['payload']}.bin")
        time.sleep(1 + at_s)
        if kind != "none":
            c.change(kind, marks)
    except Exception as e:  # noqa: BLE001  (said by the main thread, after the run)
        failures.append(f"the change ({kind}) did not complete: {e}")
