"""summary.json's assembly (bench/report/summary.py, `python bench/report summary|segments`), as
bench.sh and distributed.sh call it, offline: the recorded runs of ci/tests/fixtures/report/
(k6's summary plus what bench.sh's jq added) are taken apart into k6's own summary and the
measurements behind .client and .server, and assembled again into the same bytes and the
same summary.txt lines; synthetic counts for what the fixtures do not show."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import one_error

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "ci/tests/fixtures/report"
RUNS = sorted(p.parent for p in FIXTURES.rglob("summary.json"))
K6 = json.loads((FIXTURES / "20261121T155928Z-rps-nginx-lb-default/summary.json").read_text())
for part in ("client", "server"):
    del K6[part]  # what k6/lib/summary.js wrote


def report(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench/report"), *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def times_of(cpu_seconds):
    """bash `time`'s user and system seconds (three decimals) that add up to cpu_seconds exactly."""
    total = round(cpu_seconds * 1000)
    for user in range(total + 1):
        u, s = f"{user / 1000:.3f}", f"{(total - user) / 1000:.3f}"
        if float(u) + float(s) == cpu_seconds:
            return u, s
    raise AssertionError(f"no split of {cpu_seconds}")


def k6_run(tmp_path, result=None, name="run"):
    """A run directory as k6 leaves it: summary.json without .client and .server, summary.txt."""
    d = tmp_path / name
    d.mkdir()
    s = json.loads(json.dumps(K6))
    s["result"].update(result or {})
    (d / "summary.json").write_text(json.dumps(s, indent=1))
    (d / "summary.txt").write_text("k6 rps ...\n")
    return d


def summary(d, wall="10.000", user="2.000", sys_="0.500", cpus=1, before="100 1000", after=None, requests=None):
    """`bench/report summary` as bench.sh calls it; after defaults to the run's requests served."""
    if after is None:
        n = requests if requests is not None else json.loads((d / "summary.json").read_text())["result"]["requests"]
        after = f"{100 + 50 + 1} {1000 + n + 1}"
    return report("summary", d, "--times", wall, user, sys_, "--cpus", cpus, "--stub-before", before, "--stub-after", after)


def lines(d):
    return (d / "summary.txt").read_text().splitlines()[1:]


@pytest.mark.parametrize("src", RUNS, ids=[p.name for p in RUNS])
def test_a_recorded_run_is_assembled_again_byte_for_byte(src, tmp_path):
    recorded = json.loads((src / "summary.json").read_text())
    c, srv = recorded["client"], recorded["server"]
    d = tmp_path / "run"
    shutil.copytree(src, d)
    k6 = {k: v for k, v in recorded.items() if k not in ("client", "server")}
    (d / "summary.json").write_text(json.dumps(k6, indent=1))  # as k6 wrote it
    text = (src / "summary.txt").read_text().splitlines(keepends=True)
    (d / "summary.txt").write_text("".join(text[:-2]))  # before bench.sh's two lines
    acc0, req0 = 7, 123456  # any reading: only the difference counts, minus the second read itself
    r = report("summary", d, "--times", f"{c['wall_seconds']:.3f}", *times_of(c["cpu_seconds"]), "--cpus", c["cpus"],
               "--stub-before", f"{acc0} {req0}",
               "--stub-after", f"{acc0 + srv['connections_accepted'] + 1} {req0 + srv['requests'] + 1}")
    assert r.returncode == 0, r.stderr
    assert (d / "summary.json").read_text() == (src / "summary.json").read_text()
    assert (d / "summary.txt").read_text() == (src / "summary.txt").read_text()
    assert r.stderr == "".join(text[-2:])
    assert not list(d.glob("*.new"))


def test_client_cpu_per_request_and_utilization(tmp_path):
    d = k6_run(tmp_path, {"requests": 1000})
    r = summary(d, wall="10.000", user="2.000", sys_="0.500", cpus=2)
    assert r.returncode == 0, r.stderr
    c = json.loads((d / "summary.json").read_text())["client"]
    assert c == {"cpu_seconds": 2.5, "wall_seconds": 10, "cpus": 2, "cpu_us_per_request": 2500, "utilization": 0.125}
    assert '"cpu_us_per_request": 2500,' in (d / "summary.json").read_text()  # whole, as jq wrote it
    # 12.5% rounds half away from zero, as jq's round (C's) does, not to even.
    assert lines(d)[0] == "client        k6 used 2.5 CPU-s: 2500 µs per request, 13% of 2 CPU"


