"""Bad input: a one-line error, a non-zero exit, and nothing started or left running."""
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, k6_running, lab_leftovers, sh


CASES = {
    "unknown scenario": (["latency"], {}, "unknown scenario 'latency'"),
    "unknown variant": (["rps"], {"VARIANT": "turbo"}, "unknown variant 'turbo' (an overlay: "),
    "unknown knob in a combination": (["rps"], {"VARIANT": "full+turbo"}, "unknown variant 'turbo'"),
    "overlay the lab cannot reproduce": (["rps"], {"VARIANT": "nginx-lb-full-link-1g"},
                                         "uses component link-1g, which the bare-metal lab cannot reproduce"),
    "unknown overlay on the default platform": (["rps"], {"PLATFORM": "", "VARIANT": "turbo"}, "unknown overlay 'turbo'"),
    "unknown image set": (["rps"], {"PLATFORM": "local", "IMAGE_SET": "mine"}, "unknown IMAGE_SET 'mine' (known: local, upstream)"),
    "unknown platform": (["rps"], {"PLATFORM": "mars"}, "unknown PLATFORM 'mars'"),
    "non-numeric connections": (["rps"], {"CONNECTIONS": "many"}, "CONNECTIONS must be a whole number, got 'many'"),
    "connections beyond any client": (["rps"], {"CONNECTIONS": "200000"}, "CONNECTIONS must be at most 20000, got 200000"),
    "a header smuggled into HOST": (["rps"], {"HOST": "a\r\nX-Evil: 1"}, "HOST must be a host name, got 'a\\x0d\\x0aX-Evil: 1'"),
    "a TESTID that climbs out": (["rps"], {"TESTID": ".."}, "TESTID must be letters, digits, '.', '_' and '-' only, not starting with '.'"),
    "a results root that cannot be written": (["rps"], {"RESULTS_ROOT": "/proc/ingress-bench"}, "results directory /proc/ingress-bench/"),
    "an overlay given as a path": (["rps"], {"PLATFORM": "local", "VARIANT": "../kustomize/base"}, "unknown overlay '../kustomize/base'"),
    "negative connections": (["rps"], {"CONNECTIONS": "-4"}, "CONNECTIONS must be a whole number, got '-4'"),
    "negative rate": (["rps"], {"RATE": "-100"}, "RATE must be a whole number"),
    "non-numeric threshold": (["rps"], {"P95_MS": "soon"}, "P95_MS must be a number"),
    "zero duration": (["rps"], {"DURATION": "0s"}, "DURATION must be longer than zero"),
    "bad duration": (["tps"], {"DURATION": "10"}, "DURATION must look like"),
    "target outside the lab": (["rps"], {"TARGET": "http://192.0.2.1"}, "outside the lab"),
    "documentation-range target": (["rps"], {"TARGET": "https://203.0.113.7:8443"}, "ALLOW_EXTERNAL_TARGET=1"),
    "tps over plain http": (["tps"], {"SCHEME": "http"}, "SCHEME must be https"),
    "bad CPU list": (["rps"], {"LAB_CLIENT_CPUS": "first"}, "must be CPU lists like 0 or 1-3, got 'first'"),
    "CPU the host lacks": (["rps"], {"LAB_SERVER_CPUS": "99"}, "CPU list '99' is not available"),
    "non-numeric backend count": (["rps"], {"LAB_BACKENDS": "two"}, "LAB_BACKENDS must be a whole number"),
    "ingress CPU not a quantity": (["rps"], {"PLATFORM": "local", "INGRESS_CPU": "half"},
                                   "INGRESS_CPU must be auto, probe, overlay or a CPU quantity above 0 like 2, 500m or 0.5, got 'half'"),
    "zero ingress CPU": (["rps"], {"PLATFORM": "local", "INGRESS_CPU": "0m"}, "INGRESS_CPU must be auto, probe, overlay or a CPU quantity above 0"),
    "ingress CPU beyond the machine": (["rps"], {"PLATFORM": "local", "INGRESS_CPU": str(os.cpu_count() + 1)},
                                       f"INGRESS_CPU {os.cpu_count() + 1} is more than this machine's {os.cpu_count()} CPUs"),
    "unknown engine": (["rps"], {"ENGINE": "turbo"}, "unknown ENGINE 'turbo' (known: js, native)"),
    "request dumps on the native engine": (["rps"], {"ENGINE": "native", "K6_HTTP_DEBUG": "full"},
                                           "ENGINE=native does not support K6_HTTP_DEBUG"),
    "native engine in Grafana's stock k6 image": (["rps"], {"PLATFORM": "external", "ENGINE": "native", "IMAGE_SET": "upstream"},
                                                  "ENGINE=native needs k6 built with k6/x/ingressbench"),
    "an ingress you run, on the lab": (["rps"], {"INGRESS_PODS": "edge/app=edge"},
                                       "INGRESS_PODS names an ingress you run on the cluster of PLATFORM=external (KUBECONFIG)"),
    "backends without their ingress": (["rps"], {"PLATFORM": "external", "BACKEND_PODS": "shop/app=web"},
                                       "BACKEND_PODS names the backends of the ingress of INGRESS_PODS: set INGRESS_PODS too"),
    "an ingress you run, without its address": (["rps"], {"PLATFORM": "external", "INGRESS_PODS": "edge/app=edge"},
                                                "INGRESS_PODS: TARGET must be the address of the ingress they serve"),
    "an ingress's pods without their namespace": (["rps"], {"PLATFORM": "external", "INGRESS_PODS": "app=edge", "TARGET": "http://edge.edge.svc"},
                                                  "INGRESS_PODS must be NAMESPACE/SELECTOR or NAMESPACE/service/NAME, got 'app=edge'"),
    "rules installed without an ingress you run": (["rps"], {"PLATFORM": "external", "EXISTING_RULES": "install"},
                                                   "EXISTING_RULES=install installs the rules of an ingress you run in your Prometheus: set INGRESS_PODS too"),
    "a registry for the lab's k6": (["rps"], {"REGISTRY": "registry.example.com/platform"},
                                    "REGISTRY puts the project's k6 image where a cluster of yours pulls from (PLATFORM=external): PLATFORM=lab's runners have it already"),
    "a registry with a scheme other than http": (["rps"], {"PLATFORM": "external", "REGISTRY": "https://registry.example.com"},
                                                 "REGISTRY must be a registry and repository path"),
    "a target beside the overlay deployed": (["rps"], {"PLATFORM": "external", "TARGET": "http://edge.edge.svc"},
                                             "PLATFORM=external measures the overlay it deploys: unset TARGET, or name the pods of an ingress you run"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_before_anything_starts(case, lab_down, tmp_path):
    args, env, message = CASES[case]
    r = sh("bash", "bench/run/bench.sh", *args, env={"PLATFORM": "lab", "RESULTS_ROOT": str(tmp_path / "r"), **env})
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), r.stderr
    assert message in errors[0]
    assert not (tmp_path / "r").exists(), "no results directory for a refused run"


def test_a_second_test_suite_is_refused_while_one_runs():
    """The suite holds an advisory lock on the cache while it runs (ci/tests/run.sh): under
    run.sh this test runs inside a suite; under plain pytest it takes the lock itself."""
    cache = Path(os.environ.get("IB_CACHE", Path.home() / ".cache/ingress-bench"))
    fd = os.open(cache, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held by the run.sh this test runs under
        r = sh("bash", "ci/tests/run.sh")
    finally:
        os.close(fd)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [f"error: another run of the test suite holds {cache} "
                                             f"(fuser -v {cache} shows it): wait for it or stop it"]


@pytest.mark.whole_machine  # the suite's own check of the machine: nothing else of ours may be up
def test_the_suite_refuses_to_start_beside_pieces_no_down_removes(lab_down, tmp_path):
    """A suite under another IB_CACHE holds another lock: CI once took its 'before' snapshot
    while such a suite's lab was half down (not 'up', its veths still there), then reported the
    veths' absence at the end as a change. Pieces of our names with nothing of ours running
    are an interrupted run's: the suite runs the downs; what they do not remove stops it."""
    # (a veth: this kernel has no dummy links)
    assert sh("ip", "link", "add", "ibv-stray", "type", "veth", "peer", "name", "ibv-stray-peer").returncode == 0
    try:
        r = sh("bash", "ci/tests/run.sh", env={"IB_CACHE": str(tmp_path / "cache")})
    finally:
        sh("ip", "link", "del", "ibv-stray")
    assert r.returncode != 0
    assert [l for l in r.stderr.splitlines() if l.strip()] == [
        "test          an interrupted run left pieces (link ibv-stray link ibv-stray-peer): './task down' removes them",
        "error: pieces of ingress-bench that no down removes are on this machine (link ibv-stray link ibv-stray-peer): "
        "remove them, or the suite would report them as its own"]


@pytest.mark.whole_machine
def test_the_suite_refuses_to_start_beside_a_run_going_on(lab_down, tmp_path):
    """A lab that is not 'up' (its servers gone) but with a process in its client's namespace,
    as another suite's k6 would be: that run is alive; the suite neither removes nor snapshots
    it. (A lab that is up is refused as such.)"""
    assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
    for pid in sh("bash", "bench/platforms/lab.sh", "procs").stdout.split():
        sh("kill", "-KILL", pid)
    k6 = subprocess.Popen(["ip", "netns", "exec", "ibench-client", "sleep", "300"])
    try:
        time.sleep(0.5)
        r = sh("bash", "ci/tests/run.sh", env={"IB_CACHE": str(tmp_path / "cache")})
        assert r.returncode != 0
        assert r.stderr.strip().splitlines() == [
            f"error: pieces of ingress-bench are on this machine (/run/ingress-bench link ibench0 link ibv-be1 "
            f"link ibv-be2 link ibv-client link ibv-lb netns ibench-be1 netns ibench-be2 netns ibench-client netns ibench-lb) and processes of it run ({k6.pid}): "
            "another run is going on; wait for it to end"]
        assert sh("ip", "link", "show", "ibench0").returncode == 0, "the live run's lab was left alone"
    finally:
        k6.kill()
        k6.wait()
        sh("bash", "bench/platforms/lab.sh", "down")


def test_missing_tool_says_what_to_do(lab_down, tmp_path):
    env = {"IB_CACHE": str(tmp_path / "empty-cache"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    r = sh("bash", "bench/run/bench.sh", "rps", env=env)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [f"error: k6 {os.environ.get('K6_VERSION', 'v1.8.1')} is not installed: run './task tools'"]


@pytest.mark.e2e
@pytest.mark.parametrize("engine", ["js", "native"])
def test_unreachable_target_is_one_line(engine, tmp_path):
    # In the lab's range but no host holds it: loaded from the lab's client namespace (never
    # from the host, whose default route would take it off the machine); setup() refuses.
    r = sh("bash", "bench/run/bench.sh", "rps", env={"TARGET": "http://198.18.0.250", "RESULTS_ROOT": str(tmp_path), "ENGINE": engine})
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert "target http://198.18.0.250/1kb.bin not ready" in errors[0] and "no route to host" in errors[0]
    assert "Error:" not in errors[0]
    assert not k6_running()


def test_lab_up_failing_half_way_leaves_nothing(lab_down, tmp_path):
    """Backends are up when the failpoint fires; the rollback must remove them."""
    r = sh("bash", "bench/run/bench.sh", "rps", env={"PLATFORM": "lab", "LAB_FAILPOINT": "after-backends", "RESULTS_ROOT": str(tmp_path / "r")})
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == ["error: failpoint after-backends reached (LAB_FAILPOINT is set)"]


def test_bad_lab_backend_count(lab_down):
    r = sh("bash", "bench/platforms/lab.sh", "up", env={"LAB_BACKENDS": "0"})
    assert r.returncode != 0
    assert r.stderr.strip() == "error: LAB_BACKENDS must be at least 1, got 0"


def test_missing_go_says_what_to_do(tmp_path):
    """A fresh machine without Go: the first tool to build names the fix."""
    r = sh("bash", "ci/tools/tools.sh", env={"IB_CACHE": str(tmp_path / "cache"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1].startswith("error: building task v3.53.1 needs Go")


@pytest.fixture(scope="module")
def readable_checkout():
    """The project's files in a directory every user may read: the checkout itself may be
    under a 0700 home (a clone under /root), which an unprivileged user cannot even enter."""
    top = tempfile.mkdtemp(prefix="ib-unprivileged-")
    files = sh("git", "ls-files", "-co", "--exclude-standard").stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (Path(top) / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, Path(top) / rel)
    for d, _, names in os.walk(top):
        os.chmod(d, 0o755)
        for n in names:
            os.chmod(os.path.join(d, n), 0o755)
    yield Path(top)
    shutil.rmtree(top)


@pytest.mark.parametrize("command", [["bench/platforms/lab.sh", "up"], ["bench/platforms/lab.sh", "down"], ["ci/tests/run.sh"]])
def test_root_is_required_where_namespaces_are_made(command, lab_down, readable_checkout):
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", *command],
                       cwd=readable_checkout, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "needs root" in lines[0], r.stderr


@pytest.mark.e2e
def test_failed_variant_switch_on_a_running_lab_leaves_nothing(tmp_path):
    """A knob set nginx rejects, applied to a running lab: nginx's own reason in one line,
    and the half-switched lab is removed rather than left marked as up."""
    broken = ROOT / "kustomize/components/tuning-test-broken"
    broken.mkdir()
    try:
        (broken / "nginx.env").write_text("WORKER_CONNECTIONS=lots\n")
        assert sh("bash", "bench/platforms/lab.sh", "up").returncode == 0
        r = sh("bash", "bench/platforms/lab.sh", "up", env={"VARIANT": "test-broken"})
        assert r.returncode != 0
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        assert len(errors) == 1 and "nginx config for lb is invalid" in errors[0] and "lots" in errors[0], r.stderr
        assert lab_leftovers() == []
    finally:
        for f in broken.iterdir():
            f.unlink()
        broken.rmdir()


@pytest.mark.parametrize("options, message", [
    ("{url: 'http://127.0.0.1:9/', conections: 5}", "ingressbench.run: unknown option 'conections' (known: "),
    ("{url: 'ftp://127.0.0.1/'}", "the native engine needs an http:// or https:// URL, got"),
    ("{url: 'http://127.0.0.1:9/', sliceMs: -1}", "ingressbench.run: sliceMs must be a number of at least 0, got -1"),
    ("{url: 'http://127.0.0.1:9/', reuse: 'yes'}", "ingressbench.run: reuse must be true or false, got yes"),
])
def test_native_engine_refuses_options_it_does_not_support(options, message, tmp_path):
    """The extension's own API: a script that passes run() what it cannot honour stops at
    once with one error naming the option (setup: before any load)."""
    script = tmp_path / "bad.js"
    script.write_text("import ib from 'k6/x/ingressbench';\n"
                      f"export function setup() {{ ib.run({options}); }}\nexport default function () {{}}\n")
    r = sh("k6", "run", "--quiet", "--no-color", "--summary-mode=disabled", str(script))
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if "level=error" in l]
    assert len(errors) == 1 and message in errors[0], r.stderr


@pytest.mark.parametrize("script, env, message", [
    ("overhead", {"ROUNDS": "x"}, "ROUNDS must be a whole number, got 'x'"),
    ("overhead", {"ROUNDS": "100"}, "ROUNDS must be at most 99, got 100"),
    ("overhead", {"PLATFORM": "external"}, "case 'monitoring-off': PLATFORM must be lab or local for this matrix, got 'external'"),
    ("overhead", {"PLATFORM": "lab", "VARIANT": "turbo"}, "unknown variant 'turbo'"),
    ("overhead", {"VARIANT": "turbo"}, "unknown overlay 'turbo'"),  # the default platform: local
    ("overhead", {"DURATION": "ten"}, "DURATION must look like 30s, 3m or 1m30s, got 'ten'"),
    ("calibrate", {"CASES": "http-1kb grpc"}, "unknown CASES 'grpc' (known: http-1kb, https-1kb, tls-handshakes, tls13-handshakes, tls13-p256-handshakes, tls13-hybrid-handshakes, tls12-resumed, tls13-resumed, tls12-session-id, throughput-1mb, h2c-1kb-m1, h2c-1kb-m10, h2-1kb-m10)"),
    ("calibrate", {"CLIENTS": "wrk ab"}, "unknown CLIENTS 'ab' (known: wrk, js, native, native-open)"),
    ("calibrate", {"CLIENTS": "wrk native-open"}, "CLIENTS: native-open paces a share of the native closed model's rate: list native before it"),
    ("calibrate", {"ROUNDS": "0"}, "ROUNDS must be at least 1, got 0"),
    ("calibrate", {"DURATION": "1m"}, "DURATION must be whole seconds like 15s, got '1m'"),
    ("calibrate", {"LONG": "60s"}, "LONG must be at least 150s (minute 1 against minute 3), got '60s'"),
    ("calibrate", {"LONG_CONNECTIONS": "lots"}, "LONG_CONNECTIONS must be a whole number, got 'lots'"),
    ("calibrate", {"OPEN_RATE": "fast"}, "OPEN_RATE must be a whole number, got 'fast'"),
    ("calibrate", {"CONNECTION_COUNTS": "50,200"}, "CONNECTION_COUNTS must be connection counts separated by spaces, like 50 200 1000, got '50,200'"),
    ("calibrate", {"VARIANT": "turbo"}, "unknown variant 'turbo'"),
    ("rounds", {"ROUNDS": "0"}, "ROUNDS must be at least 1, got 0"),
    ("rounds", {"DURATION": "ten"}, "DURATION must look like 30s, 3m or 1m30s, got 'ten'"),
    ("rounds", {"TESTID": ".."}, "TESTID must be letters, digits, '.', '_' and '-' only, not starting with '.'"),
    ("rounds", {"CONNECTIONS": "many"}, "CONNECTIONS must be a whole number, got 'many'"),  # round 1's own check
])
def test_benchmark_scripts_refuse_bad_input(script, env, message, lab_down, tmp_path):
    """The overhead benchmark (a case list of the matrix runner), the calibration and a
    scenario's rounds (./task bench:rps): one line, before anything is taken down, started or
    written."""
    command = {"overhead": ["bash", "-c", ". bench/lib.sh && exec python bench/run/matrix.py bench/run/matrices/overhead.yaml"],
               "calibrate": ["bash", "bench/run/calibrate.sh"], "rounds": ["bash", "bench/run/rounds.sh", "rps"]}[script]
    r = sh(*command, env={"RESULTS_ROOT": str(tmp_path / "r"), **({"PLATFORM": "lab"} if script == "rounds" else {}), **env})
    errors = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0 and len(errors) == 1 and message in errors[0], r.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name,script", [("RUNNER_CPU", "bench/run/distributed.sh"), ("INGRESS_CPU", "bench/platforms/deploy.sh")])
def test_a_cpu_amount_of_zero_is_refused_before_a_cluster_is_touched(name, script, lab_down):
    r = sh("bash", script, "rps", env={name: "0m", "PLATFORM": "local"})
    assert r.returncode != 0
    rule = "auto, probe, overlay or a CPU quantity" if name == "INGRESS_CPU" else "a CPU quantity"  # the registry's rules
    assert r.stderr.strip().splitlines()[-1] == f"error: {name} must be {rule} above 0 like 2, 500m or 0.5, got '0m'", r.stderr
