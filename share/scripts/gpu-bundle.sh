#!/bin/bash
# gpu-bundle.sh — pack ptrain, the CUDA test programs, the bench programs and Open MPI's mpirun, with every
# shared library they need that a bare GPU machine may lack, into one xz archive that travels to
# the device machine (tests/gpu/run.sh unpacks it there). The libraries come from this machine
# (ldd): Open MPI with its plugins, help files and orted, HDF5, libyaml, jansson, PCRE2, OpenBLAS,
# libgfortran, cmocka and what they pull in. Left out: the driver (libcuda) and the CUDA toolkit's
# cudart, cuBLAS, cuBLASLt and NCCL (hundreds of MB; the GPU machine has them). glibc is not used
# from the bundle unless the GPU machine's is older than the bundle needs (then glibc/ holds ours).
# Usage: share/scripts/gpu-bundle.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, .gpu-bundle)
# Run after `make` and `make -C BUILD_DIR check TESTS=` (which builds the test programs).
# Leaves OUT_DIR/ptrain-gpu.tar.xz and OUT_DIR/MANIFEST (what is inside, sizes, glibc needed).
set -euo pipefail
build=${1:-build}
out=${2:-.gpu-bundle}
[ -x "$build/ptrain" ] || { echo "gpu-bundle: $build/ptrain not found: run make first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/ptrain-gpu
mkdir -p "$stage/bin" "$stage/lib" "$stage/glibc" "$stage/hwloc-plugins"

# --- the programs: ptrain, the CUDA tests, the bench programs (those that are built) ---
cp "$build/ptrain" "$stage/bin/"
for p in "$build"/tests/unit/test_cuda_* "$build"/tests/unit/test_backend "$build"/bench/bench_*; do
    [ -f "$p" ] && [ -x "$p" ] && case "$p" in *.o | *.log | *.trs) ;; *) cp "$p" "$stage/bin/" ;; esac
done

# --- Open MPI's run-time files, at their paths under its prefix (OPAL_PREFIX relocates them) ---
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
prefix=$(ompi_path prefix)
ompi=$stage/ompi
rel() { echo "${1#"$prefix"/}"; }
plugdir=$(ompi_path pkglibdir)
mkdir -p "$ompi/$(rel "$plugdir")" "$ompi/$(rel "$(ompi_path pkgdatadir)")" "$ompi/$(rel "$(ompi_path bindir)")" \
    "$ompi/etc"
cp -L "$(ompi_path bindir)/orted" "$ompi/$(rel "$(ompi_path bindir)")/"
# the launcher too (Open MPI 4's mpirun is orterun): `mpirun --mca plm isolated -np N` starts the
# ranks of one machine without ssh, which the GPU machine lacks (tests/gpu/multi.sh)
cp -L "$(ompi_path bindir)/orterun" "$stage/bin/mpirun"
cp "$(ompi_path pkgdatadir)"/help-*.txt "$ompi/$(rel "$(ompi_path pkgdatadir)")/"
# plugins for networks a one-GPU machine lacks (UCX, libfabric, verbs, PSM, OpenSHMEM) stay behind
skip_re='liboshmem|libfabric|libuc[pstm]\.|libibverbs|librdmacm|libefa|libpsm|libinfinipath|libnl-'
for f in "$plugdir"/*.so; do
    deps=$(ldd "$f")
    grep -Eq "$skip_re" <<<"$deps" || cp "$f" "$ompi/$(rel "$plugdir")/"
done
# the system's openmpi-mca-params.conf, which OPAL_PREFIX does not move, as Debian ships it
printf '%s\n' btl_base_warn_component_unused=0 >"$ompi/etc/openmpi-mca-params.conf"

# --- every library those files need, except glibc (kept aside in glibc/), the CUDA toolkit's
# libraries and the driver; a library that does not resolve here is an error ---
glibc_re='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libmvec\.so\.1)$'
cuda_re='^(libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libnccl\.so\.[0-9]+)$'
{ find "$stage/bin" "$ompi" -type f \( -perm -u+x -o -name '*.so' \) -print0 | xargs -0 ldd 2>/dev/null || :; } |
    awk '$2 == "=>" {print $1, $3} $1 ~ /^\/.*ld-linux/ {print "ld-linux-x86-64.so.2", $1}' | sort -u >"$tmp/needed"
cuda_libs=""
while read -r name path; do
    if [[ $name =~ $cuda_re ]]; then
        [ "$name" = libcuda.so.1 ] || cuda_libs="$cuda_libs $name"
        continue
    fi
    if [ "$path" = "not" ]; then echo "gpu-bundle: $name does not resolve on this machine" >&2; exit 1; fi
    if [[ $name =~ $glibc_re ]]; then cp -L "$path" "$stage/glibc/$name"; else cp -L "$path" "$stage/lib/$name"; fi
done <"$tmp/needed"
chmod -R u+w "$stage"

# --- the manifest: what is inside, the newest glibc symbol version anything here needs ---
glibc_need=$({ find "$stage/bin" "$stage/lib" "$ompi" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null || :; } |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
{
    echo "# ptrain GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')"
    echo "glibc_required=$glibc_need"
    echo "cuda_libs=${cuda_libs# }"
    echo "version=$("$build/ptrain" --version | tr '\n' ' ')"
    echo "# programs"
    (cd "$stage/bin" && ls)
    echo "# libraries (cudart, cuBLAS, cuBLASLt, NCCL and libcuda come from the GPU machine)"
    (cd "$stage/lib" && ls)
    echo "# Open MPI plugins: $(find "$ompi" -name 'mca_*.so' | wc -l)"
} >"$stage/MANIFEST"

mkdir -p "$out"
rm -f "$out/ptrain-gpu.tar.xz"
export XZ_OPT=${XZ_OPT:--6 -T0}
tar -C "$tmp" -cJf "$out/ptrain-gpu.tar.xz" ptrain-gpu
cp "$stage/MANIFEST" "$out/MANIFEST"
echo "bundle: $(du -sm "$stage" | cut -f1) MB unpacked, $(du -k "$out/ptrain-gpu.tar.xz" | cut -f1) KB as $out/ptrain-gpu.tar.xz; needs glibc >= $glibc_need"
