"""The local cluster as a guest on someone's machine (issue 13): it refuses to start beside
another Kubernetes, its down removes only what it made (foreign chains, netns, ifb devices
and tbf qdiscs of the same kinds survive untouched), a down with nothing up changes nothing,
and while it runs every listening port of its processes is bound to loopback or the node's
bridge address and refuses an unauthenticated client, from the host and from the lab's
client namespace; the lab's runs pass its FORWARD guard."""
import os
import re
import subprocess
from pathlib import Path

import pytest

import machine_state
from conftest import LAB, one_error, sh

# Snapshots of the whole machine around a cluster of its own, the lab beside it.
pytestmark = pytest.mark.whole_machine

CLUSTER = "bench/platforms/local/cluster.sh"
STATE = Path("/run/ingress-bench/cluster")  # bench/lib.sh IB_CLUSTER_STATE
PKI = STATE / "pki"
NODE_IP = "198.18.64.1"  # bench/platforms/local/cluster.sh NODE_IP
KUBE_PORTS = {6443, 2379, 2380, 10250, 10257, 10259, 10249, 10256}
# The cluster's processes, by comm (15 characters at most).
CLUSTER_COMMS = {"etcd", "containerd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet", "kube-proxy"}
FOREIGN_TBF = "rate 10Mbit burst 4Kb lat 100ms"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def foreign_objects(add):
    """Objects of the kinds the cluster makes, not made by it: chains named like kube-proxy's
    and the CNI plugins', a netns named like containerd's, an ifb named like the bandwidth
    plugin's, and a tbf qdisc on a device of its own."""
    op = "-N" if add else "-X"
    cmds = []
    for table, hook in (("filter", "INPUT"), ("nat", "PREROUTING")):
        for chain in ("KUBE-FOREIGN-TEST", "CNI-FOREIGN-TEST"):
            jump = [hook, "-s", "192.0.2.1", "-j", chain]
            if add:
                cmds += [["iptables", "-t", table, "-N", chain],
                         ["iptables", "-t", table, "-A", chain, "-s", "192.0.2.1", "-j", "RETURN"],
                         ["iptables", "-t", table, "-A", *jump]]
            else:
                cmds += [["iptables", "-t", table, "-D", *jump], ["iptables", "-t", table, "-F", chain],
                         ["iptables", "-t", table, op, chain]]
    if add:
        # The first `ip netns add` on a host makes /run/netns a mount: the test's own, undone
        # below like the lab's (bench/platforms/lab.sh).
        foreign_objects.netns_mount_made = sh("mountpoint", "-q", "/run/netns").returncode != 0
        cmds += [["ip", "netns", "add", "cni-foreign-test"], ["ip", "link", "add", "bwpforeign", "type", "ifb"],
                 ["ip", "link", "add", "tbfforeign", "type", "ifb"],
                 ["tc", "qdisc", "add", "dev", "tbfforeign", "root", "tbf", *FOREIGN_TBF.replace("lat", "latency").split()]]
    else:
        cmds += [["ip", "netns", "del", "cni-foreign-test"], ["ip", "link", "del", "bwpforeign"],
                 ["ip", "link", "del", "tbfforeign"]]
    for c in cmds:
        r = sh(*c)
        assert r.returncode == 0 or not add, (c, r.stderr)
    if not add and getattr(foreign_objects, "netns_mount_made", False) and not os.listdir("/run/netns"):
        sh("umount", "/run/netns")


def drop_foreign_kube_chains():
    if sh("iptables", "-t", "filter", "-n", "-L", "KUBE-FOREIGN-TEST").returncode != 0:
        return
    for table, hook in (("filter", "INPUT"), ("nat", "PREROUTING")):
        for c in (["-D", hook, "-s", "192.0.2.1", "-j", "KUBE-FOREIGN-TEST"], ["-F", "KUBE-FOREIGN-TEST"], ["-X", "KUBE-FOREIGN-TEST"]):
            assert sh("iptables", "-t", table, *c).returncode == 0


@pytest.fixture(scope="module")
def host():
    """Foreign objects in place, then this module's cluster: ups are few (one here)."""
    assert not STATE.exists(), "a local cluster is up: this module needs a host without one"
    sh("bash", "bench/platforms/lab.sh", "down")
    pristine = machine_state.snapshot()
    foreign_objects(add=True)
    state = {"pristine": pristine, "with_foreign": machine_state.snapshot()}
    yield state
    sh("bash", "bench/platforms/lab.sh", "down")
    sh("bash", CLUSTER, "down", timeout=120)
    drop_foreign_kube_chains()
    foreign_objects(add=False)
    assert machine_state.diff(pristine, machine_state.snapshot()) == []


