"""The local cluster treated as a user's cluster: kube-prometheus-stack installed from its chart
(chart.sh up: the project's values, the chart's Prometheus, operator, kubelet ServiceMonitor and
rules; monitoring/kube-prometheus-stack-local.yaml says what this machine changes), then
PLATFORM=external as a user runs it: k6 in-cluster as an Indexed Job of two segments, streaming
to the chart's Prometheus by its Service name, the correlation and verdict computed from it
through the chart's scrape configs. Two verdicts, the chart's default selectors, every
dashboard query, and an ingress the user runs (INGRESS_PODS) judged from the chart's Prometheus
as it is; uninstalled after, the machine as found (local_cluster)."""
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml

from conftest import K6_UNJUDGED, KUBECONFIG, PINS, ROOT, VALIDITY_UNJUDGED, kubectl, sh, urlopen, within
from queries import query_gaps

pytestmark = pytest.mark.leaves_monitoring_down  # the chart's stack in place of the local one

RELEASE = "kube-prometheus-stack"  # bench/platforms/monitoring/chart.sh RELEASE
IN_CLUSTER = f"http://{RELEASE}-prometheus.monitoring.svc:9090"
# The chart's selectors as it ships them: monitors and rules of its own release only.
CHART_SELECTORS = "prometheus.prometheusSpec." + ",prometheus.prometheusSpec.".join(
    f"{k}SelectorNilUsesHelmValues=true" for k in ("serviceMonitor", "podMonitor", "rule"))


def chart_sh(chart, *args, timeout=600):
    path, off = chart
    return sh("bash", "bench/platforms/monitoring/chart.sh", *args, *(off if args[0] == "up" else []),
              env={"KPS_CHART": str(path)}, timeout=timeout)


@pytest.fixture(scope="module")
def stack(local_cluster, chart):
    # The local stack first, up and down, as a user switching stacks: its operator's kubelet
    # Service once outlived it, and the chart's kubelet monitor then scraped every kubelet
    # twice (the CPU signals of every run read "no data": the rules' joins failed).
    for cmd in ("up", "down"):
        assert sh("bash", "bench/platforms/monitoring/monitoring.sh", cmd).returncode == 0
    assert kubectl("-n", "kube-system", "get", "service", "kubelet").returncode != 0
    t0 = time.monotonic()
    r = chart_sh(chart, "up")
    assert r.returncode == 0, r.stderr
    installed = time.monotonic() - t0
    print(f"\nkube-prometheus-stack installed in {installed:.0f} s")
    ip = kubectl("-n", "monitoring", "get", "svc", f"{RELEASE}-prometheus", "-o", "jsonpath={.spec.clusterIP}").stdout
    yield {"url": f"http://{ip}:9090", "install_s": installed, "chart": chart}
    for _ in range(2):  # down is idempotent
        r = chart_sh(chart, "down")
        assert r.returncode == 0, r.stderr
    assert kubectl("get", "ns", "monitoring").returncode != 0
    assert kubectl("-n", "kube-system", "get", "service", f"{RELEASE}-kubelet").returncode != 0  # the operator's
    assert not [c for c in kubectl("get", "crd", "-o", "name").stdout.split() if c.endswith(".monitoring.coreos.com")]


def poll(seconds, f):
    for _ in range(seconds):
        if got := f():
            return got
        time.sleep(1)
    return f()


def config_story(url):
    """Where a missing scrape job was lost: the jobs Prometheus loaded, those in the secret
    the operator wrote, and the operator's and the config reloader's last lines."""
    with urlopen(f"{url}/api/v1/status/config", timeout=10) as r:
        loaded = [j["job_name"] for j in (yaml.safe_load(json.load(r)["data"]["yaml"]) or {}).get("scrape_configs") or []]
    secret = sh("bash", "-c", f"kubectl -n monitoring get secret prometheus-{RELEASE}-prometheus -o jsonpath='{{.data.prometheus\\.yaml\\.gz}}'"
                " | base64 -d | gunzip | grep -o 'job_name: .*'", env={"KUBECONFIG": KUBECONFIG}).stdout.split("\n")
    logs = {c: kubectl("-n", "monitoring", "logs", *c.split(), "--tail=15").stdout[-2500:]
            for c in (f"deploy/{RELEASE}-operator", f"prometheus-{RELEASE}-prometheus-0 -c config-reloader")}
    return {"loaded": loaded, "operator's secret": secret, **logs}


def rule_groups(url):
    with urlopen(f"{url}/api/v1/rules", timeout=10) as r:
        return [g["name"] for g in json.load(r)["data"]["groups"]]


def q(url, expr, at=None):
    params = {"query": expr, **({"time": at} if at else {})}
    with urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode(params), timeout=10) as r:
        return json.load(r)["data"]["result"]


def container_cgroup(ns, selector, container, controller, name):
    """File NAME of a container of the first pod SELECTOR finds, in its own cgroup on its node
    (cgroup v1's CONTROLLER hierarchy, the kubelet's cgroupfs layout: .../pod<UID>/<ID>)."""
    pod = json.loads(kubectl("-n", ns, "get", "pods", "-l", selector, "-o", "json").stdout)["items"][0]
    cid = next(c["containerID"].split("://")[1] for c in pod["status"]["containerStatuses"] if c["name"] == container)
    (path,) = Path(f"/sys/fs/cgroup/{controller}").glob(f"**/pod{pod['metadata']['uid']}/{cid}/{name}")
    return path.read_text()


def container_cpu_s(ns, selector, container):
    """The CPU seconds that container has used (cpuacct.usage)."""
    return int(container_cgroup(ns, selector, container, "cpuacct", "cpuacct.usage")) / 1e9


