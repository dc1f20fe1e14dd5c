"""bench/run/routes.py: `./task bench:routes` — routes by the thousand, under load.

The variant's configuration grows and shrinks through ROUTE_STEPS (default 10, 100, 1,000, then
back to 10): route I is the exact path /routes/I, served from the load's payload on the same
backends, so every route is real work for the ingress's router and none for the backends. Each
step runs under a load of its own on the variant's one route (the rps scenario in the open
model at LOAD_SHARE % of the capacity a closed-model run measures first, or RATE; DURATION
long), the routes moved to the step's count CHANGE_AT into it. How the variant takes them:
  reload     an nginx-lb (the cluster's or the lab's): its configuration rendered with ROUTES
             and nginx reloaded in place (lb.sh / lab.sh reload), as an ingress controller
             renders Ingress paths: one reload a step
  httproute  a Gateway API variant: one HTTPRoute per route beside its own, created or deleted
             through the API server, which its controller programs (Envoy Gateway: xDS)
Per step: from the step's start, each added route's first 200, or each removed one answering
as a path that was never a route does there (/routes/0), probed on new connections in turn (at
most route_probes.PROBES_PER_S; the longest round is the figures' resolution); the load's errors
and p99 from the step's start to its last route (bench/report/change.py on the load's timeline);
the reloads nginx logged or Envoy's route configuration reloads (RDS config_reload: a
controller may batch changes); then at rest (the load over, the routes settled) the controller's
and the data plane's CPU over REST_S and their memory (working set and RSS, their cgroups').
Writes routes.json, routes.md and routes.png (bench/report/routes.py) beside each step's run;
PUBLISH=1: also a dated set of docs/results. The routes are removed after, whatever happened.
Exit: 0; 1 bad input, a failed run, or a step whose routes did not all answer within WAIT_S.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402
import publish  # noqa: E402
import route_probes as rp  # noqa: E402
from change import load_rate  # noqa: E402
from change_actions import INGRESS, Lab, built, deployed, host_of, knobs_in, lab_knobs, now_ms, reload_into, wait_until  # noqa: E402
from report.change import analyse  # noqa: E402
from report.routes import chart, page, step_line  # noqa: E402

MAX_ROUTES = 20000  # ROUTE_STEPS' pattern allows 5 digits; the paced probes take 20 s at this many
STEADY_MIN_S, AFTER_MIN_S = 3, 5  # the load's seconds before the step, and after its start, at least
WAIT_S = 300  # a step's longest wait for its routes (Envoy Gateway at thousands of HTTPRoutes)
SETTLE_S, REST_S = 2, 5  # at rest: after the load and the routes, then the CPU's window
CONTROLLER = "envoy-gateway"  # the Gateway API variants' controller Deployment (components/envoy-gateway)


def main(argv):
    rc, _ = run_routes(dict(os.environ), mx.registry())
    return rc


def ours_only(env, task, names, what):
    """The checks bench:routes and bench:soak share: NAMES (and the load's settings) by the
    registry's rules, on what the suite deploys (the local cluster or the lab), the rps scenario."""
    given = [n for n in (*names, "LOAD_SHARE", "DURATION", "RATE") if env.get(n)]
    mx.check_values([{"where": "", "names": given, "env": env}])
    if env.get("TARGET") or env.get("INGRESS_PODS"):
        raise mx.Bad(f"bench:{task} {what}: unset TARGET and INGRESS_PODS")
    ours = mx.platforms(cluster=("own", "none"))
    if env.get("PLATFORM", "local") not in ours:
        raise mx.Bad(f"bench:{task} runs on the local cluster or the lab (PLATFORM={'|'.join(ours)}), got PLATFORM={env['PLATFORM']}")
    if env.get("SCENARIO", "rps") != "rps":
        raise mx.Bad(f"bench:{task} runs the rps scenario (a steady keep-alive load): unset SCENARIO")


def checked(env, reg):
    """ENV's settings, checked before anything starts: (the steps, CHANGE_AT's seconds, the share)."""
    ours_only(env, "routes", ("ROUTE_STEPS", "CHANGE_AT"), "adds routes to what it deploys (the local cluster or the lab)")
    text = env.get("ROUTE_STEPS") or reg["ROUTE_STEPS"]["default"]
    steps, prev = [int(x) for x in text.split(",")], 0
    for i, n in enumerate(steps, 1):
        if n > MAX_ROUTES:
            raise mx.Bad(f"ROUTE_STEPS={text}: step {i} asks for {n:,} routes, more than {MAX_ROUTES:,}")
        if n == prev:
            raise mx.Bad(f"ROUTE_STEPS={text}: step {i} ({n}) changes nothing: each count must differ from the one before it "
                         "(the variant as deployed has 0)")
        prev = n
    env.setdefault("DURATION", mx.default_of("DURATION", "routes"))
    at_s = mx.duration_s(env.get("CHANGE_AT") or mx.default_of("CHANGE_AT", "routes"))
    run_s = mx.duration_s(env["DURATION"])
    if at_s < STEADY_MIN_S or run_s < at_s + AFTER_MIN_S:
        raise mx.Bad(f"CHANGE_AT {at_s:g}s and DURATION {env['DURATION']}: each step's load needs {STEADY_MIN_S} s or more before "
                     f"its routes change and {AFTER_MIN_S} s or more after")
    return steps, at_s, int(env.get("LOAD_SHARE") or reg["LOAD_SHARE"]["default"])


def subject(variant, lab):
    """How VARIANT takes routes: ("reload", its knobs, None) or ("httproute", None, its HTTPRoute
    as built); bad input for a variant that takes none."""
    if lab:
        return "reload", lab_knobs(variant), None
    objects = built(variant)
    if f"Deployment/{INGRESS}" in objects:
        return "reload", knobs_in(objects), None
    if "HTTPRoute/bench" in objects:
        return "httproute", None, objects["HTTPRoute/bench"]
    raise mx.Bad(f"VARIANT={variant} takes no routes here: bench:routes needs an nginx-lb (its configuration, reloaded) "
                 "or a Gateway API variant (HTTPRoutes through its controller)")


class Sides:
    """Where a variant's data plane and controller run, and what they say of their updates."""
    def __init__(self, c, how, kubelet_root):
        self.c, self.how, self.kubelet_root = c, how, kubelet_root

    def container(self, selector, name):
        pods = [p for p in self.c.json("get", "pods", "-l", selector)["items"] if not p["metadata"].get("deletionTimestamp")]
        if len(pods) != 1:
            raise RuntimeError(f"{len(pods)} pods match {selector}: one was expected")
        cid = next(s["containerID"] for s in pods[0]["status"]["containerStatuses"] if s["name"] == name)
        return pods[0], rp.of_container(self.kubelet_root, pods[0]["metadata"]["uid"], cid.split("://", 1)[1])

    def groups(self):
        """{"data_plane": its cgroup dirs, "controller": its or absent}."""
        if isinstance(self.c, Lab):
            return {"data_plane": rp.of_pid(int((self.c.prefix / "logs/nginx.pid").read_text()))}
        if self.how == "reload":
            return {"data_plane": self.container(f"app.kubernetes.io/name={INGRESS}", "nginx")[1]}
        selector = ",".join(f"{k}={v}" for k, v in self.c.json("get", "deployment", CONTROLLER)["spec"]["selector"]["matchLabels"].items())
        return {"data_plane": self.container("ingress-bench/role=ingress", "envoy")[1], "controller": self.container(selector, CONTROLLER)[1]}

    def updates(self):
        """The data plane's count of configuration updates so far."""
        if isinstance(self.c, Lab):
            return rp.nginx_reloads((self.c.prefix / "logs/error.log").read_text())
        if self.how == "reload":
            pod = self.c.pods(INGRESS)[0]
            return rp.nginx_reloads(self.c.kubectl("exec", pod, "-c", "nginx", "--", "cat", "/run/lb/logs/error.log", timeout=30))
        pod, _ = self.container("ingress-bench/role=ingress", "envoy")
        own = mx.envoy_own()
        r = subprocess.run(["curl", "-sf", "--max-time", "5", f"http://{pod['status']['podIP']}:19001/stats/prometheus"],
                           capture_output=True, text=True)
        return rp.rds_reloads(r.stdout, own)

    def at_rest(self):
        time.sleep(SETTLE_S)
        dirs = self.groups()
        first = {k: rp.reading(d) for k, d in dirs.items()}
        time.sleep(REST_S)
        return {k: rp.at_rest(first[k], rp.reading(d)) for k, d in dirs.items()}


def apply(c, how, variant, route, prev, n):
    """The routes moved from PREV to N."""
    if how == "reload":
        reload_into(c, variant, f"ROUTES={n}\nROUTES_TO={rp.TO}\n" if n else "")
    elif n > prev:
        c.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": rp.httproutes(route, prev, n)}), timeout=WAIT_S)
    else:
        for selector in rp.selectors(n, prev):
            c.kubectl("delete", "httproute", "--wait=false", "-l", selector, timeout=WAIT_S)


def step(c, how, variant, route, prev, n, addr, host, unrouted, run_dir, at_s, marks, failures):
    """In a thread beside the step's load: CHANGE_AT into it, the routes moved and watched."""
    try:
        wait_until(lambda: (run_dir / "k6.log").exists(), "k6 starting", timeout=600, every=0.05)
        time.sleep(at_s)
        failed = []

        def update():
            try:
                apply(c, how, variant, route, prev, n)
                marks["applied"] = now_ms()
            except Exception as e:  # noqa: BLE001  (the watch stops on it)
                failed.append(e)
        t = threading.Thread(target=update, daemon=True)
        marks["start"] = now_ms()
        t.start()
        want, paths = (200, rp.paths(prev, n)) if n > prev else (unrouted, rp.paths(n, prev))
        found, sent, rounds = rp.watch(addr, host, paths, want, marks["start"], WAIT_S, stop=lambda: bool(failed))
        t.join(timeout=WAIT_S)
        marks.update(want=want, routes=len(paths), found_ms=sorted(by for _, by in found.values()),
                     after_ms=sorted(after for after, _ in found.values()), probes=sent, round_ms=max(rounds or [0]))
        if failed:
            raise failed[0]
        if len(found) < len(paths):
            raise RuntimeError(f"{len(paths) - len(found):,} of {len(paths):,} routes did not answer {want} within {WAIT_S} s")
        marks["end"] = marks["start"] + round(marks["found_ms"][-1])
    except Exception as e:  # noqa: BLE001  (said by the main thread, after the step's run)
        failures.append(f"step {prev} -> {n} routes: {e}")


def run_routes(env, reg):
    """ROUTE_STEPS under load on ENV's variant: (exit code, routes.json's document)."""
    steps, at_s, share = checked(env, reg)
    doc = {"title": "routes", "rounds": 1, "platforms": mx.platforms(cluster=("own", "none")),
           "cases": [{"name": "probe", "scenario": "rps", "settings": {"DURATION": "5s"}},
                     {"name": "step", "scenario": "rps", "settings": {"DURATION": env["DURATION"]}}],
           "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]}
    m = mx.parse(doc, "bench:routes", reg)
    mx.resolve(m, env, reg)
    run = m["cases"][1]
    variant, platform = run["variant"], run["platform"]
    lab = mx.traits(platform)["cluster"] == "none"
    how, knobs, route = subject(variant, lab)
    out = None
    if env.get("PUBLISH") == "1":
        out = publish.check(f"routes-{platform}-{variant}")
    if not lab:
        mx.enter_client_side(run["env"])
    mdir, _ = mx.new_results_dir(env, f"routes-{platform}-{variant}")
    (mdir / "logs").mkdir()
    started, steal0 = datetime.now(timezone.utc), publish.cpu_times()
    c, backends = deployed(env, run["env"], lab, {variant: knobs}, route)
    sides = Sides(c, how, mx.shell('echo "$IB_KUBELET_CGROUP"').stdout.strip())
    addr, host = c.address(), host_of(c)
    unrouted = rp.status(addr, f"{rp.PREFIX}0", host)
    if unrouted in (None, 200):
        raise mx.Bad(f"a path that is no route (/routes/0) answers {unrouted or 'nothing'} on {variant}: a removed route could "
                     "not be told from a served one")
    rate, rate_from = load_rate(env, "routes", c, m, mdir, share, backends, None, tag="routes")
    mx.say("routes", f"{' -> '.join(map(str, steps))} routes on {variant} ({how}), {rate} req/s for {env['DURATION']} a step, "
                     f"the routes {at_s:g} s into it")
    current, rows = 0, []
    try:
        rows.append({"routes": 0, "rest": sides.at_rest(), "updates_total": sides.updates()})
        for n in steps:
            row = {"routes": n, "from": current}
            before = sides.updates()
            marks, failures = {}, []
            testid = f"step-{len(rows)}-{n}"
            t = threading.Thread(target=step, daemon=True,
                                 args=(c, how, variant, route, current, n, addr, host, unrouted, mdir / testid, at_s, marks, failures))
            t.start()
            r = mx.run_one(run, {"RATE": rate}, testid, mdir, m)
            t.join(timeout=WAIT_S + 5)
            current = n  # whatever the step reached: the restore removes every route
            if r["status"] == "failed":
                raise mx.Bad(f"step {len(rows)}'s run failed: {r['reason']} (log: {r['log']})")
            if failures:
                raise mx.Bad(failures[0])
            tl = json.loads((Path(r["dir"]) / "timeline.json").read_text())
            a, _ = analyse(tl, {k: marks[k] for k in ("start", "end") if k in marks})
            row.update(marks={k: v for k, v in marks.items() if k not in ("found_ms", "after_ms")}, found_ms=marks["found_ms"],
                       after_ms=marks["after_ms"], analysis=a,
                       run=str(r["dir"]), rest=sides.at_rest())
            row["updates"] = sides.updates() - before
            rows.append(row)
            mx.say("routes", step_line(row))
    finally:
        restore(c, how, variant, current, addr, host, unrouted)
    result = {"variant": variant, "platform": platform, "how": how, "steps": steps, "rate": int(rate), "rate_from": rate_from,
              "duration": env["DURATION"], "change_at_s": at_s, "unrouted_status": unrouted, "probes_per_s": rp.PROBES_PER_S,
              "rows": rows, "dir": str(mdir)}
    pub = out and {"out": out, "env": env, "started": started, "steal": steal0,
                   "settings": ("VARIANT", "PLATFORM", "ROUTE_STEPS", "DURATION", "CHANGE_AT", "LOAD_SHARE", "RATE"),
                   "what": f"{' → '.join(map(str, steps))} routes on {variant} ({platform}) under load"}
    if publish.write_set("routes", mdir, result, page, chart, [r["run"] for r in rows[1:]], pub):
        mx.say("published", str(out))
    return 0, result


def restore(c, how, variant, current, addr, host, unrouted):
    """The variant as deployed again: every route of ours gone, as a new connection finds it."""
    if current == 0:
        return
    if how == "reload":
        reload_into(c, variant)
    else:
        c.kubectl("delete", "httproute", "-l", f"{rp.LABEL}=1", "--wait=false", timeout=WAIT_S)
    found, _, _ = rp.watch(addr, host, rp.paths(0, current), unrouted, now_ms(), WAIT_S)
    if len(found) < current:
        mx.say("routes", f"{current - len(found):,} of {current:,} routes still answered after {WAIT_S} s: the variant is not as deployed")




if __name__ == "__main__":
    mx.entry(main, sys.argv)
