"""bench/run/changes.py: `./task bench:changes` — every change kind of bench:change, on the default
manifests and with components/graceful-shutdown, as one table: change × (errors during it,
disruption window, p99 before → during), without and with the fix.

Each row is one bench:change run (bench/run/change.py: its capacity run, the open model at
LOAD_SHARE, the change CHANGE_AT into it), on the variant that change needs: the default LB
for the ingress's own changes, seed 003's LB → ClusterIP with 10 backends for the backends'
(kill one of ten, scale 10 → 1 → 10); its "-graceful" overlay for the fixed side. The rollout
runs with INGRESS_CPU=500m (two ingress pods fit on 2 CPUs). PLATFORM=lab: the lab's kinds on
its default LB (a reload into its own and into the tuned knobs; backend 1 of 2 stopped and
started, then the only one): the lab has no pods to shut down gracefully, so no fixed side.
Every setting bench:change takes is passed on. Exit 0, or 1 when a run could not complete
(the table says which).
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import change as ch  # noqa: E402
import matrix as mx  # noqa: E402

INGRESS_SIDE = "nginx-lb-default"
BACKEND_SIDE = "nginx-lb-basic-clusterip-10pods"
PLAN = [("none", INGRESS_SIDE, {}), ("reload", INGRESS_SIDE, {}), ("kill-backend", BACKEND_SIDE, {}),
        ("scale", BACKEND_SIDE, {}), ("rollout", INGRESS_SIDE, {"INGRESS_CPU": "500m"}), ("kill-ingress", INGRESS_SIDE, {})]
FIX = "-graceful"
LAB_PLAN = [("none", INGRESS_SIDE, {}), ("reload", INGRESS_SIDE, {}), ("reload", INGRESS_SIDE, {"RELOAD_TO": "nginx-lb-full"}),
            ("kill-backend", INGRESS_SIDE, {}), ("kill-backend", INGRESS_SIDE, {"LAB_BACKENDS": "1"})]


def row(kind, variant, doc):
    a = doc["analysis"]
    d = a["during"] or a["run"]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(d["by_kind"].items(), key=lambda x: -x[1]))
    errors = f"{d['errors']:,} of {d['requests']:,}" + (f" ({kinds})" if kinds else "")
    window = f"{a['disruption']['ms'] / 1000:.1f} s" if a["disruption"] else "none"
    p99 = " → ".join("—" if x is None or x["p99_ms"] is None else f"{x['p99_ms']:,.1f} ms" for x in (a["before"], a["during"]))
    return f"| {kind} | {variant} | {errors} | {window} | {p99} | {doc['verdict']} |"


def label(variant, extra):
    """The variant as the table shows it, with what the plan sets beside it."""
    return variant + "".join(f" ({k}={v})" for k, v in extra.items() if k != "INGRESS_CPU")


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    if env.get("CHANGE") or env.get("VARIANT"):
        raise mx.Bad("bench:changes runs every CHANGE on its own variants: unset CHANGE and VARIANT (bench:change runs one)")
    lines = ["| change | variant | errors during the change | disruption window | p99 before → during | verdict |",
             "|---|---|---|---|---|---|"]
    out = Path(env.get("RESULTS_ROOT") or mx.ROOT / "results").resolve() / f"changes-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    out.mkdir(parents=True)
    env["RESULTS_ROOT"] = str(out)  # every run's directory inside this one's
    failed = []
    lab = mx.traits(mx.shell("platform", env=env).stdout.strip())["cluster"] == "none"  # resolved as every entry point does
    plan = LAB_PLAN if lab else PLAN
    for kind, variant, extra in plan:
        for v in (variant, variant + FIX) if kind != "none" and not lab else (variant,):
            mx.say("changes", f"{kind} on {label(v, extra)}")
            try:
                rc, doc = ch.run_change(dict(env, CHANGE=kind, VARIANT=v, **extra), reg)
                lines.append(row(kind, label(v, extra), doc))
            except mx.Bad as e:
                failed.append(f"{kind} on {label(v, extra)}: {e}")
                lines.append(f"| {kind} | {label(v, extra)} | did not complete: {e} | | | |")
    table = "\n".join(lines) + "\n"
    (out / "changes.md").write_text(table)
    (out / "changes.json").write_text(json.dumps({"plan": [[k, v, e] for k, v, e in plan], "failed": failed}, indent=1) + "\n")
    print("\n" + table + f"\nTable: {out}/changes.md (each run's directory beside it)\n", end="", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    mx.entry(main, sys.argv)
