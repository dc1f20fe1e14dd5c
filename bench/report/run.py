"""A run as its directory holds it: meta.json and summary.json (k6/lib/summary.js, completed by
summary.py), and the time series fetched into timeseries.json (prometheus.py)."""
import errno
import functools
import json
import os
import re
import sys
import urllib.parse
from datetime import datetime
from pathlib import Path

from .fmt import num

ROOT = Path(__file__).resolve().parents[2]
# The signal contract (monitoring/signals.yaml, read by monitoring/signals.py).
sys.path.insert(0, str(ROOT / "monitoring"))
import signals as contract  # noqa: E402

# summary.json .correlation.signals: name -> (unit, recording rule, meaning), in the contract's order.
SIGNALS = contract.report_signals()
# The rules' rate window: the client's series are rated over the same, so the two line up.
RULE_WINDOW = contract.load()["window"]
# verdict.limit -> the utilization that names it (the bar drawn in red).
LIMIT_SIGNAL = {s["verdict"]["limit"]: s["key"] for s in contract.limits(contract.load())}


class Bad(Exception):
    """Bad input: main() prints it as one line and exits 2."""


PROFILE = re.compile(r"^export const profile = (\{.*?\n\});$", re.M | re.S)


@functools.lru_cache(maxsize=None)
def profile(scenario):
    """A scenario's profile as its file k6/SCENARIO.js holds it (its defaults and its headline
    figure: key, title, path in summary.json, unit, format), the JSON after
    `export const profile =` (k6/lib/profiles.mjs reads it the same way for node)."""
    path = ROOT / "k6" / f"{scenario}.js"
    m = PROFILE.search(path.read_text()) if path.exists() else None
    if not m:
        raise Bad(f"no scenario {scenario!r} with a profile (k6/{scenario}.js: export const profile = {{...}};)")
    return json.loads(m.group(1))


def f_headline(scenario, v, unit=True):
    """v as the scenario's headline figure: its profile's format, and unit."""
    h = profile(scenario)["headline"]
    return "–" if not num(v) else f"{v:{h['format']}}" + (f" {h['unit']}" if unit else "")


def dig(doc, path):
    """doc's value at a dotted path (result.rps), or None."""
    for k in path.split("."):
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except ValueError as e:
        # Cut short on a filesystem that is full (k6 writes what fits and goes on): the full
        # disk is the error, said as a write's (exit 3), not the JSON's.
        st = os.statvfs(Path(path).parent)
        if st.f_bavail <= 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        raise Bad(f"{path} is not readable JSON: {e}")
    except OSError as e:
        raise Bad(f"{path} is not readable JSON: {e}")


