#!/bin/sh
# run-model.sh — SmolLM2 model benchmark, ptrain against Hugging Face transformers in the same run
# on the same file and thread count. Installs the peer (torch, transformers, gguf, accelerate from
# PyPI) into bench/.venv on first use. Run from a configured build directory:
#   ../bench/run-model.sh [MODEL.gguf] [threads]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=${1:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${2:-$(nproc)}
[ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")"
make -s bench/bench_model
venv=${PEER_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch transformers gguf accelerate numpy
fi
echo "model: $model, threads: $threads, machine: $(nproc) cores"
ours=$(./bench/bench_model "$model" "$threads")
peer=$(OMP_NUM_THREADS=$threads "$venv/bin/python" "$here/peer_transformers.py" "$model" "$threads" 2>/dev/null | tail -n 1)
python3 - "$ours" "$peer" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rows = [("load_s", "load time (s)", False), ("rss_after_load_mb", "RSS after load (MB)", False),
        ("peak_rss_mb", "peak RSS (MB)", False), ("prefill128_tok_s", "forward tok/s, 128", True),
        ("prefill512_tok_s", "forward tok/s, 512", True), ("generate_tok_s", "generation tok/s", True),
        ("generate8_tok_s", "generation tok/s, a GRPO group of 8 in step", True)]
print(f"| measure | ptrain | {b['peer']} | ptrain advantage |")
print("|---|---|---|---|")
for key, label, higher in rows:
    x, y = a[key], b[key]
    ratio = (x / y if higher else y / x) if x and y else float("nan")
    print(f"| {label} | {x} | {y} | {ratio:.2f}x |")
PY
