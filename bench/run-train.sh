#!/bin/sh
# run-train.sh — training benchmark: ptrain against transformers + PEFT (fp32, CPU) in the same run,
# same model file, thread count, batch (4 x 512 tokens), LoRA r=16 on all 7 projections, and
# gradient checkpointing setting. Installs the peer (torch, transformers, peft, gguf, accelerate from
# PyPI) into bench/.venv unless PEER_VENV names one. Also measures OpenBLAS sgemm GFLOP/s, the
# ceiling on this machine. Run from a configured build directory:
#   ../bench/run-train.sh [MODEL.gguf] [threads] [steps] [checkpointing 0/1]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=${1:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${2:-$(nproc)}
steps=${3:-3}
ckpt=${4:-1}
[ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")"
make -s bench/bench_train bench/bench_sgemm
venv=${PEER_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch transformers peft gguf accelerate numpy
fi
echo "model: $model, threads: $threads, steps: $steps, checkpointing: $ckpt, machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
ceiling=$(./bench/bench_sgemm "$threads")
ours=$(./bench/bench_train "$model" "$threads" "$steps" "$ckpt")
peer=$(OMP_NUM_THREADS=$threads "$venv/bin/python" "$here/peer_peft_train.py" "$model" "$threads" "$steps" "$ckpt" 2>/dev/null | tail -n 1)
python3 - "$ours" "$peer" "$ceiling" <<'PY'
import json, sys
a, b, c = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"| measure | ptrain | {b['peer']} | ratio |")
print("|---|---|---|---|")
print(f"| training tokens/s | {a['tokens_per_s']} | {b['tokens_per_s']} | {a['tokens_per_s'] / b['tokens_per_s']:.2f}x |")
print(f"| peak RSS (MB) | {a['peak_rss_mb']} | {b['peak_rss_mb']} | {a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x |")
print(f"| loss after the steps | {a['loss']} | {b['loss']} | |")
print(f"ptrain achieved {a['gflops']} GFLOP/s ({'8' if a['checkpointing'] else '6'} x parameters of the projections and "
      f"lm_head per token); OpenBLAS sgemm 2048^3 on this machine: {c['gflops']} GFLOP/s "
      f"({100 * a['gflops'] / c['gflops']:.0f}% of the ceiling)")
print(f"blas: {a['blas']}")
PY
