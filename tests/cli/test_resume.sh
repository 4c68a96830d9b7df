#!/bin/sh
# test_resume.sh — checkpoints and exact resume with one process, on the tiny Llama in tests/data
# (a run of 24 steps takes about a second). The uninterrupted run is the reference: a run
# interrupted at any point and resumed (resume_from_checkpoint: true) must end with a final
# adapter bit-identical to it (h5diff -d 0) and log the same losses after the resume point
# (metrics.jsonl without the timing fields). Interruptions: kill -9 mid-epoch, kill -9 right
# after an epoch boundary, kill -9 in the middle of a checkpoint write, SIGUSR1, SIGTERM, one
# SIGINT (exit 75 after a checkpoint), two interruptions in a row; a second SIGINT aborts at once
# (130). Also: damaged and incomplete checkpoints are skipped with a warning naming them, a named
# checkpoint (with or without .h5, HF's checkpoint-N form) is used and a bad one is an error,
# another LoRA shape or base model is refused, allowed changes are said, save_total_limit keeps
# the best and the resumed-from checkpoints, load_best_model_at_end and early stopping (also
# across a resume, and by another metric_for_best_model after one), save_only_model, an output_dir that cannot be written, and a full disk (a
# real tmpfs with room for three and a half checkpoints).
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
mnt=""
cleanup() {
    [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
model=$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4

write_config() { # write_config FILE OUTDIR [extra yaml]: 9 steps an epoch, 24 steps
    tiny_config "$1" "$2" "lora_dropout: 0.1
learning_rate: 1e-3
warmup_steps: 2
max_steps: 24
logging_steps: 3
seed: 11
save_steps: 4
resume_from_checkpoint: true
${3:-}"
}

train() { # train CONFIG [env...]: sets rc; stdout in $tmp/out, stderr in $tmp/err
    cfg=$1
    shift
    env "$@" "$P" train "$cfg" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# the losses and learning rates a run logged, without the timing fields
# the logged steps (not the start-up records: seconds, which differ from run to run)
logged() {
    [ -s "$1/metrics.jsonl" ] || { echo "no metrics in $1" && return; }
    grep -v '"startup"' "$1/metrics.jsonl" | sed 's/, "tokens_per_s.*//'
}

same_adapter() { h5diff -d 0 "$1/lora/adapter.h5" "$2/lora/adapter.h5" >/dev/null 2>&1; }

# resume NAME OUTDIR: run the config again until it finishes; then compare with the reference
resumed_equal() {
    train "$tmp/$2.yaml"
    expect_eq "$1: the resumed run finishes (exit 0)" 0 "$rc"
    ok "$1: final adapter bit-identical to the uninterrupted run" same_adapter "$tmp/ref" "$tmp/$2"
    expect_eq "$1: same logged losses as the uninterrupted run" "$(logged "$tmp/ref")" "$(logged "$tmp/$2")"
}

# --- the reference ---
write_config "$tmp/ref.yaml" "$tmp/ref"
train "$tmp/ref.yaml"
expect_eq "uninterrupted run: exit 0" 0 "$rc"
ok "uninterrupted run: a checkpoint every 4 steps" test -f "$tmp/ref/checkpoint-4.h5" -a -f "$tmp/ref/checkpoint-24.h5"
ok "uninterrupted run: no temporary file left" test -z "$(ls -A "$tmp/ref" | grep tmp)"
ok "uninterrupted run: says it starts fresh" grep -q "resume     no complete checkpoint in $tmp/ref: starting fresh" "$tmp/out"

# --- kill -9 at several points ---
for point in 7 10; do
    write_config "$tmp/k$point.yaml" "$tmp/k$point"
    train "$tmp/k$point.yaml" PTRAIN_TEST_KILL_STEP=$point
    expect_eq "kill -9 at step $point: the process died of SIGKILL" 137 "$rc"
    resumed_equal "kill -9 at step $point" "k$point"
    ok "kill -9 at step $point: resumed from the checkpoint before it" \
        grep -q "resume     from $tmp/k$point/checkpoint-$((point / 4 * 4)).h5 at step $((point / 4 * 4))" "$tmp/out"
done

# --- kill -9 in the middle of writing checkpoint 12 ---
write_config "$tmp/mw.yaml" "$tmp/mw"
train "$tmp/mw.yaml" PTRAIN_TEST_CRASH_IN_SAVE=12
expect_eq "kill -9 mid-write: the process died of SIGKILL" 137 "$rc"
ok "kill -9 mid-write: no checkpoint-12.h5, only a temporary file" \
    test ! -e "$tmp/mw/checkpoint-12.h5" -a -n "$(ls -A "$tmp/mw" | grep '^\.checkpoint-12\.h5\.tmp\.')"
resumed_equal "kill -9 mid-write" mw
ok "kill -9 mid-write: resumed from checkpoint 8 and removed the temporary file" \
    test -n "$(grep "resume     from $tmp/mw/checkpoint-8.h5" "$tmp/out")" -a -n "$(grep 'interrupted checkpoint write' "$tmp/out")"

# --- signals: checkpoint at the next step boundary, exit 75, resume ---
for sig in USR1 TERM INT; do
    write_config "$tmp/s$sig.yaml" "$tmp/s$sig"
    PTRAIN_TEST_STEP_DELAY_MS=150 "$P" train "$tmp/s$sig.yaml" >"$tmp/sig$sig.out" 2>"$tmp/sig$sig.err" &
    pid=$!
    i=0
    until grep -q 'step 6/24' "$tmp/sig$sig.out" 2>/dev/null || [ $i -gt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    kill -s "$sig" "$pid"
    wait "$pid"
    rc=$?
    expect_eq "SIG$sig: exit 75 (checkpointed, run me again)" 75 "$rc"
    stopped=$(sed -n 's/.*stopped    by SIG'"$sig"' after step \([0-9]*\).*/\1/p' "$tmp/sig$sig.out")
    ok "SIG$sig: a checkpoint of the step it stopped after ($stopped)" test -n "$stopped" -a -f "$tmp/s$sig/checkpoint-$stopped.h5"
    resumed_equal "SIG$sig at step $stopped" "s$sig"
done

# a second Ctrl-C does not wait for the checkpoint
write_config "$tmp/int2.yaml" "$tmp/int2"
PTRAIN_TEST_STEP_DELAY_MS=400 "$P" train "$tmp/int2.yaml" >"$tmp/int2.out" 2>"$tmp/int2.err" &
pid=$!
i=0
until grep -q 'step 3/24' "$tmp/int2.out" 2>/dev/null || [ $i -gt 1200 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT "$pid"
sleep 0.05
kill -INT "$pid"
wait "$pid"
rc=$?
expect_eq "two SIGINTs: exit 130 at once" 130 "$rc"
ok "two SIGINTs: says it stops without a checkpoint" grep -q "second interrupt: stopping now without a checkpoint" "$tmp/int2.err"

# --- two interruptions in a row ---
write_config "$tmp/twice.yaml" "$tmp/twice"
train "$tmp/twice.yaml" PTRAIN_TEST_KILL_STEP=6
train "$tmp/twice.yaml" PTRAIN_TEST_KILL_STEP=15
expect_eq "two kills (steps 6 and 15): the second run died too" 137 "$rc"
resumed_equal "two kills (steps 6 and 15)" twice

# --- damaged and incomplete checkpoints are skipped, newest good one used ---
write_config "$tmp/dmg.yaml" "$tmp/dmg"
train "$tmp/dmg.yaml" PTRAIN_TEST_KILL_STEP=15
printf 'X' | dd of="$tmp/dmg/checkpoint-12.h5" bs=1 seek=5000 conv=notrunc 2>/dev/null
size=$(stat -c %s "$tmp/dmg/checkpoint-8.h5")
truncate -s $((size / 2)) "$tmp/dmg/checkpoint-8.h5"
train "$tmp/dmg.yaml"
expect_eq "damaged checkpoint-12, truncated checkpoint-8: the run finishes" 0 "$rc"
ok "damaged: warned by name" grep -q "skipping $tmp/dmg/checkpoint-12.h5: damaged: CRC-32" "$tmp/err"
ok "truncated: warned by name" grep -q "skipping $tmp/dmg/checkpoint-8.h5: damaged: .* bytes, the completion mark says" "$tmp/err"
ok "damaged: resumed from checkpoint-4 instead" grep -q "resume     from $tmp/dmg/checkpoint-4.h5 at step 4" "$tmp/out"
ok "damaged: still bit-identical" same_adapter "$tmp/ref" "$tmp/dmg"

# --- a named checkpoint ---
mkdir -p "$tmp/named"
cp "$tmp/ref/checkpoint-8.h5" "$tmp/ref/checkpoint-20.h5" "$tmp/named/"
write_config "$tmp/named.yaml" "$tmp/named" "resume_from_checkpoint: \"$tmp/named/checkpoint-8\""
sed -i '/^resume_from_checkpoint: true$/d' "$tmp/named.yaml"
train "$tmp/named.yaml"
ok "named checkpoint-8 (HF form, no .h5): used although 20 is newer" \
    grep -q "resume     from $tmp/named/checkpoint-8.h5 at step 8" "$tmp/out"
ok "named checkpoint-8: bit-identical" same_adapter "$tmp/ref" "$tmp/named"
write_config "$tmp/miss.yaml" "$tmp/miss" "resume_from_checkpoint: checkpoint-99"
sed -i '/^resume_from_checkpoint: true$/d' "$tmp/miss.yaml"
train "$tmp/miss.yaml"
expect_eq "a named checkpoint that is missing: exit 1" 1 "$rc"
ok "a named checkpoint that is missing: one error naming it" \
    test "$(grep -c '^ptrain' "$tmp/err")" = 1 -a -n "$(grep 'resume_from_checkpoint: checkpoint-99 not found' "$tmp/err")"
printf 'X' | dd of="$tmp/named/checkpoint-20.h5" bs=1 seek=3000 conv=notrunc 2>/dev/null
write_config "$tmp/bad20.yaml" "$tmp/named" "resume_from_checkpoint: \"$tmp/named/checkpoint-20.h5\""
sed -i '/^resume_from_checkpoint: true$/d' "$tmp/bad20.yaml"
train "$tmp/bad20.yaml"
expect_eq "a named checkpoint that is damaged: exit 1" 1 "$rc"
ok "a named checkpoint that is damaged: the error says so" grep -q "checkpoint-20.h5: damaged" "$tmp/err"

# --- what may and may not change on resume ---
mkdir -p "$tmp/r8" "$tmp/lr"
cp "$tmp/ref/checkpoint-8.h5" "$tmp/r8/"
write_config "$tmp/r8.yaml" "$tmp/r8"
sed -i 's/^lora_r: 4/lora_r: 8/' "$tmp/r8.yaml"
train "$tmp/r8.yaml"
expect_eq "another lora_r: refused (exit 1)" 1 "$rc"
ok "another lora_r: the error names both" grep -q "other LoRA settings: r 4, .* this run has r 8" "$tmp/err"
cp -r "$model" "$tmp/other-model" # the same shapes, one weight byte changed
printf 'X' | dd of="$tmp/other-model/model.safetensors" bs=1 seek=$(($(stat -c %s "$model/model.safetensors") / 2)) \
    conv=notrunc 2>/dev/null
sed -i "s#^model_name: .*#model_name: \"$tmp/other-model\"#; s/^lora_r: 8/lora_r: 4/" "$tmp/r8.yaml"
train "$tmp/r8.yaml"
expect_eq "another base model: refused (exit 1)" 1 "$rc"
ok "another base model: the error names both" grep -q "was trained on another base model: .*tiny-llama-bnb4.*this run has .*other-model" "$tmp/err"
cp "$tmp/ref/checkpoint-8.h5" "$tmp/lr/"
write_config "$tmp/lr.yaml" "$tmp/lr"
sed -i 's/^learning_rate: 1e-3/learning_rate: 5e-4/; s/^logging_steps: 3/logging_steps: 2/' "$tmp/lr.yaml"
echo "lr_scheduler_type: cosine" >>"$tmp/lr.yaml"
train "$tmp/lr.yaml"
expect_eq "another learning_rate, logging_steps and lr_scheduler_type: allowed" 0 "$rc"
ok "another learning_rate: said" grep -q "resume     learning_rate changed: 0.001 at the checkpoint, 0.0005 now" "$tmp/out"
ok "another logging_steps: said" grep -q "resume     logging_steps changed: 3 at the checkpoint, 2 now" "$tmp/out"
ok "another lr_scheduler_type: said" grep -q "resume     lr_scheduler_type changed: linear at the checkpoint, cosine now" "$tmp/out"

# --- best model, early stopping, save_total_limit ---
# greater_is_better on eval_loss makes the first evaluation the best (the loss falls), so the
# best is not the newest and early stopping (patience 2) ends the run at step 12 of 24.
best_yaml="val_split_ratio: 0.2
eval_strategy: steps
eval_steps: 4
load_best_model_at_end: true
greater_is_better: true
early_stopping_patience: 2
save_total_limit: 1"
write_config "$tmp/best.yaml" "$tmp/best" "$best_yaml"
train "$tmp/best.yaml"
expect_eq "early stopping: exit 0" 0 "$rc"
ok "early stopping: stopped after step 12" grep -q "early stop eval_loss has not improved .* for 2 evaluations (best .* at step 4)" "$tmp/out"
ok "early stopping: no step after 12" test -z "$(grep -E '"step": (1[3-9]|2[0-9])' "$tmp/best/metrics.jsonl")"
ok "save_total_limit 1: the newest (12) and the best (4) are kept, 8 is deleted" \
    test -f "$tmp/best/checkpoint-12.h5" -a -f "$tmp/best/checkpoint-4.h5" -a ! -e "$tmp/best/checkpoint-8.h5"
ok "load_best_model_at_end: the final adapter is checkpoint-4's" \
    h5diff -d 0 "$tmp/best/lora/adapter.h5" "$tmp/best/checkpoint-4.h5" \
    /base_model.model.model.layers.1.mlp.down_proj.lora_B.weight /adapter/base_model.model.model.layers.1.mlp.down_proj.lora_B.weight
ok "load_best_model_at_end: the adapter names its step" test "$(h5dump -a /best_model_step "$tmp/best/lora/adapter.h5" | grep -c '(0): 4')" = 1
write_config "$tmp/best2.yaml" "$tmp/best2" "$best_yaml"
train "$tmp/best2.yaml" PTRAIN_TEST_KILL_STEP=10
train "$tmp/best2.yaml"
expect_eq "early stopping across a kill at step 10: exit 0" 0 "$rc"
ok "early stopping across a resume: the patience counter survived (stops at 12)" \
    grep -q "early stop eval_loss has not improved .* (best .* at step 4)" "$tmp/out"
ok "early stopping across a resume: the resumed-from (8), best (4) and newest (12) are kept" \
    test -f "$tmp/best2/checkpoint-12.h5" -a -f "$tmp/best2/checkpoint-4.h5" -a -f "$tmp/best2/checkpoint-8.h5"
ok "early stopping across a resume: same final adapter" same_adapter "$tmp/best" "$tmp/best2"
# another metric on resume: the best model is tracked anew, by the new metric (the perplexity,
# exp of the eval loss, falls as the loss does, so with greater_is_better the first evaluation
# after the resume, step 12, stays the best and patience 2 ends the run at step 20)
mkdir -p "$tmp/ppl"
cp "$tmp/best2/checkpoint-8.h5" "$tmp/ppl/"
write_config "$tmp/ppl.yaml" "$tmp/ppl" "$best_yaml
metric_for_best_model: perplexity"
train "$tmp/ppl.yaml"
expect_eq "another metric_for_best_model on resume: exit 0" 0 "$rc"
ok "another metric_for_best_model on resume: the best model is tracked anew" \
    grep -q "resume: metric_for_best_model or greater_is_better changed; the best model is tracked anew" "$tmp/err"
ok "another metric_for_best_model on resume: early stopping by eval_perplexity (best at 12, stops at 20)" \
    grep -q "early stop eval_perplexity has not improved .* for 2 evaluations (best .* at step 12)" "$tmp/out"

# --- save_only_model ---
write_config "$tmp/som.yaml" "$tmp/som" "save_only_model: true"
train "$tmp/som.yaml" PTRAIN_TEST_KILL_STEP=10
ok "save_only_model: no optimizer state in the checkpoint" test -z "$(h5ls "$tmp/som/checkpoint-8.h5/optimizer/exp_avg" 2>/dev/null)"
train "$tmp/som.yaml"
expect_eq "save_only_model: resumes (exit 0)" 0 "$rc"
ok "save_only_model: says the resume is not exact" grep -q "without optimizer state; AdamW starts again" "$tmp/err"

# --- save_strategy: epoch (9 steps an epoch), save_steps as a fraction (0.25 of 24 = every 6) ---
write_config "$tmp/ep.yaml" "$tmp/ep" "save_strategy: epoch"
train "$tmp/ep.yaml"
expect_eq "save_strategy epoch: checkpoints at the epochs' ends and the last step" "checkpoint-18.h5 checkpoint-24.h5 checkpoint-9.h5" \
    "$(ls "$tmp/ep" | grep '^checkpoint' | tr '\n' ' ' | sed 's/ $//')"
write_config "$tmp/fr.yaml" "$tmp/fr"
sed -i 's/^save_steps: 4/save_steps: 0.25/' "$tmp/fr.yaml"
train "$tmp/fr.yaml"
expect_eq "save_steps 0.25 of 24 steps: every 6" "checkpoint-12.h5 checkpoint-18.h5 checkpoint-24.h5 checkpoint-6.h5" \
    "$(ls "$tmp/fr" | grep '^checkpoint' | tr '\n' ' ' | sed 's/ $//')"

# --- an output_dir that cannot be written: an error before the first step ---
: >"$tmp/afile"
write_config "$tmp/ro.yaml" "$tmp/afile/out"
train "$tmp/ro.yaml"
expect_eq "output_dir under a file: exit 1" 1 "$rc"
ok "output_dir under a file: an error naming it, before any step" \
    test -n "$(grep "$tmp/afile/out" "$tmp/err")" -a -z "$(grep '^step ' "$tmp/out")"

# --- a full disk during a save (a real tmpfs with room for three and a half checkpoints) ---
mnt=$tmp/small
mkdir -p "$mnt"
room=$(($(stat -c %s "$tmp/ref/checkpoint-4.h5") * 7 / 2 / 1024))
if mount -t tmpfs -o size=${room}k tmpfs "$mnt" 2>"$tmp/mount.err"; then
    write_config "$tmp/full.yaml" "$mnt/run"
    train "$tmp/full.yaml"
    expect_eq "disk full: exit 1" 1 "$rc"
    ok "disk full: one error naming the checkpoint and saying the earlier ones are intact" \
        test "$(grep -c '^ptrain' "$tmp/err")" -ge 1 -a -n "$(grep "checkpoint-[0-9]*.h5 (earlier checkpoints are intact" "$tmp/err")"
    ok "disk full: no temporary file left" test -z "$(ls -A "$mnt/run" | grep tmp)"
    last=$(ls "$mnt/run" | sed -n 's/^checkpoint-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -1)
    "$P" inspect "$mnt/run/checkpoint-$last.h5" >/dev/null 2>&1
    expect_eq "disk full: the newest checkpoint ($last) verifies" 0 "$?"
    cp -a "$mnt/run" "$tmp/full"
    umount "$mnt" && mnt=""
    sed -i "s#$tmp/small/run#$tmp/full#g" "$tmp/full.yaml"
    train "$tmp/full.yaml"
    ok "disk full: resumed on a disk with room, from step $last" grep -q "resume     from $tmp/full/checkpoint-$last.h5" "$tmp/out"
    ok "disk full: bit-identical after the resume" same_adapter "$tmp/ref" "$tmp/full"
else
    for t in exit message no-temp verifies resumed identical; do
        skip_test "disk full: $t" "cannot mount a tmpfs here: $(head -c 120 "$tmp/mount.err")"
    done
    mnt=""
fi

# --- the families of make_more_goldens.py (smollm3's NoPE layers, granite's multipliers, olmo2's
# post-norms and whole-width q/k norms, olmo3's windows), phi3 (fused LoRA on qkv_proj and gate_up_proj, partial rotary;
# NF4 on load), granite4 (fused LoRA on the shared MLP's input_linear) and qwen35 (Gated DeltaNet layers and a gated
# full-attention layer, LoRA on every projection PEFT adapts there) and gemma4 (KV-shared layers, per-layer inputs;
# no k/v pairs on the shared layers): killed at step 6 and resumed from step 4, the adapter of the uninterrupted run
for fam in smollm3 granite olmo2 olmo3 phi3 granite4 qwen35 gemma4; do
    extra=""
    [ "$fam" = qwen35 ] && extra="lora_target_modules: [q_proj, k_proj, v_proj, o_proj, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, gate_proj, up_proj, down_proj]"
    [ "$fam" = gemma4 ] && extra="lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
    for r in ref k; do
        write_config "$tmp/$fam-$r.yaml" "$tmp/$fam-$r" "$extra"
        sed -i -e "s|^model_name: .*|model_name: \"$PTRAIN_SRCDIR/tests/data/$fam/hf\"|" -e 's/^max_steps: 24/max_steps: 8/' \
            "$tmp/$fam-$r.yaml"
    done
    train "$tmp/$fam-ref.yaml"
    expect_eq "$fam: uninterrupted run: exit 0" 0 "$rc"
    train "$tmp/$fam-k.yaml" PTRAIN_TEST_KILL_STEP=6
    expect_eq "$fam: kill -9 at step 6" 137 "$rc"
    train "$tmp/$fam-k.yaml"
    expect_eq "$fam: the resumed run finishes (exit 0)" 0 "$rc"
    ok "$fam: final adapter bit-identical to the uninterrupted run" same_adapter "$tmp/$fam-ref" "$tmp/$fam-k"
done

done_testing
