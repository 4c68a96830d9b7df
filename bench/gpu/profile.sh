#!/bin/bash
# profile.sh — where a CUDA training step's time goes: one step of the benchmark's gemma-2-2b-shaped
# model (1 x 2048 tokens, LoRA r 16 on all projections, use_gradient_checkpointing unsloth, as the
# benchmark's first cell) under Nsight Compute, each kernel's duration, DRAM bytes and math ops
# (those of the metrics this ncu knows: `ncu --query-metrics` is asked first), summed by kernel
# family with its share of the kernel time and achieved TFLOP/s and GB/s (profile_table.py:
# profile.md); ncu's replays make the run far slower than the step, so the model's loading is left
# out as well as it can be: only kernels launched after the first LAUNCH_SKIP are profiled (the
# loader's), up to a time limit (what was profiled by then is tabled).
# Usage, from the repository root on the GPU machine:
#   bash bench/gpu/profile.sh [OUTDIR]   (default $OUT or ./gpu-profile)
# Environment: PT (a ptrain command; default: the bundle .gpu-bundle/ptrain-gpu.tar.xz unpacked, or
# build/ptrain), MODEL (a gemma-2-2b-shaped directory; default: written here by make_random_model.py),
# DATASET (its text; written with it), SEQ (2048), NCU_SECONDS (240), LAUNCH_SKIP (0), PYTHON.
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
out=${1:-${OUT:-$root/gpu-profile}}
mkdir -p "$out"
work=$(mktemp -d /tmp/ptrain-prof.XXXXXX)
trap 'rm -rf "$work"' EXIT
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PYTHON=${PYTHON:-python3}
seq=${SEQ:-2048}
if [ -z "${PT:-}" ] && [ -f "$root/.gpu-bundle/ptrain-gpu.tar.xz" ]; then
    . tests/gpu/bundle-env.sh
    bundle_unpack "$root/.gpu-bundle/ptrain-gpu.tar.xz" "$work/bundle" >/dev/null && bundle_wrap direct 2>/dev/null
    PT=$PT_BUNDLE/wrap/ptrain
fi
PT=${PT:-build/ptrain}
"$PT" --version || exit 1
ncu=$(command -v ncu)
for f in /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do [ -z "$ncu" ] && [ -x "$f" ] && ncu=$f; done
echo "ncu: ${ncu:-not found}"
[ -n "$ncu" ] || { echo "profile: SKIP — no ncu on this machine"; exit 0; }
model=${MODEL:-$work/m} data=${DATASET:-$work/text.jsonl}
if [ ! -f "$model/config.json" ]; then
    timeout 200 "$PYTHON" bench/gpu/make_random_model.py gemma2-2b "$model" --device cuda --dataset "$data" \
        --rows 8 --dataset-tokens "$seq" >"$out/model.log" 2>&1 || { echo "model: failed"; tail "$out/model.log"; }
fi
cat >"$work/run.yaml" <<YAML
model_name: "$model"
max_seq_length: $seq
device: cuda
dataset:
  - name: "$data"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
use_gradient_checkpointing: unsloth
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
max_steps: 1
learning_rate: 1e-4
optim: adamw_torch
logging_steps: 1
save_strategy: "no"
output_dir: "$work/out"
final_model_dir: "$work/out/lora"
YAML
# the metrics this ncu has (base names; .sum is the roll-up asked for)
known=$("$ncu" --query-metrics 2>/dev/null | awk '{print $1}')
metrics=gpu__time_duration.sum
for m in dram__bytes_read dram__bytes_write sm__ops_path_tensor_src_bf16_dst_fp32 \
    smsp__sass_thread_inst_executed_op_ffma_pred_on smsp__sass_thread_inst_executed_op_fadd_pred_on \
    smsp__sass_thread_inst_executed_op_fmul_pred_on; do
    grep -qx "$m" <<<"$known" && metrics="$metrics,$m.sum"
done
echo "metrics: $metrics"
t0=$SECONDS
timeout -k 10 "${NCU_SECONDS:-240}" "$ncu" --clock-control none --target-processes all --metrics "$metrics" --csv \
    --print-units base --launch-skip "${LAUNCH_SKIP:-0}" --log-file "$out/ncu.csv" "$PT" train "$work/run.yaml" \
    >"$out/ncu-run.log" 2>&1
rc=$?
echo "ncu: exit $rc after $((SECONDS - t0)) s ($(wc -l <"$out/ncu.csv" 2>/dev/null) lines)"
what="one training step of gemma-2-2b's shape, 1 x $seq tokens (and the loading's kernels)"
[ "$rc" = 124 ] && what="$what, PARTIAL: ncu stopped at its ${NCU_SECONDS:-240} s limit before the step ended"
"$PYTHON" bench/gpu/profile_table.py "$out/ncu.csv" "$what" | tee "$out/profile.md"
