#!/bin/bash
# run.sh — the GPU check: one call of the device tool runs the stages below within eight minutes,
# each under its own time limit, each going on after a failed one, and ends by printing
# $OUT/report.md (PASS/FAIL/SKIP/MISS per stage with its numbers, the benchmark's tables). The
# stages, in the order they run; the default set is all of them but profile:
#   setup          the bundle (.gpu-bundle/ptrain-gpu.tar.xz, share/scripts/gpu-bundle.sh) unpacked
#                  and wrapped (tests/gpu/bundle-env.sh), or build/ if there is no bundle; the
#                  carried wheels (.gpu-wheels, share/scripts/gpu-wheels.sh) installed for the peer;
#                  nvidia-smi, the GPUs, driver, OS, glibc, torch; starts writing the benchmark's
#                  random models (kept in PT_BENCH_DIR for a later call on the same machine)
#   ops            tests/unit/test_cuda_mma: the tensor-core primitives (mma, ldmatrix, cp.async)
#                  against the PTX ISA's layouts; tests/unit/test_cuda_bf16: every op on the fast
#                  path's bf16 activations against the CPU; tests/unit/test_cuda_ops: every CUDA op
#                  against the CPU backend (attention on the tensor-core and on the reference kernels)
#   model          tests/unit/test_cuda_model: whole-model logits, CUDA vs CPU; tests/gpu/train_parity.sh:
#                  30 training steps, the loss curves of CUDA and CPU
#   fastref        the fast kernels against PTRAIN_CUDA_KERNELS=reference (the plain fp32 kernels) on
#                  the same GPU: test_cuda_ops and test_cuda_model under the reference kernels,
#                  train_parity.sh fast against reference (30 steps, 2e-2 a step), and the same run
#                  twice with the fast kernels: the same adapter, bit for bit
#   generate       `ptrain generate` greedy on the tiny test models (and SmolLM2 if models/ has it),
#                  --device cuda against --device cpu: the same text
#   train          `ptrain train` on tests/tiny.sh's config for 10 steps on cuda: finite losses, and
#                  peak device memory <= memory plan x 1.10 + 256 MiB
#   sanitizer      compute-sanitizer memcheck (2-step train, generate, test_cuda_bf16, test_cuda_ops),
#                  racecheck (1 step)
#   bench-speed    bench/gpu/run.sh PARTS=speed: ptrain in each checkpointing mode and the peer on
#                  gemma-2-2b's (2048, 8192) and SmolLM2-135M's shapes, batch 1 and 4, by priority
#                  until its time is up: tokens/s, peak memory, MFU both ways, hardware FLOP/s
#   bench-longest  bench/gpu/run.sh PARTS=longest: the longest sequence at batch 1, ptrain's (memory
#                  plan, then one step) and the peer's (one step per doubling), gemma-2-2b and
#                  Llama-3.1-8B shapes
#   multi          tests/gpu/multi.sh, when nvidia-smi lists more than one GPU: mpirun -np N, NCCL
#   profile        bench/gpu/profile.sh (not in the default set): Nsight Compute by kernel family
# Each stage's limit is its cap, cut so that every later stage of the run keeps its minimum (the
# table in `limits`; tests/gpu/README.md gives the time each is expected to take). Each stage runs
# in a subshell of its own, in its own process group: a stage that fails, crashes (exit, an unset
# variable under set -u) or hangs ends there, killed with everything it started once past its
# limit + GPU_CHECK_GRACE seconds, gets a FAIL row, and the later stages run and the report is
# written all the same. Only setup's findings (the GPUs, the binaries, the peer's wheels) reach the
# later stages, through a file; without a ptrain they SKIP.
# Usage, from the repository root: bash tests/gpu/run.sh [--cpu]
# --cpu: a dry run on a machine without a GPU: cpu wherever cuda would be (so the comparisons are
# cpu against cpu), tiny benchmark shapes, two CPU ranks for multi; PYTHON names a python with
# torch, transformers and peft.
# Environment: OUT (default ./gpu-out), PT_GPU_BUNDLE (default .gpu-bundle/ptrain-gpu.tar.xz),
# PT_GPU_WHEELS (default .gpu-wheels), PT_BENCH_DIR (the random models and the benchmark's files;
# default /tmp/ptrain-bench, or /tmp/ptrain-bench-cpu for --cpu), GPU_CHECK_SECONDS (480: when the
# report must be written), STAGES (the stages to run, default all but profile; setup always runs:
# STAGES="ops" reruns the op check alone), PT_GPU_BUILD (the build directory used without a bundle,
# default build/), GPU_CHECK_GRACE (30: the seconds a stage may run past its limit before it is
# killed), GPU_CHECK_FAULT ("STAGE:KIND ...", for tests/gpu/test_report.sh: a fault at the start of
# STAGE, KIND exit (the stage exits 3), unset (an unset variable) or hang (sleeps past its limit)).
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
DEV=cuda
[ "${1:-}" = --cpu ] && DEV=cpu
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
deadline=$(($(date +%s) + ${GPU_CHECK_SECONDS:-480}))
work=$(mktemp -d /tmp/ptrain-gpu.XXXXXX)
bench=${PT_BENCH_DIR:-/tmp/ptrain-bench$([ "$DEV" = cpu ] && echo -cpu)}
export PTRAIN_SRCDIR=$root PTRAIN_MODELS=$root/models PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# a dry run: the CUDA tests' "GPU" side on a CPU
[ "$DEV" = cpu ] && export PTRAIN_TEST_CUDA_OPS_DEVICE=cpu PTRAIN_PARITY_DEVICE=cpu
results=""
ORDER="ops model fastref generate train sanitizer bench-speed bench-longest multi profile"

