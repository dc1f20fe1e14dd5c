"""Monitoring for real on the lab: the host Prometheus with the bench:* rules, the exporters
and the cgroup sampler; a run's end-of-run correlation, verdict and report; every dashboard
query answered by the live Prometheus; the faults (Prometheus unreachable, rules missing, a
starved client, monitoring:down twice). The rules themselves: promtool check and test, on
both platforms."""
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import LAB, ROOT, lint, no_load, sh, within
from queries import dashboard_query_gaps, prom_query

sys.path.insert(0, str(ROOT / "monitoring"))
import signals as contract  # noqa: E402  (monitoring/signals.py)

# Where the suite builds it: under IB_CACHE, as bench/lib.sh says (one source).
PROMTOOL = Path(sh("bash", "-c", '. bench/lib.sh && echo "$IB_PROMETHEUS_DIR/promtool"').stdout.strip())
LAB_PROM = f"http://{LAB['LAB_HOST_IP']}:{LAB['LAB_PROMETHEUS_PORT']}"  # bench/platforms/monitoring/monitoring.sh LAB_PROM_ADDR
LAB_MON_STATE = Path("/run/ingress-bench/monitoring-lab")
CPU_CG = Path("/sys/fs/cgroup/cpu/ingress-bench/loadgen")  # bench/platforms/monitoring/cgroups.sh, role loadgen


def rule_file(tmp_path, platform, *args):
    """monitoring/rulefile.py's rule file for a platform, as promtool reads it."""
    out = tmp_path / f"{platform}.rules.yaml"
    r = sh(sys.executable, "monitoring/rulefile.py", platform, *args)
    assert r.returncode == 0, r.stderr
    out.write_text(r.stdout)
    return out


def test_rules_pass_promtool_check_and_unit_tests(tmp_path):
    """Each platform's rule file passes promtool's check, and its unit test
    (monitoring/tests/<platform>.test.yaml: an expectation for every signal, which
    monitoring/generate.py --check demands)."""
    assert sh("bash", "bench/platforms/monitoring/build.sh", "prometheus", timeout=1200).returncode == 0
    tests = {p: yaml.safe_load((ROOT / f"monitoring/tests/{p}.test.yaml").read_text()) for p in contract.PLATFORMS}
    # An existing ingress's rules are rendered for a run: its test names the run's values.
    files = {"cluster": rule_file(tmp_path, "cluster"), "lab": rule_file(tmp_path, "lab", "1e9"),
             "existing": rule_file(tmp_path, "existing", *tests["existing"].pop("rulefile_args"))}
    r = subprocess.run([PROMTOOL, "check", "rules", *map(str, files.values())], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for platform, rules in files.items():
        test = tests[platform]
        test["rule_files"] = [str(rules)]
        (tmp_path / f"{platform}.test.yaml").write_text(yaml.safe_dump(test))
        r = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / f"{platform}.test.yaml")],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "SUCCESS" in r.stdout, platform + ": " + r.stdout + r.stderr


def test_an_existing_ingress_rules_installed_for_a_run_read_only_their_own_series(tmp_path):
    """EXISTING_RULES=install: the rules rendered with a run's label (monitoring/rulefile.py
    existing ... LABEL) record, each under that label, what the unlabelled rules record
    (monitoring/tests/existing.test.yaml's first test), though the same Prometheus holds
    another run's bench:* series, far off: its ratios read only the run's own."""
    assert sh("bash", "bench/platforms/monitoring/build.sh", "prometheus", timeout=1200).returncode == 0
    fixture = yaml.safe_load((ROOT / "monitoring/tests/existing.test.yaml").read_text())
    rules = rule_file(tmp_path, "existing", *fixture.pop("rulefile_args"), "run-1")
    first = fixture["tests"][0]
    others = {r: 99 for r in ("bench:ingress_cpu_cores:rate", "bench:ingress_cpu_limit:cores", "bench:server_requests:rate",
                              "bench:backend_cpu_cores:rate", "bench:link_capacity:bits")}
    first["input_series"] += [{"series": f'{r}{{bench_rules="run-0"}}', "values": f"{v}x30"} for r, v in others.items()]
    for e in first["promql_expr_test"]:
        e["expr"] = contract.RECORD.sub(lambda m: m.group(0) + '{bench_rules="run-1"}', e["expr"])
        for x in e["exp_samples"]:
            x["labels"] = "{" + ",".join(filter(None, ['bench_rules="run-1"', x.get("labels", "{}")[1:-1]])) + "}"
    fixture.update(tests=[first], rule_files=[str(rules)])
    (tmp_path / "installed.test.yaml").write_text(yaml.safe_dump(fixture))
    r = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "installed.test.yaml")], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_an_existing_ingress_is_counted_by_its_own_counters_then_its_backends():
    """The counters read around a load (monitoring/rulefile.py server-counters), in the rules'
    order: the ingress's pods' first, each filled with their matchers; the backends' after."""
    r = sh(sys.executable, "monitoring/rulefile.py", "server-counters", 'namespace="ingress", pod=~"ctl-1"', 'namespace="shop", pod=~"web-1"')
    assert r.returncode == 0, r.stderr
    rows = [line.split(" ", 2) for line in r.stdout.splitlines()]
    whose = [w for w, _, _ in rows]
    assert whose == sorted(whose, key=lambda w: w == "backends") and {"ingress", "backends"} == set(whose), whose
    assert ["ingress", "nginx_ingress_controller_requests", 'sum(nginx_ingress_controller_requests{namespace="ingress", pod=~"ctl-1"})'] == rows[0]
    assert ["backends", "istio_requests_total", 'sum(istio_requests_total{namespace="shop", pod=~"web-1", reporter="destination"})'] == rows[-1]


