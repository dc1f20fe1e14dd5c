"""bench/run/migrate.py: `./task bench:migrate FROM=<variant> TO=<variant>` — leaving one ingress for
another (ingress-nginx, retired, for a Gateway API controller): the same traffic on both, side by
side, in one table and one page.

  1. Behaviour: the same requests (PROBES) to each side as deployed, sent from where k6 runs: the
     status code, the response headers (names; values where they are not per response) and the
     body's size. Every difference is listed.
  2. Speed: for each of SCENARIOS (default rps tps throughput) bench:compare BASE=FROM HEAD=TO
     (bench/run/compare.py: the sides in alternated rounds, ROUNDS of each, default 3; or with
     BUDGET, rounds until the rate's interval lies within ±GATE_RATE_DROP % or outside it): each
     side's median rate and rate per ingress CPU (its cgroup time), TO/FROM with its t 95 %
     interval over the rounds' ratios, and p99.
  3. Change under load (CHANGES, default scale route; FROM_CHANGES and TO_CHANGES a side's
     own), on each side: `scale`, a 20 s rps run with its backends scaled 1 -> 3 -> 1 in it: the
     run's errors (the scale-down takes endpoints away while requests are on them) and when
     each scale was asked and done; `route`, bench:change CHANGE=route (bench/run/change.py: a
     route added and the load's edited in one update, under an open-model load at LOAD_SHARE of
     the side's rps median in 2. (else of a capacity run), CHANGE_DURATION long): the errors during the change and when the
     added route and the edit first served. On an ingress you run, none unless asked, and with
     ALLOW_CHANGE=1: bench:change's kinds for it, `rollout`, `kill-backend` and `route` (its
     ROUTE_PARENT and ROUTE_HOST, or the side's own: FROM_ROUTE_PARENT ...).
What it says: "no change" when every judged ratio's interval lies within ±GATE_RATE_DROP % of 1
and no behaviour differs; else each change, with its interval ("undecided" where an interval
straddles the tolerance: more ROUNDS or a quieter machine). A variant against itself says
"no change". Written to RESULTS_ROOT/migrate-<UTC time>/: report.html and report.md (the page),
migrate.json, and each comparison's and change's own directory.
Exit: 0 both sides measured; 1 bad input (one line, nothing started) or a part that failed.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import change as ch  # noqa: E402
import matrix as mx  # noqa: E402
import probes as pr  # noqa: E402
from compare import checked_rounds  # noqa: E402
from report.doc import Doc, Link, write_doc  # noqa: E402

ROOT = mx.ROOT
# Headers whose value is the response's own (a time, a counter, an id): compared by presence.
PER_RESPONSE = {"date", "x-envoy-upstream-service-time", "x-request-id", "last-modified", "etag", "age", "expires"}
# The change under load: a rps run this long, the backends scaled 1 -> SCALE_TO at SCALE_AT[0]
# s into it, back to 1 SCALE_AT[1] s after they are ready.
SCALE_RUN, SCALE_TO, SCALE_AT = "20s", 3, (4, 3)


def differences(probes, a, b):
    """The differences between two sides' answers to PROBES: [(probe, what, FROM's, TO's)]."""
    diffs = []
    for p, x, y in zip(probes, a, b):
        if x["status"] != y["status"]:
            diffs.append((pr.label(p), "status", x["status"] or x.get("error"), y["status"] or y.get("error")))
        if x["body"] != y["body"]:
            diffs.append((pr.label(p), "body bytes", x["body"], y["body"]))
        for h in sorted(x["headers"].keys() | y["headers"].keys()):
            hx, hy = x["headers"].get(h), y["headers"].get(h)
            if hx is None or hy is None:
                diffs.append((pr.label(p), f"header {h}", hx if hx is not None else "—", hy if hy is not None else "—"))
            elif h not in PER_RESPONSE and hx != hy:
                diffs.append((pr.label(p), f"header {h}", hx, hy))
    return diffs


