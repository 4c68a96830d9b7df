#!/bin/sh
# test_real.sh — ptrain's readers over the real files of tests/data/real (config.json,
# generation_config.json, tokenizer_config.json and special_tokens_map.json as published or as users
# saved them; where each comes from is in tests/data/real/SOURCES.md), and the peer's example configs
# through `ptrain check`.
# - Every supported model directory: `ptrain inspect DIR` (config.json only, no weights) exits 0 with
#   nothing on stderr and prints the architecture, sizes, heads, vocabulary, context, rope and
#   quantization the config gives (the expected values below are read off each config.json), the
#   bos/eos and chat template of tokenizer_config.json, and generation_config.json's eos ids.
# - The directories that hold tokenizer files only are read beside the config.json of the same
#   model family (inspect needs a config.json), as is Mixtral's, whose own config stops at the
#   architecture.
# - The weight memory estimated from config.json alone equals what inspect measures from the
#   weights of the committed tiny models (tests/data/hf, qwen2, gemma2, bitsandbytes ones too).
# - Unsupported architectures (Gemma 3's multimodal model, Mixtral): exit 1 with exactly one error line naming
#   the model_type, the class and the supported families.
# - tests/data/real/peer/*.yaml (the blocks of the peer's multi-GPU page): `check` exits 0, prints
#   nothing on stderr, and shows every key the file sets in its table.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
R=$PTRAIN_SRCDIR/tests/data/real
D=$PTRAIN_SRCDIR/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # run ARGS...: sets rc, out, err
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}
field() { # field LABEL: the value of inspect's line LABEL
    printf '%s\n' "$out" | sed -n "s/^$1  *//p"
}

# --- supported models: DIR|architecture|sizes|attention heads|vocabulary|rope|quantization ---
while IFS='|' read -r dir arch sizes heads vocab rope quant; do
    [ -n "$dir" ] || continue
    run inspect "$R/$dir"
    expect_eq "$dir: inspect exits 0 with nothing on stderr" "0:" "$rc:$err"
    expect_eq "$dir: architecture" "$arch" "$(field architecture)"
    expect_eq "$dir: layers, hidden, ffn" "$sizes" "$(field sizes)"
    expect_eq "$dir: heads, key/value heads, head size" "$heads" "$(field 'attention heads')"
    expect_eq "$dir: vocabulary, context, tying" "$vocab" "$(field vocabulary)"
    expect_eq "$dir: rope and norm" "$rope" "$(field rope)"
    expect_eq "$dir: quantization" "$quant" "$(field quantization)"
    ok "$dir: says the weights are absent" contains "$(field format)" "config.json only: no weights here"
    ok "$dir: weight memory estimated from config.json" contains "$(field 'weights per rank')" "estimated from config.json"
