"""bench/run/tls_record.py: the server's word on what a TLS run negotiated, before its load.

bench.sh runs a confirmation pass first: one second of the run's own scenario and client
settings (engine, TLS version, group, resumption, HTTP version, streams) on a few connections,
its requests under /bench-tls-record/RUN/, which nginx-lb records per request (the TLS record,
components/nginx-lb: protocol, cipher, group, ALPN, session reused, HTTP version, connection
serial). The measured requests never pass there, so the record costs them nothing whatever the
variant's access log.

    tls_record.py size RECORD_URL                the record's size now (0: none yet)
    tls_record.py judge DIR RECORD_URL RUN FROM  read the record from byte FROM on (a range: the
                                                 record keeps every pass's lines), compare RUN's
                                                 with what the run asks (ASKED_* in the
                                                 environment), write DIR/tls.json and print its
                                                 line; exit 1 with one `error:` line when the
                                                 server negotiated otherwise.
"""
import collections
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

# What nginx (OpenSSL) calls what the client asks.
VERSIONS = {"1.2": "TLSv1.2", "1.3": "TLSv1.3"}
# The client's TLS 1.2 suites (k6/lib/config.js TLS_CIPHERS, the seeds'), by OpenSSL's names;
# TLS 1.3's are Go's three, the server choosing among them.
CIPHERS = {"1.2": {"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
           "1.3": {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}}
# TLS_GROUP: the groups the server may have picked from what the client offered (k6/http and
# x25519mlkem768 offer Go's default list; nginx 1.22's OpenSSL 3.0 has no ML-KEM).
GROUPS = {"x25519": {"X25519"}, "p256": {"prime256v1"},
          "x25519mlkem768": {"X25519MLKEM768", "X25519", "prime256v1", "secp384r1", "secp521r1"}}


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
        raise Mismatch("the server recorded no connection of the confirmation pass (its TLS record at /bench-tls-record is empty for this run)")

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
    only("alpn", {"h2"} if h2 else {"http/1.1", "-"}, f"HTTP_VERSION={asked['http']}")
    only("http", {"HTTP/2.0"} if h2 else {"HTTP/1.1"}, f"HTTP_VERSION={asked['http']}")
    if asked["resumption"] == "none" and rec["resumed"]:
        raise Mismatch(f"TLS_RESUMPTION=none asked, but the server resumed {rec['resumed']} of {n} connections")
    if asked["resumption"] == "tickets" and asked["new_connections"] and n > 1 and not rec["resumed"]:
        raise Mismatch(f"TLS_RESUMPTION=tickets asked, but the server resumed none of {n} new connections (it gives no tickets: "
                       "ssl_session_tickets off, or Envoy Gateway's default)")
    fmt = lambda d: " / ".join(f"{k} ({c})" if len(d) > 1 else k for k, c in sorted(d.items()))  # noqa: E731
    return (f"server: {fmt(rec['protocols'])} {fmt(rec['ciphers'])} {fmt(rec['groups'])}, ALPN {fmt(rec['alpn'])}, "
            f"{fmt(rec['http'])}; resumed {rec['resumed']} of {n} connections, {rec['requests']} requests: as asked")


def read(url, start=None):
    """The record (from byte START on), b"" where there is none yet (404)."""
    req = urllib.request.Request(url, method="HEAD" if start is None else "GET",
                                 headers={} if not start else {"Range": f"bytes={start}-"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r if start is None else r.read()
    except urllib.error.HTTPError as e:
        if e.code in (404, 416):  # no record yet; nothing past START
            return None if start is None else b""
        raise


def main(argv):
    if not ((len(argv) == 3 and argv[1] == "size") or (len(argv) == 6 and argv[1] == "judge")):
        print("error: usage: tls_record.py size RECORD_URL | judge DIR RECORD_URL RUN FROM", file=sys.stderr)
        return 2
    url = argv[2] if argv[1] == "size" else argv[3]
    try:
        if argv[1] == "size":
            r = read(url)
            print(int(r.headers["Content-Length"]) if r else 0)
            return 0
        text = read(url, int(argv[5])).decode()
    except OSError as e:
        print(f"error: the server's TLS record {url} could not be read ({e})", file=sys.stderr)
        return 1
    d, run, asked = Path(argv[2]), argv[4], asked_of()
    rec = summarize(parse(text, run))
    try:
        line = judge(asked, rec)
    except Mismatch as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    secs = float(os.environ["IB_PASS_SECONDS"])
    doc = {"source": "the LB's TLS record of the confirmation pass before the load", "pass_seconds": secs,
           "asked": asked, "record": rec, "line": f"{line} (the LB's record of a pass of {secs:.1f} s before the load)"}
    (d / "tls.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(doc["line"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
