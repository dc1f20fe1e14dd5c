#!/usr/bin/env python3
"""The bench:* rules as one Prometheus rule file, for what loads files rather than
PrometheusRule objects: the lab's host Prometheus (ci/platforms/monitoring/monitoring.sh) and promtool
in the tests. One source: the component's PrometheusRules (rules.yaml, link-capacity.yaml)
and the ratios its derived.yaml patch appends to the signals group.

  monitoring/rulefile.py lab BITS   the lab's: monitoring/lab/rules.yaml + the ratios, link capacity BITS
  monitoring/rulefile.py cluster    the cluster's, as the component deploys them
"""
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = ROOT / "kustomize/components/monitoring"


def _groups(path):
    """The rule groups of a file of PrometheusRule objects."""
    return [g for d in yaml.safe_load_all(path.read_text()) if d for g in d["spec"]["groups"]]


def derived():
    """The rules derived.yaml's patch operations append."""
    return [op["value"] for op in yaml.safe_load((COMPONENT / "derived.yaml").read_text())]


def _with_ratios_and_link(groups, bits=None):
    groups[0]["rules"] += derived()
    link = _groups(COMPONENT / "link-capacity.yaml")
    if bits:
        link[0]["rules"][0]["expr"] = f"vector({bits})"
    return groups + link


def cluster():
    return _with_ratios_and_link(_groups(COMPONENT / "rules.yaml"))


def lab(bits):
    return _with_ratios_and_link(yaml.safe_load((ROOT / "monitoring/lab/rules.yaml").read_text())["groups"], bits)


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