done <<'EOF'
llama-2-7b-hf|llama (model_type llama, LlamaForCausalLM)|32 layers, hidden 4096, ffn 11008|32 (key/value heads 32, head size 128)|32000 tokens, context 4096, separate lm_head, untied embeddings|theta 10000, default scaling; RMSNorm eps 1e-05|none (dtype float16)
llama-3-8b-instruct|llama (model_type llama, LlamaForCausalLM)|32 layers, hidden 4096, ffn 14336|32 (key/value heads 8, head size 128)|128256 tokens, context 8192, separate lm_head, untied embeddings|theta 500000, default scaling; RMSNorm eps 1e-05|none (dtype float32)
llama-3.1-8b-instruct|llama (model_type llama, LlamaForCausalLM)|32 layers, hidden 4096, ffn 14336|32 (key/value heads 8, head size 128)|128256 tokens, context 131072, separate lm_head, untied embeddings|theta 500000, llama3 scaling (factor 8); RMSNorm eps 1e-05|none (dtype bfloat16)
llama-3.2-1b-instruct|llama (model_type llama, LlamaForCausalLM)|16 layers, hidden 2048, ffn 8192|32 (key/value heads 8, head size 64)|128256 tokens, context 131072, tied embeddings|theta 500000, llama3 scaling (factor 32); RMSNorm eps 1e-05|none (dtype bfloat16)
orpheus-3b-bnb-4bit|llama (model_type llama, LlamaForCausalLM)|28 layers, hidden 3072, ffn 8192|24 (key/value heads 8, head size 128)|156940 tokens, context 131072, tied embeddings|theta 500000, llama3 scaling (factor 32); RMSNorm eps 1e-05|bitsandbytes NF4 with double quantization, pre-quantized: used as it is
mistral-7b-instruct-v0.2|llama (model_type mistral, MistralForCausalLM)|32 layers, hidden 4096, ffn 14336|32 (key/value heads 8, head size 128)|32000 tokens, context 32768, separate lm_head, untied embeddings|theta 1e+06, default scaling; RMSNorm eps 1e-05|none (dtype float32)
mistral-7b-instruct-v0.3|llama (model_type mistral, MistralForCausalLM)|32 layers, hidden 4096, ffn 14336|32 (key/value heads 8, head size 128)|32768 tokens, context 32768, separate lm_head, untied embeddings|theta 1e+06, default scaling; RMSNorm eps 1e-05|none (dtype bfloat16)
tinyllama-1.1b-chat-v1.0|llama (model_type llama, LlamaForCausalLM)|22 layers, hidden 2048, ffn 5632|32 (key/value heads 4, head size 64)|32000 tokens, context 2048, separate lm_head, untied embeddings|theta 10000, default scaling; RMSNorm eps 1e-05|none (dtype float32)
smollm2-135m|llama (model_type llama, LlamaForCausalLM)|30 layers, hidden 576, ffn 1536|9 (key/value heads 3, head size 64)|49152 tokens, context 8192, tied embeddings|theta 100000, default scaling; RMSNorm eps 1e-05|none (dtype bfloat16)
qwen2.5-7b-instruct|qwen2 (model_type qwen2, Qwen2ForCausalLM)|28 layers, hidden 3584, ffn 18944|28 (key/value heads 4, head size 128)|152064 tokens, context 32768, separate lm_head, untied embeddings|theta 1e+06, default scaling; RMSNorm eps 1e-06|none (dtype bfloat16)
gemma-2-2b-it|gemma2 (model_type gemma2, Gemma2ForCausalLM)|26 layers, hidden 2304, ffn 9216|8 (key/value heads 4, head size 256)|256000 tokens, context 8192, tied embeddings|theta 10000, default scaling; RMSNorm eps 1e-06|none (dtype bfloat16)
phi-4|phi3 (model_type phi3, Phi3ForCausalLM)|40 layers, hidden 5120, ffn 17920|40 (key/value heads 10, head size 128)|100352 tokens, context 16384, separate lm_head, untied embeddings|theta 250000, default scaling; RMSNorm eps 1e-05|none (dtype bfloat16)
gemma-3-4b-it|gemma3 (model_type gemma3, Gemma3ForConditionalGeneration)|34 layers, hidden 2560, ffn 10240|8 (key/value heads 4, head size 256)|262208 tokens, context 131072, tied embeddings|theta 1e+06, linear scaling (factor 8); RMSNorm eps 1e-06|none (dtype bfloat16)
EOF

run inspect "$R/qwen2.5-7b-instruct"
expect_eq "qwen2.5-7b-instruct: q/k/v biases" "q/k/v biases" "$(field 'family features')"
run inspect "$R/gemma-2-2b-it"
ok "gemma-2-2b-it: soft-caps and sliding window from config.json" contains "$(field 'family features')" \
    "soft-caps 50 / 30, sliding window 4096 on layers l % 2 == 0"
run inspect "$R/gemma-3-4b-it"
ok "gemma-3-4b-it: its text tower, the sizes text_config leaves out from Gemma3TextConfig's defaults" \
    contains "$(field 'family features')" "scores x 0.0625, soft-caps 0 / 0, sliding window 1024 on layers but (l + 1) % 6 == 0"
