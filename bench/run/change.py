"""bench/run/change.py: `./task bench:change CHANGE=kind` — what a change under load costs.

A steady open-model load (the rps scenario at LOAD_SHARE % of the capacity a closed-model run
of VARIANT measures first, for a scale in its smallest state, one backend pod; or RATE) and,
CHANGE_AT into it, a change on the local cluster (or, for reload, kill-backend and none, on
the bare-metal lab: PLATFORM=lab):
  reload        the ingress renders RELOAD_TO's knobs and reloads nginx in place (lb.sh), as an
                ingress controller does on a configuration change; it ends when the status
                port's /generation answers the new configuration's number
  scale         the backends N -> 1 -> N pods; ends when N endpoints are ready again
  kill-node     a backends node of its own (NODES=3 or more) lost: its link down and its
                kubelet, kube-proxy and containerd stopped (bench/platforms/local/cluster.sh
                node-stop); marks when it is NotReady and its endpoints moved, then it is back;
                ends when it is Ready and the backends whole again
  kill-backend  one backend pod deleted; ends when the Deployment has every pod ready again (on
                the lab: backend 1's nginx stopped, BACKEND_DOWN_S later started; ends when it
                answers)
  rollout       the ingress Deployment restarted (kubectl rollout restart); ends when rolled out
  kill-ingress  the ingress pod deleted; ends when a new one is ready
  route         a route added (an exact path to the load's payload) and the load's route edited
                (a response header added), in one update: the nginx-lb reloads with the
                template's ROUTE_* knobs, as a controller renders a changed Ingress; a Gateway
                API variant's HTTPRoute is applied changed, for its controller to program.
                Marks when the added route first answers 200 ("serving") and the load's route
                first carries the header ("edited"), each on new connections every 20 ms; ends
                at the later
  none          nothing changes: the control run, which must show no error and no disruption
The run is bench.sh's (its checks, server counts and report); the native engine's timeline
(timeline.json: 100 ms slots by each request's send) and the change's marks (unix ms, from
this script's own observation of the cluster, or the lab script's return) give change.json,
change.md and the timeline chart on the run's report page (bench/report/change.py). The server's
side: the ingress's access log (every response it sent, by status) over the run, while its pod
(the lab: its nginx master) lives; a Gateway's proxy: Envoy's own statistics (its responses by
status class), less the change's probes.
Exit: 0; 99 when the run crossed a threshold or more requests than CHANGE_ERRORS_MAX failed
during the change (sends the open model never made are DROPPED_MAX's); 1 bad input or a failed run.
"""
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner: checks, runs)
from change_actions import (INGRESS, WAIT_S, built, changer, deployed, knobs_in, lab_knobs,  # noqa: E402
                            restore, scale_down)
from change_yours import Yours, changer as yours_changer  # noqa: E402
from report.change import analyse  # noqa: E402

DURATION = mx.default_of("DURATION", "change")  # the registry's: the change needs time on both sides
PROBE = "5s"  # the capacity run's length
STEADY_MIN_S = 3  # the load's seconds before the change, at least (its steady p99)
LAB_KINDS = ("none", "reload", "kill-backend")  # what the lab's processes can do
# What a change does to an ingress the user runs (INGRESS_PODS), with ALLOW_CHANGE=1.
YOURS_KINDS = {"none": "changes nothing", "rollout": "restarts your ingress's workload (kubectl rollout restart)",
               "kill-backend": "deletes one of your backends' pods",
               "route": "adds a route to your ingress (in namespace ingress-bench, removed after)"}
KILL_NODE_AFTER_S = 25  # a lost node NotReady (12 s), its endpoints moved, the node Ready again
EVENTS_SHOWN = 6  # Kubernetes events in change.md's row (all of them in change.json)


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


