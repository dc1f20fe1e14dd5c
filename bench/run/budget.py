"""bench/run/budget.py PROBE_RUN_DIR PROBE_SHARE HOST_CPUS [INGRESS_NODE_CPUS]: the ingress's CPU
budget on a host the client shares (the local platform), from a short probe run (bench/run/bench.sh
runs it first when INGRESS_CPU=auto, the default, at the first run of a scenario and variant on
this machine and node count: later runs keep its share, across cluster ups). With INGRESS_NODE_CPUS (a cluster of several nodes) the
ingress has a node of its own with that many CPUs and HOST_CPUS are the client node's.
bench/run/budget.py PROBE_RUN_DIR check SHARE HOST_CPUS [INGRESS_NODE_CPUS]: a later run's check
of the machine's kept SHARE, from its probe at that share: the share stays, whatever the host's moment
says, unless the client side cannot even supply what the ingress's rate needs from it (less
than 1x, where the share was decided at HEADROOM): then one line, exit 2, and the run does not
start. A figure's basis never changes silently between runs on one machine.
bench/run/budget.py PROBE_RUN_DIR pinned: the placement on a platform without a cluster (the
lab), from the same probe: its LB keeps its pinned cores, so the probe only says, before the load, whether k6's CPUs can drive the servers'
(the LB and the backends share theirs) with the same headroom, and when not, what this host
would need.

The probe measures, per request, what the ingress, k6 and the backends cost in CPU time (their
cgroups, bench/report/summary.py cpu), and the rest of the host's busy time (control plane,
kubelet, Prometheus) per second: with the ingress on a node of its own, only that on the client
node's CPUs (the other work on the ingress's node does not take the client side's CPU). The
ingress then gets the share S at which the client side, k6 and the backends on the CPUs the
ingress leaves, has at least HEADROOM times the CPU the ingress's rate at S needs from it:

    HOST - S - others  >=  HEADROOM * (S / ingress per request) * (k6 + backends per request)

so S = (HOST - others) / (1 + HEADROOM * (k6 + backends) / ingress), rounded down to 50m; a
whole core or more is given as whole cores (the static CPU manager pins them). At least one CPU
stays the client's. A share within 10 % of the probe's is the probe's (its pod stays: no
redeploy for a difference the noise makes). On a node of its own the ingress gets
    S = min(INGRESS_NODE_CPUS, (HOST - others) / (HEADROOM * (k6 + backends) / ingress))
and where that is within 100m of the whole node (its metrics sidecar's room), "overlay": the
whole node, no quota below it (bench/platforms/deploy.sh).

Prints three lines: the share (a Kubernetes CPU quantity), the sentence bench.sh says before
the load, and the JSON meta.json records. Bad input: one line on stderr, exit 2."""
import json
import math
import sys
from pathlib import Path

HEADROOM = 1.5  # the client side's CPU against what the ingress's rate needs from it
STEP = 0.05     # shares in 50m steps
MIN_SHARE = 0.1
# The kubelet never writes a CFS quota under 1 ms a period (MinQuotaPeriod): at the ingress
# node's 5 ms period a 100m limit is a 200m quota, so no smaller share can be given.
MIN_QUOTA_US = 1000


def floor_of(c):
    """The smallest share the ingress's node can enforce: its CFS period's 1 ms quota floor
    (read from the probe's cgroup), and MIN_SHARE."""
    period = c.get("ingress_cfs_period_us")
    return max(MIN_SHARE, math.ceil(MIN_QUOTA_US / period / STEP - 1e-9) * STEP) if period else MIN_SHARE


def quantity(cores):
    return str(int(cores)) if cores >= 1 and cores == int(cores) else f"{round(cores * 1000)}m"


def cores_of(q):
    return int(q[:-1]) / 1000 if q.endswith("m") else float(q)


