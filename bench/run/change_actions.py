"""What bench:change (bench/run/change.py) does to what it runs: each change kind on the local
cluster (Cluster: kubectl) or the bare-metal lab (Lab: bench/platforms/lab.sh), the marks it
observes (unix ms: start, the moment the change took, end), and the restore after the run, so
the next run meets the variant as deployed."""
import copy
import http.client
import json
import re
import subprocess
import threading
import time
from datetime import datetime
from functools import cache
from pathlib import Path

import yaml

import matrix as mx

NS = "ingress-bench"
INGRESS = "nginx-lb"  # the in-cluster ingress whose configuration lb.sh reloads
# CHANGE=route, on either kind of ingress in one update (an nginx-lb reload with the template's
# ROUTE_* knobs; the Gateway's HTTPRoute applied changed): a route added, an exact path to the payload
# the load asks for, and the load's own route edited to add a response header. ROUTE_PROBE:
# the edit's probes ask for the load's payload under another query, which the ingress's count
# of the load's path leaves out.
ROUTE_ADDED, ROUTE_TO, ROUTE_HEADER, ROUTE_PROBE = "/route-added", "/1kb.bin", ("X-Bench-Route", "edited"), "?route-probe"
ROUTE_KNOBS = f"ROUTE_ADDED={ROUTE_ADDED}\nROUTE_ADDED_TO={ROUTE_TO}\nROUTE_EDIT={ROUTE_HEADER[1]}\n"
WAIT_S = 120  # a change's longest wait for the cluster to settle
# The lab's stopped backend stays down this long: a process restart's gap, long enough that the
# load (thousands of requests a second) meets it and the LB's handling of a dead upstream shows.
BACKEND_DOWN_S = 1


def now_ms():
    return int(time.time() * 1000)


