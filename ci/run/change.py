"""ci/run/change.py: `./task bench:change CHANGE=kind` — what a change under load costs.

A steady open-model load (the rps scenario at LOAD_SHARE % of the capacity a closed-model run
of VARIANT measures first, for a scale in its smallest state, one backend pod; or RATE) and,
CHANGE_AT into it, a change on the local cluster (or, for reload, kill-backend and none, on
the bare-metal lab: PLATFORM=lab):
  reload        the ingress renders RELOAD_TO's knobs and reloads nginx in place (lb.sh), as an
                ingress controller does on a configuration change; it ends when the status
                port's /generation answers the new configuration's number
  scale         the backends N -> 1 -> N pods; ends when N endpoints are ready again
  kill-backend  one backend pod deleted; ends when the Deployment has every pod ready again (on
                the lab: backend 1's nginx stopped, BACKEND_DOWN_S later started; ends when it
                answers)
  rollout       the ingress Deployment restarted (kubectl rollout restart); ends when rolled out
  kill-ingress  the ingress pod deleted; ends when a new one is ready
  none          nothing changes: the control run, which must show no error and no disruption
The run is bench.sh's (its checks, server counts and report); the native engine's timeline
(timeline.json: 100 ms slots by each request's send) and the change's marks (unix ms, from
this script's own observation of the cluster, or the lab script's return) give change.json,
change.md and the timeline chart on the run's report page (ci/report/change.py). The server's
side: the ingress's access log (every response it sent, by status) over the run, while its pod
(the lab: its nginx master) lives.
Exit: 0; 99 when the run crossed a threshold or more requests than CHANGE_ERRORS_MAX failed
during the change (sends the open model never made are DROPPED_MAX's); 1 bad input or a failed run.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime
from functools import cache
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, runs)
from report.change import analyse  # noqa: E402

NS = "ingress-bench"
INGRESS = "nginx-lb"  # the in-cluster ingress whose configuration lb.sh reloads
DURATION = "30s"  # bench:change's DURATION when unset: the change needs time on both sides
PROBE = "5s"  # the capacity run's length
WAIT_S = 120  # a change's longest wait for the cluster to settle
STEADY_MIN_S = 3  # the load's seconds before the change, at least (its steady p99)
# The lab's stopped backend stays down this long: a process restart's gap, long enough that the
# load (thousands of requests a second) meets it and the LB's handling of a dead upstream shows.
BACKEND_DOWN_S = 1
LAB_KINDS = ("none", "reload", "kill-backend")  # what the lab's processes can do
EVENTS_SHOWN = 6  # Kubernetes events in change.md's row (all of them in change.json)


def now_ms():
    return int(time.time() * 1000)


class Cluster:
    """The local cluster: what a change acts on and observes, through kubectl."""
    def __init__(self, env, knobs):
        self.env = env
        self.knobs = knobs  # {variant: its nginx-lb knobs as KEY=VALUE lines}: what reload() renders

    def kubectl(self, *args, stdin=None, timeout=60):
        r = subprocess.run(["kubectl", "-n", NS, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout)
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

    def pod_ips(self, name):
        return {p["status"]["podIP"] for p in self.live(name) if p.get("status", {}).get("podIP")}

    def address(self):
        return self.kubectl("get", "service", INGRESS, "-o", "jsonpath={.spec.clusterIP}").strip()

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

    def reload(self, variant, gen):
        self.kubectl("exec", "-i", f"deployment/{INGRESS}", "-c", "nginx", "--", "sh", "/etc/lb/template/lb.sh", "reload", gen,
                     stdin=self.knobs[variant])


class Lab:
    """The bare-metal lab: its script (ci/platforms/lab.sh) acts; its files are observed."""
    def __init__(self, env):
        self.env = env
        self.prefix = Path(self.lab("lb-prefix").strip())  # the LB's nginx prefix

    def lab(self, *args, variant=None):
        r = subprocess.run(["bash", str(mx.ROOT / "ci/platforms/lab.sh"), *args], env=dict(self.env, VARIANT=variant or self.env.get("VARIANT", "")),
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

    def reload(self, variant, gen):
        self.lab("reload", gen, variant=variant)

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
    """The lab's addresses and ports (ci/platforms/lab.env, as ci/lib.sh sources it), read once:
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


