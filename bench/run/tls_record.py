"""bench/run/tls_record.py: the server's word on what a TLS run negotiated, before its load.

bench.sh runs a confirmation pass first: one second of the run's own scenario and client
settings (engine, TLS version, group, resumption, HTTP version, streams) on a few connections.
The server's word on it comes from one of two places:
  - nginx-lb's TLS record (components/nginx-lb): the pass's requests go under
    /bench-tls-record/RUN/, which the LB logs per request (protocol, cipher, group, ALPN,
    session reused, HTTP version, connection serial) and serves on its status port. The
    measured requests never pass there, so the record costs them nothing whatever the
    variant's access log;
  - Envoy's own statistics (a Gateway's proxy, its stats port): per listener the handshakes by
    version, cipher and curve, the sessions reused, and per connection manager the connections
    by HTTP version, counted for every connection anyway: the pass's are their change over it.

    tls_record.py mark URL                     where the record stands now: nginx's record's size
                                               in bytes, or Envoy's counters (JSON)
    tls_record.py judge DIR URL RUN MARK       the record since MARK (nginx: RUN's lines, read as
                                               a byte range), compared with what the run asks
                                               (ASKED_* in the environment): DIR/tls.json and its
                                               line; exit 1 with one `error:` line when the server
                                               negotiated otherwise.
"""
import collections
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import envoy_own  # noqa: E402  (Envoy's own series: one source, bench/lib/k6.sh)