# limits STAGE: "CAP MIN" seconds: the most the stage takes, and what it keeps while earlier stages run
limits() {
    case $1 in
    setup) echo "150 0" ;;
    ops) echo "60 20" ;;
    model) echo "150 40" ;;
    fastref) echo "180 40" ;;
    generate) echo "60 15" ;;
    train) echo "40 10" ;;
    sanitizer) echo "150 30" ;;
    bench-speed) echo "240 60" ;;
    bench-longest) echo "240 100" ;;
    multi) [ "$DEV" = cuda ] && [ "${ngpu:-0}" -lt 2 ] && echo "10 0" || echo "150 90" ;;
    profile) echo "240 150" ;;
    esac
}
# keep_after STAGE: the minimums of the wanted stages after STAGE
keep_after() {
    local s after=no sum=0
    for s in $ORDER; do
        [ $after = yes ] && wanted "$s" && sum=$((sum + $(limits "$s" | cut -d' ' -f2)))
        [ "$s" = "$1" ] && after=yes
    done
    echo $sum
}
# budget CAP EXTRA: CAP seconds, or fewer so that the later stages keep their minimums ($keep, set
# per stage) and EXTRA seconds are left for the rest of this stage
budget() {
    local left=$((deadline - $(date +%s) - keep - $2))
    [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"
}
# result STAGE VERDICT NUMBERS: one row of the report
result() {
    results="$results| $1 | $2 | $3 |"$'\n'
    echo "== $1: $2 — $3"
}
# tap_counts LOG: "N ok, N not ok, N skipped" of a cmocka program's TAP output
tap_counts() {
    echo "$(grep -c '^ok ' "$1") ok, $(grep '^not ok ' "$1" | grep -vc '# SKIP') not ok, $(grep -c '# SKIP' "$1") skipped"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
first_int_after() { grep -m 1 "$1" "$2" | sed "s/.*$1//" | grep -o '[0-9][0-9]*' | head -n 1; }

# ---- setup ----
setup_machine() { # what the machine is: sets gpu, ngpu, os, glibc, sanitizer
    echo "device $DEV; started $(date -u); deadline in $((deadline - $(date +%s))) s"
    gpu="none" ngpu=0
    if command -v nvidia-smi >/dev/null; then
        timeout 30 nvidia-smi
        gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)
        ngpu=$(timeout 30 nvidia-smi -L | grep -c '^GPU')
    fi
    echo "gpu: $gpu; $ngpu GPU(s)"
    os=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    echo "os: $os; glibc $glibc; nvcc: $(nvcc --version 2>/dev/null | tail -n 1); cpus: $(nproc)"
    timeout 60 "$PYTHON" -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'
    sanitizer=$(command -v compute-sanitizer)
    for f in /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer; do
        [ -z "$sanitizer" ] && [ -x "$f" ] && sanitizer=$f
    done
    echo "compute-sanitizer: ${sanitizer:-not found}"
}
setup_binaries() { # the bundle or build/ (PT_GPU_BUILD): sets bin, mode
    local bundle=${PT_GPU_BUNDLE:-$root/.gpu-bundle/ptrain-gpu.tar.xz} build=${PT_GPU_BUILD:-$root/build} need m
    bin="" mode="build/"
    if [ -f "$bundle" ]; then
        . "$root/tests/gpu/bundle-env.sh"
        bundle_unpack "$bundle" "$work/bundle" && cat "$PT_BUNDLE/MANIFEST"
        need=$(sed -n 's/^glibc_required=//p' "$PT_BUNDLE/MANIFEST")
        mode=direct
        [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | head -n 1)" = "$need" ] || mode=loader
        for m in $mode loader; do
            bundle_wrap "$m"
            if "$PT_BUNDLE/wrap/ptrain" --version; then
                bin=$PT_BUNDLE/wrap mode="bundle ($m)"
                break
            fi
            echo "the bundle's ptrain does not start ($m); its libraries:"
            LD_LIBRARY_PATH=$(bundle_libpath 2>/dev/null) ldd "$PT_BUNDLE/bin/ptrain" | grep -v '=> /'
        done
    elif [ -x "$build/ptrain" ]; then
        bin=$work/bin
        mkdir -p "$bin"
        for p in "$build"/ptrain "$build"/tests/unit/test_cuda_*; do [ -x "$p" ] && ln -s "$(cd "$(dirname "$p")" && pwd)/${p##*/}" "$bin/"; done
        command -v mpirun >/dev/null && ln -s "$(command -v mpirun)" "$bin/mpirun"
    else
        echo "no bundle ($bundle) and no $build/ptrain: make one with share/scripts/gpu-bundle.sh and carry .gpu-bundle"
    fi
}
setup_wheels() { # the peer's carried wheels into $work/site, on PYTHONPATH: sets wheels
    local dir=${PT_GPU_WHEELS:-$root/.gpu-wheels}
    wheels="none carried"
    ls "$dir"/*.whl >/dev/null 2>&1 || return 0
    if timeout 60 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" \
        "$dir"/*.whl; then
        export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
        wheels=$(cd "$dir" && ls ./*.whl | sed 's|^\./||; s/-py3.*//; s/-\([0-9]\)/ \1/' | tr '\n' ',' | sed 's/,$//; s/,/, /g')
        timeout 60 "$PYTHON" -c 'import bitsandbytes' >/dev/null 2>&1 || wheels="$wheels (bitsandbytes does not import)"
    else
        wheels="the wheels in $dir did not install"
    fi
    echo "wheels: $wheels"
}
# The benchmark's random models, written in the background (on the GPU) while the tests run, each
# marked SHAPE.writing until whole; those already in $bench (a previous call) are kept.
setup_models() {
    local shapes="" tokens=8192 rows=32 s
    if [ "$DEV" = cuda ]; then
        { wanted model || wanted fastref || wanted bench-speed || wanted multi; } && shapes="smollm2-135m"
        { wanted bench-speed || wanted bench-longest || wanted multi || wanted profile; } && shapes="$shapes gemma2-2b"
        wanted bench-longest && shapes="$shapes llama3.1-8b"
    else
        { wanted bench-speed || wanted bench-longest || wanted multi || wanted profile; } &&
            shapes="tiny tiny-gemma2 tiny-llama3"
        tokens=256 rows=16
    fi
    [ -n "$shapes" ] || { echo "writing no random models: no stage wants one"; return 0; }
    mkdir -p "$bench"
    for s in $shapes; do [ -f "$bench/$s/config.json" ] || : >"$bench/$s.writing"; done
    (
        [ -f "$bench/text.jsonl" ] || "$PYTHON" bench/gpu/make_random_model.py --dataset-only "$bench/text.jsonl" \
            --rows "$rows" --dataset-tokens "$tokens"
        for s in $shapes; do
            [ -f "$bench/$s/config.json" ] || timeout 400 "$PYTHON" bench/gpu/make_random_model.py "$s" "$bench/$s" \
                --device "$DEV"
            rm -f "$bench/$s.writing"
        done
    ) >"$work/models.log" 2>&1 &
    echo "writing random models in $bench: ${shapes:-none}"
}
# setup_save: what setup found, for the later stages (each in a subshell of its own), as far as it got
setup_save() {
    {
        printf 'gpu=%q ngpu=%q sanitizer=%q bin=%q PT=%q\n' "${gpu:-none}" "${ngpu:-0}" "${sanitizer:-}" "${bin:-}" \
            "${PT:-}"
        [ -n "${PYTHONPATH:-}" ] && printf 'export PYTHONPATH=%q\n' "$PYTHONPATH"
    } >"$work/setup.state"
}
stage_setup() {
    setup_machine
    setup_save
    setup_binaries
    PT=${bin:+$bin/ptrain}
    setup_save
    setup_wheels
    setup_save
    setup_models
    if [ -n "$bin" ] && "$PT" --version | grep -q "backends:.*$DEV"; then
        result setup PASS "$gpu ($ngpu GPU(s)); $os, glibc $glibc; binaries from $mode; peer wheels: $wheels"
    else
        result setup FAIL "$gpu; $os, glibc $glibc; no working ptrain with the $DEV backend (see setup.log)"
        PT=""
    fi
    setup_save
}

# ---- a cmocka program: ops, model ----
cmocka_run() { # PROGRAM CAP EXTRA: runs $bin/PROGRAM (TAP) under budget CAP EXTRA; sets cm_rc and cm_nums
    local prog=${bin:+$bin/$1} secs t0=$SECONDS
    if [ -z "$prog" ] || [ ! -x "$prog" ]; then
        cm_rc=skip cm_nums="$1 is not in the bundle (not built?)"
        return
    fi
    secs=$(budget "$2" "$3")
    echo "--- $1 (limit $secs s)"
    # a random model in SmolLM2-135M's shape, for tests that want one (the real one cannot travel)
    [ "$DEV" = cuda ] && [ -f "$bench/smollm2-135m/config.json" ] && export PTRAIN_RANDOM_SMOLLM2=$bench/smollm2-135m
    CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 5 "$secs" "$prog" | tee "$work/$1.tap"
    cm_rc=${PIPESTATUS[0]}
    cm_nums="$1: $(tap_counts "$work/$1.tap"), exit $cm_rc$([ "$cm_rc" = 124 ] && echo " (timeout)"), $((SECONDS - t0)) s"
}
stage_ops() {
    [ -n "$PT" ] || { result ops SKIP "no ptrain"; return; }
    local mma_rc mma_nums
    cmocka_run test_cuda_mma 20 0 # the tensor-core primitives against the PTX ISA's layouts (TAP)
    mma_rc=$cm_rc mma_nums=$cm_nums
    cmocka_run test_cuda_bf16 20 0 # the fast path's bf16 activations against the CPU's fp32
    local bf_rc=$cm_rc bf_nums=$cm_nums
    cmocka_run test_cuda_ops 60 0
    [ "$cm_rc" = 0 ] && [ "$mma_rc" != 0 ] && [ "$mma_rc" != skip ] && cm_rc=$mma_rc
    [ "$cm_rc" = 0 ] && [ "$bf_rc" != 0 ] && [ "$bf_rc" != skip ] && cm_rc=$bf_rc
    cm_nums="$mma_nums; $bf_nums; $cm_nums"
    case $cm_rc in skip) result ops SKIP "$cm_nums" ;; 0) result ops PASS "$cm_nums" ;; *) result ops FAIL "$cm_nums" ;; esac
}
# test_cuda_model, then tests/gpu/train_parity.sh (30 steps, cuda against cpu, loss curves)
stage_model() {
    [ -n "$PT" ] || { result model SKIP "no ptrain"; return; }
    local ok=yes nums parity rc i
    # test_smollm2 wants the random SmolLM2-shaped model that setup is writing: up to 60 s for it
    for i in $(seq 60); do
        [ -f "$bench/smollm2-135m.writing" ] || break
        sleep 1
    done
    cmocka_run test_cuda_model 90 30
    nums=$cm_nums
    case $cm_rc in 0 | skip) ;; *) ok=no ;; esac
    if [ -f tests/gpu/train_parity.sh ]; then
        echo "--- tests/gpu/train_parity.sh"
        timeout -k 5 "$(budget 90 0)" sh tests/gpu/train_parity.sh "$PT" "$work/parity" | tee "$work/parity.out"
        rc=${PIPESTATUS[0]}
        parity=$(grep -E ': (PASS|FAIL|SKIP)' "$work/parity.out" | tr '\n' ';')
        nums="$nums; train_parity.sh exit $rc: ${parity%;}"
        [ "$rc" = 0 ] || ok=no
    fi
    result model "$([ $ok = yes ] && echo PASS || echo FAIL)" "$nums"
}

