#!/bin/sh
# make_corpus_checkpoint.sh — the seed corpus of fuzz_checkpoint (tests/fuzz/corpus/checkpoint/):
# real checkpoints written by ptrain itself, kept small (the committed tiny Llama, LoRA r 1 on one
# projection, 2 steps): eval-slurm.h5 has the optimizer moments, an evaluation (/metrics/evals,
# a best metric) and a Slurm job's fields; model-only.h5 is save_only_model (no moments).
# Paths inside are relative (model, data, config), so the files do not depend on where they were
# made. Re-run after a change of the checkpoint format:
#   tests/fuzz/make_corpus_checkpoint.sh [PTRAIN]      (default: build/ptrain)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
ptrain=${1:-$src/build/ptrain}
case "$ptrain" in /*) ;; *) ptrain=$(pwd)/$ptrain ;; esac
out=$src/tests/fuzz/corpus/checkpoint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$src/tests/data/hf/tiny-llama-bnb4" "$tmp/model"
ln -s "$src/share/data/pirate-instructions.jsonl" "$tmp/data.jsonl"

# seed NAME YAML-EXTRA: train 2 steps in $tmp and keep checkpoint-2.h5 as NAME
seed() {
    cat >"$tmp/$1.yaml" <<YAML
model_name: model
max_seq_length: 64
dataset:
  - name: data.jsonl
    num_samples: 40
lora_r: 1
lora_alpha: 2
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
max_steps: 2
save_steps: 2
logging_steps: 1
threads: 1
seed: 5
output_dir: out-$1
final_model_dir: out-$1/lora
$2
YAML
    (cd "$tmp" && SLURM_JOB_ID=4242 SLURM_JOB_NODELIST='node[01-02]' SLURM_RESTART_COUNT=1 \
        "$ptrain" train "$1.yaml" >"$1.log" 2>&1) || {
        cat "$tmp/$1.log" >&2
        exit 1
    }
    "$ptrain" inspect "$tmp/out-$1/checkpoint-2.h5" >/dev/null
    cp "$tmp/out-$1/checkpoint-2.h5" "$out/$1.h5"
    echo "$out/$1.h5: $(wc -c <"$out/$1.h5") bytes"
}

mkdir -p "$out"
seed eval-slurm "lora_target_modules: [q_proj]
val_split_ratio: 0.25
eval_strategy: steps
eval_steps: 2
early_stopping_patience: 3"
seed model-only "lora_target_modules: [v_proj]
save_only_model: true"
