#!/bin/sh
# test_grpo_mpi.sh — method: grpo data parallel, on the tiny Llama in tests/data and the prompts of
# share/data/pirate-preferences.jsonl with a built-in reward: 2 ranks with one prompt (4
# completions) each train the adapter that 1 process with one prompt and gradient_accumulation_steps
# 2 trains (the completions are drawn from the batch's number over all ranks, the loss is the mean
# over the step's completion tokens on every rank): max relative difference <= 1e-5, and the same
# logged rewards; the evaluation of the held-out prompts (val_split_ratio, 4 eval batches of one
# prompt: 4 on one process, 2 on each rank) logs the same eval_reward, reward std and lengths, and an
# eval_loss within 1e-4. Skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { # write_config FILE OUTDIR ACCUM
    cat >"$1" <<YAML
model_name: "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4"
method: grpo
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl"
    num_samples: 16
num_generations: 4
max_completion_length: 10
reward_funcs: [length, "regex:e"]
beta: 0.04
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: 4
per_device_eval_batch_size: 4
val_split_ratio: 0.25
gradient_accumulation_steps: $3
learning_rate: 5e-3
warmup_steps: 0
max_steps: 4
logging_steps: 1
seed: 11
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
YAML
}
rewards() { grep -o '"reward": [-0-9.]*' "$1/metrics.jsonl"; }
eval_rewards() { grep -o '"eval_reward": .*"eval_completions/mean_terminated_length": [0-9.]*' "$1/metrics.jsonl"; }
eval_loss() { grep -o '"eval_loss": [-0-9.]*' "$1/metrics.jsonl" | sed 's/.*: //'; }

if command -v "$mpirun" >/dev/null 2>&1; then
    write_config "$tmp/one.yaml" "$tmp/one" 2
    "$P" train "$tmp/one.yaml" >"$tmp/one.out" 2>&1
    expect_eq "1 process x accumulation 2: the run exits 0" 0 "$?"
    write_config "$tmp/two.yaml" "$tmp/two" 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/two.yaml" >"$tmp/two.out" 2>&1
    expect_eq "2 ranks: the run exits 0" 0 "$?"
    ok "2 ranks: the same rewards logged at every step" test "$(rewards "$tmp/one")" = "$(rewards "$tmp/two")"
    ok "2 ranks: the evaluation logs the same eval_reward, std and lengths" \
        test -n "$(eval_rewards "$tmp/one")" -a "$(eval_rewards "$tmp/one")" = "$(eval_rewards "$tmp/two")"
    ok "2 ranks: ... and eval_loss ($(eval_loss "$tmp/one") vs $(eval_loss "$tmp/two")) within 1e-4" \
        awk -v a="$(eval_loss "$tmp/one")" -v b="$(eval_loss "$tmp/two")" 'BEGIN { d = a - b; exit !(a != "" && d * d <= 1e-8) }'
    diff_line=$("$DIFF" "$tmp/one/lora/adapter.h5" "$tmp/two/lora/adapter.h5" 2>&1)
    printf '# adapter difference, 1 process x accumulation 2 vs 2 ranks: %s\n' "$diff_line"
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "2 ranks: the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?} <= 1e-5)" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
else
    skip_test "GRPO on 2 ranks" "mpirun not found"
fi
done_testing
