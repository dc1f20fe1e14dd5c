"""The settings registry (bench/settings/settings.yaml, read by k6/lib/settings.js, Python and
bash) for real: every setting given as a user gives it, on the task line or in the
environment, arrives in the environment of the k6 that ran (its meta.json and summary.json say
what it received) or in the rendered TestRun's pods; the generated views of the registry fail
CI when hand-edited; the readers agree; and `./task` exits with the codes docs/reference/exit-codes.md documents.
The in-cluster Job and the local platform's host k6: see test_cluster_e2e.py, which has the
cluster."""
import json
import re
import shutil
import sys

import pytest

from conftest import LAB, LAB_STATE, ROOT, examples, exits_as_its_thresholds, registry, sh, task, task_with
from test_platform_configs import ENV_LINE, RUN

PYTHON = sys.executable  # the venv's: PyYAML, which generate.py reads the registry with


def received(run_dir):
    """What the run's k6 received, from each file it wrote."""
    meta = json.loads((run_dir / "meta.json").read_text())["settings"]
    summary = json.loads((run_dir / "summary.json").read_text())["settings"]
    assert meta == summary
    return meta


def errors(r):
    """The lines a user reads as errors: the script's, and any of go-task's (there must be none:
    its "task: Failed to run task" would repeat the script's line). Progress lines aside."""
    return [l for l in r.stderr.splitlines() if l.startswith(("error", "task:"))]


def only_run(root):
    dirs = [d for d in root.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_the_registry_is_complete_and_its_examples_valid():
    """Every setting has what its consumers need, and its example is a non-default value."""
    names = [s["name"] for s in registry()]
    assert len(names) == len(set(names))
    for s in registry():
        assert s["meaning"] and s["reaches"] and "example" in s, s["name"]
        assert s["example"] != s["default"], s["name"]


# An environment read, by language: bash's ${NAME:-...} (and -, =, ?, +: under `set -u` a
# variable that may come from the environment is read only so), Python's os.environ and
# env.get("NAME"), k6's __ENV.NAME (and env.NAME: k6/lib's config gets __ENV as env). Upper case only: lower case names are a script's own.
ENV_READS = {
    (".sh", ".env", ".yml"): re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-=?+])"),
    (".py",): re.compile(r"(?:environ\.get|getenv|env\.get)\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']|environ\[[\"']([A-Z][A-Z0-9_]*)[\"']\]"),
    (".js", ".mjs"): re.compile(r"(?:__ENV|\benv)\.([A-Z][A-Z0-9_]*)|__ENV\[[\"']([A-Z][A-Z0-9_]*)[\"']\]"),
}


def environment_reads():
    """{NAME: [files]}: every environment variable the runtime (bench/, k6/, monitoring/,
    dashboards/, the tools' installer and the Taskfile) reads."""
    files = sh("git", "ls-files", "bench", "k6", "monitoring", "dashboards", "ci/tools", "Taskfile.yml", "task").stdout.split()
    reads = {}
    for f in files:
        for suffixes, pattern in ENV_READS.items():
            if f.endswith(suffixes) or (f == "task" and ".sh" in suffixes):
                for m in pattern.finditer((ROOT / f).read_text()):
                    reads.setdefault(next(g for g in m.groups() if g), []).append(f)
    return reads


def test_every_environment_variable_the_runtime_reads_is_declared():
    """The registry is the whole of what the runtime reads from its environment: a variable
    read by a script of bench/, k6/ (...) that is neither a setting (SETTINGS) nor declared in
    ENVIRONMENT (set by our scripts, a test's hook, the system's, k6's own) fails, and so does a
    declaration nothing reads. The scan is not vacuous: it finds the settings a run needs."""
    js = "import('./k6/lib/settings.js').then(m => console.log(JSON.stringify(m.ENVIRONMENT)))"
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    declared = {e["name"]: e for e in json.loads(r.stdout)}
    assert declared and all(e["by"] in ("scripts", "test", "system", "k6") and e["meaning"] for e in declared.values()), declared
    settings = {s["name"] for s in registry()}
    assert not settings & set(declared), settings & set(declared)
    reads = environment_reads()
    assert {"DURATION", "VARIANT", "PLATFORM", "IB_CACHE", "TESTID"} <= set(reads), sorted(reads)
    undeclared = {n: sorted(set(f)) for n, f in reads.items() if n not in settings | set(declared)}
    assert undeclared == {}, f"read from the environment but declared nowhere (bench/settings/settings.yaml): {undeclared}"
    assert set(declared) - set(reads) == set(), "declared in ENVIRONMENT but read by no script"


