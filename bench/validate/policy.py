"""The project's rules for a built overlay, on top of the schema check.

    kustomize build OVERLAY | python policy.py OVERLAY

Prints the number of objects when every rule holds; otherwise prints one line saying which
object breaks which rule (to stderr) and exits 1. Rules:
  - every object carries app.kubernetes.io/part-of: ingress-bench (how the project finds and
    removes what it deployed);
  - every image has a tag, and not "latest" (a run must say what it ran);
  - every image is one named in an images: list of a kustomization the overlay uses, so one
    images: entry (the local platform's, or a user's) can replace it;
  - every container and initContainer sets resources.requests and resources.limits with at
    least memory (CPU is left out on purpose where only the ingress gets whole cores: the
    base's backend).
Needs PyYAML (the kubernetes-validate venv of bench/validate/validate.sh has it).
"""
import os
import sys

import yaml

PART_OF = ("app.kubernetes.io/part-of", "ingress-bench")


class PolicyError(Exception):
    pass


def kustomization(directory):
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path) as f:
                return yaml.safe_load(f) or {}
    return None


def overridable_images(directory, seen=None):
    """Image names (newName, else name) of every images: entry in this kustomization and in
    the local directories it uses as resources or components."""
    seen = set() if seen is None else seen
    directory = os.path.realpath(directory)
    k = kustomization(directory)
    if directory in seen or k is None:
        return set()
    seen.add(directory)
    names = {e.get("newName") or e["name"] for e in k.get("images") or []}
    for ref in (k.get("resources") or []) + (k.get("components") or []):
        path = os.path.join(directory, ref)
        if "://" not in ref and os.path.isdir(path):
            names |= overridable_images(path, seen)
    return names


def split_image(ref):
    """'host:5000/a/b:1.2@sha256:..' -> ('host:5000/a/b', '1.2'); tag None when absent."""
    ref = ref.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1:]
    return ref, None


def pod_spec(obj):
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return (spec.get("template") or {}).get("spec")


def check_container(c, images):
    image = c.get("image", "")
    name, tag = split_image(image)
    if tag is None:
        raise PolicyError(f"image '{image}' has no tag: pin a version")
    if tag == "latest":
        raise PolicyError(f"image '{image}' uses the tag latest: pin a version")
    if name not in images:
        raise PolicyError(f"image '{name}' is in no images: list of the overlay's kustomizations,"
                          " so it cannot be overridden in one place")
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        if "memory" not in (res.get(part) or {}):
            raise PolicyError(f"resources.{part} must be set (memory at least)")


def check(obj, images):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(PART_OF[0]) != PART_OF[1]:
        raise PolicyError(f"label {PART_OF[0]}: {PART_OF[1]} is missing")
    spec = pod_spec(obj)
    for c in (spec or {}).get("initContainers", []) + (spec or {}).get("containers", []):
        try:
            check_container(c, images)
        except PolicyError as e:
            raise PolicyError(f"container {c.get('name')}: {e}") from None


def main(overlay):
    images = overridable_images(overlay)
    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    for obj in objects:
        try:
            check(obj, images)
        except PolicyError as e:
            sys.exit(f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}: {e}")
    print(len(objects))


if __name__ == "__main__":
    main(sys.argv[1])