def per_request(summary, refused):
    """The probe's CPU per request of the ingress, k6 and the backends (seconds), its cpu block
    and its figures for meta.json; REFUSED is the error when it measured too little."""
    c, client = summary.get("cpu") or {}, summary.get("client") or {}
    n = (summary.get("server") or {}).get("requests") or summary["result"].get("requests")
    if not n or not c.get("ingress_cpu_seconds") or client.get("cpu_seconds") is None:
        raise ValueError(refused)
    ingress, k6 = c["ingress_cpu_seconds"] / n, client["cpu_seconds"] / n
    backends = (c.get("backend_cpu_seconds") or 0) / n
    figures = {"probe_seconds": round(c["seconds"], 2), "requests": n, "ingress_us_per_request": round(ingress * 1e6, 1),
               "k6_us_per_request": round(k6 * 1e6, 1), "backend_us_per_request": round(backends * 1e6, 1)}
    return ingress, k6, backends, c, figures


def others_of(c):
    """The CPU a second the client side lost to what else ran: on the client node's CPUs where
    they were read (the ingress on a node of its own), else on the whole host; and where."""
    node = c.get("client_node")
    if node:
        return max(0.0, node["other_cpu_seconds"] / c["seconds"]), f"other work on the client node's CPUs ({node['cpus']})"
    return max(0.0, c["other_cpu_seconds"] / c["seconds"]), "other work on the host"


def budget(summary, probe_share, host_cpus, node_cpus=None):
    ingress, k6, backends, c, measured = per_request(
        summary, "the probe measured no ingress CPU or no requests (an overlay without an ingress?)")
    others, rest = others_of(c)
    least = floor_of(c)
    if node_cpus:
        raw = (host_cpus - others) / (HEADROOM * (k6 + backends) / ingress)
        share = max(least, math.floor(min(raw, node_cpus) / STEP + 1e-9) * STEP)
    else:
        raw = (host_cpus - others) / (1 + HEADROOM * (k6 + backends) / ingress)
        share = math.floor(raw / STEP + 1e-9) * STEP
        if share >= 1:
            share = float(math.floor(share))
        share = max(least, min(share, host_cpus - 1))
    probed = cores_of(probe_share)
    if abs(share - probed) <= 0.1 * probed and (share < 1) == (probed < 1) and probed >= least:
        share = probed
    short = raw < least and c.get("ingress_cfs_period_us")  # the floor, not the headroom, set it
    figures = {"probe_share": probe_share, **measured, "other_cores": round(others, 3),
               "host_cpus": host_cpus, "headroom": HEADROOM, "computed_cores": round(raw, 3), "least_cores": round(least, 3),
               **({"ingress_node_cpus": node_cpus} if node_cpus else {})}
    q = "overlay" if node_cpus and share > node_cpus - 0.1 else quantity(share)
    shown = "its whole node" if q == "overlay" else q
    text = (f"ingress CPU {shown}: per request the ingress used {ingress * 1e6:.0f} µs, k6 {k6 * 1e6:.0f} µs, the backends "
            f"{backends * 1e6:.0f} µs, and {rest} took {others:.2f} CPU (a {c['seconds']:.0f} s probe at "
            f"{probe_share}); at {shown} "
            + (f"(the least its node's {short / 1000:g} ms CFS period can enforce: a 1 ms quota a period) the client side has "
               "less than the headroom it should, and the run may measure k6 " if short else
               f"the client side keeps {HEADROOM}x the CPU the ingress's rate needs from it ")
            + "(INGRESS_CPU=<quantity> sets another)")
    return q, text, {"ingress_cpu": q, "source": "probe", **figures}


def check(summary, share, host_cpus, node_cpus=None):
    """The kept SHARE against this probe: what the client side keeps of what the ingress's
    rate at SHARE needs from it; refused under 1x."""
    ingress, k6, backends, c, measured = per_request(
        summary, "the probe measured no ingress CPU or no requests (an overlay without an ingress?)")
    others, rest = others_of(c)
    cores = node_cpus if share == "overlay" else cores_of(share)
    need = cores / ingress * (k6 + backends)  # the client side's CPU at the ingress's full rate
    keeps = (host_cpus - others - (0 if node_cpus else cores)) / need
    shown = "its whole node" if share == "overlay" else share
    if keeps < 1:
        raise ValueError(f"the client side can no longer drive the ingress CPU this machine keeps ({shown}): it has "
                         f"{keeps:.2f}x the CPU the ingress's rate needs from it ({rest} took {others:.2f} CPU "
                         f"in a {c['seconds']:.0f} s probe); stop what else runs here, or set INGRESS_CPU")
    text = (f"ingress CPU {shown}, this machine's (its first run's probe chose it; INGRESS_CPU=probe decides it "
            f"again): the client side keeps {keeps:.2f}x the CPU the ingress's rate needs from it in a {c['seconds']:.0f} s "
            f"check ({rest} took {others:.2f} CPU)")
    return share, text, {"ingress_cpu": share, "source": "kept", **measured, "other_cores": round(others, 3),
                         "host_cpus": host_cpus, "client_over_need": round(keeps, 3),
                         **({"ingress_node_cpus": node_cpus} if node_cpus else {})}


