#!/usr/bin/env python3
"""The bench:* rules as one Prometheus rule file, for what loads files rather than
PrometheusRule objects: the lab's host Prometheus (bench/platforms/monitoring/monitoring.sh) and promtool
in the tests. Both read the files monitoring/generate.py writes from the signal contract
(monitoring/signals.yaml): the lab's rule file, and the component's PrometheusRules.

  monitoring/rulefile.py lab BITS   the lab's: monitoring/lab/rules.yaml, link capacity BITS
  monitoring/rulefile.py cluster    the cluster's, as the component deploys them
"""
import sys
from pathlib import Path

import yaml

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


def records(groups):
    return {r["record"] for g in groups for r in g["rules"]}


if __name__ == "__main__":
    if sys.argv[1:2] == ["cluster"] and len(sys.argv) == 2:
        groups = cluster()
    elif sys.argv[1:2] == ["lab"] and len(sys.argv) == 3:
        groups = lab(sys.argv[2])
    else:
        sys.exit("usage: monitoring/rulefile.py cluster | lab BITS")
    print(yaml.safe_dump({"groups": groups}, sort_keys=False), end="")
