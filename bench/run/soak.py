"""bench/run/soak.py: `./task bench:soak` — an hour of load: drift, or none.

DURATION (1h) of the rps scenario in the open model at LOAD_SHARE % (50) of the capacity a
closed-model run of the variant measures first (or RATE), in DURATION / SOAK_WINDOW windows of
SOAK_WINDOW (1m) each (whole pairs with a control; the wall time adds each window's start). On
the local cluster the windows alternate with a control's: the same rate against the bare-metal
lab's LB (nginx-lb-default, the lab up beside the cluster), so that the hour's noise on this
machine (its speed changes by the hour) is not read as the subject's drift. (On the lab the
subject is the lab's LB: there is no other ingress to alternate with, and the page says so.)
The subject is deployed once: its memory, connections and workers carry over from one of its
windows to the next; each window is a k6 of its own (bench.sh, unmonitored: the figures come
from the cgroups and the engine). Per window: p99; the ingress's CPU per request (its cgroup's
time over the server's count); its memory at the window's end (working set, RSS: its cgroup's);
the client's CPU per request and peak RSS (k6's group, read every second); the connections the
ingress holds open mid-window (nginx's stub_status, Envoy's downstream_cx_active). Each figure's
slope over the soak, with its HAC interval, is judged against a stated size per hour
(bench/report/soak.py FIGURES). Writes soak.json, soak.md, soak.png; PUBLISH=1 also a dated set.
Exit: 0, no drift (or undecided); 99, a drift named; 1, bad input or a window's run that failed.
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
from change_actions import INGRESS, built, deployed, knobs_in, lab_env, lab_knobs  # noqa: E402
from report.soak import analyse, chart, page  # noqa: E402
from routes import Sides, ours_only  # noqa: E402

CONTROL = "nginx-lb-default"  # the lab's LB as the control: the one variant every lab runs
MIN_WINDOW_S = 10
MIN_WINDOWS = 6  # three a side at least: a slope and its interval need three points
MIB = 1024 * 1024


def main(argv):
    rc, _ = run_soak(dict(os.environ), mx.registry())
    return rc


def checked(env, reg):
    """ENV's settings, checked before anything starts: (the soak's seconds, a window's, the share)."""
    ours_only(env, "soak", ("SOAK_WINDOW",), "runs on what it deploys (the local cluster or the lab) beside the lab's control")
    env.setdefault("DURATION", mx.default_of("DURATION", "soak"))
    total_s = mx.duration_s(env["DURATION"])
    window_s = mx.duration_s(env.get("SOAK_WINDOW") or reg["SOAK_WINDOW"]["default"])
    if window_s < MIN_WINDOW_S or total_s < MIN_WINDOWS * window_s:
        raise mx.Bad(f"DURATION {env['DURATION']} and SOAK_WINDOW {window_s:g}s: a window is {MIN_WINDOW_S} s or more and the soak "
                     f"{MIN_WINDOWS} windows or more (three of the subject's and three of the control's at least)")
    return total_s, window_s, int(env.get("LOAD_SHARE") or reg["LOAD_SHARE"]["default"])


def subject_how(variant, lab):
    """("reload" or "httproute", knobs, route) as bench:routes' Sides read them."""
    if lab:
        return "reload", lab_knobs(variant), None
    objects = built(variant)
    if f"Deployment/{INGRESS}" in objects:
        return "reload", knobs_in(objects), None
    return "httproute", None, objects.get("HTTPRoute/bench")


def own_group(role):
    """{controller: directory} of one of our roles' groups (bench/platforms/monitoring/cgroups.sh)."""
    m = rp.mounts()
    if "cpuacct" in m:
        return {c: f"{m[c]}/ingress-bench/{role}" for c in ("cpuacct", "memory") if c in m}
    return {"": f"{m['']}/ingress-bench/{role}"}


