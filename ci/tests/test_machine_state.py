"""The machine's snapshot as the two streams share the machine (ci/tests/machine_state.py): a
session's snapshot leaves out the processes and listening sockets another session started,
and a diff beside the lab leaves out exactly the lab's kernel objects."""
import contextlib
import os
import shutil
import subprocess
import time

import machine_state
from conftest import ROOT, SESSION

# Constructed lines of each part, as the snapshot writes them: the lab's (bench/platforms/lab.sh)
# and, of the same kinds, the several-node cluster's and someone else's, which a diff beside the
# lab keeps.
LAB = {
    "links": ["4030: ibench0: <BROADCAST,UP> mtu 1500 qdisc noqueue state UP",
              "4031: ibv-client@if2: <BROADCAST,UP> mtu 1500 qdisc noqueue master ibench0 state UP"],
    "routes": ["198.18.0.0/24 dev ibench0 proto kernel scope link src 198.18.0.1", "blackhole 198.18.0.0/15",
               "local 198.18.0.1 dev ibench0 table local proto kernel scope host src 198.18.0.1"],
    "routes6": ["fe80::/64 dev ibv-be1 proto kernel metric 256 pref medium"],
    "qdiscs": ["qdisc noqueue 0: dev ibv-lb root refcnt 2"],
    "netns": ["ibench-be1 (id: 2)"],
    "mounts": ["nsfs /run/netns/ibench-be1 nsfs rw 0 0", "/dev/vda /run/netns ext4 rw,relatime 0 0"],
    "cgroups": ["/sys/fs/cgroup/cpuacct/ingress-bench", "/sys/fs/cgroup/cpu/ingress-bench/loadgen"],
}
OTHERS = {
    "links": ["4100: ibench-nodes: <BROADCAST,UP> mtu 1500 qdisc noqueue state UP",
              "4101: ibn-1@if2: <BROADCAST,UP> mtu 1500 qdisc noqueue master ibench-nodes state UP"],
    "routes": ["198.18.63.0/24 dev ibench-nodes proto kernel scope link src 198.18.63.1"],
    "routes6": ["fe80::/64 dev ibn-1 proto kernel metric 256 pref medium"],
    "qdiscs": ["qdisc tbf 1: dev tbfforeign root refcnt 2 rate 10Mbit"],
    "netns": ["cni-foreign-test"],
    "mounts": ["nsfs /run/netns/cni-foreign-test nsfs rw 0 0"],
    "cgroups": ["/sys/fs/cgroup/cpu/kubepods"],
    "iptables": ["-A INPUT -s 198.18.0.0/15 -j KUBE-FOREIGN-TEST"],
}


def test_a_diff_beside_the_lab_leaves_out_the_lab_and_only_it():
    before = {"sysctl": {"net.ipv4.ip_forward": "0"}, **{k: [] for k in {*LAB, *OTHERS}}}
    after = {"sysctl": {"net.ipv4.ip_forward": "1", "net.ipv4.conf.ibv-lb.forwarding": "0",
                        "net.ipv6.neigh.ibench0.retrans_time_ms": "1000", "net.ipv4.conf.ibn-1.forwarding": "1"}}
    for k in {*LAB, *OTHERS}:
        after[k] = LAB.get(k, []) + OTHERS.get(k, [])
    every = machine_state.diff(before, after)
    assert len(every) == sum(map(len, LAB.values())) + sum(map(len, OTHERS.values())) + 4, every
    others = ["sysctl: net.ipv4.conf.ibn-1.forwarding: (absent) -> 1", "sysctl: net.ipv4.ip_forward: 0 -> 1"]
    assert sorted(machine_state.diff(before, after, beside_lab=True)) == sorted(
        [f"{k}: + {l}" for k, ls in OTHERS.items() for l in ls] + others)
    # And the lab's objects going away are left out too.
    assert sorted(machine_state.diff(after, before, beside_lab=True)) == sorted(
        [f"{k}: - {l}" for k, ls in OTHERS.items() for l in ls]
        + ["sysctl: net.ipv4.conf.ibn-1.forwarding: 1 -> (absent)", "sysctl: net.ipv4.ip_forward: 1 -> 0"])


