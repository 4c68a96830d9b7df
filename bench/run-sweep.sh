#!/bin/sh
# run-sweep.sh — the sequence-length sweep: ptrain (bench_train) and transformers + PEFT
# (peer_peft_train.py) at seq 256, 512, 1024, 2048 and 4096 with the same tokens per step
# (batch x seq = 4096: batches of 16, 8, 4, 2 and 1), LoRA r 16 on all 7 projections, gradient
# checkpointing as given (default off), same model file and threads, in the same run. Shows how
# each side's tokens/s falls as attention's share of the work grows with the sequence.
# Run from a configured build directory:  ../bench/run-sweep.sh [steps 2] [threads] [checkpointing 0]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf
steps=${1:-2}
threads=${2:-$(nproc)}
ckpt=${3:-0}
[ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")"
make -s bench/bench_train
venv=${PEER_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch transformers peft gguf accelerate numpy
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; threads $threads; steps $steps; checkpointing $ckpt"
echo "| seq | batch | ptrain tokens/s | peer tokens/s | ratio | ptrain vs its seq-256 rate | peer vs its seq-256 rate |"
echo "|---|---|---|---|---|---|---|"
base_ours="" base_peer=""
for seq in 256 512 1024 2048 4096; do
    batch=$((4096 / seq))
    ours=$(./bench/bench_train "$model" "$threads" "$steps" "$ckpt" "$batch" "$seq")
    peer=$(OMP_NUM_THREADS=$threads "$venv/bin/python" "$here/peer_peft_train.py" "$model" "$threads" "$steps" "$ckpt" "$batch" "$seq" 2>/dev/null | tail -n 1)
    a=$(echo "$ours" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
    b=$(echo "$peer" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
    [ -n "$base_ours" ] || { base_ours=$a; base_peer=$b; }
    python3 -c "print(f'| $seq | $batch | $a | $b | {$a/$b:.2f}x | {$a/$base_ours:.2f} | {$b/$base_peer:.2f} |')"
done
