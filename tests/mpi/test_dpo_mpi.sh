#!/bin/sh
# test_dpo_mpi.sh — method: dpo (and cpo, orpo) through the whole trainer, on the tiny Llama in tests/data (its
# chat template renders the conversational pairs of share/data/pirate-preferences.jsonl):
# - the first logged loss is ln 2 (B zero: the policy is the reference) and metrics.jsonl has
#   TRL's metrics (rewards/..., logps/...);
# - data parallel: 2 ranks with 2 pairs each train the same adapter as 1 process with 2 pairs and
#   gradient_accumulation_steps 2 (max relative difference <= 1e-5), with the same losses;
# - CPO and ORPO (no reference): each trains with TRL's metrics, 2 ranks = 1 process x accumulation 2;
# - KTO (the pairs unrolled, the KL estimate from mismatched sequences): the first loss is 0.5 (B
#   zero), TRL's KTO metrics, the loss falls; exact resume with its sequential sampler; its first
#   step on 2 ranks gives the adapter of 1 process x accumulation 2 (later steps differ by design:
#   TRL takes the KL estimate's mean over the ranks' micro-batches, one process over each's own);
# - evaluation (val_split_ratio): eval_loss is the held-out pairs' mean DPO loss;
# - exact resume: a run killed (kill -9) after its step-4 checkpoint and run again ends with the
#   adapter of the uninterrupted run, bit-identical, and the same losses.
# The 2-rank case skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { # write_config FILE OUTDIR BATCH ACCUM [extra yaml]
    cat >"$1" <<YAML
model_name: "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4"
method: ${METHOD:-dpo}
beta: 0.1
max_seq_length: 64
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl"
    num_samples: 24
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: $3
gradient_accumulation_steps: $4
learning_rate: 1e-3
warmup_steps: 0
max_steps: ${MAX_STEPS:-8}
logging_steps: 1
seed: 11
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
$5
YAML
}

# the logged records without the timing fields (the method's metrics are last: kept)
logged() { grep '"loss"' "$1/metrics.jsonl" | sed 's/, "tokens_per_s[^}]*eta_s": [0-9.]*//; s/, "ranks".*comm_time_s": [0-9.]*//'; }
losses() { grep -o '"loss": [0-9.]*' "$1/metrics.jsonl"; }

write_config "$tmp/one.yaml" "$tmp/one" 2 2
"$P" train "$tmp/one.yaml" >"$tmp/one.out" 2>&1
one_rc=$?
expect_eq "the DPO run exits 0" 0 "$one_rc"
first=$(grep -m1 -o '"loss": [0-9.]*' "$tmp/one/metrics.jsonl")
expect_eq "the first loss is ln 2 (the adapter's B is zero)" '"loss": 0.693147' "$first"
ok "metrics.jsonl has TRL's DPO metrics" grep -q '"rewards/chosen": [-0-9.]*, "rewards/rejected": [-0-9.]*, "rewards/accuracies": [0-9.]*, "rewards/margins": [-0-9.]*, "logps/chosen": [-0-9.]*, "logps/rejected": [-0-9.]*}' "$tmp/one/metrics.jsonl"
last=$(losses "$tmp/one" | tail -1 | awk '{print $2}')
ok "the loss falls below ln 2 (last: $last)" awk -v l="$last" 'BEGIN { exit !(l + 0 < 0.69) }'

if command -v "$mpirun" >/dev/null 2>&1; then
    write_config "$tmp/two.yaml" "$tmp/two" 2 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/two.yaml" >"$tmp/two.out" 2>&1
    rc=$?
    expect_eq "2 ranks: the run exits 0" 0 "$rc"
    diff_line=$("$DIFF" "$tmp/one/lora/adapter.h5" "$tmp/two/lora/adapter.h5" 2>&1)
    printf '# adapter difference, 1 process x accumulation 2 vs 2 ranks: %s\n' "$diff_line"
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "2 ranks: the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?} <= 1e-5)" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
    expect_eq "2 ranks: the same losses and metrics" "$(logged "$tmp/one")" "$(logged "$tmp/two")"
