#!/bin/sh
# test_emu_mpi.sh — the CUDA backend's multi-rank path under mpirun, on the CPU emulator
# (tests/emu/ptrain_emu; its fake NCCL sums over MPI, emu_mpi.c): rank 0's NCCL unique id reaches
# every rank (the fake communicator checks the ids are equal), the non-blocking communicator is
# created, gradient buckets are summed through reduce_begin/reduce_end (comm.cu), and two ranks with
# batch 2 train as one rank with batch 2 and twice the accumulation: the same loss and norm of the
# summed gradient at step 1 (1e-4 relative: the same sums in another order) and adapters within
# 1e-4 (a tenth of the learning rate 1e-3; see below). Skips, saying why, without the emulator
# build or mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
E=$(dirname "$P")/tests/emu/ptrain_emu
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
why=""
[ -x "$E" ] || why="no tests/emu/ptrain_emu (a build without CUDA or cmocka)"
[ -z "$why" ] && ! command -v "$mpirun" >/dev/null 2>&1 && why="mpirun not found (Debian: apt-get install openmpi-bin)"
if [ -n "$why" ]; then
    for name in "one rank" "two ranks" "loss" "grad_norm" "the same adapter" "the adapters moved"; do skip_test "$name" "$why"; done
    done_testing
    exit $?
fi

# tests/tiny.sh: batch 2 x 2 accumulation; one rank gets 4. No warm-up: step 1 must move the adapters.
for n in one two; do
    tiny_config "$tmp/$n.yaml" "$tmp/$n" "max_steps: 1
logging_steps: 1
device: cuda
warmup_steps: 0
learning_rate: 1e-3"
done
sed -i 's/^gradient_accumulation_steps: 2$/gradient_accumulation_steps: 4/' "$tmp/one.yaml"
grep -q '^gradient_accumulation_steps: 4$' "$tmp/one.yaml" || echo "Bail out! tests/tiny.sh no longer sets accumulation 2"

timeout 300 "$E" train "$tmp/one.yaml" >"$tmp/one.log" 2>&1
ok "one rank on the emulated GPU, batch 2 x 4 accumulation: exit 0" test $? = 0 -a -s "$tmp/one/lora/adapter.h5"
timeout 300 "$mpirun" --oversubscribe -np 2 "$E" train "$tmp/two.yaml" >"$tmp/two.log" 2>&1
rc=$?
ok "two ranks on emulated GPUs (NCCL id by MPI, non-blocking communicator, bucket sums), batch 2 x 2 each: exit $rc" \
    test $rc = 0 -a -s "$tmp/two/lora/adapter.h5"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/two.log" | tail -n 15

# the summed gradient: its norm (taken after the sum over ranks) and the loss, logged at step 1
field() { sed -n "s/.*\"$2\": \([^,]*\),.*/\1/p" "$1/metrics.jsonl" 2>/dev/null | head -n 1; }
for f in loss grad_norm; do
    a=$(field "$tmp/one" $f) b=$(field "$tmp/two" $f)
    ok "step 1's $f: one rank $a, two ranks $b (within 1e-4 relative: the same sum in another order)" \
        awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4 * a) }'
done
line=$("$DIFF" "$tmp/one/lora/adapter.h5" "$tmp/two/lora/adapter.h5" 2>&1)
abs=$(echo "$line" | sed -n 's/.* max_abs \([^ ]*\).*/\1/p' | cut -d' ' -f1)
# AdamW's first step divides each gradient by its own size (+ eps 1e-8), so where a gradient is
# near eps a last-bit difference of the sum moves the update by up to the learning rate: 1e-4 is a
# tenth of it (the sums themselves are checked through grad_norm above)
ok "two ranks train the adapter of one rank with twice the accumulation: largest difference ${abs:-?} <= 1e-4 ($line)" \
    awk -v r="$abs" 'BEGIN { exit !(r != "" && r + 0 <= 1e-4) }'
ok "the step moved the adapters (learning rate $(field "$tmp/one" learning_rate) at step 1)" \
    awk -v r="$(field "$tmp/one" learning_rate)" 'BEGIN { exit !(r + 0 > 0) }'
done_testing