# ---- generate: cuda against cpu, greedy ----
# Every model must generate on the device (exit 0, text out). Equal greedy text on both backends is
# reported but not required: the tiny random models' logits lie close together, so bf16 GEMMs may
# flip an argmax that fp32 does not (the logits themselves are compared in test_cuda_model, the
# cached path included); SmolLM2, when present, must answer "Paris".
stage_generate() {
    [ -n "$PT" ] || { result generate SKIP "no ptrain"; return; }
    local models="tests/data/hf/tiny-llama-bnb4 tests/data/qwen2/hf-bnb4 tests/data/gemma2/hf-bnb4"
    [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] && models="$models models/SmolLM2-135M-Instruct.Q4_1.gguf"
    local same=0 n=0 bad="" diff="" m d secs rc
    for m in $models; do
        n=$((n + 1))
        for d in cpu "$DEV"; do
            secs=$(budget 20 0)
            timeout -k 5 "$secs" "$PT" generate --model "$m" --prompt "The quick brown fox" --temperature 0 \
                --max-new-tokens 32 --device "$d" --threads 4 >"$work/gen.$d.out" 2>"$work/gen.$d.err"
            rc=$?
            echo "$m on $d: exit $rc $(tail -n 1 "$work/gen.$d.err")"
            echo "  text: $(head -c 200 "$work/gen.$d.out" | cat -v | tr '\n' ' ')"
            [ "$rc" = 0 ] && [ -s "$work/gen.$d.out" ] || bad="$bad ${m##*/} failed on $d;"
        done
        if cmp -s "$work/gen.cpu.out" "$work/gen.$DEV.out"; then
            same=$((same + 1))
        else
            diff="$diff ${m##*/}: first difference at byte $(cmp "$work/gen.cpu.out" "$work/gen.$DEV.out" 2>&1 |
                grep -o 'byte [0-9]*' | grep -o '[0-9]*');"
        fi
    done
    if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
        "$PT" generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf --chat --prompt "What is the capital of France?" \
            --temperature 0 --max-new-tokens 24 --device "$DEV" >"$work/paris.out" 2>&1
        grep -q Paris "$work/paris.out" || bad="$bad SmolLM2 did not answer Paris;"
        cat "$work/paris.out"
    fi
    if [ -z "$bad" ]; then
        result generate PASS "$n models generate on $DEV; the same greedy text as cpu on $same/$n (32 tokens)${diff:+;$diff}"
    else
        result generate FAIL "$bad the same text on $same/$n${diff:+;$diff}"
    fi
}

