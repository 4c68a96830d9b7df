#!/bin/sh
# test_emu_cli.sh — the `ptrain` command itself on the CUDA backend, run by the CPU emulator
# (tests/emu/ptrain_emu: src/cmd/main.c linked with the emulated cuda/*.cu, docs/cuda-backend.md):
# greedy generation with `--device cuda` gives the CPU's text on the tiny bitsandbytes Llama and
# runs on the tiny Qwen2 and Gemma 2; one training step with `device: cuda` prints the memory plan
# on cuda and the pool's peak (within the plan x 1.10 + 256 MiB that tests/gpu/run.sh demands),
# and its loss is the CPU's within 1e-2; a device smaller than the plan is refused before the first
# step, with the numbers; use_gradient_checkpointing "unsloth" (the default: the layer inputs in
# pinned host memory, copied on a stream of their own) trains the same adapter as true, to the bit;
# `ptrain inspect --device cuda` prints the same memory plan (device and host lines) as these runs;
# use_dora trains on cuda with the CPU's step-2 loss within 1e-2.
# Skips, saying why, where the emulator was not built.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
E=$(dirname "$P")/tests/emu/ptrain_emu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$E" ]; then
    for name in "generate" "train"; do skip_test "$name" "no tests/emu/ptrain_emu (a build without CUDA or cmocka)"; done
    done_testing
    exit $?
fi

gen() { # DEVICE MODEL
    "$1" generate --model "$PTRAIN_SRCDIR/$3" --prompt "The quick brown fox" --temperature 0 --max-new-tokens 8 \
        --device "$2" --threads 1 2>"$tmp/gen.err"
}
gen "$P" cpu tests/data/hf/tiny-llama-bnb4 >"$tmp/cpu.txt"
gen "$E" cuda tests/data/hf/tiny-llama-bnb4 >"$tmp/cuda.txt"
ok "generate --device cuda: the CPU's greedy text on the tiny Llama (bnb NF4)" \
    test -s "$tmp/cuda.txt" -a "$(od -c "$tmp/cuda.txt")" = "$(od -c "$tmp/cpu.txt")"
for m in tests/data/qwen2/hf-bnb4 tests/data/gemma2/hf-bnb4; do
    gen "$E" cuda "$m" >"$tmp/out.txt"
    ok "generate --device cuda runs on $m" test $? = 0 -a -s "$tmp/out.txt"
done

for dev in cpu cuda; do
    tiny_config "$tmp/$dev.yaml" "$tmp/$dev" "max_steps: 1
logging_steps: 1
device: $dev"
done
"$P" train "$tmp/cpu.yaml" >"$tmp/cpu.log" 2>&1
"$E" train "$tmp/cuda.yaml" >"$tmp/cuda.log" 2>&1
ok "train with device: cuda: exit 0, an adapter written" test $? = 0 -a -s "$tmp/cuda/lora/adapter.h5"
plan=$(sed -n 's/^memory plan: \([0-9]*\) bytes on cuda.*/\1/p' "$tmp/cuda.log")
peak=$(sed -n 's/^peak device memory: \([0-9]*\) bytes.*/\1/p' "$tmp/cuda.log")
ok "the memory plan is printed for cuda (${plan:-none} bytes) and the peak (${peak:-none} bytes) stays within plan x 1.10 + 256 MiB" \
    test -n "$plan" -a -n "$peak" -a "${peak:-0}" -le "$(((${plan:-0} * 11) / 10 + 268435456))"
loss() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1" | head -n 1; }
lc=$(loss "$tmp/cpu/metrics.jsonl") lg=$(loss "$tmp/cuda/metrics.jsonl")
ok "step 1's loss on cuda ($lg) is the CPU's ($lc) within 1e-2" \
    awk -v a="$lg" -v b="$lc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-2 * b) }'
[ -s "$tmp/cuda/lora/adapter.h5" ] || sed 's/^/# /' "$tmp/cuda.log" | tail -n 15
ok "use_gradient_checkpointing \"unsloth\" (the default) offloads the layer inputs: the plan says how much host memory" \
    grep -q '^memory plan: [0-9]* bytes of pinned host memory for the layer inputs' "$tmp/cuda.log"
tiny_config "$tmp/keep.yaml" "$tmp/keep" "max_steps: 1
logging_steps: 1
use_gradient_checkpointing: true
device: cuda"
"$E" train "$tmp/keep.yaml" >"$tmp/keep.log" 2>&1
ok "... and trains the adapter use_gradient_checkpointing: true trains, to the bit" \
    sh -c "h5diff -d 0 '$tmp/keep/lora/adapter.h5' '$tmp/cuda/lora/adapter.h5' >/dev/null 2>&1 && \
! grep -q 'pinned host memory' '$tmp/keep.log'"

