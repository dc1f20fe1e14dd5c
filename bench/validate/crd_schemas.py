"""crd_schemas.py OUT_DIR CRD.yaml...: each CRD's served versions as JSON schemas for kubeconform,
at OUT_DIR/<group>/<kind>_<version>.json (kubeconform lowercases the kind) (validate.sh's -schema-location for custom resources).

What kubeconform -strict means for the built-in kinds it means here: an object whose schema
lists its properties admits no other (additionalProperties: false), unless the CRD keeps
unknown fields there; Kubernetes' own extensions become JSON schema (int-or-string)."""
import json
import sys
from pathlib import Path

import yaml


def strict(node):
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def main(out, files):
    n = 0
    for f in files:
        for crd in yaml.safe_load_all(Path(f).read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for v in crd["spec"]["versions"]:
                schema = dict(strict(v["schema"]["openAPIV3Schema"]))
                # apiVersion, kind and metadata as every object has them (a CRD's schema may list
                # them bare or not at all)
                props = schema.setdefault("properties", {})
                props.update({"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}})
                path = Path(out) / group / f"{kind.lower()}_{v['name']}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(schema))
                n += 1
    if not n:
        sys.exit("error: no CustomResourceDefinition in " + " ".join(files))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