# ---- train: a short run on the device, and its memory ----
stage_train() {
    [ -n "$PT" ] || { result train SKIP "no ptrain"; return; }
    . tests/tiny.sh
    tiny_config "$work/train.yaml" "$work/train" "device: $DEV
max_steps: 10
logging_steps: 1
warmup_steps: 0
learning_rate: 1e-3
optim: adamw_torch"
    timeout -k 5 "$(budget 40 0)" "$PT" train "$work/train.yaml" 2>&1 | tee "$work/train.log"
    local rc=${PIPESTATUS[0]} ok=yes plan peak limit mem losses
    losses=$(sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$work/train/metrics.jsonl" 2>/dev/null | tr '\n' ' ')
    plan=$(first_int_after 'memory plan:' "$work/train.log")
    peak=$(first_int_after 'peak device memory:' "$work/train.log")
    if [ -n "$plan" ] && [ -n "$peak" ]; then
        limit=$(awk -v p="$plan" 'BEGIN { printf "%.0f", p * 1.10 + 256 * 1048576 }')
        mem="memory plan $(mib "$plan") MiB, peak $(mib "$peak") MiB (limit plan x 1.10 + 256 = $(mib "$limit"))"
        [ "$peak" -le "$limit" ] || ok=no
    else
        mem="memory plan: ${plan:-not printed}, peak device memory: ${peak:-not printed}"
        [ "$DEV" = cuda ] && ok=no
    fi
    # 10 finite losses
    [ "$rc" = 0 ] && [ "$(echo "$losses" | wc -w)" = 10 ] || ok=no
    echo "$losses" | grep -qi 'nan\|inf' && ok=no
    result train "$([ $ok = yes ] && echo PASS || echo FAIL)" "exit $rc; losses ${losses% }; $mem"
}

# ---- sanitizer ----
sanitize() { # NAME TOOL CAP EXTRA CMD...: one compute-sanitizer run; appends to $san
    local name=$1 tool=$2 secs rc errors
    secs=$(budget "$3" "$4")
    shift 4
    echo "--- $name ($tool, limit $secs s)"
    timeout -k 5 "$secs" "$sanitizer" --tool "$tool" --target-processes all --error-exitcode 99 --print-limit 20 \
        "$@" >"$work/san.log" 2>&1
    rc=$?
    cat "$work/san.log"
    # memcheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: N hazards
    # displayed (E errors, W warnings)": count the errors of either
    errors=$(grep -o 'ERROR SUMMARY: [0-9]*' "$work/san.log" | tail -n 1 | grep -o '[0-9]*$')
    [ -n "$errors" ] || errors=$(grep -o 'RACECHECK SUMMARY: .*(\([0-9]*\) errors' "$work/san.log" | tail -n 1 |
        sed 's/.*(\([0-9]*\) errors/\1/')
    san="$san $name: ${errors:-?} errors (exit $rc);"
    [ "$rc" = 0 ] && [ "${errors:-1}" = 0 ] || san_ok=no
}
stage_sanitizer() {
    [ -n "$PT" ] || { result sanitizer SKIP "no ptrain"; return; }
    [ -n "$sanitizer" ] || { result sanitizer SKIP "compute-sanitizer not found on this machine"; return; }
    . tests/tiny.sh
    tiny_config "$work/san.yaml" "$work/san" "device: $DEV
max_steps: 2
logging_steps: 1"
    tiny_config "$work/race.yaml" "$work/race" "device: $DEV
max_steps: 1"
    san="" san_ok=yes
    sanitize "train 2 steps" memcheck 60 90 "$PT" train "$work/san.yaml"
    sanitize "generate 8 tokens" memcheck 40 60 "$PT" generate --model tests/data/gemma2/hf-bnb4 --prompt "Hi there" \
        --temperature 0 --max-new-tokens 8 --device "$DEV"
    sanitize "train 1 step" racecheck 60 30 "$PT" train "$work/race.yaml"
    [ -x "$bin/test_cuda_bf16" ] && sanitize test_cuda_bf16 memcheck 30 90 "$bin/test_cuda_bf16"
    [ -x "$bin/test_cuda_ops" ] && sanitize test_cuda_ops memcheck 90 0 "$bin/test_cuda_ops"
    san=${san# }
    result sanitizer "$([ $san_ok = yes ] && echo PASS || echo FAIL)" "${san%;}"
}

# ---- fastref: the fast kernels against the reference ones, on the same GPU ----
# twice CONFIG-NAME: the same 10-step run twice with the fast kernels; sets same (yes/no) and nums
twice() {
    local model=$bench/smollm2-135m seq=512 i
    [ "$DEV" = cpu ] || [ ! -f "$model/config.json" ] && model=$root/tests/data/hf/tiny-llama-bnb4 seq=64
    for i in 1 2; do
        cat >"$work/twice$i.yaml" <<YAML
model_name: "$model"
max_seq_length: $seq
device: $DEV
dataset:
  - name: "$root/share/data/pirate-instructions.jsonl"
lora_r: 16
lora_alpha: 32
lora_dropout: 0.1
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 10
logging_steps: 1
learning_rate: 1e-3
seed: 5
threads: 2
output_dir: "$work/twice$i"
final_model_dir: "$work/twice$i/lora"
YAML
        timeout -k 5 "$(budget 40 0)" "$PT" train "$work/twice$i.yaml" >"$work/twice$i.log" 2>&1
    done
    same=no
    for i in 1 2; do sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$work/twice$i/metrics.jsonl" >"$work/losses$i" 2>/dev/null; done
    [ -s "$work/twice1/lora/adapter_model.safetensors" ] && [ -s "$work/losses1" ] &&
        cmp -s "$work/twice1/lora/adapter_model.safetensors" "$work/twice2/lora/adapter_model.safetensors" &&
        cmp -s "$work/losses1" "$work/losses2" && same=yes
    nums="the same 10 steps twice (${model##*/}, ${seq} tokens, dropout 0.1): adapter and losses bit for bit: $same"
}
stage_fastref() {
    [ -n "$PT" ] || { result fastref SKIP "no ptrain"; return; }
    local ok=yes all="" prog rc parity
    export PTRAIN_CUDA_KERNELS=reference
    for prog in test_cuda_ops test_cuda_model; do
        cmocka_run "$prog" 90 90
        all="$all reference kernels: $cm_nums;"
        case $cm_rc in 0 | skip) ;; *) ok=no ;; esac
    done
    unset PTRAIN_CUDA_KERNELS
    echo "--- tests/gpu/train_parity.sh, fast against reference"
    PTRAIN_PARITY_BASE=reference timeout -k 5 "$(budget 90 60)" sh tests/gpu/train_parity.sh "$PT" "$work/fastref" |
        tee "$work/fastref.out"
    rc=${PIPESTATUS[0]}
    parity=$(grep -E ': (PASS|FAIL|SKIP)' "$work/fastref.out" | tr '\n' ';')
    [ "$rc" = 0 ] || ok=no
    twice
    [ "$same" = yes ] || ok=no
    result fastref "$([ $ok = yes ] && echo PASS || echo FAIL)" "${all# } train_parity.sh fast vs reference, exit $rc: ${parity%;}; $nums"
}