def test_client_over_server(tmp_path):
    d = k6_run(tmp_path, {"requests": 1000})
    assert summary(d, requests=990).returncode == 0
    s = json.loads((d / "summary.json").read_text())
    assert s["server"] == {"source": "nginx stub_status", "requests": 990, "connections_accepted": 50,
                           "client_over_server": 1000 / 990}
    assert lines(d)[1] == "server        990 requests, 50 connections counted by nginx (client/server 1.01)"
    assert list(s)[-2:] == ["client", "server"]  # after k6's own keys, as jq added them


def test_envoys_count_has_no_read_of_its_own(tmp_path):
    """A Gateway's proxy counts on its gateway listeners; its statistics are read on another
    (bench/lib/k6.sh envoy_parse), so nothing is taken off for the reads."""
    d = k6_run(tmp_path, {"requests": 1000})
    assert summary(d, before="10 100 envoy", after="60 1100 envoy").returncode == 0
    s = json.loads((d / "summary.json").read_text())
    assert s["server"] == {"source": "Envoy statistics", "requests": 1000, "connections_accepted": 50, "client_over_server": 1}
    assert lines(d)[1] == "server        1000 requests, 50 connections counted by Envoy (client/server 1)"


def envoy_stats(requests, accepted):
    """Envoy's statistics as its stats listener serves them: the gateway's listeners and
    connection managers, and its own (admin, eg-*, ports 19001/19003), which count the reads."""
    return "\n".join([
        "# TYPE envoy_http_downstream_rq_total counter",
        'envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="admin"} 94',
        'envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="eg-ready-http"} 54',
        'envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="eg-stats-http"} 94',
        f'envoy_http_downstream_rq_total{{envoy_http_conn_manager_prefix="http-10080"}} {requests - 1}',
        'envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="https-10443"} 1',
        f'envoy_listener_downstream_cx_total{{envoy_listener_address="0.0.0.0_10080"}} {accepted}',
        'envoy_listener_downstream_cx_total{envoy_listener_address="0.0.0.0_19001"} 2',
        'envoy_listener_downstream_cx_total{envoy_listener_address="0.0.0.0_19003"} 54', ""])


