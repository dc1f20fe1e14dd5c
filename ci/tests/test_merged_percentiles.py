"""A distributed run's latency as a whole: the segments' native-engine histograms merged into
the percentiles of all their requests (bench/report/summary.py), held to the exact percentiles of
every request, on real runs of clearly different latency."""
import json
import math
import sys

from conftest import K6_UNJUDGED, ROOT, sh
from test_lab_e2e import load_durations

sys.path.insert(0, str(ROOT / "bench"))
from report.summary import percentiles  # noqa: E402


def exact(d, q):
    """k6's Trend rule on sorted values: rank q*(n-1), interpolated between its neighbours."""
    rank = q * (len(d) - 1)
    lo, hi = d[math.floor(rank)], d[min(math.floor(rank) + 1, len(d) - 1)]
    return lo + (hi - lo) * (rank - math.floor(rank))


def test_merged_percentiles_are_those_of_all_requests(bench, tmp_path):
    """Two segments on the lab, open model: 1 KB at 1,500/s and 1 MB at 300/s, each writing
    every request's sample (REQUEST_SAMPLES=1, k6's CSV output). `bench/report segments` over the two: its p50, p95 and p99
    are the exact ones of all their requests within the histogram's stated error (1/256), and
    its p99 lies between the segments'. (How far apart the two segments' tails are is the
    host's: 1.35x in one run here, above 2x in others, and one segment's tail can make the
    mixture's p99; the merge's figures are exact either way.)"""
    runs = []
    for i, env in enumerate([{"PAYLOAD": "1kb", "RATE": "1500"}, {"PAYLOAD": "1mb", "RATE": "300"}]):
        samples = tmp_path / f"samples-{i}.csv"
        run = bench("rps", ENGINE="native", DURATION="3s", CONNECTIONS="20", MONITORING="0", K6_OUT=f"csv={samples}", REQUEST_SAMPLES="1",
                    **K6_UNJUDGED, **env)
        # (the load's thresholds out of reach: a 1 MB response at 300/s is sent late, or not at all,
        # when the host is slow; the merge is exact over whatever was answered)
        assert run.rc == 0, run.why
        runs.append((run, load_durations(samples)))
    seg = tmp_path / "distributed"
    seg.mkdir()
    for i, (run, _) in enumerate(runs):
        (seg / f"segment-{i}.json").write_text((run.dir / "summary.json").read_text())
    served = sum(run.result["requests"] for run, _ in runs)
    r = sh(sys.executable, "bench/report", "segments", str(seg), "--testid", "merged", "--variant", "nginx-lb-default",
           "--platform", "lab", "--stub-before", "1 100", "--stub-after", f"3 {100 + served + 1}")
    assert r.returncode == 0, r.stderr
    s = json.loads((seg / "summary.json").read_text())
    every = sorted(v for _, d in runs for v in d)
    assert s["latency"]["merged"] and s["latency"]["relative_error"] == 1 / 256
    for q in (0.5, 0.95, 0.99):
        want = exact(every, q)
        # exact: the histogram's stated error, 1/256
        assert abs(s[f"p{round(q * 100)}_ms"] - want) <= want / 256 + 1e-9, (q, s[f"p{round(q * 100)}_ms"], want)
    # A mixture's p99 lies between its parts' (each within its histogram's 1/256). Whether it is
    # near one of them is the host's (one segment's tail can dominate the mixture's): the
    # exact figures of all requests above are what proves the merge.
    each = [exact(d, 0.99) for _, d in runs]
    # exact: the histogram's stated error, 1/256
    assert min(each) * (1 - 1 / 256) <= s["p99_ms"] <= max(each) * (1 + 1 / 256), (s["p99_ms"], each)
    assert [p["p99_ms"] for p in s["per_segment"]] == [run.result["p99_ms"] for run, _ in runs]
    # Latency thresholds judged once, on the merged values; every other one as each segment did.
    merged = [t for t in s["thresholds"] if t.get("merged")]
    assert {t["metric"] for t in merged} == {"bench_http_req_duration_p95", "bench_http_req_duration_p99"}, s["thresholds"]
    assert s["passed"] and "latency       all segments: p50" in r.stdout, r.stdout
    print(f"\nmerged p50/p95/p99 {s['p50_ms']:.3f}/{s['p95_ms']:.3f}/{s['p99_ms']:.3f} ms; exact p99 {exact(every, 0.99):.3f}; "
          f"segments' p99 {each[0]:.3f} and {each[1]:.3f} ms")


def test_percentiles_merge_by_bucket():
    """The merge itself, on two tiny histograms: counts of equal bucket values add up."""
    a = {"relative_error": 1 / 256, "buckets": [[1.0, 3], [2.0, 1]]}
    b = {"relative_error": 1 / 256, "buckets": [[2.0, 1], [10.0, 1]]}
    # All six values: 1 1 1 2 2 10. p50: rank 2.5, between 1 and 2.
    assert percentiles([a, b], (0.5, 1.0)) == {"p50_ms": 1.5, "p100_ms": 10.0}
    assert percentiles([{"buckets": []}]) is None