# One table of durations for the three parsers (k6/lib/settings.js durationMs, bash's
# duration_ms in bench/settings/settings.sh, bench/run/cases.py duration_s): milliseconds, or
# None for a value each must refuse.
DURATIONS = {"1s": 1000, "15s": 15000, "1m30s": 90000, "1500ms": 1500, "2h": 7200000, "1h1m1s": 3661000, "0s": 0,
             "10": None, "": None, "1.5s": None, "s": None, "1d": None, "-1s": None, "1s ": None, "1S": None,
             "1m 30s": None, "30s1": None}


def test_the_three_duration_parsers_agree_on_one_table():
    js = ("import('./k6/lib/settings.js').then(m => console.log(JSON.stringify(Object.fromEntries("
          f"{json.dumps(list(DURATIONS))}.map(d => [d, Number.isNaN(m.durationMs(d)) ? null : m.durationMs(d)])))))")
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == DURATIONS
    r = sh("bash", "-c", '. bench/lib.sh; for d in "$@"; do printf "%s\\t%s\\n" "$d" "$(duration_ms "$d" || echo none)"; done', "_", *DURATIONS)
    assert r.returncode == 0, r.stderr
    got = dict(l.split("\t") for l in r.stdout.split("\n")[:-1])
    assert {d: None if v == "none" else int(v) for d, v in got.items()} == DURATIONS
    sys.path.insert(0, str(ROOT / "bench/run"))
    from cases import Bad, duration_s

    def py(d):
        try:
            return round(duration_s(d) * 1000)
        except Bad:
            return None
    assert {d: py(d) for d in DURATIONS} == DURATIONS


# One table of values for the two checkers of a value, k6/lib/settings.js `setting` (k6, and
# node for the matrix) and bash's `setting` (bench/settings/settings.sh): accepted or refused.
# cpu and cpus are types of their own; a text's pattern reaches bash as generate.py writes it.
VALUES = {
    "INGRESS_CPU": {"auto": True, "overlay": True, "2": True, "500m": True, "0.5": True, ".5": True, "0": False, "0m": False,
                    "0.0": False, "000m": False, "half": False, "1.": False, "-1": False, "500 m": False, "1.5m": False},
    "INGRESS_CPUS": {"1 2 4 8 16 24": True, "500m,1": True, "250m 0.5": True, "1 0": False, "1 auto": False, ",1": False, "1,": False},
    "RUNNER_CPU": {"250m": True, "auto": False, "0m": False},
    "PROMETHEUS_RELEASE": {"kube-prometheus-stack": True, "kps1": True, "Bad_": False, "a-": False, "-a": False},
    "LINK_CAPACITY": {"10G": True, "2.5G": True, "100M": True, "1000000": True, "10g": False, "G": False, "1.G": False},
    "VARIANT": {"nginx-lb-full": True, "nginx-lb-default+workers-1": True, "a b": False, "A": False, "a+": False},
    "HOST": {"bench.local": True, "bench.local:8080": True, "bench local": False, "bench.local:": False},
    "RELATIONS": {"seed002 seed003": True, "a|b": False, "a  b": False},
    "TARGET": {"https://198.18.0.2": True, "ftp://x": False, "http://a b": False},
    "DURATION": {"10s": True, "1m30s": True, "10": False},
    "SEGMENTS": {"16": True, "17": False, "x": False},
    "MONITORING": {"true": True, "0": True, "2": False},
    "NODE_NIC": {"eth0|bond0": True, "en[a-z0-9]+": True, 'eth0"': False, "eth\\d": False, "eth 0": False},
}


def test_the_two_value_checkers_agree_on_one_table():
    js = ("import('./k6/lib/settings.js').then(m => console.log(JSON.stringify(Object.fromEntries("
          f"Object.entries({json.dumps(VALUES)}).map(([n, vs]) => [n, Object.fromEntries(Object.keys(vs).map(v => {{"
          "try { m.setting({[n]: v}, n); return [v, true]; } catch (e) { return [v, false]; } }))])))))")
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == VALUES
    pairs = [x for n, vs in VALUES.items() for v in vs for x in (n, v)]
    r = sh("bash", "-c", '. bench/lib.sh; while [ $# -gt 0 ]; do printf "%s\\t%s\\t%s\\n" "$1" "$2" '
           '"$( (export "$1=$2"; setting "$1" >/dev/null 2>&1) && echo 1 || echo 0)"; shift 2; done', "_", *pairs)
    assert r.returncode == 0, r.stderr
    got = {}
    for line in r.stdout.split("\n")[:-1]:
        n, v, ok = line.split("\t")
        got.setdefault(n, {})[v] = ok == "1"
    assert got == VALUES