# modules_to_save (issue 46) on the CUDA path: the LM head's gradient from the fp32 logits' gradient and
# the bf16 states, the embedding's from bf16 rows (embed_bwd); one micro-batch, step 2's loss (after
# the modules moved) is the CPU's
for dev in cpu cuda; do
    tiny_config "$tmp/m$dev.yaml" "$tmp/m$dev" "max_steps: 2
logging_steps: 1
warmup_steps: 0
learning_rate: 0.01
modules_to_save: [embed_tokens, lm_head]
device: $dev"
    sed -i 's/^gradient_accumulation_steps: 2$/gradient_accumulation_steps: 1/' "$tmp/m$dev.yaml"
done
"$P" train "$tmp/mcpu.yaml" >"$tmp/mcpu.log" 2>&1
"$E" train "$tmp/mcuda.yaml" >"$tmp/mcuda.log" 2>&1
ok "train with modules_to_save on device: cuda: exit 0, the modules in the PEFT files" test $? = 0 -a \
    -n "$(grep -l 'base_model.model.lm_head.weight' "$tmp/mcuda/lora/adapter_model.safetensors" 2>/dev/null)"
loss2() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1" | sed -n 2p; }
lc=$(loss2 "$tmp/mcpu/metrics.jsonl") lg=$(loss2 "$tmp/mcuda/metrics.jsonl")
ok "modules_to_save: step 2's loss on cuda ($lg) is the CPU's ($lc) within 1e-2" \
    awk -v a="$lg" -v b="$lc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-2 * b) }'

# use_dora (issue 46) on the CUDA path: dora_norm, dora_scale and dora_mag_bwd in training, AdamW over the
# magnitudes; step 2's loss (after A, B and m moved) is the CPU's, and the peak within the plan
for dev in cpu cuda; do
    sed "s|/m$dev|/d$dev|g; s|^modules_to_save: .*|use_dora: true|" "$tmp/m$dev.yaml" >"$tmp/d$dev.yaml"
done
"$P" train "$tmp/dcpu.yaml" >"$tmp/dcpu.log" 2>&1
"$E" train "$tmp/dcuda.yaml" >"$tmp/dcuda.log" 2>&1
ok "train with use_dora on device: cuda: exit 0, the magnitudes in the PEFT files" test $? = 0 -a \
    -n "$(grep -l 'lora_magnitude_vector' "$tmp/dcuda/lora/adapter_model.safetensors" 2>/dev/null)"
lc=$(loss2 "$tmp/dcpu/metrics.jsonl") lg=$(loss2 "$tmp/dcuda/metrics.jsonl")
ok "use_dora: step 2's loss on cuda ($lg) is the CPU's ($lc) within 1e-2" \
    awk -v a="$lg" -v b="$lc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-2 * b) }'
plan=$(sed -n 's/^memory plan: \([0-9]*\) bytes on cuda.*/\1/p' "$tmp/dcuda.log")
peak=$(sed -n 's/^peak device memory: \([0-9]*\) bytes.*/\1/p' "$tmp/dcuda.log")
ok "use_dora: the peak (${peak:-none} bytes) stays within the plan (${plan:-none} bytes) x 1.10 + 256 MiB" \
    test -n "$plan" -a -n "$peak" -a "${peak:-0}" -le "$(((${plan:-0} * 11) / 10 + 268435456))"

# inspect's plan for cuda, from the config alone, is the one the emulated runs printed
for ck in unsloth true; do
    log=$tmp/cuda.log
    [ $ck = true ] && log=$tmp/keep.log
    "$P" inspect "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4" --device cuda --max-seq-length 64 --batch-size 2 --lora-r 4 \
        --gradient-checkpointing $ck | grep '^memory plan:' >"$tmp/inspect.plan"
    ok "inspect --device cuda --gradient-checkpointing $ck: the plan the emulated CUDA run printed" \
        test -s "$tmp/inspect.plan" -a "$(grep '^memory plan:' "$log")" = "$(cat "$tmp/inspect.plan")"
done

# a device too small for the plan: one clear error with the numbers, before the first step
tiny_config "$tmp/small.yaml" "$tmp/small" "max_steps: 1
device: cuda"
EMU_DEVICE_BYTES=20000000 "$E" train "$tmp/small.yaml" >"$tmp/small.log" 2>&1
rc=$?
ok "a GPU too small for the memory plan: exit $rc, one error naming the sizes and what to lower, no step run" \
    sh -c "[ $rc != 0 ] && grep -q 'more on GPU 0.*MiB are free after.*lower per_device_train_batch_size' '$tmp/small.log' &&
           ! grep -q '^step ' '$tmp/small.log'"
grep 'error' "$tmp/small.log" | sed 's/^/# /'
done_testing