def reload_into(c, variant):
    """The running LB reloaded into VARIANT's knobs; returns the generation it answers then."""
    gen = str(int(generation(c.address()) or 0) + 1)
    c.reload(variant, gen)
    return gen


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
        except RuntimeError:
            marks["notes"] = {"not_serving": len([ip for ip in new if (stub_requests(ip) or 0) <= polls.get(ip, 0) + 1]), "new": len(new)}
    elif kind == "kill-backend":
        victim = c.pods("backend")[0]
        marks["start"] = now_ms()
        c.kubectl("delete", "pod", victim, "--wait=false")
        marks["end"] = wait_until(lambda: victim not in c.pods("backend") and c.deployment_done("backend"), "the backend Deployment whole again")
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
    reload's configuration reloaded back (the Deployment still says VARIANT), a rollout that
    could not finish undone, the backends at their count (the lab's stopped one started)."""
    if kind == "reload":
        reload_into(c, variant)
    if isinstance(c, Lab):
        if kind == "kill-backend":
            c.lab("backend", "start", "1")
        return
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
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", "-H", f"Host: {c.env.get('HOST') or mx.registry()['HOST']['default']}",
                            f"http://{addr}/1kb.bin?deploy"], capture_output=True, text=True)
        if stale or r.stdout != "200":
            mx.say("change", ("the ingress still holds the removed backends' addresses" if stale else
                              f"the ingress answers {r.stdout or 'nothing'} after the backends came back") + ": its pod recreated")
            # Deleted, not rolled: a rolling restart needs room for a second ingress pod.
            c.kubectl("delete", "pod", "-l", f"app.kubernetes.io/name={INGRESS}", "--wait=false")
            kind = "kill-ingress"
    wait_until(lambda: c.deployment_done(INGRESS) if kind in ("rollout", "kill-ingress") else c.deployment_done("backend"),
               "the cluster back as deployed")


def server_side(before, after, path, client_statuses, client_answered):
    """The access log's lines of the run (after minus before, same pod; requests for the run's
    PATH, not deploy's readiness check) by status, beside the client's: the responses the
    client got must be the ones the server sent."""
    (pod0, lines0), (pod1, lines1) = before, after
    if pod1 is None or pod0 != pod1:
        return {"counted": False, "why": "the ingress pod was replaced during the run: its log went with it"}
    statuses, retried = {}, 0
    for line in lines1[len(lines0):]:
        parts = line.split('"')
        if len(parts) < 3 or parts[1] != f"GET {path} HTTP/1.1":
            continue
        code = parts[2].split()[0] if len(parts) > 2 and parts[2].split() else "?"
        statuses[code] = statuses.get(code, 0) + 1
        # The log format's ua=$upstream_addr lists every upstream a request was tried on: two or
        # more when nginx retried it on the next (proxy_next_upstream), as the client never sees.
        retried += ", " in line.rpartition(" ua=")[2]
    # 499: nginx's "client closed the request" — the client gave up first (REQUEST_TIMEOUT), so
    # it counted a timeout, not this status; the rest it must have received as they are.
    answered = sum(n for code, n in statuses.items() if code != "499")
    errors = sum(n for code, n in statuses.items() if not code.startswith(("2", "3")) and code != "499")
    client_errors = sum(client_statuses.values())
    return {"counted": True, "pod": pod1, "responses": answered, "statuses": statuses, "status_errors": errors, "retried": retried,
            "client_responses": client_answered, "client_status_errors": client_errors,
            "agree": abs(answered - client_answered) <= max(1, 0.01 * answered) and abs(errors - client_errors) <= max(0, 0.01 * errors)}


