#!/bin/sh
# run-trl.sh — a DPO step and a GRPO step, ptrain against TRL's DPOTrainer / GRPOTrainer + PEFT
# (bench/peer_trl.py) in the same run: share/examples/smollm2-dpo.yaml and smollm2-grpo.yaml as
# they are (SmolLM2-135M Q4_1, the pirate preference rows, LoRA r 16 on all seven projections;
# DPO: 2 pairs x accumulation 2; GRPO: 2 prompts x 4 completions of up to 48 tokens, beta 0.04),
# STEPS optimizer steps each, the first untimed on both sides; the same threads. Prints the CPU,
# seconds per step and the ratios. The peer is $PTRAIN_PYTHON if set, else bench/.venv (torch,
# transformers, peft, trl, gguf installed on first use). Run from a configured build directory:
#   ../bench/run-trl.sh [steps 5] [threads]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
model=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf
data=$src/share/data/pirate-preferences.jsonl
steps=${1:-5}
threads=${2:-$(nproc)}
[ -f "$model" ] || "$src/share/scripts/fetch-model.sh" "$src/models"
make -s ptrain
py=${PTRAIN_PYTHON:-}
if [ -z "$py" ]; then
    venv=${PEER_VENV:-$here/.venv}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q torch transformers peft trl datasets gguf accelerate numpy
    fi
    py=$venv/bin/python
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -n 1; }
echo "cpu: $(field 'model name') ($(field vendor_id) family $(field 'cpu family') model $(field model))," \
    "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); threads $threads; $steps steps, the first untimed"
echo "| method | ptrain s/step | peer s/step | ratio (target >= 1.5x) |"
echo "|---|---|---|---|"
for method in dpo grpo; do
    sed -e "s#^model_name:.*#model_name: \"$model\"#" -e "s#  - name: .*#  - name: \"$data\"#" \
        -e "s#^max_steps:.*#max_steps: $steps#" -e "s#^logging_steps:.*#logging_steps: 1#" \
        -e "s#^output_dir:.*#output_dir: \"$tmp/$method\"#" \
        -e "s#^final_model_dir:.*#final_model_dir: \"$tmp/$method/lora\"#" \
        "$src/share/examples/smollm2-$method.yaml" >"$tmp/$method.yaml"
    printf 'threads: %s\nsave_strategy: "no"\nseed: 42\n' "$threads" >>"$tmp/$method.yaml"
    ./ptrain "$tmp/$method.yaml" >"$tmp/$method.out" 2>&1 || { cat "$tmp/$method.out"; exit 1; }
    peer=$(OMP_NUM_THREADS=$threads "$py" "$here/peer_trl.py" "$method" "$model" "$data" "$threads" "$steps" 2>"$tmp/peer.err" | tail -n 1) ||
        { tail -n 20 "$tmp/peer.err"; exit 1; }
    python3 - "$tmp/$method/metrics.jsonl" "$peer" "$method" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"elapsed_s"' in l]
peer, method = json.loads(sys.argv[2]), sys.argv[3]
ours = (recs[-1]["elapsed_s"] - recs[0]["elapsed_s"]) / (len(recs) - 1)
print(f"| {method} ({peer['peer']}) | {ours:.3f} | {peer['step_s']} | {peer['step_s'] / ours:.2f}x |")
PY
done