def container_cfs(ns, selector, container):
    """That container's CFS periods and throttled ones so far (cpu.stat)."""
    stat = dict(l.split() for l in container_cgroup(ns, selector, container, "cpu", "cpu.stat").splitlines())
    return int(stat["nr_periods"]), int(stat["nr_throttled"])


def node_nic_bytes():
    """The bytes the local cluster's one node's NIC (eth0 in its namespace: bench/platforms/local/
    nodes.sh) has sent and received so far, as its kernel counts them (netlink, in that namespace)."""
    link = json.loads(sh("nsenter", f"--net={Path(KUBECONFIG).parents[1]}/nodes/1/netns", "ip", "-j", "-s", "link", "show", "dev", "eth0").stdout)[0]
    return link["stats64"]["tx"]["bytes"] + link["stats64"]["rx"]["bytes"]


class External:
    """A PLATFORM=external run of bench/run/bench.sh against the local cluster, k6 in two pods."""
    def __init__(self, tmp_path, scenario, **env):
        env = {"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG, "IMAGE_SET": "local",
               "PROMETHEUS_URL": IN_CLUSTER, "SEGMENTS": "2", "RESULTS_ROOT": str(tmp_path), **env}
        self.proc = sh("bash", "bench/run/bench.sh", scenario, env=env, timeout=600)
        self.dir = next(tmp_path.glob("*/"), None)
        summary = self.dir / "summary.json" if self.dir else None
        self.summary = json.loads(summary.read_text()) if summary and summary.exists() else None
        # Each pod's own k6 summary: its correlation, read from the chart's Prometheus.
        self.segments = [json.loads(p.read_text()) for p in sorted(self.dir.glob("segment-*.json"))] if self.dir else []

    def signals(self):
        return [s["correlation"]["signals"] for s in self.segments]


def test_the_chart_runs_as_installed(stack):
    """What the issue found broken on users' clusters, on the running stack: the kubelet's
    cAdvisor endpoint keeps cAdvisor's own stamps (the rules' deriv() needs them), the
    container_spec_cpu_* series the limit rules need arrive, and the bench rules are loaded
    beside the chart's own."""
    url = stack["url"]

    def cadvisor_jobs():  # none until the config reloader loads a config the operator made
        # with the kubelet's ServiceMonitor (its first may be made before it sees that one)
        with urlopen(f"{url}/api/v1/status/config", timeout=10) as r:
            jobs = (yaml.safe_load(json.load(r)["data"]["yaml"]) or {}).get("scrape_configs") or []
        return [j for j in jobs if j["job_name"].startswith(f"serviceMonitor/monitoring/{RELEASE}-kubelet/")
                and j.get("metrics_path") == "/metrics/cadvisor"]
    cadvisor = poll(180, cadvisor_jobs)
    if len(cadvisor) != 1:  # the whole story on stdout: an assertion's message is cut short
        print(json.dumps(config_story(url), indent=1))
    assert len(cadvisor) == 1 and cadvisor[0]["honor_timestamps"] is True, cadvisor
    # (container_spec_cpu_quota exists for a container with a CPU limit: the run below.)
    for series in ("container_spec_cpu_period", "container_spec_cpu_shares", "machine_cpu_cores"):
        assert poll(30, lambda: q(url, f"count({series})")), f"{series} is not scraped"
    groups = rule_groups(url)
    assert "k8s.rules.container_cpu_usage_seconds_total" in groups, groups  # the chart's own


# The verdicts whose signals come from the chart's own scrape configs: the ingress's CPU quota
# (container_spec_cpu_quota through the chart's kubelet monitor) and its node's NIC. (The
# runners' CPU is read in the nic run too, no signal missing; a starved client's verdict is
# test_monitoring.py's, the same rule on the project's stack.)
VERDICTS = {
    # The LB held to a quarter CPU by its limit (a CFS quota): k6 has the node's other cores.
    # 30 s: the averaging window's edges (the rules' lag at the start, the teardown's second
    # after the load) read idle time into a quota-bound ingress's CPU: 12 s runs read 0.90-0.98
    # of the quota, a 20 s run 0.896 (of 4 here), under the 0.9 saturation level. The edges
    # weigh two thirds as much in 30 s.
    "ingress-cpu": ("rps", {"VARIANT": "nginx-lb-default", "INGRESS_CPU": "250m", "DURATION": "30s"}, 0),
    # The ingress pod's link shaped to 1 Gbit/s (the CNI bandwidth plugin). 30 s: the burst a
    # user's cluster keeps (deploy cuts it on PLATFORM=local only) passes in the first second.
    "nic": ("throughput", {"VARIANT": "nginx-lb-full-link-1g", "DURATION": "30s", "CONNECTIONS": "10"}, 0),
}


@pytest.fixture(scope="module")
def verdict_run(stack, tmp_path_factory):
    """verdict_run(limit) -> External: each VERDICTS run made once, shared by the tests that
    read it (the nic run is also the one whose streaming and counts are checked)."""
    runs = {}

    def run(limit):
        if limit not in runs:
            scenario, env, _ = VERDICTS[limit]
            runs[limit] = External(tmp_path_factory.mktemp(limit), scenario, **env)
        return runs[limit]
    return run


@pytest.mark.quiet
@pytest.mark.parametrize("limit", VERDICTS)
def test_the_verdicts_on_the_charts_stack(verdict_run, limit):
    run = verdict_run(limit)
    assert run.proc.returncode == VERDICTS[limit][2], run.proc.stderr
    v = run.summary["verdict"]
    assert v["limit"] == limit, (v, run.signals())
    if limit == "ingress-cpu":  # read from container_spec_cpu_quota
        assert run.signals() and all(s["ingress_cpu_limit_cores"] == 0.25 for s in run.signals()), run.signals()
    print(f"\n{limit}: {run.summary['rps']:.0f} req/s; {v['text']}")