class Cluster:
    """The local cluster: what a change acts on and observes, through kubectl."""
    def __init__(self, env, knobs, route=None, ns=NS):
        self.env = env
        self.knobs = knobs  # {variant: its nginx-lb knobs as KEY=VALUE lines}: what reload() renders
        self.route = route  # a Gateway API variant's HTTPRoute as built, or None (an nginx-lb)
        self.ns = ns

    def kubectl(self, *args, stdin=None, timeout=60):
        r = subprocess.run(["kubectl", "-n", self.ns, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        return r.stdout

    def json(self, *args):
        return json.loads(self.kubectl(*args, "-o", "json"))

    def deployment_done(self, name):
        d = self.json("get", "deployment", name)
        want, s = d["spec"]["replicas"], d.get("status", {})
        return (s.get("observedGeneration", 0) >= d["metadata"]["generation"] and s.get("updatedReplicas", 0) == want
                and s.get("readyReplicas", 0) == want and s.get("replicas", 0) == want)

    def ready_endpoints(self, service):
        slices = self.json("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}")["items"]
        return sum(1 for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready"))

    def live(self, name):
        """NAME's pods not being deleted."""
        return [p for p in self.json("get", "pods", "-l", f"app.kubernetes.io/name={name}")["items"] if not p["metadata"].get("deletionTimestamp")]

    def pods(self, name):
        return [p["metadata"]["name"] for p in self.live(name)]

    def unschedulable(self, name):
        """The scheduler's message for a pod of NAME it cannot place, or None."""
        for p in self.json("get", "pods", "-l", f"app.kubernetes.io/name={name}")["items"]:
            for cond in p.get("status", {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                    return cond.get("message", "Unschedulable")
        return None

    def ready_ips(self, service):
        """The addresses of SERVICE's ready endpoints."""
        slices = self.json("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}")["items"]
        return {a for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") for a in e["addresses"]}

    def node_ready(self, node):
        n = json.loads(self.kubectl("get", "node", node, "-o", "json"))
        return any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])

    def lost(self, action, i):
        """Node I lost to the cluster (stop) or back (start): cluster.sh node-stop|node-start."""
        r = subprocess.run(["bash", str(mx.ROOT / "bench/platforms/local/cluster.sh"), f"node-{action}", str(i)],
                           env=self.env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(mx.error_line(r.stderr))

    def backends_nodes(self):
        """The numbers of the nodes that hold the backends' role alone (nodes.sh)."""
        nodes = self.json("get", "nodes", "-l", "ingress-bench/role-backends=true,!ingress-bench/role-client")["items"]
        return [n["metadata"]["name"].rsplit("-", 1)[1] for n in nodes]

    def pod_ips(self, name):
        return {p["status"]["podIP"] for p in self.live(name) if p.get("status", {}).get("podIP")}

    def address(self):
        """The ingress Service's address: nginx-lb's, or the Gateway's proxies' (their role label)."""
        if not self.route:
            return self.kubectl("get", "service", INGRESS, "-o", "jsonpath={.spec.clusterIP}").strip()
        return self.kubectl("get", "service", "-l", "ingress-bench/role=ingress", "-o", "jsonpath={.items[*].spec.clusterIP}").split()[0]

    def envoy_counts(self):
        """(the Gateway's proxy pod, {"requests": n, "2": n, "4": n, "5": n, ...}): what its
        gateway listeners' connection managers answered, by status class, from Envoy's own
        statistics, without its own listeners' (bench/lib/k6.sh ENVOY_OWN_STATS, the server
        count's filter). Envoy Gateway's access log is the container's stdout, which the
        kubelet rotates every few seconds at this rate: its statistics are the count."""
        pods = [p for p in self.json("get", "pods", "-l", "ingress-bench/role=ingress")["items"]
                if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("podIP")]
        if len(pods) != 1:
            return None, None
        own = mx.envoy_own()
        r = subprocess.run(["curl", "-sf", "--max-time", "3", f"http://{pods[0]['status']['podIP']}:19001/stats/prometheus"],
                           capture_output=True, text=True)
        out = {"requests": 0}
        for line in r.stdout.splitlines():
            if own.search(line):
                continue
            if line.startswith("envoy_http_downstream_rq_total{"):
                out["requests"] += int(float(line.split()[-1]))
            elif m := re.match(r'envoy_http_downstream_rq_xx\{.*envoy_response_code_class="(\d)"', line):
                out[m[1]] = out.get(m[1], 0) + int(float(line.split()[-1]))
        return pods[0]["metadata"]["name"], out

    def apply_route(self, route):
        """ROUTE applied as deploy applies the overlay (kubectl apply): the controller sees one update."""
        self.kubectl("apply", "-f", "-", stdin=json.dumps(route))

    def access_log(self):
        """(ingress pod, its access log's lines): the server's count of what it answered."""
        pod = self.pods(INGRESS)
        if len(pod) != 1:
            return None, None
        out = self.kubectl("exec", pod[0], "-c", "nginx", "--", "sh", "-c", "cat /run/lb/logs/access.log 2>/dev/null || true", timeout=30)
        return pod[0], out.splitlines()

    def events(self, since_ms):
        """The namespace's Kubernetes events from SINCE_MS on (unix ms of each; most of them, the
        kubelet's and the controllers', carry whole seconds only, so one a second before counts)."""
        out = []
        for e in self.json("get", "events")["items"]:
            when = e.get("eventTime") or e.get("lastTimestamp") or e.get("firstTimestamp")
            if not when:
                continue
            ms = int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000)
            if ms >= since_ms - 1000:
                o = e.get("involvedObject") or {}
                out.append({"unix_ms": ms, "reason": e.get("reason", ""), "object": f"{o.get('kind')}/{o.get('name')}",
                            "message": (e.get("message") or "")[:160]})
        return sorted(out, key=lambda x: x["unix_ms"])

    def reload(self, variant, gen, extra=""):
        self.kubectl("exec", "-i", f"deployment/{INGRESS}", "-c", "nginx", "--", "sh", "/etc/lb/template/lb.sh", "reload", gen,
                     stdin=self.knobs[variant] + extra)


class Lab:
    """The bare-metal lab: its script (bench/platforms/lab.sh) acts; its files are observed."""
    def __init__(self, env):
        self.env = env
        self.prefix = Path(self.lab("lb-prefix").strip())  # the LB's nginx prefix

    def lab(self, *args, variant=None):
        r = subprocess.run(["bash", str(mx.ROOT / "bench/platforms/lab.sh"), *args], env=dict(self.env, VARIANT=variant or self.env.get("VARIANT", "")),
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"lab.sh {' '.join(args)}: {mx.error_line(r.stderr + r.stdout)}")
        return r.stdout

    def address(self):
        return lab_env()["LAB_LB_IP"]

    def backends(self):
        return int((self.prefix.parent / "shape").read_text().split()[0])

    def access_log(self):
        """(the LB's master pid, its access log's lines): a reload keeps the master, and its log."""
        try:
            return (self.prefix / "logs/nginx.pid").read_text().strip(), (self.prefix / "logs/access.log").read_text().splitlines()
        except FileNotFoundError:
            return None, None

    def reload(self, variant, gen, extra=""):
        self.lab("reload", gen, *extra.split(), variant=variant)

    def events(self, since_ms):
        return []  # the lab script's return is its only record


class Unplaceable(Exception):
    """A change that cannot complete on this cluster, whatever the wait."""


def wait_until(test, what, timeout=WAIT_S, every=0.1):
    """Unix ms of the first time TEST() holds; RuntimeError after TIMEOUT seconds."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            if test():
                return now_ms()
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError):
            pass  # the API busy for a moment: asked again
        time.sleep(every)
    raise RuntimeError(f"{what}: not within {timeout} s")


def stub_requests(ip):
    """A backend's stub_status request count (each reading counts itself), or None."""
    r = subprocess.run(["curl", "-sf", "--max-time", "1", f"http://{ip}/stub_status"], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    return int(lines[2].split()[2]) if r.returncode == 0 and len(lines) > 2 else None


def all_served(ips, polls):
    """True when every pod of IPS has served a request that was not one of our readings."""
    done = True
    for ip in ips:
        n = stub_requests(ip)
        polls[ip] = polls.get(ip, 0) + 1
        done = done and n is not None and n > polls[ip]
    return done


@cache
def lab_env():
    """The lab's addresses and ports (bench/platforms/lab.env, as bench/lib.sh sources it), read once:
    generation() is polled every 20 ms while a reload's end is awaited."""
    r = mx.shell('echo "$LAB_LB_IP $LAB_STATUS_PORT"')
    return dict(zip(("LAB_LB_IP", "LAB_STATUS_PORT"), r.stdout.split()))


def generation(addr):
    """The configuration the LB's status port (LAB_STATUS_PORT, the template's on every platform) answers with."""
    r = subprocess.run(["curl", "-sf", "--max-time", "1", f"http://{addr}:{lab_env()['LAB_STATUS_PORT']}/generation"],
                       capture_output=True, text=True)
    return r.stdout.strip()


def built(variant):
    """The overlay's objects by "Kind/name", as kustomize builds them."""
    r = mx.shell('kustomize build "$IB_ROOT/overlays/$1"', variant)
    if r.returncode != 0:
        raise mx.Bad(f"kustomize build of {variant} failed: {mx.error_line(r.stderr)}")
    return {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all(r.stdout) if d}


def knobs_in(objects):
    """The LB's knobs as KEY=VALUE lines (its nginx-lb-knobs ConfigMap, as lb.sh start reads
    them), or None when the overlay has no nginx-lb."""
    for name, doc in objects.items():
        if name.startswith("ConfigMap/nginx-lb-knobs"):
            return "".join(f"{k}={v}\n" for k, v in sorted(doc["data"].items()))
    return None


def lab_knobs(variant):
    """The lab's knobs for VARIANT (its knob files merged, later wins) as knobs_in() gives them."""
    r = mx.shell('files=$(variant_knob_files "$1") && cat $files', variant)
    if r.returncode != 0:
        raise mx.Bad(mx.error_line(r.stderr))
    knobs = dict(line.split("=", 1) for line in r.stdout.splitlines() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line))
    return "".join(f"{k}={v}\n" for k, v in sorted(knobs.items()))


def reload_into(c, variant, extra=""):
    """The running LB reloaded into VARIANT's knobs (and EXTRA's after them); returns the
    generation it answers then."""
    gen = str(int(generation(c.address()) or 0) + 1)
    c.reload(variant, gen, extra)
    return gen


def deployed(env, run_env, lab, knobs, route):
    """The variant deployed (the cluster or the lab up first), as bench.sh does, and what acts
    on it: (a Lab or a Cluster with KNOBS and ROUTE, the lab's backends or None)."""
    up = mx.shell('load_platform && pf_check rps && pf_up rps >/dev/null', env=run_env)
    if up.returncode != 0:
        raise mx.Bad(mx.error_line(up.stderr + up.stdout))
    if lab:
        c = Lab(run_env)
        return c, c.backends()
    return Cluster(dict(env, KUBECONFIG=mx.shell('echo "$IB_CLUSTER_KUBECONFIG"').stdout.strip()), knobs, route), None


def host_of(c):
    return c.env.get("HOST") or mx.registry()["HOST"]["default"]


def route_probe(addr, path, host):
    """One GET of PATH on a connection of its own (a reload's new workers, Envoy's new route
    table): (status or None, the edit's header or None)."""
    conn = http.client.HTTPConnection(addr, 80, timeout=1)
    try:
        conn.request("GET", path, headers={"Host": host})
        r = conn.getresponse()
        r.read()
        return r.status, r.getheader(ROUTE_HEADER[0])
    except OSError:
        return None, None
    finally:
        conn.close()


def route_changed(route):
    """The HTTPRoute as built, with CHANGE=route's change: its first rule (the load's) adds the
    header, and a rule for ROUTE_ADDED rewrites to ROUTE_TO on the same backends."""
    r = copy.deepcopy(route)
    first = r["spec"]["rules"][0]
    first.setdefault("filters", []).append({"type": "ResponseHeaderModifier", "responseHeaderModifier": {
        "add": [{"name": ROUTE_HEADER[0], "value": ROUTE_HEADER[1]}]}})
    r["spec"]["rules"].append({"matches": [{"path": {"type": "Exact", "value": ROUTE_ADDED}}],
                               "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": ROUTE_TO}}}],
                               "backendRefs": first["backendRefs"]})
    return r


