#!/bin/sh
# test_dora.sh — use_dora (PEFT's DoRA, issue 46) from the command line on the tiny fp32 Llama, held to
# PEFT 0.21 (tests/export/dora_check.py): `ptrain train` with use_dora writes a PEFT adapter
# (use_dora, lora_magnitude_vector; no adapter.h5 nor adapter.gguf) that PEFT loads with ptrain's
# logits within 1e-5; the first step's loss and gradient norm (over A, B and the magnitudes) are
# PEFT's on the same sequence within 1e-5 (a run at a learning rate too small to move the adapter,
# so the adapter it saves is the one of its first step); a run killed (kill -9) after its step-2
# checkpoint and run again ends with the straight run's adapter bit for bit; generate reads the
# checkpoint's magnitudes; lora_model_dir continues the DoRA adapter (and refuses it as plain LoRA);
# a resume with another use_dora is refused; the memory plan counts the magnitudes. The per-element
# gradients are test_train's test_dora_match_peft. Skips, saying why, without the Python environment
# of share/scripts/test-python.sh.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
. "$PTRAIN_SRCDIR/tests/export/peft_env.sh"
peft_require "DoRA against PEFT" torch transformers peft
CHECK="$PTRAIN_SRCDIR/tests/export/dora_check.py"
logits() { # logits OUT ADAPTER
    "$P" generate --model "$base" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$1" --ids "$1.ids" \
        --no-4bit --adapter "$2" >/dev/null 2>"$tmp/gen.err" || cat "$tmp/gen.err"
}
base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
config() { # config CONFIG OUT [yaml]: 4 steps at lr 0.01 on the fp32 base, DoRA on every projection
    tiny_config "$1" "$2" "max_steps: 4
learning_rate: 0.01
warmup_steps: 0
lr_scheduler_type: constant
load_in_4bit: false
logging_steps: 1
use_dora: true
$3"
    sed -i "s|^model_name: .*|model_name: \"$base\"|" "$1"
}

# the first step against PEFT: one sequence, init_lora_weights false (B not zero: every gradient is)
text="The ship sailed at dawn, and the crew sang of the wide grey sea."
printf '{"text": "%s"}\n' "$text" >"$tmp/one.jsonl"
printf '%s' "$text" >"$tmp/one.txt"
config "$tmp/f.yaml" "$tmp/f" "init_lora_weights: false"
sed -i "s|name: .*pirate-instructions.jsonl\"|name: \"$tmp/one.jsonl\"|; s|^max_steps: 4$|max_steps: 1|;
    s|^learning_rate: 0.01$|learning_rate: 1e-30|; s|^per_device_train_batch_size: 2$|per_device_train_batch_size: 1|;
    s|^gradient_accumulation_steps: 2$|gradient_accumulation_steps: 1|" "$tmp/f.yaml"
run train "$tmp/f.yaml"
ok "a run with use_dora trains (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
ok "the final directory has the PEFT files and neither adapter.h5 nor adapter.gguf (they cannot hold magnitudes)" \
    test -f "$tmp/f/lora/adapter_model.safetensors" -a ! -e "$tmp/f/lora/adapter.h5" -a ! -e "$tmp/f/lora/adapter.gguf"
ok "the run says so" grep -q "use_dora: no adapter.h5 nor adapter.gguf" "$tmp/out"
ntrain=$(sed -n 's/^lora       r 4, alpha 8, \([0-9]*\) trainable parameters.*/\1/p' "$tmp/out")
"$P" tokenize --model "$base" "$tmp/one.txt" >"$tmp/one.ids" 2>"$tmp/tok.err" || cat "$tmp/tok.err"
loss=$(sed -n 's/.*"step": 1, .*"loss": \([-0-9.e]*\).*/\1/p' "$tmp/f/metrics.jsonl")
gn=$(sed -n 's/.*"step": 1, .*"grad_norm": \([-0-9.e]*\).*/\1/p' "$tmp/f/metrics.jsonl")
"$PY" "$CHECK" first "$base" "$tmp/f/lora" "$tmp/one.ids" "${loss:-nan}" "${gn:-nan}" 1e-5 "${ntrain:-0}" >"$tmp/first.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights\|^ *$" "$tmp/first.out" | sed 's/^/# /'
ok "the first loss and gradient norm are PEFT's within 1e-5 (A, B and the magnitudes), and the trainable parameters PEFT's count" \
    test "$rc" = 0

# training: 4 steps; PEFT loads the adapter with ptrain's logits; the merged f32 GGUF written at the end
config "$tmp/d.yaml" "$tmp/d" "save_steps: 2
huggingface_save_gguf: true
quantization_method: f32"
run train "$tmp/d.yaml"
ok "4 DoRA steps at lr 0.01 train (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
ok "adapter_config.json says use_dora and the file holds the magnitudes" sh -c \
    "grep -q '\"use_dora\": true' '$tmp/d/lora/adapter_config.json' &&
     grep -q 'lora_magnitude_vector' '$tmp/d/lora/adapter_model.safetensors'"