def test_an_existing_ingress_reads_as_one_query_what_its_rules_record(tmp_path):
    """Without the rules in the user's Prometheus, k6's correlation asks one query
    (k6/lib/correlation.js existingQuery: every rule written out, evaluated every scrape,
    each series named by its rule): on the existing platform's promtool input, its last
    evaluation holds, signal by signal and pod by pod, what the recorded rules' expectations
    hold (monitoring/tests/existing.test.yaml's first test)."""
    fixture = yaml.safe_load((ROOT / "monitoring/tests/existing.test.yaml").read_text())
    interval, ingress, backend, loadgen, link, nodes, nic = fixture.pop("rulefile_args")
    c = contract.load()
    values = {"window": f"{contract.window_for(c, int(interval))}s", "ingress": ingress, "backend": backend,
              "loadgen": loadgen, "link": float(link), "nodes": nodes, "nic": nic}
    js = ("import('./k6/lib/correlation.js').then((m) => console.log(m.existingQuery("
          f"{{ from: 510, to: 600 }}, {json.dumps(values)}, {int(interval)})))")
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    query = r.stdout.strip()
    keys = {s["record"]: s["key"] for s in contract.keyed(c)}
    first = fixture["tests"][0]
    expected = []
    for e in first["promql_expr_test"]:
        rule = next(iter(contract.RECORD.findall(e["expr"])), None)
        if rule in keys:  # the signals of k6's summary; the others are rules only
            for s in e["exp_samples"]:
                inner = s.get("labels", "{}")[1:-1]
                expected.append({"labels": "{" + ",".join(filter(None, [f'bench_signal="{keys[rule]}"', inner])) + "}",
                                 "value": s["value"]})
    assert len(expected) >= len(keys), expected
    test = {"evaluation_interval": fixture["evaluation_interval"], "tests": [{
        "interval": first["interval"], "input_series": first["input_series"],
        "promql_expr_test": [{"expr": f"round(last_over_time({query}), 0.001)", "eval_time": "10m", "exp_samples": expected}]}]}
    (tmp_path / "query.test.yaml").write_text(yaml.safe_dump(test))
    r = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "query.test.yaml")], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_both_platforms_record_the_same_contract(tmp_path):
    def recorded(path):
        return [r["record"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]
    cluster, lab = recorded(rule_file(tmp_path, "cluster")), recorded(rule_file(tmp_path, "lab", "1e9"))
    helpers = {"bench:pod_role:info", "bench:container_cpu_cores:rate", "bench:container_cpu_limit:cores"}
    assert set(cluster) - helpers == set(lab)
    assert lint.contract_rules() <= set(lab)
    # The contract's cluster-only helpers are these, and no signal consumers read is one.
    c = contract.load()
    assert {s["record"] for s in c["signals"] if not contract.per_platform(s["expr"])["lab"]} == helpers
    assert lint.contract_rules() == set(contract.public(c)) and not helpers & lint.contract_rules()
    # The ratios come after what they divide, in one group: evaluated at the same timestamp.
    ratio = cluster.index("bench:ingress_cpu_utilization:ratio")
    assert ratio > cluster.index("bench:ingress_cpu_cores:rate") and ratio > cluster.index("bench:ingress_cpu_limit:cores")
    groups = yaml.safe_load(rule_file(tmp_path, "lab", "1e9").read_text())["groups"]
    assert [g["name"] for g in groups] == ["bench-signals", "bench-link"]
    assert groups[1]["rules"] == [{"record": "bench:link_capacity:bits", "expr": "vector(1e9)"}]


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    """One monitored rps run on the lab, shared by the assertions below."""
    root = tmp_path_factory.mktemp("mon")
    from conftest import Run
    # The counter's range below opens 3-4 s before the load: the lab's earlier load (the stream's
    # previous test) ends two of the exporter's 2 s scrapes before it, or its tail is counted
    # as this run's.
    time.sleep(4)
    r = Run(sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "lab", "RESULTS_ROOT": str(root), "DURATION": "12s", "CONNECTIONS": "20"}), root)
    assert r.rc == 0, r.err
    return r


