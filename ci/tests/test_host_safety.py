"""The local cluster as a guest on someone's machine: its nodes and control plane live in network
namespaces of their own, so it comes up beside another Kubernetes (its KUBE-* chains, a process
on a Kubernetes port) and its down removes only what it made, by structure (foreign chains,
netns, ifb devices and tbf qdiscs of the same kinds survive untouched, a chain made while it is
up too); a down with nothing up changes nothing; while it runs none of its processes listens in
the host's namespace, each listens on its namespace's loopback or address only, and refuses an
unauthenticated client, from the host and from the lab's client namespace; the lab runs beside it."""
import os
import re
import subprocess
from pathlib import Path

import pytest

import machine_state
from conftest import LAB, sh

# Snapshots of the whole machine around a cluster of its own, the lab beside it.
pytestmark = pytest.mark.whole_machine

CLUSTER = "bench/platforms/local/cluster.sh"
STATE = Path("/run/ingress-bench/cluster")  # bench/lib.sh IB_CLUSTER_STATE
PKI = STATE / "pki"
# The control plane's namespace and the one node's (conftest: NODES=1), with their addresses
# (bench/platforms/local/nodes.sh CP_IP, node_ip).
NAMESPACES = {"control plane": (STATE / "nodes/0/netns", "198.18.63.2"), "node": (STATE / "nodes/1/netns", "198.18.63.11")}
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
    foreign_objects(add=False)
    assert machine_state.diff(pristine, machine_state.snapshot()) == []


def test_down_with_nothing_up_changes_nothing(host):
    """Not even the KUBE-*/CNI-* chains of someone else (the old down ran kube-proxy --cleanup)."""
    r = sh("bash", CLUSTER, "down")
    assert r.returncode == 0, r.stderr
    assert machine_state.diff(host["with_foreign"], machine_state.snapshot()) == []


