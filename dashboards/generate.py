"""Builds the ingress-bench dashboard from code, one panel list in two renderings: Grafana's
(ingress-bench.json, beside this file, for users' Grafana) and Perses' (live/ingress-bench.perses.json,
the live page's on the embedded default, dashboards/live/).

    python dashboards/generate.py [PATH]            write both (PATH: the Grafana one's only)
    python dashboards/generate.py --check [PATH]    exit 1 when a file is not what this code builds

A panel the live page cannot render the same way (a kind, unit, reducer or variable Perses has no
counterpart for: LIVE below) stops the build with one line per problem, so the two cannot drift.

Panels read only the signal contract (monitoring/signals.yaml): the bench:* recording rules, which
every platform computes from its own raw metrics, and k6's own k6_* series. lint.py enforces it.
The saturation panels are coloured from the contract's levels: red from exactly the level at
which the verdict calls that resource the limit.
"""
import json
import string
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "monitoring"))
import signals as contract  # noqa: E402  (monitoring/signals.py: the signal contract)
from perses import perses_panel, perses_variable, unsupported  # noqa: E402  (the live page's rendering)

OUT = Path(__file__).with_name("ingress-bench.json")
LIVE_OUT = Path(__file__).with_name("live") / "ingress-bench.perses.json"
# The scrape interval of the Prometheus the live page is served by (the lab's; the local
# cluster's is the same, monitoring/local/prometheus.yaml): Perses' shortest step, which it
# takes as 15 s when unsaid, and a 30 s run would be two points.
SCRAPE = yaml.safe_load((Path(__file__).resolve().parents[1] / "monitoring/lab/prometheus.yml").read_text())["global"]["scrape_interval"]
# A fixed uid keeps links, bookmarks and the sidecar's provisioned copy pointing at one dashboard.
UID = "ingress-bench-main"
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# k6 tags every sample with its run (k6/lib/config.js); client series follow the selected runs.
# Server-side rules have no testid: they are placed in time by the run annotation instead.
K6 = '{testid=~"$testid", variant=~"$variant", scenario=~"$scenario"}'


def k6_rate(metric):
    """Per-run rate, summed over the k6 instances of a run (distributed segments share a testid).
    For a native histogram this is the run's histogram of the window."""
    return f"sum by (testid) (rate({metric}{K6}[$__rate_interval]))"


@dataclass
class Histogram:
    """One histogram of the run in both of its forms: k6/http's samples reach Prometheus as
    native histograms (native), the native engine's as classic ones, a counter of the requests
    at or below each bound `le` (classic: summed by testid and le; xk6/latency.go). A query
    reads the classic one where the run has it: a native-engine run also has k6/http's native
    histograms, of setup's and the teardown's few requests."""
    native: str
    classic: str


def k6_histogram(native, buckets, over=k6_rate):
    """The run's histogram of k6/http's NATIVE series and the native engine's BUCKETS, each as
    OVER gives it of the selected runs' series (a window's rate, or as last pushed)."""
    return Histogram(over(native), over(buckets).replace("sum by (testid)", "sum by (testid, le)", 1))


def quantile(q, h):
    return f"histogram_quantile({q}, {h.classic}) or histogram_quantile({q}, {h.native})"


def percentiles(histogram, *qs):
    """Targets of one histogram's percentiles, one series per run."""
    return [(quantile(q, histogram), f"p{round(q * 100)} {{{{testid}}}}") for q in qs]


RPS = k6_rate("k6_http_reqs_total")
LATENCY = k6_histogram("k6_http_req_duration_seconds", "k6_bench_http_req_duration_buckets_total")
TLS = k6_histogram("k6_http_req_tls_handshaking_seconds", "k6_bench_http_req_tls_handshaking_buckets_total")
# k6/http records a handshake time for every request, 0 on a reused connection, so the
# histogram's count is requests: handshakes are the observations above zero (1 µs lies far
# above the zero bucket and far below any real handshake). The native engine's histogram
# holds handshakes only: its count (the +Inf bucket) is theirs.
HANDSHAKES = (f"sum by (testid) (rate(k6_bench_http_req_tls_handshaking_buckets_total{{{K6[1:-1]}, le=\"+Inf\"}}[$__rate_interval]))"
              f" or histogram_count({TLS.native}) * histogram_fraction(1e-6, +Inf, {TLS.native})")
