"""Dashboards as code: the committed JSON is what dashboards/generate.py builds, it passes the
linter, the linter catches each kind of breakage, kustomize makes the ConfigMap Grafana's sidecar
loads, and queries() yields PromQL ready for a live Prometheus. The live page's Perses dashboard
is the same panel list: the same panels, queries and grid, and a panel it cannot render as
Grafana does stops the build."""
import json
import sys

import pytest
import yaml

from conftest import ROOT, sh

sys.path.insert(0, str(ROOT / "dashboards"))
import generate  # noqa: E402
import lint  # noqa: E402

DASHBOARD = ROOT / "dashboards/ingress-bench.json"
LIVE = ROOT / "dashboards/live/ingress-bench.perses.json"
TESTID = "20261121T155928Z-rps-nginx-lb-default"


@pytest.fixture
def dashboard():
    return json.loads(DASHBOARD.read_text())


def panel(dash, title):
    return next(p for p in dash["panels"] if p["title"] == title)


def test_committed_json_is_what_the_code_builds(tmp_path):
    r = sh(sys.executable, "dashboards/generate.py", "--check")
    assert r.returncode == 0, r.stderr
    # Deterministic: a fresh build is byte for byte the committed file.
    assert sh(sys.executable, "dashboards/generate.py", str(tmp_path / "d.json")).returncode == 0
    assert (tmp_path / "d.json").read_bytes() == DASHBOARD.read_bytes()


def test_check_reports_a_stale_json_in_one_line(tmp_path, dashboard):
    dashboard["title"] = "edited by hand"
    stale = tmp_path / "d.json"
    stale.write_text(json.dumps(dashboard))
    r = sh(sys.executable, "dashboards/generate.py", "--check", str(stale))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "generate.py" in r.stderr


def test_the_live_dashboard_is_the_same_panels(dashboard):
    """Every Grafana panel is a Perses panel with its title, its queries and legends in order and
    its place on the grid (rows as Perses' grids, in order); the stats' thresholds the same."""
    live = json.loads(LIVE.read_text())["spec"]
    grids = iter(live["layouts"])
    for g in dashboard["panels"]:
        if g["type"] == "row":
            grid = next(grids)["spec"]
            assert grid["display"]["title"] == g["title"]
            top, items = g["gridPos"]["y"] + 1, {i["content"]["$ref"].rsplit("/", 1)[1]: i for i in grid["items"]}
            continue
        p = live["panels"][f"p{g['id']}"]["spec"]
        assert p["display"]["name"] == g["title"] and p["display"]["description"] == g["description"]
        assert [(q["spec"]["plugin"]["spec"]["query"], q["spec"]["plugin"]["spec"]["seriesNameFormat"]) for q in p["queries"]] \
            == [(t["expr"], t["legendFormat"]) for t in g["targets"]], g["title"]
        pos, item = g["gridPos"], items[f"p{g['id']}"]
        assert (item["x"], item["y"] + top, item["width"], item["height"]) == (pos["x"], pos["y"], pos["w"], pos["h"])
        assert p["plugin"]["kind"] == {"timeseries": "TimeSeriesChart", "stat": "StatChart"}[g["type"]]
        if g["type"] == "stat":
            steps = [s["value"] for s in g["fieldConfig"]["defaults"]["thresholds"]["steps"]][1:]
            assert [s["value"] for s in p["plugin"]["spec"]["thresholds"]["steps"]] == steps, g["title"]
    assert next(grids, None) is None and len(live["panels"]) == sum(g["type"] != "row" for g in dashboard["panels"])


def test_a_panel_the_live_page_cannot_show_stops_the_build(monkeypatch, capsys):
    """A kind, unit, reducer, colour or variable the live page has no counterpart for: one line
    each, naming the panel, and nothing written."""
    odd = generate.Panel("heatmap", "Odd one", "decbytes", [('sum(rate(x{node="$node"}[1m]))', "{{node}}")], "d",
                         calc="median", steps=[(None, "purple")])
    assert len(generate.unsupported(odd)) == 5 and all("panel 'Odd one'" in w for w in generate.unsupported(odd))
    rows = generate.rows()
    monkeypatch.setattr(generate, "rows", lambda: {**rows, "Odd": [odd]})
    before = LIVE.read_bytes()
    assert generate.main([]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 5 and "unit 'decbytes'" in err and "variable $node" in err, err
    assert LIVE.read_bytes() == before


def test_the_dashboard_passes_lint():
    r = sh(sys.executable, "dashboards/lint.py")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_the_dashboard_shows_the_whole_contract(dashboard):
    used = {name for _, expr in lint.queries(dashboard, TESTID) for name, _ in lint.selectors(expr)}
    assert lint.contract_rules() <= used
    assert {"k6_http_reqs_total", "k6_http_req_duration_seconds", "k6_bench_http_req_duration_buckets_total",
            "k6_dropped_iterations_total", "k6_http_req_tls_handshaking_seconds", "k6_bench_http_req_tls_handshaking_buckets_total",
            "k6_data_received_total", "k6_vus"} <= used


def set_expr(expr):
    def edit(d):
        panel(d, "Ingress request rate")["targets"][0]["expr"] = expr
    return edit


def hard_code_datasource(d):
    panel(d, "Requests per second")["targets"][0]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}