@pytest.fixture(scope="module")
def cluster(host, tmp_path_factory):
    """Up beside another Kubernetes: its KUBE-* chains (the foreign objects) and a process on
    the scheduler's port, 10259, on the host's loopback."""
    srv = subprocess.Popen(["python3", "-m", "http.server", "--bind", "127.0.0.1", "10259"], cwd=tmp_path_factory.mktemp("srv"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert sh("bash", "-c", ". bench/lib.sh; poll 5 bash -c 'ss -Hltn | grep -q 127.0.0.1:10259'").returncode == 0
        host["before_up"] = machine_state.snapshot()
        host["up"] = sh("bash", CLUSTER, "up", timeout=600)
        lab = sh("bash", "bench/platforms/lab.sh", "up", timeout=300)
        assert lab.returncode == 0, lab.stderr
        yield host
    finally:
        srv.terminate()
        srv.wait()


def test_up_beside_another_kubernetes(cluster):
    assert cluster["up"].returncode == 0, cluster["up"].stderr
    assert sh("bash", CLUSTER, "status").returncode == 0


def test_kernel_settings_the_kubelet_wants_are_not_written(cluster):
    """kernel.panic=10 and kernel.panic_on_oops=1 would reboot the user's machine 10 s after an
    oops: the kubelet checks them in its own mount namespace and never writes the host's."""
    now = machine_state.sysctls()
    for k in ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
              "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"):
        assert now[k] == cluster["before_up"]["sysctl"][k], k
    pid = (STATE / "pids/kubelet-1").read_text().strip()
    seen = sh("nsenter", "-t", pid, "-m", "cat", "/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops").stdout.split()
    assert seen == ["10", "1"], seen


def test_foreign_objects_survive_a_shaped_deploy(cluster):
    """deploy.sh cuts the bandwidth plugin's burst on our pod's devices only, in the node's
    namespace; the host's own tbf is as it was."""
    r = sh("bash", "bench/platforms/deploy.sh", env={"VARIANT": "nginx-lb-full-link-1g", "MONITORING": "0"}, timeout=300)
    assert r.returncode == 0, r.stderr
    ours = [l.split() for l in sh("bash", CLUSTER, "pod-links").stdout.splitlines()]
    shaped = []
    for netns, dev in ours:
        shaped += [(dev, l) for l in sh("nsenter", f"--net={netns}", "tc", "qdisc", "show", "dev", dev).stdout.splitlines() if " tbf " in l]
    assert len(shaped) == 2 and all("burst 1048500b" in l for _, l in shaped), shaped  # veth and its ifb
    assert any(dev.startswith("bwp") for dev, _ in shaped)
    on_host = [l for l in sh("tc", "qdisc", "show").stdout.splitlines() if " tbf " in l]
    assert len(on_host) == 1 and on_host[0].split()[4] == "tbfforeign" and FOREIGN_TBF in on_host[0], on_host
    assert "cni-foreign-test" in sh("ip", "netns", "list").stdout
    for dev in ("bwpforeign", "tbfforeign"):
        assert sh("ip", "link", "show", dev).returncode == 0


def curl(url, *args, ns=None, user=NOBODY):
    """(curl's exit code, HTTP status) of one GET; status 000 when no HTTP answer came. NS: from
    that network namespace (a path: nsenter; a name: ip netns exec)."""
    cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", *args, url]
    if ns:
        cmd = (["nsenter", f"--net={ns}"] if str(ns).startswith("/") else ["ip", "netns", "exec", ns]) + (user or []) + cmd
    r = sh(*([] if ns else user or []), *cmd)  # entering a namespace needs root
    return r.returncode, r.stdout.strip()


def cluster_sockets(ns=None):
    """(address, port, process) of every listening TCP socket of the cluster's processes in
    network namespace NS (a path; None: the host's)."""
    out = []
    for l in sh(*(["nsenter", f"--net={ns}"] if ns else []), "ss", "-Hltnp").stdout.splitlines():
        f = l.split()
        m = re.search(r'users:\(\("([^"]+)"', l)
        if m and m.group(1) in CLUSTER_COMMS:
            addr, _, port = f[3].rpartition(":")
            out.append((addr, int(port), m.group(1)))
    return sorted(out)


def admin(url, ns=None):
    """As the cluster's admin (-k: the controller manager and scheduler serve self-signed certificates)."""
    return curl(url, "-k", "--cert", str(PKI / "admin.crt"), "--key", str(PKI / "admin.key"), ns=ns, user=None)


def test_every_port_is_in_its_namespace_and_refuses_the_unauthenticated(cluster):
    """No socket of the cluster's in the host's namespace. In the control plane's and the node's,
    each on that namespace's loopback or its own address, never every interface; no 2xx/3xx
    to a client without credentials, in plain HTTP or in TLS: from the host (as an unprivileged
    user) for an address it reaches, from inside the namespace for its loopback, and nothing
    at all from the lab's client namespace (no route). kube-proxy's metrics and healthz take
    no credentials: they answer on the node's own loopback only. Controls: with the right
    credentials each answers 200, so a refusal is the authentication's, not a dead port's."""
    assert cluster_sockets() == []
    socks = {where: cluster_sockets(ns) for where, (ns, _) in NAMESPACES.items()}
    assert KUBE_PORTS <= {p for s in socks.values() for _, p, _ in s}, socks
    assert 10248 not in {p for _, p, _ in socks["node"]}  # the kubelet's unauthenticated healthz is off
    table = []
    for where, (ns, own) in NAMESPACES.items():
        for addr, port, proc in socks[where]:
            assert addr in ("127.0.0.1", own), (where, addr, port, proc)
            outcomes = {}
            for client, cns in (("host", None if addr == own else ns), ("lab", LAB["LAB_NS_PREFIX"] + "client")):
                for scheme in ("http", "https"):
                    # /healthz: the path components leave open to anonymous clients by default.
                    rc, code = curl(f"{scheme}://{addr}:{port}/healthz", "-k", ns=cns)
                    outcomes[f"{client} {scheme}"] = code if rc == 0 else f"curl exit {rc}"
                    if proc != "kube-proxy" or client == "lab":
                        assert not (rc == 0 and code[:1] in "23"), (where, client, scheme, addr, port, proc, code)
            # From the lab: unreachable (exit 7), never a TLS or HTTP reply.
            assert outcomes["lab http"] == outcomes["lab https"] == "curl exit 7", outcomes
            table.append((where, port, proc, addr, outcomes))
    print("\nnamespace      port  process          address        host http / https          lab http / https")
    for where, port, proc, addr, o in table:
        print(f"{where:<14} {port:<5} {proc:<16} {addr:<14} {o['host http']} / {o['host https']:<14} {o['lab http']} / {o['lab https']}")
    cp, node = NAMESPACES["control plane"][0], NAMESPACES["node"]
    # etcd: no client certificate, no data, plain or TLS (the TLS 1.3 handshake fails on the
    # missing certificate: curl 35, or 55/56 when the alert comes after its Finished).
    assert curl("http://127.0.0.1:2379/version", ns=cp)[1] in ("000", "400")
    assert curl("https://127.0.0.1:2379/version", "-k", ns=cp)[0] in (35, 55, 56)
    # Controls.
    etcd = curl("https://127.0.0.1:2379/version", "--cacert", str(PKI / "etcd-ca.crt"), "--cert", str(PKI / "etcd-client.crt"),
                "--key", str(PKI / "etcd-client.key"), ns=cp, user=None)
    assert etcd == (0, "200"), etcd
    assert admin(f"https://{NAMESPACES['control plane'][1]}:6443/readyz") == (0, "200")
    assert admin(f"https://{node[1]}:10250/healthz") == (0, "200")
    for url in ("https://127.0.0.1:10257/healthz", "https://127.0.0.1:10259/healthz"):
        assert admin(url, ns=cp) == (0, "200"), url
    assert curl("http://127.0.0.1:10249/metrics", ns=node[0], user=None) == (0, "200")
    assert curl("http://127.0.0.1:10256/healthz", ns=node[0], user=None)[1] in ("200", "503")


def test_the_lab_works_beside_the_cluster(cluster, bench):
    """The nodes' bridge and namespaces leave the lab's bridged traffic alone."""
    run = bench("rps", PLATFORM="lab", DURATION="2s")
    assert run.rc == 0, run.err
    assert run.result["requests"] > 0 and run.result["errors"] == 0


def test_down_removes_only_ours(cluster):
    """Last: a chain another program makes while the cluster is up (named as kube-proxy's),
    then down: everything is as before up, the foreign objects included, and that chain is
    there too (compared in full: sysctls, rulesets, qdiscs, links, routes, netns, mounts,
    cgroups, sockets)."""
    assert sh("bash", "bench/platforms/lab.sh", "down").returncode == 0
    assert sh("iptables", "-N", "KUBE-FOREIGN-WHILEUP").returncode == 0
    try:
        r = sh("bash", CLUSTER, "down", timeout=120)
        assert r.returncode == 0, r.stderr
        assert machine_state.diff(cluster["before_up"], machine_state.snapshot()) == ["iptables: + :KUBE-FOREIGN-WHILEUP -"]
    finally:
        sh("iptables", "-X", "KUBE-FOREIGN-WHILEUP")
