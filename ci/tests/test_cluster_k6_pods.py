"""k6 in the cluster's pods, for real, on the local cluster: PLATFORM=external pointed at its
API as a user's cluster would be, the distributed Indexed Job (segments that add up, a crossed
threshold, an interrupt, the native engine in the pods), and every setting reaching the host's
k6 and the pods' k6."""
import json
import urllib.parse
import os
import signal
import subprocess
import time

import pytest

from conftest import FROM_A_TERMINAL, K6_UNJUDGED, KUBECONFIG, ROOT, examples, exits_as_its_thresholds, kubectl, one_error, sh, task_with, urlopen, within

pytestmark = pytest.mark.usefixtures("local_cluster")


def test_external_platform_runs_k6_inside_the_cluster(tmp_path):
    """PLATFORM=external, opted in, pointed at the local cluster's API as a user's cluster
    would be: the overlay is deployed there and k6 runs in it (a ClusterIP is not reachable
    from outside); nginx's count, read through the API server, agrees."""
    env = {"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG, "IMAGE_SET": "local",
           "VARIANT": "nginx-lb-full", "DURATION": "4s", "CONNECTIONS": "20", "RESULTS_ROOT": str(tmp_path)}
    r = sh("bash", "bench/run/bench.sh", "rps", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["platform"] == "external" and summary["segments"] == 1
    assert summary["requests"] > 0 and summary["errors"] == 0 and summary["passed"]
    # exact: the requests in flight at the end, at most one per connection
    assert within(summary["requests"], summary["server"]["requests"], 0.01), summary


def test_external_cluster_that_does_not_answer(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    err = one_error(sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1",
                                                          "KUBECONFIG": str(kubeconfig), "RESULTS_ROOT": str(tmp_path / "r")}))
    assert f"the cluster of KUBECONFIG={kubeconfig} does not answer" in err
    assert not (tmp_path / "r").exists()


def test_a_crossed_threshold_in_the_pods_is_exit_99_with_the_summary(tmp_path):
    """A pod whose k6 crossed a threshold finished its run: the Job completes, the segments
    are summed, and the run exits 99 (k6's code for it), not "did not complete"."""
    r = sh("bash", "bench/run/distributed.sh", "rps", env={"SEGMENTS": "2", "DURATION": "3s", "CONNECTIONS": "20",
                                                     "P99_MS": "0.001", "RESULTS_ROOT": str(tmp_path)}, timeout=300)
    assert r.returncode == 99, r.stderr
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["segments"] == 2 and summary["requests"] > 0 and summary["passed"] is False


def test_an_interrupted_distributed_run_is_recorded_aborted(tmp_path):
    """SIGINT to distributed.sh's process group while its pods load (a terminal's Ctrl-C): each
    pod's k6 stops gracefully and prints what it measured, the segments are summed, marked
    aborted and never passed, exit 130; no pod keeps running."""
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        p = subprocess.Popen([*FROM_A_TERMINAL, "bash", "bench/run/distributed.sh", "rps"], cwd=ROOT, start_new_session=True, stdout=out,
                             stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, SEGMENTS="2", DURATION="60s", CONNECTIONS="20", RESULTS_ROOT=str(tmp_path / "r")))
        deadline = time.time() + 240
        while "Running" not in kubectl("-n", "ingress-bench", "get", "pods", "-l", "app.kubernetes.io/name=k6", "-o",
                                               "jsonpath={range .items[*]}{.status.phase} {end}").stdout:
            assert p.poll() is None and time.time() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        time.sleep(5)
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=120) == 130, log.read_text()[-2000:]
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    assert summary["aborted"] is True and summary["passed"] is False, summary
    assert summary["interrupted"]["signal"] == "SIGINT" and summary["requests"] > 0, summary
    # exact: the requests in flight at the end, at most one per connection
    assert within(summary["requests"], summary["server"]["requests"], 0.01), summary
    phases = kubectl("-n", "ingress-bench", "get", "pods", "-l", "app.kubernetes.io/name=k6", "-o",
                     "jsonpath={range .items[*]}{.status.phase} {end}").stdout
    assert "Running" not in phases, phases



