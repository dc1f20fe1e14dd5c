"""ci/tools/tools.sh as a guest on the user's machine: distribution packages accepted from a
minimum version, and the Debian install path (`tools.sh apt`) run for real with a small package
that has a service (anacron: sysv script, systemd service and timer), then purged again."""
import contextlib
import fcntl
import glob
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, sh

POLICY = Path("/usr/sbin/policy-rc.d")
PACKAGE = "anacron"


def fake_tools(tmp_path, nginx, wrk):
    """nginx and wrk that print the given versions, first on PATH."""
    d = tmp_path / "bin"
    d.mkdir(parents=True)
    (d / "nginx").write_text(f"#!/bin/sh\necho 'nginx version: nginx/{nginx}' >&2\n")
    (d / "wrk").write_text(f"#!/bin/sh\necho 'wrk {wrk} [epoll] Copyright (C) 2012 Will Glozer'\n")
    for f in d.iterdir():
        f.chmod(0o755)
    return {"PATH": f"{d}:{os.environ['PATH']}"}


@pytest.mark.parametrize("nginx,wrk,error", [
    ("1.18.0", "4.1.0", "error: nginx is 1.18.0; the suite needs nginx 1.22 or newer"),
    ("1.26.3", "4.0.2", "error: wrk is 4.0.2; the suite needs wrk 4.1 or newer"),
])
def test_old_distribution_versions_refused_in_one_line(tmp_path, nginx, wrk, error):
    r = sh("bash", "ci/tools/tools.sh", env=fake_tools(tmp_path, nginx, wrk))
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == error


def test_newer_distribution_versions_accepted(tmp_path):
    """Debian 13's nginx 1.26 and wrk 4.1.0-4: what the exact-series check refused."""
    r = sh("bash", "ci/tools/tools.sh", env=fake_tools(tmp_path, "1.26.3", "debian/4.1.0-4"))
    assert r.returncode == 0, r.stderr
    assert "nginx 1.26.3, wrk 4.1.0-4 ready" in r.stderr
    versions = dict(l.split("=", 1) for l in sh("bash", "ci/tools/tools.sh", "versions",
                                                   env=fake_tools(tmp_path / "v", "1.26.3", "4.1.0")).stdout.splitlines())
    assert (versions["nginx"], versions["nginx_min"], versions["wrk"], versions["wrk_min"]) == ("1.26.3", "1.22", "4.1.0", "4.1")


@pytest.mark.parametrize("go, error", [
    (None, "error: building task {task} needs Go {min} or newer: install it from go.dev (or your distribution), then re-run"),
    ("go1.24.4", "error: building task {task} needs Go {min} or newer, found go1.24.4: install a newer one from go.dev, then re-run"),
])
def test_missing_or_old_go_refused_in_one_line(tmp_path, go, error):
    """What users type on a fresh machine, with no Go or Debian 13's 1.24: ./task builds go-task
    first, so that is the first build to refuse; the minimum comes from xk6/go.mod."""
    d = tmp_path / "bin"
    d.mkdir()
    if go:
        (d / "go").write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo {go} && exit 0\nexit 1\n')
        (d / "go").chmod(0o755)
    minimum = next(l.split()[1] for l in (ROOT / "xk6/go.mod").read_text().splitlines() if l.startswith("go "))
    r = sh("./task", "tools", env={"IB_CACHE": str(tmp_path / "cache"), "PATH": f"{d}:/usr/sbin:/usr/bin:/sbin:/bin"})
    assert r.returncode == 1
    task = next(l.split("=", 1)[1] for l in (ROOT / "ci/tools/versions.env").read_text().splitlines() if l.startswith("TASK_VERSION="))
    assert r.stderr.strip().splitlines() == [error.format(min=minimum, task=task)]