# Failed requests over all, from k6's request counter (its expected_response tag): k6's own
# http_req_failed Rate is one series per tag set (status, url...), each its own fraction since
# the start, and no mean of them is the run's (one error among 200 OKs read ~50%). "or 0 *":
# a run without a failure has no such series at all, and reads 0, not "no data".
FAILED = 'expected_response="false"'


def error_ratio(window):
    failed = f"sum by (testid) (increase(k6_http_reqs_total{{{K6[1:-1]}, {FAILED}}}[{window}]))"
    total = f"sum by (testid) (increase(k6_http_reqs_total{K6}[{window}]))"
    return f"({failed} or 0 * {total}) / {total}"


ERRORS = error_ratio("$__rate_interval")
# The run as a whole, at the end of the dashboard's time range (instant queries over
# $__range): the same numbers as the end-of-run summary, within a histogram bucket's
# error, where a mean of per-interval p99s is not (grafana/k6#4580). Each runner's counters
# and histograms as last pushed, which count from its start: increase() would leave out what
# a series held at its first sample (the first push's requests), and its p99 would not be the
# summary's.
def last_pushed(series):
    return f"sum by (testid) (last_over_time({series}[$__range]))"


ERRORS_RUN = (f"({last_pushed(f'k6_http_reqs_total{{{K6[1:-1]}, {FAILED}}}')} or 0 * {last_pushed('k6_http_reqs_total' + K6)})"
              f" / {last_pushed('k6_http_reqs_total' + K6)}")
P99_RUN = quantile(0.99, k6_histogram("k6_http_req_duration_seconds", "k6_bench_http_req_duration_buckets_total",
                                      lambda m: last_pushed(m + K6)))
# The load's requests and setup's, not the teardown's query (bench.sh leaves it out of the count).
REQUESTS_RUN = last_pushed(f'k6_http_reqs_total{{{K6[1:-1]}, name!="bench-correlation"}}')
RECEIVED_BITS = f"8 * {k6_rate('k6_data_received_total')}"

CORES = "suffix: cores"
INGRESS_CPU, NIC = "bench:ingress_cpu_utilization:ratio", "bench:nic_utilization:ratio"
BACKEND_CPU, LOADGEN_CPU = "bench:backend_cpu_utilization:ratio", "bench:loadgen_cpu_utilization:ratio"
# The verdict's saturation levels (monitoring/signals.yaml), by rule.
LEVELS = contract.saturation()


def saturation(rule):
    """Thresholds of a saturation signal: green, orange in the tenth before the verdict's level,
    red from exactly that level, so the panel that turns red names what the verdict does."""
    level = LEVELS[rule]
    return [(None, "green"), (round(level - 0.1, 2), "orange"), (level, "red")]


def level(rule):
    return f"{LEVELS[rule] * 100:g} %"


NEUTRAL = [(None, "blue")]
ERROR_BUDGET = [(None, "green"), (0.0001, "red")]  # the suite's default ERROR_RATE_MAX


@dataclass
class Panel:
    """One panel, renderer-neutral: the Grafana dashboard and the live page's are built from it.
    kind: "timeseries" or "stat"; unit: Grafana's unit id; targets: (PromQL, legend) pairs.
    Stats: calc (Grafana's reducer), instant (the query itself covers $__range, evaluated once
    at its end). Time series: ceiling (a regexp of legends drawn dashed: the limit the others
    run into), soft_max, steps (thresholds, drawn as dashed lines on a time series)."""
    kind: str
    title: str
    unit: str
    targets: list
    desc: str
    w: int = 12
    h: int = 8
    calc: str = None
    steps: list = None
    instant: bool = False
    ceiling: str = None
    soft_max: float = None