def test_each_scenario_file_holds_its_profile_and_every_reader_reads_the_same():
    """A scenario is one file, k6/<name>.js, opening with the question it answers and holding
    its profile; the registry's scenario list is those files, and node's reader (the unit tests,
    k6/lib/profiles.mjs) and Python's (bench/report/run.py profile: report, compare, sweep)
    read the same profile from it."""
    files = sorted(p.stem for p in (ROOT / "k6").glob("*.js") if "export const profile = {" in p.read_text())
    js = ("Promise.all([import('./k6/lib/settings.js'), import('./k6/lib/profiles.mjs')])"
          ".then(([s, p]) => console.log(JSON.stringify({names: s.SCENARIO_NAMES, profiles: p.PROFILES})))")
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert sorted(got["names"]) == files and {"rps", "tps", "throughput"} <= set(files)  # the seeds' three, and any added
    sys.path.insert(0, str(ROOT / "bench"))
    from report.run import profile
    for name in files:
        assert (ROOT / f"k6/{name}.js").read_text().startswith(f"// How many"), name  # its question first
        p = profile(name)
        assert p == got["profiles"][name], name
        assert {"payload", "scheme", "reuse", "headline"} <= set(p) and {"key", "title", "path", "unit", "format"} <= set(p["headline"])
    assert profile("throughput")["headline"]["unit"] == "Gbit/s"


def test_bash_reads_a_setting_as_the_registry_says():
    """bash's `setting NAME [ENTRY]`: the environment's value, else the entry point's own
    default, else the registry's; a bad value one line with k6's words, exit 1."""
    def setting(*args, **env):
        return sh("bash", "-c", '. bench/lib.sh && setting "$@"', "_", *args, env={"DURATION": "", "CONNECTIONS": "", "MONITORING": "", "VARIANT": "", **env})
    assert setting("DURATION").stdout == "15s\n" and setting("DURATION", "change").stdout == "30s\n"
    assert setting("DURATION", "change", DURATION="7s").stdout == "7s\n"
    assert setting("CONNECTIONS").stdout == "\n" and setting("VARIANT", "calibrate").stdout == "full+http2\n"
    assert setting("MONITORING", MONITORING="true").stdout == "1\n"
    for args, env, message in ((("DURATION",), {"DURATION": "ten"}, "DURATION must look like 30s, 3m or 1m30s, got 'ten'"),
                               (("CONNECTIONS",), {"CONNECTIONS": "0"}, "CONNECTIONS must be at least 1, got 0"),
                               (("PLATFORM",), {"PLATFORM": "mars"}, "unknown PLATFORM 'mars' (known: local, external, lab)"),
                               (("NO_SUCH",), {}, "NO_SUCH is not a setting of the registry")):
        r = setting(*args, **env)
        assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("form", ["line", "env"])
def test_every_setting_reaches_the_lab_k6(form, tmp_path):
    """All the settings that reach the host's k6 at once, each a non-default value, through
    `./task bench:rps` on the lab: k6 received every one, as given."""
    root = tmp_path / "results"
    given = examples("k6", RESULTS_ROOT=str(root), TESTID=f"settings-{form}")
    r = task_with(form, "bench:rps", given)
    # every setting's example at once, thresholds among them: which one a run crosses is the
    # examples'; that its exit code is theirs, and what k6 received, is the subject
    exits_as_its_thresholds(r, json.loads((only_run(root) / "summary.json").read_text()))
    got = received(only_run(root))
    assert got == given
    # And they took effect: the run is what they say.
    meta = json.loads((only_run(root) / "meta.json").read_text())
    assert (meta["engine"], meta["rate"], meta["connections"], meta["connection_reuse"]) == (given["ENGINE"], 50, 7, False)
    assert meta["target"] == "https://198.18.0.2/4kb.bin" and meta["variant"] == "nginx-lb-full"


@pytest.mark.parametrize("form", ["line", "env"])
def test_every_pod_setting_reaches_the_rendered_testrun(form):
    """The k6-operator TestRun's runner environment is written from the registry: every
    setting that reaches the pods, given, is in it with its value; one that does not is not."""
    given = examples("pods", runs_k6=False, PLATFORM="local", TARGET="http://198.18.64.5")
    env = {**RUN, **{k: "" for k in given}, "LOADGEN_CPU_MAX": "5"}
    if form == "line":  # what the ./task wrapper exports from the task line, then the render
        line = " ".join(f"{k}={v}" for k, v in given.items())
        r = sh("bash", "-c", f'. bench/lib.sh && settings_from_args {line} && bench/run/render_distributed.sh k6/distributed/testrun.yaml',
               env=env)
    else:
        r = sh("bash", "bench/run/render_distributed.sh", "k6/distributed/testrun.yaml", env={**env, **given})
    assert r.returncode == 0, r.stderr
    pod_env = {k: v.strip('"') for k, v in ENV_LINE.findall(r.stdout)}
    assert {k: v for k, v in pod_env.items() if k in given} == given
    assert "LOADGEN_CPU_MAX" not in pod_env