def behaviour(side, env, probes):
    """PROBES sent to SIDE (FROM or TO) from where its k6 runs: an overlay deployed first
    (bench/platforms/deploy.sh), an ingress you run (its INGRESS_PODS) at its TARGET as it is."""
    senv = dict(env, **own_settings(env, side))
    host = senv.get("HOST") or mx.default_of("HOST")
    if running(env, side):
        return pr.sent(pr.requests(probes, senv["TARGET"], host), senv, "cluster")
    senv["VARIANT"] = env[side]
    pods = mx.shell("load_platform && pf_trait k6", env=senv).stdout.strip() == "pods"
    up = mx.shell('load_platform && pf_check rps && pf_cluster_up >/dev/null && bash "$IB_ROOT/bench/platforms/deploy.sh" "$1"',
                  "--for-pods" if pods else "", env=senv)
    if up.returncode != 0:
        raise mx.Bad(f"{env[side]}: {mx.error_line(up.stderr + up.stdout)}")
    reqs = pr.requests(probes, up.stdout.strip().splitlines()[-1], host)
    if pods:
        return pr.sent(reqs, senv, "cluster")
    return pr.sent(reqs, senv, "host", mx.shell("load_platform && pf_client_netns", env=senv).stdout.strip() or None)


# A side's own settings of its changes under load (FROM_CHANGES=..., TO_ROUTE_PARENT=...):
# bench:migrate's and bench:change's, not a run's.
CHANGE_OWN = ("CHANGES", "ROUTE_PARENT", "ROUTE_HOST")
# What a change does to an ingress the suite deployed (an overlay); an ingress you run takes
# bench:change's kinds for it (change.py YOURS_KINDS).
OVERLAY_CHANGES = ("scale", "route")
CHANGE_SAID = {"scale": f"scale 1 → {SCALE_TO} → 1", "route": "a route added", "rollout": "its workload restarted",
               "kill-backend": "a backend pod deleted"}


def own_settings(env, side):
    """SIDE's own settings (FROM_TARGET=...), as bench:compare takes them (BASE_TARGET=...)."""
    return mx.side_settings({k: v for k, v in env.items() if k.removeprefix(f"{side}_") not in CHANGE_OWN}, side, mx.registry())


def side_changes(env, side, ran):
    """SIDE's changes under load, in order: its own (FROM_CHANGES), else CHANGES, else the
    default: the registry's for an overlay, none for an ingress you run (nothing of it changed
    unless asked). Bad input: a kind the side cannot take, or one bench:change refuses for it
    (checked here, before anything runs)."""
    given = env.get(f"{side}_CHANGES", env.get("CHANGES"))
    kinds = (given if given is not None else "" if ran else mx.default_of("CHANGES")).split()
    yours = [k for k in ch.YOURS_KINDS if k != "none"]
    for kind in kinds:
        if ran and kind not in yours:
            raise mx.Bad(f"CHANGES: {kind} on {side} ({env[side]}), an ingress you run: its kinds are {', '.join(yours)}")
        if not ran and kind not in OVERLAY_CHANGES:
            raise mx.Bad(f"CHANGES: {kind} is for an ingress you run; an overlay's ({side}, {env[side]}) are {', '.join(OVERLAY_CHANGES)}")
        if ran:
            try:
                ch.checked(dict(change_env(env, side, ran), CHANGE=kind), mx.registry())
            except mx.Bad as e:
                raise mx.Bad(f"{side}: {e}")
    return kinds


def change_env(env, side, ran):
    """bench:change's settings for a change on SIDE: the shared ones but the comparisons'
    DURATION (CHANGE_DURATION, else bench:change's own), the side's own (its run's; its
    ROUTE_PARENT ...), and its variant or ingress."""
    out = {k: v for k, v in env.items() if k != "DURATION"}
    out.update({n: env[f"{side}_{n}"] for n in CHANGE_OWN[1:] if env.get(f"{side}_{n}")})
    if env.get("CHANGE_DURATION"):
        out["DURATION"] = env["CHANGE_DURATION"]
    # (an ingress you run: its target checked before the behaviour's probes, as the comparisons take it)
    return dict(out, IB_TARGET_CHECKED="1", **own_settings(env, side)) if ran else dict(out, VARIANT=env[side])


