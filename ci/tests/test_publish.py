"""PUBLISH=1 (bench/run/publish.py): a matrix's result as a dated set of docs/results/, stamped
and listed in the index; refused before the load when the set exists or the tree is dirty."""
import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench/run")]
import publish  # noqa: E402

DAY = datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc)


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / "docs/results").mkdir(parents=True)
    (r / "docs/results/README.md").write_text("x\n")
    git(r, "init", "-q")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "c")
    return r


def test_a_set_is_checked_before_the_load(repo):
    """A new folder on a committed tree is the set's; an existing one, or a tracked file changed,
    is refused in one line."""
    assert publish.check("seeds", repo, DAY) == repo / "docs/results/2026-12-02-seeds"
    (repo / "docs/results/2026-12-02-seeds").mkdir()
    with pytest.raises(publish.Refused, match=r"^docs/results/2026-12-02-seeds exists already: a published set is never overwritten"):
        publish.check("seeds", repo, DAY)
    (repo / "docs/results/README.md").write_text("changed\n")
    with pytest.raises(publish.Refused, match=r"^the tree has uncommitted changes"):
        publish.check("other", repo, DAY)


def test_a_subsets_set_is_named_by_its_relations(repo):
    """RELATIONS given: the set is the relations', beside the whole list's set of the same day."""
    (repo / "docs/results/2026-12-02-seeds").mkdir()
    name = publish.set_name("seeds", "004 s003-nodeport-10")
    assert name == "seeds-004-s003-nodeport-10"
    assert publish.check(name, repo, DAY) == repo / "docs/results/2026-12-02-seeds-004-s003-nodeport-10"
    assert publish.set_name("seeds", None) == publish.set_name("seeds", "") == "seeds"


def test_a_set_keeps_the_tables_each_runs_summary_and_a_stamp_and_is_indexed(tmp_path):
    """The set holds the matrix's tables, page and case list and each run's summary and meta (not
    its series), matrix.json's directories made the set's own, a stamp (the day, the command
    that wrote it, the commit, the machine with its steal time, the settings) and a row at the
    top of the index."""
    mdir = tmp_path / "results/seeds-20261202T050000Z"
    runs = []
    for i, case in enumerate(("a", "b"), 1):
        d = mdir / f"{case}-r1"
        d.mkdir(parents=True)
        for f in ("summary.json", "meta.json", "k6.json.gz"):
            (d / f).write_text(json.dumps({"case": case, "file": f, "RESULTS_ROOT": str(mdir), "dir": str(d)}))
        runs.append({"case": case, "round": 1, "order": i, "dir": str(d)})
    runs.append({"case": "c", "round": 1, "order": 3, "dir": None})  # stopped before it made one
    doc = {"title": "The seeds' relations", "dir": str(mdir),
           "cases": [{"name": "a", "runs": [{"dir": str(mdir / "a-r1"), "log": str(mdir / "logs/a-r1.log")}]}], "started": "2026-12-02T05:00:00+00:00",
           "finished": "2026-12-02T05:30:00+00:00", "rounds": 1, "exit_code": 0, "runs": runs}
    (mdir / "matrix.json").write_text(json.dumps(doc))
    (mdir / "table.md").write_text(f"| table |\n\nResults: {mdir}/ (table.md)\n")
    (mdir / "cases.yaml").write_text("cases: []\n")
    (mdir / "logs").mkdir()
    index = tmp_path / "README.md"
    index.write_text("# Results\n\n| date | result set | written by | what |\n|---|---|---|---|\n| 2026-11-28 | [evidence](e/e.md) | x | y |\n")
    out = publish.publish(mdir, doc, tmp_path / "2026-12-02-seeds", ROOT / "bench/run/matrices/seeds.yaml",
                          {"RELATIONS": "004"}, publish.cpu_times(), index)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["a-r1/meta.json", "a-r1/summary.json", "b-r1/meta.json", "b-r1/summary.json",
                     "cases.yaml", "matrix.json", "stamp.json", "table.md"], files
    assert json.loads((out / "a-r1/meta.json").read_text()) == {"case": "a", "file": "meta.json", "RESULTS_ROOT": ".", "dir": "a-r1"}
    assert (out / "table.md").read_text() == "| table |\n\nResults: 2026-12-02-seeds/ (table.md)\n"
    m = json.loads((out / "matrix.json").read_text())
    assert m["dir"] == "2026-12-02-seeds" and [r["dir"] for r in m["runs"]] == ["a-r1", "b-r1", None], m
    assert m["cases"][0]["runs"] == [{"dir": "a-r1", "log": "logs/a-r1.log"}] and str(tmp_path) not in (out / "matrix.json").read_text()
    s = json.loads((out / "stamp.json").read_text())
    assert s["date"] == "2026-12-02" and s["written_by"] == "./task bench:seeds" and s["settings"] == {"RELATIONS": "004"}, s
    assert len(s["commit"]) == 40 and isinstance(s["dirty"], bool) and s["machine"]["cpus"] >= 1, s
    assert 0 <= s["machine"]["steal_percent"] <= 100, s
    assert index.read_text().splitlines()[4] == \
        "| 2026-12-02 | [seeds](2026-12-02-seeds/table.md) | `./task bench:seeds` | The seeds' relations |"


def test_a_list_without_a_task_of_its_own_names_the_generic_one():
    assert publish.command_of(ROOT / "bench/run/matrices/overhead.yaml") == "./task bench:overhead"
    assert publish.command_of(ROOT / "bench/run/matrices/claims.yaml") == \
        "./task bench:matrix MATRIX=bench/run/matrices/claims.yaml"


def test_a_set_is_the_docs_only_in_their_results_folder(tmp_path):
    """A set written under docs/results/ gets its index row (test:time, bench:repeatability);
    one written elsewhere with --out is a scratch copy and does not."""
    assert publish.in_results(ROOT / "docs/results/2026-12-05-suite-time")
    assert not publish.in_results(tmp_path / "2026-12-05-suite-time")
    assert not publish.in_results(ROOT / "docs/results/2026-12-05-suite-time/inner")