# ---- the benchmark: bench/gpu/run.sh, one part per stage ----
bench_part() { # PART STAGE
    [ -n "$PT" ] || { result "$2" SKIP "no ptrain"; return; }
    local secs
    secs=$(budget "$(limits "$2" | cut -d' ' -f1)" 0)
    env PTRAIN="$PT" DEVICE="$DEV" PYTHON="$PYTHON" PARTS="$1" DEADLINE=$(($(date +%s) + secs)) \
        bash bench/gpu/run.sh "$bench"
}
stage_bench_speed() {
    bench_part speed bench-speed
    [ -n "$PT" ] || return
    local ran skipped targets
    ran=$(grep -c '"status": "\(ok\|partial\)"' "$bench/cells.jsonl" 2>/dev/null)
    skipped=$(grep -c '"status": "skipped"' "$bench/cells.jsonl" 2>/dev/null)
    targets=$(grep '^targets' "$bench/table.md" 2>/dev/null | sed 's/^targets //' | tr '\n' ';')
    if [ "${ran:-0}" = 0 ]; then
        result bench-speed FAIL "no cell ran (bench-speed.log)"
    elif grep -q 'n/a\|NO' <<<"$targets" || [ "${skipped:-0}" != 0 ]; then
        result bench-speed MISS "$ran cells ran, $skipped skipped for time; ${targets%;}"
    else
        result bench-speed PASS "$ran cells ran; ${targets%;}"
    fi
}
stage_bench_longest() {
    bench_part longest bench-longest
    [ -n "$PT" ] || return
    local rows steps targets
    rows=$(grep -c '"longest_seq": [0-9]' "$bench/longest.jsonl" 2>/dev/null)
    steps=$(grep -o '"step": "[^"]*"' "$bench/longest.jsonl" 2>/dev/null | grep -v 'not run' | sed 's/"step": //' |
        tr '\n' ';')
    targets=$(grep '^targets longest' "$bench/longest.md" 2>/dev/null | sed 's/^targets longest //' | tr '\n' ';')
    if [ "${rows:-0}" = 0 ]; then
        result bench-longest FAIL "no search gave a length (bench-longest.log)"
    elif grep -q 'ran: 1 step' <<<"$steps" && ! grep -q 'did not\|failed\|skipped\|none' <<<"$steps" &&
        ! grep -q "4x the peer's \(NO\|n/a\|unverified\)" <<<"$targets"; then
        result bench-longest PASS "$rows lengths found; ${targets%;}"
    else
        result bench-longest MISS "$rows lengths found; the steps at them: ${steps%;}; ${targets%;}"
    fi
}

