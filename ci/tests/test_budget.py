"""The ingress's CPU budget from a probe run (ci/run/budget.py), offline: the share from the
costs per request, its rounding, the probe's share kept within the noise, whole cores pinned,
and a probe that measured nothing refused in one line. The probe on the real cluster:
test_cluster_e2e.py test_the_quick_start_is_valid_on_this_machine."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT


def probe(ingress_us, k6_us, backend_us, other_cores, requests=10000, seconds=3.0):
    n = requests
    return {"result": {"requests": n}, "server": {"requests": n}, "client": {"cpu_seconds": k6_us * n / 1e6},
            "cpu": {"seconds": seconds, "ingress_cpu_seconds": ingress_us * n / 1e6, "backend_cpu_seconds": backend_us * n / 1e6,
                    "other_cpu_seconds": other_cores * seconds}}


def budget(tmp_path, summary, share, host_cpus=2):
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return subprocess.run([sys.executable, str(ROOT / "ci/run/budget.py"), str(tmp_path), share, str(host_cpus)],
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("costs, share, host, expected", [
    # The quick start's costs on this machine (issue 28: 9,873 req/s per ingress core; k6 and the
    # backends on the other CPU): (2 - 0.25) / (1 + 1.5 * 107 / 101) = 0.676 -> 650m.
    ((101, 44, 63, 0.25), "500m", 2, "650m"),
    ((101, 44, 63, 0.25), "600m", 2, "600m"),  # within 10 % of the probe's: the pod stays
    ((100, 20, 0, 0.2), "500m", 8, "6"),       # (8 - 0.2) / 1.3 = 6: whole cores (pinned)
    ((100, 20, 0, 0.2), "500m", 2, "1"),       # never more than leaves the client one CPU
    ((10, 300, 300, 0.5), "500m", 2, "100m"),  # a client far costlier than the ingress: the floor
])
def test_the_share_leaves_the_client_side_its_headroom(costs, share, host, expected, tmp_path):
    r = budget(tmp_path, probe(*costs), share, host)
    assert r.returncode == 0, r.stderr
    q, text, meta = r.stdout.splitlines()
    assert q == expected and text.startswith(f"ingress CPU {expected}:"), r.stdout
    m = json.loads(meta)
    assert m["ingress_cpu"] == expected and m["source"] == "probe" and m["probe_share"] == share
    assert (m["ingress_us_per_request"], m["k6_us_per_request"], m["backend_us_per_request"]) == costs[:3]


def test_the_headroom_holds_at_the_share_chosen(tmp_path):
    """At the share given, the client side's CPU is at least 1.5x what the ingress's rate needs."""
    r = budget(tmp_path, probe(101, 44, 63, 0.25), "500m")
    s = float(r.stdout.split()[0].rstrip("m")) / 1000
    rate = s / 101e-6
    assert 2 - s - 0.25 >= 1.5 * rate * (44 + 63) * 1e-6


def test_a_probe_without_an_ingress_count_is_one_line(tmp_path):
    s = probe(101, 44, 63, 0.25)
    s["cpu"]["ingress_cpu_seconds"] = None
    r = budget(tmp_path, s, "500m")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"error: the ingress CPU probe ({tmp_path}): the probe measured no ingress CPU "
                                             "or no requests (an overlay without an ingress?)"]
