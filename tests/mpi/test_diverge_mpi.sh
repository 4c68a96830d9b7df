#!/bin/sh
# test_diverge_mpi.sh — divergence with 2 ranks under mpirun, on the tiny Llama in tests/data (the
# one-process cases: tests/cli/test_diverge.sh). Every rank takes the same decision, so nothing
# hangs and one message is printed: learning_rate 1e3 stops both ranks with exit 6 at the step
# whose loss is NaN, keeps the checkpoints written before it (save_total_limit 2) and writes no
# final adapter; a NaN gradient on rank 1 alone (after the sum across ranks, so rank 0's are
# finite) stops both ranks too; with skip_nonfinite_steps a NaN loss on rank 1 alone is skipped by
# both ranks, whose adapters stay the same bits (the replica check at every logged step), and the
# job finishes. Skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
need_mpirun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { diverge_config "$tmp/$1.yaml" "$tmp/$1" "$2" "${3:-}"; } # write_config NAME LEARNING_RATE [yaml]

mpi() { # mpi NAME ARGS...: sets rc and secs; the bound turns a hang into a failure
    name=$1
    shift
    start=$(date +%s)
    timeout 120 "$mpirun" --oversubscribe "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    secs=$(($(date +%s) - start))
}
diverged() { grep -c '^ptrain: rank [0-9]*: diverged: ' "$tmp/$1.err"; }
diverged_at() { sed -n 's/^ptrain: rank 0: diverged: step \([0-9]*\) of 12: .*/\1/p' "$tmp/$1.err"; }
checkpoints() { (cd "$tmp/$1" && ls checkpoint-*.h5 2>/dev/null | sort -t- -k2 -n | tr '\n' ' '); }

# --- learning_rate 1e3 ---
write_config lr 1e3
mpi lr -np 2 "$P" train "$tmp/lr.yaml"
n=$(diverged_at lr)
ok "learning_rate 1e3, 2 ranks: the job ends non-zero, no hang (rc $rc, ${secs} s)" test "$rc" -ne 0 -a "$rc" -ne 124
ok "learning_rate 1e3, 2 ranks: a rank exits 6" grep -q "Exit code: *6" "$tmp/lr.err"
expect_eq "learning_rate 1e3, 2 ranks: one message, from rank 0, naming a step (${n:-none})" "1 yes" \
    "$(diverged lr) $([ -n "$n" ] && echo yes)"
expect_eq "learning_rate 1e3, 2 ranks: the two checkpoints before that step are kept" \
    "checkpoint-$((${n:-3} - 2)).h5 checkpoint-$((${n:-3} - 1)).h5 " "$(checkpoints lr)"
ok "learning_rate 1e3, 2 ranks: no final adapter" test ! -e "$tmp/lr/lora/adapter.h5"

# --- a NaN gradient on rank 1 only ---
write_config grad 1e-3
mpi grad -np 1 "$P" train "$tmp/grad.yaml" : -np 1 env PTRAIN_TEST_NAN_GRAD_STEP=3 "$P" train "$tmp/grad.yaml"
ok "NaN gradient on rank 1 at step 3: the job ends non-zero, no hang (rc $rc, ${secs} s)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "NaN gradient on rank 1 at step 3: one message, from rank 0, naming step 3" "1 3" \
    "$(diverged grad) $(diverged_at grad)"
expect_eq "NaN gradient on rank 1 at step 3: checkpoints 1 and 2 are kept" "checkpoint-1.h5 checkpoint-2.h5 " \
    "$(checkpoints grad)"

# --- skip_nonfinite_steps: a NaN loss on rank 1 only is skipped by both ---
write_config skip 1e-3 "skip_nonfinite_steps: true"
mpi skip -np 1 "$P" train "$tmp/skip.yaml" : -np 1 env PTRAIN_TEST_NAN_STEP=3 "$P" train "$tmp/skip.yaml"
expect_eq "skip_nonfinite_steps, NaN loss on rank 1 at step 3: the job finishes (exit 0)" 0 "$rc"
expect_eq "skip_nonfinite_steps: one warning naming step 3" 1 \
    "$(grep -c '^ptrain: warning: step 3: the loss is nan.*skipped' "$tmp/skip.err")"
ok "skip_nonfinite_steps: the final adapter is written" test -s "$tmp/skip/lora/adapter.h5"
done_testing
