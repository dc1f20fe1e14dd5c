"""bench:tls (bench/run/tls.py, bench/report/tls.py): its bad input refused before anything
starts, and its rows' arithmetic on recorded runs: the mean and its interval over the rounds,
the ratio to the reference paired by round, a round where the client was the limit making
the cell NOT VALID, a cell the server refused said as that."""
import json
import sys

import pytest

from conftest import ROOT, task

sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench/run")]
import tls  # noqa: E402
from report.stats import mean_interval, paired_ratio_interval  # noqa: E402
from report.tls import page  # noqa: E402


@pytest.mark.parametrize("given,said", [
    ({"TLS_VERSION": "1.3"}, "error: TLS_VERSION is bench:tls's to set, one value per cell: leave it out"),
    ({"VARIANT": "nginx-lb-full"}, "error: VARIANT nginx-lb-full has no ECDSA twin in overlays/catalog.yaml (an overlay with `ecdsa: NAME`): "
                                   "bench:tls runs on nginx-lb-default, envoy-gateway-default, envoy-gateway-tickets"),
    ({"STREAMS": "0"}, "error: STREAMS must be at least 1, got 0"),
], ids=["version", "no-twin", "streams"])
def test_bad_input_is_one_line_before_anything_starts(given, said, tmp_path):
    r = task("bench:tls", env={"PLATFORM": "lab", "RESULTS_ROOT": str(tmp_path / "r"), **given})
    assert (r.returncode, r.stderr.strip().splitlines()[-1:]) == (1, [said]), r.stderr
    assert not (tmp_path / "r").exists()


def recorded(tmp_path, name, rounds):
    """A case's runs as the matrix records them: ROUNDS is [(round, per-CPU value, valid), ...],
    None for a run the server refused; each finished run's summary.json in its directory."""
    runs = []
    for i, spec in enumerate(rounds):
        if spec is None:
            runs.append({"round": i + 1, "status": "failed", "values": {}, "dir": None,
                         "reason": "TLS_RESUMPTION=tickets asked, but the server resumed none of 9 new connections"})
            continue
        rnd, value, valid = spec
        d = tmp_path / f"{name}-{rnd}"
        d.mkdir()
        rec = {"protocols": {"TLSv1.3": 10}, "ciphers": {"TLS_AES_128_GCM_SHA256": 10}, "groups": {"X25519": 10}, "alpn": {"http/1.1": 10},
               "http": {"HTTP/1.1": 10}, "resumed": 9, "connections": 10, "requests": 10}
        (d / "summary.json").write_text(json.dumps({
            "verdict": {"limit": "ingress-cpu-bound" if valid else "loadgen-cpu-bound", "valid": valid,
                        "text": "" if valid else "load-generator-bound: the load generator (k6) ran out of CPU"},
            "client": {"utilization": 0.5 if valid else 0.97}, "server": {"tls": {"record": rec}}}))
        runs.append({"round": rnd, "status": "passed", "values": {"per_cpu": value, "rps": value / 2}, "dir": str(d)})
    return {"name": name, "runs": runs}


def test_a_cells_row_is_its_rounds_arithmetic(tmp_path):
    ref = [1000.0, 1100.0, 900.0]
    cell = [2500.0, 2600.0, 2400.0]
    mdoc = {"cases": [recorded(tmp_path, "tls12-rsa-none", [(i + 1, v, True) for i, v in enumerate(ref)]),
                      recorded(tmp_path, "tls13-ecdsa-none", [(1, cell[0], True), (2, cell[1], False), (3, cell[2], True)]),
                      recorded(tmp_path, "tls13-rsa-tickets", [None, None, None])]}
    base = tls.figures(mdoc, "tls12-rsa-none")
    row = tls.figures(mdoc, "tls13-ecdsa-none", base["by_round"])
    assert (row["interval"], row["rate_interval"], row["vs_reference"]) == (
        mean_interval(cell), mean_interval([v / 2 for v in cell]), paired_ratio_interval(cell, ref))
    assert (row["valid"], row["not_valid_because"], row["limit"]) == (
        False, "load-generator-bound: the load generator (k6) ran out of CPU", "ingress-cpu-bound (2 of 3)")
    assert (row["client_cpu"], row["server"]["resumed"], row["server"]["connections"]) == (0.97, 27, 30)
    refused = tls.figures(mdoc, "tls13-rsa-tickets", base["by_round"])
    assert (refused["rounds"], refused["refused"]) == (0, "TLS_RESUMPTION=tickets asked, but the server resumed none of 9 new connections")
    # The page says each: the reference, the NOT VALID cell, the refusal.
    rows = [dict(base, cell=("1.2", "rsa", "none")), dict(row, cell=("1.3", "ecdsa", "none")), dict(refused, cell=("1.3", "rsa", "tickets"))]
    text = page({"variant": "nginx-lb-default", "ecdsa_variant": "nginx-lb-ecdsa", "http2_variant": "nginx-lb-http2", "platform": "lab",
                 "rounds": 3, "duration": "10s", "streams": 8, "connections": "50", "handshakes": rows, "http": []})
    lines = {l.split(" | ")[0] + " | " + l.split(" | ")[1] + " | " + l.split(" | ")[2]: l for l in text.splitlines() if l.startswith("| 1.")}
    assert "| reference | 500 (376 … 624) | ingress-cpu-bound (3 of 3) | 50% | yes |" in lines["| 1.2 | RSA | none"]
    iv = paired_ratio_interval(cell, ref)
    assert f"| {iv['ratio']:.2f}× ({iv['low']:.2f} … {iv['high']:.2f}) |" in lines["| 1.3 | ECDSA | none"]
    assert "| NOT VALID: load-generator-bound: the load generator (k6) ran out of CPU |" in lines["| 1.3 | ECDSA | none"]
    assert lines["| 1.3 | RSA | tickets"] == ("| 1.3 | RSA | tickets | refused by the server: TLS_RESUMPTION=tickets asked, but the server "
                                              "resumed none of 9 new connections | | | | | | |")
