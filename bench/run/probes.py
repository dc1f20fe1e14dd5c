"""bench/run/probes.py: the requests bench:migrate sends both sides to diff their behaviour, and
how they are sent: by k6 (k6/probe/probe.js) where the load runs, on this host (in the client's
network namespace) or in a pod of the ingress's cluster (PLATFORM=external).

Which requests (the setting PROBES):
  - unset: the built-in list (BUILT_IN): the scenarios' payloads, a miss, a method the backends
    do not serve, another host, a query string, and the payloads over TLS;
  - a file: a request a line, `[METHOD] [HOST]/PATH` (GET and the run's HOST unless given;
    `#` starts a comment);
  - ingress/CLASS: the host and path of every rule of the cluster's Ingress objects of that
    IngressClass;
  - gateway/NAMESPACE/NAME: the host names and path matches of the cluster's HTTPRoutes
    attached to that Gateway.
A request is sent once each side, on a connection of its own, to the side's address: the
overlay's (http or https as the request says) or an ingress's TARGET (its scheme for every
request: the built-in list's TLS requests are then left out, they would repeat the others).
"""
import json
import re
import subprocess
from pathlib import Path

from cases import Bad, ROOT, error_line, shell

# scheme (None: the side's own), method, path, extra headers.
BUILT_IN = [
    ("http", "GET", "/1kb.bin", {}),
    ("http", "GET", "/0kb.bin", {}),
    ("http", "GET", "/1mb.bin", {}),
    ("http", "HEAD", "/1kb.bin", {}),
    ("http", "GET", "/1kb.bin?q=1&r=%20", {}),
    ("http", "GET", "/does-not-exist", {}),
    ("http", "POST", "/1kb.bin", {"Content-Length": "0"}),
    ("http", "GET", "/1kb.bin", {"Host": "other.example"}),
    ("https", "GET", "/1kb.bin", {}),
    ("https", "GET", "/0kb.bin", {}),
]
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")
LINE = re.compile(r"^(?:(?P<method>[A-Z]+)\s+)?(?P<host>[A-Za-z0-9.-]+(?::\d+)?)?(?P<path>/\S*)$")
MOST = 500  # requests per side: a cluster's routes by the thousand are sampled, and said so
TIMEOUT_S = 150  # a pod's start (its image pulled) and the probes


def label(p):
    scheme, method, path, extra = p
    return f"{method} {scheme + '://…' if scheme else ''}{path}" + "".join(f" ({k}: {v})" for k, v in extra.items() if k != "Content-Length")


def from_file(path):
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise Bad(f"PROBES={path}: cannot read it ({e.strerror}): give a file of requests, ingress/CLASS or gateway/NAMESPACE/NAME")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = LINE.match(line)
        if not m or (m["method"] and m["method"] not in METHODS):
            raise Bad(f"PROBES={path}: line {n} is not '[METHOD] [HOST]/PATH' (METHOD one of {', '.join(METHODS)}): {line}")
        out.append(request(m["method"] or "GET", m["host"], m["path"]))
    if not out:
        raise Bad(f"PROBES={path}: no request in it (a line each: '[METHOD] [HOST]/PATH')")
    return out


def request(method, host, path):
    return (None, method, path, {"Host": host} if host else {}) if method != "POST" else \
        (None, method, path, {**({"Host": host} if host else {}), "Content-Length": "0"})


def ingress_routes(doc, cls):
    """The requests of the rules of Ingress objects (a `kubectl get ingress -A -o json`) of
    IngressClass CLS (spec.ingressClassName or the older annotation): a GET of each path on
    each host (none: the run's HOST)."""
    out = []
    for i in doc.get("items") or []:
        spec = i.get("spec") or {}
        if (spec.get("ingressClassName") or (i["metadata"].get("annotations") or {}).get("kubernetes.io/ingress.class")) != cls:
            continue
        for rule in spec.get("rules") or []:
            for p in ((rule.get("http") or {}).get("paths") or []):
                out.append(request("GET", rule.get("host"), p.get("path") or "/"))
    return out


def gateway_routes(doc, ns, name):
    """The requests of HTTPRoutes (a `kubectl get httproute -A -o json`) attached to Gateway
    NS/NAME: each path match (a method where the match has one) on each host name."""
    out = []
    for r in doc.get("items") or []:
        own = r["metadata"]["namespace"]
        spec = r.get("spec") or {}
        if not any(p.get("name") == name and p.get("namespace", own) == ns and p.get("kind", "Gateway") == "Gateway"
                   for p in spec.get("parentRefs") or []):
            continue
        for host in spec.get("hostnames") or [None]:
            for rule in spec.get("rules") or []:
                for m in rule.get("matches") or [{}]:
                    path = (m.get("path") or {}).get("value") or "/"
                    out.append(request(m.get("method") or "GET", host, path))
    return out