else
    skip_test "2 ranks: the run exits 0" "mpirun not found"
    skip_test "2 ranks: the adapter of 1 process" "mpirun not found"
    skip_test "2 ranks: the same losses and metrics" "mpirun not found"
fi

# CPO (no reference): trains, logs nll_loss, and 2 ranks give the adapter of 1 process x accumulation 2
METHOD=cpo write_config "$tmp/cpo1.yaml" "$tmp/cpo1" 2 2
"$P" train "$tmp/cpo1.yaml" >"$tmp/cpo1.out" 2>&1
expect_eq "cpo: the run exits 0" 0 "$?"
ok "cpo: metrics.jsonl has TRL's CPO metrics (nll_loss)" grep -q '"logps/rejected": [-0-9.]*, "nll_loss": [0-9.]*}' "$tmp/cpo1/metrics.jsonl"
if command -v "$mpirun" >/dev/null 2>&1; then
    METHOD=cpo write_config "$tmp/cpo2.yaml" "$tmp/cpo2" 2 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/cpo2.yaml" >"$tmp/cpo2.out" 2>&1
    diff_line=$("$DIFF" "$tmp/cpo1/lora/adapter.h5" "$tmp/cpo2/lora/adapter.h5" 2>&1)
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "cpo: 2 ranks give the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?})" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
else
    skip_test "cpo: 2 ranks give the adapter of 1 process" "mpirun not found"
fi

# ORPO (no reference; the chosen prompts count in its token mean): the same checks
METHOD=orpo write_config "$tmp/orpo1.yaml" "$tmp/orpo1" 2 2
"$P" train "$tmp/orpo1.yaml" >"$tmp/orpo1.out" 2>&1
expect_eq "orpo: the run exits 0" 0 "$?"
ok "orpo: metrics.jsonl has TRL's ORPO metrics" grep -q '"nll_loss": [0-9.]*, "log_odds_ratio": [-0-9.]*, "log_odds_chosen": [-0-9.]*}' "$tmp/orpo1/metrics.jsonl"
if command -v "$mpirun" >/dev/null 2>&1; then
    METHOD=orpo write_config "$tmp/orpo2.yaml" "$tmp/orpo2" 2 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/orpo2.yaml" >"$tmp/orpo2.out" 2>&1
    diff_line=$("$DIFF" "$tmp/orpo1/lora/adapter.h5" "$tmp/orpo2/lora/adapter.h5" 2>&1)
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "orpo: 2 ranks give the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?})" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
else
    skip_test "orpo: 2 ranks give the adapter of 1 process" "mpirun not found"
fi

# KTO: the pairs unrolled (each chunk's chosen, then its rejected), batches of 4 with their KL sequences
METHOD=kto write_config "$tmp/kto1.yaml" "$tmp/kto1" 4 2 "save_steps: 4
resume_from_checkpoint: true"
"$P" train "$tmp/kto1.yaml" >"$tmp/kto1.out" 2>&1
expect_eq "kto: the run exits 0" 0 "$?"
first=$(grep -m1 -o '"loss": [0-9.]*' "$tmp/kto1/metrics.jsonl")
expect_eq "kto: the first loss is 0.5 (B zero: the KL estimate 0, every loss 1 - sigmoid(0))" '"loss": 0.500000' "$first"
# (the unrolled pairs put 24 chosen before 24 rejected: a step has either, and logs what it has, as TRL)
ok "kto: metrics.jsonl has TRL's KTO metrics of the desirable rows" grep -q '"rewards/chosen": [-0-9.]*, "logps/chosen": [-0-9.]*, "kl": [0-9.]*}' "$tmp/kto1/metrics.jsonl"
ok "kto: ... and of the undesirable rows" grep -q '"rewards/rejected": [-0-9.]*, "logps/rejected": [-0-9.]*, "kl": [0-9.]*}' "$tmp/kto1/metrics.jsonl"
METHOD=kto write_config "$tmp/ktocut.yaml" "$tmp/ktocut" 4 2 "save_steps: 4
resume_from_checkpoint: true"
PTRAIN_TEST_KILL_STEP=6 "$P" train "$tmp/ktocut.yaml" >"$tmp/ktocut.out" 2>&1
"$P" train "$tmp/ktocut.yaml" >"$tmp/ktocut2.out" 2>&1
ok "kto: killed at step 6 and resumed, the adapter is bit-identical to the uninterrupted run's" \
    h5diff -d 0 "$tmp/kto1/lora/adapter.h5" "$tmp/ktocut/lora/adapter.h5"
