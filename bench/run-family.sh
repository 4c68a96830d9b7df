#!/bin/sh
# run-family.sh — training on the newer families (issue 36): ptrain against transformers + PEFT on a Qwen3 shape
# (4 x 512 tokens) and a Gemma 3 shape (2 x 1024, so that its window of 512 cuts the local layers' attention),
# random models of the released layer shapes (make_family_models.py), in the same run on the same machine: the same
# token ids, LoRA r=16 alpha=32 on all seven projections, AdamW, batch, sequence, gradient checkpointing setting
# and thread count. ptrain trains as its defaults do (the bf16 weights quantized to NF4 on load: QLoRA), the peer in
# fp32 as bench/run-train.sh's. Prints tokens/s and peak RSS of each and their ratios, with the CPU and its load.
# The peer's Python: PEER_PYTHON, else $PTRAIN_PYTHON, else bench/.venv (installed from PyPI as run-train.sh does).
# QWEN3_SHAPE and GEMMA3_SHAPE ("batch seq") change the batches (a loaded machine: "2 512" and "1 1024").
# KEEP_LAYERS=N: ptrain with gradient_checkpointing_keep_layers N (its last N layers keep their activations and are
# not recomputed: selective recomputation, a config value users opt into); the peer keeps its own checkpointing.
# Run from a configured build directory:
#   ../bench/run-family.sh [threads] [steps 3] [checkpointing 0/1 (1)]
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
[ -f "$models/gemma3/config.json" ] || "$py" "$here/make_family_models.py" "$models"
keep=${KEEP_LAYERS:-0}
echo "threads: $threads, steps: $steps (after one untimed), checkpointing: $ckpt, ptrain's gradient_checkpointing_keep_layers: $keep"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model | batch x seq | ptrain tokens/s | peer tokens/s | ratio (target >= 1.1x) | ptrain peak RSS | peer peak RSS | ratio (target <= 0.3x) | loss ptrain / peer |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in "qwen3 ${QWEN3_SHAPE:-4 512}" "gemma3 ${GEMMA3_SHAPE:-2 1024}"; do
    set -- $spec
    ours=$(./bench/bench_train "$models/$1" "$threads" "$steps" "$ckpt" "$2" "$3" "$keep")
    peer=$(OMP_NUM_THREADS=$threads "$py" "$here/peer_peft_train.py" "$models/$1" "$threads" "$steps" "$ckpt" "$2" "$3" \
        2>/dev/null | tail -n 1)
    python3 - "$1" "$ours" "$peer" <<'PY'
import json, sys
name, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"| {name} | {a['batch']} x {a['seq']} | {a['tokens_per_s']} | {b['tokens_per_s']} | "
      f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x | {a['peak_rss_mb']:.0f} MB | {b['peak_rss_mb']:.0f} MB | "
      f"{a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x | {a['loss']} / {b['loss']} |")
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); blas: $(echo "$ours" | python3 -c 'import json,sys; print(json.load(sys.stdin)["blas"])')"
