#!/bin/bash
# run.sh — the GPU check: one call of the device tool runs every stage below within eight
# minutes, each under its own timeout, each going on after a failed one, and ends by printing
# $OUT/report.md (PASS/FAIL/SKIP per stage, with its numbers). Logs: $OUT/<stage>.log.
#   setup      the bundle (.gpu-bundle/ptrain-gpu.tar.xz, share/scripts/gpu-bundle.sh) unpacked and
#              wrapped (tests/gpu/bundle-env.sh), or build/ if there is no bundle; nvidia-smi, the
#              GPU, driver, OS, glibc, torch; starts writing the benchmark's random models
#   ops        tests/unit/test_cuda_mma: the tensor-core primitives (mma, ldmatrix, cp.async) against
#              the PTX ISA's layouts; tests/unit/test_cuda_ops: every CUDA op against the CPU backend
#              (attention on the tensor-core and on the reference kernels)
#   model      tests/unit/test_cuda_model: whole-model logits, CUDA vs CPU; tests/gpu/train_parity.sh:
#              30 training steps, the loss curves of CUDA and CPU
#   generate   `ptrain generate` greedy on the tiny test models (and SmolLM2 if models/ has it),
#              --device cuda against --device cpu: the same text
#   train      `ptrain train` on tests/tiny.sh's config for 10 steps on cuda: finite losses, and
#              peak device memory <= memory plan x 1.10 + 256 MiB
#   sanitizer  compute-sanitizer memcheck (2-step train, generate, test_cuda_ops), racecheck (1 step)
#   bench      bench/gpu/run.sh: ptrain vs transformers + PEFT, tokens/s, memory, MFU
# Usage, from the repository root: bash tests/gpu/run.sh [--cpu]
# --cpu: a dry run on a machine without a GPU: cpu wherever cuda would be (so the comparisons are
# cpu against cpu), tiny benchmark shapes; PYTHON names a python with torch, transformers and peft.
# Environment: OUT (default ./gpu-out), PT_GPU_BUNDLE (default .gpu-bundle/ptrain-gpu.tar.xz),
# GPU_CHECK_SECONDS (480: when the report must be written), STAGES (the stages to run, default all;
# setup always runs: STAGES="setup ops" reruns the op check alone).
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
export PTRAIN_SRCDIR=$root PTRAIN_MODELS=$root/models PYTHONUNBUFFERED=1
# a dry run: the CUDA tests' "GPU" side on a CPU
[ "$DEV" = cpu ] && export PTRAIN_TEST_CUDA_OPS_DEVICE=cpu PTRAIN_PARITY_DEVICE=cpu
results=""

# budget CAP KEEP: CAP seconds, or fewer so that KEEP seconds are left for the later stages
budget() {
    local left=$((deadline - $(date +%s) - $2))
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
stage_setup() {
    echo "device $DEV; started $(date -u); deadline in $((deadline - $(date +%s))) s"
    gpu="none"
    if command -v nvidia-smi >/dev/null; then
        timeout 30 nvidia-smi
        gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)
    fi
    echo "gpu: $gpu"
    os=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    echo "os: $os; glibc $glibc; nvcc: $(nvcc --version 2>/dev/null | tail -n 1)"
    timeout 60 "$PYTHON" -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'
    sanitizer=$(command -v compute-sanitizer)
    for f in /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer; do
        [ -z "$sanitizer" ] && [ -x "$f" ] && sanitizer=$f
    done
    echo "compute-sanitizer: ${sanitizer:-not found}"
    bundle=${PT_GPU_BUNDLE:-$root/.gpu-bundle/ptrain-gpu.tar.xz}
    bin=""
    mode="build/"
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
    elif [ -x build/ptrain ]; then
        bin=$work/bin
        mkdir -p "$bin"
        for p in build/ptrain build/tests/unit/test_cuda_*; do [ -x "$p" ] && ln -s "$root/$p" "$bin/"; done
    else
        echo "no bundle ($bundle) and no build/: make one with share/scripts/gpu-bundle.sh and carry .gpu-bundle"
    fi
    PT=$bin/ptrain
    # the benchmark's models, written while the tests run (config.json last: bench/gpu/run.sh waits)
    if [ "$DEV" = cuda ]; then
        shapes="smollm2-135m gemma2-2b"
    else
        shapes="tiny tiny-gemma2"
    fi
    wanted bench && (
        first=1
        for s in $shapes; do
            ds=()
            [ $first = 1 ] && ds=(--dataset "$work/bench/text.jsonl" --rows 64 --dataset-tokens 2048)
            [ "$DEV" = cpu ] && ds=(--dataset "$work/bench/text.jsonl" --rows 8 --dataset-tokens 256)
            timeout 200 "$PYTHON" bench/gpu/make_random_model.py "$s" "$work/bench/$s" --device "$DEV" "${ds[@]}"
            first=0
        done
    ) >"$work/models.log" 2>&1 &
    models_pid=$!
    if [ -n "$bin" ] && "$PT" --version | grep -q "backends:.*$DEV"; then
        result setup PASS "$gpu; $os, glibc $glibc; binaries from $mode"
    else
        result setup FAIL "$gpu; $os, glibc $glibc; no working ptrain with the $DEV backend (see setup.log)"
        PT=""
    fi
}

