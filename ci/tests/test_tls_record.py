"""The server's TLS record judged against what a run asks (bench/run/tls_record.py), on lines
in the LB's own format (components/nginx-lb's benchtls): which lines are the run's pass, what
a connection is, and each way a server can negotiate other than asked, in one line."""
import sys

import pytest

from conftest import ROOT, sh

sys.path.insert(0, str(ROOT / "bench/run"))
import tls_record  # noqa: E402

RUN = "20261206T095111Z-tps-nginx-lb-default"


def line(run=RUN, conn=1, reqs=1, proto="HTTP/1.1", tls="TLSv1.3", cipher="TLS_AES_128_GCM_SHA256", group="X25519", alpn="http/1.1", reused="."):
    return (f"/bench-tls-record/{run}/0kb.bin conn={conn} reqs={reqs} proto={proto} tls={tls} cipher={cipher} "
            f"group={group} alpn={alpn} reused={reused}")


def asked(version="1.3", group="x25519", resumption="none", http="1.1", new_connections=True):
    return {"version": version, "group": group, "resumption": resumption, "http": http, "new_connections": new_connections}


def record(*lines):
    return tls_record.summarize(tls_record.parse("\n".join(lines), RUN))


def test_the_record_of_a_pass_is_its_own_lines_by_connection():
    """Another run's lines, the pass's readiness request (RUN.ready) and a partial first line
    of the range are not the pass's; HTTP/2's streams share their connection's serial."""
    rec = record("tls-record/x/0kb.bin conn=9", line(run="other"), line(run=f"{RUN}.ready", alpn="-"), "",
                 line(conn=7, reqs=1, proto="HTTP/2.0", alpn="h2"), line(conn=7, reqs=2, proto="HTTP/2.0", alpn="h2"),
                 line(conn=8, proto="HTTP/2.0", alpn="h2", reused="r"))
    assert rec == {"requests": 3, "connections": 2, "protocols": {"TLSv1.3": 2}, "ciphers": {"TLS_AES_128_GCM_SHA256": 2},
                   "groups": {"X25519": 2}, "alpn": {"h2": 2}, "http": {"HTTP/2.0": 2}, "resumed": 1}


def test_as_asked_is_said_in_one_line():
    rec = record(line(conn=1), line(conn=2, reused="r"), line(conn=3, reused="r"))
    assert tls_record.judge(asked(resumption="tickets"), rec) == (
        "server: TLSv1.3 TLS_AES_128_GCM_SHA256 X25519, ALPN http/1.1, HTTP/1.1; resumed 2 of 3 connections, 3 requests: as asked")


# Each way the server can differ from what was asked, and its line.
MISMATCHES = [
    (asked(), [line(tls="TLSv1.2", cipher="ECDHE-RSA-AES256-GCM-SHA384")], "TLS_VERSION=1.3 asked, but the server negotiated TLSv1.2 on 1 of 1 connections"),
    (asked(version="1.2"), [line(tls="TLSv1.2", cipher="AES256-SHA")], "TLS 1.2 with the client's suites asked, but the server negotiated AES256-SHA on 1 of 1 connections"),
    (asked(group="p256"), [line(), line(conn=2, group="prime256v1")], "TLS_GROUP=p256 asked, but the server negotiated X25519 on 1 of 2 connections"),
    (asked(http="2"), [line()], "HTTP_VERSION=2 asked, but the server negotiated http/1.1 on 1 of 1 connections"),
    (asked(http="2"), [line(alpn="h2")], "HTTP_VERSION=2 asked, but the server negotiated HTTP/1.1 on 1 of 1 connections"),
    (asked(), [line(), line(conn=2, reused="r")], "TLS_RESUMPTION=none asked, but the server resumed 1 of 2 connections"),
    (asked(resumption="tickets"), [line(), line(conn=2)], "TLS_RESUMPTION=tickets asked, but the server resumed none of 2 new connections (it gives no tickets: "
                                                          "ssl_session_tickets off, or Envoy Gateway's default)"),
    (asked(), [], "the server recorded no TLS connection of the confirmation pass"),
]


@pytest.mark.parametrize("want,lines,said", MISMATCHES, ids=["version", "suite", "group", "alpn", "http", "resumed", "not-resumed", "empty"])
def test_what_the_server_negotiated_otherwise_is_one_line(want, lines, said):
    with pytest.raises(tls_record.Mismatch) as e:
        tls_record.judge(want, record(*lines))
    assert str(e.value) == said