class Run:
    def __init__(self, path):
        d = Path(path)
        if not d.is_dir():
            raise Bad(f"{d}: no such run directory")
        for f in ("meta.json", "summary.json"):
            if not (d / f).is_file():
                raise Bad(f"{d} is not a run directory: it has no {f}")
        self.dir, self.meta, self.summary = d, read_json(d / "meta.json"), read_json(d / "summary.json")
        if not isinstance(self.meta, dict) or not isinstance(self.summary, dict) \
                or not isinstance(self.summary.get("result"), dict) or not num(self.summary["result"].get("rps")):
            raise Bad(f"{d}/summary.json has no .result.rps: not a finished run")

    def _part(self, key):
        v = self.summary.get(key)
        return v if isinstance(v, dict) else {}

    result = property(lambda s: s.summary["result"])
    client = property(lambda s: s._part("client"))
    server = property(lambda s: s._part("server"))
    correlation = property(lambda s: s._part("correlation"))
    verdict = property(lambda s: s._part("verdict"))
    testid = property(lambda s: str(s.meta.get("testid") or s.dir.name))
    scenario = property(lambda s: str(s.meta.get("scenario") or s.result.get("scenario") or "?"))
    variant = property(lambda s: variant_now(str(s.meta.get("variant") or "?")))
    # The platform's cluster trait (bench/platforms/driver.sh): none (bare metal), own, user. A
    # run from before meta.json said it: none when it ran the lab's backends.
    cluster = property(lambda s: s.meta.get("cluster") or ("none" if s.meta.get("lab_backends") is not None else "own"))
    platform = property(lambda s: str(s.meta.get("platform") or "?"))
    target = property(lambda s: str(s.meta.get("target") or ""))
    scheme = property(lambda s: urllib.parse.urlsplit(s.target).scheme or "?")
    path = property(lambda s: urllib.parse.urlsplit(s.target).path or "/")
    invalid = property(lambda s: s.verdict.get("valid") is False)

    def value(self):
        """The scenario's headline number (its profile's: Gbit/s for throughput, requests or
        handshakes per second)."""
        return dig({"result": self.result}, profile(self.scenario)["headline"]["path"])

    def window(self):
        """The run's time range: the correlation's window, else meta's end minus its length."""
        w = self.correlation.get("window")
        if isinstance(w, dict) and num(w.get("start")) and num(w.get("end")) and w["end"] > w["start"]:
            return float(w["start"]), float(w["end"])
        try:
            end = datetime.fromisoformat(str(self.meta["finished_at"]).replace("Z", "+00:00")).timestamp()
            seconds = float(self.meta["run_seconds"])
        except (KeyError, TypeError, ValueError):
            raise Bad(f"{self.dir}: no time window (summary.json has no .correlation.window, "
                      f"meta.json no finished_at and run_seconds)")
        return end - seconds, end

    def cpus(self):
        """(variant without its CPU part, ingress CPUs): an overlay the catalog says is another
        with more CPUs (`cpus`, `of`); a lab knob that sets WORKER_PROCESSES to a number; else
        the CPUs in placement.server_cpus (the ingress's cpuset)."""
        v = self.variant
        o = catalog().get(v) or {}
        if o.get("cpus"):
            return o["of"], int(o["cpus"])
        knobs = v.split("+")
        workers = [k for k in knobs if (knob_settings(k).get("WORKER_PROCESSES") or "").isdigit()]
        if workers:
            return "+".join(k for k in knobs if k not in workers) or "default", int(knob_settings(workers[-1])["WORKER_PROCESSES"])
        return v, cpu_count(str((self.meta.get("placement") or {}).get("server_cpus") or ""))


@functools.cache
def catalog_doc():
    """overlays/catalog.yaml: what each overlay and knob set is, its seeds, its name before."""
    import yaml
    return yaml.safe_load((ROOT / "overlays/catalog.yaml").read_text())


def catalog():
    """The catalog's overlays by name (what each is, its seeds, what it tunes or adds CPUs to)."""
    return {o["name"]: o for o in catalog_doc()["overlays"]}


@functools.cache
def variant_now(v):
    """V as it is called now: a run saved before the renaming says its overlay's or knobs'
    old name (the catalog's `formerly`; bash's variant_now reads the same)."""
    doc = catalog_doc()
    now = {e["formerly"]: e["name"] for e in doc["overlays"] + doc["knobs"] if e.get("formerly")}
    return now[v] if v in now else "+".join(now.get(k, k) for k in v.split("+"))


def knob_settings(knob):
    """A lab knob's settings (kustomize/components/tuning-KNOB/nginx.env), {} for none."""
    f = ROOT / "kustomize/components" / f"tuning-{knob}" / "nginx.env"
    if not re.fullmatch(r"[a-z0-9-]+", knob) or not f.is_file():
        return {}
    return dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line and not line.startswith("#"))


def cpu_count(cpu_list):  # taskset/cpuset list "0-1,3" -> 3
    n = 0
    for part in filter(None, cpu_list.split(",")):
        a, _, b = part.partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            return None
        n += int(b) - int(a) + 1 if b else 1
    return n or None


def load_timeseries(run):
    """(timeseries or None, why there is none). A broken file is a reason, not an error: a
    report must still be possible."""
    path = run.dir / "timeseries.json"
    if not path.exists():
        return None, f"this run has no timeseries.json (`python bench/report fetch {run.dir} --prometheus URL` writes it)"
    try:
        ts = json.loads(path.read_text())
        assert isinstance(ts.get("series"), dict) and num(ts.get("start")) and num(ts.get("end"))
        ts.setdefault("missing", {})
    except (OSError, ValueError, AssertionError, AttributeError) as e:
        return None, f"timeseries.json is unreadable ({e or 'not the expected shape'})"
    if not any(ts["series"].values()):
        reasons = sorted(set(ts["missing"].values()))
        return ts, "Prometheus returned no series: " + ("; ".join(reasons) if reasons else "no reason recorded")
    return ts, None
