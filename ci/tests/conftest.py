"""Shared helpers for the end-to-end suite: every test drives the real scripts (bench/run/bench.sh,
bench/platforms/lab.sh) against the real lab: nginx processes in network namespaces, real k6."""
import contextlib
import ctypes
import ipaddress
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "dashboards"))
import lint  # noqa: E402  (dashboards/lint.py: the dashboards' queries)
pytest_plugins = ["streams"]  # ci/tests/streams.py: the suite's sessions
pytest.register_assert_rewrite("streams")  # (imported here before pytest loads it as a plugin)
import streams  # noqa: E402
from streams import STREAM  # noqa: E402
LAB_STATE = Path(os.environ.get("IB_LAB_STATE", "/run/ingress-bench/lab"))
# The lab's addresses, from the one file that defines them.
LAB = dict(re.findall(r"^([A-Z0-9_]+)=(\S+)", (ROOT / "bench/platforms/lab.env").read_text(), re.M))
LAB = {k: re.sub(r"\$\{(\w+)\}", lambda m: LAB[m.group(1)], v) for k, v in LAB.items()}  # ${LAB_NS_PREFIX}client
STUB = f"http://{LAB['LAB_LB_IP']}:{LAB['LAB_STATUS_PORT']}/stub_status"
KUBECONFIG = "/run/ingress-bench/cluster/pki/admin.kubeconfig"  # bench/lib.sh IB_CLUSTER_KUBECONFIG
# Our cluster's pods and Services (bench/platforms/local/cluster.sh): the host has no route to them.
CLUSTER_NETS = [ipaddress.ip_network(n) for n in ("198.18.64.0/18", "198.18.128.0/20")]