def series(title, unit, *targets, desc, w=12, h=8, ceiling=None, soft_max=None, steps=None):
    """A time series; legends as tables with mean and max, the numbers a benchmark is read by."""
    return Panel("timeseries", title, unit, list(targets), desc, w, h, steps=steps, ceiling=ceiling, soft_max=soft_max)


def single(title, unit, expr, legend, calc, steps, desc, instant=False, w=4):
    """A stat over the time range; one value per run when several are selected."""
    return Panel("stat", title, unit, [(expr, legend)], desc, w, 4, calc=calc, steps=steps, instant=instant)


def thresholds(steps):
    return (dashboard.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=v, color=c) for v, c in steps]))


def grafana_panel(panel):
    """The Grafana SDK builder of a Panel: the datasource variable on the panel and each target,
    refIds A, B..."""
    if panel.kind == "stat":
        b = (stat.Panel().graph_mode(cm.BigValueGraphMode.AREA).color_mode(cm.BigValueColorMode.BACKGROUND)
             .reduce_options(common.ReduceDataOptions().calcs([panel.calc])).thresholds(thresholds(panel.steps)))
    else:
        b = (timeseries.Panel().min(0).fill_opacity(10).show_points(cm.VisibilityMode.NEVER)
             .legend(common.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE)
                     .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs(["mean", "max"]))
             .tooltip(common.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI)
                      .sort(cm.SortOrder.DESCENDING)))
        if panel.soft_max is not None:
            b.axis_soft_max(panel.soft_max)
        if panel.steps:
            b.thresholds(thresholds(panel.steps))
            b.thresholds_style(common.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
        if panel.ceiling:
            b.override_by_regexp(panel.ceiling, [
                dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
                dm.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
            ])
    b.title(panel.title).description(panel.desc).datasource(DS).unit(panel.unit).span(panel.w).height(panel.h)
    for ref, (expr, legend) in zip(string.ascii_uppercase, panel.targets):
        q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)
        b.with_target(q.instant() if panel.instant else q)
    return b


def rows():
    """Row title -> its panels, top to bottom."""
    return {
        "Summary: what limited the run": summary_panels(),
        "Client (k6)": client_panels(),
        "Ingress": ingress_panels(),
        "Backends": backend_panels(),
        "Network": network_panels(),
        "Load generator": loadgen_panels(),
        "Correlation": correlation_panels(),
    }


def summary_panels():
    """The verdict's signals at a glance: the run's rate, p99, errors, and each resource's peak."""
    return [
        # > 0: after the load k6's counter stands still (no stale markers: bench/lib/prometheus.sh).
        single("Requests/s (k6)", "reqps", f"{RPS} > 0", "{{testid}}", "mean", NEUTRAL,
               "Mean client request rate of each selected run while it loaded."),
        # The run's count as its summary has it (not a mean of rates), 3 wide like its neighbours.
        single("Requests", "none", REQUESTS_RUN, "{{testid}}", "lastNotNull", NEUTRAL,
               "The run's requests until the time range's end (k6's counter as last pushed in "
               "$__range): the summary's count when the range reaches the run's end.", instant=True, w=3),
        single("p99 latency", "s", P99_RUN, "{{testid}}", "lastNotNull", NEUTRAL,
               "p99 request duration of the run's requests until the time range's end (k6's "
               "histograms as last pushed in $__range): the run's p99 when the range "
               "reaches its end.", instant=True, w=3),
        single("Errors", "percentunit", ERRORS_RUN, "{{testid}}", "lastNotNull", ERROR_BUDGET,
               "Failed requests over all the run's requests until the time range's end; red "
               "above the suite's 0.01 % threshold.", instant=True, w=3),
        single("Ingress CPU", "percentunit", INGRESS_CPU, "ingress", "max", saturation(INGRESS_CPU),
               f"Peak ingress CPU against its limit. Red from {level(INGRESS_CPU)}, where the verdict "
               "calls the ingress CPU-bound (the verdict judges the run's mean, this panel its peak)."),
        single("NIC", "percentunit", NIC, "NIC", "max", saturation(NIC),
               f"Peak link use against the declared capacity. Red from {level(NIC)}, where the verdict "
               "calls the network the limit (the verdict judges the run's mean, this panel its peak).", w=3),
        single("Load generator CPU", "percentunit", LOADGEN_CPU, "k6", "max", saturation(LOADGEN_CPU),
               f"Peak k6 CPU against the CPUs it may use. Red from {level(LOADGEN_CPU)}, where the "
               "verdict says the client, not the ingress, set the number (the verdict judges the run's "
               "mean, this panel its peak)."),
    ]


