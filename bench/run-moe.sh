#!/bin/sh
# run-moe.sh — training a mixture of experts (issue 38): ptrain against transformers + PEFT on a random Qwen3-MoE of
# Qwen3-30B-A3B's layer shape scaled down (make_family_models.py qwen3moe: hidden 512, 12 sparse layers, 64 experts
# of width 192, top-8, 8 query heads of 128 to 1 key/value head), in the same run on the same machine: the same
# token ids (4 x 512 by default), LoRA r=16 alpha=32 on q/k/v/o and on the experts (PEFT's target_parameters
# mlp.experts.gate_up_proj and mlp.experts.down_proj on the peer's side, the same pairs in ptrain), AdamW, gradient
# checkpointing setting and thread count. ptrain trains as its defaults do (the bf16 weights, experts included,
# quantized to NF4 on load: QLoRA), the peer in fp32 as run-family.sh's, with transformers' own choice of experts
# implementation (printed). Prints tokens/s and peak RSS of each and their ratios (targets: >= 2x, <= 0.3x), with
# the CPU and its load before and after.
# The peer's Python: PEER_PYTHON, else $PTRAIN_PYTHON, else bench/.venv (installed from PyPI as run-train.sh does).
# MOE_SHAPE ("batch seq") changes the batch. Run from a configured build directory:
#   ../bench/run-moe.sh [threads] [steps 3] [checkpointing 0/1 (1)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
threads=${1:-$(nproc)}
steps=${2:-3}
ckpt=${3:-1}
make -s bench/bench_train
py=${PEER_PYTHON:-${PTRAIN_PYTHON:-}}
if [ -z "$py" ]; then
    py=$here/.venv/bin/python
    [ -x "$py" ] || { python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q torch transformers peft accelerate numpy; }
fi
models=${FAMILY_MODELS:-$here/.family-models}
[ -f "$models/qwen3moe/config.json" ] || "$py" "$here/make_family_models.py" "$models" qwen3moe
set -- ${MOE_SHAPE:-4 512}
echo "threads: $threads, steps: $steps (after one untimed), checkpointing: $ckpt, batch x seq: $1 x $2"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
ours=$(./bench/bench_train "$models/qwen3moe" "$threads" "$steps" "$ckpt" "$1" "$2")
peer=$(OMP_NUM_THREADS=$threads "$py" "$here/peer_peft_train.py" "$models/qwen3moe" "$threads" "$steps" "$ckpt" "$1" "$2" \
    2>/dev/null | tail -n 1)
python3 - "$ours" "$peer" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("| model | batch x seq | ptrain tokens/s | peer tokens/s | ratio (target >= 2x) | ptrain peak RSS | peer peak RSS | "
      "ratio (target <= 0.3x) | loss ptrain / peer | peer's experts |")
print("|---|---|---|---|---|---|---|---|---|---|")
print(f"| qwen3moe | {a['batch']} x {a['seq']} | {a['tokens_per_s']} | {b['tokens_per_s']} | "
      f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x | {a['peak_rss_mb']:.0f} MB | {b['peak_rss_mb']:.0f} MB | "
      f"{a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x | {a['loss']} / {b['loss']} | {b.get('experts')} |")
print(f"ptrain: {a['gflops']} GFLOP/s (8N a token with checkpointing, N active), blas: {a['blas']}")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