# What nginx (OpenSSL) calls what the client asks.
VERSIONS = {"1.2": "TLSv1.2", "1.3": "TLSv1.3"}
# The client's TLS 1.2 suites (k6/lib/config.js TLS_CIPHERS, the seeds'), by OpenSSL's names;
# TLS 1.3's are Go's three, the server choosing among them.
CIPHERS = {"1.2": {"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
           "1.3": {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}}
# TLS_GROUP: the groups the server may have picked from what the client offered (k6/http and
# x25519mlkem768 offer Go's default list; nginx 1.22's OpenSSL 3.0 has no ML-KEM), by
# OpenSSL's names (nginx) and BoringSSL's (Envoy).
GROUPS = {"x25519": {"X25519"}, "p256": {"prime256v1", "P-256"},
          "x25519mlkem768": {"X25519MLKEM768", "X25519", "prime256v1", "secp384r1", "secp521r1", "P-256", "P-384", "P-521"}}


class Mismatch(Exception):
    pass


def parse(text, run):
    """The record's lines of RUN's pass: one dict per request."""
    prefix = f"/bench-tls-record/{run}/"
    out = []
    for line in text.splitlines():
        uri, *fields = line.split() or [""]
        if not uri.startswith(prefix):
            continue
        out.append(dict(f.split("=", 1) for f in fields if "=" in f))
    return out


def summarize(requests):
    """Per connection (the server's serial: its first request carries the handshake's
    figures; HTTP/2's streams share it), the counts of each value."""
    conns = {}
    for r in requests:
        conns.setdefault(r["conn"], r)
    count = lambda key: dict(collections.Counter(c[key] for c in conns.values()))  # noqa: E731
    return {"requests": len(requests), "connections": len(conns), "protocols": count("tls"), "ciphers": count("cipher"),
            "groups": count("group"), "alpn": count("alpn"), "http": count("proto"),
            "resumed": sum(c["reused"] == "r" for c in conns.values())}


ENVOY_SERIES = re.compile(r'^envoy_(listener_ssl_(?:versions|ciphers|curves|handshake|session_reused)'
                          r'|http_downstream_(?:cx_ssl_total|cx_http1_total|cx_http2_total|rq_total))\{([^}]*)\} (\S+)$')


def envoy_counters(text):
    """{series: value} of the counters a TLS record needs, Envoy's own listeners left out."""
    out, own = {}, envoy_own()
    for line in text.splitlines():
        m = ENVOY_SERIES.match(line)
        if m and not own.search(line):
            out[f"{m[1]}{{{m[2]}}}"] = float(m[3])
    return out


def envoy_record(before, after):
    """The counters' change as a record: connections are handshakes; the HTTP version of the
    TLS connection managers' (those that counted TLS connections) connections. Envoy keeps no
    count of ALPN (None): over TLS HTTP/2 comes by ALPN h2 alone."""
    d = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
    of = lambda name: {k: v for k, v in d.items() if k.startswith(name + "{")}  # noqa: E731
    label = lambda k, name: re.search(rf'{name}="([^"]*)"', k)[1]  # noqa: E731
    by = lambda name, key: {label(k, key): int(v) for k, v in of(name).items()}  # noqa: E731
    total = lambda name: int(sum(of(name).values()))  # noqa: E731
    managers = set(by("http_downstream_cx_ssl_total", "envoy_http_conn_manager_prefix"))
    tls_total = lambda name: sum(v for m, v in by(name, "envoy_http_conn_manager_prefix").items() if m in managers)  # noqa: E731
    http = {"HTTP/1.1": tls_total("http_downstream_cx_http1_total"), "HTTP/2.0": tls_total("http_downstream_cx_http2_total")}
    return {"requests": tls_total("http_downstream_rq_total"), "connections": total("listener_ssl_handshake"),
            "protocols": by("listener_ssl_versions", "envoy_ssl_version"), "ciphers": by("listener_ssl_ciphers", "envoy_ssl_cipher"),
            "groups": by("listener_ssl_curves", "envoy_ssl_curve"),
            "alpn": None, "http": {k: v for k, v in http.items() if v}, "resumed": total("listener_ssl_session_reused")}


def asked_of():
    """What the run asks, as bench.sh resolved its settings."""
    return {"version": os.environ["ASKED_TLS_VERSION"], "group": os.environ["ASKED_TLS_GROUP"],
            "resumption": os.environ["ASKED_TLS_RESUMPTION"], "http": os.environ["ASKED_HTTP_VERSION"],
            "new_connections": os.environ["ASKED_NEW_CONNECTIONS"] == "1"}


def judge(asked, rec):
    """Raises Mismatch (one line) where the server negotiated other than asked; else the
    line that says what it negotiated."""
    n = rec["connections"]
    if n == 0:
        raise Mismatch("the server recorded no TLS connection of the confirmation pass")

    def only(key, allowed, what):
        other = {v: k for v, k in rec[key].items() if v not in allowed}
        if other:
            raise Mismatch(f"{what} asked, but the server negotiated {', '.join(f'{v} on {k} of {n}' for v, k in sorted(other.items()))} connections")
    v = asked["version"]
    only("protocols", {VERSIONS[v]}, f"TLS_VERSION={v}")
    only("ciphers", CIPHERS[v], f"TLS {v} with the client's suites")
    # A resumed TLS 1.2 session has no key exchange: no group (nginx logs "-").
    only("groups", GROUPS[asked["group"]] | ({"-"} if v == "1.2" and rec["resumed"] else set()), f"TLS_GROUP={asked['group']}")
    h2 = asked["http"] == "2"
    if rec["alpn"] is not None:
        only("alpn", {"h2"} if h2 else {"http/1.1", "-"}, f"HTTP_VERSION={asked['http']}")
    only("http", {"HTTP/2.0"} if h2 else {"HTTP/1.1"}, f"HTTP_VERSION={asked['http']}")
    if asked["resumption"] == "none" and rec["resumed"]:
        raise Mismatch(f"TLS_RESUMPTION=none asked, but the server resumed {rec['resumed']} of {n} connections")
    if asked["resumption"] == "tickets" and asked["new_connections"] and n > 1 and not rec["resumed"]:
        raise Mismatch(f"TLS_RESUMPTION=tickets asked, but the server resumed none of {n} new connections (it gives no tickets: "
                       "ssl_session_tickets off, or Envoy Gateway's default)")
    fmt = lambda d: " / ".join(f"{k} ({c})" if len(d) > 1 else k for k, c in sorted(d.items()))  # noqa: E731
    alpn = "not counted" if rec["alpn"] is None else fmt(rec["alpn"])
    return (f"server: {fmt(rec['protocols'])} {fmt(rec['ciphers'])} {fmt(rec['groups'])}, ALPN {alpn}, "
            f"{fmt(rec['http'])}; resumed {rec['resumed']} of {n} connections, {rec['requests']} requests: as asked")


def size(url):
    """The record's size in bytes (0: none yet), by a HEAD."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as r:
            return int(r.headers["Content-Length"])
    except urllib.error.HTTPError as e:
        if e.code == 404:  # no record yet
            return 0
        raise


def body(url, start=0):
    """The page (from byte START on: a range), b"" where there is nothing (yet) past START."""
    req = urllib.request.Request(url, headers={"Range": f"bytes={start}-"} if start else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        if e.code in (404, 416):
            return b""
        raise


def envoy(url):
    return url.endswith("/stats/prometheus")


def mark(url):
    return json.dumps(envoy_counters(body(url).decode())) if envoy(url) else str(size(url))


def record(url, run, since):
    if envoy(url):
        return envoy_record(json.loads(since), envoy_counters(body(url).decode())), "Envoy's statistics over"
    return summarize(parse(body(url, int(since)).decode(), run)), "the LB's record of"


def main(argv):
    if not ((len(argv) == 3 and argv[1] == "mark") or (len(argv) == 6 and argv[1] == "judge")):
        print("error: usage: tls_record.py mark URL | judge DIR URL RUN MARK", file=sys.stderr)
        return 2
    url = argv[2] if argv[1] == "mark" else argv[3]
    try:
        if argv[1] == "mark":
            print(mark(url))
            return 0
        rec, source = record(url, argv[4], argv[5])
    except OSError as e:
        print(f"error: the server's TLS record {url} could not be read ({e})", file=sys.stderr)
        return 1
    asked = asked_of()
    try:
        line = judge(asked, rec)
    except Mismatch as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    secs = float(os.environ["IB_PASS_SECONDS"])
    doc = {"source": f"{source} the confirmation pass before the load", "pass_seconds": secs,
           "asked": asked, "record": rec, "line": f"{line} ({source} a pass of {secs:.1f} s before the load)"}
    (Path(argv[2]) / "tls.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(doc["line"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