def test_down_with_nothing_up_changes_nothing(host):
    """Not even the KUBE-*/CNI-* chains of someone else (the old down ran kube-proxy --cleanup)."""
    r = sh("bash", CLUSTER, "down")
    assert r.returncode == 0, r.stderr
    assert machine_state.diff(host["with_foreign"], machine_state.snapshot()) == []


def test_up_refuses_beside_another_kubernetes(host):
    err = one_error(sh("bash", CLUSTER, "up", timeout=120))
    assert "another Kubernetes is on this host (iptables chains KUBE-FOREIGN-TEST)" in err, err
    assert not STATE.exists()
    assert machine_state.diff(host["with_foreign"], machine_state.snapshot()) == []


def test_up_refuses_when_a_kubernetes_port_is_taken(host, tmp_path):
    """Something else listening on 10259 (the scheduler's port): refused before anything starts."""
    drop_foreign_kube_chains()
    srv = subprocess.Popen(["python3", "-m", "http.server", "--bind", "127.0.0.1", "10259"], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert sh("bash", "-c", ". bench/lib.sh; poll 5 bash -c 'ss -Hltn | grep -q 127.0.0.1:10259'").returncode == 0
        err = one_error(sh("bash", CLUSTER, "up", timeout=120))
        assert "port 10259 is in use (127.0.0.1:10259" in err and "python3" in err, err
        assert not STATE.exists()
    finally:
        srv.terminate()
        srv.wait()


@pytest.fixture(scope="module")
def cluster(host):
    """Up beside the foreign objects (less the KUBE-* chains, which up refuses)."""
    drop_foreign_kube_chains()
    host["before_up"] = machine_state.snapshot()
    r = sh("bash", CLUSTER, "up", timeout=600)
    assert r.returncode == 0, r.stderr
    lab = sh("bash", "bench/platforms/lab.sh", "up", timeout=300)
    assert lab.returncode == 0, lab.stderr
    return host


def test_kernel_settings_the_kubelet_wants_are_not_written(cluster):
    """kernel.panic=10 and kernel.panic_on_oops=1 would reboot the user's machine 10 s after an
    oops: the kubelet checks them in its own mount namespace and never writes the host's."""
    now = machine_state.sysctls()
    for k in ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
              "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"):
        assert now[k] == cluster["before_up"]["sysctl"][k], k
    pid = (STATE / "pids/kubelet").read_text().strip()
    seen = sh("nsenter", "-t", pid, "-m", "cat", "/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops").stdout.split()
    assert seen == ["10", "1"], seen


def test_foreign_objects_survive_a_shaped_deploy(cluster):
    """deploy.sh cuts the bandwidth plugin's burst on our pod's devices only."""
    r = sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": "nginx-lb-full-link-1g", "MONITORING": "0"}, timeout=300)
    assert r.returncode == 0, r.stderr
    ours = sh("bash", CLUSTER, "pod-links").stdout.split()
    shaped = [l for l in sh("tc", "qdisc", "show").stdout.splitlines() if " tbf " in l]
    ours_shaped = [l for l in shaped if l.split()[4] in ours]
    assert len(ours_shaped) == 2 and all("burst 1048500b" in l for l in ours_shaped), shaped  # veth and its ifb
    assert any(l.split()[4].startswith("bwp") for l in ours_shaped)
    foreign = [l for l in shaped if l.split()[4] == "tbfforeign"]
    assert len(foreign) == 1 and FOREIGN_TBF in foreign[0], foreign
    assert "cni-foreign-test" in sh("ip", "netns", "list").stdout
    for dev in ("bwpforeign", "tbfforeign"):
        assert sh("ip", "link", "show", dev).returncode == 0


def curl(url, *args, ns=None, user=NOBODY):
    """(curl's exit code, HTTP status) of one GET; status 000 when no HTTP answer came."""
    cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", *args, url]
    if ns:
        cmd = ["ip", "netns", "exec", ns, *cmd]
    r = sh(*([] if ns else user or []), *cmd)  # ip netns exec needs root
    return r.returncode, r.stdout.strip()


