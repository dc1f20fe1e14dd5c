"""Platform configurations that cannot run on the project's machines, validated offline: the
k6-operator TestRun (k6/distributed/testrun.yaml, rendered by bench/run/render_distributed.sh and
checked with kubeconform against k6/distributed/testrun.schema.json) and the kind cluster
config (bench/platforms/kind/cluster.yaml, checked by bench/platforms/kind/validate.sh on kind's own types). Each check
is also shown to fail on a broken input, so a pass means something."""
import re

import pytest

from conftest import PINS, ROOT, sh

RUN = {"SEGMENTS": "2", "SCENARIO": "rps", "TARGET": "http://198.18.64.5", "DURATION": "30s",
       "CONNECTIONS": "100", "RATE": "", "TESTID": "20261121T133602Z-rps-nginx-lb-default-x2",
       "VARIANT": "nginx-lb-default", "PLATFORM": "local", "NAME": "",
       "REQUIRE_VALID": ""}  # unset: the suite's own default (conftest) is not a setting of these runs
# Both manifests write their env entries as one flow mapping per line; the TestRun's shape is
# checked by its schema, so these lines are the whole env of each.
ENV_LINE = re.compile(r"^\s*- \{ name: (\S+), value: (.*) \}$", re.M)


def render(template, **env):
    return sh("bash", "bench/run/render_distributed.sh", f"k6/distributed/{template}", env={**RUN, **env})


def field(text, name):
    """The value of the first 'NAME: value' line (block style) in TEXT."""
    m = re.search(rf"^\s*{name}: (.+)$", text, re.M)
    assert m, f"no {name} in:\n{text}"
    return m.group(1).strip()


def error_lines(r):
    return [l for l in r.stderr.splitlines() if l.startswith("error:")]


def local_k6_image():
    """The local k6 image: the pin plus the hash of the xk6/ extension's sources (bench/lib.sh)."""
    image = sh("bash", "-c", ". bench/lib.sh && echo $K6_IMAGE_NAME:$K6_LOCAL_TAG").stdout.strip()
    pins = PINS
    assert re.fullmatch(rf"{re.escape(pins['K6_IMAGE_NAME'])}:{re.escape(pins['K6_VERSION'])}-xk6-[0-9a-f]{{12}}", image), image
    return image


def test_testrun_renders_valid_and_matches_the_job():
    tr, job = render("testrun.yaml"), render("job.yaml")
    assert tr.returncode == 0, tr.stderr
    assert job.returncode == 0, job.stderr
    assert "@" not in tr.stdout  # every marker replaced, comments included
    assert field(tr.stdout, "parallelism") == "2" == field(job.stdout, "parallelism")
    assert field(tr.stdout, "name") == field(job.stdout, "name")  # metadata.name, the same derivation
    # The same scenario from the same ConfigMaps: the operator runs /test/<file>, the Job
    # /scripts/<file>; each mounts the lib beside its script.
    assert "configMap: { name: k6-scenarios, file: rps.js }" in tr.stdout
    assert " /scripts/rps.js " in job.stdout and "{ name: scenarios, configMap: { name: k6-scenarios } }" in job.stdout
    assert "{ name: lib, configMap: { name: k6-lib } }" in tr.stdout and "{ name: lib, configMap: { name: k6-lib } }" in job.stdout
    assert "{ name: lib, mountPath: /test/lib }" in tr.stdout and "{ name: lib, mountPath: /scripts/lib }" in job.stdout
    pins = PINS
    assert field(tr.stdout, "image") == field(job.stdout, "image") == local_k6_image()
    # The same environment, entry by entry, in the same order.
    tr_env, job_env = ENV_LINE.findall(tr.stdout), ENV_LINE.findall(job.stdout)
    assert tr_env == job_env
    # The settings given, in the registry's order (an unset one, RATE, is left to k6's
    # default), then the pods' own.
    assert [n for n, _ in tr_env] == ["PLATFORM", "VARIANT", "DURATION", "CONNECTIONS", "TARGET", "TESTID", "SEGMENTS",
                                      "RESULTS_DIR", "K6_NO_USAGE_REPORT", "K6_AUTO_EXTENSION_RESOLUTION", "GODEBUG"]
    assert dict(tr_env)["TARGET"] == '"http://198.18.64.5"' and dict(tr_env)["CONNECTIONS"] == '"100"'
    # The Job splits the load as the operator does: "0,1/2,1".
    assert '--execution-segment-sequence "0,1/2,1"' in job.stdout
    assert f"image: {pins['K6_OPERATOR_STARTER_IMAGE']}" in tr.stdout
    # Runners apart from the ingress (and from each other: the operator's `separate`).
    for m in (tr.stdout, job.stdout):
        assert "labelSelector: { matchLabels: { app.kubernetes.io/component: ingress } }" in m
    assert "\n  separate: true\n" in tr.stdout and '--tag "instance_id=$i"' in job.stdout
    # The run's tags on both command lines: a --tag (the operator's instance_id, the Job's)
    # replaces the script's global tags, and k6's own series (k6_vus) would lose the testid.
    tags = f"--tag testid={dict(tr_env)['TESTID'].strip(chr(34))} --tag variant="
    assert tags in tr.stdout and tags in job.stdout


