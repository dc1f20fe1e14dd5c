"""stale_objects.py MANIFEST < LIVE.json: what deploy.sh deletes of a previous overlay's objects
before it applies MANIFEST (kind/name, for kubectl delete), one a line.

Stale: an object MANIFEST does not have (a previous overlay's controller must not serve beside
the new one); one it has otherwise, when the change cannot be applied in place (a Service's
clusterIP cannot change) or is the ingress's (a changed ingress Deployment is replaced, never
rolled beside its old pod: on a small node a second pinned core does not fit); and, with a
stale Deployment, its ReplicaSets and pods, so that deleting waits for those too. Kept: what
MANIFEST has as it was applied, and a backend Deployment that apply can roll or scale (same
selector): most overlays share their backends, and starting them again was most of a switch.
The overlay's own label (ingress-bench/variant) is not a change: apply moves it. LIVE.json is
`kubectl get ... -o json` of our namespace; an object of ours (app.kubernetes.io/part-of) not
made by kubectl apply (no last-applied annotation) is stale too."""
import json
import sys

import yaml

APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
VARIANT = "ingress-bench/variant"
COMPONENT = "app.kubernetes.io/component"
PART_OF = "app.kubernetes.io/part-of"


def key(obj):
    return obj["kind"], obj["metadata"]["name"]


def comparable(obj):
    obj = json.loads(json.dumps(obj, default=str))  # a copy; YAML's dates as the JSON strings kubectl sent
    meta = obj.get("metadata", {})
    (meta.get("labels") or {}).pop(VARIANT, None)
    (meta.get("annotations") or {}).pop(APPLIED, None)
    for k in ("labels", "annotations"):
        if k in meta and not meta[k]:
            del meta[k]
    return obj


def rolls(was, new):
    """A backend Deployment apply can change in place."""
    return (new["kind"] == "Deployment" and (new["metadata"].get("labels") or {}).get(COMPONENT) != "ingress"
            and was["spec"].get("selector") == new["spec"].get("selector"))


def main():
    with open(sys.argv[1]) as f:
        wanted = {key(o): comparable(o) for o in yaml.safe_load_all(f) if o}
    items = json.load(sys.stdin)["items"]
    stale = []
    for obj in items:
        meta = obj["metadata"]
        applied = (meta.get("annotations") or {}).get(APPLIED)
        if meta.get("ownerReferences") or (meta.get("labels") or {}).get(PART_OF) != "ingress-bench":
            continue
        if applied is not None and key(obj) in wanted:
            was, new = comparable(json.loads(applied)), wanted[key(obj)]
            if was == new or rolls(was, new):
                continue
        stale.append(key(obj))
    # What a stale Deployment owns: its ReplicaSets, and theirs, their pods.
    owners = set(stale)
    for kind in ("ReplicaSet", "Pod"):
        for obj in items:
            refs = obj["metadata"].get("ownerReferences") or []
            if obj["kind"] == kind and any((r["kind"], r["name"]) in owners for r in refs):
                stale.append(key(obj))
                owners.add(key(obj))
    for kind, name in stale:
        print(f"{kind.lower()}/{name}")


if __name__ == "__main__":
    main()