# ---- a cmocka program: ops, model ----
cmocka_run() { # PROGRAM CAP KEEP: runs $bin/PROGRAM (TAP); sets cm_rc and cm_nums
    local prog=${bin:+$bin/$1} secs t0=$SECONDS
    if [ -z "$prog" ] || [ ! -x "$prog" ]; then
        cm_rc=skip cm_nums="$1 is not in the bundle (not built?)"
        return
    fi
    secs=$(budget "$2" "$3")
    echo "--- $1 (limit $secs s)"
    # a random model in SmolLM2-135M's shape, for tests that want one (the real one cannot travel)
    [ -f "$work/bench/smollm2-135m/config.json" ] && export PTRAIN_RANDOM_SMOLLM2=$work/bench/smollm2-135m
    CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 5 "$secs" "$prog" | tee "$work/$1.tap"
    cm_rc=${PIPESTATUS[0]}
    cm_nums="$1: $(tap_counts "$work/$1.tap"), exit $cm_rc$([ "$cm_rc" = 124 ] && echo " (timeout)"), $((SECONDS - t0)) s"
}
stage_ops() {
    [ -n "$PT" ] || { result ops SKIP "no ptrain"; return; }
    local mma_rc mma_nums
    cmocka_run test_cuda_mma 20 350 # the tensor-core primitives against the PTX ISA's layouts (TAP)
    mma_rc=$cm_rc mma_nums=$cm_nums
    cmocka_run test_cuda_ops 60 330
    [ "$cm_rc" = 0 ] && [ "$mma_rc" != 0 ] && [ "$mma_rc" != skip ] && cm_rc=$mma_rc
    cm_nums="$mma_nums; $cm_nums"
    case $cm_rc in skip) result ops SKIP "$cm_nums" ;; 0) result ops PASS "$cm_nums" ;; *) result ops FAIL "$cm_nums" ;; esac
}
# test_cuda_model, then tests/gpu/train_parity.sh (30 steps, cuda against cpu, loss curves)
stage_model() {
    [ -n "$PT" ] || { result model SKIP "no ptrain"; return; }
    local ok=yes nums parity rc i
    # test_smollm2 wants the random SmolLM2-shaped model that setup is writing: up to 60 s for it
    for i in $(seq 60); do
        [ -f "$work/bench/smollm2-135m/config.json" ] || [ "$DEV" = cpu ] || [ -z "$models_pid" ] ||
            ! kill -0 "$models_pid" 2>/dev/null && break
        sleep 1
    done
    cmocka_run test_cuda_model 90 300
    nums=$cm_nums
    case $cm_rc in 0 | skip) ;; *) ok=no ;; esac
    if [ -f tests/gpu/train_parity.sh ]; then
        echo "--- tests/gpu/train_parity.sh"
        timeout -k 5 "$(budget 90 270)" sh tests/gpu/train_parity.sh "$PT" "$work/parity" | tee "$work/parity.out"
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
            secs=$(budget 20 250)
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
wait_models() { # the random models' writer, started by setup
    [ -n "$models_pid" ] || return 0
    wait "$models_pid"
    echo "random models written: exit $?"
    models_pid=""
}
stage_train() {
    [ -n "$PT" ] || { result train SKIP "no ptrain"; return; }
    wait_models # the models' writer holds GPU memory that a device-wide peak would count
    . tests/tiny.sh
    tiny_config "$work/train.yaml" "$work/train" "device: $DEV
max_steps: 10
logging_steps: 1
warmup_steps: 0
learning_rate: 1e-3
optim: adamw_torch"
    timeout -k 5 "$(budget 40 200)" "$PT" train "$work/train.yaml" 2>&1 | tee "$work/train.log"
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
sanitize() { # NAME TOOL CAP KEEP CMD...: one compute-sanitizer run; appends to $san
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
    sanitize "train 2 steps" memcheck 60 190 "$PT" train "$work/san.yaml"
    sanitize "generate 8 tokens" memcheck 40 170 "$PT" generate --model tests/data/gemma2/hf-bnb4 --prompt "Hi there" \
        --temperature 0 --max-new-tokens 8 --device "$DEV"
    sanitize "train 1 step" racecheck 60 160 "$PT" train "$work/race.yaml"
    [ -x "$bin/test_cuda_ops" ] && sanitize test_cuda_ops memcheck 90 160 "$bin/test_cuda_ops"
    san=${san# }
    result sanitizer "$([ $san_ok = yes ] && echo PASS || echo FAIL)" "${san%;}"
}

# ---- bench ----
stage_bench() {
    [ -n "$PT" ] || { result bench SKIP "no ptrain"; return; }
    wait_models
    cat "$work/models.log"
    local env=(PTRAIN="$PT" DEVICE="$DEV" DEADLINE=$((deadline - 5)) PYTHON="$PYTHON")
    [ "$DEV" = cpu ] && env+=(SHAPES="tiny tiny-gemma2" STEPS=2 WARMUP=1 SEQ=256)
    env "${env[@]}" bash bench/gpu/run.sh "$work/bench"
    bench_table=$(sed -n '/^| shape/,$p' "$work/bench/table.md" 2>/dev/null)
    local targets
    targets=$(grep '^targets' "$work/bench/table.md" 2>/dev/null | tr '\n' ';')
    if [ -z "$bench_table" ]; then
        result bench FAIL "no table (see bench.log)"
    elif grep -q 'n/a\|NO' <<<"$targets"; then
        result bench MISS "${targets%;}"
    else
        result bench PASS "${targets%;}"
    fi
}

wanted() { case " setup ${STAGES:-ops model generate train sanitizer bench} " in *" $1 "*) return 0 ;; esac; return 1; }
run_stage() { # NAME FUNCTION ARGS...: its output to $OUT/NAME.log, a FAIL row if it gave no verdict
    local name=$1 t0=$SECONDS
    shift
    wanted "$name" || return 0
    echo "== $name ($((deadline - $(date +%s))) s left)"
    "$@" >"$OUT/$name.log" 2>&1
    grep -q "^== $name:" "$OUT/$name.log" || result "$name" FAIL "ended without a verdict" >>"$OUT/$name.log"
    grep "^== $name:" "$OUT/$name.log" | tail -n 1
    echo "stage $name took $((SECONDS - t0)) s" >>"$OUT/$name.log"
}
start=$SECONDS
bench_table=""
PT="" bin="" sanitizer="" models_pid="" gpu=""
run_stage setup stage_setup
run_stage ops stage_ops
run_stage model stage_model
run_stage generate stage_generate
run_stage train stage_train
run_stage sanitizer stage_sanitizer
run_stage bench stage_bench
{
    echo "# ptrain GPU check"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ), device $DEV: ${gpu:-no GPU}; $((SECONDS - start)) s in all"
    echo
    echo "| stage | result | numbers |"
    echo "|---|---|---|"
    printf '%s' "$results"
    if [ -n "$bench_table" ]; then
        echo
        echo "## Benchmark (bench/gpu/run.sh)"
        echo
        echo "$bench_table"
    fi
    echo
    echo "Logs: setup.log ops.log model.log generate.log train.log sanitizer.log bench.log (tests/gpu/README.md)."
} >"$OUT/report.md"
rm -rf "$work"
cat "$OUT/report.md"