def urlopen(req, timeout=10):
    """urllib's urlopen; to a pod or Service of our cluster from its client node's network
    namespace (bench/lib/kube.sh client_netns), as the bench reaches them: the connection is
    made in a thread that joined it (a namespace is a thread's, setns(2)), and is read here."""
    host = urllib.parse.urlsplit(req if isinstance(req, str) else req.full_url).hostname
    try:
        inside = any(ipaddress.ip_address(host) in n for n in CLUSTER_NETS)
    except ValueError:
        inside = False
    if not inside:
        return urllib.request.urlopen(req, timeout=timeout)
    ns = subprocess.run(["bash", "-c", ". bench/lib.sh && client_netns"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert ns, "no local cluster up to reach " + host
    out = {}

    def opened():
        fd = os.open(ns, os.O_RDONLY)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                raise OSError(ctypes.get_errno(), f"setns {ns}")
            out["r"] = urllib.request.urlopen(req, timeout=timeout)
        except Exception as e:  # raised again in the caller
            out["e"] = e
        finally:
            os.close(fd)
    t = threading.Thread(target=opened)
    t.start()
    t.join()
    if "e" in out:
        raise out["e"]
    return out["r"]


class Run:
    def __init__(self, proc, results_root):
        self.rc, self.out, self.err = proc.returncode, proc.stdout, proc.stderr
        dirs = sorted(Path(results_root).iterdir()) if Path(results_root).exists() else []
        self.dir = dirs[-1] if dirs else None
        path = self.dir / "summary.json" if self.dir else None
        self.summary = json.loads(path.read_text()) if path and path.exists() else None

    @property
    def result(self):
        return self.summary["result"]

    def metric(self, name):
        return self.summary["k6"]["metrics"][name]["values"]

    @property
    def why(self):
        """What a failed run's assertion shows: the thresholds that failed, with their values,
        and what the run printed on stderr."""
        failed = [t for t in (self.summary or {}).get("result", {}).get("thresholds", []) if not t["ok"]]
        return f"failed thresholds {failed}\n{self.err}"

    def error_lines(self):
        return [l for l in self.err.splitlines() if l.startswith("error:")]


# The thresholds a test is not about, set out of reach, so that its exit code says only what it
# is about: a run's default p95/p99 thresholds (250/500 ms) are crossed on a slow hour of this
# host by short runs whose subject is a count (issue 27: a 4 s lab run at 6,000 req/s).
LATENCY_UNJUDGED = {"P95_MS": "3600000", "P99_MS": "3600000"}
# ... and every k6 threshold but the validity one, for a test of bench:change's own gate.
K6_UNJUDGED = {**LATENCY_UNJUDGED, "ERROR_RATE_MAX": "1", "DROPPED_MAX": "1000000000", "LATE_MAX": "1"}
# For a cluster test whose subject is k6's figures and the servers' counts, no Prometheus
# signal: unmonitored, a deploy is ready at its rollout, not ~14 s later once the new pod has
# been scraped and its rules recorded (each time a test changes the variant).
UNMONITORED = {"MONITORING": "0"}
# ... and the validity threshold, for a test whose subject is a statistic over many lab runs: k6
# on the lab's one client CPU at 20 connections runs near its saturation level (0.9) on this
# host, so one run in ten can be NOT VALID (exit 99) on a slow hour (CI, issue 27).
VALIDITY_UNJUDGED = {"REQUIRE_VALID": "0"}


# Every test's runs keep their overlay's ingress CPU (on the local platform the default, auto,
# probes a share first): what each test asserts was set up for the overlay's placement. The
# budget's own tests set INGRESS_CPU=auto.
os.environ.setdefault("INGRESS_CPU", "overlay")
# The shared cluster is one node (NODES=1, every role and every CPU: the hostNetwork and
# CPU-manager tests are about that node); test_nodes.py runs the default, several nodes.
os.environ.setdefault("NODES", "1")
# ... and pass the validity threshold unless it is their subject (REQUIRE_VALID=1 there): the
# lab's client shares the host with the cluster's stream (below), whose control plane keeps
# part of the client's CPU busy, and the verdict rightly reads a client starved by its neighbours.
os.environ.setdefault("REQUIRE_VALID", "0")

# This session's mark, in the environment of every process it starts (inherited through
# bench.sh, ip netns exec, taskset...): the k6 it finds running are those it started
# (k6_running), never the other stream's, nor a pod's, nor another user's.
SESSION = f"{os.getpid()}.{time.time_ns()}"
os.environ["IB_TEST_SESSION"] = SESSION


# The prefix of a command a test interrupts as a terminal's Ctrl-C would: SIGINT and SIGQUIT at
# their defaults. A suite started in the background hands them on ignored, and bash traps no
# signal ignored when it started.
FROM_A_TERMINAL = ["env", "--default-signal=INT,QUIT"]


def sh(*args, env=None, timeout=300):
    full = dict(os.environ, **(env or {}))
    r = subprocess.run(args, cwd=ROOT, env=full, capture_output=True, text=True, timeout=timeout)
    for secs in re.findall(r"^load +waited (\d+) s$", r.stderr or "", re.M):  # bench/lib/k6.sh load_lock
        streams.waited("the other stream's loads", int(secs))
    return r


def browser_env(place, **env):
    """The environment a test's Chromium runs in: its configuration and caches (XDG: the disk
    cache, dconf's, crash reports) in PLACE, the test's own directory, never the user's home."""
    return dict(os.environ, XDG_CONFIG_HOME=str(place / "config"), XDG_CACHE_HOME=str(place / "cache"), **env)


@pytest.fixture
def bench(tmp_path):
    """bench(scenario, **env) -> Run: one bench/run/bench.sh run with results under tmp_path."""
    def run(scenario, **env):
        root = tmp_path / f"results-{len(list(tmp_path.iterdir()))}"
        # The lab unless a test names the platform (the tool's default is the local cluster);
        # the latency thresholds only where a test sets them (LATENCY_UNJUDGED).
        env = {"PLATFORM": "lab", "RESULTS_ROOT": str(root), "DURATION": "3s", "CONNECTIONS": "20", **LATENCY_UNJUDGED, **env}
        return Run(sh("bash", "bench/run/bench.sh", scenario, env=env), root)
    return run


def lab_leftovers():
    """Everything of the lab that could outlive it: namespaces, bridge, nginx, state files."""
    found = []
    netns = sh("ip", "netns", "list").stdout
    found += [l.split()[0] for l in netns.splitlines() if l.startswith("ibench-")]
    if sh("ip", "link", "show", "ibench0").returncode == 0:
        found.append("bridge ibench0")
    procs = sh("pgrep", "-af", f"nginx: .* -p {LAB_STATE}/").stdout.strip()
    if procs:
        found.append(procs)
    if LAB_STATE.exists():
        found.append(str(LAB_STATE))
    return found


def k6_running(load_only=False):
    """The pids of the k6 processes this session started and that still run: those whose
    environment carries its mark (IB_TEST_SESSION). Another user's k6, a pod's, or the other
    stream's is not this session's. load_only: a run's own load (`k6 run`), not bench.sh's
    `k6 inspect` or `k6 version` before it, nor its 3 s probe (IB_PROBE=1 in its environment)."""
    import machine_state

    def counted(pid):
        env = machine_state.environ_of(pid)
        if env.get(b"IB_TEST_SESSION") != SESSION.encode():
            return False
        return not load_only or (env.get(b"IB_PROBE") != b"1" and machine_state.argv_of(pid)[1:2] == [b"run"])
    return [pid for pid in sh("pgrep", "-x", "k6").stdout.split() if counted(pid)]


@contextlib.contextmanager
def no_load():
    """The machine's load lock held (bench/lib/k6.sh load_lock): no run's load starts, the
    other stream's included, until the block ends."""
    import fcntl
    cache = Path(sh("bash", "-c", '. bench/lib.sh && mkdir -p "$IB_CACHE" && echo "$IB_CACHE"').stdout.strip())
    with open(cache / "load.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def stub():
    text = subprocess.run(["curl", "-s", "--max-time", "3", STUB], capture_output=True, text=True).stdout
    accepts, handled, requests = map(int, text.splitlines()[2].split())
    return accepts, requests


@pytest.fixture(scope="session", autouse=True)
def machine_state_of_the_session(tmp_path_factory):
    """What a first run decides for the machine (bench/lib.sh IB_MACHINE_STATE: the ingress's CPU
    share) is the session's own: the suite neither reads nor changes the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IB_MACHINE_STATE", str(tmp_path_factory.mktemp("machine")))
        yield


@pytest.fixture(scope="session", autouse=True)
def lab_is_removed_after_the_suite():
    """The lab down after the session that brought it up, and nothing of it left. A lab that was
    up before the session is not this session's (another run's, a developer's): it stays; nor
    is it the cluster stream's, which never touches the lab."""
    before = LAB_STATE.exists()
    yield
    if before or STREAM == "cluster":  # the lab is the lab stream's
        return
    sh("bash", "bench/platforms/lab.sh", "down")
    left = lab_leftovers()
    assert not left, f"lab leftovers after the suite: {left}"


def within(a, b, fraction):
    return abs(a - b) <= fraction * max(a, b)


LOG_FIELDS = re.compile(r"conn=(\d+) reqs=(\d+) tls=(\S+) reused=(\S)")
TLS_FIELDS = re.compile(r"tls=(\S+) reused=(\S) group=(\S+) alpn=(\S+)")


def registry():
    """The settings registry (bench/settings/settings.yaml) as k6's lib defines it, read with node."""
    js = "import('./k6/lib/settings.js').then(m => console.log(JSON.stringify(m.SETTINGS)))"
    r = sh("node", "--input-type=module", "-e", js)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# The native engine's own settings, which k6/http refuses: ENGINE's example is js, so a run of
# every example leaves them out (test_lab_e2e.py's TLS and HTTP/2 tests give them to the native
# engine).
NATIVE_ONLY = ("TLS_GROUP", "TLS_RESUMPTION", "HTTP_VERSION", "STREAMS")


def examples(reach, runs_k6=True, **overrides):
    """A non-default example value of every setting reaching REACH (the registry's own
    examples), but for a run of k6 the native engine's own (NATIVE_ONLY), with OVERRIDES
    applied (None: leave that setting out)."""
    given = {s["name"]: s["example"] for s in registry() if reach in s["reaches"] and not (runs_k6 and s["name"] in NATIVE_ONLY)}
    given.update(overrides)
    return {k: v for k, v in given.items() if v is not None}


ONE_RUN = {"bench:rps", "bench:tps", "bench:throughput"}


def task(*args, env=None, timeout=600):
    """./task ARGS, as a user types it; a scenario's task as one run (ROUNDS=1) unless the test
    gives ROUNDS: rounds are test_rounds.py's subject."""
    if args and args[0] in ONE_RUN and not any(a.startswith("ROUNDS=") for a in args):
        env = {"ROUNDS": "1", **(env or {})}
    return sh("./task", *args, env=env, timeout=timeout)


def task_with(form, task_name, settings, env=None, timeout=600):
    """./task TASK with SETTINGS given on the task line ('line') or in the environment ('env')."""
    if form == "line":
        return task(task_name, *(f"{k}={v}" for k, v in settings.items()), env=env, timeout=timeout)
    return task(task_name, env={**(env or {}), **settings}, timeout=timeout)


def kubectl(*args):
    """kubectl on the local cluster (its admin kubeconfig)."""
    return sh("kubectl", *args, env={"KUBECONFIG": KUBECONFIG})


def exits_as_its_thresholds(r, summary):
    """A finished run's exit code is its thresholds' one outcome: 0 when every one in its
    summary held, 99 when one was crossed (a test that sets several thresholds at once asserts
    that, not which one a run crosses)."""
    crossed = [t for t in summary["result"]["thresholds"] if not t["ok"]]
    assert summary["result"]["passed"] == (not crossed), summary["result"]
    assert r.returncode == (99 if crossed else 0), (r.returncode, crossed, r.stderr[-3000:])


def one_error(r):
    """The one `error:` line a refused command printed (and it exited non-zero)."""
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert r.returncode != 0 and len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture
def lab_down():
    """For bad input: the lab down before, and nothing of it (nor a k6) started after."""
    sh("bash", "bench/platforms/lab.sh", "down")
    assert lab_leftovers() == []
    yield
    assert not k6_running()
    assert lab_leftovers() == [], "bad input must not start the lab, nor leave part of it behind"


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: brings the lab or a cluster up, or runs a load (not in ./task test:fast)")
    config.addinivalue_line("markers", "one_engine: in a module run on each engine, run on the default (native) only")
    config.addinivalue_line("markers", "takes_the_cluster_down: runs after every other test of the local cluster")
    config.addinivalue_line("markers", "leaves_monitoring_down: runs after the other tests of the local cluster, "
                                       "which would bring its monitoring up again (~40 s)")
    config.addinivalue_line("markers", "unmonitored: its runs are MONITORING=0 and in no order with the module's others: "
                                       "runs with the tests that take monitoring down, before it is up (a deploy without the "
                                       "monitoring component between two with it rolls the ingress twice and waits for a scrape)")
    config.addinivalue_line("markers", "takes_monitoring_down: a matrix with MONITORING=0 (bench:change, bench:migrate, bench:sweep) "
                                       "takes the local cluster's monitoring down: runs before the tests that bring it "
                                       "up (~25 s an up, ~12 s a down)")


# The tiers. `./task test:fast` (IB_TEST_TIER=fast) runs what needs no lab, no cluster and no
# load: unit, static, offline, bad input, generated views: every test not marked e2e. A test is
# e2e when its fixtures bring a platform up or run a load (E2E_FIXTURES), or it says so
# (@pytest.mark.e2e, a module's pytestmark). A test left unmarked that starts the lab or a
# cluster fails the fast tier (tier_guard), so a mark cannot be forgotten silently.
E2E_FIXTURES = {"bench", "clean_bench", "bench_async", "local_cluster", "shared_cluster", "nodes4", "stack",
                "lab", "lab_live", "lab_run", "lab_taken_down", "link_1g_run", "host", "cluster", "foreign_k6"}
FAST = os.environ.get("IB_TEST_TIER") == "fast"


def platforms_up():
    """The platforms up now: the lab's and the cluster's state directories."""
    return {name for name, state in (("lab", LAB_STATE), ("cluster", Path(KUBECONFIG).parents[1])) if state.exists()}


@pytest.fixture(autouse=True)
def tier_guard():
    """In the fast tier, a test that brings the lab or a cluster up is an e2e test left
    unmarked: it fails, and what it brought up goes down again (what was up before stays)."""
    before = platforms_up() if FAST else set()
    yield
    if FAST and (new := platforms_up() - before):
        for name in new:
            sh("bash", {"lab": "bench/platforms/lab.sh", "cluster": "bench/platforms/local/cluster.sh"}[name], "down", timeout=300)
        pytest.fail(f"the fast tier brought the {' and the '.join(sorted(new))} up: mark the test e2e")


def pytest_collection_modifyitems(config, items):
    """First the tests that bring nothing up (offline, static, bad input: the fast tier), so that
    those which take the lab down to show that bad input starts nothing (lab_down) do so before
    the lab tests, not between them: each lab down took its Prometheus down too, and the next
    lab run waited for its rules and two scrapes of the LB again. Then the lab's.
    The tests that need the local cluster run last, in their modules' order, so one cluster
    serves them all (shared_cluster) and no lab test measures beside an idle cluster's
    control plane, kubelet and Prometheus; among them first those whose matrix takes its
    monitoring down (MONITORING=0) before it is ever up, and those whose runs go without it
    (unmonitored), then those that want it up, then those
    that leave it down (the chart's stack replaces it, bench:throttle measures without it); a
    test that takes the cluster down, last. A stable sort: every other test keeps its place.
    E2E_FIXTURES mark their tests e2e; the fast tier deselects every e2e test."""
    for item in items:
        if E2E_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.e2e)
    # A module run on each engine (its `engine` fixture): a test whose subject is not the request
    # loop (one_engine) runs on the default one only.
    one = [i for i in items if i.get_closest_marker("one_engine") and getattr(i, "callspec", None)
           and i.callspec.params.get("engine") not in (None, "native")]
    if one:
        config.hook.pytest_deselected(items=one)
        items[:] = [i for i in items if i not in one]
    if FAST:
        e2e = [i for i in items if i.get_closest_marker("e2e")]
        config.hook.pytest_deselected(items=e2e)
        items[:] = [i for i in items if not i.get_closest_marker("e2e")]
    items.sort(key=lambda item: ("local_cluster" in item.fixturenames,
                                 item.get_closest_marker("e2e") is not None,
                                 item.get_closest_marker("takes_the_cluster_down") is not None,
                                 item.get_closest_marker("leaves_monitoring_down") is not None,
                                 not (item.get_closest_marker("takes_monitoring_down") or item.get_closest_marker("unmonitored"))))


@pytest.fixture(scope="session")
def shared_cluster():
    """The local cluster, up once for every test that needs it, after the lab tests: their lab
    goes down first (it stays up between them) and must leave nothing behind. No cluster may
    be up before (no down first: it would hide what an earlier test left), and after down the
    whole machine is as found (ci/tests/machine_state.py)."""
    import machine_state
    assert not Path(KUBECONFIG).parents[1].exists(), "a local cluster is up before the cluster tests"
    if STREAM:
        # The lab's stream runs beside this one: the lab is its, and the machine changes with
        # it; ci/tests/run.sh compares the whole machine once both streams have ended.
        yield
        down = sh("bash", "bench/platforms/local/cluster.sh", "down")
        assert down.returncode == 0, down.stderr
        return
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    assert lab_leftovers() == [], "the lab's down left part of it before the cluster tests"
    before = machine_state.snapshot()
    yield
    down = sh("bash", "bench/platforms/local/cluster.sh", "down")
    assert down.returncode == 0, down.stderr
    assert machine_state.diff(before, machine_state.snapshot()) == [], "cluster:down must leave the machine as it found it"


@pytest.fixture(scope="module")
def local_cluster(shared_cluster):
    """The shared cluster, up for this module: the first module's up, a no-op after (a test
    that takes it down runs after every other: takes_the_cluster_down)."""
    up = sh("bash", "bench/platforms/local/cluster.sh", "up", timeout=600)
    assert up.returncode == 0, up.stderr


# ci/tools/versions.env, every pin the tools are built from: name -> version.
PINS = dict(re.findall(r'^([A-Z0-9_]+)="?([^"\n]*)"?$', (ROOT / "ci/tools/versions.env").read_text(), re.M))
KPS_VERSION = PINS["KPS_CHART_VERSION"]


def offline_chart():
    """The offline copy of kube-prometheus-stack's release: KPS_CHART, else
    shared/charts/kube-prometheus-stack beside the checkout, or beside the repository it was
    cloned from (a fresh clone elsewhere: its origin's directory)."""
    origin = subprocess.run(["git", "-C", str(ROOT), "remote", "get-url", "origin"], capture_output=True, text=True).stdout.strip()
    beside = [ROOT.parent] + ([Path(origin).resolve().parent] if origin.startswith("/") else [])
    for c in [os.environ.get("KPS_CHART", "")] + [b / "shared/charts/kube-prometheus-stack" for b in beside]:
        if c and (Path(c) / "Chart.yaml").exists():
            return Path(c)
    pytest.fail("no offline copy of kube-prometheus-stack: set KPS_CHART to the directory of release " + KPS_VERSION)


@pytest.fixture(scope="module")
def chart(tmp_path_factory):
    """The offline chart, as helm will take it here. The copy on these machines lacks its
    subcharts (the chart's own .gitignore ignores charts/* but crds, and the copy went through
    git): a copy without those dependencies, each switched off by its condition, holds every
    template of the chart itself. chart.sh refuses the incomplete one (test_chart.py).
    Returns the chart and the --set of those conditions."""
    import shutil
    import yaml
    src = offline_chart()
    meta = yaml.safe_load((src / "Chart.yaml").read_text())
    assert meta["version"] == KPS_VERSION, f"{src} is {meta['version']}, the values are tested against {KPS_VERSION}"
    missing = [d["name"] for d in meta["dependencies"] if not (src / "charts" / d["name"]).exists()
               and not list((src / "charts").glob(d["name"] + "-*.tgz"))]
    if not missing:
        return src, []
    dst = tmp_path_factory.mktemp("chart") / "kube-prometheus-stack"
    shutil.copytree(src, dst)
    os.chmod(dst, 0o755)
    (dst / "Chart.yaml").chmod(0o644)
    meta["dependencies"] = [d for d in meta["dependencies"] if d["name"] not in missing]
    (dst / "Chart.yaml").write_text(yaml.safe_dump(meta))
    off = ",".join(f"{d['condition']}=false" for d in yaml.safe_load((src / "Chart.yaml").read_text())["dependencies"] if d["name"] in missing)
    print(f"\n{src} lacks the subcharts {missing}: taken without them ({off})")
    return dst, ["--set", off]


def table_row(table, first):
    """The cells of a Markdown table's one row whose first cell is FIRST."""
    rows = [l for l in table.splitlines() if l.startswith(f"| {first} |")]
    assert len(rows) == 1, table
    return [cell.strip() for cell in rows[0].strip("|").split("|")]
