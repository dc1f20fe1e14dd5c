"""The documentation check (ci/checks/docs.py) on a planted copy of what it reads: the Taskfiles,
the settings registry and its validator (k6/lib/settings.js), and a small README and docs tree
written here. The clean copy passes; each planted defect fails the check with exactly one
finding that names it. No lab, no cluster: the fast tier."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable  # the venv's: PyYAML, which the check reads the Taskfiles and the registry with

README = """\
# planted

Start with [the guide](docs/guide.md#a-heading).

More in [the docs](docs/).
"""
# Line numbers matter: the planted defects' findings name them (8: the command, 14 and 15: prose).
GUIDE = """\
# The guide

## A heading

Run a load, then read [the settings](#settings-and-duration):

```sh
./task bench:rps DURATION=30s
```

## Settings and `DURATION`

`./task --list` names every task; `DURATION=2m` is a longer load.
This guide was written after the lab's first load.
The steady window starts 8 s in.
"""
DROPPED_KIND = "kill-node"  # the change kind a planted bench:change desc leaves out


def dump(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=10**6, allow_unicode=True))


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}: the plant would change nothing"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def tree(tmp_path):
    """A copy of what the check reads, whose docs resolve: the Taskfiles and the registry as
    data (without what cites the real docs, which the copy has not: comments, the tasks' descs,
    the settings' meanings), the validator as it is, and README.md and docs/guide.md above.
    bench:change's one desc names every CHANGE kind the registry has."""
    registry = yaml.safe_load((ROOT / "bench/settings/settings.yaml").read_text())
    for entry in registry["settings"] + registry["environment"]:
        entry.pop("meaning", None)
        entry.pop("defaultText", None)
    dump(tmp_path / "bench/settings/settings.yaml", registry)
    kinds = next(s["values"] for s in registry["settings"] if s["name"] == "CHANGE")
    for taskfile in [ROOT / "Taskfile.yml", *(ROOT / "taskfiles").glob("*.yml")]:
        data = yaml.safe_load(taskfile.read_text())
        for task in data["tasks"].values():
            task.pop("desc", None)
        if taskfile.name == "bench.yml":
            data["tasks"]["change"]["desc"] = f"Change under load: CHANGE={'|'.join(kinds)} during a steady load"
        dump(tmp_path / taskfile.relative_to(ROOT), data)
    (tmp_path / "k6/lib").mkdir(parents=True)
    for name in ("settings.js", "registry.js"):
        shutil.copy(ROOT / "k6/lib" / name, tmp_path / "k6/lib" / name)
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/guide.md").write_text(GUIDE)
    return tmp_path


def check(root, env=None):
    return subprocess.run([PYTHON, str(ROOT / "ci/checks/docs.py"), "--root", str(root)],
                          capture_output=True, text=True, env=env, timeout=60)


def desc_line(tree):
    """The line of bench:change's desc in the planted taskfiles/bench.yml."""
    lines = (tree / "taskfiles/bench.yml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "Change under load: CHANGE=" in line)


def test_a_tree_whose_docs_resolve_passes_with_one_summary_line(tree):
    r = check(tree)
    assert (r.returncode, r.stdout, r.stderr) == (
        0, "docs: 2 Markdown and 7 source files: every task, setting, link and anchor resolves\n", "")


PLANTED = {
    "a stale task name": (
        lambda t: edit(t / "docs/guide.md", "./task bench:rps", "./task bench:rsp"),
        "docs: docs/guide.md:8: unknown task 'bench:rsp' (did you mean bench:rps?)"),
    "an unknown setting": (
        lambda t: edit(t / "docs/guide.md", "DURATION=30s", "DURATON=30s"),
        "docs: docs/guide.md:8: unknown setting 'DURATON' (did you mean DURATION?)"),
    "a value the registry refuses": (
        lambda t: edit(t / "docs/guide.md", "DURATION=30s", "DURATION=fast"),
        "docs: docs/guide.md:8: DURATION must look like 30s, 3m or 1m30s, got 'fast'"),
    "a broken link": (
        lambda t: edit(t / "README.md", "[the docs](docs/)", "[x](docs/nope.md)"),
        "docs: README.md:5: broken link 'docs/nope.md': no such file"),
    "a broken anchor": (
        lambda t: edit(t / "README.md", "docs/guide.md#a-heading", "docs/guide.md#no-such-heading"),
        "docs: README.md:3: broken link 'docs/guide.md#no-such-heading': no heading 'no-such-heading' in docs/guide.md"),
    "a README of 251 lines": (
        lambda t: (t / "README.md").write_text(README + "A line.\n" * (251 - len(README.splitlines()))),
        "docs: README.md:251: 251 lines, at most 250: move the rest into docs/"),
    "a commit hash in prose": (
        lambda t: edit(t / "docs/guide.md", "written after the lab's first load", "written before 6bbb761"),
        "docs: docs/guide.md:14: a commit hash '6bbb761': say what it stands for instead"),
    "an issue number in prose": (
        lambda t: edit(t / "docs/guide.md", "The steady window", "issue 28's window"),
        "docs: docs/guide.md:15: an issue number 'issue 28': say what it stands for instead"),
    "a source file citing a missing doc": (
        lambda t: (t / "k6/lib/window.js").write_text("// The steady window: docs/concepts/missing.md#the-steady-window\n"),
        "docs: k6/lib/window.js:1: broken doc path 'docs/concepts/missing.md#the-steady-window': no such file"),
    "a result set the index does not list": (
        lambda t: [(t / f"docs/results/{d}").mkdir(parents=True) for d in ("2026-01-01-a", "2026-01-02-b")]
        and [(t / f"docs/results/{d}/result.md").write_text("# a result\n") for d in ("2026-01-01-a", "2026-01-02-b")]
        and (t / "docs/results/README.md").write_text("# Results\n\n[a](2026-01-01-a/result.md)\n"),
        "docs: docs/results/README.md:1: result set '2026-01-02-b' is not listed"),
    "a bench:change desc missing a change kind": (
        lambda t: edit(t / "taskfiles/bench.yml", f"|{DROPPED_KIND}|", "|"),
        None),  # its line is the planted desc's: desc_line()
}


@pytest.mark.parametrize("defect", PLANTED)
def test_a_planted_defect_fails_the_check_with_one_finding_that_names_it(tree, defect):
    plant, finding = PLANTED[defect]
    plant(tree)
    finding = finding or (f"docs: taskfiles/bench.yml:{desc_line(tree)}: bench:change's desc does not name "
                          f"CHANGE {DROPPED_KIND} (bench/settings/settings.yaml)")
    r = check(tree)
    assert (r.returncode, r.stdout.splitlines()) == (1, [finding]), r.stderr


def test_without_node_the_check_says_so_in_one_line_and_fails(tree):
    r = check(tree, env={"PATH": "/nonexistent"})
    assert (r.returncode, r.stdout) == (
        1, "docs: node is not installed (it runs the settings validator, k6/lib/settings.js): run './task tools'\n")
