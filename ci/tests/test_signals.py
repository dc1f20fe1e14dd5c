"""The signal contract as data (monitoring/signals.yaml): its generated views are what the
generator makes, the check catches a hand edit, a signal a consumer reads that the contract
lacks, and a signal without a promtool expectation; the verdict (k6/lib/signals.js, read by
node) and the dashboard (its JSON) agree on every saturation level. Static: no lab, no cluster."""
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, sh

sys.path.insert(0, str(ROOT / "monitoring"))
import signals as contract  # noqa: E402  (monitoring/signals.py)

GENERATED = ["monitoring/lab/rules.yaml", "kustomize/components/monitoring/rules.yaml",
             "kustomize/components/monitoring/link-capacity.yaml", "k6/lib/signals.js", "monitoring/README.md"]
# What the generator reads and checks: the contract, its views, the consumers, the fixtures.
TREE = ["monitoring", "kustomize/components/monitoring", "k6/lib", "dashboards"]


@pytest.fixture
def copy(tmp_path):
    """A copy of the checkout's contract, views and consumers, to break."""
    for rel in TREE:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dst)
    return tmp_path


def generate(root, *args):
    """The copy's own generator (it imports the copy's monitoring/signals.py) on the copy."""
    return subprocess.run([sys.executable, str(root / "monitoring/generate.py"), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120)


def errors(r):
    """The problems the generator reported, one line each (after what it wrote, if anything)."""
    lines = [line for line in r.stderr.splitlines() if not line.startswith("wrote ")]
    assert lines and all(line.startswith("error: ") for line in lines), r.stderr
    return lines


def js_contract(path=ROOT / "k6/lib/signals.js"):
    """k6/lib/signals.js as node evaluates it."""
    script = (f"import({json.dumps(path.as_uri())}).then((m) => console.log(JSON.stringify("
              "{ SIGNALS: m.SIGNALS, SATURATION: m.SATURATION, LIMITS: m.LIMITS, RULE_WINDOW_S: m.RULE_WINDOW_S })))")
    r = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_generated_files_are_what_the_contract_makes(copy):
    r = sh(sys.executable, "monitoring/generate.py", "--check")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    # Deterministic: regenerated from scratch, every view is byte for byte the committed one.
    for rel in GENERATED[:-1]:
        (copy / rel).unlink()
    r = generate(copy)
    assert r.returncode == 0, r.stderr
    for rel in GENERATED:
        assert (copy / rel).read_bytes() == (ROOT / rel).read_bytes(), rel


HAND_EDITS = {
    "monitoring/lab/rules.yaml": ("[6s]", "[10s]"),
    "kustomize/components/monitoring/rules.yaml": ("interval: 2s", "interval: 5s"),
    "kustomize/components/monitoring/link-capacity.yaml": ("vector(10e9)", "vector(1e9)"),
    "k6/lib/signals.js": ("nic_utilization: 0.85", "nic_utilization: 0.95"),
    "monitoring/README.md": ("| `bench:nic_drops:rate` | packets/s", "| `bench:nic_drops:rate` | pps"),
}


@pytest.mark.parametrize("rel", GENERATED)
def test_check_names_a_hand_edited_file(rel, copy):
    old, new = HAND_EDITS[rel]
    text = (copy / rel).read_text()
    assert old in text, f"{old!r} not in {rel}"
    (copy / rel).write_text(text.replace(old, new, 1))
    r = generate(copy, "--check")
    assert r.returncode == 1
    assert errors(r) == [f"error: {rel} differs from what monitoring/signals.yaml makes (edited by hand, or "
                         "stale): run python monitoring/generate.py and commit both"]
    # The generator puts it back.
    assert generate(copy).returncode == 0 and (copy / rel).read_text() == text
    assert generate(copy, "--check").returncode == 0


def add_line(rel, line):
    def edit(root):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + line + "\n")
    return edit


def dashboard_reads(rule):
    def edit(root):
        path = root / "dashboards/ingress-bench.json"
        dash = json.loads(path.read_text())
        panel = next(p for p in dash["panels"] if p.get("title") == "Ingress request rate")
        panel["targets"][0]["expr"] = f"sum({rule})"
        path.write_text(json.dumps(dash, indent=2))
    return edit