def test_a_lab_run_is_correlated_with_every_signal(lab_run):
    c, v = lab_run.summary["correlation"], lab_run.summary["verdict"]
    assert c["url"] == LAB_PROM and not c["missing"], c["missing"]
    s, w = c["signals"], c["window"]
    # The server's rate is the mean of its rule's evaluations over the steady window, as the
    # teardown read them (k6/lib/correlation.js); each is a rate of the ingress's own counter,
    # whose increase over the run is what k6 sent (the rate's agreement with the client's over
    # the same windows is test_cluster_e2e's, at a constant rate; a closed-model run's rate moves).
    evals = [float(v) for t, v in prom_query(lab_run, f"bench:server_requests:rate[{math.ceil(w['to'] - w['from']) + 1}s]",
                                             {**c, "window": {**w, "end": w["to"]}})[0]["values"] if t >= w["from"]]
    # exact: the same samples averaged; float rounding
    assert evals and abs(s["server_rps"] - sum(evals) / len(evals)) <= 1e-9 * s["server_rps"], (s["server_rps"], evals)
    time.sleep(max(0, w["end"] + 3 - time.time()))  # the exporter's first scrape after the run is in
    counter = prom_query(lab_run, f'nginx_http_requests_total{{role="ingress"}}[{math.ceil(w["end"] - w["start"]) + 6}s]',
                         {**c, "window": {**w, "end": w["end"] + 3}})[0]["values"]
    # exact: the requests in flight at the edges, and the exporter's own stub_status reads, one per 2 s scrape
    assert within(float(counter[-1][1]) - float(counter[0][1]), lab_run.result["requests"], 0.01), (counter[0], counter[-1], lab_run.result["requests"])
    # exact: a rate over cumulative CPU time: 5 % for the samples' timing
    assert 0 < s["ingress_cpu_cores"] <= s["ingress_cpu_limit_cores"] * 1.05
    assert s["link_capacity_bits"] == 10e9 and s["nic_transmit_bits"] > 0
    assert v["limit"] in {"load-generator", "nic", "ingress-cpu", "backend", "none"} and "bench:" in v["rule"], v
    assert "verdict" in (lab_run.dir / "summary.txt").read_text()
    # The report: rendered, its images present (the headless-browser checks are test_report's).
    assert (lab_run.dir / "report.html").exists() and (lab_run.dir / "timeseries.json").exists()
    assert sh(sys.executable, "bench/report", "check", str(lab_run.dir / "report.html")).returncode == 0


def test_every_dashboard_query_answers_after_a_lab_run(lab_run):
    assert dashboard_query_gaps(lab_run) == ([], [])