def test_envoys_statistics_are_read_on_the_gateways_listeners_only():
    r = subprocess.run(["bash", "-c", '. bench/lib.sh && envoy_parse'], input=envoy_stats(2000, 30),
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "30 2000 envoy\n", r
    none = subprocess.run(["bash", "-c", '. bench/lib.sh && envoy_parse'], input="not stats\n", cwd=ROOT, capture_output=True, text=True)
    assert none.stdout == ""


def test_zero_requests_give_null_not_a_division(tmp_path):
    d = k6_run(tmp_path, {"requests": 0})
    r = summary(d, before="100 1000", after="101 1001")  # nothing served but the second read
    assert r.returncode == 0, r.stderr
    s = json.loads((d / "summary.json").read_text())
    assert s["client"]["cpu_us_per_request"] is None
    assert s["server"]["requests"] == 0 and s["server"]["client_over_server"] is None
    assert lines(d) == ["client        k6 used 2.5 CPU-s: 0 µs per request, 25% of 1 CPU",
                        "server        0 requests, 0 connections counted by nginx (client/server –)"]


@pytest.mark.parametrize("before,after", [("", ""), ("100 1000", ""), ("", "100 1000")])
def test_no_server_count_without_both_readings(before, after, tmp_path):
    d = k6_run(tmp_path)
    assert summary(d, before=before, after=after).returncode == 0
    assert "server" not in json.loads((d / "summary.json").read_text())
    assert lines(d)[1] == "server        no server-side count (no stub_status for this target)"


def usage(ingress, backend, host, at, cpus="cpus ingress 0.650\nperiod ingress 5000\n"):
    """`cgroups.sh usage` as it prints (ns; the ingress's quota), for --usage-before/after."""
    return f"{cpus}ingress {ingress}\nbackend {backend}\nhost {host}\nat {at}\n"


def test_each_roles_cpu_and_the_headline_per_ingress_cpu(tmp_path):
    """The ingress's cgroup time between the readings divides the server's count: the seeds'
    unit; the host's busy time less every role's is the rest (control plane and the like)."""
    d = k6_run(tmp_path, {"requests": 39000, "rps": 3900, "seconds": 10})
    s = json.loads((d / "summary.json").read_text())
    s["verdict"] = {"limit": "ingress-cpu", "valid": True, "rule": "r", "text": "t"}
    (d / "summary.json").write_text(json.dumps(s))
    r = report("summary", d, "--times", "10.000", "2.000", "0.500", "--cpus", "2", "--stub-before", "100 1000",
               "--stub-after", "151 40001", "--host-cpus", "2",
               "--usage-before", usage(10**9, 10**9, 50 * 10**9, 10**18),
               "--usage-after", usage(7 * 10**9, 5 * 10**9, 66 * 10**9, 10**18 + 10 * 10**9))
    assert r.returncode == 0, r.stderr
    c = json.loads((d / "summary.json").read_text())["cpu"]
    assert c == {"source": "cgroups", "seconds": 10, "ingress_cpu_seconds": 6, "ingress_cpus": 0.65, "ingress_cfs_period_us": 5000,
                 "backend_cpu_seconds": 4, "host_cpu_seconds": 16, "other_cpu_seconds": 3.5,
                 "per_ingress_cpu": {"value": 39000 / 6, "unit": "req/s"}}
    assert lines(d)[2:] == ["cpu           ingress 0.60 of 0.65 CPU, backends 0.40, host 1.60 of 2 CPUs (cgroups): 6,500 req/s per ingress CPU",
                            "answer        ingress-cpu-bound at 0.65 ingress CPU: 3,900 req/s, 6,500 req/s per ingress CPU"]


def test_the_client_nodes_cpus_other_work_is_their_busy_time_less_k6_and_the_backends(tmp_path):
    """With the client node's CPUs read ("busy CPUS NS", the ingress on a node of its own), what
    else ran there: their busy time between the readings less k6's and the backends'."""
    d = k6_run(tmp_path, {"requests": 39000, "rps": 3900, "seconds": 10})
    r = report("summary", d, "--times", "10.000", "2.000", "0.500", "--cpus", "1", "--stub-before", "100 1000",
               "--stub-after", "151 40001", "--host-cpus", "1",
               "--usage-before", usage(10**9, 10**9, 50 * 10**9, 10**18) + f"busy 0 {20 * 10**9}\n",
               "--usage-after", usage(7 * 10**9, 5 * 10**9, 66 * 10**9, 10**18 + 10 * 10**9) + f"busy 0 {29 * 10**9}\n")
    assert r.returncode == 0, r.stderr
    c = json.loads((d / "summary.json").read_text())["cpu"]
    assert c["client_node"] == {"cpus": "0", "busy_cpu_seconds": 9, "other_cpu_seconds": 2.5}, c


@pytest.mark.parametrize("waited_ms, period_us, shapes, says", [
    (500, 100000, True, "latency       p99 96.9 ms is the CPU quota's, not the server's: the ingress was throttled in 40 of 100 CFS periods, "
          "0.50 s of the 10.0 s window (a quota of 0.65 CPU per 100 ms); steal 0.25 CPU"),
    (500, 5000, True, "latency       p99 96.9 ms holds waits on the CPU quota, each at most its 5 ms period: the ingress was throttled "
          "in 40 of 100 CFS periods, 0.50 s of the 10.0 s window (a quota of 0.65 CPU per 5 ms); steal 0.25 CPU"),
    (50, 100000, False, "latency       The ingress was throttled in 40 of 100 CFS periods, 0.05 s of the 10.0 s window "
         "(a quota of 0.65 CPU per 100 ms); steal 0.25 CPU"),
])
def test_the_quotas_throttling_and_the_hosts_steal_are_said_beside_p99(tmp_path, waited_ms, period_us, shapes, says):
    """The ingress's CFS periods, throttled periods and throttled time between the readings, and
    the host's steal: a wait on the quota for 1 % of the window or more (QUOTA_SHAPES_P99) puts
    such waits into p99, and the line says so: p99 is the quota's where a period is half of it or
    more, holds its waits where the period is shorter; less, and it says the throttling only."""
    d = k6_run(tmp_path, {"requests": 39000, "rps": 3900, "seconds": 10, "p99_ms": 96.94})
    quota = f"cpus ingress 0.650\nperiod ingress {period_us}\n"
    before = usage(10**9, 10**9, 50 * 10**9, 10**18, quota) + f"throttled ingress 1000 100 {10**9}\nsteal {3 * 10**9}\n"
    after = (usage(7 * 10**9, 5 * 10**9, 66 * 10**9, 10**18 + 10 * 10**9, quota)
             + f"throttled ingress 1100 140 {10**9 + waited_ms * 10**6}\nsteal {int(5.5 * 10**9)}\n")
    r = report("summary", d, "--times", "10.000", "2.000", "0.500", "--cpus", "2", "--stub-before", "100 1000",
               "--stub-after", "151 40001", "--host-cpus", "2", "--usage-before", before, "--usage-after", after)
    assert r.returncode == 0, r.stderr
    c = json.loads((d / "summary.json").read_text())["cpu"]
    assert c["steal_cpus"] == 0.25
    assert c["ingress_throttling"] == {"periods": 100, "throttled_periods": 40, "throttled_seconds": waited_ms / 1000,
                                       "quota_shapes_p99": shapes}
    assert [l for l in lines(d) if l.startswith("latency")] == [says]


def test_a_pod_replaced_during_the_run_has_no_cpu_figure(tmp_path):
    d = k6_run(tmp_path)
    r = report("summary", d, "--times", "10", "1", "1", "--cpus", "1", "--host-cpus", "2",
               "--usage-before", usage(10**9, 10**9, 50 * 10**9, 10**18),
               "--usage-after", "backend 2000000000\nhost 60000000000\nat 1000000010000000000\n")
    assert r.returncode == 0, r.stderr
    c = json.loads((d / "summary.json").read_text())["cpu"]
    assert c["ingress_cpu_seconds"] is None and c["per_ingress_cpu"]["value"] is None
    assert lines(d)[-1].startswith("cpu           no ingress CPU count")


BAD = {
    "no summary": (lambda d: (d / "summary.json").unlink(), [], "summary.json is not readable JSON"),
    "k6 wrote no result": (lambda d: (d / "summary.json").write_text("{}"), [], "has no .result"),
    "bad reading": (None, ["--stub-before", "accepts"], "a server reading is 'ACCEPTS REQUESTS [nginx|envoy|prometheus]', got 'accepts'"),
    "unknown source": (None, ["--stub-before", "1 2 haproxy"], "a server reading is 'ACCEPTS REQUESTS [nginx|envoy|prometheus]', got '1 2 haproxy'"),
    "no times": (None, ["--times", "1"], "argument --times: expected 3 arguments"),
    "bad usage reading": (None, ["--usage-before", "ingress lots"], "a CPU usage reading is 'ROLE NS'"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    break_it, args, message = BAD[case]
    d = k6_run(tmp_path)
    if break_it:
        break_it(d)
    before = (d / "summary.json").read_text() if (d / "summary.json").exists() else None
    base = {"--times": ["10", "1", "1"], "--cpus": ["1"]}
    base.update({args[i]: args[i + 1:i + 2] for i in range(0, len(args), 2)})
    r = report("summary", d, *[x for k, v in base.items() for x in (k, *v)])
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ") and message in r.stderr, r.stderr
    assert ((d / "summary.json").read_text() if before is not None else None) == before
    assert lines(d) == []


# ---------------------------------------------------------------- distributed: segments

@pytest.fixture
def seg_dir(tmp_path):
    """A distributed run's directory, to hold segment-<i>.json."""
    d = tmp_path / "run"
    d.mkdir()
    return d


def segment(d, i, requests, rps, passed=True, errors=0, connections=25):
    s = json.loads(json.dumps(K6))
    s["result"].update(requests=requests, rps=rps, errors=errors, passed=passed, connections=connections)
    (d / f"segment-{i}.json").write_text(json.dumps(s, indent=1))


def segments(d, before="3 500", after=None, served=None, *more):
    after = after if after is not None else f"9 {500 + served + 1}"
    return report("segments", d, "--testid", "t-x2", "--variant", "nginx-lb-default", "--platform", "local",
                  "--stub-before", before, "--stub-after", after, *more)


def test_segments_are_summed_and_checked_against_the_server(seg_dir):
    d = seg_dir
    segment(d, 0, 20000, 2000.4)
    segment(d, 1, 21000, 2100.6, errors=2, passed=False)
    r = segments(d, served=41000)
    assert r.returncode == 0, r.stderr
    p_ms = {k: K6["result"][k] for k in ("p50_ms", "p95_ms", "p99_ms")}
    assert json.loads((d / "summary.json").read_text()) == {
        "testid": "t-x2", "variant": "nginx-lb-default", "platform": "local", "segments": 2,
        "requests": 41000, "rps": 2000.4 + 2100.6, "errors": 2, "passed": False,
        # The recorded run's summary has no histogram (ENGINE=js): no merged percentiles.
        "latency": {"merged": False, "source": "none: ENGINE=js segments carry no mergeable histogram; each segment judged its own latency"},
        "thresholds": K6["result"]["thresholds"] * 2,
        "per_segment": [{"requests": 20000, "rps": 2000.4, "connections": 25, **p_ms},
                        {"requests": 21000, "rps": 2100.6, "connections": 25, **p_ms}],
        "server": {"requests": 41000, "client_over_server": 1}}
    assert r.stdout.splitlines() == [
        "k6 2 segments → 4101 req/s in all (2000 + 2101), 41000 requests, errors 2",
        "server        41000 requests counted by nginx (client/server 1)"]


def test_an_existing_ingresss_count_is_its_counter_in_its_prometheus(seg_dir):
    """An ingress the suite did not deploy: two reads of its own counter in its Prometheus
    around the load (bench/lib/existing.sh existing_count), no read of their own among them."""
    segment(seg_dir, 0, 20000, 2000.0)
    r = segments(seg_dir, before="0 123456 prometheus", after="0 143456 prometheus")
    assert r.returncode == 0, r.stderr
    assert json.loads((seg_dir / "summary.json").read_text())["server"] == {"requests": 20000, "client_over_server": 1}
    assert r.stdout.splitlines()[-1] == "server        20000 requests counted by the ingress (its counter in its Prometheus) (client/server 1)"


def test_an_existing_ingresss_cpu_is_its_cpu_seconds_around_the_load(seg_dir):
    """Its CPU seconds read before and after the load and the CPUs it may use (bench/lib/existing.sh
    existing_cpu): the rate per ingress CPU-second is its count over the seconds used; a reading
    it had none of ("-") leaves the figure unknown, not zero."""
    segment(seg_dir, 0, 20000, 2000.0)
    r = segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, "--ingress-cpu", "100.5", "102.5", "0.25")
    assert r.returncode == 0, r.stderr
    assert json.loads((seg_dir / "summary.json").read_text())["cpu"] == {
        "source": "prometheus", "ingress_cpu_seconds": 2.0, "ingress_cpus": 0.25, "per_ingress_cpu": {"value": 10000, "unit": "req/s"}}
    assert "cpu           ingress 2.00 CPU-seconds of 0.25 CPUs: 10,000 req/s per ingress CPU (its Prometheus's counters)" in r.stdout
    r = segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, "--ingress-cpu", "-", "102.5", "-")
    assert json.loads((seg_dir / "summary.json").read_text())["cpu"]["per_ingress_cpu"]["value"] is None, r.stderr


def test_an_existing_ingresss_throttling_is_its_cfs_periods_around_the_load(seg_dir):
    """Its CFS periods and throttled ones read before and after the load (bench/lib/existing.sh
    existing_throttling): the load's periods and the share throttled; none in either read (no
    quota) is said as such, one read only (pods replaced) is unknown, a malformed one refused."""
    segment(seg_dir, 0, 20000, 2000.0)
    cpu = ("--ingress-cpu", "100.5", "102.5", "0.25")
    r = segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, *cpu, "--ingress-throttling", "1000/10", "1120/40")
    assert r.returncode == 0, r.stderr
    assert json.loads((seg_dir / "summary.json").read_text())["cpu"]["ingress_throttling"] == {
        "periods": 120, "throttled_periods": 30, "throttled_ratio": 0.25}
    assert ("throttling    the ingress throttled in 30 of its 120 CFS periods (25%; its Prometheus's cAdvisor counters, "
            "summed over its pods' containers)") in r.stdout.splitlines(), r.stdout
    r = segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, *cpu, "--ingress-throttling", "-", "-")
    assert json.loads((seg_dir / "summary.json").read_text())["cpu"]["ingress_throttling"] is None, r.stderr
    assert "throttling    no CFS period counters of the ingress's containers in its Prometheus" in r.stdout, r.stdout
    r = segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, *cpu, "--ingress-throttling", "1000/10", "-")
    assert json.loads((seg_dir / "summary.json").read_text())["cpu"]["ingress_throttling"]["periods"] is None, r.stderr
    err = one_error(segments(seg_dir, "0 123456 prometheus", "0 143456 prometheus", None, *cpu, "--ingress-throttling", "1000", "-"))
    assert err == "error: --ingress-throttling takes PERIODS/THROTTLED or '-', got 1000 -", err


