#!/bin/bash
# gpu-wheels.sh — the Python wheels the GPU benchmark's peer (bench/gpu/peer_peft.py) needs and the
# GPU machine lacks, fetched here from PyPI (that machine has no network) into an ignored folder that
# travels with a device call (`carry`): bitsandbytes, for the peer's QLoRA (NF4 base), and
# liger-kernel (Triton kernels: fused linear cross-entropy, RMSNorm, RoPE, SwiGLU/GeGLU; pure
# Python). Why trimmed: the bitsandbytes wheel holds one native library per CUDA, ROCm and XPU
# version (41 MiB), too much beside the ptrain bundle in the 64 MiB a call carries; the GPU
# machine's torch is built for CUDA 13.0, for which bitsandbytes loads libbitsandbytes_cuda130.so
# alone, so the trimmed wheel keeps that one and the CPU one (and its RECORD says so). Their
# dependencies (torch, numpy, packaging, triton) are on the machine already (the device tool's
# KINDS.md), so none is fetched. Prints each wheel's size, and the total that would travel with the
# bundle and the tracked files, against the 64 MiB.
# Usage: share/scripts/gpu-wheels.sh [OUT_DIR]   (default .gpu-wheels, ignored by git)
# Environment: PYTHON (a python with pip, default python3), BNB_VERSION (0.50.2), LIGER_VERSION
# (0.8.5), CUDA_TAG (130: the libbitsandbytes_cudaNNN.so to keep), BUNDLE (.gpu-bundle/ptrain-gpu.tar.xz).
# On the GPU machine tests/gpu/run.sh installs them with
#   python3 -m pip install --no-index --no-deps --target DIR OUT_DIR/*.whl   and PYTHONPATH=DIR.
set -euo pipefail
out=${1:-.gpu-wheels}
PYTHON=${PYTHON:-python3}
bnb=${BNB_VERSION:-0.50.2} liger=${LIGER_VERSION:-0.8.5} tag=${CUDA_TAG:-130}
bundle=${BUNDLE:-.gpu-bundle/ptrain-gpu.tar.xz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
rm -f "$out"/*.whl

# Python 3.12 on x86-64 Linux (the machine's glibc is 2.39: any manylinux tag up to it fits)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    platforms+=(--platform "$p")
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$tmp" "bitsandbytes==$bnb" "liger-kernel==$liger"

# trim WHEEL OUT: the wheel without the native libraries other than CUDA $tag's and the CPU's
trim() {
    "$PYTHON" - "$1" "$2" "$tag" <<'PY'
import re, sys, zipfile
src, dst, tag = sys.argv[1:4]
keep_lib = re.compile(r"libbitsandbytes_(cpu|cuda%s)\.so$" % tag)
dropped = []
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
    names = zin.namelist()
    if not any(keep_lib.search(n) and "cuda" in n for n in names):
        sys.exit(f"gpu-wheels: {src} has no libbitsandbytes_cuda{tag}.so")
    for n in names:
        if re.search(r"libbitsandbytes_\w+\.so$", n) and not keep_lib.search(n):
            dropped.append(n)
    for n in names:
        if n in dropped:
            continue
        data = zin.read(n)
        if n.endswith(".dist-info/RECORD"):  # the files that are not there leave the record too
            data = b"".join(l for l in data.splitlines(keepends=True) if l.split(b",")[0].decode() not in dropped)
        zout.writestr(zin.getinfo(n), data)
print(f"gpu-wheels: {len(dropped)} native libraries left out of {src.rsplit('/', 1)[-1]}: "
      + " ".join(d.rsplit("/", 1)[-1] for d in dropped))
PY
}

for w in "$tmp"/*.whl; do
    case ${w##*/} in
    bitsandbytes-*) trim "$w" "$out/${w##*/}" ;;
    *) cp "$w" "$out/" ;;
    esac
done

kib() { du -k "$1" | cut -f1; }
total=0
for w in "$tmp"/*.whl; do
    name=${w##*/}
    echo "wheel: $name: $(kib "$w") KiB from PyPI, $(kib "$out/$name") KiB in $out"
    total=$((total + $(kib "$out/$name")))
done
tree=$(git ls-files -z 2>/dev/null | xargs -0 du -ck 2>/dev/null | tail -n 1 | cut -f1 || echo 0)
b=0
[ -f "$bundle" ] && b=$(kib "$bundle")
all=$((total + b + tree))
echo "wheels: $total KiB; with the bundle ($b KiB) and the tracked files ($tree KiB): $((all / 1024)) MiB of the 64 MiB" \
    "a call carries: $([ "$all" -le 65536 ] && echo fits || echo DOES NOT FIT)"
