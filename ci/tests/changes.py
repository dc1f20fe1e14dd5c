"""What the bench:change tests share (test_change.py, test_change_lab.py, test_gateway.py): the
change run as a user types it, and the checks of its timeline and of the server's count."""
import json

from conftest import task


def bench_change(tmp_path, kind, settings):
    """./task bench:change CHANGE=KIND with SETTINGS: (the result, its change.json, the run's directory)."""
    results = tmp_path / "results"
    r = task("bench:change", f"CHANGE={kind}", f"RESULTS_ROOT={results}", *(f"{k}={v}" for k, v in settings.items()), timeout=900)
    runs = sorted(results.glob(f"change-{kind}-*/change"))
    assert len(runs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    return r, json.loads((runs[0] / "change.json").read_text()), runs[0]


def covered(doc, run, duration_s):
    """The timeline reaches the load's end (within 2 s: k6 may end the scenario before the
    engine counts its sends never made) and not past the engine's 1 s drain after it
    (xk6/pacing.go drainFor), and each mark of the change is inside it; but the end of a
    change slower than the load, past it by what the analysis and the verdict say."""
    tl = json.loads((run / "timeline.json").read_text())
    last = max(s["i"] for s in tl["slots"])
    assert duration_s * 10 - 20 <= last <= duration_s * 10 + 10, last
    a, run_end = doc["analysis"], (last + 1) * tl["slot_ms"]
    assert tl["origin_ms"] == a["origin_ms"]
    for name, ms in a["marks_ms"].items():
        if name == "end" and "outlasted_ms" in a:
            assert ms == run_end + a["outlasted_ms"] and f"the change ended {a['outlasted_ms'] / 1000:.1f} s after the load" in doc["verdict"], (ms, a)
        else:
            assert 0 < ms <= run_end, (name, ms)


def agrees(doc):
    """The client's responses and status errors are the ingress's access log's, within 1 %."""
    s = doc["server"]
    assert s["counted"], s
    assert abs(s["responses"] - s["client_responses"]) <= 0.01 * s["responses"], s
    assert abs(s["status_errors"] - s["client_status_errors"]) <= max(1, 0.01 * s["status_errors"]), s
    assert s["agree"], s
