#!/bin/sh
# train_parity.sh — 30 optimizer steps of the same run on the GPU and on the CPU: the tiny Llama of
# tests/tiny.sh (2 sequences x 2 accumulation, lora_dropout, packed) and, when it is here,
# SmolLM2-135M-Instruct (r 16 on all seven projections, 128 tokens). The loss curves must agree
# within bf16 tolerance: at every logged step |loss_cuda - loss_cpu| <= 2e-2 * loss_cpu (the GPU
# multiplies the frozen base in bf16 with fp32 accumulation; the CPU in fp32; adapters, gradients
# and AdamW are fp32 on both), and the loss must fall on both.
# PTRAIN_PARITY_BASE=reference compares the GPU's fast kernels with its plain fp32 ones instead
# (the first side runs on the GPU with PTRAIN_CUDA_KERNELS=reference): the same bound, since the
# fast side's bf16 operands (GEMMs, and tensor-core attention where it has it) are again the only
# difference from fp32.
# Usage: tests/gpu/train_parity.sh PTRAIN WORKDIR  (from the repository root); PTRAIN_PARITY_DEVICE=cpu
# runs the GPU side on the CPU too, which checks this script on any machine.
set -u
ptrain=$1 work=$2
PTRAIN_SRCDIR=$(pwd)
export PTRAIN_SRCDIR
. tests/tiny.sh
status=0

base=${PTRAIN_PARITY_BASE:-cpu}
base_name=$([ "$base" = reference ] && echo "cuda-reference" || echo cpu)

# compare BASE.jsonl CUDA.jsonl NAME: every step's loss within 2e-2 relative; the last below the first
compare() {
    python3 - "$1" "$2" "$3" "$base_name" <<'PY' || status=1
import json, sys
cpu = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l and '"eval_loss"' not in l]
gpu = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l and '"eval_loss"' not in l]
name, worst, ok = sys.argv[3], 0.0, len(cpu) == len(gpu) == 30
for c, g in zip(cpu, gpu):
    rel = abs(g["loss"] - c["loss"]) / abs(c["loss"])
    worst = max(worst, rel)
    ok = ok and c["step"] == g["step"] and rel <= 2e-2
falls = cpu and gpu and cpu[-1]["loss"] < cpu[0]["loss"] and gpu[-1]["loss"] < gpu[0]["loss"]
print(f"{name}: {len(gpu)} steps; loss {sys.argv[4]} {cpu[0]['loss']:.4f} -> {cpu[-1]['loss']:.4f}, "
      f"cuda {gpu[0]['loss']:.4f} -> {gpu[-1]['loss']:.4f}; worst step rel diff {worst:.3g} (<= 2e-2): "
      f"{'PASS' if ok and falls else 'FAIL'}")
sys.exit(0 if ok and falls else 1)
PY
}

run_pair() { # NAME CONFIG-WRITER
    name=$1
    for side in base gpu; do
        dev=${PTRAIN_PARITY_DEVICE:-cuda} kernels=${PTRAIN_CUDA_KERNELS:-}
        [ $side = base ] && [ "$base" = cpu ] && dev=cpu
        [ $side = base ] && [ "$base" = reference ] && kernels=reference
        $2 "$work/$name-$side.yaml" "$work/$name-$side" "device: $dev"
        if ! PTRAIN_CUDA_KERNELS=$kernels "$ptrain" train "$work/$name-$side.yaml" >"$work/$name-$side.log" 2>&1; then
            echo "$name on $dev${kernels:+ ($kernels kernels)}: ptrain failed:"; tail -5 "$work/$name-$side.log"; status=1; return
        fi
    done
    compare "$work/$name-base/metrics.jsonl" "$work/$name-gpu/metrics.jsonl" "$name"
}

tiny() {
    tiny_config "$1" "$2" "$3
max_steps: 30
logging_steps: 1
learning_rate: 2e-3
warmup_steps: 2
lora_dropout: 0.1
packing: true"
}

smollm2() {
    cat >"$1" <<YAML
model_name: "$SMOLLM2"
max_seq_length: 128
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl"
lora_r: 16
lora_alpha: 32
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
learning_rate: 5e-4
max_steps: 30
logging_steps: 1
output_dir: "$2"
final_model_dir: "$2/lora"
$3
YAML
}

mkdir -p "$work"
run_pair tiny-llama tiny
SMOLLM2=
for d in "${PTRAIN_MODELS:-}" models /tmp/models; do
    [ -n "$d" ] && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ] && SMOLLM2="$d/SmolLM2-135M-Instruct.Q4_1.gguf" && break
done
case $SMOLLM2 in /*) ;; ?*) SMOLLM2="$PTRAIN_SRCDIR/$SMOLLM2" ;; esac
# tests/gpu/run.sh: the real model cannot travel; a random one of its shape (loaded as NF4) stands in
[ -z "$SMOLLM2" ] && [ -f "${PTRAIN_RANDOM_SMOLLM2:-/nonexistent}/config.json" ] && SMOLLM2=$PTRAIN_RANDOM_SMOLLM2
if [ -n "$SMOLLM2" ]; then run_pair smollm2 smollm2; else echo "smollm2: SKIP (model not found)"; fi
exit $status