def test_an_external_run_streams_to_the_charts_prometheus_and_judges_from_it(stack, verdict_run):
    """Two runners in-cluster against the overlay (the nic verdict's run), streaming to the
    chart's Prometheus by its Service name: their counters there add up to the run, the
    ingress's count agrees, each segment's correlation comes from that Prometheus (no signal
    missing), and every dashboard query answers: the CPUs-busy panel's from the chart's own
    node-exporter (its subchart, this machine's build through the chart's image values), as
    no process of the run publishes a CPU list here."""
    run = verdict_run("nic")
    assert run.proc.returncode == 0, run.proc.stderr
    s = run.summary
    assert s["platform"] == "external" and s["segments"] == 2 and s["errors"] == 0 and s["passed"], s
    # exact: the requests in flight at the end, at most one per connection
    assert within(s["requests"], s["server"]["requests"], 0.01), s
    for seg in run.segments:
        corr = seg["correlation"]
        assert corr["url"] == IN_CLUSTER and not corr.get("missing"), corr
    # The ingress's CPU (pinned whole cores: shares, no quota), which the chart's default
    # relabelling dropped; a quota in the ingress-cpu verdict's run.
    assert q(stack["url"], 'container_spec_cpu_shares{namespace="ingress-bench", container="nginx"}')
    counted = float(q(stack["url"], f'sum(max_over_time(k6_http_reqs_total{{testid="{s["testid"]}"}}[5m]))')[0]["value"][1])
    # Give or take each pod's setup and teardown GETs (the run's tags are on them too).
    assert s["requests"] - 2 <= counted <= s["requests"] + 2 * 2, (counted, s["requests"])
    # The dashboard, as a user's Grafana on this Prometheus would run it (the host reaches the
    # ClusterIP here), over the first runner's window.
    failed, empty = query_gaps(s["testid"], {**run.segments[0]["correlation"], "url": stack["url"]})
    assert (failed, empty) == ([], []), (failed, empty)
    exporters = json.loads(kubectl("-n", "monitoring", "get", "pods", "-l", "app.kubernetes.io/name=prometheus-node-exporter",
                                   "-o", "json").stdout)["items"]
    assert [c["image"] for p in exporters for c in p["spec"]["containers"]] == [f"localhost/ingress-bench/node-exporter:{PINS['NODE_EXPORTER_VERSION']}"]


def test_chart_up_leaves_a_release_it_did_not_install(stack):
    """A release of that name from someone else is never upgraded nor removed."""
    secret = kubectl("-n", "monitoring", "get", "secret", "-l", f"owner=helm,name={RELEASE}", "-o", "name").stdout.split()[-1]
    assert kubectl("-n", "monitoring", "label", secret, "ingress-bench.io/installed-by-").returncode == 0
    try:
        for cmd in ("up", "down"):
            r = chart_sh(stack["chart"], cmd)
            assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert "not installed by chart.sh" in r.stderr or "that chart.sh did not install" in r.stderr, r.stderr
    finally:
        kubectl("-n", "monitoring", "label", secret, "ingress-bench.io/installed-by=chart.sh")


def test_the_charts_default_selectors_need_the_release_label(stack, tmp_path):
    """With the chart's own selectors (only its release's monitors and rules) the monitoring
    component's objects are dropped until deploy labels them (PROMETHEUS_RELEASE): then a run
    is correlated with nothing missing. (The warning a run without them gives, once its wait
    for the rules is over: test_monitoring.py, on the lab.) The release keeps these selectors until
    the module's chart down: the tests after it run with them (an ingress you run: its
    PodMonitor labelled with the release, as the chart's selectors want)."""
    r = chart_sh(stack["chart"], "up", "--set", CHART_SELECTORS)
    assert r.returncode == 0, r.stderr
    # The operator and the config reloader take their time: until the new selectors
    # drop the monitoring component's rules (the earlier runs' deploy), the old hold.
    assert poll(180, lambda: "bench-signals" not in rule_groups(stack["url"])), "the chart's selectors never applied"
    labelled = External(tmp_path / "with", "rps", VARIANT="nginx-lb-full", DURATION="12s", SEGMENTS="1",
                        PROMETHEUS_RELEASE=RELEASE)
    assert labelled.proc.returncode == 0, labelled.proc.stderr
    assert "has not loaded" not in labelled.proc.stderr
    assert not labelled.segments[0]["correlation"].get("missing"), labelled.segments[0]["correlation"]


# An ingress the user runs (ci/tests/fixtures/existing/ingress.yaml, applied as they would), and
# what the suite is told of it: its address, its pods, its backends, their Prometheus (the chart's).
NODES_HOST = "198.18.63.1"  # the host's address on the nodes' bridge (bench/platforms/local/nodes.sh)