def route_state(addr, host):
    """(the added route serves, the edit is in effect), as a new connection finds them."""
    added, _ = route_probe(addr, ROUTE_ADDED, host)
    status, header = route_probe(addr, ROUTE_TO + ROUTE_PROBE, host)
    return added == 200, status == 200 and header == ROUTE_HEADER[1]


def route_served(addr, host, marks, counts, failed):
    """Polls both probes until the added route answers 200 ("serving") and the load's route
    carries the header ("edited"): their marks, and COUNTS of every probe's status (the server
    counted them too). FAILED: the update's error, if it had one, ends the wait."""

    def both():
        if failed:
            raise Unplaceable(f"the update failed: {failed[0]}")
        for mark, path in (("serving", ROUTE_ADDED), ("edited", ROUTE_TO + ROUTE_PROBE)):
            if mark in marks:
                continue
            status, header = route_probe(addr, path, host)
            counts[str(status)] = counts.get(str(status), 0) + 1
            if status == 200 and (mark == "serving" or header == ROUTE_HEADER[1]):
                marks[mark] = now_ms()
        return "serving" in marks and "edited" in marks
    wait_until(both, "the added route serving and the edited one in effect", every=0.02)
    return max(marks["serving"], marks["edited"])


def change(kind, c, marks, reload_to, n):
    """Applies KIND, recording marks: start, end, and what it observed between (N: the backends)."""
    if kind == "reload":
        addr = c.address()
        marks["start"] = now_ms()
        gen = reload_into(c, reload_to)
        marks["end"] = marks["serving"] = wait_until(lambda: generation(addr) == gen, "the reloaded configuration answering", every=0.02)
    elif isinstance(c, Lab):  # kill-backend: a backend's process stopped, then started
        marks["start"] = now_ms()
        c.lab("backend", "stop", "1")
        marks["down"] = now_ms()
        time.sleep(BACKEND_DOWN_S)
        c.lab("backend", "start", "1")  # returns once it answers
        marks["end"] = now_ms()
    elif kind == "scale":
        marks["start"] = now_ms()
        marks["down"] = scale_down(c)
        before = c.pod_ips("backend")
        c.kubectl("scale", "deployment/backend", f"--replicas={n}")
        marks["end"] = wait_until(lambda: c.ready_endpoints("backend") == n and c.deployment_done("backend"),
                                  f"the backends back to {n} ready endpoints")
        # Serving: every new pod has had a request of the load (its own stub_status, beyond
        # our readings), not only a ready endpoint: an ingress that resolved the pods' addresses
        # once at its start never sends them one.
        new, polls = c.pod_ips("backend") - before, {}
        try:
            marks["serving"] = wait_until(lambda: all_served(new, polls), "the new backends serving", timeout=15, every=0.2)
            marks["read_from_load"] = ["serving"]
        except RuntimeError:
            marks["notes"] = {"not_serving": len([ip for ip in new if (stub_requests(ip) or 0) <= polls.get(ip, 0) + 1]), "new": len(new)}
    elif kind == "kill-backend":
        victim = c.pods("backend")[0]
        marks["start"] = now_ms()
        c.kubectl("delete", "pod", victim, "--wait=false")
        marks["end"] = wait_until(lambda: victim not in c.pods("backend") and c.deployment_done("backend"), "the backend Deployment whole again")
    elif kind == "kill-node":
        # The node of the first backend pod (a backends node of its own: NODES=3 or more), lost
        # until the cluster has moved its endpoints away, then back.
        pod = c.live("backend")[0]
        node = pod["spec"]["nodeName"]
        gone = {p["status"]["podIP"] for p in c.live("backend") if p["spec"].get("nodeName") == node and p["status"].get("podIP")}
        marks["start"] = now_ms()
        c.lost("stop", node.rsplit("-", 1)[1])
        marks["NotReady"] = wait_until(lambda: not c.node_ready(node), f"{node} NotReady")
        marks["moved"] = wait_until(lambda: not c.ready_ips("backend") & gone, f"{node}'s backend endpoints removed", every=0.1)
        c.lost("start", node.rsplit("-", 1)[1])
        marks["back"] = now_ms()
        marks["end"] = wait_until(lambda: c.node_ready(node) and c.deployment_done("backend") and c.ready_endpoints("backend") == n,
                                  f"{node} Ready and the backends whole again")
    elif kind == "rollout":
        marks["start"] = now_ms()
        c.kubectl("rollout", "restart", f"deployment/{INGRESS}")

        def rolled_out():
            why = c.unschedulable(INGRESS)
            if why and now_ms() - marks["start"] > 5000:
                raise Unplaceable(f"the new ingress pod cannot be scheduled ({why.strip()}): a rolling update places it beside the "
                                  "old one; give the ingress less CPU (INGRESS_CPU=500m) or run on a bigger node")
            return c.deployment_done(INGRESS)
        marks["end"] = wait_until(rolled_out, "the ingress rolled out")
    elif kind == "route":
        # The update in a thread of its own, the probes from its start: the first 200 is timed
        # from the request to change, not from when kubectl returned (0.4-0.9 s here).
        failed = []

        def update():
            try:
                if c.route:
                    c.apply_route(route_changed(c.route))
                else:
                    reload_into(c, reload_to, ROUTE_KNOBS)  # reload_to: VARIANT (RELOAD_TO is reload's)
                marks["applied"] = now_ms()
            except Exception as e:  # noqa: BLE001  (raised by the probes' loop, which stops on it)
                failed.append(e)
        t, addr = threading.Thread(target=update, daemon=True), c.address()
        marks["start"] = now_ms()
        t.start()
        marks["end"] = route_served(addr, host_of(c), marks, marks.setdefault("probes", {}), failed)
        t.join(timeout=WAIT_S)
    elif kind == "kill-ingress":
        victim = c.pods(INGRESS)[0]
        marks["start"] = now_ms()
        c.kubectl("delete", "pod", victim, "--wait=false")
        marks["end"] = wait_until(lambda: victim not in c.pods(INGRESS) and c.deployment_done(INGRESS), "a new ingress pod ready")


