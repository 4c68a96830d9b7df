#!/bin/sh
# run-generate.sh — GRPO's generation: a group of GROUP completions of one PROMPT-token prompt, NEW
# tokens each, sampled at temperature 1 (bench_generate.c, as grpo_step.c generates) against
# transformers' generate on the same GGUF file with the same batch, prompt, lengths and threads
# (peer_generate.py), in the same run. Prints the CPU, both rates and the ratio. The peer is
# $PTRAIN_PYTHON if set, else bench/.venv (torch, transformers, gguf installed on first use).
# Run from a configured build directory:
#   ../bench/run-generate.sh [MODEL.gguf] [threads] [group] [prompt] [new] [reps]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=${1:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${2:-$(nproc)}
group=${3:-8} prompt=${4:-32} new=${5:-64} reps=${6:-3}
[ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")"
make -s bench/bench_generate
py=${PTRAIN_PYTHON:-}
if [ -z "$py" ]; then
    venv=${PEER_VENV:-$here/.venv}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q torch transformers gguf accelerate numpy
    fi
    py=$venv/bin/python
fi
field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -n 1; }
echo "cpu: $(field 'model name') ($(field vendor_id) family $(field 'cpu family') model $(field model))," \
    "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model, threads: $threads, group $group x (prompt $prompt + $new new tokens), best of $reps"
ours=$(./bench/bench_generate "$model" "$threads" "$group" "$prompt" "$new" "$reps")
peer=$(OMP_NUM_THREADS=$threads "$py" "$here/peer_generate.py" "$model" "$threads" "$group" "$prompt" "$new" "$reps" 2>/dev/null | tail -n 1)
python3 - "$ours" "$peer" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"| measure | ptrain | {b['peer']} | ratio (target >= 2x) |")
print("|---|---|---|---|")
print(f"| generated tokens/s | {a['tok_s']} | {b['tok_s']} | {a['tok_s'] / b['tok_s']:.2f}x |")
print(f"| seconds for the group | {a['seconds']} | {b['seconds']} | |")
print(f"| CPU seconds for the group | {a['cpu_seconds']} | {b['cpu_seconds']} | {b['cpu_seconds'] / a['cpu_seconds']:.2f}x |")
PY
