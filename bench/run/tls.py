"""bench/run/tls.py: `./task bench:tls` — what today's TLS costs the ingress: handshakes per
second per ingress CPU for each TLS version × certificate key × resumption a client can ask,
with intervals, the seeds' TLS 1.2 RSA full handshake the reference row; and the rate over
HTTP/2 (STREAMS streams per connection) beside HTTP/1.1 over TLS.

The cells are cases of the one matrix runner (bench/run/matrix.py): each a real bench.sh run,
every cell once per round, ROUNDS rounds (default 3), the order rotated each round. A cell's
variant is VARIANT (its RSA certificate) or the catalog's ECDSA twin of it (overlays/catalog.yaml
`ecdsa`), and the HTTP rows run on its HTTP/2 twin (`http2`; the variant itself where it offers
HTTP/2 already); each run's confirmation pass has the server record what it negotiated
(bench/run/tls_record.py), and its verdict says whether the ingress or the client was the limit.
Per cell: the per-CPU figure's mean over the rounds with its t 95 % interval, its ratio to the
reference row paired by round (bench/report/stats.py), the client's CPU, the validity (a round
where the client was the limit makes the cell NOT VALID: ECDSA moves cost to the client's
verification), and the server's record. A cell the server refuses (tickets of a server that
gives none) says so; TLS 1.3 has no session IDs, and Go's client resumes TLS 1.2 by tickets
only, so the session-ID cell is not a client's here (`./task calibrate` has wrk's).
-> tls.md, tls.json in the matrix's directory; PUBLISH=1 a dated set of docs/results.
Exit codes as the matrix runner's, but a cell the server refused is a finding, not a failure.
"""
import collections
import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix as mx  # noqa: E402  (the one runner)
import publish  # noqa: E402
from report.stats import mean_interval, paired_ratio_interval  # noqa: E402
from report.tls import REFERENCE, chart, page  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# version × key × resumption, the reference (report/tls.py REFERENCE) first.
HANDSHAKES = [(v, k, r) for k in ("rsa", "ecdsa") for v in ("1.2", "1.3") for r in ("none", "tickets")]
# A run the confirmation pass stopped: the server's own refusal of what the cell asks.
REFUSED = re.compile(r"(asked, but the server|does not negotiate TLS)")


def cell(v, k, r):
    return f"tls{v.replace('.', '')}-{k}-{r}"


def twins(variant):
    """The catalog's ECDSA and HTTP/2 twins of VARIANT (an overlay, or the lab's knob sets)."""
    cat = yaml.safe_load((ROOT / "overlays/catalog.yaml").read_text())
    entry = next((o for o in cat["overlays"] if o["name"] == variant), None)
    if entry is None:  # the lab's knob sets: the twins add a knob
        return f"{variant}+ecdsa", f"{variant}+http2"
    if "ecdsa" not in entry:
        raise mx.Bad(f"VARIANT {variant} has no ECDSA twin in overlays/catalog.yaml (an overlay with `ecdsa: NAME`): "
                     f"bench:tls runs on {', '.join(o['name'] for o in cat['overlays'] if 'ecdsa' in o)}")
    return entry["ecdsa"], entry.get("http2", variant)


def runs_of(mdoc, name):
    return next(c for c in mdoc["cases"] if c["name"] == name)["runs"]


def summary(run):
    try:
        return json.loads((Path(run["dir"]) / "summary.json").read_text())
    except (OSError, TypeError, ValueError):
        return {}


def figures(mdoc, name, ref=None):
    """A row: the per-round per-CPU figures of NAME's runs that finished, their mean interval
    (and the rate's), the ratio to REF's paired by round, validity, the verdicts' limit, client
    CPU, the server's record, refusals."""
    runs = runs_of(mdoc, name)
    done = [r for r in runs if r["status"] in ("passed", "crossed")]
    per_round = lambda key: {r["round"]: r["values"][key] for r in done if mx.number(r["values"].get(key))}  # noqa: E731
    by_round, rates = per_round("per_cpu"), per_round("rps")
    row = {"case": name, "rounds": len(by_round), "values": [by_round[k] for k in sorted(by_round)],
           "interval": mean_interval([by_round[k] for k in sorted(by_round)]),
           "rate_interval": mean_interval([rates[k] for k in sorted(rates)])}
    if ref is not None:
        common = sorted(set(by_round) & set(ref))
        row["vs_reference"] = paired_ratio_interval([by_round[k] for k in common], [ref[k] for k in common])
    sums = [summary(r) for r in done]
    invalid = [s["verdict"].get("text", "") for s in sums if not s.get("verdict", {}).get("valid", True)]
    limits = collections.Counter(s.get("verdict", {}).get("limit") or "unknown" for s in sums)
    row["limit"] = f"{limits.most_common(1)[0][0]} ({limits.most_common(1)[0][1]} of {len(sums)})" if sums else None
    row["valid"] = not invalid
    row["not_valid_because"] = invalid[0] if invalid else None
    util = [s["client"]["utilization"] for s in sums if mx.number(s.get("client", {}).get("utilization"))]
    row["client_cpu"] = max(util) if util else None
    recs = [s["server"]["tls"]["record"] for s in sums if s.get("server", {}).get("tls")]
    if recs:
        r0 = recs[-1]
        row["server"] = {"protocols": r0["protocols"], "ciphers": r0["ciphers"], "groups": r0["groups"], "alpn": r0["alpn"],
                         "http": r0["http"], "resumed": sum(r["resumed"] for r in recs), "connections": sum(r["connections"] for r in recs)}
    refused = [r["reason"] for r in runs if r["status"] == "failed" and REFUSED.search(r.get("reason") or "")]
    row["refused"] = refused[0] if refused else None
    row["by_round"] = by_round
    return row


