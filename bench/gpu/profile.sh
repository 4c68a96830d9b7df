#!/bin/bash
# profile.sh — where a CUDA training step's time goes: one step of the benchmark's gemma-2-2b-shaped
# model (1 x 2048 tokens, LoRA r 16 on all projections, gradient checkpointing) under Nsight
# Compute, every kernel's duration summed by kernel name (kernels of model loading included, and
# listed as such by ncu's launch order); plus plain timed runs with checkpointing on and off.
# Run on the GPU machine from the repository root, with the bundle carried (tests/gpu/README.md):
#   bash bench/gpu/profile.sh        (OUT: where profile.md and the logs go, default ./gpu-profile)
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
OUT=${OUT:-$root/gpu-profile}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/ptrain-prof.XXXXXX)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
. tests/gpu/bundle-env.sh
bundle_unpack "${PT_GPU_BUNDLE:-$root/.gpu-bundle/ptrain-gpu.tar.xz}" "$work/bundle" >/dev/null || exit 1
bundle_wrap direct
PT=$PT_BUNDLE/wrap/ptrain
"$PT" --version || exit 1
ncu=$(command -v ncu)
for f in /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do [ -z "$ncu" ] && [ -x "$f" ] && ncu=$f; done
echo "ncu: ${ncu:-not found}"
seq=${SEQ:-2048}
timeout 150 python3 bench/gpu/make_random_model.py gemma2-2b "$work/m" --device cuda --dataset "$work/text.jsonl" \
    --rows 32 --dataset-tokens "$seq" >"$OUT/model.log" 2>&1 || { echo "model: failed"; tail "$OUT/model.log"; }
config() { # STEPS CKPT
    cat <<YAML
model_name: "$work/m"
max_seq_length: $seq
device: cuda
dataset:
  - name: "$work/text.jsonl"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
use_gradient_checkpointing: $2
per_device_train_batch_size: 1
max_steps: $1
learning_rate: 1e-4
lr_scheduler_type: constant
warmup_steps: 0
optim: adamw_torch
logging_steps: 1
save_strategy: "no"
output_dir: "$work/out"
final_model_dir: "$work/out/lora"
YAML
}
# plain runs: 8 steps each, the last step's tokens/s
for ck in true false; do
    config 8 $ck >"$work/run.yaml"
    rm -rf "$work/out"
    timeout 90 "$PT" train "$work/run.yaml" >"$OUT/run-ckpt-$ck.log" 2>&1
    echo "plain run, checkpointing $ck: exit $? $(grep -o '[0-9.]* tok/s' "$OUT/run-ckpt-$ck.log" | tail -n 1)" \
        "$(grep 'peak device memory' "$OUT/run-ckpt-$ck.log")"
done
[ -n "$ncu" ] || { echo "no ncu: no profile"; exit 0; }
# the profiled run: 1 step (model loading's kernels show under their own names); durations only
config 1 true >"$work/run.yaml"
rm -rf "$work/out"
timeout -k 5 "${NCU_SECONDS:-300}" "$ncu" --clock-control none --target-processes all --metrics gpu__time_duration.sum --csv \
    --print-units base --log-file "$OUT/ncu.csv" "$PT" train "$work/run.yaml" >"$OUT/ncu-run.log" 2>&1
echo "ncu: exit $? ($(wc -l <"$OUT/ncu.csv" 2>/dev/null) lines)"
python3 - "$OUT/ncu.csv" <<'EOF' | tee "$OUT/profile.md"
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))
        if r.get("Metric Name") == "gpu__time_duration.sum"]
by = collections.defaultdict(lambda: [0, 0.0])
n = len(rows)
for r in rows:
    ns = float(r["Metric Value"].replace(",", ""))
    name = r["Kernel Name"][:100]
    by[name][0] += 1
    by[name][1] += ns
tot = sum(v[1] for v in by.values())
print(f"{n} kernel launches, {tot/1e6:.1f} ms of kernel time in all (loading and one step)")
print()
print("| kernel | launches | ms | share |")
print("|---|---|---|---|")
for name, (c, ns) in sorted(by.items(), key=lambda kv: -kv[1][1])[:40]:
    print(f"| {name} | {c} | {ns/1e6:.2f} | {100*ns/tot:.1f}% |")
EOF
rm -rf "$work"