def scale_down(c, upstream=None):
    """The backends scaled to one pod; returns when one endpoint is left. UPSTREAM "addresses"
    (an LB that resolved the pods' addresses at its start): its pod is recreated too, so it
    sends to the one pod left (the smallest state's capacity probe)."""
    c.kubectl("scale", "deployment/backend", "--replicas=1")
    done = wait_until(lambda: c.ready_endpoints("backend") == 1 and c.deployment_done("backend"), "the backends scaled to 1")
    if upstream == "addresses":
        c.kubectl("delete", "pod", "-l", f"app.kubernetes.io/name={INGRESS}", "--wait=false")
        wait_until(lambda: len(c.pods(INGRESS)) == 1 and c.deployment_done(INGRESS), "the ingress recreated")
    return done


def changer(kind, c, run_dir, at_s, marks, failures, reload_to, n_backends):
    """In a thread beside the run: waits for k6 to start (its log appears), then CHANGE_AT."""
    try:
        wait_until(lambda: (run_dir / "k6.log").exists(), "k6 starting", timeout=600, every=0.05)
        time.sleep(at_s)
        if kind != "none":
            change(kind, c, marks, reload_to, n_backends)
    except Exception as e:  # noqa: BLE001  (said by the main thread, after the run)
        failures.append(f"the change ({kind}) did not complete: {e}")


