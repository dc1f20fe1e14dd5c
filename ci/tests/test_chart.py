"""kube-prometheus-stack as users install it: the project's values rendered by the pinned Helm
against the chart's release (KPS_CHART_VERSION), read the way Prometheus and Grafana's sidecar
will read them. The chart is the offline copy of the release (conftest.offline_chart)."""
import re
import sys

import yaml

from conftest import KPS_VERSION, ROOT, offline_chart, sh

sys.path.insert(0, str(ROOT / "monitoring"))
import signals as contract  # noqa: E402  (monitoring/signals.py)

VALUES = ROOT / "monitoring/kube-prometheus-stack-values.yaml"
VERSION = KPS_VERSION


def render(chart, *args, values=None):
    """chart.sh's rendering with the project's values; with VALUES, helm's own with those alone."""
    path, off = chart
    if values:
        r = sh("helm", "template", "t", str(path), "-n", "monitoring", "-f", str(values), *off, *args)
    else:
        r = sh("bash", "bench/platforms/monitoring/chart.sh", "template", *off, *args, env={"KPS_CHART": str(path)})
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def relabel_keeps(rules, labels):
    """Prometheus' metric relabelling of one series, keep/drop actions: False when dropped.
    Source labels joined by ';', the regex anchored at both ends."""
    for r in rules:
        value = ";".join(labels.get(l, "") for l in r["sourceLabels"])
        match = re.fullmatch(r["regex"], value) is not None
        if (r["action"] == "drop" and match) or (r["action"] == "keep" and not match):
            return False
    return True


def cadvisor_series_the_rules_read():
    """Every cAdvisor series name the cluster's rules read (monitoring/signals.yaml)."""
    exprs = " ".join(contract.per_platform(s["expr"])["cluster"] or "" for s in contract.load()["signals"])
    names = set(re.findall(r"\b((?:container|machine)_[a-z_]+)", exprs))
    assert {"container_cpu_usage_seconds_total", "container_spec_cpu_quota", "machine_cpu_cores"} <= names, names
    return names


def cadvisor_endpoint(docs):
    sm = [d for d in docs if d["kind"] == "ServiceMonitor" and d["metadata"]["name"].endswith("-kubelet")]
    assert len(sm) == 1, [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceMonitor"]
    return next(e for e in sm[0]["spec"]["endpoints"] if e.get("path") == "/metrics/cadvisor")


def kubelet_defects(docs):
    """What breaks the contract on a user's cluster in the rendered kubelet ServiceMonitor."""
    ep, found = cadvisor_endpoint(docs), []
    if ep.get("honorTimestamps") is not True:
        found.append(f"cAdvisor's own timestamps dropped (honorTimestamps: {ep.get('honorTimestamps')})")
    # A pod container's series, as cAdvisor labels it (a CNI-free interface, a pod, a cgroup id).
    labels = {"id": "/kubepods/burstable/pod1/abc", "pod": "ingress-0", "interface": "eth0", "scope": "container"}
    dropped = sorted(n for n in cadvisor_series_the_rules_read()
                     if not relabel_keeps(ep.get("metricRelabelings", []), {**labels, "__name__": n}))
    if dropped:
        found.append(f"dropped: {dropped}")
    return found


def test_the_kubelet_monitor_keeps_cadvisors_stamps_and_every_series_the_rules_read(chart):
    docs = render(chart)
    assert kubelet_defects(docs) == []
    ep = cadvisor_endpoint(docs)
    assert ep["interval"] == "2s" and ep["trackTimestampsStaleness"] is True


def test_the_charts_defaults_break_the_limits_or_the_stamps(chart, tmp_path):
    """The chart's own relabelings drop the CPU limit series; scrape-time stamps (what the values
    chose before the rules read cAdvisor with deriv()) are caught too: the test above would fail
    on either."""
    values = yaml.safe_load(VALUES.read_text())
    del values["kubelet"]["serviceMonitor"]["cAdvisorMetricRelabelings"]
    values["kubelet"]["serviceMonitor"].update(honorTimestamps=False, trackTimestampsStaleness=False)
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(values))
    found = kubelet_defects(render(chart, values=tmp_path / "v.yaml"))
    assert len(found) == 2 and "honorTimestamps: False" in found[0], found
    assert "container_spec_cpu_quota" in found[1] and "container_cpu_usage_seconds_total" not in found[1], found


