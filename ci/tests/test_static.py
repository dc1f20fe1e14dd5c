"""Static checks: scenarios load in k6, every knob set renders to a config nginx accepts."""

import pytest

import bounds
import lint_asserts
from conftest import ROOT, registry, sh

SCENARIOS = next(s["values"] for s in registry() if s["name"] == "SCENARIO")
KNOBS = sorted(p.name[len("tuning-"):] for p in (ROOT / "kustomize/components").glob("tuning-*"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_k6_inspect(scenario):
    r = sh("k6", "inspect", "--execution-requirements", f"k6/{scenario}.js")
    assert r.returncode == 0, r.stderr
    assert f'"{scenario}"' in r.stdout


def test_knob_sets_exist():
    assert {"full", "keepalive"} <= set(KNOBS)


@pytest.mark.parametrize("variant", ["default"] + KNOBS + ["keepalive+access-log-off"])
def test_variant_renders_to_valid_nginx_config(variant, tmp_path):
    """Every variant's LB config passes `nginx -t` with the real nginx."""
    files = sh("bash", "-c", f'. bench/lib.sh && variant_knob_files "{variant}"').stdout.split()
    lb = ROOT / "kustomize/components/nginx-lb"
    conf = sh("sh", str(lb / "render.sh"), str(lb / "nginx.conf.tmpl"), *files)
    assert conf.returncode == 0, conf.stderr
    assert not [l for l in conf.stdout.splitlines() if "${" in l and not l.lstrip().startswith("#")]
    (tmp_path / "nginx.conf").write_text(conf.stdout)
    (tmp_path / "upstreams.conf").write_text("server 198.18.0.11:80;\n")
    (tmp_path / "tls").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "tmp").mkdir()
    made = sh("bash", "-c", f'. bench/lib.sh && make_certs "{tmp_path}/tls" t')
    assert made.returncode == 0 and len(list((tmp_path / "tls").iterdir())) == 4, made.stderr
    t = sh("nginx", "-t", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "logs/e.log"))
    assert t.returncode == 0, t.stderr
    # A warning is a config nginx reads otherwise than written (a second server on one
    # listen is ignored: "conflicting server name"); only the open-file limit, the test
    # process's own rlimit, may differ from the pod's.
    assert not [l for l in t.stderr.splitlines() if "[warn]" in l and "open file resource limit" not in l], t.stderr


def test_knob_overrides_apply_in_order():
    lb = ROOT / "kustomize/components/nginx-lb"
    knobs = ROOT / "kustomize/components"
    out = sh("sh", str(lb / "render.sh"), str(lb / "nginx.conf.tmpl"), str(lb / "defaults.env"),
             str(knobs / "tuning-full/nginx.env"), str(knobs / "tuning-workers-1/nginx.env")).stdout
    assert "worker_processes 1;" in out
    assert "worker_connections 100000;" in out
    assert "keepalive_timeout 315;" in out
    assert "keepalive 200;" in out
    default = sh("sh", str(lb / "render.sh"), str(lb / "nginx.conf.tmpl"), str(lb / "defaults.env")).stdout
    assert "worker_rlimit_nofile" not in default  # empty knob: directive left out
    assert "        keepalive " not in default


def test_render_refuses_an_undefined_knob(tmp_path):
    (tmp_path / "t.tmpl").write_text("worker_processes ${WORKERZ};\n")
    r = sh("sh", "kustomize/components/nginx-lb/render.sh", str(tmp_path / "t.tmpl"),
           "kustomize/components/nginx-lb/defaults.env")
    assert r.returncode != 0
    assert "knob WORKERZ is not defined" in r.stderr


def test_every_bound_on_a_measured_figure_names_its_source():
    """ci/tests/bounds.py over the suite: an assertion holding a rate, a latency, a CV or a
    duration to a number says where the number comes from (# noise: a documented spread, or
    # exact: arithmetic the test controls)."""
    problems = [p for f in sorted((ROOT / "ci/tests").glob("*.py")) for p in bounds.unnamed(f)]
    assert problems == []


def test_the_bounds_lint_catches_a_bare_bound_and_an_unsourced_one(tmp_path):
    f = tmp_path / "test_x.py"
    f.write_text("def test_a(r):\n"
                 "    assert r['rps'] > 9000\n"
                 "    # noise: an hour I liked\n"
                 "    assert r['p99_ms'] < 50\n"
                 "    # noise: identical runs vary up to 20 % (the README)\n"
                 "    assert r['cv_percent'] < 40\n"
                 "    assert r['requests'] == 1200\n"
                 "    # noise: the evidence's spread (docs/results/2026-11-28-evidence/evidence.md)\n"
                 "    assert r['p50_ms'] < 9\n")
    got = bounds.unnamed(f)
    # a figure the README states is no source: only a dated result file is
    assert [g.split(":")[1] for g in got] == ["2", "4", "6"], got
    assert "no '# noise:' or '# exact:'" in got[0] and "must name its documented figure" in got[1] \
        and "must name its documented figure" in got[2], got


def test_no_assertion_accepts_every_outcome():
    """ci/tests/lint_asserts.py over the suite: no exit code from {0, 99}, no set of every
    verdict word, no interval against its own estimate, no all() over a list never said
    non-empty."""
    assert [p for f in sorted((ROOT / "ci/tests").glob("test_*.py")) for p in lint_asserts.findings(f)] == []


def test_the_assertion_lint_finds_each_pattern_and_passes_its_counterpart(tmp_path):
    """ci/tests/lint_asserts.py on a constructed module: each pattern once (an exit code from
    {0, 99}, every word of a relation's verdict, an interval against its own estimate, bare
    or unpacked, all() over a list never said non-empty or said empty), beside the assertions
    that say one thing (one exit code, one word, an interval against a bound, a guarded all())
    and a waived one; an exit code from {0, 99} is found even when waived."""
    f = tmp_path / "test_x.py"
    f.write_text("def test_a(r, doc, iv, xs, ys, f):\n"
                 "    assert r.returncode in (0, 99)\n"
                 "    assert doc['holds'] in ('yes', 'no', 'undecided', 'not here')\n"
                 "    assert iv['low'] <= iv['ratio'] <= iv['high']\n"
                 "    low, ratio, high = f(doc)\n"
                 "    assert low <= ratio <= high\n"
                 "    assert all(x > 0 for x in f(xs))\n"
                 "    assert r.returncode == 0 and doc['holds'] == 'yes'\n"
                 "    assert doc['holds'] in ('yes', 'not here')\n"
                 "    assert iv['low'] <= 1.2 <= iv['high']\n"
                 "    assert xs and all(x > 0 for x in xs)\n"
                 "    assert all(x > 0 for x in (1, 2))\n"
                 "    # lint: a waived case says why\n"
                 "    assert doc['holds'] in ('yes', 'no', 'undecided', 'not here')\n"
                 "    # lint: never waived\n"
                 "    assert r.returncode in (0, 99)\n"
                 "    assert ys == []\n"
                 "    assert all(y > 0 for y in ys)\n")
    got = lint_asserts.findings(f)
    assert [g.split(": ")[0].split(":")[1] + " " + g.split(": ")[1] for g in got] == [
        "2 exit-any", "3 every-word", "4 own-interval", "6 own-interval", "7 empty-all", "16 exit-any", "18 empty-all"], got