def connections_open(c, how, net):
    """The connections the ingress holds open now: nginx's stub_status, or Envoy's gauge (NET:
    the command that reaches its addresses: on the cluster, in the client node's namespace)."""
    if how == "reload":
        r = subprocess.run([*net, "curl", "-sf", "--max-time", "2", f"http://{c.address()}:{lab_env()['LAB_STATUS_PORT']}/stub_status"],
                           capture_output=True, text=True)
        m = re.search(r"Active connections:\s*(\d+)", r.stdout)
        return int(m[1]) if m else None
    pods = c.json("get", "pods", "-l", "ingress-bench/role=ingress")["items"]
    own = mx.envoy_own()
    total = None
    for p in pods:
        r = subprocess.run([*net, "curl", "-sf", "--max-time", "2", f"http://{p['status'].get('podIP')}:19001/stats/prometheus"],
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("envoy_http_downstream_cx_active{") and not own.search(line):
                total = (total or 0) + int(float(line.split()[-1]))
    return total


def window(case, side, n, rate, mdir, m, c, how, net, sides, window_s, t0):
    """One window's load and its figures."""
    client, peak, opened, stop = own_group("loadgen"), [None], [None], threading.Event()

    def sample():
        began = time.monotonic()
        while not stop.wait(1.0):
            try:
                rss = rp.reading(client).get("rss_bytes")
                peak[0] = rss if peak[0] is None or (rss or 0) > peak[0] else peak[0]
                if opened[0] is None and time.monotonic() - began >= window_s / 2:
                    opened[0] = connections_open(c, how, net)
            except (OSError, KeyError, ValueError, RuntimeError):
                pass  # k6 not yet in its group, or gone: the next second
    t = threading.Thread(target=sample, daemon=True)
    start = time.time()
    t.start()
    try:
        r = mx.run_one(case, {"RATE": rate}, f"{side}-{n}", mdir, m)
    finally:
        stop.set()
        t.join(timeout=5)
    end = time.time()
    if r["status"] == "failed":
        raise mx.Bad(f"the {side}'s window {n} failed: {r['reason']} (log: {r['log']})")
    s = json.loads((Path(r["dir"]) / "summary.json").read_text())
    mem = rp.reading(sides.groups()["data_plane"])
    served = (s.get("server") or {}).get("requests")
    ingress_s = (s.get("cpu") or {}).get("ingress_cpu_seconds")
    figures = {"p99_ms": s["result"].get("p99_ms"),
               "ingress_us_per_request": ingress_s / served * 1e6 if ingress_s and served else None,
               "ingress_working_set_mib": mem.get("working_set_bytes", 0) / MIB if mem.get("working_set_bytes") is not None else None,
               "ingress_rss_mib": mem.get("rss_bytes", 0) / MIB if mem.get("rss_bytes") is not None else None,
               "client_us_per_request": (s.get("client") or {}).get("cpu_us_per_request"),
               "client_rss_mib": peak[0] / MIB if peak[0] else None,
               "connections_open": opened[0]}
    return {"side": side, "n": n, "from_s": start - t0, "to_s": end - t0, "t_h": ((start + end) / 2 - t0) / 3600,
            "requests": s["result"]["requests"], "errors": s["result"].get("errors", 0), "status": r["status"],
            "figures": figures, "run": str(r["dir"])}


def run_soak(env, reg):
    """The soak with ENV's settings: (exit code, soak.json's document)."""
    total_s, window_s, share = checked(env, reg)
    win = f"{window_s:g}s"
    cases = [{"name": "probe", "scenario": "rps", "settings": {"DURATION": "5s"}},
             {"name": "subject", "scenario": "rps", "settings": {"DURATION": win, "MONITORING": "0"}}]
    lab = (env.get("PLATFORM") or "local") in mx.platforms(cluster=("none",))
    if not lab:
        cases.append({"name": "control", "scenario": "rps", "platform": "lab", "variant": CONTROL,
                      "settings": {"DURATION": win, "MONITORING": "0"}})
    doc = {"title": "soak", "rounds": 1, "platforms": mx.platforms(cluster=("own", "none")), "cases": cases,
           "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"}]}
    m = mx.parse(doc, "bench:soak", reg)
    mx.resolve(m, env, reg)
    run = m["cases"][1]
    variant, platform = run["variant"], run["platform"]
    how, knobs, route = subject_how(variant, lab)
    out = publish.check(f"soak-{platform}-{variant}") if env.get("PUBLISH") == "1" else None
    mdir, _ = mx.new_results_dir(env, f"soak-{platform}-{variant}")
    (mdir / "logs").mkdir()
    started, steal0 = datetime.now(timezone.utc), publish.cpu_times()
    kubelet_root = mx.shell('echo "$IB_KUBELET_CGROUP"').stdout.strip()
    c, backends = deployed(env, run["env"], lab, {variant: knobs}, route)
    sides = {"subject": Sides(c, how, kubelet_root)}
    # This process stays on the host, where both the lab and the cluster's API are; the cluster's
    # own addresses are the client node's to reach (bench.sh's runs enter it themselves).
    net = []
    if not lab:
        r = mx.shell("load_platform && pf_client_netns", env=run["env"])
        if r.returncode != 0:
            raise mx.Bad(mx.error_line(r.stderr + r.stdout))
        net = ["nsenter", f"--net={r.stdout.strip().splitlines()[-1]}"]
        lc, _ = deployed(env, m["cases"][2]["env"], True, None, None)
        sides["control"] = Sides(lc, "reload", kubelet_root)
    # load_rate reads a list of the probe and the run it sizes: the control's case left out.
    rate, rate_from = load_rate(env, "soak", c, dict(m, cases=m["cases"][:2]), mdir, share, backends, None, tag="soak")
    mx.say("soak", f"{env['DURATION']} at {rate} req/s in windows of {win}" + (f", alternating with the control ({CONTROL} on the lab)" if not lab else
                                                                               " (the lab's LB is the subject: no control)"))
    # DURATION is the windows' load, so their count is fixed whatever each one's start costs or
    # waits (another run's load holds the machine's load lock meanwhile): whole pairs with a control.
    count = int(total_s // window_s)
    count -= 0 if lab else count % 2
    t0, windows = time.time(), []
    for i in range(count):
        side = "subject" if lab or i % 2 == 0 else "control"
        case, target = (run, c) if side == "subject" else (m["cases"][2], sides["control"].c)
        w = window(case, side, i // (1 if lab else 2) + 1, rate, mdir, m, target, "reload" if side == "control" else how,
                   net if side == "subject" else [], sides[side], window_s, t0)
        windows.append(w)
        mx.say("soak", f"{side} window {w['n']}: {w['requests']:,} requests, p99 {w['figures']['p99_ms'] or 0:.2f} ms, ingress "
                       f"{w['figures']['ingress_us_per_request'] or 0:.1f} µs/req, {w['figures']['ingress_working_set_mib'] or 0:.1f} MiB")
    a = analyse(windows)
    result = {"variant": variant, "platform": platform, "how": how, "rate": int(rate), "rate_from": rate_from, "window": win,
              "duration": env["DURATION"], "control": "none (the lab's LB is the subject)" if lab else f"{CONTROL} on the lab",
              "subject_windows": sum(w["side"] == "subject" for w in windows), "control_windows": sum(w["side"] == "control" for w in windows),
              "elapsed_s": time.time() - t0, "windows": windows, "analysis": a, "dir": str(mdir)}
    pub = out and {"out": out, "env": env, "started": started, "steal": steal0,
                   "settings": ("VARIANT", "PLATFORM", "DURATION", "SOAK_WINDOW", "LOAD_SHARE", "RATE"),
                   "what": f"{env['DURATION']} of {variant} ({platform}) against {result['control']}: {a['verdict']}"}
    if publish.write_set("soak", mdir, result, page, chart, [w["run"] for w in windows], pub):
        mx.say("published", str(out))
    return (99 if a["drifts"] else 0), result




if __name__ == "__main__":
    mx.entry(main, sys.argv)