def test_with_a_prometheus_both_stream_to_it():
    """PROMETHEUS_URL (an address the pods reach) adds k6's remote-write output to both, the
    same entries as the host's k6 gets (bench/lib/prometheus.sh k6_rw_env)."""
    url = "http://prometheus.monitoring.svc:9090"
    tr, job = render("testrun.yaml", PROMETHEUS_URL=url), render("job.yaml", PROMETHEUS_URL=url)
    assert tr.returncode == 0 and job.returncode == 0, tr.stderr + job.stderr
    tr_env = ENV_LINE.findall(tr.stdout)
    assert tr_env == ENV_LINE.findall(job.stdout)
    assert dict(tr_env) == {**dict(tr_env), "PROMETHEUS_URL": f'"{url}"', "K6_OUT": '"experimental-prometheus-rw"',
                            "K6_PROMETHEUS_RW_SERVER_URL": f'"{url}/api/v1/write"', "K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM": '"true"',
                            "K6_PROMETHEUS_RW_PUSH_INTERVAL": '"2s"', "K6_PROMETHEUS_RW_STALE_MARKERS": '"false"'}, tr_env


@pytest.mark.parametrize("platform,image_set,pin", [("external", "", "K6_IMAGE_UPSTREAM"), ("external", "local", None)])
def test_external_clusters_get_the_upstream_k6_image_unless_told(platform, image_set, pin):
    pins = PINS
    for template in ("job.yaml", "testrun.yaml"):
        r = render(template, PLATFORM=platform, IMAGE_SET=image_set)
        assert r.returncode == 0, r.stderr
        assert field(r.stdout, "image") == (pins[pin] if pin else local_k6_image())


def test_render_checks_the_testrun_it_prints():
    """A value the schema refuses (a name kubectl would reject) stops the render: nothing printed."""
    r = render("testrun.yaml", NAME="K6_Run")
    assert r.returncode != 0 and r.stdout == ""
    assert error_lines(r) == ["error: testrun.yaml rendered: at '/metadata/name': 'K6_Run' does not match "
                              "pattern '^[a-z]([-a-z0-9]*[a-z0-9])?$'"], r.stderr


@pytest.mark.parametrize("segments, message", [("0", "at least 1, got 0"), ("17", "at most 16, got 17"), ("two", "a whole number, got 'two'")])
def test_render_refuses_a_bad_segment_count(segments, message):
    r = render("job.yaml", SEGMENTS=segments)
    assert r.returncode != 0 and r.stdout == ""
    assert error_lines(r) == [f"error: SEGMENTS must be {message}"]


BROKEN_TESTRUNS = {
    "unknown field": (("  separate: true\n", "  separate: true\n  separat: true\n"),
                      "at '/spec': additional properties 'separat' not allowed"),
    "wrong type": (("  parallelism: 2\n", '  parallelism: "2"\n'), "at '/spec/parallelism': got string, want integer"),
    "env value not a string": (('{ name: DURATION, value: "30s" }', "{ name: DURATION, value: 30 }"),
                               "at '/spec/runner/env/2/value': got number, want string"),
    "missing script": (("    configMap: { name: k6-scenarios, file: rps.js }\n", "    {}\n"),
                       "at '/spec/script': missing property 'configMap'"),
    "duplicate key": (("  parallelism: 2\n", "  parallelism: 2\n  parallelism: 3\n"), 'key "parallelism" already set in map'),
    "the operator's own volume name": (("{ name: results, emptyDir: {} }", "{ name: k6-test-volume, emptyDir: {} }"),
                                       "at '/spec/runner/volumes/1/name'"),
}


@pytest.mark.parametrize("case", BROKEN_TESTRUNS)
def test_testrun_schema_rejects(case, tmp_path):
    (old, new), reason = BROKEN_TESTRUNS[case]
    good = render("testrun.yaml")
    assert good.returncode == 0 and old in good.stdout, good.stderr
    path = tmp_path / "testrun.yaml"
    path.write_text(good.stdout.replace(old, new, 1))
    r = sh("bash", "-c", '. bench/run/render_distributed.sh && validate_testrun "$1"', "_", str(path))
    assert r.returncode != 0
    lines = error_lines(r)
    assert len(lines) == 1 and lines[0].startswith("error: testrun.yaml: ") and reason in lines[0], r.stderr


