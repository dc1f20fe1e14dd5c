"""A matrix's result as a dated set of docs/results/ (PUBLISH=1 on `./task bench:seeds` or any
case list): what the docs may quote, stamped with the day, the commit, the machine, its steal
time and the settings, written by the command that measured it and listed in the results
index. A set is never overwritten, and a tree with uncommitted changes is refused before the
load: a published figure names the code that measured it. The stamp's parts (commit, machine,
steal) are also bench:evidence's (bench/run/evidence_set.py)."""
import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import yaml

from cases import Bad

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "docs/results/README.md"
# What a set keeps of the matrix's directory: its tables, page and case list, and each run's
# summary and meta (the run listing names their directories); not the runs' raw series.
SET_FILES = ("table.md", "matrix.json", "cases.yaml", "report.html")
RUN_FILES = ("summary.json", "meta.json")


class Refused(Bad):
    """Why a set cannot be published: one line, before the load (bad input to the runners)."""


def cpu_times():
    """/proc/stat's first line: (steal, total) jiffies of every CPU."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return f[7] if len(f) > 7 else 0, sum(f)


def steal_percent(since):
    now = cpu_times()
    return round(100 * (now[0] - since[0]) / max(1, now[1] - since[1]), 2)


def commit(root=ROOT):
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def machine():
    r = subprocess.run(["bash", "-c", f'. "{ROOT}/bench/lib.sh" && host_description'], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise Refused(f"cannot describe this machine: {(r.stderr.strip().splitlines() or [''])[-1]}")
    return json.loads(r.stdout)["host"]


def command_of(matrix_file):
    """The task that runs MATRIX_FILE (taskfiles/bench.yml's matrix-file callers), else the
    generic one with its path."""
    rel = os.path.relpath(Path(matrix_file).resolve(), ROOT)
    tasks = yaml.safe_load((ROOT / "taskfiles/bench.yml").read_text())["tasks"]
    for name, t in tasks.items():
        for c in t.get("cmds") or []:
            if isinstance(c, dict) and c.get("task") == "matrix-file" and (c.get("vars") or {}).get("FILE") == rel:
                return f"./task bench:{name}"
    return f"./task bench:matrix MATRIX={rel}"


def set_name(stem, relations=None):
    """The set's name: the case list's, and with RELATIONS the relations it measured (a subset
    is a set of its own, beside the whole list's of the same day)."""
    return f"{stem}-{re.sub(r'[^A-Za-z0-9._]+', '-', relations).strip('-')}" if relations else stem


def check(name, root=ROOT, day=None):
    """Before the load: the set's folder (ROOT's docs/results/<day>-<name>) is new and ROOT's
    tree is committed. Returns the folder."""
    out = Path(root) / "docs/results" / f"{(day or datetime.now(timezone.utc)):%Y-%m-%d}-{name}"
    if out.exists():
        raise Refused(f"{os.path.relpath(out, root)} exists already: a published set is never overwritten "
                      "(publish on another day, or move the old set to an archive)")
    if commit(root)["dirty"]:
        raise Refused("the tree has uncommitted changes: a published result names the commit that measured it (commit first)")
    return out


def publish(mdir, doc, out, matrix_file, settings, steal_since, index=None):
    """Copies the matrix's set from MDIR into OUT, stamps it (stamp.json, and matrix.json's dir
    made the set's own) and adds its row to the results index; returns OUT."""
    mdir, out = Path(mdir), Path(out)
    out.mkdir(parents=True)
    for f in SET_FILES:
        if (mdir / f).is_file():
            shutil.copy2(mdir / f, out / f)
    if (out / "table.md").is_file():  # its closing line names where this machine kept the set
        (out / "table.md").write_text((out / "table.md").read_text().replace(f"{mdir}/", f"{out.name}/"))
    for r in doc["runs"]:
        if not r.get("dir"):
            continue
        rel = os.path.relpath(r["dir"], mdir)
        for f in RUN_FILES:
            if (Path(r["dir"]) / f).is_file():
                (out / rel).mkdir(parents=True, exist_ok=True)
                run_doc = set_relative(json.loads((Path(r["dir"]) / f).read_text()), mdir)
                (out / rel / f).write_text(json.dumps(run_doc, indent=2) + "\n")
    published = set_relative(json.loads((out / "matrix.json").read_text()), mdir)
    published["dir"] = out.name
    (out / "matrix.json").write_text(json.dumps(published, indent=2) + "\n")
    command = command_of(matrix_file)
    stamp = {"date": doc["started"][:10], "started": doc["started"], "finished": doc["finished"], "written_by": command,
             **commit(), "machine": dict(machine(), steal_percent=steal_percent(steal_since)),
             "settings": settings, "rounds": doc["rounds"], "exit_code": doc["exit_code"]}
    (out / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
    add_to_index(index or INDEX, stamp["date"], out.name, "table.md", command, doc["title"])
    return out


def set_relative(value, mdir):
    """VALUE with every path inside MDIR (a run's directory, its log) made relative to it: where
    this machine kept the results is no part of what was measured."""
    if isinstance(value, dict):
        return {k: set_relative(v, mdir) for k, v in value.items()}
    if isinstance(value, list):
        return [set_relative(v, mdir) for v in value]
    if isinstance(value, str) and (value == str(mdir) or value.startswith(f"{mdir}/")):
        return os.path.relpath(value, mdir)
    return value


def in_results(out):
    """Whether the set OUT is one of the docs' results (listed in INDEX), not a scratch copy
    written elsewhere with --out."""
    return Path(out).resolve().parent == INDEX.parent


def add_to_index(index, date, folder, first, command, what):
    """The set's row at the top of the index's table (newest first)."""
    lines = Path(index).read_text().splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("|---")) + 1
    name = folder[len(date) + 1:]
    lines.insert(at, f"| {date} | [{name}]({folder}/{first}) | `{command}` | {what} |")
    Path(index).write_text("\n".join(lines) + "\n")


def write_set(stem, mdir, result, page, chart, runs, pub):
    """A driver's result (bench:routes, bench:soak): STEM.json, STEM.md (PAGE of it, also
    printed) and STEM.png (CHART) in MDIR; with PUB (the set's folder from check(), and
    "env", "started", "steal", "settings", "what"), the same and each of RUNS' summary and
    meta as a dated set of docs/results, stamped and listed in the index."""
    mdir = Path(mdir)
    (mdir / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = page(result)
    (mdir / f"{stem}.md").write_text(text)
    chart(result, mdir / f"{stem}.png")
    print("\n" + text + f"\nRun: {mdir}/\n", end="", flush=True)
    if not pub:
        return None
    out = Path(pub["out"])
    out.mkdir(parents=True)
    for f in (f"{stem}.md", f"{stem}.png"):
        shutil.copy2(mdir / f, out / f)
    (out / f"{stem}.json").write_text(json.dumps(set_relative(result, str(mdir)), indent=1) + "\n")
    for run in map(Path, runs):
        (out / run.name).mkdir()
        for f in RUN_FILES:
            if (run / f).is_file():
                (out / run.name / f).write_text(json.dumps(set_relative(json.loads((run / f).read_text()), str(mdir)), indent=1) + "\n")
    env = pub["env"]
    stamp = {"date": f"{pub['started']:%Y-%m-%d}", "started": pub["started"].isoformat(timespec="seconds"),
             "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "written_by": f"./task bench:{stem} PUBLISH=1",
             **commit(), "machine": dict(machine(), steal_percent=steal_percent(pub["steal"])),
             "settings": {k: env[k] for k in pub["settings"] if env.get(k)}}
    (out / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
    add_to_index(INDEX, stamp["date"], out.name, f"{stem}.md", f"./task bench:{stem}", pub["what"])
    return out