UNKNOWN = {
    "correlation": (add_line("k6/lib/correlation.js", "export const EXTRA = 'bench:made_up:ratio';"),
                    "k6/lib/correlation.js", "bench:made_up:ratio is not a signal of the contract"),
    "dashboard": (dashboard_reads("bench:made_up:ratio"), "dashboards/ingress-bench.json",
                  "bench:made_up:ratio is not a signal of the contract"),
    "a bench/ script reads a helper": (add_line("bench/report/roles.py", "ROLES = 'group by (role) (bench:pod_role:info)'"),
                                    "bench/report/roles.py", "bench:pod_role:info is an internal helper of the contract"),
    "dashboard reads a helper": (dashboard_reads("bench:backend_cpu_limit:cores"), "dashboards/ingress-bench.json",
                                 "bench:backend_cpu_limit:cores is an internal helper of the contract"),
}


@pytest.mark.parametrize("case", UNKNOWN)
def test_check_names_a_signal_a_consumer_reads_but_the_contract_lacks(case, copy):
    edit, rel, problem = UNKNOWN[case]
    edit(copy)
    r = generate(copy, "--check")
    assert r.returncode == 1
    (line,) = errors(r)
    assert re.match(rf"error: {re.escape(rel)}:\d+: {re.escape(problem)}", line), line
    if rel.startswith("dashboards/"):  # and the linter refuses the dashboard
        r = subprocess.run([sys.executable, str(copy / "dashboards/lint.py"), str(copy / rel)],
                           capture_output=True, text=True)
        assert r.returncode == 1 and problem.split()[0] + " is neither a bench:* rule" in r.stdout, r.stdout


@pytest.mark.parametrize("platform", contract.PLATFORMS)
def test_check_names_a_signal_without_a_promtool_expectation(platform, copy):
    path = copy / f"monitoring/tests/{platform}.test.yaml"
    test = yaml.safe_load(path.read_text())
    exprs = test["tests"][0]["promql_expr_test"]
    exprs[:] = [e for e in exprs if "bench:nic_drops:rate" not in e["expr"]]
    path.write_text(yaml.safe_dump(test))
    r = generate(copy, "--check")
    assert r.returncode == 1
    assert errors(r) == [f"error: monitoring/tests/{platform}.test.yaml: no expectation for bench:nic_drops:rate "
                         "(each platform's promtool test covers every signal)"]


NEW_SIGNAL = """
  - record: bench:backend_requests:rate
    key: backend_rps
    unit: req/s
    meaning: requests/s the backends served
    source: nginx-prometheus-exporter on the backends
    expr: sum(rate(nginx_http_requests_total{role="backend"}[$window]))
"""


def test_a_new_signal_is_one_entry_plus_its_promtool_expectations(copy):
    """Added to signals.yaml: the generator writes it into every view, and asks for its tests."""
    (copy / "monitoring/signals.yaml").write_text((copy / "monitoring/signals.yaml").read_text() + NEW_SIGNAL)
    r = generate(copy)
    assert r.returncode == 1
    assert errors(r) == [
        f"error: monitoring/tests/{p}.test.yaml: no expectation for bench:backend_requests:rate "
        "(each platform's promtool test covers every signal)" for p in contract.PLATFORMS]
    rule = {"record": "bench:backend_requests:rate", "expr": 'sum(rate(nginx_http_requests_total{role="backend"}[6s]))'}
    assert yaml.safe_load((copy / "monitoring/lab/rules.yaml").read_text())["groups"][0]["rules"][-1] == rule
    cluster = yaml.safe_load((copy / "kustomize/components/monitoring/rules.yaml").read_text())
    assert cluster["spec"]["groups"][0]["rules"][-1] == rule
    assert js_contract(copy / "k6/lib/signals.js")["SIGNALS"]["backend_rps"] == "bench:backend_requests:rate"
    assert "| `bench:backend_requests:rate` | req/s | `backend_rps` |" in (copy / "monitoring/README.md").read_text()
    r = subprocess.run([sys.executable, "-c", "import signals; print(signals.report_signals()['backend_rps'])"],
                       cwd=copy / "monitoring", capture_output=True, text=True)
    assert r.stdout.strip() == "('rate', 'bench:backend_requests:rate', 'requests/s the backends served')", r.stderr