logits "$tmp/ld" "$tmp/d/lora"
"$PY" "$CHECK" logits "$base" "$tmp/d/lora" "$tmp/ld.ids" "$tmp/ld" 1e-5 >"$tmp/logits.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights\|^ *$" "$tmp/logits.out" | sed 's/^/# /'
ok "PEFT (use_dora) loads the trained adapter and gives ptrain's logits within 1e-5" test "$rc" = 0
"$P" generate --model "$tmp/d/lora/merged-f32.gguf" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$tmp/lg" \
    --no-4bit >/dev/null 2>&1
ok "the merged f32 GGUF written at the end of training has the trained magnitudes: the adapter's logits (1e-5)" \
    "$(dirname "$P")/tests/export/logits_cmp" "$tmp/ld" "$tmp/lg" 1e-5
logits "$tmp/lk" "$tmp/d/checkpoint-4.h5"
ok "generate reads the DoRA checkpoint (its magnitudes): the final adapter's logits" cmp "$tmp/ld" "$tmp/lk"

# kill -9 at step 3 (after the step-2 checkpoint), run again: the straight run's adapter, bit for bit
config "$tmp/k.yaml" "$tmp/k" "save_steps: 2
resume_from_checkpoint: true"
PTRAIN_TEST_KILL_STEP=3 "$P" train "$tmp/k.yaml" >"$tmp/k.out" 2>&1
rc=$?
ok "the run is killed at step 3 (exit $rc) after checkpoint-2" test "$rc" = 137 -a -f "$tmp/k/checkpoint-2.h5"
run train "$tmp/k.yaml"
ok "run again, it resumes from checkpoint-2 (exit $rc)" test "$rc" = 0
ok "resumed, it ends with the straight run's adapter (A, B and magnitudes), bit for bit" \
    cmp "$tmp/d/lora/adapter_model.safetensors" "$tmp/k/lora/adapter_model.safetensors"
ok "and logged the same losses and gradient norms after the checkpoint" sh -c \
    "grep -o '\"step\": [34], .*\"grad_norm\": [-0-9.e]*' '$tmp/d/metrics.jsonl' >'$tmp/a' &&
     grep -o '\"step\": [34], .*\"grad_norm\": [-0-9.e]*' '$tmp/k/metrics.jsonl' >'$tmp/b' && cmp '$tmp/a' '$tmp/b'"
grep -v "^use_dora" "$tmp/k.yaml" | sed 's/^max_steps: 4$/max_steps: 6/' >"$tmp/k2.yaml"
run train "$tmp/k2.yaml"
ok "resuming a DoRA checkpoint without use_dora is refused, saying why" \
    contains "$err" "was trained with use_dora true, this run has false"

# lora_model_dir: continues the DoRA adapter (its magnitudes), refuses it as plain LoRA
config "$tmp/c.yaml" "$tmp/c" "lora_model_dir: \"$tmp/d/lora\"
max_steps: 1
learning_rate: 1e-30"
sed -i '/^max_steps: 4$/d; /^learning_rate: 0.01$/d' "$tmp/c.yaml"
run train "$tmp/c.yaml"
ok "lora_model_dir continues the DoRA adapter (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
logits "$tmp/lc" "$tmp/c/lora"
"$PY" "$CHECK" logits "$base" "$tmp/d/lora" "$tmp/lc.ids" "$tmp/lc" 1e-5 >"$tmp/cont.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights\|^ *$" "$tmp/cont.out" | sed 's/^/# /'
ok "it starts from the adapter's magnitudes: after a step too small to move it, PEFT's logits of the adapter" \
    test "$rc" = 0
grep -v "^use_dora" "$tmp/c.yaml" | sed "s|output_dir: .*|output_dir: \"$tmp/c2\"|; s|final_model_dir: .*|final_model_dir: \"$tmp/c2/lora\"|" \
    >"$tmp/c2.yaml"
run train "$tmp/c2.yaml"
ok "lora_model_dir refuses to continue a DoRA adapter as plain LoRA, saying the fix" \
    contains "$err" "is a DoRA adapter (use_dora: a magnitude per adapted output row); training it on as plain LoRA"

# what is refused, with the reason
config "$tmp/x.yaml" "$tmp/x" "lora_dropout: 0.1"
run check "$tmp/x.yaml"
ok "use_dora with lora_dropout is refused, saying why" contains "$err" "DoRA trains without lora_dropout in ptrain"
config "$tmp/y.yaml" "$tmp/y" "init_lora_weights: pissa"
run check "$tmp/y.yaml"
ok "use_dora with init_lora_weights pissa is refused, saying why" contains "$err" "does not hold DoRA's magnitudes"
done_testing