def test_an_existing_ingresss_share_of_its_nodes_nic_is_its_pods_bytes_over_the_nics(seg_dir):
    """The bytes its pods and its nodes' NICs carried, read before and after the load
    (bench/lib/existing.sh existing_nic): the pods' share of the NICs' traffic, the rest its
    neighbours'; above 100% said as traffic that stayed on the node; the NICs without counters,
    or the pods without theirs (on the host's network), not known; a malformed read refused."""
    segment(seg_dir, 0, 20000, 2000.0)
    stubs = ("0 123456 prometheus", "0 143456 prometheus", None)

    def nic(before, after):
        r = segments(seg_dir, *stubs, "--ingress-nic", before, after)
        assert r.returncode == 0, r.stderr
        return json.loads((seg_dir / "summary.json").read_text())["network"], [l for l in r.stdout.splitlines() if l.startswith("nic share")]
    assert nic("1000000/5000000", "31000000/125000000") == (
        {"ingress_pods_bytes": 30e6, "nic_bytes": 120e6, "ingress_share": 0.25},
        ["nic share     the ingress's pods sent and received 30.0 MB, its nodes' NIC carried 120.0 MB: 25% (the rest: its neighbours')"])
    assert nic("0/0", "60000000/40000000")[1] == [
        "nic share     the ingress's pods sent and received 60.0 MB, its nodes' NIC carried 40.0 MB: 150% (above 100%: part of theirs stayed on the node)"]
    assert nic("none/0", "none/40000000") == (
        {"ingress_pods_bytes": None, "nic_bytes": 40e6, "ingress_share": None},
        ["nic share     its nodes' NIC carried 40.0 MB; the ingress's pods' own not known (no cAdvisor network counters of theirs: "
         "pods on the host's network, or replaced during the run)"])
    assert nic("0/none", "60000000/none")[1] == [
        "nic share     not known: no node-exporter counters of its nodes' NIC in its Prometheus in both reads (NODE_NIC names the devices)"]
    err = one_error(segments(seg_dir, *stubs, "--ingress-nic", "1000", "none/none"))
    assert err == "error: --ingress-nic takes PODS/NICS (bytes or 'none'), got 1000 none/none", err


