"""The dashboards' queries against the Prometheus a run correlated with: which fail, which have
no data (the tests of the monitoring, the cluster, the live page and the charts' stack)."""
import json
import urllib.parse

from conftest import ROOT, lint, urlopen


def prom_query(run, expr, corr=None):
    """An instant query at the end of the run's window, against the Prometheus it correlated
    with (CORR: another correlation's url and window)."""
    corr = corr or run.summary["correlation"]
    url = f"{corr['url']}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": corr["window"]["end"]})
    with urlopen(url, timeout=10) as r:
        return json.load(r)["data"]["result"]


def dashboard_query_gaps(run, dash=None):
    """Every panel and variable query of the main dashboard, against the Prometheus the run
    correlated with, at the run's end: the queries that failed and those with no data."""
    testid = json.loads((run.dir / "meta.json").read_text())["testid"]
    return query_gaps(testid, run.summary["correlation"], dash)


def query_gaps(testid, corr, dash=None):
    """dashboard_query_gaps of run TESTID over CORR's window, against CORR's url. TLS panels
    have data only for TLS runs, dropped iterations only for open-model runs: those are left
    out of the empty ones."""
    dash = dash or json.loads((ROOT / "dashboards/ingress-bench.json").read_text())
    failed, empty = [], []
    # $__range: the run's window, as a dashboard whose time range is the run would set it.
    run_range = f"{int(corr['window']['end'] - corr['window']['start']) + 1}s"
    for where, expr in lint.queries(dash, testid, interval="10s", __range=run_range):
        try:
            res = prom_query(None, expr, corr)
        except Exception as e:  # an error answer (400) is a broken query
            failed.append(f"{where}: {e}")
            continue
        if not res and not empty_by_design(where):
            empty.append(where)
    return failed, empty


def empty_by_design(panel):
    """A panel with no data after a plain keep-alive run by design: the TLS panels have data
    only for TLS runs, dropped iterations only for open-model runs."""
    return "TLS" in panel or "ropped" in panel
