#!/bin/sh
# test_grpo_mpi.sh — method: grpo data parallel, on the tiny Llama in tests/data and the prompts of
# share/data/pirate-preferences.jsonl with a built-in reward: 2 ranks with one prompt (4
# completions) each train the adapter that 1 process with one prompt and gradient_accumulation_steps
# 2 trains (the completions are drawn from the batch's number over all ranks, the loss is the mean
# over the step's completion tokens on every rank): max relative difference <= 1e-5, and the same
# logged rewards; the evaluation of the held-out prompts (val_split_ratio: 3 prompts; the ranks' eval
# batch of one prompt each, so 2 rounds, the second rank's second one empty; 1 process's of two, the
# same global eval batch as TRL counts it: 2 batches) logs the same eval_reward, reward std and lengths
# (each the mean over the eval batches, as TRL), and an eval_loss within 1e-4. One of the rewards is a Python
# function: the 2 ranks share one reward worker (the node's first rank runs it; the function's module,
# imported once per worker, logs its pid: one pid), with the same rewards as 1 process's own worker.
# Skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_config() { # write_config FILE OUTDIR ACCUM PYDIR EVAL_BATCH
    cat >"$1" <<YAML
model_name: "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4"
method: grpo
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl"
    num_samples: 16
num_generations: 4
max_completion_length: 10
reward_funcs: [length, "regex:e", "$4/r.py:ids_mod7"]
beta: 0.04
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: 4
per_device_eval_batch_size: $5
val_split_ratio: 0.1875
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
ids_mod7() { grep -o '"rewards/ids_mod7/mean": [-0-9.]*' "$1/metrics.jsonl"; }
eval_rewards() { grep -o '"eval_reward": .*"eval_completions/mean_terminated_length": [0-9.]*' "$1/metrics.jsonl"; }
eval_loss() { grep -o '"eval_loss": [-0-9.]*' "$1/metrics.jsonl" | sed 's/.*: //'; }

reward_module() { # reward_module DIR: a Python reward whose import logs the worker's pid in DIR/pids
    mkdir -p "$1"
    cat >"$1/r.py" <<'PYEOF'
import os
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pids"), "a") as f:
    f.write(f"{os.getpid()}\n")

def ids_mod7(completions, completion_ids, **kwargs):
    assert len(completions) == len(completion_ids)
    return [(sum(ids) % 7) / 7 for ids in completion_ids]
PYEOF
}

if ! command -v "${PTRAIN_PYTHON:-python3}" >/dev/null 2>&1; then
    skip_test "GRPO on 2 ranks" "no Python (${PTRAIN_PYTHON:-python3}) for the reward worker"
elif command -v "$mpirun" >/dev/null 2>&1; then
    reward_module "$tmp/py1"
    reward_module "$tmp/py2"
    write_config "$tmp/one.yaml" "$tmp/one" 2 "$tmp/py1" 8
    "$P" train "$tmp/one.yaml" >"$tmp/one.out" 2>&1
    expect_eq "1 process x accumulation 2: the run exits 0" 0 "$?"
    write_config "$tmp/two.yaml" "$tmp/two" 1 "$tmp/py2" 4
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/two.yaml" >"$tmp/two.out" 2>&1
    expect_eq "2 ranks: the run exits 0" 0 "$?"
    ok "2 ranks: the same rewards logged at every step" test "$(rewards "$tmp/one")" = "$(rewards "$tmp/two")"
    ok "2 ranks: ... and the Python function's" test -n "$(ids_mod7 "$tmp/one")" -a "$(ids_mod7 "$tmp/one")" = "$(ids_mod7 "$tmp/two")"
    expect_eq "2 ranks: one reward worker for the node (pids it logged)" 1 "$(sort -u "$tmp/py2/pids" | wc -l)"
    ok "2 ranks: the evaluation logs the same eval_reward, std and lengths" \
        test -n "$(eval_rewards "$tmp/one")" -a "$(eval_rewards "$tmp/one")" = "$(eval_rewards "$tmp/two")"
    ok "2 ranks: ... and eval_loss ($(eval_loss "$tmp/one") vs $(eval_loss "$tmp/two")) within 1e-4" \
        awk -v a="$(eval_loss "$tmp/one")" -v b="$(eval_loss "$tmp/two")" 'BEGIN { d = a - b; exit !(a != "" && d * d <= 1e-8) }'
    write_config "$tmp/nomod.yaml" "$tmp/nomod" 1 "$tmp/nowhere" 4
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/nomod.yaml" >"$tmp/nomod.out" 2>&1
    rc=$?
    ok "2 ranks, a reward module that does not load: the job stops (exit $rc) with the worker's message" \
        sh -c "test $rc -ne 0 && grep -q 'reward_funcs: FileNotFoundError' '$tmp/nomod.out'"
    diff_line=$("$DIFF" "$tmp/one/lora/adapter.h5" "$tmp/two/lora/adapter.h5" 2>&1)
    printf '# adapter difference, 1 process x accumulation 2 vs 2 ranks: %s\n' "$diff_line"
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "2 ranks: the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?} <= 1e-5)" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
else
    skip_test "GRPO on 2 ranks" "mpirun not found"
fi
done_testing