def chosen(env, kubeconfig):
    """PROBES as a list of requests, and what it is, for the page."""
    spec = env.get("PROBES") or ""
    if not spec:
        return BUILT_IN, f"the built-in {len(BUILT_IN)} requests"
    if spec.startswith(("ingress/", "gateway/")):
        kind, _, rest = spec.partition("/")
        parts = rest.split("/")
        if (kind == "ingress" and len(parts) != 1) or (kind == "gateway" and len(parts) != 2) or not all(parts):
            raise Bad(f"PROBES={spec}: give ingress/CLASS or gateway/NAMESPACE/NAME (or a file of requests)")
        r = subprocess.run(["kubectl", "get", "ingress" if kind == "ingress" else "httproute", "-A", "-o", "json"],
                           env=dict(env, KUBECONFIG=kubeconfig), capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise Bad(f"PROBES={spec}: cannot list the cluster's {'Ingresses' if kind == 'ingress' else 'HTTPRoutes'}: "
                      f"{(r.stderr.strip().splitlines() or [''])[-1]}")
        found = ingress_routes(json.loads(r.stdout), parts[0]) if kind == "ingress" else gateway_routes(json.loads(r.stdout), *parts)
        found = sorted(set((s, m, p, tuple(h.items())) for s, m, p, h in found), key=lambda x: (x[3], x[2], x[1]))
        if not found:
            raise Bad(f"PROBES={spec}: no route of the cluster's {'Ingress objects of class ' + parts[0] if kind == 'ingress' else 'HTTPRoutes of Gateway ' + rest}")
        routes = [(s, m, p, dict(h)) for s, m, p, h in found]
        said = f"the {len(routes)} routes of {'the Ingress objects of class ' + parts[0] if kind == 'ingress' else 'the HTTPRoutes of Gateway ' + rest}"
        if len(routes) > MOST:  # an even sample, the same on both sides
            routes = routes[::-(-len(routes) // MOST)]
            said += f", {len(routes)} of them (every {-(-len(found) // MOST)}th)"
        return routes, said
    listed = from_file(spec)
    return listed, f"the {len(listed)} requests of {spec}"


def for_sides(probes, existing):
    """The list both sides are sent: with an ingress's TARGET on either side, every request
    goes by the side's own scheme, and the built-in TLS requests are left out."""
    if not existing:
        return probes
    return [(None, m, p, h) for s, m, p, h in probes if s != "https"]


def requests(probes, base, host):
    """[{method, url, headers}] for k6/probe/probe.js: BASE the side's address (an overlay's IP
    or IP:PORT, or a TARGET URL), HOST the Host unless a request has its own."""
    out = []
    for scheme, method, path, extra in probes:
        if "://" in base:
            url = base.rstrip("/") + path
        elif scheme == "https":
            url = f"https://{base.split(':')[0]}{path}"  # the overlay's TLS listener, on 443
        else:
            url = f"http://{base}{path}"
        out.append({"method": method, "url": url, "headers": {"Host": host, **extra}})
    return out


def sent(reqs, env, where, ns=None):
    """REQS sent by k6/probe/probe.js: WHERE "host" (in network namespace NS when given) or
    "cluster" (a pod in namespace ingress-bench of the cluster of env's KUBECONFIG, of the
    image the runners use: bench/lib/existing.sh probe_pod): the answers, in order."""
    script = ROOT / "k6/probe/probe.js"
    payload = json.dumps(reqs)
    if where == "cluster":
        r = shell('probe_pod "$1"', payload, env=env)
    else:
        k6 = shell("command -v k6", env=env).stdout.strip() or "k6"  # the pinned one (bench/lib.sh)
        cmd = (["nsenter", f"--net={ns}"] if ns else []) + [k6, "run", "--quiet", "--no-color", "--log-output=none", str(script)]
        r = subprocess.run(cmd, env=dict(env, IB_PROBES=payload), capture_output=True, text=True, timeout=TIMEOUT_S)
    line = next((l for l in r.stdout.splitlines() if l.startswith("@@probes ")), None)
    if r.returncode != 0 or line is None:
        raise Bad(f"the probes failed: {error_line(r.stderr + r.stdout)}")
    return json.loads(line[len("@@probes "):])

