#!/bin/sh
# run-export.sh — memory and time of `ptrain export` on a 2B-class model: a random Llama GGUF in
# F16 (4.4 GB, bench/make_big_model.py) with a random r=16 adapter on every projection, exported
# to merged GGUF (q4_k_m, q8_0, f16) and to a merged Hugging Face directory (bf16). Reports each
# export's wall time and peak RSS (GNU time) next to the sizes of the model and the outputs: a
# streaming export needs about one row chunk plus buffers, not the model.
# Usage: bench/run-export.sh [WORKDIR]    (needs bench/.venv with gguf, numpy, safetensors)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/ptrain-export-bench}
mkdir -p "$work"
py=$top/bench/.venv/bin/python
[ -f "$work/big-f16.gguf" ] || "$py" "$top/bench/make_big_model.py" "$top/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$work"
echo "processor: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "model: $(du -h "$work/big-f16.gguf" | cut -f1) F16 GGUF; adapter $(du -h "$work/adapter/adapter_model.safetensors" | cut -f1)"
# peak RssAnon (the process's own memory; RSS also counts pages of the mapped base file, which the
# export gives back tensor by tensor) sampled every 0.2 s, next to GNU time's peak RSS
peak_anon() {
    max=0
    while kill -0 "$1" 2>/dev/null; do
        a=$(awk '/RssAnon/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
        [ "${a:-0}" -gt "$max" ] && max=$a
        sleep 0.2
    done
    echo "$max"
}
for what in "--gguf q4_k_m" "--gguf q8_0" "--gguf f16" "--hf"; do
    rm -rf "$work/out"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e s, peak RSS %M KB" -o "$work/time.txt" "$top/build/ptrain" export --model "$work/big-f16.gguf" \
        --adapter "$work/adapter" --out "$work/out" $what --no-adapter-files >/dev/null &
    anon=$(peak_anon "$(pgrep -n -f "ptrain export --model $work/big-f16.gguf")")
    wait
    echo "export $what: $(cat "$work/time.txt"), peak RssAnon $anon KB; wrote $(du -sh "$work/out" | cut -f1)"
done
