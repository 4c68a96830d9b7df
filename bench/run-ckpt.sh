#!/bin/sh
# run-ckpt.sh — checkpoint benchmark: ckpt_write of LoRA r=16 checkpoints (all 7 projections, with
# AdamW's moments) shaped like SmolLM2-135M and Gemma-2-2B (bench_ckpt: the file's size and the
# median of `reps` writes, which include the Fletcher-32 and CRC-32 passes, the fsyncs and the
# rename) against `dd if=/dev/zero bs=1M count=<same MiB> conv=fsync` into the same directory in
# the same run (median of `reps`), and as a share of the 50 training steps between two saves at
# save_steps 50. The step time is bench_train's on SmolLM2 (batch 4 x 512 tokens, LoRA r=16 on all
# 7 projections, gradient checkpointing: as run-train.sh measures it); without the model that
# column says n/a. Target: within 2x of dd and under 1% of training time. Prints the processor
# and a table. Run from a configured build directory:
#   ../bench/run-ckpt.sh [DIR] [reps] [MODEL.gguf] [threads]
# DIR: where the files go (default ./bench-ckpt.tmp; give a directory on output_dir's filesystem).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-./bench-ckpt.tmp}
reps=${2:-5}
model=${3:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${4:-$(nproc)}
LC_ALL=C
export LC_ALL
make -s bench/bench_ckpt bench/bench_train
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f "$dir/dd.bin"' EXIT
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
cpu="$cpu, family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
fs=$(df -T "$dir" | awk 'NR == 2 {print $2 " on " $1}')
echo "processor: ${cpu:-unknown} ($(nproc) cores); directory: $dir ($fs); median of $reps runs each"

./bench/bench_ckpt "$dir" "$reps" >"$tmp/ours.json"

# dd_median MIB: the median seconds of reps `dd conv=fsync` writes of MIB MiB, each to a new file
dd_median() {
    for _ in $(seq "$reps"); do
        rm -f "$dir/dd.bin"
        sync
        dd if=/dev/zero of="$dir/dd.bin" bs=1M count="$1" conv=fsync 2>&1 | sed -n 's/.* copied, \([0-9.e+-]*\) s.*/\1/p'
    done | sort -g | sed -n "$(((reps + 1) / 2))p"
}
while read -r line; do
    bytes=$(echo "$line" | sed -n 's/.*"bytes": \([0-9]*\).*/\1/p')
    echo "$(dd_median $(((bytes + 1048575) / 1048576)))" >>"$tmp/dd.txt"
done <"$tmp/ours.json"

step=""
if [ -f "$model" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$model")" >/dev/null 2>&1; then
    ./bench/bench_train "$model" "$threads" 2 1 >"$tmp/train.json" && step=$(cat "$tmp/train.json")
fi
python3 - "$tmp/ours.json" "$tmp/dd.txt" "$step" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
dd = [float(l) for l in open(sys.argv[2])]
step = json.loads(sys.argv[3])["step_s"] if sys.argv[3] else None
if step:
    print(f"step time (bench_train, SmolLM2-135M, batch 4 x 512, r=16): {step:.3f} s; 50 steps: {50 * step:.1f} s")
print("| case | MB | ptrain write s | dd s | ratio | share of 50 steps |")
print("|---|---|---|---|---|---|")
for o, d in zip(ours, dd):
    share = f"{100 * o['write_s'] / (50 * step):.2f}%" if step else "n/a"
    print(f"| {o['case']} ({o['tensors']} tensors) | {o['bytes'] / 1e6:.1f} | {o['write_s']:.3f} | {d:.3f} | "
          f"{o['write_s'] / d:.2f}x | {share} |")
PY