def cpu_count(cpu_list):
    """The CPUs of a list like 0,2-3."""
    return sum(int(b) - int(a) + 1 for a, _, b in (r.partition("-") if "-" in r else (r, "", r) for r in cpu_list.split(",")))


def cpus(n):
    return f"{n} CPU" + ("s" if n != 1 else "")


def pinned_placement(summary, meta, host_cpus):
    """"overlay" (the LB's own cores), the placement line and the JSON: k6's capacity on its
    CPUs against the servers' on theirs, per request as the probe measured them."""
    refused = "the probe measured no LB CPU, no k6 CPU or no requests"
    ingress, k6, backends, c, measured = per_request(summary, refused)
    if not k6:
        raise ValueError(refused)
    where = meta["placement"]
    kc, sc = cpu_count(where["client_cpus"]), cpu_count(where["server_cpus"])
    sends, serves = kc / k6, sc / (ingress + backends)
    ratio = round(sends / serves, 2)  # the verdict is on the figure published, never on digits it hides
    need = math.ceil(HEADROOM * serves * k6 - 1e-9)
    figures = {"source": "probe", "ingress_cpu": "overlay", **measured, "k6_can_send": round(sends), "servers_can_serve": round(serves),
               "client_over_servers": ratio, "headroom": HEADROOM, "client_cpus_needed": need}
    text = (f"per request k6 used {k6 * 1e6:.0f} µs, the LB {ingress * 1e6:.0f} µs and the backends {backends * 1e6:.0f} µs "
            f"(a {c['seconds']:.0f} s probe): k6's {cpus(kc)} ({where['client_cpus']}) can send {sends:,.0f} req/s, "
            f"{ratio:.2f}x what the servers' {cpus(sc)} ({where['server_cpus']}) serve at most ({serves:,.0f})")
    if ratio >= HEADROOM:
        return "overlay", f"placement: {text}: the run can saturate the LB", {**figures, "valid": True}
    more = (f"k6 needs {need} CPUs for {HEADROOM}x (LAB_CLIENT_CPUS), and this host's {host_cpus} leave it {host_cpus - sc}"
            if need + sc > host_cpus else f"give k6 {need} CPUs (LAB_CLIENT_CPUS)")
    return "overlay", (f"warning: placement: {text}, under the {HEADROOM}x the load generator needs: the run will likely "
                       f"measure k6 (NOT VALID, exit 99); {more}"), {**figures, "valid": False}


def main(argv):
    kind = argv[2] if len(argv) > 2 and argv[2] in ("pinned", "check") else "budget"
    if len(argv) - {"pinned": 3, "check": 5, "budget": 4}[kind] not in (0, 1) or (kind == "pinned" and len(argv) != 3):
        print("usage: bench/run/budget.py PROBE_RUN_DIR PROBE_SHARE HOST_CPUS [INGRESS_NODE_CPUS] | PROBE_RUN_DIR check SHARE "
              "HOST_CPUS [INGRESS_NODE_CPUS] | PROBE_RUN_DIR pinned", file=sys.stderr)
        return 2
    try:
        summary = json.loads((Path(argv[1]) / "summary.json").read_text())
        if kind == "pinned":
            meta = json.loads((Path(argv[1]) / "meta.json").read_text())
            q, text, meta = pinned_placement(summary, meta, meta["host"]["cpus"])
        elif kind == "check":
            q, text, meta = check(summary, argv[3], int(argv[4]), int(argv[5]) if len(argv) == 6 else None)
        else:
            q, text, meta = budget(summary, argv[2], int(argv[3]), int(argv[4]) if len(argv) == 5 else None)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: the ingress CPU probe ({argv[1]}): {e}", file=sys.stderr)
        return 2
    print(q)
    print(text)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