run inspect "$R/phi-4"
expect_eq "phi-4: fused q/k/v and gate/up, one LoRA each" \
    "q/k/v and gate/up fused in the files (qkv_proj, gate_up_proj: one LoRA each, as PEFT)" "$(field 'family features')"
run inspect "$R/llama-2-7b-hf" --no-4bit
expect_eq "llama-2-7b-hf --no-4bit: 7B parameters in float16" "about 12.6 GB, estimated from config.json (load_in_4bit off)" \
    "$(field 'weights per rank')"

# --- tokenizer_config.json, special_tokens_map.json, generation_config.json ---
run inspect "$R/gemma-2-2b-it"
expect_eq "gemma-2-2b-it: bos/eos from tokenizer_config.json" \
    'none: no tokenizer.json, which ptrain tokenizes with (tokenizer_config.json: GemmaTokenizer, bos "<bos>", eos "<eos>")' \
    "$(field tokenizer)"
expect_eq "gemma-2-2b-it: its chat template is Gemma's" "gemma (recognised from the model's template)" "$(field 'chat template')"
expect_eq "gemma-2-2b-it: generation_config.json's eos ids" "generation_config.json: eos 1, 107" "$(field generation)"
run inspect "$R/mistral-7b-instruct-v0.2"
expect_eq "mistral-7b-instruct-v0.2 (CRLF files, model_max_length 1e30): bos/eos" \
    'none: no tokenizer.json, which ptrain tokenizes with (tokenizer_config.json: LlamaTokenizer, bos "<s>", eos "</s>")' \
    "$(field tokenizer)"
ok "mistral-7b-instruct-v0.2: the chat template of tokenizer_config.json is found" \
    contains "$(field 'chat template')" "the model's own (470 characters"
run inspect "$R/llama-2-7b-hf"
expect_eq "llama-2-7b-hf: generation_config.json" "generation_config.json: eos 2; temperature 0.9, top_p 0.6, max_length 4096" \
    "$(field generation)"
expect_eq "llama-2-7b-hf: no tokenizer files: says so" "none: no tokenizer.json, which ptrain tokenizes with" "$(field tokenizer)"
run inspect "$R/llama-3-8b-instruct"
expect_eq "llama-3-8b-instruct: generation_config.json (two eos ids, sampling)" \
    "generation_config.json: eos 128001, 128009; do_sample, temperature 0.6, top_p 0.9, max_length 4096" "$(field generation)"
run inspect "$R/tinyllama-1.1b-chat-v1.0"
expect_eq "tinyllama-1.1b-chat-v1.0: generation_config.json" "generation_config.json: eos 2; max_length 2048" "$(field generation)"

