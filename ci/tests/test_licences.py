"""The licences: LICENSE and xk6/LICENSE are the texts NOTICE names, and NOTICE lists every
third-party component the pins name (ci/tools/versions.env, requirements.txt, every go.mod in
the tree, every package.json, the test venv), each under a licence the project may use that way;
every package an npm lockfile holds is under a permissive licence."""
import importlib.metadata
import json
import re

from conftest import PINS, ROOT

# Pins that name no component of their own: what it is built from is listed under another pin.
NOT_COMPONENTS = {
    "HELM_K8S_VERSION": "the Kubernetes version stamped into helm",
    "PROMETHEUS_MODULE_VERSION": "the module version of PROMETHEUS_VERSION",
    "NGINX_MIN": "a minimum version of the nginx package",
    "WRK_MIN": "a minimum version of the wrk package",
    "PAUSE_TAG": "the local pause image: this project's code",
    "NGINX_IMAGE_NAME": "the local nginx image: Debian's nginx",
    "NGINX_IMAGE_TAG": "the local nginx image: Debian's nginx",
    "COREDNS_IMAGE_NAME": "the local CoreDNS image: COREDNS_VERSION",
    "K6_IMAGE_NAME": "the local k6 image: K6_VERSION and busybox-static",
    "ENVOY_GATEWAY_IMAGE_NAME": "the local Envoy Gateway image: ENVOY_GATEWAY_VERSION",
    "ENVOY_IMAGE_NAME": "the local Envoy image: ENVOY_VERSION",
}
PACKAGE_LISTS = ("APT_PACKAGES", "CLUSTER_APT_PACKAGES")
# Debian packages installed outside the lists: node where it is missing, etcd's binary unpacked.
EXTRA_PACKAGES = {"nodejs": "ci/tools/tools.sh", "etcd-server": "bench/platforms/local/build.sh", "docker-registry": "ci/tools/tools.sh"}
PERMISSIVE = {"Apache-2.0", "MIT", "MIT-CMU", "BSD-2-Clause", "BSD-3-Clause", "ISC", "PSF-2.0", "curl"}
RUN_ONLY = {"GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-or-later"}
AGPL = {"go.k6.io/k6", "grafana/k6"}


def notice_rows():
    text = (ROOT / "NOTICE").read_text()
    table = text.split("\ncomponent ", 1)[1].splitlines()[1:]
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=3) for line in table if line.strip()]
    bad = [r for r in rows if len(r) != 4]
    assert not bad, f"NOTICE rows need component, source, licence and use, 2+ spaces apart: {bad}"
    return [dict(zip(("component", "source", "licence", "use"), r)) for r in rows]


def go_mods():
    return sorted(p for p in ROOT.rglob("go.mod") if ".git" not in p.parts)


def test_the_licence_files_are_the_texts_notice_names():
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()
    agpl = (ROOT / "xk6/LICENSE").read_text()
    assert "GNU AFFERO GENERAL PUBLIC LICENSE" in agpl and "Version 3, 19 November 2007" in agpl
    notice = (ROOT / "NOTICE").read_text()
    assert "Apache License 2.0 (LICENSE)" in notice and "v3.0 (xk6/LICENSE)" in notice


def test_every_pin_names_a_listed_component():
    sources = " ".join(r["source"] for r in notice_rows())
    unlisted = [v for v in PINS if v not in NOT_COMPONENTS and v not in PACKAGE_LISTS
                and f"versions.env:{v}" not in sources]
    assert not unlisted, f"pins of ci/tools/versions.env that NOTICE does not list: {unlisted}"


def test_every_debian_package_is_listed_and_no_other():
    p = PINS
    for name, script in EXTRA_PACKAGES.items():
        assert name in (ROOT / script).read_text(), f"{name} is no longer installed by {script}"
    wanted = {w for v in PACKAGE_LISTS for w in p[v].split()} | set(EXTRA_PACKAGES)
    listed = {r["component"] for r in notice_rows() if r["source"] == "apt"}
    assert listed == wanted, f"missing from NOTICE: {sorted(wanted - listed)}; not installed: {sorted(listed - wanted)}"