if command -v "$mpirun" >/dev/null 2>&1; then
    METHOD=kto MAX_STEPS=1 write_config "$tmp/ktos1.yaml" "$tmp/ktos1" 4 2
    "$P" train "$tmp/ktos1.yaml" >"$tmp/ktos1.out" 2>&1
    METHOD=kto MAX_STEPS=1 write_config "$tmp/kto2.yaml" "$tmp/kto2" 4 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/kto2.yaml" >"$tmp/kto2.out" 2>&1
    diff_line=$("$DIFF" "$tmp/ktos1/lora/adapter.h5" "$tmp/kto2/lora/adapter.h5" 2>&1)
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "kto: 2 ranks' first step gives the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?})" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
else
    skip_test "kto: 2 ranks' first step gives the adapter of 1 process" "mpirun not found"
fi

# evaluation: eval_loss is the mean DPO loss of the held-out pairs, ln 2 before any step moves B
write_config "$tmp/eval.yaml" "$tmp/eval" 2 2 "val_split_ratio: 0.25
eval_strategy: steps
eval_steps: 4"
"$P" train "$tmp/eval.yaml" >"$tmp/eval.out" 2>&1
expect_eq "eval: the run with val_split_ratio exits 0" 0 "$?"
evals=$(grep -c '"eval_loss": 0\.[0-9]*' "$tmp/eval/metrics.jsonl")
ok "eval: eval_loss logged at steps 4 and 8 ($evals records), below ln 2 at the end" \
    awk -v n="$evals" -v l="$(grep -o '"eval_loss": [0-9.]*' "$tmp/eval/metrics.jsonl" | tail -1 | awk '{print $2}')" \
    'BEGIN { exit !(n >= 2 && l + 0 < 0.6931) }'

# exact resume: killed after the step-4 checkpoint, then the same command again
extra="save_steps: 4
resume_from_checkpoint: true"
write_config "$tmp/ref.yaml" "$tmp/ref" 2 2 "$extra"
"$P" train "$tmp/ref.yaml" >"$tmp/ref.out" 2>&1
write_config "$tmp/cut.yaml" "$tmp/cut" 2 2 "$extra"
PTRAIN_TEST_KILL_STEP=6 "$P" train "$tmp/cut.yaml" >"$tmp/cut.out" 2>&1
rc=$?
ok "resume: the first run is killed at step 6 (exit $rc) after checkpoint-4" test "$rc" -ne 0 -a -f "$tmp/cut/checkpoint-4.h5"
"$P" train "$tmp/cut.yaml" >"$tmp/cut2.out" 2>&1
expect_eq "resume: the run again finishes" 0 "$?"
ok "resume: the final adapter is bit-identical to the uninterrupted run's" \
    h5diff -d 0 "$tmp/ref/lora/adapter.h5" "$tmp/cut/lora/adapter.h5"
expect_eq "resume: the same losses after the resume point" "$(losses "$tmp/ref" | tail -4)" "$(losses "$tmp/cut" | tail -4)"
done_testing
