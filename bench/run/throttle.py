"""bench/run/throttle.py: `./task bench:throttle` — does a fractional ingress CPU (a CFS quota, what
INGRESS_CPU=auto gives on a small host) make the latency figures? p99 at INGRESS_CPU (default
500m) against p99 on a whole pinned core, each loaded at LOAD_SHARE (default 50 %) of its own
capacity, so both run at the same share of what they can do; the kubelet's CFS period
(cpuCFSQuotaPeriod, bench/platforms/local/kubelet.yaml) decides how long a throttled ingress waits.

Each round, in alternated order, both placements: a closed-model run (CAPACITY_DURATION, 5 s)
measures the capacity, an open-model run (the native engine, DURATION, default 10 s) at its
share measures p99 from each request's due time. Prints each round, the medians, and the ratio
of the share's p99 to the pinned core's (of their geometric means) with its Welch t interval (the target: at most 1.2);
and the capacity runs' p99 in mean response times (connections / rate, Little's law): the two
placements at saturation, where a throttled quota shows most.
Runs are cases of the one matrix runner (bench/run/matrix.py), kept under RESULTS_ROOT. Exit 0
when every run finished, 1 otherwise."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner)
from matrix import ratio_interval, stats  # noqa: E402  (bench/report/stats.py)

CAPACITY_DURATION = "5s"
TARGET_RATIO = 1.2


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    share = env.get("INGRESS_CPU") or "500m"
    if share in ("auto", "overlay"):  # the default's words: the share is this script's to set
        share = "500m"
    if not share.endswith("m") or int(share[:-1]) >= 1000:
        raise mx.Bad(f"INGRESS_CPU must be a fraction of a core like 500m for bench:throttle (the whole core is the other side), got '{share}'")
    load = int(env.get("LOAD_SHARE") or reg["LOAD_SHARE"]["default"])
    env.update(PLATFORM=env.get("PLATFORM") or "local", ENGINE="native", MONITORING=env.get("MONITORING") or "0")
    if env["PLATFORM"] not in mx.platforms(cluster="own"):  # the kubelet's CFS period on our node
        raise mx.Bad(f"bench:throttle measures the local cluster's CFS quota (PLATFORM=local), got PLATFORM={env['PLATFORM']}")
    env.pop("INGRESS_CPU", None)
    cases = [{"name": f"{side}-{kind}", "scenario": "rps",
              "settings": {"INGRESS_CPU": cpu, "DURATION": CAPACITY_DURATION if kind == "capacity" else env.get("DURATION") or mx.default_of("DURATION"),
                           # the latency limits out of reach: p99 is what is measured, not judged
                           "P95_MS": "3600000", "P99_MS": "3600000"}}
             for side, cpu in (("pinned", "1"), ("share", share)) for kind in ("capacity", "load")]
    doc = {"title": "bench:throttle", "rounds": 3, "platforms": mx.platforms(cluster="own"), "cases": cases,
           "columns": [{"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f"},
                       {"key": "p99", "title": "p99 ms", "value": "result.p99_ms", "format": ".2f"},
                       {"key": "period", "title": "CFS period µs", "value": "cpu.ingress_cfs_period_us", "format": ".0f"}]}
    m = mx.parse(doc, "bench:throttle", reg)
    rounds = mx.resolve(m, env, reg)
    by = {c["name"]: c for c in m["cases"]}
    mdir, _ = mx.new_results_dir(env, "throttle")
    (mdir / "logs").mkdir()
    mx.say("throttle", f"p99 at INGRESS_CPU={share} against a whole pinned core, each at {load} % of its own capacity, "
                       f"{rounds} rounds alternated ({mdir})")
    p99 = {"pinned": [], "share": []}
    # At saturation (the capacity runs, a closed model): p99 in mean response times (Little's
    # law: connections / rate), which puts both placements at the same share of their capacity.
    saturated = {"pinned": [], "share": []}
    connections = int(env.get("CONNECTIONS") or 50)
    rows, period = [], None
    for i in range(1, rounds + 1):
        for side in (("pinned", "share") if i % 2 else ("share", "pinned")):
            cap = mx.run_one(by[f"{side}-capacity"], {}, f"r{i}-{side}-capacity", mdir, m, i)
            if cap["status"] == "failed" or not cap["values"].get("rps"):
                raise mx.Bad(f"the capacity run at {side} failed: {cap['reason']} (log: {cap['log']})")
            rate = max(1, round(cap["values"]["rps"] * load / 100))
            saturated[side].append(cap["values"]["p99"] / (connections / cap["values"]["rps"] * 1000))
            run = mx.run_one(by[f"{side}-load"], {"RATE": str(rate)}, f"r{i}-{side}-load", mdir, m, i)
            if run["status"] == "failed" or run["values"].get("p99") is None:
                raise mx.Bad(f"the load at {side} failed: {run['reason']} (log: {run['log']})")
            p99[side].append(run["values"]["p99"])
            if side == "share":  # the kubelet's cpuCFSQuotaPeriod, as the ingress's cgroup has it
                period = run["values"].get("period")
            rows.append({"round": i, "side": side, "capacity_rps": cap["values"]["rps"], "rate": rate, "p99_ms": run["values"]["p99"]})
            print(f"round {i}  {side:<6} {'1' if side == 'pinned' else share:>5} CPU: capacity {cap['values']['rps']:,.0f} req/s, "
                  f"{rate:,} req/s -> p99 {run['values']['p99']:.2f} ms", flush=True)
    st = {k: stats(v) for k, v in p99.items()}
    interval = ratio_interval(p99["share"], p99["pinned"])
    ratio = interval and interval["ratio"]
    verdict = "within" if interval and interval["high"] <= TARGET_RATIO else \
        "not within" if interval and interval["low"] > TARGET_RATIO else "undecided against"
    sat = {k: stats(v)["median"] for k, v in saturated.items()}
    doc = {"ingress_cpu": share, "load_share": load, "rounds": rounds, "cfs_period_us": period, "runs": rows,
           "saturated_p99_in_mean_response_times": sat,
           "p99_ms": {k: {"median": s["median"], "values": s["values"]} for k, s in st.items()},
           "ratio": ratio, "interval": interval, "target": TARGET_RATIO, "verdict": verdict}
    (mdir / "throttle.json").write_text(json.dumps(doc, indent=2) + "\n")
    lo_hi = f"{interval['low']:.2f}-{interval['high']:.2f}" if interval else "n/a"
    print(f"p99 at {share} (CFS period {period:.0f} µs): {st['share']['median']:.2f} ms, on a whole pinned core "
          f"{st['pinned']['median']:.2f} ms (medians of {rounds}); ratio {ratio:.2f} (95 % interval {lo_hi}): "
          f"{verdict} {TARGET_RATIO}")
    print(f"at saturation (closed model, {connections} connections): p99 is {sat['share']:.2f} mean response times at {share}, "
          f"{sat['pinned']:.2f} on the pinned core (ratio {sat['share'] / sat['pinned']:.2f})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except mx.Bad as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
