#!/bin/sh
# test_report.sh — the GPU benchmark's verdicts, without a GPU: bench/gpu/report.py turns cells and
# longest-sequence rows into issue 26's `targets` lines (2x the peer at 0.5x its memory in the same
# setting, 25% / 35% MFU of 989 TFLOP/s, 4x the peer's longest sequence, n/a for cells that did not
# run, "unverified" for a plan's length no step ran at); tests/gpu/run.sh's profile_gaps compares
# the profile's kernel time with the benchmark's step; bench/gpu/fusion_rate.py runs (tiny sizes on
# the CPU, with the test Python environment's torch; skipped, saying why, without it); run.sh's
# stages are independent: one that hangs, one that dies of an unset variable and one that exits
# each get a FAIL row, and the stage after them still runs and the report is written (--cpu, the
# faults of GPU_CHECK_FAULT, about 15 s).
. "$PTRAIN_SRCDIR/tests/tap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report() { python3 "$PTRAIN_SRCDIR/bench/gpu/report.py" "$@"; }

mkdir -p "$tmp/gemma2-2b" "$tmp/smollm2-135m"
cat >"$tmp/gemma2-2b/config.json" <<'EOF'
{"hidden_size": 2304, "intermediate_size": 9216, "head_dim": 256, "num_attention_heads": 8,
 "num_key_value_heads": 4, "num_hidden_layers": 26, "vocab_size": 256000, "sliding_window": 4096,
 "model_type": "gemma2"}
EOF
cat >"$tmp/smollm2-135m/config.json" <<'EOF'
{"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3,
 "num_hidden_layers": 30, "vocab_size": 49152, "model_type": "llama"}
EOF
echo '{"gpu": "test", "n": 8192, "bf16_tflops": 800}' >"$tmp/gemm.json"
# gemma2-2b 2048 x 1: unsloth 2.4x the peer at 0.375x its memory, 11.24 GFLOP/token x 30000 tok/s = 34% of 989;
# false: 28000 tok/s = 31.8% (under 35%); smollm2: 1.67x; gemma2-2b 2048 x 4 skipped for time
cat >"$tmp/cells.jsonl" <<'EOF'
{"side": "ptrain", "shape": "gemma2-2b", "seq": 2048, "batch": 1, "mode": "unsloth", "status": "ok", "tokens_per_s": 30000, "peak_bytes": 3000000000, "step_s": 0.068}
{"side": "ptrain", "shape": "gemma2-2b", "seq": 2048, "batch": 1, "mode": "true", "status": "ok", "tokens_per_s": 26000, "peak_bytes": 2500000000, "step_s": 0.079}
{"side": "peer", "shape": "gemma2-2b", "seq": 2048, "batch": 1, "mode": "ckpt-on", "status": "ok", "tokens_per_s": 12500, "peak_bytes": 8000000000, "step_s": 0.16, "base": "nf4", "liger": "yes", "attn": "sdpa"}
{"side": "ptrain", "shape": "gemma2-2b", "seq": 2048, "batch": 1, "mode": "false", "status": "ok", "tokens_per_s": 28000, "peak_bytes": 9000000000, "step_s": 0.073}
{"side": "ptrain", "shape": "smollm2-135m", "seq": 2048, "batch": 1, "mode": "unsloth", "status": "ok", "tokens_per_s": 50000, "peak_bytes": 900000000, "step_s": 0.04}
{"side": "peer", "shape": "smollm2-135m", "seq": 2048, "batch": 1, "mode": "ckpt-on", "status": "ok", "tokens_per_s": 30000, "peak_bytes": 2000000000, "step_s": 0.07, "base": "nf4", "liger": "yes", "attn": "sdpa"}
{"side": "ptrain", "shape": "gemma2-2b", "seq": 2048, "batch": 4, "mode": "unsloth", "status": "skipped", "reason": "no time"}
EOF
out=$(report table "$tmp")
t1=$(echo "$out" | grep '^targets gemma2-2b 2048x1:')
ok "checkpointing on: 2x the peer at half its memory, from the pair that meets it" \
    contains "$t1" "tokens/s >= 2x peer at <= 0.5x its memory yes (2.40x at 0.38x memory)"
ok "checkpointing on: MFU over the datasheet's 989 TFLOP/s, the best of true and unsloth" \
    contains "$t1" "checkpointing on: MFU >= 25% of 989.4 yes (34.1%)"
ok "checkpointing off: 35% not met" contains "$t1" "checkpointing off: MFU >= 35% of 989.4 NO (31.8%)"
ok "SmolLM2: 2x the peer not met" contains "$out" "targets smollm2-135m 2048x1: same setting: tokens/s >= 2x peer NO (1.67x)"
t4=$(echo "$out" | grep '^targets gemma2-2b 2048x4:')
ok "a target whose cells were skipped reads n/a" contains "$t4" "MFU >= 25% of 989.4 n/a"