def test_every_python_requirement_and_installed_distribution_is_listed():
    listed = {r["component"].lower() for r in notice_rows()}
    reqs = re.findall(r"^([A-Za-z0-9_.-]+)==", (ROOT / "ci/tools/requirements.txt").read_text(), re.M)
    assert reqs and not [r for r in reqs if r.lower() not in listed]
    # The venv the tests run in is the one tools.sh made from requirements.txt.
    installed = {d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()}
    assert set(r.lower() for r in reqs) <= installed
    assert not installed - listed, f"installed in the venv, missing from NOTICE: {sorted(installed - listed)}"
    stale = {r["component"] for r in notice_rows() if r["source"].startswith("pip (")} - installed
    assert not stale, f"NOTICE lists Python packages the venv does not hold: {sorted(stale)}"


def test_every_direct_go_requirement_is_listed():
    rows = notice_rows()
    for mod in go_mods():
        rel = str(mod.relative_to(ROOT))
        text = mod.read_text()
        direct = re.findall(r"^\s*(?:require\s+)?([a-z0-9.-]+\.[a-z]+/\S+) v\S+\s*$", text, re.M)
        missing = [d for d in direct if not any(r["component"] == d and rel in r["source"] for r in rows)]
        assert not missing, f"{rel} requires {missing}, which NOTICE does not list with source {rel}"


def test_only_the_extension_links_agpl_and_gpl_is_only_run():
    for r in notice_rows():
        lic = r["licence"]
        assert lic in PERMISSIVE | RUN_ONLY | {"AGPL-3.0"}, f"{r['component']}: licence {lic} is not one the project may use"
        if lic == "AGPL-3.0":
            assert r["component"] in AGPL, f"{r['component']} is AGPL-3.0: only k6 (linked by xk6/) may be"
        if lic in RUN_ONLY:
            assert r["use"].startswith("installed:"), f"{r['component']} is {lic}: it may only be run"
    linking = [str(m.relative_to(ROOT)) for m in go_mods() if "go.k6.io/k6" in m.read_text() and m.parent.name != "xk6"]
    assert not linking, f"modules outside xk6/ that link k6 (AGPL-3.0): {linking}"


# The licences npm packages may have here: permissive ones (BlueOak-1.0.0 is; CC-BY-4.0 is
# caniuse-lite's data, read at build time only).
NPM_LICENCES = PERMISSIVE | {"0BSD", "BlueOak-1.0.0", "(MIT OR Apache-2.0)", "CC-BY-4.0"}
# Packages whose lockfile entry names no licence, as their own LICENSE file says.
NPM_UNDECLARED = {"@perses-dev/prometheus-plugin": "Apache-2.0", "@perses-dev/stat-chart-plugin": "Apache-2.0",
                  "@perses-dev/timeseries-chart-plugin": "Apache-2.0", "typed-function": "MIT"}


def npm_projects():
    return sorted(p.parent for p in ROOT.rglob("package-lock.json") if "node_modules" not in p.parts and ".git" not in p.parts)


def test_every_npm_dependency_is_listed_and_every_locked_package_permissive():
    rows = {(r["component"], r["source"]): r for r in notice_rows()}
    assert npm_projects(), "no package-lock.json found"
    for project in npm_projects():
        rel = project.relative_to(ROOT)
        pkg = json.loads((project / "package.json").read_text())
        direct = {**pkg.get("dependencies", {}), **pkg.get("devDependencies", {})}
        unlisted = [d for d in direct if (d, f"{rel}/package.json") not in rows]
        assert not unlisted, f"{rel}/package.json's dependencies missing from NOTICE: {unlisted}"
        locked = json.loads((project / "package-lock.json").read_text())["packages"]
        odd = {}
        for path, entry in locked.items():
            if not path:
                continue
            name = path.rsplit("node_modules/", 1)[1]
            licence = entry.get("license") or NPM_UNDECLARED.get(name)
            if licence not in NPM_LICENCES:
                odd[name] = licence
            elif name in direct and rows[(name, f"{rel}/package.json")]["licence"] != licence:
                odd[name] = f"{licence}, NOTICE says {rows[(name, f'{rel}/package.json')]['licence']}"
        assert not odd, f"{rel}/package-lock.json: packages under a licence not allowed here: {odd}"