def test_generated_views_fail_ci_when_hand_edited(tmp_path):
    """The check that `./task test` runs: clean now; a hand edit of either generated file, or
    a registry or catalog edit without regenerating, fails with a line naming the file."""
    assert sh(PYTHON, "bench/settings/generate.py", "--check").returncode == 0
    for rel in ("bench/settings/generate.py", "bench/settings/settings.yaml", "k6/lib/registry.js", "bench/settings/settings.tsv",
                "docs/reference/settings.md", "docs/reference/variants.md", "overlays/catalog.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)

    def check():
        return sh(PYTHON, str(tmp_path / "bench/settings/generate.py"), "--check")
    assert check().returncode == 0
    tsv = tmp_path / "bench/settings/settings.tsv"
    tsv.write_text(tsv.read_text().replace("ENGINE\tk6,pods", "ENGINE\tk6"))
    r = check()
    assert r.returncode == 1 and r.stderr.startswith("error: bench/settings/settings.tsv differ"), r.stderr
    tsv.write_text((ROOT / "bench/settings/settings.tsv").read_text())
    reg = tmp_path / "bench/settings/settings.yaml"
    reg.write_text(reg.read_text().replace('meaning: "protocol to the LB"', 'meaning: "protocol to the load balancer"'))
    r = check()
    assert r.returncode == 1 and r.stderr.startswith("error: k6/lib/registry.js and docs/reference/settings.md differ"), r.stderr
    reg.write_text((ROOT / "bench/settings/settings.yaml").read_text())
    cat = tmp_path / "overlays/catalog.yaml"
    cat.write_text(cat.read_text().replace('shows: "the same, 10 backend pods"', 'shows: "ten backend pods"', 1))
    r = check()
    assert r.returncode == 1 and r.stderr.startswith("error: docs/reference/variants.md differ"), r.stderr


def test_unknown_setting_on_the_task_line_names_the_closest(tmp_path):
    r = task("bench:rps", "ENGIN=native", f"RESULTS_ROOT={tmp_path}")
    assert r.returncode == 1
    assert r.stderr.strip() == "error: unknown setting 'ENGIN' (did you mean ENGINE? every setting: docs/reference/settings.md)"
    assert list(tmp_path.iterdir()) == []
    r = task("bench:rps", "connections=5")
    assert r.returncode == 1 and "unknown setting 'connections' (did you mean CONNECTIONS?" in r.stderr
    # Values the scripts set for k6 are not settings.
    assert "unknown setting 'BENCH_META'" in task("bench:rps", "BENCH_META={}").stderr


def test_a_setting_that_does_not_reach_the_pods_is_refused():
    r = task("bench:distributed", "LOADGEN_CPU_MAX=0.9")
    assert r.returncode == 1
    assert errors(r) == [
        "error: LOADGEN_CPU_MAX does not reach the in-cluster k6 pods (bench/settings/settings.yaml): unset it, or run on a platform it reaches"]


@pytest.mark.e2e
@pytest.mark.parametrize("form", ["line", "env"])
def test_exit_codes_through_task(form, tmp_path):
    """docs/reference/exit-codes.md: 0 pass, 99 a finished run that crossed a threshold, 1 anything else,
    with the script's one line and nothing of go-task's."""
    base = {"PLATFORM": "lab", "DURATION": "2s", "CONNECTIONS": "5", "MONITORING": "0"}
    ok = task_with(form, "bench:rps", {**base, "RESULTS_ROOT": str(tmp_path / "ok")})
    assert ok.returncode == 0, ok.stderr
    crossed = task_with(form, "bench:rps", {**base, "P99_MS": "0.001", "RESULTS_ROOT": str(tmp_path / "crossed")})
    assert crossed.returncode == 99, crossed.stderr
    summary = json.loads((only_run(tmp_path / "crossed") / "summary.json").read_text())
    assert not summary["result"]["passed"]
    bad = task_with(form, "bench:rps", {**base, "CONNECTIONS": "many", "RESULTS_ROOT": str(tmp_path / "bad")})
    assert bad.returncode == 1
    assert errors(bad) == ["error: CONNECTIONS must be a whole number, got 'many'"]
    assert not (tmp_path / "bad").exists()
    assert task("no-such-task").returncode == 1


@pytest.mark.e2e
def test_the_lab_is_defined_once():
    """k6's default target for a bare run is the lab's LB of bench/platforms/lab.env, and the lab
    serves every payload the PAYLOAD setting names, at its size (lab.sh sizes them by unit)."""
    js = "import('./k6/lib/config.js').then(m => console.log(JSON.stringify([m.LAB_LB_ADDRESS, m.PAYLOADS])))"
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    address, payloads = json.loads(r.stdout)
    assert address == LAB["LAB_LB_IP"]
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    served = {p.stem: p.stat().st_size for p in (LAB_STATE / "payloads").glob("*.bin")}
    assert served == payloads