def envoy_side(before, after, probes, client_statuses, client_answered):
    """server_side() for a Gateway's proxy: Envoy's counts over the run (after minus before,
    same pod) by status class, less the change's probes (PROBES: their statuses, counted by
    the change), beside the client's."""
    (pod0, c0), (pod1, c1) = before, after
    if pod1 is None or pod0 != pod1:
        return {"counted": False, "why": "the proxy pod was replaced during the run: its statistics went with it"}
    delta = {k: v - c0.get(k, 0) for k, v in c1.items()}
    ours = {k: n for k, n in probes.items() if k != "None"}
    answered = sum(n for k, n in delta.items() if k != "requests") - sum(ours.values())
    errors = sum(n for k, n in delta.items() if k in ("4", "5")) - sum(n for k, n in ours.items() if k[0] in "45")
    client_errors = sum(client_statuses.values())
    return {"counted": True, "pod": pod1, "responses": answered, "status_errors": errors, "retried": 0,
            "statuses": {f"{k}xx": n for k, n in delta.items() if k != "requests"}, "probes": sum(probes.values()),
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
    # Requests that failed outside the change's window are said apart, so that "no request
    # failed" is never said of a run where some did (303 502s before a scale's start once).
    for w, when in (("before", "before the change started"), ("after", "after the change's window")):
        x = a.get(w) or {}
        n = x.get("errors", 0) - x.get("by_kind", {}).get("dropped", 0)
        if n > 0:
            what = ", ".join(f"{c}× {s}" for s, c in sorted(x.get("statuses", {}).items())) or \
                ", ".join(f"{c} {kind}" for kind, c in sorted(x["by_kind"].items()) if kind != "dropped")
            parts.append(f"{n} failed {when} ({what}): not the change's, the state it started from or ended in")
    late = (f"; the change ended {a['outlasted_ms'] / 1000:.1f} s after the load: what it did from the load's end on was not "
            "measured (a longer DURATION)") if a.get("outlasted_ms") else ""
    if not a["run"]["errors"] and not a["disruption"] and not parts:
        return "no request failed and latency stayed within 3x the steady p99" + retries + late
    if k.get("closed") or k.get("reset"):
        n = k.get("closed", 0) + k.get("reset", 0)
        who = {"reload": "the ingress's old workers closed keep-alive connections as requests went out on them",
               "route": "the update that carried the route change closed keep-alive connections as requests went out on them (as a reload's old workers do)",
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
    # The run's other sends never made (before the change: a host the pods' start starved) are
    # said apart, so that the verdict's counts add up to the run's.
    outside = a["run"]["by_kind"].get("dropped", 0) - k.get("dropped", 0)
    if outside > 0:
        parts.append(f"{outside} more never sent outside the change's window")
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
    return "; ".join(parts) + late


def markdown(doc):
    a, s = doc["analysis"], doc["server"]

    def p99(x):
        return "—" if not x or x.get("p99_ms") is None else f"{x['p99_ms']:.1f} ms"
    d = a["during"]
    rows = [("change", doc["change"] + (f" → {doc['reload_to']}" if doc.get("reload_to") else "")),
            ("load", f"{doc['rate']:,} req/s open model ({doc['rate_from']}), {doc['connections']} connections, {doc['duration']}"),
            ("change took", "—" if a["change_ms"] is None else f"{a['change_ms'] / 1000:.2f} s"
             + (f" (new configuration/endpoints serving after {a['serving_after_ms'] / 1000:.2f} s)" if "serving_after_ms" in a and doc["change"] != "route" else "")
             + (f" (the added route's first 200 after {a['serving_after_ms'] / 1000:.2f} s, the edited route's header after "
                f"{a['edited_after_ms'] / 1000:.2f} s)" if doc["change"] == "route" and "edited_after_ms" in a else "")
             + (" (to the added route's first 200, from a pod asking every 20 ms" + "".join(
                 f"; it answered {x['status'] or 'no response'} from {(x['t'] - doc['marks_unix_ms']['start']) / 1000:+.2f} s"
                 for x in doc["marks_unix_ms"]["probe"]["answers"][1:-1]) + ")" if doc["change"] == "route" and doc["variant"] == "existing" else "")
             + (f" ({doc['marks_unix_ms']['notes']['not_serving']} of {doc['marks_unix_ms']['notes']['new']} new backend pods had no request "
                "within 15 s of being ready)" if "notes" in doc["marks_unix_ms"] else "")),
            ("errors during the change", "—" if not d else f"({a['during_ms'][0] / 1000:.1f}–{a['during_ms'][1] / 1000:.1f} s) " + f"{d['errors']:,} of {d['requests']:,} ({d['share'] * 100:.2f} %)"
             + (f": {', '.join(f'{n} {k}' for k, n in d['by_kind'].items())}" if d["errors"] else "")),
            ("errors in the whole run", f"{a['run']['errors']:,} of {a['run']['requests']:,}"),
            ("disruption window", "none" if not a["disruption"] else f"{a['disruption']['ms'] / 1000:.1f} s "
             f"({a['disruption']['from_ms'] / 1000:.1f}–{a['disruption']['to_ms'] / 1000:.1f} s from the load's start)"),
            ("p99 before → during", f"{p99(a['before'])} → {p99(d)}"),
            ("server (Envoy's statistics, less the change's probes)" if "probes" in s else
             "server (its Prometheus counter)" if doc["variant"] == "existing" else "server (access log)", f"{s['responses']:,} responses, {s['status_errors']} errors; client {s['client_responses']:,} and "
             f"{s['client_status_errors']}: {'agree' if s['agree'] else 'DISAGREE'}" + (f"; {s['retried']} retried on another upstream"
                                                                                        if s["retried"] else "") if s["counted"] else s["why"]),
            ("verdict", doc["verdict"])]
    if mx.traits(doc["platform"])["cluster"] != "none":  # a cluster: its events
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


def checked(env, reg):
    """ENV's bench:change settings, checked before anything starts: (kind, the change's second
    into the load, the load's share of the capacity, the reload's target variant)."""
    names = [n for n in ("CHANGE", "CHANGE_AT", "LOAD_SHARE", "RELOAD_TO", "CHANGE_ERRORS_MAX", "DURATION", "ROUTE_PARENT", "ROUTE_HOST")
             if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    kind = env.get("CHANGE")
    if not kind:
        raise mx.Bad(f"CHANGE is not set: ./task bench:change CHANGE=<{'|'.join(reg['CHANGE']['values'])}>")
    if env.get("INGRESS_PODS"):  # an ingress you run: what makes sense on someone else's
        if kind not in YOURS_KINDS:
            raise mx.Bad(f"CHANGE={kind} on an ingress you run: its kinds are {', '.join(YOURS_KINDS)} (the others change what the suite deploys)")
        if kind == "kill-backend" and not env.get("BACKEND_PODS"):
            raise mx.Bad("CHANGE=kill-backend deletes one of your backends' pods: name them (BACKEND_PODS)")
        if kind == "route" and not (env.get("ROUTE_PARENT") and env.get("BACKEND_PODS")):
            raise mx.Bad("CHANGE=route adds a route to your ingress: name what it attaches to (ROUTE_PARENT=ingressclass/NAME or "
                         "gateway/NAMESPACE/NAME) and the backends it routes to (BACKEND_PODS)")
        if kind != "none" and env.get("ALLOW_CHANGE") != "1":
            raise mx.Bad(f"CHANGE={kind} {YOURS_KINDS[kind]} on your cluster under load: set ALLOW_CHANGE=1 to confirm")
    elif env.get("TARGET"):
        raise mx.Bad("bench:change changes what it runs (the local cluster or the lab): unset TARGET")
    else:
        ours = mx.platforms(cluster=("own", "none"))  # what it changes is ours to change
        if env.get("PLATFORM", "local") not in ours:
            raise mx.Bad(f"bench:change runs on the local cluster or the lab (PLATFORM={'|'.join(ours)}), got PLATFORM={env['PLATFORM']}")
    if env.get("SCENARIO", "rps") != "rps":
        raise mx.Bad("bench:change runs the rps scenario (a steady keep-alive load): unset SCENARIO")
    after_s = 10
    if kind == "kill-node" and (env.get("PLATFORM") or "local") in mx.platforms(cluster=("own",)):
        # A node lost is NotReady 12 s after its last heartbeat (bench/platforms/local/cluster.sh),
        # its endpoints then moved and the node back: the load must outlast all of it.
        after_s = KILL_NODE_AFTER_S
        nodes = int(env.get("NODES") or mx.shell('cat "$IB_CLUSTER_STATE/node-count" 2>/dev/null || true').stdout.strip() or reg["NODES"]["default"])
        if nodes < 3:
            raise mx.Bad(f"CHANGE=kill-node loses a backends node of its own while the ingress and the client keep theirs: NODES=3 or more "
                         f"(the local cluster has {nodes} node{'s' if nodes > 1 else ''})")
        env.setdefault("DURATION", f"{10 + after_s + 10}s")
    env.setdefault("DURATION", DURATION)
    at_s = mx.duration_s(env.get("CHANGE_AT") or reg["CHANGE_AT"]["default"])
    run_s = mx.duration_s(env["DURATION"])
    if at_s < STEADY_MIN_S or run_s < at_s + after_s:
        raise mx.Bad(f"CHANGE_AT {at_s:g}s and DURATION {env['DURATION']}: the load needs {STEADY_MIN_S} s or more before the change "
                     f"(its steady state) and {after_s} s or more after it starts")
    share = int(env.get("LOAD_SHARE") or reg["LOAD_SHARE"]["default"])
    reload_to = env.get("RELOAD_TO") or env.get("VARIANT") or reg["VARIANT"]["default"]
    if env.get("RELOAD_TO") and kind != "reload":
        raise mx.Bad(f"RELOAD_TO is CHANGE=reload's: unset it for CHANGE={kind}")
    return kind, at_s, share, reload_to


def subject(kind, variant, lab, reload_to):
    """What the change acts on, from the variant's built objects (the lab: its knob files):
    (the LB's knobs by variant, how the LB reaches the backends, the backend pods; the lab's
    backends are known once it is up; a Gateway API variant's HTTPRoute as built, or None).
    Bad input: a change the variant cannot take."""
    if lab and kind not in LAB_KINDS:
        raise mx.Bad(f"CHANGE={kind} needs the local cluster (PLATFORM=local): the lab has {', '.join(LAB_KINDS)}")
    route = None
    if lab:  # plain nginx from the variant's knob files (variant_knob_files, which also checks them)
        own_knobs, upstream, backends = lab_knobs(variant), None, None
    else:
        objects = built(variant)
        if f"Deployment/{INGRESS}" not in objects and kind in ("reload", "rollout", "kill-ingress"):
            raise mx.Bad(f"CHANGE={kind} needs an nginx-lb ingress; overlay {variant} has none")
        route = objects.get("HTTPRoute/bench")
        if kind == "route" and f"Deployment/{INGRESS}" not in objects and not route:
            raise mx.Bad(f"CHANGE=route needs an nginx-lb ingress or a Gateway API variant's HTTPRoute 'bench'; overlay {variant} has neither")
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
    return knobs, upstream, backends, route


def load_rate(env, kind, c, m, mdir, share, backends, upstream, tag="change"):
    """The open model's rate: RATE, or SHARE % of what a closed-model run of PROBE measures.
    A scale's smallest state (one backend pod) serves less than the variant as deployed: the
    load is a share of that state's capacity, or the scale would measure capacity (one pod
    overrun on a slower hour), not the change. (rate, where it came from)."""
    if env.get("RATE"):
        return env["RATE"], "RATE"
    probe, run = m["cases"]
    variant, smallest = run["variant"], kind == "scale"
    state = f"{variant} with 1 of its {backends} backend pods" if smallest else variant
    mx.say(tag, f"capacity: a closed-model run of {PROBE} ({state}), then {share} % of it")
    if smallest:
        scale_down(c, upstream)
    try:
        p = mx.run_one(probe, {}, "probe", mdir, m)
    finally:
        if smallest:
            restore("scale", c, backends, variant, stale=upstream == "addresses")
    if p["status"] == "failed" or not p["values"].get("rps"):
        raise mx.Bad(f"the capacity run failed: {p['reason']} (log: {p['log']})")
    # The change's run keeps the ingress CPU its capacity was measured at: a probe of its own
    # could choose another and redeploy the ingress, its access log (the server's count) with it.
    if (meta := Path(p["dir"]) / "meta.json").is_file():  # (an in-cluster run has none: nothing of ours deployed)
        budget = json.loads(meta.read_text()).get("ingress_budget") or {}
        run["env"].setdefault("INGRESS_CPU", budget.get("ingress_cpu") or "overlay")
    return str(max(1, round(p["values"]["rps"] * share / 100))), \
        f"{share} % of {p['values']['rps']:,.0f} req/s measured" + (" with 1 backend pod" if smallest else "")


def under_load(kind, c, m, mdir, rate, at_s, reload_to, backends, upstream):
    """The load at RATE with the change AT_S into it, then the restore: (the run, the marks,
    the access log before and after, the cluster's events since the change's start)."""
    run = m["cases"][1]
    # The server's count: the access log or Envoy's statistics; an ingress you run's is its
    # Prometheus counter, which the run's summary holds.
    yours = isinstance(c, Yours)  # an ingress the user runs: nothing restored, its controllers bring it back
    served = (lambda: None) if yours else c.envoy_counts if getattr(c, "route", None) else c.access_log
    log_before = served()
    marks, failures = {}, []
    mx.say("change", f"{kind}: {rate} req/s for {run['env']['DURATION']}, the change {at_s:g} s into it")
    args = (kind, c, mdir / "change", at_s, marks, failures) + (() if yours else (reload_to, backends))
    t = threading.Thread(target=yours_changer if yours else changer, args=args, daemon=True)
    t.start()
    try:
        r = mx.run_one(run, {"RATE": rate}, "change", mdir, m)
        t.join(timeout=WAIT_S + 5)
        log_after = served()
        # The cluster's own record of the change, beside the marks this runner observed.
        events = c.events(marks["start"]) if "start" in marks else []
    finally:
        if yours:
            c.restore(kind)
        elif kind != "none":
            stale = upstream == "addresses" and bool((marks.get("notes") or {}).get("not_serving"))
            restore(kind, c, backends, run["variant"], stale)
    if r["status"] == "failed":
        raise mx.Bad(f"the run failed: {r['reason']} (log: {r['log']})")
    if failures:
        raise mx.Bad(failures[0])
    return r, marks, log_before, log_after, events


def run_change(env, reg):
    """One change under load with ENV's settings: (exit code, change.json's document)."""
    kind, at_s, share, reload_to = checked(env, reg)
    yours = bool(env.get("INGRESS_PODS"))
    doc = {"title": f"change: {kind}", "rounds": 1, "platforms": mx.platforms(cluster=("user",) if yours else ("own", "none")),
           "cases": [{"name": "probe", "scenario": "rps", "settings": {"DURATION": PROBE}},
                     {"name": "change", "scenario": "rps", "settings": {"DURATION": env["DURATION"]}}],
           "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]}
    m = mx.parse(doc, "bench:change", reg)
    mx.resolve(m, env, reg)
    run = m["cases"][1]
    variant, platform = run["variant"], run["platform"]
    lab = mx.traits(platform)["cluster"] == "none"  # the lab: host processes, no cluster
    if yours:
        # Checked as its runs would check it, once, and what the change acts on found, before
        # any load; its runners print their timelines (IB_TIMELINE).
        r = mx.existing_checked(env)
        if r.returncode != 0:
            raise mx.Bad(mx.error_line(r.stderr))
        c = Yours(env, env["INGRESS_PODS"], env.get("BACKEND_PODS"), env.get("ROUTE_PARENT") if kind == "route" else None)
        if kind != "none":
            mx.say("change", f"{kind}: {YOURS_KINDS[kind]}, {c.said(kind)}" +
                   ("" if kind == "route" else "; its controller brings it back, nothing is restored"))
        for case in m["cases"]:
            case["env"]["IB_TARGET_CHECKED"] = "1"
        m["cases"][1]["env"]["IB_TIMELINE"] = "1"
        knobs, upstream, backends, route = {}, None, len(c.ready(c.sides["backend"])) if "backend" in c.sides else None, None
    else:
        knobs, upstream, backends, route = subject(kind, variant, lab, reload_to)
    if not lab and not yours:  # the cluster's addresses, which the changes read, from where they are reachable
        mx.enter_client_side(run["env"])
    mdir = Path(env.get("RESULTS_ROOT") or mx.ROOT / "results").resolve() / f"change-{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    mdir.mkdir(parents=True)
    (mdir / "logs").mkdir()
    if not yours:
        # The variant deployed (the cluster or lab up first), as bench.sh does: what the change
        # acts on, and the access log counted from here.
        c, lab_backends = deployed(env, run["env"], lab, knobs, route)
        backends = lab_backends or backends
    rate, rate_from = load_rate(env, kind, c, m, mdir, share, backends, upstream)
    r, marks, log_before, log_after, events = under_load(kind, c, m, mdir, rate, at_s, reload_to, backends, upstream)

    run_dir = Path(r["dir"])
    tl = json.loads((run_dir / "timeline.json").read_text())
    a, _ = analyse(tl, marks)
    whole = json.loads((run_dir / "summary.json").read_text())
    summary = whole.get("result", whole)  # (an in-cluster run's: its segments summed)
    connections = summary.get("connections") or sum(p["connections"] for p in summary.get("per_segment") or [])
    client_statuses = a["run"]["statuses"]
    answered = summary["requests"] - sum(a["run"]["by_kind"].get(k, 0) for k in ("reset", "refused", "timeout", "closed", "other"))
    if yours:  # its Prometheus counter's total, not by status; CHANGE=route's probe went through it too
        counted, sent = whole["server"], ((marks.get("probe") or {}).get("answers") or [{"sent": 0}])[-1]["sent"]
        server = {"counted": False, "why": "the ingress's pods were replaced during the run: the counters of those found before "
                                           "the load do not hold it"} if kind == "rollout" else \
            {"counted": False, "why": f"{counted['requests']:,} requests counted by its Prometheus counter over the run"
                                      + (f", {sent:,} of them the route's probe's" if sent else "")
                                      + f" (client/server {counted['client_over_server'] * counted['requests'] / max(1, counted['requests'] - sent):.3f}"
                                      + (" without them" if sent else "") + "); not by status"}
    else:
        path = "/" + json.loads((run_dir / "meta.json").read_text())["target"].split("/", 3)[3]
        # The access log is the server's count; a configuration without one (ACCESS_LOG off: the
        # variant's, or RELOAD_TO's for part of the run) has no count to compare.
        off = [v for v, k in ((variant, knobs[variant]), (reload_to, knobs.get(reload_to))) if k and "ACCESS_LOG=off\n" in k]
        server = {"counted": False, "why": f"no server count: {off[0]}'s access log is off (ACCESS_LOG)"} if off else \
            envoy_side(log_before, log_after, marks.get("probes") or {}, client_statuses, answered) if route else \
            server_side(log_before, log_after, path, client_statuses, answered)
    doc = {"change": kind, "variant": variant, "platform": platform, "reload_to": reload_to if kind == "reload" else None,
           "rate": int(rate), "rate_from": rate_from, "connections": connections, "duration": env["DURATION"],
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
    mx.shell('"$IB_VENV/bin/python" "$IB_ROOT/bench/report" render "$1" >/dev/null', run_dir)
    print("\n" + text + f"\nRun: {run_dir}/ (report.html: the timeline chart)\n", end="", flush=True)
    return (99 if crossed or r["status"] == "crossed" else 0), doc


if __name__ == "__main__":
    mx.entry(main, sys.argv)
