"""fetch: a run's time series from Prometheus' HTTP API -> RUN_DIR/timeseries.json. Read only
through the signal contract (monitoring/README.md: the bench:* rules and k6's own series)."""
import json
import math
import urllib.error
import urllib.parse
import urllib.request

from .fmt import iso, say
from .run import RULE_WINDOW

PROM_MAX_POINTS = 11000  # Prometheus refuses a range query of more points per series


def query_ranges(testid):
    """timeseries.json's series -> PromQL. k6 tags every sample with testid (k6/lib), the rest
    is the contract; utilizations are combined with max and rates with sum if several come back.
    k6's series are rated over the rules' window: the client's rate at t then covers what the
    server's does, and the two lines meet."""
    sel = f"{{testid={json.dumps(testid)}}}[{RULE_WINDOW}]"  # a JSON string is a valid PromQL string literal
    q = {"client_rps": f"sum(rate(k6_http_reqs_total{sel}))"}
    # The native engine's latency as a classic histogram (its bounds in le, xk6/latency.go),
    # else k6/http's native one: a native-engine run has both, the latter of setup's request.
    for p in (50, 95, 99):
        q[f"p{p}_ms"] = (f"1000 * (histogram_quantile({p / 100}, sum by (le) (rate(k6_bench_http_req_duration_buckets_total{sel})))"
                         f" or histogram_quantile({p / 100}, sum(rate(k6_http_req_duration_seconds{sel}))))")
    q.update(ingress_cpu_cores="sum(bench:ingress_cpu_cores:rate)",
             ingress_cpu_utilization="bench:ingress_cpu_utilization:ratio",
             nic_utilization="bench:nic_utilization:ratio",
             server_rps="bench:server_requests:rate",
             loadgen_cpu_utilization="bench:loadgen_cpu_utilization:ratio")
    return q


class Unreachable(Exception):
    pass


class QueryFailed(Exception):
    pass


def query_range(base, query, start, end, step, timeout):
    url = base.rstrip("/") + "/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}s"})
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:  # Prometheus explains a refused query in the body
        try:
            why = json.load(e).get("error", "")
        except ValueError:
            why = ""
        raise QueryFailed(f"Prometheus answered HTTP {e.code}{': ' + why if why else ''}")
    except urllib.error.URLError as e:
        raise Unreachable(getattr(e.reason, "strerror", None) or str(e.reason))
    except (TimeoutError, OSError) as e:
        raise Unreachable(str(e) or type(e).__name__)
    except ValueError:
        raise QueryFailed("the answer is not Prometheus API JSON")
    if not isinstance(body, dict) or body.get("status") != "success":
        raise QueryFailed(f"Prometheus answered {str(body.get('error') if isinstance(body, dict) else body)[:200]}")
    return (body.get("data") or {}).get("result") or []


def combine(result, how):
    """Several series -> one [[t, v], ...]; NaN and Inf (a quantile of no requests) are dropped."""
    points = {}
    for series in result:
        for t, v in series.get("values") or []:
            v = float(v)
            if math.isfinite(v):
                points.setdefault(float(t), []).append(v)
    return [[t, how(vs)] for t, vs in sorted(points.items())]


def fetch(run, prometheus, timeout):
    start, end = run.window()
    step = max(1, math.ceil((end - start) / PROM_MAX_POINTS))
    series, missing, unreachable = {}, {}, None
    for name, query in query_ranges(run.testid).items():
        if unreachable:  # one refused connection says it for every series, without waiting again
            missing[name] = unreachable
            continue
        try:
            points = combine(query_range(prometheus, query, start, end, step, timeout),
                             max if name.endswith("utilization") else sum)
        except Unreachable as e:
            unreachable = missing[name] = f"Prometheus at {prometheus} unreachable: {e}"
            continue
        except QueryFailed as e:
            missing[name] = f"{e} (query: {query})"
            continue
        if points:
            series[name] = points
        else:
            missing[name] = f"no samples between {iso(start)} and {iso(end)} for {query}"
    out = run.dir / "timeseries.json"
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"prometheus": prometheus, "start": start, "end": end, "step": step,
                               "series": series, "missing": missing}, indent=1) + "\n")
    tmp.replace(out)
    n = len(series) + len(missing)
    if unreachable and not series:
        say("timeseries", f"0/{n} series: {unreachable}; the report says so ({out})")
    elif missing:
        first = next(iter(missing))
        say("timeseries", f"{len(series)}/{n} series from {prometheus}; missing {', '.join(missing)} "
                          f"({first}: {missing[first]}) -> {out}")
    else:
        say("timeseries", f"{n}/{n} series from {prometheus}, {end - start:.0f} s at {step} s -> {out}")