# ---- multi: several GPUs, one rank each ----
stage_multi() {
    [ -n "$PT" ] || { result multi SKIP "no ptrain"; return; }
    local ranks=$ngpu model=$bench/smollm2-135m scale=$bench/gemma2-2b extra=() lines
    if [ "$DEV" = cpu ]; then
        ranks=2 model=$bench/tiny scale="" extra=(SEQ=128 STEPS=4 THREADS=1)
    elif [ "$ngpu" -lt 2 ]; then
        result multi SKIP "$ngpu GPU visible (nvidia-smi -L): the stage needs 2 or more"
        return
    fi
    [ -x "$bin/mpirun" ] || { result multi SKIP "no mpirun in the bundle (rebuild it with share/scripts/gpu-bundle.sh)"; return; }
    for s in "${model##*/}" "${scale##*/}"; do
        while [ -n "$s" ] && [ -f "$bench/$s.writing" ] && [ "$(budget 60 0)" -gt 30 ]; do sleep 2; done
    done
    env PT="$PT" MPIRUN="$bin/mpirun" DEVICE="$DEV" RANKS="$ranks" SCALE_MODEL="$scale" "${extra[@]}" \
        MULTI_SECONDS="$(budget "$(limits multi | cut -d' ' -f1)" 0)" bash tests/gpu/multi.sh "$work/multi" "$model" \
        "$bench/text.jsonl" | tee "$work/multi.out"
    lines=$(grep '^multi: .*: \(PASS\|FAIL\|SKIP\)' "$work/multi.out" | sed 's/^multi: //' | tr '\n' ';')
    if grep -q ': FAIL' <<<"$lines" || [ -z "$lines" ]; then
        result multi FAIL "$ranks ranks: ${lines%;}"
    else
        result multi PASS "$ranks ranks: ${lines%;}"
    fi
}

