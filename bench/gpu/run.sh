#!/bin/bash
# run.sh — the GPU training benchmark: ptrain (QLoRA, NF4 base) against transformers + PEFT (see
# peer_peft.py) on random models in the shapes of gemma-2-2b and SmolLM2-135M (make_random_model.py
# writes them here, on the GPU: nothing large travels), the same settings for both: LoRA r 16 alpha
# 32 on all 7 projections, batch 1 x SEQ tokens, gradient checkpointing, AdamW, WARMUP untimed
# steps then STEPS timed ones. Also measures the bf16 matrix-product rate (gemm_rate.py) for MFU,
# and prints the table of report.py (tokens/s, peak memory, MFU, against the targets).
# Usage: bench/gpu/run.sh [WORKDIR]   (default /tmp/ptrain-bench; models are kept there for reruns)
# Environment: PTRAIN (the ptrain command, default build/ptrain), DEVICE (cuda; cpu tries the
# scripts out), SHAPES ("gemma2-2b smollm2-135m"; tiny and tiny-gemma2 for a CPU), STEPS (10),
# WARMUP (3), SEQ (2048), PYTHON (python3), DEADLINE (epoch seconds: every step's timeout is cut so
# that the table is printed by then).
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/ptrain-bench}
PTRAIN=${PTRAIN:-build/ptrain}
DEVICE=${DEVICE:-cuda}
SHAPES=${SHAPES:-gemma2-2b smollm2-135m}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}
SEQ=${SEQ:-2048}
PYTHON=${PYTHON:-python3}
DEADLINE=${DEADLINE:-$(($(date +%s) + 600))}
export PYTHONUNBUFFERED=1 SEQ HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$work"

# budget S: S seconds, or fewer so that 15 s are left for the table (at least 1)
budget() {
    local left=$((DEADLINE - $(date +%s) - 15))
    [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"
}
# step NAME SECONDS CMD...: run CMD under a timeout, say how it ended
step() {
    local name=$1 secs
    secs=$(budget "$2")
    shift 2
    local t0=$SECONDS
    timeout -k 5 "$secs" "$@"
    local rc=$?
    echo "bench: $name: exit $rc after $((SECONDS - t0)) s (limit $secs s)"
    return $rc
}

config() { # config SHAPE: ptrain's config of the benchmark
    cat <<YAML
model_name: "$work/$1"
max_seq_length: $SEQ
device: $DEVICE
dataset:
  - name: "$work/text.jsonl"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
use_gradient_checkpointing: true
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
max_steps: $((WARMUP + STEPS))
learning_rate: 1e-4
lr_scheduler_type: constant
warmup_steps: 0
optim: adamw_torch
weight_decay: 0.01
max_grad_norm: 1.0
logging_steps: 1
save_strategy: "no"
output_dir: "$work/$1.out"
final_model_dir: "$work/$1.out/lora"
YAML
}

echo "bench: device $DEVICE, shapes $SHAPES, $WARMUP + $STEPS steps of 1 x $SEQ tokens, work dir $work"
[ "$DEVICE" = cuda ] && step gemm 60 "$PYTHON" "$here/gemm_rate.py" | tee "$work/gemm.json"
for shape in $SHAPES; do
    if [ ! -f "$work/$shape/config.json" ] || [ ! -f "$work/text.jsonl" ]; then
        step "$shape model" 120 "$PYTHON" "$here/make_random_model.py" "$shape" "$work/$shape" --device "$DEVICE" \
            --dataset "$work/text.jsonl" --rows 64 --dataset-tokens "$SEQ"
    fi
    config "$shape" >"$work/$shape.yaml"
    rm -rf "$work/$shape.out"
    step "$shape ptrain" 150 "$PTRAIN" train "$work/$shape.yaml" >"$work/$shape.ptrain.log" 2>&1
    tail -n 4 "$work/$shape.ptrain.log"
    "$PYTHON" "$here/report.py" ptrain "$work/$shape.out" "$work/$shape.ptrain.log" "$WARMUP" "$SEQ" 1 \
        | tee "$work/$shape.ptrain.json"
    step "$shape peer" 150 "$PYTHON" "$here/peer_peft.py" "$work/$shape" --device "$DEVICE" --steps "$STEPS" \
        --warmup "$WARMUP" --seq "$SEQ" >"$work/$shape.peer.log" 2>&1
    grep -E '^(peer:|\{)' "$work/$shape.peer.log" || tail -n 5 "$work/$shape.peer.log"
    grep '^{' "$work/$shape.peer.log" | tail -n 1 >"$work/$shape.peer.json"
done
echo
# shellcheck disable=SC2086
"$PYTHON" "$here/report.py" table "$work" $SHAPES | tee "$work/table.md"
