"""rounds: the quick start's answer from its rounds (bench/run/rounds.sh): each round a whole
bench.sh run with its own verdict; the valid ones give the median and an interval, a round that
is NOT VALID or failed is listed and left out. -> DIR/rounds.json and DIR/summary.txt."""
import json
import math
import statistics
from collections import Counter
from pathlib import Path

from .run import Bad
from .stats import log_interval
from .summary import jq_round, write

LEVEL = 0.95


def figure(s, unit):
    """A round's headline (req/s, or Gbit/s for throughput) and the same per ingress CPU."""
    r, c = result_of(s), s.get("cpu") or {}
    head = r.get("gbit_per_s") if unit == "Gbit/s" else r.get("rps")
    return head, (c.get("per_ingress_cpu") or {}).get("value")


def result_of(s):
    """A round's k6 figures: its summary's result, or an in-cluster run's (bench/run/distributed.sh:
    its segments summed at the top level)."""
    return s.get("result") or s


def interval(values):
    """The rounds' geometric mean and its LEVEL t interval on their logs (a rate's noise is
    multiplicative: bench/report/stats.py); None below two values. With three rounds the t
    quantile is 4.30: the interval is wide by construction, and says so by its width."""
    if len(values) < 2 or min(values) <= 0:
        return None
    logs = [math.log(v) for v in values]
    i = log_interval(statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs)), len(logs) - 1, LEVEL)
    return {"geometric_mean": i["ratio"], "low": i["low"], "high": i["high"], "level": LEVEL,
            "method": "t interval on the rounds' log rates",
            "half_width_percent": (math.sqrt(i["high"] / i["low"]) - 1) * 100}


def rounds(dir_, exits, aborted=None):
    """DIR's rounds (DIR/<testid>-r<i>/, in order) with their exit codes EXITS; ABORTED: the
    signal that stopped them. Returns the lines to print."""
    dir_ = Path(dir_)
    runs = sorted((d for d in dir_.iterdir() if d.is_dir() and (d / "summary.json").exists()),
                  key=lambda d: int(d.name.rsplit("-r", 1)[1]))
    if not runs:
        raise Bad(f"{dir_} holds no finished round")
    if len(exits) < len(runs):
        raise Bad(f"{len(runs)} rounds in {dir_} but {len(exits)} exit codes")
    rows, unit = [], None
    for i, d in enumerate(runs):
        s = json.loads((d / "summary.json").read_text())
        unit = unit or ((s.get("cpu") or {}).get("per_ingress_cpu") or {}).get("unit") or \
            ("Gbit/s" if result_of(s).get("scenario") == "throughput" or "gbit_per_s" in result_of(s) else "req/s")
        head, per_cpu = figure(s, unit)
        v, c = s.get("verdict") or {}, s.get("cpu") or {}
        t = c.get("ingress_throttling") or {}
        why = None if exits[i] in (0, 99) and v.get("valid", True) and not s.get("aborted") else \
            "aborted" if s.get("aborted") else "NOT VALID: " + v.get("text", "") if not v.get("valid", True) else f"exit {exits[i]}"
        rows.append({"round": i + 1, "testid": d.name, "exit": exits[i], "counted": why is None, "why_not": why,
                     "limit": v.get("limit"), "valid": v.get("valid"), "headline": head, "per_ingress_cpu": per_cpu,
                     "ingress_cpu": c.get("ingress_cpus"),
                     "p50_ms": result_of(s).get("p50_ms"), "p99_ms": result_of(s).get("p99_ms"),
                     "throttled_seconds": t.get("throttled_seconds"), "steal_cpus": c.get("steal_cpus"),
                     "thresholds_passed": result_of(s).get("passed")})
    counted = [r for r in rows if r["counted"]]
    out = {"rounds": rows, "unit": unit, "counted": len(counted), "aborted": aborted}
    for key in ("headline", "per_ingress_cpu"):
        values = [r[key] for r in counted if r[key] is not None]
        out[key] = {"median": statistics.median(values) if values else None, "values": values,
                    "interval": interval(values)}
    limits = Counter(r["limit"] for r in counted)
    out["limit"] = limits.most_common(1)[0][0] if len(limits) == 1 else None
    write(dir_ / "rounds.json", out)
    lines = round_lines(out)
    with (dir_ / "summary.txt").open("w") as f:
        f.write("".join(line + "\n" for line in lines))
    return lines


def amount(v, unit):
    return "n/a" if v is None else f"{v:.2f}" if unit == "Gbit/s" else f"{jq_round(v):,}"


def amount_ms(v):
    return "n/a" if v is None else f"{v:.1f} ms"


def round_lines(out):
    unit, rows = out["unit"], out["rounds"]
    lines = []
    for r in rows:
        lines.append(f"{'round ' + str(r['round']):<14}{amount(r['headline'], unit)} {unit}, "
                     f"{amount(r['per_ingress_cpu'], unit)} {unit} per ingress CPU at {r['ingress_cpu'] or 0:g} ingress CPU, "
                     f"p99 {amount_ms(r['p99_ms'])}, {r['limit']}" + ("" if r["counted"] else f" (left out: {r['why_not']})"))
    n = out["counted"]
    if not n:
        return lines + [f"{'answer':<14}no round counts: each was left out (above)"]
    head, per_cpu = out["headline"], out["per_ingress_cpu"]
    bound = {"unknown": "limit unknown", "none": "nothing saturated", None: "limits differ by round"}.get(
        out["limit"], f"{out['limit']}-bound")
    shares = {r["ingress_cpu"] for r in rows if r["counted"]}
    at = f" at {shares.pop():g} ingress CPU" if len(shares) == 1 and None not in shares else ""

    def spread(f):
        i = f["interval"]
        return (f" (median of {n} rounds, ± {i['half_width_percent']:.1f} %: {amount(i['low'], unit)}-{amount(i['high'], unit)}, "
                f"the {LEVEL:.0%} {i['method']})") if i else f" (one round of {len(rows)} counted: no interval)"
    said = f"{amount(head['median'], unit)} {unit}"
    said = f"{said}, {amount(per_cpu['median'], unit)} {unit} per ingress CPU{spread(per_cpu)}" \
        if per_cpu["median"] is not None else said + spread(head)
    return lines + [f"{'answer':<14}{bound}{at}: {said}"]