def test_the_dashboards_run_stats_are_the_summarys_numbers(lab_run):
    """The "p99 latency" and "Errors" stats over the run's range: the run's own p99 within the
    native histogram's bucket (k6's remote write: bounds 2^(1/8) apart; the true value and
    Prometheus' estimate both lie in that bucket, so up to 9% apart: 6% failed once, 5.44
    against 5.82 ms), and its error ratio from the request counters, not a mean of
    per-interval or per-series values. The range ends after k6's last remote write: k6 pushes
    every 2 s (bench/lib/prometheus.sh k6_rw_env) and once more when it stops, after its summary's time, so a
    range ending there misses the last push (4.23 against 4.68 ms once: a bucket apart)."""
    dash = json.loads((ROOT / "dashboards/ingress-bench.json").read_text())
    testid = json.loads((lab_run.dir / "meta.json").read_text())["testid"]
    corr = lab_run.summary["correlation"]
    # Two push intervals and a second after the summary's time: every sample of the run is in.
    corr = {**corr, "window": {**corr["window"], "end": corr["window"]["end"] + 5}}
    run_range = f"{int(corr['window']['end'] - corr['window']['start']) + 1}s"
    def stat(title):
        panel = next(p for p in dash["panels"] if p["type"] == "stat" and p["title"] == title)
        expr, = [e for w, e in lint.queries({**dash, "panels": [panel]}, testid, interval="10s", __range=run_range) if "target" in w]
        return expr
    stats = {t: stat(t) for t in ("p99 latency", "Errors")}
    p99 = [float(r["value"][1]) * 1000 for r in prom_query(lab_run, stats["p99 latency"], corr)]
    # exact: one bucket of Prometheus' native histogram, 2^(1/8)
    assert len(p99) == 1 and max(p99[0], lab_run.result["p99_ms"]) / min(p99[0], lab_run.result["p99_ms"]) <= 2 ** (1 / 8), (p99, lab_run.result["p99_ms"])
    errors = [float(r["value"][1]) for r in prom_query(lab_run, stats["Errors"], corr)]
    assert errors == [lab_run.result["error_rate"]] == [0], errors
    print(f"\np99: dashboard {p99[0]:.3f} ms, summary {lab_run.result['p99_ms']:.3f} ms")


def test_the_dashboard_test_catches_an_unknown_metric(lab_run):
    """A misspelt k6 metric (not a bench:* rule, which the linter refuses): the live query
    answers nothing, and the test names the panel."""
    dash = json.loads((ROOT / "dashboards/ingress-bench.json").read_text())
    panel = next(p for p in dash["panels"] if p.get("title") == "Requests per second")
    panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace("k6_http_reqs_total", "k6_http_requests_total")
    failed, empty = dashboard_query_gaps(lab_run, dash)
    assert not failed and len(empty) == 1 and "Requests per second" in empty[0], (failed, empty)
    # A query Prometheus refuses is a failure, not an empty answer.
    panel["targets"][0]["expr"] = "sum(rate(k6_http_reqs_total[5s])"
    failed, empty = dashboard_query_gaps(lab_run, dash)
    assert len(failed) == 1 and "Requests per second" in failed[0] and not empty, (failed, empty)


def test_prometheus_unreachable_still_writes_results(bench):
    run = bench("rps", PROMETHEUS_URL="http://127.0.0.1:9")
    assert run.rc == 0, run.err
    missing = run.summary["correlation"]["missing"]
    assert missing and all("did not answer" in why for why in missing.values()), missing
    # refused: asked again, a second apart, through k6/lib/correlation.js REFUSED_GRACE_S (10 s)
    assert run.metric("bench_correlation_queries")["count"] > 1, run.metric("bench_correlation_queries")
    assert run.summary["verdict"]["limit"] == "unknown"
    assert run.summary["server"]["requests"] > 0 and (run.dir / "report.html").exists()


@pytest.mark.quiet  # the quota on the load generator's group, which the cluster's stream's k6 shares
def test_starved_client_is_judged_client_bound_and_fails_its_validity_threshold(bench):
    """k6 held to a tenth of a CPU by a CFS quota on its cgroup (the native engine there sends
    a fraction of what the LB serves): it uses all it may, the verdict says NOT VALID, and
    the validity threshold (REQUIRE_VALID, on by default; the suite's is off) fails the run with exit 99.
    20 s, as the CPU-limited ingress's test below: a 12 s run's steady part once read 0.76 of
    the quota (CI, stop 44), two evaluations of the rules being too few for a bound at 0.9.
    The lab first: bringing it up removes the suite's empty groups, the quota with them (it
    did when this test was the first to need the lab, and k6 ran unlimited)."""
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    CPU_CG.mkdir(parents=True, exist_ok=True)
    try:
        (CPU_CG / "cpu.cfs_quota_us").write_text("10000")  # of cpu.cfs_period_us 100000
        run = bench("rps", DURATION="20s", REQUIRE_VALID="1")
    finally:
        (CPU_CG / "cpu.cfs_quota_us").write_text("-1")
    v = run.summary["verdict"]
    assert v["limit"] == "load-generator" and v["valid"] is False, (v, run.summary["correlation"]["signals"])
    assert run.rc == 99, run.err
    result = next(l for l in run.out.splitlines() if l.startswith("result"))
    assert "✗ bench_loadgen_cpu_utilization value<0.9" in result and "NOT VALID: load-generator-bound" in result, result