cat >"$tmp/longest.jsonl" <<'EOF'
{"side": "ptrain", "shape": "gemma2-2b", "mode": "unsloth", "longest_seq": 262144, "step": "ran: 1 step, exit 0"}
{"side": "ptrain", "shape": "gemma2-2b", "mode": "false", "longest_seq": 65536, "step": "not run"}
{"side": "peer", "shape": "gemma2-2b", "mode": "ckpt-on", "longest_seq": 32768, "step": "ran"}
{"side": "ptrain", "shape": "llama3.1-8b", "mode": "unsloth", "longest_seq": 131072, "step": "failed: out of memory"}
{"side": "peer", "shape": "llama3.1-8b", "mode": "ckpt-on", "longest_seq": 16384, "step": "ran"}
EOF
out=$(report longest "$tmp")
ok "longest: 8x the peer with a step run at it" contains "$out" "targets longest gemma2-2b: >= 4x the peer's yes"
ok "longest: the plan's length without a step at it is unverified" \
    contains "$out" "targets longest llama3.1-8b: >= 4x the peer's unverified"

echo "26000 kernel launches in one step, 50.0 ms of kernel time in all" >"$tmp/profile.md"
eval "$(sed -n '/^profile_gaps() {/,/^}/p' "$PTRAIN_SRCDIR/tests/gpu/run.sh")"
gaps=$(PYTHON=python3 bench=$tmp profile_gaps "$tmp/profile.md")
ok "profile: the time outside kernels against the benchmark's step" \
    contains "$gaps" "kernel time 50.0 ms vs the benchmark's step 68.0 ms: outside kernels at least 18.0 ms (26.5%)"

# run.sh --cpu with ops hanging (killed at its limit: 100 s less the 90 kept for the later stages'
# minimums, + 2), model dying of an unset variable, fastref exiting; train runs for real
if command -v bash >/dev/null 2>&1 && [ -x "${PTRAIN:-}" ]; then
    t0=$(date +%s)
    env OUT="$tmp/run" STAGES="ops model fastref train" GPU_CHECK_FAULT="ops:hang model:unset fastref:exit" \
        GPU_CHECK_SECONDS=100 GPU_CHECK_GRACE=2 PT_GPU_BUNDLE=/nonexistent PT_GPU_WHEELS=/nonexistent \
        PT_GPU_BUILD="$(dirname "$PTRAIN")" PT_BENCH_DIR="$tmp/bench" PYTHON=true \
        bash "$PTRAIN_SRCDIR/tests/gpu/run.sh" --cpu >"$tmp/run.out" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    rep=$(cat "$tmp/run/report.md" 2>/dev/null)
    ok "run.sh: the report is written after a hung, a crashed and an exited stage (exit $rc, $secs s)" \
        test "$rc" = 0 -a -n "$rep"
    ok "run.sh: the hung stage is killed at its limit, FAIL" contains "$rep" "| ops | FAIL | killed after"
    hung=$(tar -xzOf "$tmp/run/logs.tar.gz" logs/ops.log 2>/dev/null |
        sed -n 's/^GPU_CHECK_FAULT: hanging in pid \([0-9]*\)$/\1/p' | head -n 1)
    # gone, or a zombie (killed, its parent gone, not yet reaped by whoever adopted it)
    state=$(cut -d' ' -f3 "/proc/${hung:-0}/stat" 2>/dev/null)
    ok "run.sh: nothing the hung stage started is left (its timeout, pid ${hung:-?}${state:+, state $state})" \
        test -n "$hung" -a "${state:-Z}" = Z
    ok "run.sh: the stage with an unset variable ends alone, FAIL" contains "$rep" "| model | FAIL | ended without a verdict"
    ok "run.sh: the stage that exits ends alone, FAIL" contains "$rep" "| fastref | FAIL | ended without a verdict (exit 3)"
    ok "run.sh: the stage after them runs: train PASS" contains "$rep" "| train | PASS |"
    ok "run.sh: every stage's log in logs.tar.gz" \
        test "$(tar -tzf "$tmp/run/logs.tar.gz" 2>/dev/null | grep -c 'logs/\(setup\|ops\|model\|fastref\|train\)\.log')" = 5
    if [ -n "$rep" ]; then echo "$rep" | sed 's/^/# /'; else sed 's/^/# /' "$tmp/run.out" | tail -n 30; fi
else
    for name in "the report is written" "the hung stage" "nothing left" "the unset variable" "the exit" \
        "the stage after" "the logs"; do
        skip_test "run.sh: $name" "no bash or no PTRAIN"
    done
fi

py=${PTRAIN_PYTHON:-}
if [ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null; then
    "$py" "$PTRAIN_SRCDIR/bench/gpu/fusion_rate.py" 16 >"$tmp/fusion.jsonl" 2>"$tmp/fusion.err"
    expect_eq "fusion_rate.py: one line per shape and group (2 x 7)" 14 "$(grep -c '"saved_ms_per_step"' "$tmp/fusion.jsonl")"
    out=$(report table "$tmp")
    ok "report: the fusion savings beside the step" contains "$out" "GEMM fusions not built"
else
    skip_test "fusion_rate.py: one line per shape and group (2 x 7)" "no PTRAIN_PYTHON with torch (share/scripts/test-python.sh)"
    skip_test "report: the fusion savings beside the step" "no PTRAIN_PYTHON with torch"
fi
done_testing
