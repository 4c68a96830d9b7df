# shellcheck shell=sh
# tiny.sh — the config of a tiny training run that the checkpoint tests share: the 2-layer Llama in
# tests/data/hf (it has a tokenizer and a chat template), 36 sequences of the shipped sample data,
# LoRA r 4, 2 sequences x 2 accumulation per rank, 1 thread; a run of 24 steps takes about a
# second. Usage: . tests/tiny.sh; tiny_config FILE OUTDIR [more yaml lines]
tiny_config() {
    cat >"$1" <<YAML
model_name: "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4"
max_seq_length: 64
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl"
    num_samples: 40
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
${3:-}
YAML
}

# smollm_config FILE OUTDIR MODEL: one hard training step of SmolLM2 (MODEL: its .gguf) on two
# sample conversations, so the export tests have an adapter that clearly moves the logits
smollm_config() {
    cat >"$1" <<YAML
model_name: "$3"
max_seq_length: 64
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl"
    num_samples: 2
lora_r: 8
lora_alpha: 16
learning_rate: 0.05
warmup_steps: 0
per_device_train_batch_size: 2
max_steps: 1
output_dir: "$2"
final_model_dir: "$2/lora"
YAML
}

# diverge_config FILE OUTDIR LEARNING_RATE [more yaml lines]: the divergence tests' run: 12 steps, no
# warmup, a checkpoint after each step, the newest two kept
diverge_config() {
    tiny_config "$1" "$2" "learning_rate: $3
warmup_steps: 0
max_steps: 12
logging_steps: 1
save_steps: 1
save_total_limit: 2
seed: 11
${4:-}"
}