def test_a_second_build_waits_for_the_first():
    """Two builds into one cache (a suite's and a benchmark's) would move each other's files
    away: the second waits for the first's lock, then goes on."""
    cache = Path(os.environ.get("IB_CACHE", Path.home() / ".cache/ingress-bench"))
    with open(cache / ".build.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        p = subprocess.Popen(["bash", "ci/tools/tools.sh", "task"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        assert p.poll() is None, "the second build did not wait"
    assert p.wait(timeout=30) == 0
    assert "waiting for another build into" in p.stderr.read()


def installed():
    out = sh("dpkg-query", "-W", "-f=${db:Status-Status} ${Package}\n").stdout
    return {l.split()[1] for l in out.splitlines() if l.startswith("installed ")}


def boot_links():
    return set(glob.glob("/etc/rc?.d/*")) | set(glob.glob("/etc/systemd/system/*.wants/*"))


@contextlib.contextmanager
def policy(present):
    """POLICY as the test needs it (a foreign one, or none), the host's own put back after:
    same bytes, same mode and times. Moved aside by rename on the same file system; the heavy
    lock the tests run under keeps every other apt-get away meanwhile."""
    saved = POLICY.with_name(".policy-rc.d.ib-test-saved")
    had = POLICY.exists()
    before = (POLICY.read_bytes(), os.stat(POLICY)) if had else None
    if had:
        os.rename(POLICY, saved)
    try:
        if present:
            POLICY.write_text("#!/bin/sh\n# not ours\nexit 101\n")
            POLICY.chmod(0o755)
        yield
    finally:
        if POLICY.exists():
            POLICY.unlink()
        if had:
            os.rename(saved, POLICY)
            st = os.stat(POLICY)
            assert (POLICY.read_bytes(), st.st_mode, st.st_mtime_ns) == (before[0], before[1].st_mode, before[1].st_mtime_ns)


@pytest.fixture
def guest_install():
    """The machine as found: PACKAGE absent before; whatever the test's install added (PACKAGE
    and its new dependencies) purged after."""
    if PACKAGE in installed():
        pytest.skip(f"{PACKAGE} is installed on this host: the test would not leave it as found")
    before, links = installed(), boot_links()
    yield before
    added = sorted(installed() - before)
    if added:
        subprocess.run(["apt-get", "purge", "-y", "-qq", *added], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                       capture_output=True, check=True, timeout=300)
    assert installed() == before
    assert boot_links() == links


@pytest.mark.parametrize("foreign_policy", [False, True])
def test_install_leaves_no_policy_and_no_boot_start(guest_install, foreign_policy):
    """Ours is removed; one that was there (a container image's) is left as it was."""
    links_before = boot_links()
    with policy(present=foreign_policy):
        theirs = POLICY.read_bytes() if foreign_policy else None
        r = sh("bash", "ci/tools/tools.sh", "apt", PACKAGE, timeout=600)
        assert r.returncode == 0, r.stderr
        assert PACKAGE in installed()
        assert (POLICY.read_bytes() if POLICY.exists() else None) == theirs
    new = boot_links() - links_before
    # Its postinst made start links (update-rc.d defaults); they are now stop links only.
    assert new and all(Path(l).name.startswith("K") and Path(l).name.endswith(PACKAGE) for l in new), new
    assert not [l for l in boot_links() if PACKAGE in Path(l).name and not Path(l).name.startswith("K")]
    # What was installed before keeps its boot setup.
    assert links_before <= boot_links()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_apt_leaves_no_policy(guest_install, sig, code):
    with policy(present=False):
        signal_during_apt(sig, code)


def signal_during_apt(sig, code):
    p = subprocess.Popen(["bash", "ci/tools/tools.sh", "apt", PACKAGE], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    apt = ""
    while time.time() < deadline and p.poll() is None:
        apt = sh("pgrep", "-P", str(p.pid), "-x", "apt-get").stdout.strip()
        if apt and POLICY.exists():
            break
        time.sleep(0.02)
    assert apt and POLICY.exists(), "apt-get never ran under tools.sh's policy-rc.d"
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    assert not POLICY.exists()
    # apt-get was stopped with it, not left to finish without the policy, and dpkg is consistent.
    assert not Path(f"/proc/{apt}").exists()
    assert sh("dpkg", "--audit").stdout.strip() == ""