def signal(c, record):
    return next(s for s in c["signals"] if s["record"] == record)


def move_first(c, record):
    c["signals"].insert(0, c["signals"].pop(c["signals"].index(signal(c, record))))


def link_rule_second(c):
    c["signals"].insert(0, dict(record="bench:link_other:bits", group="bench-link", internal=True, meaning="x",
                                expr="vector(1)"))


BAD_CONTRACTS = {
    "ratio before what it divides": (
        lambda c: move_first(c, "bench:rps_per_ingress_core:ratio"),
        "bench:rps_per_ingress_core:ratio reads bench:ingress_cpu_cores:rate, which comes after it in group "
        "bench-signals"),
    "a signal missing on one platform": (
        lambda c: signal(c, "bench:nic_drops:rate")["expr"].pop("lab"),
        "bench:nic_drops:rate: no expr for lab"),
    "an unknown unit": (
        lambda c: signal(c, "bench:nic_drops:rate").update(unit="drops"),
        "bench:nic_drops:rate: unit 'drops' is not one of"),
    "a saturation level without a verdict": (
        lambda c: signal(c, "bench:nic_drops:rate").update(saturation=0.5),
        "bench:nic_drops:rate: a saturation level and a verdict go together"),
    "a rule the contract lacks": (
        lambda c: signal(c, "bench:nic_utilization:ratio").update(
            expr="bench:nic_bits:rate / scalar(bench:link_capacity:bits)"),
        "bench:nic_utilization:ratio reads bench:nic_bits:rate, which is not a signal of the contract"),
    "the link capacity moved": (
        link_rule_second,
        "bench:link_capacity:bits must be the first rule of group bench-link"),
    "a placeholder no run fills": (
        lambda c: signal(c, "bench:nic_drops:rate")["expr"].update(existing="sum(rate(drops{$pods}[$window]))"),
        "bench:nic_drops:rate: expr for existing holds a '$' other than $backend, $ingress, $link, $loadgen, $nic, $nodes, $window"),
    "an existing ingress's placeholder on the cluster": (
        lambda c: signal(c, "bench:nic_drops:rate")["expr"].update(cluster="sum(rate(drops{$ingress}[$window]))"),
        "bench:nic_drops:rate: expr for cluster holds a '$' other than $window"),
    "a matcher on a rule an existing ingress's query writes out": (
        lambda c: signal(c, "bench:ingress_cpu_utilization:ratio")["expr"].update(
            existing='sum(bench:ingress_cpu_cores:rate{pod="a"}) / sum(bench:ingress_cpu_limit:cores)'),
        "bench:ingress_cpu_utilization:ratio selects from bench:ingress_cpu_cores:rate on existing"),
}


def test_a_rule_written_out_is_the_rules_it_reads_in_parentheses():
    """contract.inlined: what k6 asks an existing ingress's Prometheus for each signal
    (k6/lib/signals.js EXISTING_QUERIES) is the rule with each rule it reads, recursively,
    replaced by that rule's expression; placeholders stay for the run to fill."""
    c = contract.load()
    cores = contract.inlined(c, "existing", "bench:ingress_cpu_cores:rate")
    limit = contract.inlined(c, "existing", "bench:ingress_cpu_limit:cores")
    assert contract.inlined(c, "existing", "bench:ingress_cpu_utilization:ratio") == f"sum(({cores})) / sum(({limit}))"
    assert contract.inlined(c, "existing", "bench:rps_per_ingress_core:ratio").endswith(f" / sum(({cores}))")
    assert not any(contract.RECORD.search(contract.inlined(c, "existing", s["record"])) for s in contract.keyed(c))
    assert contract.fill("a{$ingress}[$window]", ingress='pod="x"', window="90s") == 'a{pod="x"}[90s]'
    with pytest.raises(KeyError):
        contract.fill("vector($link)")


