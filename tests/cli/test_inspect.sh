#!/bin/sh
# test_inspect.sh — `ptrain inspect` on a GGUF file, a Hugging Face directory (bitsandbytes 4-bit),
# a sharded one, one whose chat template is in chat_template.jinja (transformers 5) and an HF id in a
# committed cache (tests/data/hfcache, via HF_HUB_CACHE); its usage
# errors and a cache miss naming the download command; and `ptrain generate` from a Hugging Face
# directory and from an HF id (a tiny random model: the test is that it runs, greedily and
# reproducibly, not what it says).
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
D=$PTRAIN_SRCDIR/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HF_HUB_CACHE=$D/hfcache
export HF_HUB_CACHE
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

run inspect --help
ok "inspect --help shows its usage" test "$rc" = 0 -a -n "$(echo "$out" | grep '^Usage: ptrain inspect')"
run --help
ok "ptrain --help lists inspect" contains "$out" "ptrain inspect MODEL"
run inspect
expect_eq "inspect without a model: exit 2" 2 "$rc"
ok "inspect without a model: says so" contains "$err" "no model given"
run inspect "$D/llama/tiny-mha-f32.gguf" --batch-size zero
expect_eq "inspect with a bad number: exit 2" 2 "$rc"
ok "inspect with a bad number: names the option" contains "$err" "--batch-size expects an integer from 1 to"

run inspect "$D/llama/tiny-gqa-q4_0.gguf"
expect_eq "inspect a GGUF file: exit 0" 0 "$rc"
ok "inspect a GGUF file: format" contains "$out" "GGUF version 3"
ok "inspect a GGUF file: sizes" contains "$out" "3 layers, hidden 64, ffn 96"
ok "inspect a GGUF file: heads" contains "$out" "4 (key/value heads 2, head size 16)"
ok "inspect a GGUF file: tensor types" contains "$out" "q4_0: 22, f32: 8"
ok "inspect a GGUF file: memory per rank" contains "$out" "training per rank  about"

run inspect "$D/hf/tiny-llama-bnb4"
expect_eq "inspect an HF bnb-4bit directory: exit 0" 0 "$rc"
ok "inspect an HF directory: architecture" contains "$out" "llama (model_type llama, LlamaForCausalLM)"
ok "inspect an HF directory: vocabulary and tying" contains "$out" "320 tokens, context 256, separate lm_head"
ok "inspect an HF directory: rope scaling" contains "$out" "theta 10000, linear scaling (factor 2)"
ok "inspect an HF directory: tensor types" contains "$out" "BF16: 7, U8: 42, F32: 42"
ok "inspect an HF directory: bitsandbytes" contains "$out" "bitsandbytes NF4 with double quantization, pre-quantized"
ok "inspect an HF directory: tokenizer" contains "$out" "byte-level BPE (tokenizer.json), 300 tokens"
ok "inspect an HF directory: chat template" contains "$out" "chatml (recognised from the model's template)"
run inspect "$D/hf/tiny-llama-f32" --no-4bit
ok "inspect a sharded directory (got: $(echo "$out" | grep ^format))" contains "$out" "3 files (sharded"
ok "inspect --no-4bit: weights as stored" contains "$out" "401.2 KB (load_in_4bit off)"
mkdir "$tmp/jinja" && cp "$D/qwen2/hf/"* "$tmp/jinja/"
run inspect "$tmp/jinja"
ok "inspect a directory without a chat template: says so" contains "$out" "none in the model (set chat_template)"
printf '%s\n' "{% for m in messages %}<|im_start|>{{ m.role }}{{ '\\n' }}{{ m.content }}<|im_end|>{% endfor %}" \
    >"$tmp/jinja/chat_template.jinja"
run inspect "$tmp/jinja"
ok "inspect a directory with chat_template.jinja: the template from it" contains "$out" "chatml (recognised from the model's template)"
run inspect ptrain-test/tiny-llama
expect_eq "inspect an HF id in the cache: exit 0" 0 "$rc"
ok "inspect an HF id: resolved to the snapshot" contains "$out" "models--ptrain-test--tiny-llama/snapshots/"
run inspect ptrain-test/absent
expect_eq "inspect an HF id not in the cache: exit 1" 1 "$rc"
ok "inspect a cache miss: says how to download" contains "$err" "huggingface-cli download ptrain-test/absent"

run generate --model "$D/hf/tiny-llama-bnb4" --chat --prompt "What is the capital of France?" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF bnb-4bit directory: exit 0 ($err)" 0 "$rc"
first=$out
run generate --model "$D/hf/tiny-llama-bnb4" --chat --prompt "What is the capital of France?" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF directory: greedy output is reproducible" "$first" "$out"
run generate --model ptrain-test/tiny-llama --prompt "The quick brown fox" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF id: exit 0 ($err)" 0 "$rc"
ok "generate from an HF id: reports its speed" contains "$err" "tokens in"
run generate --model "$D/hf/tiny-llama-f32" --prompt "hi" --threads 1
expect_eq "generate from a directory without tokenizer.json: exit 1" 1 "$rc"
ok "generate without tokenizer.json: says what is missing" contains "$err" "no tokenizer.json in the model directory"
done_testing