# ---- profile: Nsight Compute over one step ----
# profile_gaps TABLE: the profiled kernel time against the benchmark's wall time of the same cell
# (gemma2-2b, 2048 x 1, unsloth): what the step spends outside kernels, launch gaps and host waits, at
# least (the kernel time includes the loading's few kernels); CUDA graphs (issue 26, point 8) pay
# only when this is a real share of the step
profile_gaps() {
    "$PYTHON" - "$1" "$bench/cells.jsonl" <<'PY' 2>/dev/null || echo "no step time to compare with"
import json, re, sys
k = re.search(r"([0-9.]+) ms of kernel time", open(sys.argv[1]).read())
cells = [json.loads(x) for x in open(sys.argv[2]) if x.startswith("{")]
s = [c["step_s"] for c in cells if c.get("side") == "ptrain" and c.get("shape") == "gemma2-2b" and c.get("seq") == 2048
     and c.get("batch") == 1 and c.get("mode") == "unsloth" and c.get("step_s")]
kern, step = float(k.group(1)), 1e3 * s[0]
print(f"kernel time {kern:.1f} ms vs the benchmark's step {step:.1f} ms: outside kernels at least "
      f"{max(step - kern, 0):.1f} ms ({100 * max(step - kern, 0) / step:.1f}%)")
PY
}
stage_profile() {
    [ -n "$PT" ] || { result profile SKIP "no ptrain"; return; }
    while [ -f "$bench/gemma2-2b.writing" ] && [ "$(budget 60 0)" -gt 30 ]; do sleep 2; done
    local secs
    secs=$(budget "$(limits profile | cut -d' ' -f1)" 0)
    env PT="$PT" MODEL="$bench/gemma2-2b" DATASET="$bench/text.jsonl" PYTHON="$PYTHON" NCU_SECONDS=$((secs - 20)) \
        bash bench/gpu/profile.sh "$work/profile" | tee "$work/profile.out"
    if grep -q 'profile: SKIP' "$work/profile.out"; then
        result profile SKIP "$(grep 'profile: SKIP' "$work/profile.out" | sed 's/.*— //')"
    elif grep -q '^| ' "$work/profile/profile.md" 2>/dev/null; then
        result profile PASS "$(head -n 1 "$work/profile/profile.md"); $(profile_gaps "$work/profile/profile.md")"
    else
        result profile FAIL "no table (profile.log)"
    fi
}

wanted() {
    case " setup ${STAGES:-ops model fastref generate train sanitizer bench-speed bench-longest multi} " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}