def client_panels():
    """What k6 measured."""
    return [
        series("Requests per second", "reqps", (RPS, "{{testid}}"),
               desc="Completed HTTP requests per second, as k6 counts them."),
        series("Latency", "s", *percentiles(LATENCY, 0.5, 0.95, 0.99),
               desc="Request duration percentiles from k6's histograms (the native engine's, else k6/http's)."),
        series("Errors", "percentunit", (ERRORS, "{{testid}}"), w=6,
               desc="Failed requests over all requests, per interval (k6's request counter, tag expected_response)."),
        series("Dropped iterations", "suffix: iter/s", (k6_rate("k6_dropped_iterations_total"), "{{testid}}"),
               w=6, desc="Open model (RATE=N) only: iterations k6 could not start for want of a free VU; "
                         "any means the target rate was not offered."),
        series("Data received", "bps", (RECEIVED_BITS, "{{testid}}"),
               desc="Response data k6 received (throughput scenario: the Gbit/s result)."),
        series("TLS handshake time", "s", *percentiles(TLS, 0.5, 0.99),
               desc="Percentiles of the TLS handshake time: the native engine's of each handshake; k6/http's of "
                    "every request, a reused connection's 0 included (handshakes only when each request opens "
                    "a connection, tps)."),
        series("TLS handshakes per second", "suffix: handshakes/s", (HANDSHAKES, "{{testid}}"),
               desc="Requests that performed a TLS handshake, per second (tps scenario: the TPS result)."),
    ]


def ingress_panels():
    """The ingress's CPU, connections and own request count."""
    return [
        series("Ingress CPU cores vs limit", CORES, ("bench:ingress_cpu_cores:rate", "{{pod}} used"),
               ("bench:ingress_cpu_limit:cores", "{{pod}} limit"), ceiling=".*limit",
               desc="CPU used by each ingress pod against its limit (quota, else request, else the node)."),
        series("Ingress CPU utilization", "percentunit", (INGRESS_CPU, "ingress"),
               soft_max=1, steps=saturation(INGRESS_CPU),
               desc=f"All ingress pods' CPU use over their limits, or how busy their CPUs are: from "
                    f"{level(INGRESS_CPU)} (the red line) the verdict calls the ingress CPU-bound."),
        series("Ingress active connections", "short", ("bench:ingress_connections:active", "active"),
               desc="Client connections nginx holds open."),
        series("Ingress request rate", "reqps", ("bench:server_requests:rate", "nginx"),
               desc="Requests per second counted by the ingress itself."),
    ]


def backend_panels():
    """The backends' CPU."""
    return [
        series("Backend CPU cores", CORES, ("bench:backend_cpu_cores:rate", "{{pod}}"),
               desc="CPU used by each backend pod."),
        series("Backend CPU utilization", "percentunit", (BACKEND_CPU, "backends"),
               soft_max=1, steps=saturation(BACKEND_CPU),
               desc=f"Backends' CPU use over their limits: from {level(BACKEND_CPU)} (the red line) the "
                    "verdict calls the backends, not the ingress, the limit (seed 004's 60m backends)."),
    ]


