#!/bin/sh
# run-dist.sh — data-parallel scaling on this machine: `ptrain train` as 1 rank x 1 thread and as
# 2 ranks x 1 thread (mpirun), the same per-rank batch (B sequences of T packed tokens), LoRA r=16
# on all 7 projections of SmolLM2. Reports tokens/s of each, the scaling efficiency
# (2-rank tokens/s / (2 x 1-rank tokens/s)), the slowest rank's compute time per step and the
# communication time as a share of the step, all from output_dir/metrics.jsonl (the first
# logged step, which includes warm-up, is left out). Run from a configured build directory:
#   ../bench/run-dist.sh [MODEL.gguf] [batch] [seq] [steps]   (NO_BUILD=1: use ./ptrain as it is)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=${1:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
batch=${2:-2}
seq=${3:-256}
steps=${4:-6}
mpirun=${MPIRUN:-mpirun}
[ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")"
[ -n "${NO_BUILD:-}" ] || make -s ptrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
config() { # config OUTDIR
    cat <<YAML
model_name: "$model"
max_seq_length: $seq
packing: true
dataset:
  - name: "$here/../share/data/pirate-instructions.jsonl"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
per_device_train_batch_size: $batch
gradient_accumulation_steps: 1
max_steps: $steps
logging_steps: 1
threads: 1
output_dir: "$1"
final_model_dir: "$1/lora"
YAML
}
config "$tmp/one" >"$tmp/one.yaml"
config "$tmp/two" >"$tmp/two.yaml"
echo "model: $model, per-rank batch $batch x $seq tokens, $steps steps, machine: $(nproc) cores"
./ptrain train "$tmp/one.yaml" >/dev/null
"$mpirun" --oversubscribe --bind-to core -np 2 ./ptrain train "$tmp/two.yaml" >/dev/null
python3 - "$tmp/one/metrics.jsonl" "$tmp/two/metrics.jsonl" <<'PY'
import json, sys
def load(path):
    recs = [json.loads(l) for l in open(path) if '"loss"' in l][1:]  # leave out the warm-up step
    tps = sum(r["tokens_per_s"] for r in recs) / len(recs)
    step = sum(r.get("step_time_s", 0) for r in recs) / len(recs)
    comm = sum(r.get("comm_time_s", 0) for r in recs) / len(recs)
    return tps, step, comm
one, two = load(sys.argv[1]), load(sys.argv[2])
print("| run | tokens/s | slowest rank compute s/step | comm s/step | comm share |")
print("|---|---|---|---|---|")
print(f"| 1 rank x 1 thread | {one[0]:.1f} | | | |")
print(f"| 2 ranks x 1 thread | {two[0]:.1f} | {two[1]:.2f} | {two[2]:.3f} | {100 * two[2] / (two[1] + two[2]):.1f}% |")
print(f"scaling efficiency: {100 * two[0] / (2 * one[0]):.1f}%")
PY