BREAKAGES = {
    "unknown rule": (set_expr("sum(bench:does_not_exist)"), "bench:does_not_exist is neither a bench:* rule"),
    "raw exporter metric": (set_expr('sum(rate(nginx_http_requests_total{role="ingress"}[1m]))'),
                            "nginx_http_requests_total is neither a bench:* rule"),
    "k6 query without testid": (set_expr("sum(rate(k6_http_reqs_total[1m]))"),
                                'k6_http_reqs_total is not filtered on the selected run'),
    "undefined variable": (set_expr('bench:server_requests:rate{pod=~"$instance"}'), "undefined variable $instance"),
    "hard-coded datasource uid": (hard_code_datasource,
                                  '{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"} is not the variable'),
    "panel without datasource": (lambda d: panel(d, "NIC drops").pop("datasource"),
                                 "datasource null is not the variable"),
    "panel without unit": (lambda d: panel(d, "NIC drops")["fieldConfig"]["defaults"].pop("unit"), "no unit"),
    "duplicate panel id": (lambda d: panel(d, "NIC drops").update(id=panel(d, "Link utilization")["id"]),
                           "is used by 2 panels"),
    "no uid": (lambda d: d.pop("uid"), "set a fixed uid"),
    "no testid variable": (lambda d: d["templating"]["list"].pop(), "no query variable 'testid'"),
    "no run annotation": (lambda d: d["annotations"]["list"].clear(), "no annotation marking the runs"),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_lint_fails_on_a_broken_copy(breakage, dashboard, tmp_path):
    edit, problem = BREAKAGES[breakage]
    edit(dashboard)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(dashboard))
    r = sh(sys.executable, "dashboards/lint.py", str(broken))
    assert r.returncode == 1
    assert [line for line in r.stdout.splitlines() if problem in line], r.stdout


def test_contract_rules_are_the_contracts_signals_without_its_helpers(tmp_path):
    """From monitoring/signals.yaml, not from a table in a README."""
    (tmp_path / "monitoring").mkdir()
    (tmp_path / "monitoring/signals.yaml").write_text(yaml.safe_dump({
        "window": "6s", "groups": [{"name": "g", "interval": "2s", "prometheusrule": "r", "file": "r.yaml"}],
        "platforms": {"cluster": "x", "lab": "y"},
        "signals": [
            {"record": "bench:a:info", "internal": True, "meaning": "a helper", "expr": "up"},
            {"record": "bench:b:rate", "unit": "req/s", "meaning": "b", "source": "b", "expr": "sum(bench:a:info)"},
        ]}, allow_unicode=True))
    assert lint.contract_rules(tmp_path) == {"bench:b:rate"}
    assert lint.contract_rules() == {s["record"] for s in yaml.safe_load(
        (ROOT / "monitoring/signals.yaml").read_text())["signals"] if not s.get("internal")}


def test_kustomize_builds_the_configmap_grafana_loads(dashboard):
    r = sh("bash", "-c", ". bench/lib.sh && kustomize build dashboards/")
    assert r.returncode == 0, r.stderr
    (cm,) = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert (cm["kind"], cm["metadata"]["name"], cm["metadata"]["namespace"]) == \
        ("ConfigMap", "ingress-bench-dashboards", "monitoring")
    labels = cm["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1"
    assert labels["app.kubernetes.io/part-of"] == "ingress-bench"
    assert json.loads(cm["data"]["ingress-bench.json"]) == dashboard


def test_queries_are_promql_for_one_run(dashboard):
    qs = dict(lint.queries(dashboard, TESTID))
    targets = sum(len(p.get("targets", [])) for p in dashboard["panels"])
    assert len(qs) == targets + 3 + 1  # + the variant, scenario and testid variables, the run annotation
    assert not [q for q in qs.values() if "$" in q]
    assert qs['panel 10 "Requests per second" target A'] == (
        f'sum by (testid) (rate(k6_http_reqs_total{{testid=~"{TESTID}", variant=~".*", scenario=~".*"}}[20s]))')
    assert qs["variable testid"] == 'group by (testid) (last_over_time(k6_http_reqs_total{variant=~".*", scenario=~".*"}[5m]))'
    assert f'testid=~"{TESTID}"' in qs['annotation "k6 runs"']
    narrowed = dict(lint.queries(dashboard, TESTID, interval="30s", variant="nginx-lb-default"))
    assert 'variant=~"nginx-lb-default"' in narrowed["variable scenario"]
    assert "[30s]" in narrowed['panel 10 "Requests per second" target A']


def test_queries_refuse_a_variable_without_a_value(dashboard):
    set_expr("bench:server_requests:rate offset $shift")(dashboard)
    with pytest.raises(ValueError, match=r"no value for \$shift"):
        lint.queries(dashboard, TESTID)