def started(tmp_path, name, session):
    """/bin/sleep copied as NAME, started with SESSION's mark (None: none)."""
    d = tmp_path / f"{name}-{session}"
    d.mkdir()
    shutil.copy("/bin/sleep", d / name)
    env = {k: v for k, v in os.environ.items() if k != "IB_TEST_SESSION"}
    if session:
        env["IB_TEST_SESSION"] = session
    return subprocess.Popen([str(d / name), "60"], env=env)


def test_a_snapshot_leaves_out_another_sessions_processes_and_sockets(tmp_path):
    """A k6 of this session is in the snapshot, another session's is not; a process without a
    mark is nobody's session's (a plain sleep: a k6 without one would be in the other stream's
    snapshots meanwhile); a socket another session's process listens on is left out."""
    ours, theirs, unmarked = started(tmp_path, "k6", SESSION), started(tmp_path, "k6", "another.1"), started(tmp_path, "sleep", None)
    server = subprocess.Popen(["python3", "-c", "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
                               "s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)"],
                              env={**os.environ, "IB_TEST_SESSION": "another.1"}, stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        time.sleep(0.2)
        seen = machine_state.our_processes()
        assert [any(str(p.args[0]) in c for c in seen) for p in (ours, theirs)] == [True, False], seen
        assert [machine_state.another_sessions(p.pid) for p in (ours, theirs, unmarked)] == [False, True, False]
        assert f"127.0.0.1:{port} " in machine_state.run("ss", "-Hltn")
        assert f"tcp 127.0.0.1:{port}" not in machine_state.listening()
    finally:
        for p in (ours, theirs, unmarked, server):
            p.kill()
            p.wait()


# A process whose leader thread has exited (pthread_exit) while another thread sleeps on with
# its listening socket: the state a killed multi-threaded daemon passes through.
LEADER_GONE = """
import ctypes, socket, threading, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
threading.Thread(target=time.sleep, args=(60,)).start()
libc = ctypes.CDLL(None)
libc.prctl(15, b"k6")  # PR_SET_NAME: one of the comms a snapshot lists
libc.pthread_exit(None)
"""


@contextlib.contextmanager
def leader_gone(session):
    """LEADER_GONE started with SESSION's mark, once its leader is a zombie: (process, port)."""
    p = subprocess.Popen(["python3", "-c", LEADER_GONE], env={**os.environ, "IB_TEST_SESSION": session},
                         stdout=subprocess.PIPE, text=True)
    try:
        port = p.stdout.readline().strip()
        time.sleep(0.2)
        with open(f"/proc/{p.pid}/stat") as f:
            assert f.read().split(") ")[1][0] == "Z"
        yield p, port
    finally:
        p.kill()
        p.wait()


def test_a_process_whose_leader_thread_is_a_zombie_is_live_while_another_thread_is_not():
    """Its leader's state is Z, yet its socket still listens: the snapshot and down's
    bench/lib/util.sh live() both count it as a live process."""
    with leader_gone(SESSION) as (p, port):
        bash = subprocess.run(["bash", "-c", f'. {ROOT}/bench/lib/util.sh; live {p.pid}'])
        assert ([bash.returncode], f"tcp 127.0.0.1:{port}" in machine_state.listening(),
                "k6" in machine_state.our_processes()) == ([0], True, True)  # its comm: a zombie has no cmdline


def test_another_sessions_process_whose_leader_thread_is_a_zombie_is_left_out():
    """The same process started by the other stream: its environment and its socket are read
    through its live thread (the leader's read as empty, and ss names no process for the
    socket), so neither is in this session's snapshot."""
    with leader_gone("another.1") as (p, port):
        assert (machine_state.another_sessions(p.pid), f"tcp 127.0.0.1:{port}" in machine_state.listening(),
                "k6" in machine_state.our_processes(), f"127.0.0.1:{port} " in machine_state.run("ss", "-Hltn")) \
            == (True, False, False, True)