@pytest.mark.quiet
def test_cpu_limited_ingress_is_judged_ingress_bound(bench):
    """The LB on its one CPU, held to a quarter of it by a CFS quota on its cgroup (what a
    Kubernetes CPU limit does): it uses all it may, and the verdict names the ingress from
    its own share, k6 having headroom. 20 s: the verdict averages the steady part of a run (from
    8 s in), and a 12 s run's 4 s of it once read 0.887 of the quota (c23), under the 0.9
    saturation level: two evaluations of the rules are too few for a bound at 0.9."""
    variant = "nginx-lb-default"
    assert sh("bash", "bench/platforms/lab.sh", "up", env={"VARIANT": variant}).returncode == 0
    quota = CPU_CG.parent / "ingress/cpu.cfs_quota_us"
    try:
        quota.write_text("25000")  # of cpu.cfs_period_us 100000
        run = bench("rps", VARIANT=variant, DURATION="20s")
    finally:
        quota.write_text("-1")
    s, v = run.summary["correlation"]["signals"], run.summary["verdict"]
    assert run.rc == 0 and v["limit"] == "ingress-cpu" and v["valid"] is True, (v, s)
    # exact: the quota set here (0.25 CPU), used to 90 % by a saturated LB
    assert s["ingress_cpu_limit_cores"] == 0.25 and s["ingress_cpu_cores"] >= 0.9 * 0.25, s
    # exact: the verdict's saturation level (0.9), which the valid verdict asserted above implies
    assert s["loadgen_cpu_utilization"] < 0.9 and "other work" not in v["text"], (v, s)
    print(f"\n{run.result['rps']:.0f} req/s; {v['text']}")


def test_rules_missing_are_named_in_the_summary(bench):
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "up", env={"PLATFORM": "lab"}).returncode == 0
    for f in (LAB_MON_STATE / "rules").glob("*.yaml"):
        f.unlink()
    pid = sh("pgrep", "-f", "prometheus --ingress-bench-lab-monitoring").stdout.split()[0]
    sh("kill", "-HUP", pid)
    run = bench("rps")
    assert run.rc == 0, run.err
    # Said before the load, once the wait for them is over (the lab's 10 s)
    assert f"warning: Prometheus at {LAB_PROM} has not loaded the bench rules" in run.err, run.err
    missing = run.summary["correlation"]["missing"]
    assert len(missing) == 15
    assert all("rules not loaded" in why for why in missing.values()), missing
    sh("bash", "bench/platforms/monitoring/monitoring.sh", "down", env={"PLATFORM": "lab"})


def test_monitoring_down_twice_leaves_nothing():
    """Down twice: nothing of the lab's monitoring left, k6's group included, which another
    run's k6 on this host shares: no load starts meanwhile (no_load)."""
    with no_load():
        for _ in range(2):
            r = sh("bash", "bench/platforms/monitoring/monitoring.sh", "down", env={"PLATFORM": "lab"})
            assert r.returncode == 0, r.stderr
        assert not LAB_MON_STATE.exists()
        assert not sh("pgrep", "-f", "ingress-bench-lab-monitoring").stdout.strip()
        # k6's group is gone (the lab's nginx groups stay while the lab is up).
        assert not Path("/sys/fs/cgroup/cpuacct/ingress-bench/loadgen").exists()
        assert not CPU_CG.exists()


def test_lab_monitoring_refused_without_the_lab():
    sh("bash", "bench/platforms/lab.sh", "down")
    r = sh("bash", "bench/platforms/monitoring/monitoring.sh", "up", env={"PLATFORM": "lab"})
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].startswith("error: the lab is not up")


def test_a_placement_that_cannot_saturate_the_ingress_is_said_before_the_load(bench):
    """k6 on one CPU for an LB on two (the lab's CPU lists): one warning line, before k6
    starts, saying what to change; the run itself goes on."""
    run = bench("rps", LAB_CLIENT_CPUS="0", LAB_SERVER_CPUS="0-1", DURATION="2s", MONITORING="0")
    assert run.rc == 0, run.err
    warnings = [l for l in run.err.splitlines() if l.startswith("warning: placement:")]
    assert warnings == ["warning: placement: k6 has 1 CPU(s) (0) for an ingress on 2 (0-1): give it at least 2 "
                        "(LAB_CLIENT_CPUS), or the run will likely measure k6 (NOT VALID, exit 99)"], run.err
    lines = run.err.splitlines()
    assert lines.index(warnings[0]) < next(i for i, l in enumerate(lines) if l.startswith("client "))
    # the default placement (client 0, servers 1) says nothing
    assert "warning: placement" not in bench("rps", DURATION="1s", MONITORING="0").err
