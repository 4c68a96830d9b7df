#!/bin/sh
# test_blas.sh — the OpenBLAS kernel ptrain runs (src/runtime/blas_kernel.c), end to end on the tiny Llama:
# the start-up summary names the library, the kernel, why it is in use, the processor and the
# sgemm rate; on a processor whose OpenBLAS chose a slower kernel than it can run, ptrain sets
# OPENBLAS_CORETYPE and re-executes itself, alone and as mpirun ranks; a user's own
# OPENBLAS_CORETYPE is kept. The slow choice is simulated (PTRAIN_TEST_CPU records an AVX2-only
# Intel processor, PTRAIN_TEST_BLAS_CORENAME the SSE3 fallback 0.3.21 picks for processors it does
# not know); the switch needs a processor with AVX2 to run Haswell kernels on, else it is skipped.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny_config "$tmp/c.yaml" "$tmp/out" "max_steps: 2
logging_steps: 1"

"$P" train "$tmp/c.yaml" >"$tmp/o" 2>"$tmp/e"
expect_eq "plain run: exit 0" 0 "$?"
line=$(grep '^blas ' "$tmp/o")
ok "the summary names the library and the kernel" contains "$line" "OpenBLAS"
ok "... and the sgemm rate" test -n "$(echo "$line" | grep -E 'sgemm [0-9]+ GFLOP/s on 1 thread')"
ok "... and the processor" test -n "$(echo "$line" | grep -E 'family [0-9]+ model [0-9]+')"

fake_cpu="GenuineIntel,6,151,fma avx2 os_avx"
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    PTRAIN_TEST_CPU=$fake_cpu PTRAIN_TEST_BLAS_CORENAME=Prescott "$P" train "$tmp/c.yaml" >"$tmp/o" 2>"$tmp/e"
    expect_eq "slow kernel: the run still succeeds" 0 "$?"
    line=$(grep '^blas ' "$tmp/o")
    ok "slow kernel: ptrain re-executes with OPENBLAS_CORETYPE=Haswell and says so" \
        contains "$line" "Haswell kernels (switched: OpenBLAS chose Prescott for this processor; ptrain set OPENBLAS_CORETYPE=Haswell)"
    ok "slow kernel: the steps are logged once (the first process printed nothing)" \
        test "$(grep -c 'step 2/2' "$tmp/o")" = 1
    if command -v "$mpirun" >/dev/null 2>&1; then
        PTRAIN_TEST_CPU=$fake_cpu PTRAIN_TEST_BLAS_CORENAME=Prescott timeout 120 "$mpirun" --oversubscribe \
            -x PTRAIN_TEST_CPU -x PTRAIN_TEST_BLAS_CORENAME -np 2 "$P" train "$tmp/c.yaml" >"$tmp/o" 2>"$tmp/e"
        expect_eq "slow kernel under mpirun -np 2: both ranks re-execute and train" 0 "$?"
        ok "slow kernel under mpirun: the summary says switched" contains "$(grep '^blas ' "$tmp/o")" "switched"
    else
        skip_test "slow kernel under mpirun" "mpirun not found"
    fi
else
    for name in "slow kernel: run" "slow kernel: re-exec" "slow kernel: logged once" "slow kernel under mpirun"; do
        skip_test "$name" "this processor has no AVX2, so it cannot run the Haswell kernels the test switches to"
    done
fi

OPENBLAS_CORETYPE=Prescott PTRAIN_TEST_CPU=$fake_cpu PTRAIN_TEST_BLAS_CORENAME=Prescott \
    "$P" train "$tmp/c.yaml" >"$tmp/o" 2>"$tmp/e"
expect_eq "user's OPENBLAS_CORETYPE: exit 0" 0 "$?"
ok "user's OPENBLAS_CORETYPE is kept and named as theirs" \
    contains "$(grep '^blas ' "$tmp/o")" "Prescott kernels (OPENBLAS_CORETYPE=Prescott, your setting)"
done_testing