def test_what_the_protocol_leaves_out_is_not_a_mismatch():
    """A resumed TLS 1.2 session has no key exchange (no group); keep-alive connections each
    handshake once at the start, so none could resume from another's ticket."""
    tls12 = dict(tls="TLSv1.2", cipher="ECDHE-RSA-AES256-GCM-SHA384")
    assert tls_record.judge(asked(version="1.2", resumption="tickets"), record(line(**tls12), line(conn=2, group="-", reused="r", **tls12))).endswith(
        "resumed 1 of 2 connections, 2 requests: as asked")
    assert tls_record.judge(asked(resumption="tickets", new_connections=False), record(line(), line(conn=2))).endswith(
        "resumed 0 of 2 connections, 2 requests: as asked")


def test_bad_usage_is_one_line():
    r = sh("python3", "bench/run/tls_record.py", "judge", "x")
    assert (r.returncode, r.stderr) == (2, "error: usage: tls_record.py mark URL | judge DIR URL RUN MARK\n")


# Envoy's statistics as its stats port serves them (a Gateway's proxy, Envoy Gateway v1.9.1):
# the HTTPS listener's, the plain listener's and Envoy's own (admin, eg-*), before and after.
ENVOY = """envoy_listener_ssl_handshake{envoy_listener_address="0.0.0.0_10443"} %(hs)d
envoy_listener_ssl_session_reused{envoy_listener_address="0.0.0.0_10443"} %(reused)d
envoy_listener_ssl_versions{envoy_ssl_version="TLSv1.3",envoy_listener_address="0.0.0.0_10443"} %(hs)d
envoy_listener_ssl_ciphers{envoy_ssl_cipher="TLS_AES_128_GCM_SHA256",envoy_listener_address="0.0.0.0_10443"} %(hs)d
envoy_listener_ssl_curves{envoy_ssl_curve="P-256",envoy_listener_address="0.0.0.0_10443"} %(hs)d
envoy_http_downstream_cx_ssl_total{envoy_http_conn_manager_prefix="https-10443"} %(hs)d
envoy_http_downstream_cx_http1_total{envoy_http_conn_manager_prefix="https-10443"} %(hs)d
envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="https-10443"} %(hs)d
envoy_http_downstream_cx_http1_total{envoy_http_conn_manager_prefix="http-10080"} %(plain)d
envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="http-10080"} %(plain)d
envoy_http_downstream_cx_http1_total{envoy_http_conn_manager_prefix="eg-stats-http"} %(plain)d
envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="admin"} %(plain)d
envoy_cluster_ssl_handshake{envoy_cluster_name="xds_cluster"} %(plain)d
"""


def test_envoys_record_is_the_change_of_its_tls_listeners_counters():
    """The pass's record from Envoy's counters: handshakes by version, cipher and curve, the
    sessions reused, the TLS connection managers' connections by HTTP version and requests;
    the plain listener's and Envoy's own (admin, stats, its xDS cluster) are not the pass's.
    Envoy counts no ALPN."""
    before = tls_record.envoy_counters(ENVOY % {"hs": 9722, "reused": 9671, "plain": 3})
    after = tls_record.envoy_counters(ENVOY % {"hs": 12275, "reused": 12219, "plain": 40})
    rec = tls_record.envoy_record(before, after)
    assert rec == {"requests": 2553, "connections": 2553, "protocols": {"TLSv1.3": 2553}, "ciphers": {"TLS_AES_128_GCM_SHA256": 2553},
                   "groups": {"P-256": 2553}, "alpn": None, "http": {"HTTP/1.1": 2553}, "resumed": 2548}
    assert tls_record.judge(asked(group="p256", resumption="tickets"), rec) == (
        "server: TLSv1.3 TLS_AES_128_GCM_SHA256 P-256, ALPN not counted, HTTP/1.1; resumed 2548 of 2553 connections, 2553 requests: as asked")
    with pytest.raises(tls_record.Mismatch) as e:
        tls_record.judge(asked(group="p256", http="2"), rec)
    assert str(e.value) == "HTTP_VERSION=2 asked, but the server negotiated HTTP/1.1 on 2553 of 2553 connections"
