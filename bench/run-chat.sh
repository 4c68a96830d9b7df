#!/bin/sh
# run-chat.sh — the chat benchmark: the demo's fine-tune (share/examples/smollm2-demo.yaml: the
# pirate conversations, batches of 4 without packing, loss on assistant turns only, max_seq_length
# 512, LoRA r 16 on all 7 projections) run by ptrain itself, against transformers + PEFT with the
# collation TRL's SFTTrainer uses by default (pad to the longest, labels -100 outside assistant
# turns; bench/peer_chat.py), same model file, threads, number of steps and examples, same
# gradient checkpointing setting as the demo, in the same run. Also ptrain's 4 x 512 rate
# (bench_train, same setting) for the small-steps ratio: short sequences against long blocks.
# Run from a configured build directory:  ../bench/run-chat.sh [steps 15] [threads]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
model=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf
data=$src/share/data/pirate-instructions.jsonl
steps=${1:-15}
threads=${2:-$(nproc)}
[ -f "$model" ] || "$src/share/scripts/fetch-model.sh" "$src/models"
make -s ptrain bench/bench_train
venv=${PEER_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch transformers peft gguf accelerate numpy
fi
ckpt=0
grep -q '^use_gradient_checkpointing: *false' "$src/share/examples/smollm2-demo.yaml" || ckpt=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e "s#^model_name:.*#model_name: \"$model\"#" -e "s#  - name: .*#  - name: \"$data\"#" \
    -e "s#^max_steps:.*#max_steps: $steps#" -e "s#^logging_steps:.*#logging_steps: 1#" \
    -e "s#^save_strategy:.*#save_strategy: \"no\"#" -e "s#^output_dir:.*#output_dir: \"$tmp/out\"#" \
    -e "s#^final_model_dir:.*#final_model_dir: \"$tmp/out/lora\"#" \
    "$src/share/examples/smollm2-demo.yaml" >"$tmp/chat.yaml"
echo "threads: $threads" >>"$tmp/chat.yaml"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; threads $threads; steps $steps; checkpointing $ckpt"
./ptrain "$tmp/chat.yaml" >"$tmp/ptrain.out" 2>&1 || { cat "$tmp/ptrain.out"; exit 1; }
grep '^blas ' "$tmp/ptrain.out"
long=$(./bench/bench_train "$model" "$threads" 2 "$ckpt" 4 512)
peer=$(OMP_NUM_THREADS=$threads "$venv/bin/python" "$here/peer_chat.py" "$model" "$data" "$threads" "$steps" 4 512 "$ckpt" 2>/dev/null | tail -n 1)
python3 - "$tmp/out/metrics.jsonl" "$peer" "$long" "$steps" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
peer, long, steps = json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
# step 1 warms up (as the peer's): time and tokens of steps 2..N from the per-step records
dt = recs[-1]["elapsed_s"] - recs[0]["elapsed_s"]
prev, inputs = recs[0]["elapsed_s"], 0.0
for r in recs[1:]:
    inputs += r["input_tokens_per_s"] * (r["elapsed_s"] - prev)
    prev = r["elapsed_s"]
ex_s = 4 * (steps - 1) / dt
tok_s = inputs / dt
print("| measure | ptrain | peer | ratio |")
print("|---|---|---|---|")
print(f"| examples/s | {ex_s:.3f} | {peer['examples_per_s']} | {ex_s / peer['examples_per_s']:.2f}x |")
print(f"| real tokens/s | {tok_s:.1f} | {peer['tokens_per_s']} | {tok_s / peer['tokens_per_s']:.2f}x |")
print(f"| s/step | {dt / (steps - 1):.2f} | {peer['step_s']} | |")
print(f"| peer's padded tokens/s | | {peer['padded_tokens_per_s']} | |")
print(f"small steps: ptrain {tok_s:.1f} tokens/s on the demo's conversations against {long['tokens_per_s']} "
      f"on 4 x 512 blocks: {100 * tok_s / long['tokens_per_s']:.0f}%")
PY