@pytest.fixture(scope="module")
def user_registry(local_cluster, tmp_path_factory):
    """A registry of the user's, as a cluster's admin runs one without TLS: Debian's
    docker-registry on the host's address on the nodes' network, each node's containerd told
    by a hosts.toml that it speaks plain HTTP (containerd.toml's config_path)."""
    binary = sh("bash", "ci/tools/tools.sh", "registry").stdout.strip()
    d = tmp_path_factory.mktemp("registry")
    with socket.socket() as s:
        s.bind((NODES_HOST, 0))
        port = s.getsockname()[1]
    host = f"{NODES_HOST}:{port}"
    (d / "config.yml").write_text(yaml.safe_dump({"version": 0.1, "log": {"level": "info", "accesslog": {"disabled": False}},
                                                  "storage": {"filesystem": {"rootdirectory": str(d / "data")}}, "http": {"addr": host}}))
    hosts = [c / "certs.d" / host for c in Path(KUBECONFIG).parents[1].glob("nodes/*/containerd")]
    for h in hosts:
        h.mkdir(parents=True)
        (h / "hosts.toml").write_text(f'server = "http://{host}"\n[host."http://{host}"]\n  capabilities = ["pull", "resolve"]\n')
    with open(d / "log", "w") as log:
        proc = subprocess.Popen([binary, "serve", str(d / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    assert poll(10, lambda: sh("curl", "-sf", f"http://{host}/v2/").returncode == 0), (d / "log").read_text()
    yield {"host": host, "log": d / "log"}
    proc.terminate()
    proc.wait(timeout=10)
    for h in hosts:
        shutil.rmtree(h.parent)


@pytest.fixture(scope="module")
def bare_prometheus(local_cluster, tmp_path_factory):
    """A Prometheus that answers and scrapes nothing but itself (no kubelet, no cAdvisor), on the
    host's address on the nodes' network: the pinned binary, an empty configuration."""
    binary = sh("bash", "-c", '. bench/lib.sh && echo "$IB_PROMETHEUS_DIR/prometheus"').stdout.strip()
    d = tmp_path_factory.mktemp("bare-prometheus")
    (d / "prometheus.yml").write_text("global: { scrape_interval: 2s }\n")
    with socket.socket() as s:
        s.bind((NODES_HOST, 0))
        address = f"{NODES_HOST}:{s.getsockname()[1]}"
    with open(d / "log", "w") as log:
        proc = subprocess.Popen([binary, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
                                 f"--web.listen-address={address}"], stdout=log, stderr=subprocess.STDOUT)
    assert poll(20, lambda: sh("curl", "-sf", f"http://{address}/-/ready").returncode == 0), (d / "log").read_text()
    yield f"http://{address}"
    proc.terminate()
    proc.wait(timeout=10)


EXISTING = {"TARGET": "http://edge.edge.svc", "INGRESS_PODS": "edge/app=edge", "BACKEND_PODS": "shop/service/web",
            "SEGMENTS": "1"}
# the candidate: Envoy Gateway's proxies of Gateway gate/gate (ci/tests/fixtures/existing/envoy-gateway.yaml)
GATE = dict(EXISTING, TARGET="http://gate.envoy-gateway-system.svc", INGRESS_PODS="envoy-gateway-system/service/gate")


@pytest.fixture(scope="module")
def user_ingress(stack, tmp_path_factory):
    d = tmp_path_factory.mktemp("existing")
    images = {"@NGINX_IMAGE@": f"{PINS['NGINX_IMAGE_NAME']}:{PINS['NGINX_IMAGE_TAG']}", "@EXPORTER_IMAGE@": PINS["NGINX_EXPORTER_IMAGE"],
              "@GATEWAY_IMAGE@": f"localhost/ingress-bench/envoy-gateway:{PINS['ENVOY_GATEWAY_VERSION']}",
              "@ENVOY_IMAGE@": f"localhost/ingress-bench/envoy:{PINS['ENVOY_VERSION']}"}
    for name in ("ingress.yaml", "envoy-gateway.yaml", "envoy-gateway-values.yaml"):
        text = (ROOT / "ci/tests/fixtures/existing" / name).read_text()
        for k, v in images.items():
            text = text.replace(k, v)
        (d / name).write_text(text)
    r = kubectl("apply", "-f", str(d / "ingress.yaml"))
    assert r.returncode == 0, r.stderr
    # Envoy Gateway as its chart installs it, the candidate: the pinned CRDs and this machine's
    # images (what the project's Gateway variants get on this cluster), its control plane.
    r = sh("bash", "-c", '. bench/lib.sh && gateway_up envoy-gateway-default', env={"PLATFORM": "local", "KUBECONFIG": KUBECONFIG})
    assert r.returncode == 0, r.stderr
    r = sh("bash", "kustomize/components/envoy-gateway/render.sh", "--install", "envoy-gateway-system", str(d / "envoy-gateway-values.yaml"))
    assert r.returncode == 0, r.stderr
    (d / "control-plane.yaml").write_text(r.stdout)
    assert kubectl("create", "namespace", "envoy-gateway-system").returncode == 0
    for name in ("control-plane.yaml", "envoy-gateway.yaml"):
        r = kubectl("apply", "--server-side", "-f", str(d / name))
        assert r.returncode == 0, r.stderr
    # As a user's ingress that has run a while: its Prometheus scrapes its exporter. A new
    # PodMonitor's job reaches a running Prometheus only when its config reloader next reads the
    # config (after its first change it misses the kubelet's atomic swap of the config secret,
    # and polls every 3 minutes: thanos' reloader, which the operator's wraps); a Prometheus
    # that starts reads it at once. Restarted while the ingresses start.
    prometheus = f"prometheus-{RELEASE}-prometheus-0"
    uid = kubectl("-n", "monitoring", "get", "pod", prometheus, "-o", "jsonpath={.metadata.uid}").stdout
    assert kubectl("-n", "monitoring", "delete", "pod", prometheus, "--wait=false").returncode == 0
    for ns, name in (("shop", "web"), ("edge", "edge"), ("envoy-gateway-system", "envoy-gateway")):
        r = kubectl("-n", ns, "rollout", "status", f"deploy/{name}", "--timeout=120s")
        assert r.returncode == 0, r.stdout + r.stderr
    # the proxies, once the controller has made them
    assert poll(120, lambda: kubectl("-n", "envoy-gateway-system", "get", "deploy", "gate").returncode == 0)
    r = kubectl("-n", "envoy-gateway-system", "rollout", "status", "deploy/gate", "--timeout=120s")
    assert r.returncode == 0, r.stdout + r.stderr

    def restarted():
        got = kubectl("-n", "monitoring", "get", "pod", prometheus, "-o",
                      "jsonpath={.metadata.uid} {.status.containerStatuses[*].ready}").stdout.split()
        return got[:1] != [uid] and got[1:] == ["true", "true"]
    assert poll(120, restarted), "Prometheus did not come back"
    for series in ('container_cpu_usage_seconds_total{namespace="edge", container="nginx"}', 'nginx_http_requests_total{namespace="edge"}',
                   'envoy_http_downstream_rq_total{namespace="envoy-gateway-system"}', 'container_cpu_usage_seconds_total{namespace="shop"}'):
        if not poll(120, lambda: q(stack["url"], f"count_over_time({series}[1m]) >= 3")):
            print(json.dumps(config_story(stack["url"]), indent=1))  # the whole story: a message is cut short
            pytest.fail(f"{series} is not scraped")
    yield stack
    # Not waited for (its pods' ends took 22-27 s of the cluster stream): nothing after reads
    # them, and the cluster's down removes what is left. Envoy Gateway's cluster-wide objects
    # (its class, its roles) go now: the project's Envoy Gateway serves the same controller name.
    assert kubectl("delete", "--wait=false", "--ignore-not-found", "-f", str(d / "envoy-gateway.yaml"), "-f", str(d / "control-plane.yaml")).returncode == 0
    assert kubectl("delete", "namespace", "edge", "shop", "envoy-gateway-system", "--wait=false").returncode == 0


def test_an_ingress_you_run_is_judged_from_your_prometheus(user_ingress, user_registry, tmp_path):
    """PLATFORM=external with INGRESS_PODS: nothing of the ingress deployed, a runner in the
    namespace of ours loads its address, its image the project's k6 pushed to the user's
    registry (REGISTRY) and pulled from there by the node; the pods of its selector and the
    backends of a Service's are found and said, the scrape interval is measured on their
    cAdvisor series, and the runner's correlation reads the series of the rules installed in
    the chart's Prometheus for the run (EXISTING_RULES=install; removed after): every signal
    measured, the ingress's CPU limit its pod's quota, the window at that interval, and the
    server's count its exporter's counter, which agrees with k6's. (The rules evaluated as one
    query, the default, are the migration's.)"""
    host = user_registry["host"]
    cpu_before, cfs_before = container_cpu_s("edge", "app=edge", "nginx"), container_cfs("edge", "app=edge", "nginx")
    nic_before = node_nic_bytes()
    run = External(tmp_path, "rps", DURATION="12s", CONNECTIONS="10", REGISTRY=f"http://{host}/user", EXISTING_RULES="install",
                   **EXISTING, **VALIDITY_UNJUDGED)
    said = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 0, said[-3000:]
    image = f"{host}/user/ingress-bench-k6:{PINS['K6_VERSION']}-xk6-"
    assert f"image         runners' k6: {image}" in said and "(the project's engine), pushed to your registry" in said, said
    # and pulled from it by a node (the registry's access log: a node's address, .11 and up)
    pullers = re.findall(r'^198\.18\.63\.(\d+) .*"GET /v2/user/ingress-bench-k6/manifests/', user_registry["log"].read_text(), re.M)
    assert [a for a in pullers if int(a) >= 11], user_registry["log"].read_text()[-2000:]
    pod = kubectl("-n", "edge", "get", "pods", "-l", "app=edge", "-o", "jsonpath={.items[0].metadata.name}").stdout
    assert f"existing      ingress edge/app=edge: {pod} on ibench-node-1 (the replicas summed)" in said, said
    assert "existing      backends shop/service/web: 1 pods" in said, said
    assert "existing      server count: its pods' nginx_http_requests_total, read before and after the load" in said, said
    assert "existing      target: 20 requests sent to http://edge.edge.svc, counted by its pods" in said, said
    s = run.summary
    (seg,) = run.segments
    corr = seg["correlation"]
    # The interval measured on the pods' cAdvisor series (the kubelet's collections as cAdvisor
    # stamps them: 2-3 s apart here) is the one the runner's correlation evaluated at.
    i = corr["window"]["interval_s"]
    print("\n" + "\n".join(l for l in said.splitlines() if l.startswith(("existing", "image", "window", "missing"))))  # a failure's evidence too
    # 12 s: shorter than a steady window at a 2 s scrape (the kubelet may collect an idle
    # container's first sample of the load 30 s in: k6/lib/correlation.js existingTiming); the
    # ingress and its backends are never idle here (their probes, the exporter's scrapes)
    assert f"existing      scraped every {i} s: the rules evaluated every {i} s over {3 * i} s, the first steady evaluation {31 + 4 * i} s into the load" in said, said
    assert not corr["window"]["steady"], corr["window"]
    assert corr["missing"] == {} and corr["window"]["rule_window_s"] == 3 * i and corr["evaluated"] == "rules", corr
    rule = "k6-" + re.sub("[^a-z0-9]", "-", run.dir.name.lower())[:48].rstrip("-")  # the Job's name (render_distributed.sh)
    assert f"existing      rules: PrometheusRule ingress-bench/{rule}, loaded by Prometheus monitoring/{RELEASE}-prometheus in " in said, said
    # what the run made is gone: its rules, and its Job (the Job's name is the rule's)
    assert "NotFound" in kubectl("-n", "ingress-bench", "get", "prometheusrule", rule).stderr
    assert "NotFound" in kubectl("-n", "ingress-bench", "get", "job", rule).stderr
    assert s["platform"] == "external" and s["variant"] == "existing" and s["errors"] == 0 and s["requests"] > 0, s
    # exact: the requests in flight at the end, and the exporter's own stub_status reads (one
    # a scrape, every 2 s)
    assert within(s["requests"], s["server"]["requests"], 0.01), (s["requests"], s["server"])
    assert corr["signals"]["ingress_cpu_limit_cores"] == 0.25, corr["signals"]
    # The CPU its Prometheus counted over the load (cAdvisor's reads of the nginx container's
    # cgroup, the last before the load and one after it) is what that cgroup counted over the
    # whole command (read before and after it: never less), less what nginx used outside the
    # reads (idle, the target's 20 requests: 4 ms of 3 s here once).
    cpu = container_cpu_s("edge", "app=edge", "nginx") - cpu_before
    # exact: the reads' window is the load's and at most a scrape interval (i) more on either
    # side, where nginx may use at most its quota (0.25 CPU)
    assert cpu - 2 * i * 0.25 <= s["cpu"]["ingress_cpu_seconds"] <= cpu, (cpu, s["cpu"])
    # Its throttling as its Prometheus counted it (cAdvisor's reads of that cgroup's cpu.stat):
    # within what the cgroup counted over the whole command, and said.
    periods, throttled = (b - a for a, b in zip(cfs_before, container_cfs("edge", "app=edge", "nginx")))
    t = s["cpu"]["ingress_throttling"]
    assert 0 <= t["periods"] <= periods and 0 <= t["throttled_periods"] <= throttled, (t, periods, throttled)
    assert f"throttling    the ingress throttled in {t['throttled_periods']:,} of its {t['periods']:,} CFS periods (" in said, said
    # Its node's NIC as its node-exporter counts it: the node's eth0 (the pods' veths and bridge
    # are not the NIC), its bytes over the load within what the kernel counted over the whole
    # command; the ingress's pods' share of them said (here above 100%: the runners and the
    # backends are on the ingress's node, their traffic never crosses the NIC).
    assert "existing      NIC: its nodes' devices as node-exporter counts them (198.18.63.11:9100 eth0), the busiest on each node" in said, said
    n = s["network"]
    assert 0 < n["nic_bytes"] <= node_nic_bytes() - nic_before, (n, nic_before)
    assert f"its nodes' NIC carried {n['nic_bytes'] / 1e6:,.1f} MB: {n['ingress_share'] * 100:.0f}%" in said, said
    assert seg["verdict"]["limit"] != "unknown", seg["verdict"]
    assert kubectl("-n", "edge", "get", "all", "-l", "app.kubernetes.io/part-of=ingress-bench", "-o", "name").stdout == ""
    print(f"{s['rps']:.0f} req/s; {seg['verdict']['text']}")


def migrate_module():
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
    import migrate
    return migrate


def test_two_ingresses_you_run_are_compared_in_alternated_rounds_with_a_behaviour_diff(user_ingress, tmp_path):
    """bench:migrate between two ingresses on the cluster, each side named by settings of its
    own (edge, and its candidate Envoy Gateway with the routes moved so far): nothing deployed, the
    routes of the Ingress objects of class edge sent to both from a pod, the runs alternated,
    each side's rate and rate per ingress CPU-second (its counters in the chart's Prometheus)
    in one table with intervals and the gates' verdict; the route gate does not serve is a
    difference. And the candidate's own change under load, on the user's word (TO_CHANGES=route,
    ALLOW_CHANGE=1): an HTTPRoute for a host it does not serve, to a Service of ours whose
    EndpointSlice holds the backends' addresses, applied CHANGE_AT into the load; the change
    ends at the route's first answer (its header) to the probe pod, which asked before it; the
    probe's requests are said apart from the server's count; the route, its Service and the
    probe gone after."""
    migrate = {"FROM": "edge", "TO": "gate", "FROM_TARGET": "http://edge.edge.svc", "FROM_INGRESS_PODS": "edge/app=edge",
               "TO_TARGET": GATE["TARGET"], "TO_INGRESS_PODS": GATE["INGRESS_PODS"], "BACKEND_PODS": "shop/service/web",
               "PROBES": "ingress/edge", "SCENARIOS": "rps", "ROUNDS": "3", "DURATION": "1s", "SEGMENTS": "1",
               "TO_CHANGES": "route", "TO_ROUTE_PARENT": "gateway/gate/gate", "ALLOW_CHANGE": "1", "CHANGE_AT": "3s",
               "CHANGE_DURATION": "13s"}
    r = sh("./task", "bench:migrate", env={"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG,
                                           "IMAGE_SET": "local", "PROMETHEUS_URL": IN_CLUSTER, "RESULTS_ROOT": str(tmp_path),
                                           **VALIDITY_UNJUDGED, **migrate}, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (d,) = tmp_path.glob("migrate-*")
    doc = json.loads((d / "migrate.json").read_text())
    said = {(p, what): (x, y) for p, what, x, y in doc["behaviour"]["differences"]}
    # exact: the two routes of the Ingress, and Envoy's 404 for the one the gateway has not moved
    assert doc["behaviour"]["probes"] == ["GET /100kb.bin", "GET /1kb.bin"], doc["behaviour"]
    assert said[("GET /100kb.bin", "status")] == (200, 404) and not [k for k in said if k[0] == "GET /1kb.bin"], said
    (cmp,) = d.glob("compare-*/compare.json")
    c = json.loads(cmp.read_text())
    # Each round's client and server counts agree, each side's by its own counter (edge's
    # stub_status, Envoy's statistics)
    runs = sorted(cmp.parent.glob("*-r*-*"))
    assert [r.name.split("-")[0] for r in runs] == ["base"] * 3 + ["head"] * 3, [r.name for r in runs]
    for r in runs:
        x = json.loads((r / "summary.json").read_text())
        # exact: the requests in flight at the end (at most one per connection) and, for edge,
        # its exporter's stub_status reads (one a scrape, 2 s apart, over the ~20 s between the
        # counter's reads)
        assert abs(x["requests"] - x["server"]["requests"]) <= sum(p["connections"] for p in x["per_segment"]) + 10, (r.name, x["server"])
    # the compare's gates' verdict as its rows say it, and the ingress CPU each side's runs read
    # (0.25: edge's and the gateway's proxy's quotas; not its shutdown manager's)
    rate = next(x for x in c["metrics"] if x["key"] == "rate")
    # exact: GATE_CV_MAX's default (15 %), the gate compare.py judges the rows' spread by
    assert c["verdict"] == ("unstable" if max(rate["base"]["cv_percent"], rate["head"]["cv_percent"]) > 15 else
                            "regression" if any(x["says"] == "REGRESSION" for x in c["metrics"]) else "pass"), c
    assert c["rounds"] == 3 and c["ingress_cpus"] == {"base": [0.25], "head": [0.25]}, c
    # and the migration's one line, from its own table and differences (gate's 404: "changed")
    assert doc["verdict"] == migrate_module().verdict_of(doc["speed"], doc["behaviour"]["differences"], doc["tolerance"], doc["failed"])
    assert doc["verdict"].startswith("changed: ") and doc["failed"] == [], doc["verdict"]
    rows = {x["metric"]: x for x in doc["speed"]}
    for metric in ("req/s", "req/s per ingress CPU"):
        assert rows[metric]["from"] > 0 and rows[metric]["to"] > 0 and rows[metric]["low"] < rows[metric]["high"], rows
    assert "GET /100kb.bin | status | 200 | 404" in (d / "report.md").read_text()
    # the candidate's route change, its own (none for edge)
    assert list(doc["changes"]) == ["route"] and list(doc["changes"]["route"]) == ["TO"], doc["changes"]
    c = doc["changes"]["route"]["TO"]
    assert "error" not in c, c
    change = json.loads((Path(c["run"]) / "change.json").read_text())
    answers = change["marks_unix_ms"]["probe"]["answers"]
    # asked before the route (a 200 of the gateway's route for every host, without the header),
    # then, whatever it answered meanwhile (Envoy once a 503 for 27 ms: the route before its
    # endpoints), the added route's first answer, which ends the change
    marks = change["marks_unix_ms"]
    assert (answers[0]["status"], answers[0]["added"]) == (200, False) and answers[0]["t"] < marks["start"], answers
    assert (answers[-1]["status"], answers[-1]["added"]) == (200, True) and not any(a["added"] for a in answers[:-1]), answers
    assert marks["end"] == max(answers[-1]["t"], marks["start"]), marks
    assert c["serving_s"] == change["analysis"]["serving_after_ms"] / 1000 and change["variant"] == "existing", (c, change)
    assert f", {answers[-1]['sent']:,} of them the route's probe's (client/server " in change["server"]["why"], change["server"]
    # the change's run on Envoy Gateway, long enough for a steady window: a verdict from the
    # user's Prometheus, and its counter the client's and the probe's requests
    run = json.loads((Path(c["run"]) / "summary.json").read_text())
    assert run["verdict"]["limit"] not in (None, "unknown"), run["verdict"]
    # exact: the requests in flight at the end, at most one per connection
    assert abs(run["requests"] + answers[-1]["sent"] - run["server"]["requests"]) <= sum(p["connections"] for p in run["per_segment"]), \
        (run["requests"], answers[-1]["sent"], run["server"])
    page = (d / "report.md").read_text()
    assert f"| a route added | gate | {c['errors']:,} of {c['requests']:,} during the change | added route's first answer after " in page
    # (no scale ran: the section says none)
    assert "## Change under load: bench:change's runs, at LOAD_SHARE of the side's rps median above" in page, page
    left = kubectl("-n", "ingress-bench", "get", "httproute,service,endpointslice,pod", "-l",
                   "app.kubernetes.io/component in (route-added,route-added-probe)", "-o", "name")
    assert left.returncode == 0 and left.stdout == "", left.stdout + left.stderr
    # the probes' pods and the runners' Jobs: none left running
    assert kubectl("-n", "ingress-bench", "get", "pods", "-l", "app.kubernetes.io/component=probe", "-o", "name").stdout == ""


@pytest.mark.parametrize("env, message", [
    ({"INGRESS_PODS": "edge/app=nothing"}, "INGRESS_PODS=edge/app=nothing: no running pod in namespace edge matches app=nothing"),
    ({"BACKEND_PODS": "shop/service/none"}, "BACKEND_PODS=shop/service/none: no Service none in namespace shop"),
    ({"MONITORING": "0"}, "INGRESS_PODS: an existing ingress is judged from your Prometheus: set PROMETHEUS_URL"),
    # another ingress's address: its requests are not counted by edge's pods (its exporter's own reads are)
    ({"TARGET": "http://gate.envoy-gateway-system.svc"},
     "TARGET http://gate.envoy-gateway-system.svc is not the ingress INGRESS_PODS=edge/app=edge names: 20 requests sent to it moved its pods' counter by "),

    # a target that does not answer (a Service name the cluster's DNS does not know)
    ({"TARGET": "http://nothing.edge.svc"}, "TARGET http://nothing.edge.svc does not answer from a pod of the cluster: 20 requests sent, none answered ("),
    # a Prometheus without the kubelets' cAdvisor series (bare_prometheus)
    ({"PROMETHEUS_URL": "@BARE_PROMETHEUS@"}, "INGRESS_PODS: the Prometheus at @BARE_PROMETHEUS@ has no cAdvisor CPU series of the ingress's pods"),
    # a registry that does not answer (nothing listens on port 1)
    ({"REGISTRY": f"http://{NODES_HOST}:1/user"}, f"REGISTRY=http://{NODES_HOST}:1/user: could not push {NODES_HOST}:1/user/ingress-bench-k6:"),
])
def test_an_ingress_you_run_named_wrong_is_one_line_before_anything_is_made(user_ingress, tmp_path, env, message, request):
    if "@BARE_PROMETHEUS@" in message:
        url = request.getfixturevalue("bare_prometheus")
        env, message = {"PROMETHEUS_URL": url}, message.replace("@BARE_PROMETHEUS@", url)
    jobs = kubectl("-n", "ingress-bench", "get", "jobs", "-o", "name").stdout
    run = External(tmp_path, "rps", DURATION="12s", **{**EXISTING, **env})
    errors = [l for l in run.proc.stderr.splitlines() if l.startswith("error: ")]
    assert run.proc.returncode == 1 and len(errors) == 1 and message in errors[0], run.proc.stderr[-2000:]
    assert run.dir is None and kubectl("-n", "ingress-bench", "get", "jobs", "-o", "name").stdout == jobs


def test_rounds_on_an_ingress_you_run_are_each_a_steady_window_long(user_ingress, tmp_path):
    """bench:rps's rounds on an ingress you run, DURATION not given: each round as long as its
    Prometheus's scrape interval needs for a steady window (existing_up says it), not the rounds'
    10 s, which held none. Here the round's target does not answer: the first round says its
    DURATION, then stops before any load, in one line."""
    r = sh("./task", "bench:rps", env={"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG, "IMAGE_SET": "local",
                                       "PROMETHEUS_URL": IN_CLUSTER, "RESULTS_ROOT": str(tmp_path), "ROUNDS": "2",
                                       **EXISTING, "TARGET": "http://nothing.edge.svc"}, timeout=600)
    said = r.stdout + r.stderr
    (line,) = [l for l in said.splitlines() if l.startswith("existing      scraped every ")]
    i = int(line.split()[3])
    assert line.endswith(f"the first steady evaluation {31 + 4 * i} s into the load; DURATION {(31 + 6 * i + 9) // 10 * 10}s"), line
    errors = [l for l in r.stderr.splitlines() if l.startswith("error: ")]
    assert r.returncode == 1 and len(errors) == 1 and "TARGET http://nothing.edge.svc does not answer" in errors[0], said[-2000:]


def change_on_yours(tmp_path, settings, kind):
    """bench:change on an ingress you run, at RATE 300 for 13 s, the change 3 s in (the least
    its checks allow): its exit, what it said, change.json and the run's summary."""
    r = sh("./task", "bench:change", env={"PLATFORM": "external", "ALLOW_EXTERNAL_CLUSTER": "1", "KUBECONFIG": KUBECONFIG, "IMAGE_SET": "local",
                                          "PROMETHEUS_URL": IN_CLUSTER, "RESULTS_ROOT": str(tmp_path), **settings, **K6_UNJUDGED,
                                          "CHANGE": kind, "ALLOW_CHANGE": "1", "RATE": "300", "DURATION": "13s", "CHANGE_AT": "3s",
                                          # (the target's check is the single run's and the refusals' subject)
                                          "IB_TARGET_CHECKED": "1"},
           timeout=600)
    said = r.stdout + r.stderr
    found = list(tmp_path.glob(f"change-{kind}-*/change/change.json"))
    assert found, said[-3000:]
    d = found[0].parent
    doc = json.loads((d / "change.json").read_text())
    summary = json.loads((d / "summary.json").read_text())
    run = doc["analysis"]["run"]
    # exit 99 exactly when a request failed (k6's checks threshold), as every bench:change
    assert r.returncode == (99 if run["errors"] - run["by_kind"].get("dropped", 0) else 0), (r.returncode, run, said[-3000:])
    assert doc["variant"] == "existing" and doc["rate"] == 300 and doc["rate_from"] == "RATE", doc
    # the segment's timeline, merged: every request of the load (and the sends the open model
    # dropped); k6's count also holds setup's readiness GET, one a segment, which is not load
    assert run["requests"] - run["by_kind"].get("dropped", 0) == summary["requests"] - summary["segments"], (run, summary["requests"])
    marks = doc["marks_unix_ms"]
    assert marks["start"] < marks["end"] and doc["analysis"]["change_ms"] == marks["end"] - marks["start"], marks
    print(f"\n{(d / 'change.md').read_text()}")
    return said, doc


def test_an_ingress_you_run_is_restarted_under_load_on_your_opt_in(user_ingress, tmp_path):
    """bench:change on an ingress you run (last in the module: edge's pod is replaced): with
    ALLOW_CHANGE=1 its Deployment, found from its pods, is restarted CHANGE_AT into an
    in-cluster load at RATE; the runner's timeline (printed by its pod, merged) holds every
    request k6 sent, the marks bracket the rollout, the namespace's events are its own, and the
    pod is a new one. Nothing of the ingress is restored (its controller did it)."""
    old = kubectl("-n", "edge", "get", "pods", "-l", "app=edge", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    said, doc = change_on_yours(tmp_path, EXISTING, "rollout")
    assert "change        rollout: restarts your ingress's workload (kubectl rollout restart), deployment edge/edge; " in said, said
    assert {e["object"].split("/")[0] for e in doc["events"]} >= {"Deployment"}, doc["events"]
    assert doc["server"]["why"].startswith("the ingress's pods were replaced during the run"), doc["server"]
    new = kubectl("-n", "edge", "get", "pods", "-l", "app=edge", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert new and not set(new) & set(old), (old, new)
