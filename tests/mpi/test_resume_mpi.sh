#!/bin/sh
# test_resume_mpi.sh — checkpoints and exact resume with 2 ranks under mpirun, on the tiny Llama
# in tests/data. The uninterrupted 2-rank run is the reference; each interrupted run is resumed
# with the same command and must end with a bit-identical final adapter (h5diff -d 0) and the
# same logged losses. Interruptions: kill -9 of rank 1 mid-epoch (the job ends within seconds),
# kill -9 of rank 0 in the middle of a checkpoint write, SIGUSR1 and SIGTERM sent to one rank only
# (every rank exits 75 after rank 0's checkpoint). Also: only rank 0 touches checkpoint files
# (each rank runs in its own directory, so rank 1 cannot see output_dir, and the resume still
# works), and a different world size on resume (2 -> 1 and 1 -> 2 ranks) continues, says what
# changed, and finishes. A config that does not resume is refused by every rank alike in an
# output_dir holding checkpoints, and overwrite_output_dir starts over. Skips, saying why, without
# mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
need_mpirun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { # write_config FILE OUTDIR: 2 ranks x 2 x 2 = 8 sequences a step, 5 steps an epoch
    tiny_config "$1" "$2" "lora_dropout: 0.1
learning_rate: 1e-3
warmup_steps: 2
max_steps: 16
logging_steps: 2
seed: 5
save_steps: 3
resume_from_checkpoint: true"
}

mpi() { # mpi SECONDS ARGS...: sets rc and secs; the bound turns a hang into a failure
    limit=$1
    shift
    start=$(date +%s)
    timeout "$limit" "$mpirun" --oversubscribe "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    secs=$(($(date +%s) - start))
}

# the logged steps (not the start-up records: seconds, which differ from run to run)
logged() {
    [ -s "$1/metrics.jsonl" ] || { echo "no metrics in $1" && return; }
    grep -v '"startup"' "$1/metrics.jsonl" | sed 's/, "tokens_per_s.*//'
}
same_adapter() { h5diff -d 0 "$1/lora/adapter.h5" "$2/lora/adapter.h5" >/dev/null 2>&1; }
resumed_equal() { # resumed_equal NAME RUN: run RUN's config again with 2 ranks, compare with ref
    mpi 120 -np 2 "$P" train "$tmp/$2.yaml"
    expect_eq "$1: the resumed job finishes (exit 0)" 0 "$rc"
    ok "$1: final adapter bit-identical to the uninterrupted run" same_adapter "$tmp/ref" "$tmp/$2"
    expect_eq "$1: same logged losses" "$(logged "$tmp/ref")" "$(logged "$tmp/$2")"
}

write_config "$tmp/ref.yaml" "$tmp/ref"
mpi 120 -np 2 "$P" train "$tmp/ref.yaml"
expect_eq "2 ranks, uninterrupted: exit 0" 0 "$rc"

# kill -9 of rank 1 at step 7 (mid-epoch): the job ends fast, the resume continues from step 6
write_config "$tmp/k1.yaml" "$tmp/k1"
mpi 120 -np 2 -x PTRAIN_TEST_KILL_STEP=7 -x PTRAIN_TEST_KILL_RANK=1 "$P" train "$tmp/k1.yaml"
ok "kill -9 of rank 1 at step 7: the job ends non-zero within 30 s (rc $rc, ${secs} s)" \
    test "$rc" -ne 0 -a "$rc" -ne 124 -a "$secs" -le 30
resumed_equal "kill -9 of rank 1 at step 7" k1
ok "kill -9 of rank 1: resumed from step 6" grep -q "resume     from $tmp/k1/checkpoint-6.h5 at step 6" "$tmp/out"

# kill -9 of rank 0 halfway through writing checkpoint 9
write_config "$tmp/mw.yaml" "$tmp/mw"
mpi 120 -np 2 -x PTRAIN_TEST_CRASH_IN_SAVE=9 "$P" train "$tmp/mw.yaml"
ok "kill -9 of rank 0 mid-write: the job ends non-zero (rc $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
ok "kill -9 of rank 0 mid-write: no checkpoint-9.h5" test ! -e "$tmp/mw/checkpoint-9.h5"
resumed_equal "kill -9 of rank 0 mid-write" mw