def test_the_relabelings_are_the_charts_but_the_narrowed_spec_drop(chart):
    """A list in the values replaces the chart's whole list: ours is the chart's own, rule for
    rule, with only its container_spec drop narrowed to the memory series."""
    theirs = yaml.safe_load((chart[0] / "values.yaml").read_text())["kubelet"]["serviceMonitor"]["cAdvisorMetricRelabelings"]
    ours = yaml.safe_load(VALUES.read_text())["kubelet"]["serviceMonitor"]["cAdvisorMetricRelabelings"]
    diff = [(t, o) for t, o in zip(theirs, ours) if t != o]
    assert len(theirs) == len(ours) and diff == [({"sourceLabels": ["__name__"], "action": "drop", "regex": "container_spec.*"},
                                                  {"sourceLabels": ["__name__"], "action": "drop", "regex": "container_spec_memory.*"})], diff


def test_the_prometheus_takes_k6_and_every_monitor(chart):
    prom = next(d for d in render(chart) if d["kind"] == "Prometheus")["spec"]
    assert prom["enableRemoteWriteReceiver"] is True and "native-histograms" in prom["enableFeatures"], prom
    # The chart's global interval (30 s): only what the rules read is scraped every 2 s.
    assert prom.get("scrapeInterval", "30s") == "30s", prom.get("scrapeInterval")
    # The project's monitors and rules carry no release label: every one is selected.
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        assert prom[f"{kind}Selector"] == {}, (kind, prom[f"{kind}Selector"])


def test_prometheus_is_probed_on_the_port_it_serves(chart):
    """The startup probe both stacks give Prometheus (it is ready as soon as it answers) asks the
    port by the name the operator gives it: the chart's (portName http-web) and the project's
    stack's (the operator's default, web). By another name the probe never succeeds and the
    stack never comes up."""
    local = next(d for d in yaml.safe_load_all((ROOT / "monitoring/local/prometheus.yaml").read_text()) if d["kind"] == "Prometheus")
    charts = next(d for d in render(chart, "-f", str(ROOT / "monitoring/kube-prometheus-stack-local.yaml")) if d["kind"] == "Prometheus")
    for prom in (local["spec"], charts["spec"]):
        probes = [c["startupProbe"]["httpGet"]["port"] for c in prom.get("containers", []) if c["name"] == "prometheus"]
        assert probes == [prom.get("portName", "web")], (prom.get("portName"), probes)


def test_the_dashboard_sidecar_selects_the_project_dashboards(chart):
    """Grafana's sidecar loads ConfigMaps by label, in the namespaces it searches, into the
    folder an annotation names: the chart's own dashboards (rendered without Grafana's server,
    grafana.forceDeployDashboards) and the project's ConfigMap must all match its settings."""
    sidecar = yaml.safe_load(VALUES.read_text())["grafana"]["sidecar"]["dashboards"]
    docs = render(chart, "--set", "grafana.enabled=false,grafana.forceDeployDashboards=true")
    theirs = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get(sidecar["label"])]
    assert theirs and all(d["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"] for d in theirs)
    r = sh("kustomize", "build", "dashboards")
    assert r.returncode == 0, r.stderr
    ours = next(d for d in yaml.safe_load_all(r.stdout) if d["kind"] == "ConfigMap")["metadata"]
    assert ours["labels"][sidecar["label"]] == sidecar["labelValue"]
    assert sidecar["searchNamespace"] == "ALL" or ours["namespace"] == "monitoring"
    assert ours["annotations"][sidecar["folderAnnotation"]] == "ingress-bench" and sidecar["provider"]["foldersFromFilesStructure"]


def test_a_chart_without_its_subcharts_or_of_another_release_is_refused(tmp_path):
    """chart.sh names what a chart directory lacks, in one line, before helm runs."""
    src = offline_chart()
    meta = yaml.safe_load((src / "Chart.yaml").read_text())
    deps = " ".join(d["name"] for d in meta["dependencies"])  # charts/ empty: crds too
    bare = tmp_path / "bare"
    (bare / "charts").mkdir(parents=True)
    (bare / "Chart.yaml").write_text(yaml.safe_dump(meta))
    r = sh("bash", "bench/platforms/monitoring/chart.sh", "template", env={"KPS_CHART": str(bare)})
    assert r.returncode == 1 and r.stderr.splitlines() == [
        f"error: KPS_CHART '{bare}' lacks its subcharts {deps} in charts/: "
        f"copy the release with them (helm pull --untar kube-prometheus-stack --version {VERSION})"], r.stderr
    # As users type it.
    (bare / "Chart.yaml").write_text(yaml.safe_dump({**meta, "version": "80.0.0"}))
    r = sh("./task", "monitoring:chart-template", f"KPS_CHART={bare}")
    assert r.returncode == 1 and "is kube-prometheus-stack 80.0.0, not kube-prometheus-stack " + VERSION in r.stderr, r.stderr