def verdict(kind, a, server, backends, notes, upstream, lab=False, events=()):
    """Which part failed the requests, in words, from the kinds of errors and when they came."""
    d, k = a["during"] or a["run"], (a["during"] or a["run"])["by_kind"]
    parts = []
    if notes.get("not_serving"):
        why = {"addresses": "the ingress kept the backend addresses it resolved at its start, so the endpoints that went away are "
                            "still its upstreams and the new ones are not",
               "keepalive": "the ingress's keep-alive connections to the ClusterIP stay with the pods they were opened to (kube-proxy "
                            "balances connections, not requests): new pods get requests only as those connections are replaced",
               }.get(upstream, "the ingress did not send them any")
        parts.append(f"{notes['not_serving']} of {notes['new']} new backend pods got no request within 15 s of being ready: {why}")
    retries = (f" ({server['retried']} only because the ingress retried them on another upstream: its access log lists two "
               "upstream addresses)") if server.get("retried") else ""
    if not a["run"]["errors"] and not a["disruption"] and not parts:
        return "no request failed and latency stayed within 3x the steady p99" + retries
    if k.get("closed") or k.get("reset"):
        n = k.get("closed", 0) + k.get("reset", 0)
        who = {"reload": "the ingress's old workers closed keep-alive connections as requests went out on them",
               "rollout": "the old ingress pod closed (or lost) client connections as it stopped",
               "kill-ingress": "the deleted ingress pod's connections were closed or reset under the client"}.get(
            kind, "connections to the ingress were closed or reset under the client")
        parts.append(f"{n} without a response: {who} (a client that retries idempotent requests on a closed keep-alive connection would not see these)")
    if k.get("status"):
        codes = ", ".join(f"{n}× {c}" for c, n in sorted(d["statuses"].items()))
        gone = "backend was stopped" if lab else "backend pod was deleted"
        who = {"scale": "the ingress kept sending to removed endpoints",
               "kill-backend": f"the only {gone}: the ingress had nowhere to send until it was back" if backends == 1
               else f"the {gone} and the ingress kept sending to it"}.get(kind, "the ingress answered errors")
        parts.append(f"{codes}: {who}" + (" (its access log says the same)" if server.get("counted") and server.get("status_errors") else ""))
    if k.get("refused"):
        who = {"rollout": "the old ingress pod stopped listening while kube-proxy still sent it connections",
               "kill-ingress": "no ready ingress pod behind its Service until the new one was ready"}.get(
            kind, "nothing listened where the connections were sent")
        parts.append(f"{k['refused']} refused: {who}")
    if k.get("timeout"):
        parts.append(f"{k['timeout']} timed out: requests sent to a pod that was gone, never answered")
    if k.get("dropped"):
        parts.append(f"{k['dropped']} never sent: due while every connection still waited for an earlier answer, until the run's end "
                     "(the open model drops them; a pod gone without a reset keeps requests waiting up to REQUEST_TIMEOUT)")
    if k.get("other"):
        parts.append(f"{k['other']} other errors: " + "; ".join(f"{n}× {t}" for t, n in sorted(d["others"].items(), key=lambda x: -x[1])))
    # The cluster's events say why a replacement was late: the scheduler could not place it
    # (a pod being deleted keeps its resource requests until it is gone: a preStop delay holds them).
    unplaced = [e for e in events if e["reason"] == "FailedScheduling"]
    if unplaced and (a["run"]["errors"] or a["disruption"]):
        pod = unplaced[0]["object"]
        placed = [e["unix_ms"] for e in events if e["reason"] == "Scheduled" and e["object"] == pod]
        wait = f" for {(placed[0] - unplaced[0]['unix_ms']) / 1000:.0f} s" if placed else ""
        parts.append(f"the new pod ({pod}) could not be scheduled{wait}: {unplaced[0]['message'].split('. ')[0]} "
                     "(the pod being deleted held its requests until it was gone)")
    if not parts and a["disruption"]:
        parts.append(f"no request failed{retries}, but latency rose past {a['slow_ms']:.1f} ms (3x the steady p99) for {a['disruption']['ms']} ms")
    return "; ".join(parts)