# a signal to one rank only: every rank stops after the same step with exit 75
for sig in USR1 TERM; do
    write_config "$tmp/s$sig.yaml" "$tmp/s$sig"
    timeout 120 "$mpirun" --oversubscribe -np 2 -x PTRAIN_TEST_STEP_DELAY_MS=200 "$P" train "$tmp/s$sig.yaml" \
        >"$tmp/sig$sig.out" 2>"$tmp/sig$sig.err" &
    job=$!
    i=0
    until grep -q "step 4/16" "$tmp/sig$sig.out" 2>/dev/null || [ $i -gt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    victim=$(pgrep -f "^$P train $tmp/s$sig.yaml" | sort -n | tail -1) # a rank, not mpirun
    kill -s "$sig" "$victim"
    wait "$job"
    rc=$?
    expect_eq "SIG$sig to one rank (pid $victim): the job exits 75" 75 "$rc"
    ok "SIG$sig to one rank: rank 0 wrote a checkpoint and said to run the same command again" grep -q "stopped    by SIG$sig on rank [01] after step [0-9]*: checkpoint written; run the same command again to continue (exit status 75)" "$tmp/sig$sig.out"
    resumed_equal "SIG$sig to one rank" "s$sig"
done

# only rank 0 touches checkpoint files: each rank in its own directory, output_dir relative
mkdir -p "$tmp/nodeA" "$tmp/nodeB"
write_config "$tmp/nodes.yaml" out
mpi 120 -np 1 -wdir "$tmp/nodeA" -x PTRAIN_TEST_KILL_STEP=8 "$P" train "$tmp/nodes.yaml" : -np 1 -wdir "$tmp/nodeB" "$P" train "$tmp/nodes.yaml"
mpi 120 -np 1 -wdir "$tmp/nodeA" "$P" train "$tmp/nodes.yaml" : -np 1 -wdir "$tmp/nodeB" "$P" train "$tmp/nodes.yaml"
expect_eq "rank 1 cannot see output_dir: the resumed job finishes" 0 "$rc"
ok "rank 1 cannot see output_dir: resumed from step 6 all the same" grep -q "resume     from out/checkpoint-6.h5 at step 6" "$tmp/out"
ok "rank 1 wrote nothing in its directory" test -z "$(ls -A "$tmp/nodeB")"
ok "rank 1 cannot see output_dir: bit-identical" h5diff -d 0 "$tmp/ref/lora/adapter.h5" "$tmp/nodeA/out/lora/adapter.h5"

# another world size: 2 -> 1 rank and 1 -> 2 ranks
write_config "$tmp/w21.yaml" "$tmp/w21"
mpi 120 -np 2 -x PTRAIN_TEST_KILL_STEP=5 "$P" train "$tmp/w21.yaml"
"$P" train "$tmp/w21.yaml" >"$tmp/out" 2>"$tmp/err"
expect_eq "2 ranks -> 1 rank: finishes" 0 "$?"
ok "2 ranks -> 1 rank: resumed at step 3 and says the batch changed" \
    test -n "$(grep "resume     from $tmp/w21/checkpoint-3.h5 at step 3" "$tmp/out")" -a \
    -n "$(grep "ranks x batch x accumulation changed: 2 x 2 x 2 = 8 sequences per step at the checkpoint, 1 x 2 x 2 = 4 now" "$tmp/out")"
ok "2 ranks -> 1 rank: the steps after the resume are logged" test "$(grep -c '"step": 16' "$tmp/w21/metrics.jsonl")" = 1
write_config "$tmp/w12.yaml" "$tmp/w12"
env PTRAIN_TEST_KILL_STEP=5 "$P" train "$tmp/w12.yaml" >/dev/null 2>&1
mpi 120 -np 2 "$P" train "$tmp/w12.yaml"
expect_eq "1 rank -> 2 ranks: finishes" 0 "$rc"
ok "1 rank -> 2 ranks: says the batch changed" \
    grep -q "ranks x batch x accumulation changed: 1 x 2 x 2 = 4 sequences per step at the checkpoint, 2 x 2 x 2 = 8 now" "$tmp/out"

# a config that does not resume, with 2 ranks, into an output_dir holding checkpoints: rank 0
# looks, every rank agrees, the job ends at once with one error and nothing written (issue 44)
sed '/^resume_from_checkpoint: true$/d' "$tmp/ref.yaml" >"$tmp/again.yaml"
before=$(cd "$tmp/ref" && find . -printf '%p %s %T@\n' | sort)
mpi 60 -np 2 "$P" train "$tmp/again.yaml"
expect_eq "2 ranks, no resume key, checkpoints in output_dir: every rank refuses (exit 1, no hang)" 1 "$rc"
expect_eq "... one error, from rank 0, naming the newest checkpoint" \
    "1 1" "$(grep -c '^ptrain' "$tmp/err") $(grep -c "^ptrain: rank 0: error: output_dir $tmp/ref holds the checkpoints of an earlier run; the newest complete one is $tmp/ref/checkpoint-16.h5 at step 16 of 16" "$tmp/err")"
expect_eq "... nothing in output_dir was written" "$before" "$(cd "$tmp/ref" && find . -printf '%p %s %T@\n' | sort)"
printf 'overwrite_output_dir: true\n' >>"$tmp/again.yaml"
mpi 120 -np 2 "$P" train "$tmp/again.yaml"
ok "2 ranks, overwrite_output_dir: true: rank 0 removes the earlier run's files, the job starts over and finishes" \
    sh -c "[ $rc = 0 ] && grep -q '^overwrite  output_dir $tmp/ref: removed the earlier run.s 6 checkpoints' '$tmp/out' && ! grep -q '^resume     from' '$tmp/out'"

done_testing