def network_panels():
    """The ingress's link."""
    return [
        series("NIC throughput vs link capacity", "bps", ("bench:nic_transmit_bits:rate", "transmit"),
               ("bench:nic_receive_bits:rate", "receive"), ("bench:link_capacity:bits", "capacity"),
               ceiling="capacity", desc="Bits per second through the ingress's network interface against "
                                        "the declared link capacity."),
        series("Link utilization", "percentunit", (NIC, "utilization"),
               w=6, soft_max=1, steps=saturation(NIC),
               desc=f"The busier direction as a fraction of the declared capacity: from {level(NIC)} "
                    "(the red line) the verdict calls the network the limit."),
        series("NIC drops", "pps", ("bench:nic_drops:rate", "dropped"),
               w=6, desc="Packets dropped on the ingress's interface, received and transmitted."),
    ]


def loadgen_panels():
    """The client's own CPU: whether the run measured k6."""
    return [
        series("Load generator CPU cores", CORES, ("bench:loadgen_cpu_cores:rate", "k6"),
               w=8, desc="CPU the load generator itself used."),
        series("Load generator CPU utilization", "percentunit", (LOADGEN_CPU, "k6"),
               w=8, soft_max=1, steps=saturation(LOADGEN_CPU),
               desc=f"The larger of k6's share of the CPUs it may use and how busy those CPUs are: from "
                    f"{level(LOADGEN_CPU)} (the red line) the verdict says the measurement is the "
                    "client's limit, not the ingress's."),
        # One query: a run whose processes published no CPU list (k6 in pods) still has the nodes'.
        series("CPUs busy, by the role that may run on them, and each node's", "percentunit",
               ("bench:cpus_busy:ratio or bench:node_cpus_busy:ratio", "{{role}}{{instance}}"),
               w=8, soft_max=1, desc="How busy the CPUs each role is pinned to are, whoever used them: the "
                                     "host k6's, and on the lab the LB's and backends' (which share theirs); and "
                                     "all the CPUs each node-exporter sees (a node's; here the machine's), "
                                     "by its address."),
    ]


def correlation_panels():
    """Client and server side by side."""
    return [
        series("Requests per ingress core", "suffix: req/s per core",
               ("bench:rps_per_ingress_core:ratio", "req/s per core"),
               w=8, desc="Server requests per second over the ingress's CPU cores: a tuning's efficiency."),
        series("Client throughput vs link capacity", "bps", (RECEIVED_BITS, "k6 received {{testid}}"),
               ("bench:nic_transmit_bits:rate", "ingress transmit"), ("bench:link_capacity:bits", "capacity"),
               w=8, ceiling="capacity", desc="What k6 received against what the ingress sent and what the "
                                             "link allows."),
        series("Client vs server requests", "reqps", (RPS, "k6 {{testid}}"),
               ("bench:server_requests:rate", "nginx"),
               w=8, desc="k6's count against nginx's: they agree unless requests are lost or retried "
                         "in between."),
    ]


def label_variable(name, label, query, sort=dm.VariableSort.ALPHABETICAL_ASC):
    """A run property to filter on; refreshed with the time range so new runs appear."""
    return (dashboard.QueryVariable(name).label(label).query(query).datasource(DS)
            .multi(True).include_all(True).all_value(".*")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(sort))


# testids start with their UTC start time: sorted descending, the newest run comes first.
RUNS = 'label_values(k6_http_reqs_total{variant=~"$variant", scenario=~"$scenario"}, testid)'
# max_over_time, not the bare gauge: k6 writes no stale markers by default, so k6_vus alone
# would stretch each run's region 5 minutes past its end.
RUN_ACTIVE = f"max by (testid, variant, scenario) (max_over_time(k6_vus{K6}[15s]))"
# Prometheus annotation options the SDK's AnnotationQuery has no fields for: Grafana turns the
# samples of each series, step apart, into one region titled by the run.
RUN_REGION = {"step": "10s", "titleFormat": "{{testid}}", "tagKeys": "scenario,variant", "useValueForTime": False}