def test_an_existing_ingress_replaced_under_the_load_is_not_counted(seg_dir):
    """An ingress you run whose counter read nothing after the load (its pods replaced: a
    rollout under load) has no server count, said so; the run stands (ours must have one)."""
    segment(seg_dir, 0, 20000, 2000.0)
    r = report("segments", seg_dir, "--testid", "t", "--variant", "existing", "--platform", "external",
               "--stub-before", "0 123456 prometheus", "--stub-after", "")
    assert r.returncode == 0, r.stderr
    assert json.loads((seg_dir / "summary.json").read_text())["server"] == {"requests": None, "client_over_server": None}
    assert r.stdout.splitlines()[-1].startswith("server        not counted: the ingress's counter read nothing after the load")


def test_segments_timelines_are_merged_into_the_runs(seg_dir):
    """A pod's timeline (printed with IB_TIMELINE, bench/run/distributed.sh timeline-<i>.json):
    the run's timeline.json is theirs merged (bench/report/change.py merged_timeline)."""
    segment(seg_dir, 0, 100, 10.0)
    tl = {"origin_ms": 5000, "slot_ms": 100, "relative_error": 0.03, "beyond": 0,
          "slots": [{"i": 0, "outcomes": {"ok": 100}, "statuses": {}, "others": {}, "latency": [[1.0, 100]]}]}
    (seg_dir / "timeline-0.json").write_text(json.dumps(tl))
    assert segments(seg_dir, served=100).returncode == 0
    assert json.loads((seg_dir / "timeline.json").read_text()) == dict(tl, segments=1)


def test_segments_in_index_order_past_ten(seg_dir):
    d = seg_dir
    for i in range(12):
        segment(d, i, 100 + i, 10.0 + i)
    assert segments(d, served=sum(100 + i for i in range(12))).returncode == 0
    s = json.loads((d / "summary.json").read_text())
    assert [p["requests"] for p in s["per_segment"]] == [100 + i for i in range(12)]


def test_segments_without_a_server_count_stop_with_one_line(seg_dir):
    d = seg_dir
    segment(d, 0, 100, 10.0)
    r = segments(d, after="")
    assert r.returncode == 2 and not (d / "summary.json").exists()
    assert r.stderr.startswith("error: no stub_status from the ingress of nginx-lb-default") \
        and len(r.stderr.splitlines()) == 1, r.stderr
