"""Make kubernetes-validate's JSON schemas usable by kubeconform, offline.

    python k8s_schemas.py DEST VERSION...    (e.g. DEST 1.33.0 1.34.0)

Run with the Python of the venv that has kubernetes-validate installed (bench/validate/validate.sh makes
it). For each VERSION, writes DEST/v<VERSION>-local-strict/ (the layout kubeconform's
-schema-location template names): every file with its refs to "/api/_definitions.json#"
made relative ("_definitions.json#", the same directory) and its "$id" dropped, since an
absolute $id would make kubeconform resolve the refs against a URL instead of the file.
Idempotent: a version already converted is skipped; each is written to a temporary
directory and renamed into place, so an interrupted run leaves nothing half-made.
"""
import json
import os
import shutil
import sys
import tempfile
from importlib.resources import files


def convert(src, dest):
    for entry in src.iterdir():
        if not entry.name.endswith(".json"):
            continue
        text = entry.read_text().replace('"/api/_definitions.json#', '"_definitions.json#')
        schema = json.loads(text)
        schema.pop("$id", None)
        with open(os.path.join(dest, entry.name), "w") as f:
            json.dump(schema, f)


def main(dest, versions):
    shipped = files("kubernetes_validate") / "kubernetes-json-schema"
    os.makedirs(dest, exist_ok=True)
    for version in versions:
        name = f"v{version}-local-strict"
        final = os.path.join(dest, name)
        if os.path.isdir(final):
            continue
        src = shipped / name
        if not src.is_dir():
            sys.exit(f"kubernetes-validate has no schemas for Kubernetes {version}")
        tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=dest)
        try:
            convert(src, tmp)
            os.rename(tmp, final)
        except OSError:
            if not os.path.isdir(final):  # else a concurrent run got there first: fine
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