def restore(kind, c, n_backends, variant, stale=False):
    """The platform as the variant deploys it again, whatever the change did or failed to do: a
    reload's configuration reloaded back (the Deployment still says VARIANT), a route change's
    undone (the route as built applied, or the LB reloaded without it), a rollout that
    could not finish undone, the backends at their count (the lab's stopped one started)."""
    if kind == "reload":
        reload_into(c, variant)
    if kind == "route":  # the routes as deployed, as a new connection finds them
        c.apply_route(c.route) if c.route else reload_into(c, variant)
        addr, host = c.address(), host_of(c)
        wait_until(lambda: route_state(addr, host) == (False, False), "the routes as deployed again", every=0.1)
    if isinstance(c, Lab):
        if kind == "kill-backend":
            c.lab("backend", "start", "1")
        return
    if kind == "kill-node":  # every node back, whatever the change reached (a node back already is left as it is)
        for i in c.backends_nodes():
            c.lost("start", i)
    if kind == "rollout" and not c.deployment_done(INGRESS):
        c.kubectl("rollout", "undo", f"deployment/{INGRESS}")
    if kind == "scale":
        c.kubectl("scale", "deployment/backend", f"--replicas={n_backends}")
        wait_until(lambda: c.deployment_done("backend"), "the backends back")
        # An ingress that keeps the addresses it resolved at its start (path-lb-pods) does not
        # serve the new pods by itself: restarted, so the next run finds the variant as deployed.
        # STALE: the change saw it (none of the new pods got a request); one request alone can
        # still reach the pod that outlived the scale and answer 200.
        addr = c.address()
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", "-H", f"Host: {host_of(c)}",
                            f"http://{addr}/1kb.bin?deploy"], capture_output=True, text=True)
        if stale or r.stdout != "200":
            mx.say("change", ("the ingress still holds the removed backends' addresses" if stale else
                              f"the ingress answers {r.stdout or 'nothing'} after the backends came back") + ": its pod recreated")
            # Deleted, not rolled: a rolling restart needs room for a second ingress pod.
            c.kubectl("delete", "pod", "-l", f"app.kubernetes.io/name={INGRESS}", "--wait=false")
            kind = "kill-ingress"
    wait_until(lambda: c.deployment_done(INGRESS) if kind in ("rollout", "kill-ingress") else c.deployment_done("backend"),
               "the cluster back as deployed")
