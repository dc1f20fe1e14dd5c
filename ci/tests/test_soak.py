"""bench:soak (an hour of load: drift or none): the slope and its HAC error by hand, the drift
verdict on constructed windows (against the control, and on the subject alone), its bad input,
and a one-minute soak on the bare-metal lab whose slopes are the windows' own."""
import json
import math
import statistics
import sys

import pytest

from conftest import K6_UNJUDGED, ROOT, lab_leftovers, sh, task

sys.path.insert(0, str(ROOT / "bench"))
from report.soak import FIGURES, analyse, slope  # noqa: E402


def test_a_slope_and_its_hac_error_by_hand():
    """t 0..4, y 1 3 2 5 4: the slope 0.8 (sum (t - 2)(y - 3) = 8 over sum (t - 2)^2 = 10); the
    residuals -0.4 0.8 -1 1.2 -0.6, their scores (t - 2) e 0.8 -0.8 0 1.2 -1.2; the lag
    floor(4 * (5/100)^(2/9)) = 2; the long-run variance 4.16 + 2 (2/3)(-2.08) + 2 (1/3)(-0.96)
    = 0.74667; the error its root over 10."""
    s = slope([0, 1, 2, 3, 4], [1, 3, 2, 5, 4])
    # exact: the arithmetic above, to the float's last digits
    assert s["slope"] == pytest.approx(0.8) and s["lag"] == 2 and s["n"] == 5 and s["mean"] == pytest.approx(3.0)
    assert s["se"] == pytest.approx(math.sqrt(4.16 - 4 / 3 * 2.08 - 2 / 3 * 0.96) / 10)
    assert slope([0, 1], [1, 2]) is None  # two points: no interval


def windows(subject, control, n=30):
    """N windows a side over an hour, alternating, each figure f(t) of the hour's share t, with
    a small alternating wobble (a series that is not a line)."""
    out = []
    for i in range(2 * n):
        side, t = ("subject", subject) if i % 2 == 0 else ("control", control)
        th = i / (2 * n)
        out.append({"side": side, "t_h": th, "figures": {k: f(th) * (1 + (0.002 if i % 4 < 2 else -0.002)) for k, f in t.items()}})
    return out


def test_a_drift_is_named_and_a_flat_soak_is_none():
    """Memory growing 20 %/h on the subject (size 5) is a drift; flat figures are none; CPU per
    request rising 15 %/h on both sides is the host's, none against the control; on the
    subject alone it is a drift."""
    flat = {k: (lambda t: 100.0) for k in FIGURES}
    a = analyse(windows(flat, flat))
    assert a["drifts"] == [] and a["verdict"].startswith("no drift"), a["verdict"]
    leak = dict(flat, ingress_rss_mib=lambda t: 100.0 * (1 + 0.2 * t))
    a = analyse(windows(leak, flat))
    assert a["drifts"] == ["ingress_rss_mib"] and "ingress memory, RSS +" in a["verdict"], a["verdict"]
    # the working set is shown, never judged; and 9 windows a side are too few for a verdict
    assert analyse(windows(dict(flat, ingress_working_set_mib=lambda t: 100.0 * (1 + t)), flat))["drifts"] == []
    a = analyse(windows(leak, flat, n=9))
    assert a["drifts"] == [] and a["figures"]["ingress_rss_mib"]["verdict"] == "undecided", a["figures"]["ingress_rss_mib"]
    host = dict(flat, ingress_us_per_request=lambda t: 10.0 * (1 + 0.15 * t))
    a = analyse(windows(host, host))
    assert a["drifts"] == [] and a["figures"]["ingress_us_per_request"]["verdict"] == "none", a["figures"]["ingress_us_per_request"]
    a = analyse(windows(host, flat))
    assert a["drifts"] == ["ingress_us_per_request"], a["verdict"]


@pytest.mark.parametrize("args, message", [
    (["SOAK_WINDOW=5s"], "a window is 10 s or more and the soak 6 windows or more"),
    (["DURATION=1m", "SOAK_WINDOW=20s"], "DURATION 1m and SOAK_WINDOW 20s"),
    (["PLATFORM=external"], "bench:soak runs on the local cluster or the lab (PLATFORM=local|lab), got PLATFORM=external"),
    (["TARGET=http://198.18.0.2/"], "bench:soak runs on what it deploys"),
    (["SCENARIO=tps"], "bench:soak runs the rps scenario"),
    (["LOAD_SHARE=0"], "LOAD_SHARE must be"),
])
def test_bad_input_is_one_line_before_anything_starts(args, message, tmp_path, lab_down):
    results, cluster = tmp_path / "results", tmp_path / "cluster"
    r = task("bench:soak", f"RESULTS_ROOT={results}", *args, env={"IB_CLUSTER_STATE": str(cluster)})
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1 and message in errors[0], r.stderr[-2000:]
    assert not results.exists() and not cluster.exists() and lab_leftovers() == []


@pytest.mark.e2e
def test_a_soak_on_the_lab(tmp_path):
    """A minute in windows of 10 s on the lab's LB (the subject alone: no other ingress to
    alternate with): every window has every figure, each slope is the windows' own least
    squares (statistics.linear_regression over the recorded figures), and with fewer windows
    than a verdict needs none is judged: exit 0."""
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    results = tmp_path / "results"
    try:
        r = task("bench:soak", f"RESULTS_ROOT={results}", "PLATFORM=lab", "DURATION=1m", "SOAK_WINDOW=10s", "RATE=2000",
                 *(f"{k}={v}" for k, v in K6_UNJUDGED.items()), timeout=600)
        docs = sorted(results.glob("soak-*/soak.json"))
        assert len(docs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
        doc = json.loads(docs[0].read_text())
        assert r.returncode == 0 and doc["analysis"]["drifts"] == [], r.stderr[-2000:]
        ws = doc["windows"]
        # exact: DURATION / SOAK_WINDOW windows, whatever each one's start took
        assert len(ws) == 6 and {w["side"] for w in ws} == {"subject"} and doc["control_windows"] == 0, [w["side"] for w in ws]
        for w in ws:
            assert None not in w["figures"].values() and w["requests"] > 0, w
        for key, f in doc["analysis"]["figures"].items():
            fit = statistics.linear_regression([w["t_h"] for w in ws], [w["figures"][key] for w in ws])
            assert f["subject"]["slope"] == pytest.approx(fit.slope, rel=1e-9, abs=1e-9), key
            # exact: 1 minute of 10 s windows is fewer than MIN_WINDOWS: no figure judged
            assert f["verdict"] in ("undecided", "shown") and f["control"] is None, (key, f)
        assert f"**Verdict: {doc['analysis']['verdict']}.**" in r.stdout
    finally:
        assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
        assert lab_leftovers() == []
