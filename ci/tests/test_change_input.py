"""bench:change's bad input (issue 17): one line and exit 1 before anything is deployed. A
module of its own: no cluster is up while it runs (test_change.py's is down by then)."""
from pathlib import Path

import pytest

from conftest import KUBECONFIG, task


@pytest.mark.parametrize("args, message", [
    (["CHANGE=explode"], "unknown CHANGE 'explode' (known: none, reload, scale, kill-backend, rollout, kill-ingress)"),
    ([], "CHANGE is not set: ./task bench:change CHANGE=<none|reload|scale|kill-backend|rollout|kill-ingress>"),
    (["CHANGE=scale"], "CHANGE=scale needs more than one backend pod (N -> 1 -> N): overlay seed002-nginx-lb-default has 1"),
    (["CHANGE=reload", "RELOAD_TO=seed003-nodeport-direct"], "RELOAD_TO=seed003-nodeport-direct has no nginx-lb configuration"),
    (["CHANGE=scale", "RELOAD_TO=seed002-nginx-lb-tuned"], "RELOAD_TO is CHANGE=reload's: unset it for CHANGE=scale"),
    (["CHANGE=kill-ingress", "VARIANT=seed003-nodeport-direct"], "CHANGE=kill-ingress needs an nginx-lb ingress"),
    (["CHANGE=reload", "CHANGE_AT=25s"], "the load needs 3 s or more before the change"),
    (["CHANGE=reload", "LOAD_SHARE=150"], "LOAD_SHARE must be"),
    (["CHANGE=reload", "PLATFORM=lab"], "bench:change runs on the local cluster (PLATFORM=local), got PLATFORM=lab"),
])
def test_bad_input_is_one_line_before_anything_starts(args, message, tmp_path):
    """Each mistake: one error line, exit 1, no results directory and no cluster brought up."""
    results = tmp_path / "results"
    r = task("bench:change", f"RESULTS_ROOT={results}", *args)
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1 and message in errors[0], r.stderr[-2000:]
    assert not results.exists() and not Path(KUBECONFIG).exists()