def cluster_sockets():
    """(address, port, process) of every listening TCP socket of the cluster's processes."""
    out = []
    for l in sh("ss", "-Hltnp").stdout.splitlines():
        f = l.split()
        m = re.search(r'users:\(\("([^"]+)"', l)
        if m and m.group(1) in CLUSTER_COMMS:
            addr, _, port = f[3].rpartition(":")
            out.append((addr, int(port), m.group(1)))
    return sorted(out)


def admin(url):
    """As the cluster's admin (-k: the controller manager and scheduler serve self-signed certificates)."""
    return curl(url, "-k", "--cert", str(PKI / "admin.crt"), "--key", str(PKI / "admin.key"), user=None)


def test_every_port_is_local_and_refuses_the_unauthenticated(cluster):
    """Each listening socket of the cluster: on loopback or the node's bridge address, never
    every interface; no 2xx/3xx to a client without credentials, in plain HTTP or in TLS,
    from the host (as an unprivileged user) or from the lab's client namespace (which has no
    route to the node's bridge, and its own loopback). Controls: with the right credentials
    each answers 200, so a refusal is the authentication's, not a dead port's."""
    socks = cluster_sockets()
    ports = {p for _, p, _ in socks}
    assert KUBE_PORTS <= ports, socks
    assert 10248 not in ports  # the kubelet's unauthenticated healthz is off
    table = []
    for addr, port, proc in socks:
        assert addr in ("127.0.0.1", NODE_IP), (addr, port, proc)
        outcomes = {}
        for where, ns in (("host", None), ("lab", LAB["LAB_NS_PREFIX"] + "client")):
            for scheme in ("http", "https"):
                # /healthz: the path components leave open to anonymous clients by default.
                rc, code = curl(f"{scheme}://{addr}:{port}/healthz", "-k", ns=ns)
                assert not (rc == 0 and code[:1] in "23"), (where, scheme, addr, port, proc, code)
                outcomes[f"{where} {scheme}"] = code if rc == 0 else f"curl exit {rc}"
            if where == "lab":
                # No answer at all from there: unreachable (exit 7), never a TLS or HTTP reply.
                assert outcomes["lab http"] == outcomes["lab https"] == "curl exit 7", outcomes
        table.append((port, proc, addr, outcomes))
    print("\nport  process          address       host http / https          lab http / https")
    for port, proc, addr, o in table:
        print(f"{port:<5} {proc:<16} {addr:<13} {o['host http']} / {o['host https']:<14} {o['lab http']} / {o['lab https']}")
    # etcd: no client certificate, no data, plain or TLS (the TLS 1.3 handshake fails on the
    # missing certificate: curl 35, or 55/56 when the alert comes after its Finished).
    assert curl("http://127.0.0.1:2379/version")[1] in ("000", "400")
    assert curl("https://127.0.0.1:2379/version", "-k")[0] in (35, 55, 56)
    # Controls.
    etcd = curl("https://127.0.0.1:2379/version", "--cacert", str(PKI / "etcd-ca.crt"), "--cert", str(PKI / "etcd-client.crt"),
                "--key", str(PKI / "etcd-client.key"), user=None)
    assert etcd == (0, "200"), etcd
    for url in (f"https://{NODE_IP}:6443/readyz", f"https://{NODE_IP}:10250/healthz",
                "https://127.0.0.1:10257/healthz", "https://127.0.0.1:10259/healthz"):
        assert admin(url) == (0, "200"), url
    assert curl("http://127.0.0.1:10249/metrics", user=None) == (0, "200")  # root only
    assert curl("http://127.0.0.1:10256/healthz", user=None)[1] in ("200", "503")


def test_the_lab_works_beside_the_cluster(cluster, bench):
    """The cluster's FORWARD guard must not drop the lab's bridged traffic (br_netfilter)."""
    run = bench("rps", PLATFORM="lab", DURATION="2s")
    assert run.rc == 0, run.err
    assert run.result["requests"] > 0 and run.result["errors"] == 0


def test_down_removes_only_ours(cluster):
    """Last: down; everything is as before up, the foreign objects included (compared in
    full: sysctls, rulesets, qdiscs, links, routes, netns, mounts, cgroups, sockets)."""
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    r = sh("bash", CLUSTER, "down", timeout=120)
    assert r.returncode == 0, r.stderr
    assert machine_state.diff(cluster["before_up"], machine_state.snapshot()) == []