def running(env, side):
    """SIDE is an ingress you run (its INGRESS_PODS, or one for both): FROM or TO names it."""
    return bool(own_settings(env, side).get("INGRESS_PODS") or env.get("INGRESS_PODS"))


def logged(args, path, env):
    """A script's exit code and output (kept in PATH too), an interrupt let through to it as
    bench:matrix does (mx.run_to_its_end): its runs end as runs do, their records kept."""
    with open(path, "w") as log:
        rc = mx.run_to_its_end(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    return rc, path.read_text()


def compare(scenario, env, out, ran=()):
    """bench:compare BASE=FROM HEAD=TO for SCENARIO: its compare.json, and its directory."""
    sides = {f"{to}_{k}": v for side, to in (("FROM", "BASE"), ("TO", "HEAD")) for k, v in own_settings(env, side).items()}
    rc, log = logged([sys.executable, str(ROOT / "bench/run/compare.py")], out / f"compare-{scenario}.log", env=dict(
        env, BASE=env["FROM"], HEAD=env["TO"], SCENARIO=scenario, DECIDE="change", RESULTS_ROOT=str(out), **sides,
        **({"IB_TARGET_CHECKED": "1"} if ran else {}),  # checked before the behaviour's probes
        **({} if env.get("BUDGET") else {"ROUNDS": env.get("ROUNDS") or "3"})))
    found = sorted(out.glob("compare-*/compare.json"), key=lambda p: p.stat().st_mtime)
    if rc not in (0, 98, 99) or not found:
        raise mx.Bad(f"bench:compare of {scenario} failed: {mx.error_line(log)}")
    return json.loads(found[-1].read_text()), found[-1].parent


def scaled_under_load(variant, env, out):
    """A rps run of SCALE_RUN on VARIANT with its backends scaled 1 -> SCALE_TO -> 1 in it (the
    scale-down is the disruptive part: endpoints leave while requests are on them): the run's
    requests and errors, and when each scale was asked and done (seconds into the run)."""
    kube = dict(env, KUBECONFIG=mx.shell('echo "$IB_CLUSTER_KUBECONFIG"').stdout.strip())

    def kubectl(*args):
        r = subprocess.run(["kubectl", "-n", "ingress-bench", *args], env=kube, capture_output=True, text=True, timeout=150)
        if r.returncode != 0:
            raise mx.Bad(f"{variant}: kubectl {' '.join(args)}: {mx.error_line(r.stderr)}")
        return r.stdout

    root = out / f"scale-{variant}"
    proc = subprocess.Popen(["bash", str(ROOT / "bench/run/bench.sh"), "rps"], env=dict(
        env, VARIANT=variant, DURATION=SCALE_RUN, RESULTS_ROOT=str(root)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0, marks = None, {}
    try:
        # The load has begun once bench.sh says k6's address (the deploy and checks before it).
        for line in proc.stdout:
            if line.startswith("monitoring    Prometheus") or line.startswith("target ") or "k6 web dashboard" in line:
                break
        t0 = time.time()
        time.sleep(SCALE_AT[0])
        for step, n in (("up", SCALE_TO), ("down", 1)):
            marks[f"{step}_asked_s"] = round(time.time() - t0, 1)
            kubectl("scale", "deployment/backend", f"--replicas={n}")
            kubectl("rollout", "status", "deployment/backend", "--timeout=120s")
            marks[f"{step}_done_s"] = round(time.time() - t0, 1)
            time.sleep(SCALE_AT[1])
        log = proc.stdout.read()
    finally:
        rc = proc.wait()
    (out / f"scale-{variant}.log").write_text(log if t0 else "")
    runs = sorted(root.glob("*/summary.json"))
    if not runs:
        return {"error": f"the run did not finish (exit {rc})"}
    r = json.loads(runs[-1].read_text())["result"]
    return {"requests": r["requests"], "errors": r["errors"], **marks, "run": str(runs[-1].parent)}


def speed_rows(scenario, doc, tol):
    """The table's rows of one comparison: the judged rate, the other rate, p99."""
    rows = []
    for m in doc["metrics"]:
        if m["key"] not in ("rate", "per_cpu", "p99"):
            continue
        iv = m.get("interval")
        judged = m.get("says") != "shown, not judged"
        if iv is None:
            says = "no value"
        elif not judged:
            says = "shown"
        elif not m["decided"] and m["key"] != "p99":  # one round: a point, not an interval
            says = "undecided"
        elif m["better"] == "higher":
            says = "no change" if iv["low"] >= 1 - tol and iv["high"] <= 1 + tol else \
                "faster" if iv["low"] > 1 + tol else "slower" if iv["high"] < 1 - tol else "undecided"
        else:  # a latency: lower is better
            says = "no change" if iv["low"] >= 1 / (1 + tol) and iv["high"] <= 1 + tol else \
                "lower" if iv["high"] < 1 / (1 + tol) else "higher" if iv["low"] > 1 + tol else "undecided"
        rows.append({"scenario": scenario, "metric": m["title"], "from": m["base"].get("median"), "to": m["head"].get("median"),
                     "ratio": iv and iv["ratio"], "low": iv and iv["low"], "high": iv and iv["high"], "format": m["format"],
                     "judged": judged and m["key"] != "p99" or False, "says": says,
                     "cv": [m["base"].get("cv_percent"), m["head"].get("cv_percent")]})
    return rows


def verdict_of(rows, diffs, tol, failed=()):
    """The migration's one line: what changed (a judged rate faster or slower, a behaviour
    difference), else what did not complete (FAILED: a comparison or change that failed
    measured nothing, so nothing can be "no change"), else what is undecided, else no change
    within ±TOL."""
    changed = [f"{r['scenario']} {r['metric']} {r['says']} ({r['ratio']:.3f}×, {r['low']:.3f}–{r['high']:.3f})"
               for r in rows if r["judged"] and r["says"] not in ("no change", "undecided")]
    open_ = [f"{r['scenario']} {r['metric']}" for r in rows if r["judged"] and r["says"] == "undecided"]
    if diffs:
        changed.append(f"{len(diffs)} behaviour difference(s)")
    if changed:
        return "changed: " + "; ".join(changed)
    if failed:
        return "incomplete: " + "; ".join(failed)
    return f"undecided: {', '.join(open_)} straddle ±{tol * 100:g} %" if open_ else f"no change (within ±{tol * 100:g} %)"


def fmt(v, f):
    return "—" if v is None else format(v, f)


def page(out, env, rows, diffs, changes, verdict, notes, probes_said, no_changes="CHANGES is empty"):
    doc = Doc(f"migrate: {env['FROM']} → {env['TO']}", f"{verdict}; " + "; ".join(notes), wide=True)
    doc.add("h2", "Speed: TO/FROM per scenario (alternated rounds, t 95 % interval)")
    doc.add("table", ["scenario", "metric", env["FROM"], env["TO"], "TO/FROM", "95 % interval", "CV FROM / TO", "says"],
            [[r["scenario"], r["metric"], fmt(r["from"], r["format"]), fmt(r["to"], r["format"]),
              fmt(r["ratio"], ".3f") + ("×" if r["ratio"] else ""),
              f"{fmt(r['low'], '.3f')}–{fmt(r['high'], '.3f')}" if r["low"] is not None else "—",
              " / ".join("—" if c is None else f"{c:.1f} %" for c in r["cv"]), r["says"]] for r in rows])
    # (the scale's own run said only where one ran: an ingress you run has none)
    scaled = any(r[0] == CHANGE_SAID["scale"] for r in changes or [])
    doc.add("h2", "Change under load: " + (f"scale, the backends scaled 1 → {SCALE_TO} → 1 during a {SCALE_RUN} rps run; the others "
                                           "bench:change's" if scaled else "bench:change's runs") + ", at LOAD_SHARE of the side's rps median above")
    doc.add("table", ["change", "variant", "errors in the run", "when"], changes or [["none", "", "", no_changes]])
    doc.add("h2", f"Behaviour: {len(diffs)} difference(s) on {probes_said}")
    doc.add("table", ["request", "what", env["FROM"], env["TO"]], [list(map(str, d)) for d in diffs] or [["none", "", "", ""]])
    doc.add("p", Link("migrate.json: every value", "migrate.json"))
    write_doc(doc, out)
    return doc


def change_under_load(kind, side, env, out, ran, capacity=None):
    """bench:change CHANGE=KIND on SIDE (its own CHANGE_AT; CHANGE_DURATION long; its load
    LOAD_SHARE % of CAPACITY, the side's rate the comparison measured, when there is one, else
    of a capacity run of its own): the errors during the change, how long it took, when an
    added route (and the overlays' edit) first served (s from the change's start), its verdict."""
    root = out / f"{kind}-{env[side]}"
    cenv = change_env(env, side, ran)
    if capacity and not cenv.get("RATE"):
        cenv["RATE"] = str(max(1, round(capacity * int(env.get("LOAD_SHARE") or mx.default_of("LOAD_SHARE")) / 100)))
    rc, log = logged([sys.executable, str(ROOT / "bench/run/change.py")], out / f"{kind}-{env[side]}.log",
                     env=dict(cenv, CHANGE=kind, RESULTS_ROOT=str(root)))
    found = sorted(root.glob(f"change-{kind}-*/change/change.json"))
    if rc not in (0, 99) or not found:
        return {"error": mx.error_line(log)}
    doc = json.loads(found[-1].read_text())
    a = doc["analysis"]
    d = a["during"] or a["run"]
    return {"requests": d["requests"], "errors": d["errors"], "change_s": a["change_ms"] / 1000, "rate": doc["rate"],
            **{k: a[f"{m}_after_ms"] / 1000 for k, m in (("serving_s", "serving"), ("edited_s", "edited")) if f"{m}_after_ms" in a},
            "verdict": doc["verdict"], "run": doc["run"]}


def change_row(kind, variant, c):
    what = CHANGE_SAID[kind] + (", the load's edited" if "edited_s" in c else "")
    if "error" in c:
        return [what, variant, f"did not complete: {c['error']}", ""]
    if kind == "scale":
        return [what, variant, f"{c['errors']:,} of {c['requests']:,}",
                f"up at {c['up_asked_s']} s (ready {c['up_done_s']} s), down at {c['down_asked_s']} s (done {c['down_done_s']} s)"]
    when = (f"added route's first 200 after {c['serving_s']:.2f} s, the edit after {c['edited_s']:.2f} s" if "edited_s" in c else
            f"added route's first answer after {c['serving_s']:.2f} s" if kind == "route" else f"done after {c['change_s']:.2f} s")
    return [what, variant, f"{c['errors']:,} of {c['requests']:,} during the change", f"{when}: {c['verdict']}"]


def main(argv):
    env = dict(os.environ)
    names = [n for n in ("FROM", "TO", "SCENARIOS", "ROUNDS", "BUDGET", "CHANGES", "CHANGE_DURATION", "GATE_RATE_DROP") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}] +
                    [{"where": f"{side}_{n}: ", "names": [n], "env": {n: env[f"{side}_{n}"]}}
                     for side in ("FROM", "TO") for n in CHANGE_OWN if env.get(f"{side}_{n}")])
    if env.get("ROUNDS") and env.get("BUDGET"):
        raise mx.Bad("give ROUNDS (that many rounds) or BUDGET (rounds until each scenario's rate decides), not both")
    if env.get("ROUNDS"):  # bench:compare's rule, before anything is deployed
        checked_rounds(int(env["ROUNDS"]))
    if not env.get("FROM") or not env.get("TO"):
        raise mx.Bad("FROM and TO are both needed: ./task bench:migrate FROM=<variant you run> TO=<its replacement>")
    ran = [s for s in ("FROM", "TO") if running(env, s)]
    changes = {side: side_changes(env, side, side in ran) for side in ("FROM", "TO")}
    # Each side checked before anything (an ingress you run: its target's requests counted, both at once)
    checks = mx.at_once({side: (lambda side=side: mx.existing_checked(dict(env, **own_settings(env, side))) if side in ran
                             else mx.shell('need_overlay "$1"', env[side], env=env)) for side in ("FROM", "TO")})
    for side in ("FROM", "TO"):
        if checks[side].returncode != 0:
            raise mx.Bad(f"{side}: {mx.error_line(checks[side].stderr)}")
    scenarios = (env.get("SCENARIOS") or mx.default_of("SCENARIOS")).split()
    probes, probes_said = pr.chosen(env, mx.shell('echo "${KUBECONFIG:-$IB_CLUSTER_KUBECONFIG}"', env=env).stdout.strip())
    probes = pr.for_sides(probes, ran)
    tol = float(env.get("GATE_RATE_DROP") or mx.default_of("GATE_RATE_DROP")) / 100
    out = Path(env.get("RESULTS_ROOT") or ROOT / "results").resolve() / f"migrate-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    out.mkdir(parents=True)
    notes, failed = [], []

    # TO first: FROM is then deployed when the comparisons' first round starts with it (one
    # switch of variant fewer; Envoy Gateway's deploy takes 34 s).
    mx.say("migrate", f"behaviour: {probes_said}, to {env['TO']} and to {env['FROM']}")
    if ran == ["FROM", "TO"]:  # nothing deployed: both at once, each a pod's start
        answers = mx.at_once({s: (lambda s=s: behaviour(s, env, probes)) for s in ("TO", "FROM")})
    else:
        answers = {s: behaviour(s, env, probes) for s in ("TO", "FROM")}
    diffs = differences(probes, answers["FROM"], answers["TO"])

    rows, compares, compares_rounds, capacity = [], {}, {}, {}
    for s in scenarios:
        mx.say("migrate", f"speed: {s}, {env['FROM']} against {env['TO']} in alternated rounds")
        try:
            doc, d = compare(s, env, out, ran)
            compares[s], compares_rounds[s] = str(d), doc["rounds"]
            if s == "rps":  # each side's capacity, which its changes' loads take a share of
                rate = next(m for m in doc["metrics"] if m["key"] == "rate")
                capacity = {"FROM": rate["base"].get("median"), "TO": rate["head"].get("median")}
            rows += speed_rows(s, doc, tol)
        except mx.Bad as e:
            failed.append(str(e))
    kinds = list(dict.fromkeys(changes["FROM"] + changes["TO"]))
    change_rows, changed_under_load = [], {k: {} for k in kinds}
    for kind in kinds:
        for side in (s for s in ("FROM", "TO") if kind in changes[s]):
            if kind == "scale":
                mx.say("migrate", f"change under load: the backends of {env[side]} scaled 1 → {SCALE_TO} → 1 during a {SCALE_RUN} run")
                c = scaled_under_load(env[side], env, out)
            else:
                mx.say("migrate", f"change under load: {CHANGE_SAID[kind]} on {env[side]} (bench:change CHANGE={kind})")
                c = change_under_load(kind, side, env, out, side in ran, capacity.get(side))
            changed_under_load[kind][side] = c
            failed += [f"{kind} on {env[side]}: {c['error']}"] if "error" in c else []
            change_rows.append(change_row(kind, env[side], c))

    verdict = verdict_of(rows, diffs, tol, failed)
    notes.append("rounds of each side per scenario, alternated"
                 + (f" until its rate decided (within ±{tol * 100:g} % or outside it), within BUDGET {env['BUDGET']}" if env.get("BUDGET") else "")
                 + ": " + ", ".join(f"{s} {n}" for s, n in compares_rounds.items()))
    notes += [f"failed: {f}" for f in failed]
    page(out, env, rows, diffs, change_rows, verdict, notes, probes_said,
         *([f"{' and '.join(env[s] for s in ran)}: an ingress you run, changed only when asked (CHANGES with ALLOW_CHANGE=1)"] if ran else []))
    (out / "migrate.json").write_text(json.dumps({
        "from": env["FROM"], "to": env["TO"], "verdict": verdict, "tolerance": tol, "speed": rows,
        "behaviour": {"probes": [pr.label(p) for p in probes], "probes_from": probes_said, "answers": answers, "differences": diffs},
        "changes": changed_under_load, "compares": compares, "failed": failed}, indent=1) + "\n")
    print((out / "report.md").read_text(), end="")
    mx.say("migrate", f"verdict: {verdict}")
    mx.say("results", f"{out}/ (page: {out}/report.html)")
    return 1 if failed else 0


if __name__ == "__main__":
    mx.entry(main, sys.argv)
