#!/bin/bash
# run-startup.sh — start-up at scale on one machine (issue 27): for 1, 2, 4, 8 and 16 ranks
# (mpirun --oversubscribe, one thread each), on SmolLM2-135M-Instruct Q4_1 (GGUF) and on a 16-bit
# Hugging Face model in SmolLM2-135M's shape that ptrain quantizes to NF4 on load, a one-step run:
#   - the wall time from mpirun's start to its exit (start-up, one step, the adapter written);
#   - the new build's start-up record (metrics.jsonl): the slowest rank's seconds to the end of the
#     first step, the setup before the first step (that less the first step), and the MPI, model
#     read + quantize, dataset and first-step phases;
#   - host memory: the largest sum of Pss over the job's ptrain processes (sampled every 0.1 s
#     from /proc/PID/smaps), so a node-shared copy of the weights counts once, and of that the
#     shared weight window's (Open MPI's /dev/shm/osc_sm.* mapping; 0 with one rank, which loads
#     its own copy);
# cold (no dataset cache in output_dir) and cached (the same output_dir again: the dataset cache
# kept, everything else removed), and the same with an older build (OLD=path/to/ptrain, cold
# only: it has no cache). Then the dataset phase alone on a 100,000-row dataset, cold and cached.
# Prints markdown tables. Usage, from a configured build directory:
#   ../bench/run-startup.sh            RANKS="1 2 4 8 16" OLD=/path/ptrain MODELS="gguf hf16"
set -u
here=$(cd "$(dirname "$0")" && pwd)
new=$(pwd)/ptrain
old=${OLD:-}
ranks=${RANKS:-1 2 4 8 16}
models=${MODELS:-gguf hf16}
py=${PTRAIN_PYTHON:-python3}
mpirun=${MPIRUN:-mpirun}
gguf=${GGUF:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -x "$new" ] || { echo "run-startup.sh: no ./ptrain here; run it from a build directory" >&2; exit 2; }
[ -f "$gguf" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$gguf")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hf16=$tmp/smollm2-bf16
if [[ " $models " == *" hf16 "* ]]; then
    "$py" "$here/gpu/make_random_model.py" smollm2-135m "$hf16" --device cpu >/dev/null ||
        { echo "run-startup.sh: cannot write the 16-bit model (needs torch and safetensors in $py)" >&2; exit 2; }
fi
"$py" "$here/gpu/make_random_model.py" --dataset-only "$tmp/rows100k.jsonl" --rows 100000 --dataset-tokens 24 >/dev/null

config() { # config MODEL OUTDIR DATA
    cat <<YAML
model_name: "$1"
max_seq_length: 128
dataset:
  - name: "$3"
lora_r: 8
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
max_steps: 1
save_strategy: "no"
logging_steps: 1
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
YAML
}
pss_watch() { # pss_watch FILE: the largest sum of Pss (kB) over ptrain processes, and with it the
    # sum over the node's shared weight window (Open MPI's /dev/shm/osc_sm.* mapping), until killed
    local max=0 win=0 sum w p
    trap 'echo "$max $win" >"$1"; exit 0' TERM
    while :; do
        sum=0 w=0
        for p in $(pgrep -x ptrain); do
            set -- "$1" $(awk '/^[0-9a-f]+-[0-9a-f]+ / { shm = ($6 ~ /osc_sm/) }
                /^Pss:/ { all += $2; if (shm) win += $2 } END { print all + 0, win + 0 }' /proc/"$p"/smaps 2>/dev/null)
            sum=$((sum + ${2:-0})) w=$((w + ${3:-0}))
        done
        [ "$sum" -gt "$max" ] && max=$sum win=$w
        sleep 0.1
    done
}
run() { # run BINARY NP CONFIG: sets wall (s), pss and win (MB), rc
    local t0 w
    pss_watch "$tmp/pss" &
    w=$!
    t0=$(date +%s.%N)
    OMP_NUM_THREADS=1 "$mpirun" --oversubscribe --bind-to none -np "$2" "$1" train "$3" >"$tmp/out" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    kill -TERM "$w"
    wait "$w"
    read -r pss win <"$tmp/pss"
    pss=$((pss / 1024)) win=$((win / 1024))
    [ "$rc" = 0 ] || { echo "run-startup.sh: $1 -np $2 failed:" >&2; tail -5 "$tmp/out" >&2; }
}
startup() { # startup OUTDIR FIELD...: the start-up record's FIELDs (a sum when several), or -
    "$py" -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "startup" in r: print("%.3f" % sum(r["startup"][k] for k in sys.argv[2:])); break
else: print("-")' "$1/metrics.jsonl" "${@:2}" 2>/dev/null || echo -
}
setup() { # setup OUTDIR: seconds to the first step's start (to first step less the first step)
    "$py" -c 'import sys; a, b = sys.argv[1:]; print("-" if "-" in (a, b) else "%.2f" % (float(a) - float(b)))' \
        "$(startup "$1" to_first_step_s)" "$(startup "$1" first_step_s)"
}
fresh() { rm -rf "$1"; }
keep_cache() { find "$1" -mindepth 1 ! -name 'dataset-*.ptdata' -exec rm -rf {} + 2>/dev/null; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "new: $new ($("$new" --version 2>/dev/null | head -1))${old:+; old: $old}"
echo
echo "| model | ranks | build | dataset | wall s | to first step s | of which setup s | MPI s | model read + quantize s | dataset s | first step s | Pss MB | of which the shared weights |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
data=$here/../share/data/pirate-instructions.jsonl
for m in $models; do
    if [ "$m" = gguf ]; then path=$gguf; else path=$hf16; fi
    for np in $ranks; do
        out=$tmp/run-$m-$np
        config "$path" "$out" "$data" >"$tmp/c.yaml"
        if [ -n "$old" ]; then
            fresh "$out"
            run "$old" "$np" "$tmp/c.yaml"
            echo "| $m | $np | old | (none) | $wall | - | - | - | - | - | - | $pss | - |"
        fi
        fresh "$out"
        for how in cold cached; do
            [ "$how" = cached ] && keep_cache "$out"
            run "$new" "$np" "$tmp/c.yaml"
            echo "| $m | $np | new | $how | $wall | $(startup "$out" to_first_step_s) | $(setup "$out") |" \
                "$(startup "$out" mpi_s) | $(startup "$out" model_read_s quantize_s) | $(startup "$out" dataset_s) |" \
                "$(startup "$out" first_step_s) | $pss | $win |"
        done
    done
done

echo
echo "100,000 rows (plain text, about 30 tokens each), SmolLM2 GGUF, 1 rank:"
echo
echo "| build | dataset | dataset s | wall s |"
echo "|---|---|---|---|"
out=$tmp/run-100k
config "$gguf" "$out" "$tmp/rows100k.jsonl" >"$tmp/c.yaml"
if [ -n "$old" ]; then
    fresh "$out"
    run "$old" 1 "$tmp/c.yaml"
    echo "| old | (none) | - | $wall |"
fi
fresh "$out"
for how in cold cached; do
    [ "$how" = cached ] && keep_cache "$out"
    run "$new" 1 "$tmp/c.yaml"
    echo "| new | $how | $(startup "$out" dataset_s) | $wall |"
done
