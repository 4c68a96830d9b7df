#!/bin/sh
# test_diverge.sh — a run whose loss or gradient norm stops being finite, with one process, on the
# tiny Llama in tests/data (tests/mpi/test_diverge_mpi.sh: the same with 2 ranks). Such a step is
# never applied: the run stops with exit 6 and one message naming the step and the configured
# learning rate, no final adapter is written, and the checkpoints written before it stay (with
# save_total_limit 2 they used to be rotated out by NaN ones), verify, and hold no NaN or inf;
# nothing written holds one. Divergence by learning_rate 1e10 (step 2 here) and 1e3 (a few steps
# later), and by a NaN loss or gradient injected at step 3 (PTRAIN_TEST_NAN_STEP,
# PTRAIN_TEST_NAN_GRAD_STEP). With skip_nonfinite_steps: true the injected step is skipped with a
# warning naming it and the run finishes; 10 non-finite steps in a row still stop it.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { diverge_config "$tmp/$1.yaml" "$tmp/$1" "$2" "${3:-}"; } # write_config NAME LEARNING_RATE [yaml]

train() { # train NAME [env...]: sets rc; stdout in $tmp/NAME.out, stderr in $tmp/NAME.err
    name=$1
    shift
    env "$@" "$P" train "$tmp/$name.yaml" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
}

# the step a diverged run names ("step N of 12"), or nothing
diverged_at() { sed -n 's/^ptrain: diverged: step \([0-9]*\) of 12: .*/\1/p' "$tmp/$1.err"; }
# NaN or inf in anything under the run's directory (HDF5 files through h5dump)
nonfinite_in() {
    for f in $(find "$tmp/$1" -type f); do
        case "$f" in
        *.h5) h5dump "$f" ;;
        # binary files whose bytes can spell "inf" or "nan": the dataset cache (token ids), the
        # plot, TensorBoard's event files (their scalars are checked by tests/cli/test_watch.sh)
        *.ptdata | *.png | *tfevents*) ;;
        *) cat "$f" ;;
        esac
    done | grep -ciwE -- '-?(nan|inf|infinity)'
}
checkpoints() { (cd "$tmp/$1" && ls checkpoint-*.h5 2>/dev/null | sort -t- -k2 -n | tr '\n' ' '); }
verified() { # verified NAME: every checkpoint of the run passes ptrain inspect (CRC-32, Fletcher-32)
    for c in "$tmp/$1"/checkpoint-*.h5; do "$P" inspect "$c" >/dev/null 2>&1 || return 1; done
}

if ! command -v h5dump >/dev/null 2>&1; then
    echo "1..0 # SKIP h5dump not found (Debian: hdf5-tools)"
    exit 0
fi

# --- learning_rate 1e10: the loss is NaN at step 2 ---
write_config lr1e10 1e10
train lr1e10
expect_eq "learning_rate 1e10: exit 6 (diverged)" 6 "$rc"
expect_eq "learning_rate 1e10: one message, naming step 2" "2" "$(diverged_at lr1e10)"
ok "learning_rate 1e10: the message names the configured learning rate" grep -q "learning_rate 1e+10" "$tmp/lr1e10.err"
expect_eq "learning_rate 1e10: the checkpoint of step 1 is kept" "checkpoint-1.h5 " "$(checkpoints lr1e10)"
ok "learning_rate 1e10: no final adapter" test ! -e "$tmp/lr1e10/lora/adapter.h5" -a ! -e "$tmp/lr1e10/lora/adapter_model.safetensors"
expect_eq "learning_rate 1e10: no NaN or inf in any file written" 0 "$(nonfinite_in lr1e10)"

# --- learning_rate 1e3: a few good steps first, then NaN; save_total_limit 2 keeps the good ones ---
write_config lr1e3 1e3
train lr1e3
n=$(diverged_at lr1e3)
expect_eq "learning_rate 1e3: exit 6 (diverged)" 6 "$rc"
expect_eq "learning_rate 1e3: one message naming a step after 2 (step ${n:-none})" "1 yes" \
    "$(grep -c '^ptrain: diverged' "$tmp/lr1e3.err") $([ "${n:-0}" -gt 2 ] && echo yes)"