def build():
    """The dashboard as a JSON-ready dict."""
    b = (dashboard.Dashboard("ingress-bench").uid(UID).tags(["ingress-bench", "k6", "nginx"])
         .description("One benchmark run (or several) of an NGINX ingress: what k6 measured, and what the "
                      "ingress, backends, network and load generator spent doing it.")
         .time("now-30m", "now").refresh("10s").tooltip(dm.DashboardCursorSync.CROSSHAIR)
         .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
         .with_variable(label_variable("variant", "Variant", VARIABLES[0][2]))
         .with_variable(label_variable("scenario", "Scenario", VARIABLES[1][2]))
         .with_variable(label_variable("testid", "Run", VARIABLES[2][2], dm.VariableSort.ALPHABETICAL_DESC))
         .annotation(dashboard.AnnotationQuery().name("k6 runs").datasource(DS).enable(True)
                     .icon_color("#8F3BB8").expr(RUN_ACTIVE)))
    for title, panels in rows().items():
        b.with_row(dashboard.Row(title))  # expanded rows: their panels follow them at top level
        for p in panels:
            # a fresh builder each: the SDK positions a panel on the grid the first time it is added
            b.with_panel(grafana_panel(p))
    model = b.build()
    for i, p in enumerate(model.panels, 1):  # in layout order: stable while the layout is
        p.id_val = i
    result = json.loads(json.dumps(model, cls=JSONEncoder))
    for a in result["annotations"]["list"]:
        a.update(RUN_REGION)
    return result


VARIABLES = [("variant", "Variant", "label_values(k6_http_reqs_total, variant)", "alphabetical-asc"),
             ("scenario", "Scenario", 'label_values(k6_http_reqs_total{variant=~"$variant"}, scenario)', "alphabetical-asc"),
             ("testid", "Run", RUNS, "alphabetical-desc")]


def build_live(grafana):
    """The Perses dashboard: the same panels, rows and grid positions as GRAFANA (the built Grafana
    dashboard), the Prometheus the page is served from as its datasource (the page fills its URL)."""
    panels, layouts, n = {}, [], 0
    flat = [p for ps in rows().values() for p in ps]
    for g in grafana["panels"]:
        if g["type"] == "row":
            top = g["gridPos"]["y"] + 1
            layouts.append({"kind": "Grid", "spec": {"display": {"title": g["title"], "collapse": {"open": True}}, "items": []}})
            continue
        panel, n = flat[n], n + 1
        key = f"p{g['id']}"
        panels[key] = perses_panel(panel)
        pos = g["gridPos"]
        layouts[-1]["spec"]["items"].append({"x": pos["x"], "y": pos["y"] - top, "width": pos["w"], "height": pos["h"],
                                             "content": {"$ref": f"#/spec/panels/{key}"}})
    return {"kind": "Dashboard", "metadata": {"name": "ingress-bench", "project": "ingress-bench"}, "spec": {
        "display": {"name": "ingress-bench", "description": grafana["description"]},
        "duration": "30m", "refreshInterval": "10s",
        "datasources": {"prometheus": {"default": True, "plugin": {"kind": "PrometheusDatasource", "spec": {
            "directUrl": "", "scrapeInterval": SCRAPE}}}},
        "variables": [perses_variable(*v) for v in VARIABLES], "panels": panels, "layouts": layouts}}


def dumps(doc):
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render():
    return dumps(build())


def main(argv):
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    problems = [w for ps in rows().values() for p in ps for w in unsupported(p)]
    if problems:
        print("\n".join(f"error: {w}" for w in problems), file=sys.stderr)
        return 1
    grafana = build()
    outputs = {Path(paths[0]): dumps(grafana)} if paths else {OUT: dumps(grafana), LIVE_OUT: dumps(build_live(grafana))}
    for out, text in outputs.items():
        if not check:
            out.write_text(text)
        elif not out.exists() or out.read_text() != text:
            print(f"error: {out} is not what dashboards/generate.py builds: run python dashboards/generate.py "
                  "and commit both", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