# stage_fault NAME: the fault GPU_CHECK_FAULT asks of stage NAME, if any (tests/gpu/test_report.sh)
stage_fault() {
    local f
    for f in ${GPU_CHECK_FAULT:-}; do
        [ "${f%%:*}" = "$1" ] || continue
        echo "GPU_CHECK_FAULT: $f"
        case ${f#*:} in
        exit) exit 3 ;;
        unset) echo "${gpu_check_unset_variable:?}" ;;
        hang) # under timeout, in a process group of its own as the stages' commands are
            timeout 100000 sleep 100000 &
            echo "GPU_CHECK_FAULT: hanging in pid $!"
            wait ;;
        esac
    done
}
# descendants PID: every process below PID (`timeout` puts its command in a process group of its own)
descendants() {
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}
# run_stage NAME FUNCTION ARGS...: the stage in a subshell and process group of its own, its output
# to $OUT/NAME.log; killed with everything it started (its group and every process below it) past
# its limit (its cap cut so that the later stages keep their minimums, + GPU_CHECK_GRACE); its
# verdict row, or a FAIL row if it gave none (crashed, exited, killed)
run_stage() {
    local name=$1 t0=$SECONDS cap left limit pid dog rc verdict why
    shift
    wanted "$name" || return 0
    keep=$(keep_after "$name")
    cap=$(limits "$name" | cut -d' ' -f1)
    left=$((deadline - $(date +%s) - keep))
    [ "$left" -lt "$cap" ] && cap=$((left > 5 ? left : 5))
    limit=$((cap + ${GPU_CHECK_GRACE:-30}))
    echo "== $name ($((deadline - $(date +%s))) s left, $keep s kept for the later stages; killed after $limit s)"
    rm -f "$work/$name.killed"
    set -m # each job its own process group, so that a kill reaches all the stage started
    (
        stage_fault "$name"
        "$@"
    ) </dev/null >"$OUT/$name.log" 2>&1 &
    pid=$!
    (
        sleep "$limit"
        : >"$work/$name.killed"
        below=$(descendants "$pid")
        # the processes below first: once the stage's group is gone, run_stage goes on
        # shellcheck disable=SC2086 # a list of pids
        kill -TERM $below
        kill -TERM -- "-$pid"
        for _ in 1 2 3 4 5; do
            sleep 1
            # shellcheck disable=SC2086
            kill -0 -- "-$pid" $below 2>/dev/null || exit 0 # all gone (a zombie counts as there)
        done
        # shellcheck disable=SC2086
        kill -KILL $below
        kill -KILL -- "-$pid"
    ) </dev/null >/dev/null 2>&1 &
    dog=$!
    set +m
    wait "$pid"
    rc=$?
    [ -f "$work/$name.killed" ] || kill -- "-$dog" 2>/dev/null # a watchdog that fired finishes its kills
    wait "$dog" 2>/dev/null
    verdict=$(grep "^== $name: " "$OUT/$name.log" | tail -n 1)
    if [ -n "$verdict" ]; then
        verdict=${verdict#"== $name: "}
        results="$results| $name | ${verdict%% — *} | ${verdict#* — } |"$'\n'
        echo "== $name: $verdict"
    else
        why="ended without a verdict (exit $rc)"
        [ -f "$work/$name.killed" ] && why="killed after $limit s (its limit) without a verdict"
        why="$why; the end of its log: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ' | cut -c 1-300)"
        result "$name" FAIL "$why" >>"$OUT/$name.log"
        tail -n 1 "$OUT/$name.log"
    fi
    echo "stage $name took $((SECONDS - t0)) s" | tee -a "$OUT/$name.log"
    times="$times $name $((SECONDS - t0)) s;"
}
section() { # TITLE FILE: a section of the report when FILE has something
    [ -s "$2" ] || return 0
    printf '\n## %s\n\n' "$1"
    cat "$2"
}

start=$SECONDS
PT="" bin="" sanitizer="" gpu="" ngpu=0 keep=0 times="" wheels=""
rm -f "$OUT"/*.log "$OUT/logs.tar.gz"
run_stage setup stage_setup
# what setup found (as far as it got), for the later stages
# shellcheck source=/dev/null
[ -f "$work/setup.state" ] && . "$work/setup.state"
run_stage ops stage_ops
run_stage model stage_model
run_stage fastref stage_fastref
run_stage generate stage_generate
run_stage train stage_train
run_stage sanitizer stage_sanitizer
run_stage bench-speed stage_bench_speed
run_stage bench-longest stage_bench_longest
run_stage multi stage_multi
run_stage profile stage_profile
{
    echo "# ptrain GPU check"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ), device $DEV: ${gpu:-no GPU} ($ngpu GPU(s)); $((SECONDS - start)) s in all:${times}"
    echo
    echo "| stage | result | numbers |"
    echo "|---|---|---|"
    printf '%s' "$results"
    wanted bench-speed && section "Benchmark: speed (bench/gpu/run.sh)" "$bench/table.md"
    wanted bench-longest && section "Benchmark: the longest sequence at batch 1" "$bench/longest.md"
    wanted profile && section "Kernel profile (bench/gpu/profile.sh)" "$work/profile/profile.md"
    echo
    echo "Files: report.md, logs.tar.gz (every stage's log, the benchmark's runs), cells.jsonl, longest.jsonl,"
    echo "profile.md (tests/gpu/README.md)."
} >"$OUT/report.md"
# the device tool brings back at most 8 files: the logs travel as one archive
cp "$work/models.log" "$OUT/models.log" 2>/dev/null
wanted bench-speed && cp "$bench/cells.jsonl" "$OUT/" 2>/dev/null
wanted bench-longest && cp "$bench/longest.jsonl" "$OUT/" 2>/dev/null
[ -f "$work/profile/profile.md" ] && cp "$work/profile/profile.md" "$OUT/"
mkdir -p "$work/logs/bench"
cp "$OUT"/*.log "$work/logs/" 2>/dev/null
cp "$bench"/*.log "$bench"/*.yaml "$bench"/*.md "$bench"/*.json* "$work/logs/bench/" 2>/dev/null
[ -f "$work/profile/ncu.csv" ] && cp "$work/profile/ncu.csv" "$work/logs/"
tar -C "$work" -czf "$OUT/logs.tar.gz" logs && rm -f "$OUT"/*.log
rm -rf "$work"
cat "$OUT/report.md"