expect_eq "learning_rate 1e3: the two checkpoints before that step are kept" \
    "checkpoint-$((${n:-3} - 2)).h5 checkpoint-$((${n:-3} - 1)).h5 " "$(checkpoints lr1e3)"
ok "learning_rate 1e3: they verify (ptrain inspect)" verified lr1e3
ok "learning_rate 1e3: the message names the newest as the one to go back to" \
    grep -q "checkpoint-$((${n:-3} - 1)).h5, is from before it" "$tmp/lr1e3.err"
expect_eq "learning_rate 1e3: metrics.jsonl ends at the step before" "$((${n:-3} - 1))" \
    "$(grep -c '"loss"' "$tmp/lr1e3/metrics.jsonl")"
ok "learning_rate 1e3: no final adapter" test ! -e "$tmp/lr1e3/lora/adapter.h5"
expect_eq "learning_rate 1e3: no NaN or inf in any file written" 0 "$(nonfinite_in lr1e3)"

# --- a NaN loss, and a NaN gradient, at step 3 of a sane run ---
write_config nan 1e-3
train nan PTRAIN_TEST_NAN_STEP=3
expect_eq "NaN loss at step 3: exit 6" 6 "$rc"
expect_eq "NaN loss at step 3: the message names step 3" 3 "$(diverged_at nan)"
ok "NaN loss at step 3: it says the loss is nan" grep -q "step 3 of 12: the loss is nan" "$tmp/nan.err"
write_config grad 1e-3
train grad PTRAIN_TEST_NAN_GRAD_STEP=3
expect_eq "NaN gradient at step 3: exit 6, naming step 3" "6 3" "$rc $(diverged_at grad)"
ok "NaN gradient at step 3: it says the gradient norm is nan" grep -q "gradient norm nan" "$tmp/grad.err"

# --- skip_nonfinite_steps: true ---
write_config skip 1e-3 "skip_nonfinite_steps: true"
train skip PTRAIN_TEST_NAN_STEP=3 PTRAIN_TEST_NAN_GRAD_STEP=5
expect_eq "skip_nonfinite_steps: the run finishes (exit 0)" 0 "$rc"
ok "skip_nonfinite_steps: a warning names step 3" grep -q "^ptrain: warning: step 3: the loss is nan.*skipped" "$tmp/skip.err"
ok "skip_nonfinite_steps: a warning names step 5" grep -q "^ptrain: warning: step 5: .*gradient norm nan.*skipped" "$tmp/skip.err"
ok "skip_nonfinite_steps: the final adapter is written" test -s "$tmp/skip/lora/adapter.h5"
expect_eq "skip_nonfinite_steps: no NaN or inf in any file written" 0 "$(nonfinite_in skip)"
ok "skip_nonfinite_steps: ptrain check shows the key" sh -c "'$P' check '$tmp/skip.yaml' | grep -q 'skip_nonfinite_steps *true'"
write_config skip10 1e3 "skip_nonfinite_steps: true
max_steps: 40"
sed -i 's/^max_steps: 12$//' "$tmp/skip10.yaml"
train skip10
n=$(sed -n 's/^ptrain: diverged: step \([0-9]*\) of 40: .*(10 steps in a row).*/\1/p' "$tmp/skip10.err")
expect_eq "skip_nonfinite_steps, learning_rate 1e3: stops after 10 in a row (exit 6)" 6 "$rc"
expect_eq "skip_nonfinite_steps, learning_rate 1e3: 9 warnings, then the message at the 10th" \
    "9 yes" "$(grep -c '^ptrain: warning: step [0-9]*: the loss is nan' "$tmp/skip10.err") $([ -n "$n" ] && echo yes)"
ok "skip_nonfinite_steps, learning_rate 1e3: no final adapter" test ! -e "$tmp/skip10/lora/adapter.h5"
expect_eq "skip_nonfinite_steps, learning_rate 1e3: no NaN or inf in any file written" 0 "$(nonfinite_in skip10)"
done_testing