def markdown(doc):
    a, s = doc["analysis"], doc["server"]

    def p99(x):
        return "—" if not x or x.get("p99_ms") is None else f"{x['p99_ms']:.1f} ms"
    d = a["during"]
    rows = [("change", doc["change"] + (f" → {doc['reload_to']}" if doc.get("reload_to") else "")),
            ("load", f"{doc['rate']:,} req/s open model ({doc['rate_from']}), {doc['connections']} connections, {doc['duration']}"),
            ("change took", "—" if a["change_ms"] is None else f"{a['change_ms'] / 1000:.2f} s"
             + (f" (new configuration/endpoints serving after {a['serving_after_ms'] / 1000:.2f} s)" if "serving_after_ms" in a else "")
             + (f" ({doc['marks_unix_ms']['notes']['not_serving']} of {doc['marks_unix_ms']['notes']['new']} new backend pods had no request "
                "within 15 s of being ready)" if "notes" in doc["marks_unix_ms"] else "")),
            ("errors during the change", "—" if not d else f"({a['during_ms'][0] / 1000:.1f}–{a['during_ms'][1] / 1000:.1f} s) " + f"{d['errors']:,} of {d['requests']:,} ({d['share'] * 100:.2f} %)"
             + (f": {', '.join(f'{n} {k}' for k, n in d['by_kind'].items())}" if d["errors"] else "")),
            ("errors in the whole run", f"{a['run']['errors']:,} of {a['run']['requests']:,}"),
            ("disruption window", "none" if not a["disruption"] else f"{a['disruption']['ms'] / 1000:.1f} s "
             f"({a['disruption']['from_ms'] / 1000:.1f}–{a['disruption']['to_ms'] / 1000:.1f} s from the load's start)"),
            ("p99 before → during", f"{p99(a['before'])} → {p99(d)}"),
            ("server (access log)", f"{s['responses']:,} responses, {s['status_errors']} errors; client {s['client_responses']:,} and "
             f"{s['client_status_errors']}: {'agree' if s['agree'] else 'DISAGREE'}" + (f"; {s['retried']} retried on another upstream"
                                                                                        if s["retried"] else "") if s["counted"] else s["why"]),
            ("verdict", doc["verdict"])]
    if doc["platform"] != "lab":
        ev = doc["events"]
        rows.insert(-1, ("Kubernetes events", "—" if not ev else "; ".join(
            f"{e['reason']} {e['object']} {(e['unix_ms'] - doc['marks_unix_ms']['start']) / 1000:+.1f} s" for e in ev[:EVENTS_SHOWN])
            + (f"; {len(ev) - EVENTS_SHOWN} more in change.json" if len(ev) > EVENTS_SHOWN else "") + " (from the change's start; most stamps are whole seconds, so up to 1 s early)"))
    if doc.get("gate"):
        rows.append(("threshold", doc["gate"]))
    return "\n".join([f"Change under load: {doc['change']} on {doc['variant']} ({doc['platform']})", "", "| | |", "|---|---|"]
                     + [f"| {k} | {v} |" for k, v in rows]) + "\n"


def main(argv):
    rc, _ = run_change(dict(os.environ), mx.registry())
    return rc