def cluster_value(name):
    """NAME=value in bench/platforms/local/cluster.sh or nodes.sh, where the local cluster's
    addresses are set."""
    text = "".join((ROOT / "bench/platforms/local" / f).read_text() for f in ("cluster.sh", "nodes.sh"))
    m = re.search(rf"^{name}=(\S+)", text, re.M)
    assert m, f"no {name}= in bench/platforms/local/cluster.sh or nodes.sh"
    return m.group(1)


def test_kind_config_has_the_local_clusters_shape():
    r = sh("bash", "bench/platforms/kind/validate.sh", timeout=600)
    assert r.returncode == 0, r.stderr
    summary = r.stderr.strip().splitlines()[-1]
    assert f"pods {cluster_value('CLUSTER_POD_CIDR')}, services {cluster_value('SERVICE_CIDR')}," in summary, summary
    kube_minor = PINS["KUBE_VERSION"].rsplit(".", 1)[0]  # v1.34.4 -> v1.34
    assert f"kindest/node:{kube_minor}." in summary, summary
    assert "kube-proxy iptables" in summary and "cpuManagerPolicy static" in summary, summary
    # The same unsafe sysctls as the local cluster's kubelet allows (for the nginx-lb pod).
    kubelet = (ROOT / "bench/platforms/local/kubelet.yaml").read_text()
    local = re.search(r"^allowedUnsafeSysctls: \[(.*)\]$", kubelet, re.M).group(1)
    sysctls = ",".join(s.strip(' "') for s in local.split(","))
    assert f"unsafe sysctls {sysctls}," in summary, summary
    assert "host ports 127.0.0.1:30080" in summary, summary


BROKEN_KIND = {
    "typo'd field": (("  podSubnet:", "  podSubnett:"), "field podSubnett not found in type v1alpha4.Networking"),
    "pod subnet outside 198.18.0.0/15": (("podSubnet: 198.18.64.0/18", "podSubnet: 203.0.113.0/24"),
                                         "networking.podSubnet 203.0.113.0/24 is outside 198.18.0.0/15"),
    "typo in the kubelet patch": (("    cpuManagerPolicy: static", "    cpuManagerPolcy: static"),
                                  'kubeadmConfigPatches[0] (KubeletConfiguration): error unmarshaling JSON: '
                                  'while decoding JSON: json: unknown field "cpuManagerPolcy"'),
    "patch kind that matches nothing": (("    kind: KubeletConfiguration", "    kind: KubeletConfig"),
                                        'kubeadmConfigPatches[0] has kind "KubeletConfig"'),
    "port on every interface": (("listenAddress: 127.0.0.1", "listenAddress: 0.0.0.0"),
                                "extraPortMappings[0].listenAddress must be a loopback address"),
    "image without a digest": (("@sha256:", " # sha256:"), "nodes[0].image must be kindest/node:v1.34.<patch>@sha256"),
}


@pytest.mark.parametrize("case", BROKEN_KIND)
def test_kind_validation_rejects(case, tmp_path):
    (old, new), reason = BROKEN_KIND[case]
    text = (ROOT / "bench/platforms/kind/cluster.yaml").read_text()
    assert old in text
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace(old, new, 1))
    r = sh("bash", "bench/platforms/kind/validate.sh", str(path), timeout=600)
    assert r.returncode != 0
    lines = error_lines(r)
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and reason in lines[0], r.stderr


def test_every_platform_declares_its_traits_and_both_readers_agree():
    """A platform is its driver file: its traits (root, k6, cluster, monitoring) on one line
    there, read alike by bash (pf_trait) and Python (cases.traits), one driver per value of
    the PLATFORM setting."""
    import sys
    sys.path.insert(0, str(ROOT / "bench/run"))
    from cases import registry, traits
    allowed = {"root": {"0", "1"}, "k6": {"host", "pods"}, "cluster": {"none", "own", "user"},
               "monitoring": {"host", "operator", "user"}}
    platforms = registry()["PLATFORM"]["values"]
    assert sorted(p.stem for p in (ROOT / "bench/platforms/drivers").glob("*.sh")) == sorted(platforms)
    for p in platforms:
        t = traits(p)
        assert set(t) == set(allowed) and t and all(t[k] in allowed[k] for k in t), (p, t)
        r = sh("bash", "-c", f'. bench/lib.sh && . bench/platforms/driver.sh && for n in {" ".join(allowed)}; do echo "$n=$(pf_trait $n {p})"; done')
        assert dict(l.split("=") for l in r.stdout.split()) == t, (p, r.stdout, r.stderr)
    assert traits("external")["k6"] == "pods" and traits("lab")["cluster"] == "none"