def test_the_indexed_jobs_segments_add_up_and_stream(tmp_path):
    """The project's k6 image carries the extension: two pods, each its execution segment of a
    native open-model run at 400 req/s: each does half, the parts add up to the rate asked
    for, and nginx counted exactly their sum. 12 s: the kubelet's cAdvisor finds a new
    container's cgroup seconds after it starts, and the runners' own CPU, which the verdict
    needs, was missing from 5 s runs."""
    rate, seconds = 400, 12
    r = sh("bash", "bench/run/distributed.sh", "rps", env={"SEGMENTS": "2", "ENGINE": "native", "RATE": str(rate),
                                                     "DURATION": f"{seconds}s", "CONNECTIONS": "100", "RESULTS_ROOT": str(tmp_path),
                                                     **K6_UNJUDGED},
           timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["segments"] == 2 and summary["errors"] == 0 and summary["passed"], summary
    parts = [s["rps"] for s in summary["per_segment"]]
    # exact: each segment half of the open model's rate; 5 % for the slots at the run's edges
    assert parts and all(within(p, rate / 2, 0.05) for p in parts), parts
    # exact: RATE x DURATION, and each pod's setup and teardown requests
    assert within(summary["requests"], rate * seconds, 0.03), summary["requests"]
    # exact: the requests in flight at the end, at most one per connection
    assert within(summary["requests"], summary["server"]["requests"], 0.01), summary
    # One latency for the run: the pods' histograms merged (test_merged_percentiles.py holds
    # the merge to the exact values); a mixture's p99 lies between its parts' (each part's
    # from its own histogram, the same buckets).
    each = [s["p99_ms"] for s in summary["per_segment"]]
    # exact: a mixture's p99 between its parts', up to the interpolation between two ranks
    assert summary["latency"]["merged"] and min(each) * 0.99 <= summary["p99_ms"] <= max(each) * 1.01, (summary["p99_ms"], each)
    # The pods streamed to the cluster's Prometheus (by its Service name), each runner apart
    # (instance_id) and tagged with the run: their request counters add up to the run's give
    # or take each pod's setup and teardown GETs, and the classic histograms'
    # p99 of all of them is the merged one within a bucket.
    prom = sh("bash", "bench/platforms/monitoring/monitoring.sh", "url").stdout.strip()
    testid = summary["testid"]

    def q(expr):
        with urlopen(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as r:
            return json.load(r)["data"]["result"]
    runners = q(f'count(count by (instance_id) (last_over_time(k6_http_reqs_total{{testid="{testid}"}}[5m])))')
    assert float(runners[0]["value"][1]) == 2, runners
    counted = float(q(f'sum(max_over_time(k6_http_reqs_total{{testid="{testid}"}}[5m]))')[0]["value"][1])
    assert summary["requests"] - 2 <= counted <= summary["requests"] + 2 * 2, (counted, summary["requests"])
    # Each runner's classic buckets as last pushed: all of its requests (the native engine's,
    # xk6/latency.go). (increase() leaves out what a series held at its first sample, the
    # first push's requests: it read 11.6 ms against a merged 13.0 once.)
    p99 = 1000 * float(q(f'histogram_quantile(0.99, sum by (le) (last_over_time(k6_bench_http_req_duration_buckets_total{{testid="{testid}"}}[5m])))')[0]["value"][1])
    # exact: within the classic bucket the merged p99 lies in (8 per power of two: 12.5 % wide at
    # most; histogram_quantile interpolates inside it), and the engine's 1/256
    assert abs(p99 - summary["p99_ms"]) <= 0.125 * summary["p99_ms"], (p99, summary["p99_ms"])
    assert summary["verdict"]["limit"] in {"load-generator", "ingress-cpu", "nic", "backend", "none"}, summary["verdict"]
    print(f"\nmerged p99 {summary['p99_ms']:.3f} ms (segments {each}), Prometheus' {p99:.3f} ms; {summary['verdict']['text']}")


# Settings given on the task line, as a user types them: the environment's form goes through the
# same ./task wrapper, tried on the lab (test_settings.py).
@pytest.mark.parametrize("form", ["line"])
def test_every_setting_reaches_the_local_platforms_k6(form, tmp_path):
    """All the settings that reach the host's k6, each a non-default value, through `./task
    bench:rps` on the local cluster (less the lab's TARGET and stub_status, which it refuses
    or replaces): k6 received each one as given (test_settings.py has the lab's)."""
    root = tmp_path / "results"
    given = examples("k6", PLATFORM="local", TARGET=None, STUB_STATUS_URL=None, RESULTS_ROOT=str(root),
                     TESTID=f"settings-local-{form}")
    r = task_with(form, "bench:rps", given)
    # every setting's example at once, thresholds among them: which one a run crosses is the
    # examples'; that its exit code is theirs, and what k6 received, is the subject
    (run_dir,) = root.iterdir()
    meta, summary = (json.loads((run_dir / f).read_text()) for f in ("meta.json", "summary.json"))
    exits_as_its_thresholds(r, summary)
    got = meta["settings"]
    assert got == summary["settings"]
    assert {k: got.get(k) for k in given} == given
    # And one more: the deployed ingress's address, which bench.sh hands k6 on this platform.
    assert set(got) - set(given) == {"TARGET"} and got["TARGET"].startswith("https://198.18.")
    assert (meta["engine"], meta["rate"], meta["connections"], meta["connection_reuse"]) == (given["ENGINE"], 50, 7, False)
    assert meta["target"].startswith("https://198.18.") and meta["target"].endswith("/4kb.bin")


@pytest.mark.parametrize("form", ["line"])
def test_every_pod_setting_reaches_the_indexed_jobs_pods(form, tmp_path):
    """All the settings that reach the pods, through `./task bench:distributed`: each is in
    the environment of the k6 pods that ran (their spec, read from the cluster) and in what
    each pod's k6 received (its summary)."""
    given = examples("pods", PLATFORM="local", TARGET=None, TESTID=f"settings-pods-{form}", SEGMENTS="2")
    # A PROMETHEUS_URL given is not the local stack's: the run does not start that, and the
    # monitoring component's CRDs come with it.
    assert sh("bash", "bench/platforms/monitoring/monitoring.sh", "up").returncode == 0
    r = task_with(form, "bench:distributed", {**given, "RESULTS_ROOT": str(tmp_path)})
    # every setting's example at once, thresholds among them (DROPPED_MAX=3 at 25 req/s a pod,
    # crossed once on a busy host): the exit code is the merged thresholds' one outcome
    (summary,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/summary.json")]
    crossed = [t for t in summary["thresholds"] if not t["ok"]]
    assert summary["passed"] == (not crossed) and r.returncode == (99 if crossed else 0), (r.returncode, crossed, r.stderr[-3000:])
    pods = json.loads(kubectl("-n", "ingress-bench", "get", "pods", "-l", "job-name=k6-settings-pods-" + form,
                              "-o", "json").stdout)["items"]
    assert len(pods) == 2
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert {k: env.get(k) for k in given} == given
        assert env["TARGET"] == "https://nginx-lb.ingress-bench.svc"  # the deployed ingress by its Service name, TLS as SCHEME asks
    for part in sorted(tmp_path.glob("*/segment-*.json")):
        got = json.loads(part.read_text())["settings"]
        assert {k: got.get(k) for k in given} == given, part


def test_distributed_bad_segments():
    err = one_error(sh("bash", "bench/run/distributed.sh", "rps", env={"SEGMENTS": "0"}))
    assert "SEGMENTS must be at least 1, got 0" in err