def run_change(env, reg):
    """One change under load with ENV's settings: (exit code, change.json's document)."""
    names = [n for n in ("CHANGE", "CHANGE_AT", "LOAD_SHARE", "RELOAD_TO", "CHANGE_ERRORS_MAX", "DURATION") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    kind = env.get("CHANGE")
    if not kind:
        raise mx.Bad(f"CHANGE is not set: ./task bench:change CHANGE=<{'|'.join(reg['CHANGE']['values'])}>")
    if env.get("TARGET"):
        raise mx.Bad("bench:change changes what it runs (the local cluster or the lab): unset TARGET")
    if env.get("PLATFORM", "local") not in ("local", "lab"):
        raise mx.Bad(f"bench:change runs on the local cluster or the lab (PLATFORM=local|lab), got PLATFORM={env['PLATFORM']}")
    if env.get("SCENARIO", "rps") != "rps":
        raise mx.Bad("bench:change runs the rps scenario (a steady keep-alive load): unset SCENARIO")
    env.setdefault("DURATION", DURATION)
    at_s = mx.duration_s(env.get("CHANGE_AT") or reg["CHANGE_AT"]["default"])
    run_s = mx.duration_s(env["DURATION"])
    if at_s < STEADY_MIN_S or run_s < at_s + 10:
        raise mx.Bad(f"CHANGE_AT {at_s:g}s and DURATION {env['DURATION']}: the load needs {STEADY_MIN_S} s or more before the change "
                     "(its steady state) and 10 s or more after it starts")
    share = int(env.get("LOAD_SHARE") or reg["LOAD_SHARE"]["default"])
    reload_to = env.get("RELOAD_TO") or env.get("VARIANT") or reg["VARIANT"]["default"]
    if env.get("RELOAD_TO") and kind != "reload":
        raise mx.Bad(f"RELOAD_TO is CHANGE=reload's: unset it for CHANGE={kind}")
    doc = {"title": f"change: {kind}", "rounds": 1, "platforms": ["local", "lab"],
           "cases": [{"name": "probe", "scenario": "rps", "settings": {"DURATION": PROBE}},
                     {"name": "change", "scenario": "rps", "settings": {"DURATION": env["DURATION"]}}],
           "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]}
    m = mx.parse(doc, "bench:change", reg)
    mx.resolve(m, env, reg)
    variant, platform = m["cases"][1]["variant"], m["cases"][1]["platform"]
    lab = platform == "lab"
    if lab and kind not in LAB_KINDS:
        raise mx.Bad(f"CHANGE={kind} needs the local cluster (PLATFORM=local): the lab has {', '.join(LAB_KINDS)}")
    if lab:  # plain nginx from the variant's knob files (variant_knob_files, which also checks them)
        own_knobs, upstream, backends = lab_knobs(variant), None, None  # backends: the lab's, once it is up
    else:
        objects = built(variant)
        if f"Deployment/{INGRESS}" not in objects and kind in ("reload", "rollout", "kill-ingress"):
            raise mx.Bad(f"CHANGE={kind} needs an nginx-lb ingress; overlay {variant} has none")
        own_knobs = knobs_in(objects)
        # How the LB reaches the backends: the pods' addresses resolved at its start (a headless
        # Service, path-lb-pods), or a ClusterIP over keep-alive connections, or one per request.
        ups = "".join(d.get("data", {}).get("upstreams.conf", "") for k, d in objects.items() if k.startswith("ConfigMap/nginx-lb-upstreams"))
        upstream = "addresses" if "backend-pods." in ups else "keepalive" if own_knobs and "UPSTREAM_KEEPALIVE=\n" not in own_knobs else None
        backends = objects.get("Deployment/backend", {}).get("spec", {}).get("replicas", 1)
        if kind == "scale" and backends < 2:
            raise mx.Bad(f"CHANGE=scale needs more than one backend pod (N -> 1 -> N): overlay {variant} has {backends}; try a -10pods variant")
    # What the LB renders: VARIANT's knobs, and RELOAD_TO's for a reload (built the same way).
    knobs = {variant: own_knobs}
    if kind == "reload" and reload_to != variant:
        knobs[reload_to] = lab_knobs(reload_to) if lab else knobs_in(built(reload_to))
        if knobs[reload_to] is None:
            raise mx.Bad(f"RELOAD_TO={reload_to} has no nginx-lb configuration to reload into (CHANGE=reload needs an nginx-lb variant)")

    mdir = Path(env.get("RESULTS_ROOT") or mx.ROOT / "results").resolve() / f"change-{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    mdir.mkdir(parents=True)
    (mdir / "logs").mkdir()
    probe, run = m["cases"]
    # The variant deployed (the cluster or lab up first), as bench.sh does: what the change acts
    # on, and the access log counted from here.
    up = mx.shell('load_platform && pf_check rps && pf_up rps >/dev/null', env=run["env"])
    if up.returncode != 0:
        raise mx.Bad(mx.error_line(up.stderr + up.stdout))
    if lab:
        c = Lab(run["env"])
        backends = c.backends()
    else:
        c = Cluster(dict(env, KUBECONFIG=mx.shell('echo "$IB_CLUSTER_KUBECONFIG"').stdout.strip()), knobs)
    rate, rate_from = env.get("RATE"), "RATE"
    if not rate:
        # A scale's smallest state (one backend pod) serves less than the variant as deployed:
        # the load is a share of that state's capacity, or the scale would measure capacity
        # (one pod overrun on a slower hour), not the change.
        smallest = kind == "scale"
        state = f"{variant} with 1 of its {backends} backend pods" if smallest else variant
        mx.say("change", f"capacity: a closed-model run of {PROBE} ({state}), then {share} % of it")
        if smallest:
            scale_down(c, upstream)
        try:
            p = mx.run_one(probe, {}, "probe", mdir, m)
        finally:
            if smallest:
                restore("scale", c, backends, variant, stale=upstream == "addresses")
        if p["status"] == "failed" or not p["values"].get("rps"):
            raise mx.Bad(f"the capacity run failed: {p['reason']} (log: {p['log']})")
        rate, rate_from = str(max(1, round(p["values"]["rps"] * share / 100))), \
            f"{share} % of {p['values']['rps']:,.0f} req/s measured" + (" with 1 backend pod" if smallest else "")
    log_before = c.access_log()
    marks, failures = {}, []
    mx.say("change", f"{kind}: {rate} req/s for {env['DURATION']}, the change {at_s:g} s into it")
    t = threading.Thread(target=changer, args=(kind, c, mdir / "change", at_s, marks, failures, reload_to, backends), daemon=True)
    t.start()
    try:
        r = mx.run_one(run, {"RATE": rate}, "change", mdir, m)
        t.join(timeout=WAIT_S + 5)
        log_after = c.access_log()
        # The cluster's own record of the change, beside the marks this runner observed.
        events = c.events(marks["start"]) if "start" in marks else []
    finally:
        if kind != "none":
            stale = upstream == "addresses" and bool((marks.get("notes") or {}).get("not_serving"))
            restore(kind, c, backends, variant, stale)
    if r["status"] == "failed":
        raise mx.Bad(f"the run failed: {r['reason']} (log: {r['log']})")
    if failures:
        raise mx.Bad(failures[0])
    run_dir = Path(r["dir"])
    tl = json.loads((run_dir / "timeline.json").read_text())
    a, _ = analyse(tl, marks)
    summary = json.loads((run_dir / "summary.json").read_text())["result"]
    client_statuses = a["run"]["statuses"]
    answered = summary["requests"] - sum(a["run"]["by_kind"].get(k, 0) for k in ("reset", "refused", "timeout", "closed", "other"))
    path = "/" + json.loads((run_dir / "meta.json").read_text())["target"].split("/", 3)[3]
    # The access log is the server's count; a configuration without one (ACCESS_LOG off: the
    # variant's, or RELOAD_TO's for part of the run) has no count to compare.
    off = [v for v, k in ((variant, own_knobs), (reload_to, knobs.get(reload_to))) if k and "ACCESS_LOG=off\n" in k]
    server = {"counted": False, "why": f"no server count: {off[0]}'s access log is off (ACCESS_LOG)"} if off else \
        server_side(log_before, log_after, path, client_statuses, answered)
    doc = {"change": kind, "variant": variant, "platform": platform, "reload_to": reload_to if kind == "reload" else None,
           "rate": int(rate), "rate_from": rate_from, "connections": summary["connections"], "duration": env["DURATION"],
           "marks_unix_ms": marks, "events": events, "analysis": a, "server": server, "verdict": verdict(kind, a, server, backends, marks.get("notes") or {}, upstream, lab, events), "run": str(run_dir)}
    # The gate counts requests that failed (a status, a reset, a refusal, ...), not the open
    # model's sends never made while every connection waited (DROPPED_MAX, k6's threshold, judges
    # those): on a 2-CPU node the pod churn of a scale (nine pods stopping, nine starting) can
    # starve the data path for seconds with no request failing (issue 27).
    limit = env.get("CHANGE_ERRORS_MAX")
    d = a["during"] or a["run"]
    dropped = d["by_kind"].get("dropped", 0)
    during = d["errors"] - dropped
    crossed = limit is not None and limit != "" and during > int(limit)
    if limit:
        doc["gate"] = f"CHANGE_ERRORS_MAX={limit}: {during} failed during the change: {'CROSSED' if crossed else 'ok'}" + \
            (f" ({dropped} sends never made are not failures: DROPPED_MAX judges them)" if dropped else "")
    (run_dir / "change.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    (run_dir / "change.md").write_text(text)
    mx.shell('"$IB_VENV/bin/python" "$IB_ROOT/ci/report" render "$1" >/dev/null', run_dir)
    print("\n" + text + f"\nRun: {run_dir}/ (report.html: the timeline chart)\n", end="", flush=True)
    return (99 if crossed or r["status"] == "crossed" else 0), doc


if __name__ == "__main__":
    mx.entry(main, sys.argv)