@pytest.mark.parametrize("case", BAD_CONTRACTS)
def test_the_generator_refuses_a_bad_contract_in_one_line(case, copy):
    edit, problem = BAD_CONTRACTS[case]
    path = copy / "monitoring/signals.yaml"
    c = yaml.safe_load(path.read_text())
    edit(c)
    path.write_text(yaml.safe_dump(c, sort_keys=False, allow_unicode=True))
    before = {rel: (copy / rel).read_text() for rel in GENERATED}
    r = generate(copy)
    assert r.returncode == 1
    (line,) = errors(r)
    assert problem in line, line
    assert {rel: (copy / rel).read_text() for rel in GENERATED} == before  # nothing written


def red_threshold_panels(dash):
    """{rule: [(panel title, steps)]} of every panel with thresholds that queries one bench:* rule."""
    out = {}
    for p in dash["panels"]:
        steps = p.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps")
        exprs = [t["expr"] for t in p.get("targets", [])]
        rules = {n for e in exprs for n in re.findall(r"bench:\w+:\w+", e)}
        if steps and len(rules) == 1:
            out.setdefault(rules.pop(), []).append((p["title"], steps))
    return out


def test_the_verdicts_levels_are_the_dashboards_red_thresholds():
    """From what node loads of k6/lib/signals.js and from the generated dashboard JSON."""
    k6 = js_contract()
    dash = json.loads((ROOT / "dashboards/ingress-bench.json").read_text())
    panels = red_threshold_panels(dash)
    assert [lim["key"] for lim in k6["LIMITS"]] == list(k6["SATURATION"])
    for key, level in k6["SATURATION"].items():
        rule = k6["SIGNALS"][key]
        assert panels.get(rule), f"no panel colours {rule}"
        for title, steps in panels[rule]:
            reds = [s["value"] for s in steps if s["color"] == "red"]
            assert reds == [level], (title, steps)
            # Red starts exactly there: every step below it is another colour, none above it.
            assert steps and all(s["value"] is None or s["value"] < level for s in steps if s["color"] != "red"), (title, steps)
    # The stat panels of the summary row are among them: ingress CPU, NIC, load generator.
    stats = {p["title"] for p in dash["panels"] if p["type"] == "stat"}
    assert {"Ingress CPU", "NIC", "Load generator CPU"} <= stats & {t for v in panels.values() for t, _ in v}


def test_k6_and_the_report_read_the_same_contract():
    k6, c = js_contract(), contract.load()
    assert k6["SIGNALS"] == {s["key"]: s["record"] for s in contract.keyed(c)}
    assert k6["RULE_WINDOW_S"] == 6 and c["window"] == "6s"
    assert list(contract.report_signals()) == list(k6["SIGNALS"])
    assert [(lim["key"], lim["limit"], lim["valid"]) for lim in k6["LIMITS"]] == [
        ("loadgen_cpu_utilization", "load-generator", False), ("nic_utilization", "nic", True),
        ("ingress_cpu_utilization", "ingress-cpu", True), ("backend_cpu_utilization", "backend", True)]
    assert k6["SATURATION"] == {"loadgen_cpu_utilization": 0.9, "nic_utilization": 0.85,
                                "ingress_cpu_utilization": 0.9, "backend_cpu_utilization": 0.9}


def test_bash_and_k6_reckon_one_steady_window_for_an_ingress_you_run():
    """The shortest load with a steady window on an ingress you run, at each scrape interval: the
    DURATION bash gives a run (bench/lib/existing.sh existing_steady_s) is the steady window k6's
    correlation then looks for (k6/lib/correlation.js steadyMinS(existingTiming(i)))."""
    intervals = [1, 2, 5, 7, 8, 14, 15, 16, 30, 60]
    js = ("import('./k6/lib/correlation.js').then((m) => console.log(JSON.stringify("
          f"{intervals}.map((i) => m.steadyMinS(m.existingTiming(i))))))")
    k6 = sh("node", "--input-type=module", "-e", js)
    bash = sh("bash", "-c", '. bench/lib.sh; for i in "$@"; do existing_steady_s "$i"; done', "_", *map(str, intervals))
    assert k6.returncode == 0 and bash.returncode == 0, k6.stderr + bash.stderr
    assert [int(x) for x in bash.stdout.split()] == json.loads(k6.stdout)
