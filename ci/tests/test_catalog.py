"""The overlay catalog (overlays/catalog.yaml): the one place that says what each overlay and knob
set is and which seed measurement it reproduces. It lists exactly the overlays and tuning
components on disk, its references resolve, the seeds matrix's cases run overlays that
reproduce their seed, and an old (seed-named) variant is read as its new name by bash and by
the report alike, in a real run's environment and in a saved run."""
import json
import re
import shutil
import sys

import pytest
import yaml

from conftest import ROOT, sh

CATALOG = yaml.safe_load((ROOT / "overlays/catalog.yaml").read_text())
OVERLAYS = {o["name"]: o for o in CATALOG["overlays"]}
KNOBS = {k["name"]: k for k in CATALOG["knobs"]}
FORMERLY = {e["formerly"]: e["name"] for e in CATALOG["overlays"] + CATALOG["knobs"] if e.get("formerly")}


def test_it_lists_exactly_the_overlays_and_knob_sets_on_disk():
    on_disk = {p.name for p in (ROOT / "overlays").iterdir() if (p / "kustomization.yaml").is_file()}
    assert set(OVERLAYS) == on_disk
    knobs = {p.name.removeprefix("tuning-") for p in (ROOT / "kustomize/components").glob("tuning-*")}
    assert set(KNOBS) == knobs
    assert len(OVERLAYS) == len(CATALOG["overlays"]) and len(KNOBS) == len(CATALOG["knobs"])  # no name twice


def test_every_reference_resolves_and_no_old_name_is_a_name_now():
    for o in OVERLAYS.values():
        assert set(o) <= {"name", "seeds", "shows", "runs", "tunes", "cpus", "of", "ecdsa", "http2", "formerly"}, o["name"]
        assert all(o[k] in OVERLAYS and o[k] != o["name"] for k in ("ecdsa", "http2") if k in o), o["name"]
        assert all(re.fullmatch(r"\d{3}|—", s) for s in o["seeds"]), o["name"]
        assert o.get("tunes", o["name"]) in OVERLAYS and o.get("tunes") != o["name"]
        assert ("cpus" in o) == ("of" in o) and o.get("of", o["name"]) in OVERLAYS
    assert len(FORMERLY) == len({e.get("formerly") for e in CATALOG["overlays"] + CATALOG["knobs"]} - {None})
    assert not set(FORMERLY) & (set(OVERLAYS) | set(KNOBS))
    # One entry a line, as bash's variant_now reads it with sed.
    lines = [ln for ln in (ROOT / "overlays/catalog.yaml").read_text().splitlines() if ln.startswith("  - {name: ")]
    assert len(lines) == len(OVERLAYS) + len(KNOBS)


def test_the_seeds_matrix_runs_overlays_that_reproduce_its_seeds():
    m = yaml.safe_load((ROOT / "bench/run/matrices/seeds.yaml").read_text())
    for c in m["cases"]:
        seed = re.match(r"s(\d{3})-", c["name"]).group(1)
        assert seed in OVERLAYS[c["variant"]]["seeds"], (c["name"], c["variant"])


def without_generated_tables(text):
    return re.sub(r"<!-- (overlays|knobs):begin .*?<!-- \1:end -->", "", text, flags=re.S)


def test_no_file_outside_the_catalog_says_an_old_name():
    """The renaming is whole: only the catalog, the variants tables generated from it and this
    test keep the old names."""
    files = sh("git", "ls-files").stdout.split()
    said = [f for f in files if f not in ("overlays/catalog.yaml", "ci/tests/test_catalog.py") and (ROOT / f).is_file()
            and any(re.search(rf"(?<![a-z0-9]){re.escape(old)}(?![a-z0-9-])", without_generated_tables((ROOT / f).read_text(errors="replace")))
                    for old in FORMERLY if old.count("-") > 1)]
    assert said == []


def bash_now(value):
    r = sh("bash", "-c", ". bench/lib.sh && echo \"$VARIANT $BASE\"", env={"VARIANT": value, "BASE": value})
    return r


@pytest.mark.parametrize("old", sorted(FORMERLY))
def test_an_old_name_is_read_as_its_new_one_by_bash_and_the_report(old):
    sys.path.insert(0, str(ROOT / "bench"))
    from report.run import variant_now
    r = bash_now(old)
    assert r.returncode == 0 and r.stdout.split() == [FORMERLY[old]] * 2
    assert f"note: VARIANT={old} is now called {FORMERLY[old]} (overlays/catalog.yaml)" in r.stderr
    assert variant_now(old) == FORMERLY[old]


def test_names_that_are_not_old_pass_unchanged_and_knob_lists_map_each_knob():
    sys.path.insert(0, str(ROOT / "bench"))
    from report.run import variant_now
    for value, now in [("seed004-keepalive+access-log-off", "keepalive+access-log-off"), ("nginx-lb-full", "nginx-lb-full"),
                       ("seed-unknown", "seed-unknown"), ("seed/../x", "seed/../x")]:
        r = bash_now(value)
        assert r.returncode == 0 and r.stdout.split() == [now] * 2, value
        assert variant_now(value) == now
        assert ("note:" in r.stderr) == (now != value)


def test_a_saved_run_under_its_old_name_pairs_with_the_new_one(tmp_path):
    """A result directory saved before the renaming (meta.json variant seed002-nginx-lb-default)
    and one saved after (nginx-lb-full): the index's default-vs-tuned table pairs them."""
    fixtures = ROOT / "ci/tests/fixtures/report/compare"
    for src, variant in (("local-nginx-lb-default-1", "seed002-nginx-lb-default"), ("local-nginx-lb-full-1", "nginx-lb-full")):
        d = tmp_path / "results" / src
        shutil.copytree(fixtures / src, d)
        meta = json.loads((d / "meta.json").read_text())
        meta["variant"] = variant
        (d / "meta.json").write_text(json.dumps(meta))
    r = sh(sys.executable, str(ROOT / "bench/report"), "index", *sorted((tmp_path / "results").iterdir()))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "results/report.md").read_text()
    assert "| nginx-lb-default: 4,818 req/s | nginx-lb-full: 11,125 req/s | 2.31× |" in md
    assert "seed002" not in md