# tokenizer files beside the config.json of the same family: TOKDIR CONFIGDIR EXPECTED-TOKENIZER CHAT
# (CHAT "found": the template is read, whatever inspect makes of it)
pair() {
    rm -rf "$tmp/pair" && mkdir "$tmp/pair" && cp "$R/$1"/*.json "$tmp/pair/" && rm -f "$tmp/pair/config.json" &&
        cp "$R/$2/config.json" "$tmp/pair/config.json" || return 1
    run inspect "$tmp/pair"
    expect_eq "$1 (beside $2's config.json): exit 0" "0:" "$rc:$err"
    expect_eq "$1: tokenizer_config.json / special_tokens_map.json read" "$3" "$(field tokenizer)"
    if [ "$4" = found ]; then
        ok "$1: chat template read from tokenizer_config.json ($(field 'chat template'))" \
            test -n "$(field 'chat template')" -a "$(field 'chat template')" != "none in the model (set chat_template)"
    else
        expect_eq "$1: chat template" "$4" "$(field 'chat template')"
    fi
}
pair smollm2-135m-instruct smollm2-135m \
    'none: no tokenizer.json, which ptrain tokenizes with (tokenizer_config.json, special_tokens_map.json: GPT2Tokenizer, bos "<|im_start|>", eos "<|im_end|>")' \
    "none in the model (set chat_template)"
pair llama-3-8b-bnb-4bit llama-3-8b-instruct \
    'none: no tokenizer.json, which ptrain tokenizes with (tokenizer_config.json, special_tokens_map.json: PreTrainedTokenizerFast, bos "<|begin_of_text|>", eos "<|end_of_text|>")' \
    "none in the model (set chat_template)"
pair mixtral-dolphin-2.5 mistral-7b-instruct-v0.2 \
    'none: no tokenizer.json, which ptrain tokenizes with (tokenizer_config.json, special_tokens_map.json: LlamaTokenizer, bos "<s>", eos "<|im_end|>")' \
    found
# special_tokens_map.json alone: bos/eos from it
rm -f "$tmp/pair/tokenizer_config.json"
run inspect "$tmp/pair"
expect_eq "special_tokens_map.json alone gives bos/eos" \
    'none: no tokenizer.json, which ptrain tokenizes with (special_tokens_map.json: bos "<s>", eos "<|im_end|>")' \
    "$(field tokenizer)"
# a damaged tokenizer_config.json is named in the report, not fatal
head -c 300 "$R/gemma-2-2b-it/tokenizer_config.json" >"$tmp/pair/tokenizer_config.json"
run inspect "$tmp/pair"
ok "a truncated tokenizer_config.json: exit 0, the file and the reason in the tokenizer line" \
    test "$rc" = 0 -a -n "$(field tokenizer | grep 'tokenizer_config.json: cannot read it: .*(line')"

# --- the estimate from config.json equals what the weights of the committed tiny models give ---
for m in hf/tiny-llama-f32 hf/tiny-llama-bnb4 qwen2/hf qwen2/hf-bnb4 gemma2/hf gemma2/hf-bnb4; do
    run inspect "$D/$m"
    measured=$(field 'weights per rank' | sed 's/ (load_in_4bit.*//')
    rm -rf "$tmp/co" && mkdir "$tmp/co" && cp "$D/$m/config.json" "$tmp/co/"
    run inspect "$tmp/co"
    expect_eq "$m: weight memory from config.json alone = from the weights" \
        "about $measured, estimated from config.json" "$(field 'weights per rank' | sed 's/ (load_in_4bit.*//')"
done

# --- unsupported architectures: one error naming the architecture and the supported families ---
while IFS='|' read -r dir what; do
    [ -n "$dir" ] || continue
    run inspect "$R/$dir"
    ok "$dir: exit 1 with exactly one error line" test "$rc" = 1 -a "$(printf '%s\n' "$err" | grep -c .)" = 1
    ok "$dir: the error names the architecture ($what)" contains "$err" "ptrain: error: $R/$dir/config.json: $what is not supported"
    ok "$dir: the error lists the supported families" contains "$err" \
        "supported: llama (Llama 2/3.x, SmolLM2, TinyLlama), mistral (loads as llama), mistral3 (Mistral Small 3.1+, Ministral 3 multimodal: its text tower), qwen2 (Qwen2, Qwen2.5), gemma2 (Gemma 2)"
done <<'EOF'
mixtral-dolphin-2.5|model_type "mixtral" (MixtralForCausalLM)
EOF

# --- the peer's example configs ---
for f in "$R"/peer/*.yaml; do
    peer=peer/$(basename "$f")
    run check "$f"
    expect_eq "$peer: check exits 0 with nothing on stderr" "0:" "$rc:$err"
    ok "$peer: ends with ok" test "$(printf '%s\n' "$out" | tail -n 1)" = "$f: ok"
    missing=$(sed -n 's/^\([a-z_][a-z_0-9]*\):.*/\1/p' "$f" | while read -r key; do
        printf '%s\n' "$out" | grep -Eq "^$key(\\[| )" || printf ' %s' "$key"
    done)
    expect_eq "$peer: every key it sets is in check's table" "" "$missing"
done

done_testing
