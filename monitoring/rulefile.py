#!/usr/bin/env python3
"""The bench:* rules as one Prometheus rule file, for what loads files rather than
PrometheusRule objects: the lab's host Prometheus (bench/platforms/monitoring/monitoring.sh) and promtool
in the tests. Both read the files monitoring/generate.py writes from the signal contract
(monitoring/signals.yaml): the lab's rule file, and the component's PrometheusRules.

  monitoring/rulefile.py lab BITS   the lab's: monitoring/lab/rules.yaml, link capacity BITS
  monitoring/rulefile.py cluster    the cluster's, as the component deploys them
  monitoring/rulefile.py existing INTERVAL INGRESS BACKEND LOADGEN BITS NODES NIC [LABEL]
                                    an existing ingress's, rendered for one run: evaluated
                                    every INTERVAL seconds (the scrape interval), over three
                                    scrapes, on the pods the label matchers name; each rule
                                    labelled bench_rules=LABEL when given
  monitoring/rulefile.py server-counters INGRESS BACKEND
                                    the counters an existing ingress's server rate is the rate
                                    of, each summed over its pods (or its backends', "WHOSE"),
                                    one a line, "WHOSE NAME QUERY", in the order the contract
                                    prefers them: read before and after a load, the requests
                                    it counted
  monitoring/rulefile.py ingress-cpu INGRESS
                                    the ingress's CPU seconds used (a counter, summed over its
                                    pods) and the CPUs it may use, "NAME QUERY" a line: read
                                    before and after a load, the CPU it took
"""
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import signals as contract  # noqa: E402  (monitoring/signals.py)

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = ROOT / "kustomize/components/monitoring"
LINK = "bench:link_capacity:bits"


def _groups(path):
    """The rule groups of a file of PrometheusRule objects."""
    return [g for d in yaml.safe_load_all(path.read_text()) if d for g in d["spec"]["groups"]]


def cluster():
    return _groups(COMPONENT / "rules.yaml") + _groups(COMPONENT / "link-capacity.yaml")


def lab(bits):
    groups = yaml.safe_load((ROOT / "monitoring/lab/rules.yaml").read_text())["groups"]
    (rule,) = [r for g in groups for r in g["rules"] if r["record"] == LINK]
    rule["expr"] = f"vector({bits})"
    return groups


def existing(interval, ingress, backend, loadgen, bits, nodes, nic, label=None):
    """Each rule labelled bench_rules=LABEL when given, and every bench:* series it reads
    selected by that label (and without it, so that its joins match as unlabelled): a run's
    installed rules, apart from any other bench:* series in that Prometheus (the project's
    own, another run's)."""
    c = contract.load()
    own = (lambda e: re.sub(r"(bench:\w+:\w+)(?![\w{:])", rf'sum without (bench_rules) (\1{{bench_rules="{label}"}})', e)) if label else (lambda e: e)
    values = {"window": f"{contract.window_for(c, int(interval))}s", "ingress": ingress, "backend": backend,
              "loadgen": loadgen, "link": bits, "nodes": nodes, "nic": nic}
    return [{"name": g["name"], "interval": f"{int(interval)}s",
             "rules": [{"record": s["record"], "expr": own(contract.fill(contract.per_platform(s["expr"])["existing"], **values)),
                        **({"labels": {"bench_rules": label}} if label else {})}
                       for s in c["signals"] if s["group"] == g["name"] and contract.per_platform(s.get("expr"))["existing"]]}
            for g in c["groups"]]


def server_counters(ingress, backend):
    """[(whose, name, query)]: bench:server_requests:rate on an existing ingress, alternative
    by alternative, with each rate(COUNTER[$window]) read as COUNTER; whose: "ingress" or
    "backends", the pods it counts on."""
    expr = contract.per_platform(next(s for s in contract.load()["signals"]
                                      if s["record"] == "bench:server_requests:rate")["expr"])["existing"]
    alternatives = re.sub(r"rate\((\w+\{[^}]*\})\[\$window\]\)", r"\1", " ".join(expr.split())).split(" or ")
    return [("backends" if "$backend" in q else "ingress", re.match(r"sum\((\w+)", q).group(1), contract.fill(q, ingress=ingress, backend=backend))
            for q in alternatives]


def ingress_cpu(ingress):
    """[(name, query)]: the ingress's CPU on an existing ingress as bench:ingress_cpu_cores:rate
    and bench:ingress_cpu_limit:cores count it, summed over its pods: "seconds", the CPU
    seconds it has used (each deriv(COUNTER[$window]) read as COUNTER: read before and after a
    load, what the load took), and "cores", the CPUs it may use."""
    exprs = {s["record"]: " ".join(contract.per_platform(s["expr"])["existing"].split()) for s in contract.load()["signals"]
             if s["record"] in ("bench:ingress_cpu_cores:rate", "bench:ingress_cpu_limit:cores")}
    used = re.sub(r"deriv\((\w+\{[^}]*\})\[\$window\]\)", r"\1", exprs["bench:ingress_cpu_cores:rate"])
    return [(n, contract.fill(f"sum({e})", ingress=ingress)) for n, e in (("seconds", used), ("cores", exprs["bench:ingress_cpu_limit:cores"]))]


def records(groups):
    return {r["record"] for g in groups for r in g["rules"]}


if __name__ == "__main__":
    if sys.argv[1:2] == ["cluster"] and len(sys.argv) == 2:
        groups = cluster()
    elif sys.argv[1:2] == ["lab"] and len(sys.argv) == 3:
        groups = lab(sys.argv[2])
    elif sys.argv[1:2] == ["existing"] and len(sys.argv) in (9, 10):
        groups = existing(*sys.argv[2:])
    elif sys.argv[1:2] == ["server-counters"] and len(sys.argv) == 4:
        print("\n".join(f"{w} {n} {q}" for w, n, q in server_counters(*sys.argv[2:])))
        sys.exit(0)
    elif sys.argv[1:2] == ["ingress-cpu"] and len(sys.argv) == 3:
        print("\n".join(f"{n} {q}" for n, q in ingress_cpu(sys.argv[2])))
        sys.exit(0)
    else:
        sys.exit("usage: monitoring/rulefile.py cluster | lab BITS | existing INTERVAL INGRESS BACKEND LOADGEN BITS NODES NIC [LABEL] | server-counters INGRESS BACKEND | ingress-cpu INGRESS")
    print(yaml.safe_dump({"groups": groups}, sort_keys=False), end="")