def main(argv):
    env, reg = dict(os.environ), mx.registry()
    names = [n for n in ("VARIANT", "ROUNDS", "DURATION", "STREAMS", "CONNECTIONS", "PLATFORM") if env.get(n)]
    mx.check_values([{"where": "", "names": names, "env": env}])
    for n in ("TLS_VERSION", "TLS_RESUMPTION", "HTTP_VERSION", "SCHEME", "SCENARIO"):
        if env.get(n):
            raise mx.Bad(f"{n} is bench:tls's to set, one value per cell: leave it out")
    platform = env.get("PLATFORM") or mx.default_of("PLATFORM")
    variant = env.get("VARIANT") or mx.default_of("VARIANT")
    ecdsa, http2 = twins(variant)
    streams = env.get("STREAMS") or mx.default_of("STREAMS", "tls")
    duration = env.get("DURATION") or mx.default_of("DURATION", "tls")
    keep = {"DURATION": duration, **({"CONNECTIONS": env["CONNECTIONS"]} if env.get("CONNECTIONS") else {})}
    cases = [{"name": cell(v, k, r), "scenario": "tps", "variant": variant if k == "rsa" else ecdsa,
              "settings": {"TLS_VERSION": v, "TLS_RESUMPTION": r, **keep}, "group": f"TLS {v} {k.upper()}"}
             for v, k, r in HANDSHAKES]
    cases += [{"name": "http1", "scenario": "rps", "variant": http2, "settings": {"SCHEME": "https", **keep}, "group": "HTTP"},
              {"name": "http2", "scenario": "rps", "variant": http2, "settings": {"SCHEME": "https", "HTTP_VERSION": "2", "STREAMS": streams, **keep},
               "group": "HTTP"}]
    doc = {"title": f"TLS and HTTP/2 on {variant}: handshakes per ingress CPU by version, key and resumption; HTTP/2 beside HTTP/1.1",
           "rounds": 3, "platforms": mx.platforms(cluster=("own", "none")), "cases": cases,
           "columns": [{"title": "platform", "field": "platform"}, {"title": "variant", "field": "variant"},
                       {"key": "rps", "title": "req/s", "value": "result.rps", "format": ",.0f", "spread": True},
                       {"key": "per_cpu", "title": "per ingress CPU (its cgroup)", "value": "cpu.per_ingress_cpu.value", "format": ",.4g"},
                       {"key": "k6_cpu", "title": "k6 CPU", "value": "client.utilization", "scale": 100, "format": ".0f", "unit": "%"}]}
    m = mx.parse(doc, "bench:tls", reg)
    rounds = mx.resolve(m, env, reg)
    out = None
    if env.get("PUBLISH") == "1":
        try:
            out = publish.check(f"tls-{m['cases'][0]['platform']}-{variant}")
        except publish.Refused as e:
            raise mx.Bad(f"PUBLISH=1: {e}")
    started, steal0 = datetime.now(timezone.utc), publish.cpu_times()
    rc, mdoc = mx.run_matrix(m, env, rounds, "tls", yaml.safe_dump(doc, sort_keys=False))
    ref = figures(mdoc, REFERENCE)["by_round"]
    hs = [dict(figures(mdoc, cell(v, k, r), ref), cell=(v, k, r)) for v, k, r in HANDSHAKES]
    h1 = figures(mdoc, "http1")
    http = [dict(h1, title="HTTP/1.1"), dict(figures(mdoc, "http2", h1["by_round"]), title=f"HTTP/2, {streams} streams")]
    result = {"variant": variant, "ecdsa_variant": ecdsa, "http2_variant": http2, "platform": m["cases"][0]["platform"],
              "rounds": mdoc["rounds"], "duration": duration, "streams": int(streams), "connections": env.get("CONNECTIONS") or "the scenario's default",
              "handshakes": hs, "http": http, "matrix": mdoc["id"]}
    mdir = Path(mdoc["dir"])
    pub = out and {"out": out, "env": env, "started": started, "steal": steal0,
                   "settings": ["PLATFORM", "VARIANT", "ROUNDS", "DURATION", "STREAMS", "CONNECTIONS"],
                   "what": f"TLS handshakes per ingress CPU by version, key and resumption, HTTP/2 beside HTTP/1.1, on {variant}"}
    if publish.write_set("tls", mdir, result, page, chart, [r["dir"] for r in mdoc["runs"] if r.get("dir")], pub):
        print(f"publish       {os.path.relpath(out, ROOT)}/ (listed in docs/results/README.md)")
    # A refusal is the server's answer to what a cell asks, not a run that went wrong.
    failed = [r for r in mdoc["runs"] if r["status"] == "failed" and not REFUSED.search(r.get("reason") or "")]
    return 1 if failed or mdoc["interrupted"] else 0 if rc == 1 else rc


if __name__ == "__main__":
    mx.entry(main, sys.argv)
