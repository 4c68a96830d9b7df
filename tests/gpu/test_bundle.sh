#!/bin/sh
# test_bundle.sh — share/scripts/gpu-bundle.sh makes a bundle that runs on a machine with only
# glibc and the CUDA libraries: every library of every program and Open MPI plugin in it resolves
# from the bundle, the CUDA toolkit or glibc (libcuda.so.1, the driver, may be missing here); a
# short CPU training run works from the bundle alone under `env -i`, and so does one of two ranks
# started by the bundle's mpirun with nothing but the bundle on PATH (no ssh: `--mca plm isolated`,
# as tests/gpu/multi.sh starts ranks on the GPU machine); and the archive is small enough to travel
# with the source tree (64 MiB in all). Skips, saying why, on a build without CUDA.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/gpu/bundle-env.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

why=""
"$P" --version | grep -q 'backends:.*cuda' || why="this build has no CUDA backend (./configure --with-cuda)"
for tool in ompi_info objdump xz ldd bash; do
    [ -z "$why" ] && ! command -v "$tool" >/dev/null 2>&1 && why="$tool not found"
done
if [ -n "$why" ]; then
    for name in "the bundle is made" "every library resolves" "ptrain trains from the bundle" \
        "the bundle's mpirun starts two ranks" "the bundle fits"; do
        skip_test "$name" "$why"
    done
    done_testing
    exit $?
fi

XZ_OPT=-0 bash "$PTRAIN_SRCDIR/share/scripts/gpu-bundle.sh" "$(dirname "$P")" "$tmp/out" >"$tmp/make.log" 2>&1
ok "the bundle is made ($(tail -n 1 "$tmp/make.log"))" test -s "$tmp/out/ptrain-gpu.tar.xz"
bundle_unpack "$tmp/out/ptrain-gpu.tar.xz" "$tmp/b" || exit 1

# every dependency: in the bundle, in a CUDA directory, glibc, or the driver (reported, allowed)
libpath=$(bundle_libpath 2>/dev/null)
glibc='ld-linux-x86-64.so.2|libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|libresolv.so.2|libutil.so.1|libmvec.so.1'
find "$PT_BUNDLE/bin" "$PT_BUNDLE/lib" "$PT_BUNDLE/ompi" -type f \( -name '*.so*' -o -path '*/bin/*' \) |
    while read -r f; do
        LD_LIBRARY_PATH=$libpath ldd "$f" 2>/dev/null | awk -v f="${f#"$PT_BUNDLE"/}" -v b="$PT_BUNDLE/" -v g="^($glibc)$" '
            $2 != "=>" { next }
            $3 == "not" { if ($1 != "libcuda.so.1") print f ": " $1 " not found"; next }
            index($3, b) == 1 || $1 ~ g || $1 ~ /^lib(cudart|cublas|cublasLt|nccl)\.so/ { next }
            { print f ": " $1 " from " $3 " (outside the bundle)" }'
    done >"$tmp/bad"
ok "every library resolves from the bundle, CUDA or glibc" test ! -s "$tmp/bad"
sed 's/^/# /' "$tmp/bad" | head -n 20

bundle_wrap direct 2>/dev/null
tiny_config "$tmp/tiny.yaml" "$tmp/run" "device: cpu
max_steps: 2
logging_steps: 1"
env -i PATH=/usr/bin:/bin "$PT_BUNDLE/wrap/ptrain" train "$tmp/tiny.yaml" >"$tmp/train.log" 2>&1
ok "ptrain trains from the bundle under env -i (MPI singleton, HDF5, OpenBLAS)" \
    test $? = 0 -a -s "$tmp/run/lora/adapter.h5"
[ -s "$tmp/run/lora/adapter.h5" ] || sed 's/^/# /' "$tmp/train.log" | tail -n 20

# two ranks from the bundle's mpirun: PATH holds the wrappers alone (no ssh, no system Open MPI)
rm -rf "$tmp/run"
env -i PATH="$PT_BUNDLE/wrap" "$PT_BUNDLE/wrap/mpirun" --mca plm isolated -np 2 "$PT_BUNDLE/wrap/ptrain" train \
    "$tmp/tiny.yaml" >"$tmp/mpi.log" 2>&1
ok "the bundle's mpirun starts two ranks without ssh (--mca plm isolated) and they train" \
    test $? = 0 -a -s "$tmp/run/lora/adapter.h5" -a -n "$(grep 'x 2 ranks' "$tmp/mpi.log")"
[ -s "$tmp/run/lora/adapter.h5" ] || sed 's/^/# /' "$tmp/mpi.log" | tail -n 20

kb=$(du -k "$tmp/out/ptrain-gpu.tar.xz" | cut -f1)
ok "the bundle fits beside the ~15 MB tree: $((kb / 1024)) MiB at xz -0 (at most 40)" test "$kb" -le 40960
done_testing
