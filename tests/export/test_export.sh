#!/bin/sh
# test_export.sh — what `ptrain export` and the end of training write, checked with ptrain itself
# (the real tools, PEFT, transformers and llama.cpp, check the same files in test_tools.sh):
# the adapter in three formats after training; a PEFT directory read back gives the logits of
# adapter.h5; merged Hugging Face directories (f32 exact, bf16 close) and merged GGUF files of every
# method give ptrain's logits with the adapter; usage and bad input (unknown method, an adapter of
# another model, an unwritable or too small target) give one clear error and leave no file that
# looks complete; the Ollama Modelfile, and `ollama create` run when ollama is on PATH.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
CMP=$(dirname "$P")/tests/export/logits_cmp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}
prompt="Arr, the sea is wide and the ship"
logits() { # logits OUT MODEL [generate options...]: the prompt's logits and ids
    o=$1 m=$2
    shift 2
    "$P" generate --model "$m" --prompt "$prompt" --temperature 0 --max-new-tokens 8 --logits "$o" --ids "$o.ids" \
        "$@" >/dev/null 2>"$tmp/gen.err"
}

run export --help
ok "export --help shows its usage" contains "$out" "Usage: ptrain export CONFIG"
run export
expect_eq "export without CONFIG or --model: exit 2" 2 "$rc"
run export --model x --gguf q9_z --out "$tmp/x"
expect_eq "unknown GGUF method: exit 2" 2 "$rc"
ok "unknown GGUF method: names it and the choices" contains "$err" "--gguf q9_z: ptrain cannot write it; choose from f32, f16"

# a tiny Llama with fp32 weights and a tokenizer, trained hard for a few steps so the adapter matters
base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
tiny_config "$tmp/c.yaml" "$tmp/run" "max_steps: 16
learning_rate: 0.01
load_in_4bit: false"
sed -i "s|^model_name: .*|model_name: \"$base\"|" "$tmp/c.yaml"
run "$tmp/c.yaml"
lora="$tmp/run/lora"
expect_eq "tiny training: exit 0" 0 "$rc"
ok "training writes adapter.h5, the PEFT files and adapter.gguf" test -s "$lora/adapter.h5" -a -s \
    "$lora/adapter_config.json" -a -s "$lora/adapter_model.safetensors" -a -s "$lora/adapter.gguf"
ok "adapter_config.json is PEFT's LoRA config" contains "$(cat "$lora/adapter_config.json")" '"peft_type": "LORA"'
ok "no temporary files are left" test -z "$(ls -A "$lora" | grep tmp)"

logits "$tmp/h5" "$base" --no-4bit --adapter "$lora"
mkdir -p "$tmp/peft"
cp "$lora/adapter_config.json" "$lora/adapter_model.safetensors" "$tmp/peft/"
logits "$tmp/peft.l" "$base" --no-4bit --adapter "$tmp/peft"
ok "a PEFT directory gives the logits of adapter.h5 exactly" cmp -s "$tmp/h5" "$tmp/peft.l"
logits "$tmp/gg" "$base" --no-4bit --adapter "$lora/adapter.gguf"
ok "adapter.gguf read back gives the logits of adapter.h5 exactly" cmp -s "$tmp/h5" "$tmp/gg"
logits "$tmp/plain" "$base" --no-4bit
ok "the adapter moves the logits (at least 1e-2)" "$CMP" "$tmp/plain" "$tmp/h5" 1 1e-2

# lora_model_dir: training continues from an adapter (here the PEFT copy, at a learning rate too
# small to move it): the result gives the first run's logits; other settings are refused
tiny_config "$tmp/c2.yaml" "$tmp/run2" "max_steps: 1
learning_rate: 1e-12
load_in_4bit: false
lora_model_dir: \"$tmp/peft\""
sed -i "s|^model_name: .*|model_name: \"$base\"|" "$tmp/c2.yaml"
run "$tmp/c2.yaml"
ok "lora_model_dir: training starts from the adapter (exit $rc)" contains "$out" "starting from the adapter in $tmp/peft"
logits "$tmp/cont" "$base" --no-4bit --adapter "$tmp/run2/lora"
ok "lora_model_dir: the continued adapter is the one it started from" "$CMP" "$tmp/h5" "$tmp/cont" 1e-6
sed -i 's/^lora_r: 4/lora_r: 8/' "$tmp/c2.yaml"
run "$tmp/c2.yaml"
ok "lora_model_dir with another r: refused, saying what to set" contains "$err" "has r 4, scale 2 and targets"

# merged_save_dir (issue 46): huggingface_save writes the merged model there, not in final_model_dir/merged
tiny_config "$tmp/c3.yaml" "$tmp/run3" "max_steps: 1
load_in_4bit: false
huggingface_save: true
hf_model_name: me/merged
merged_save_dir: \"$tmp/merged-here\""
sed -i "s|^model_name: .*|model_name: \"$base\"|" "$tmp/c3.yaml"
run "$tmp/c3.yaml"
ok "merged_save_dir: the merged model is written there (exit $rc)" \
    test "$rc" = 0 -a -s "$tmp/merged-here/config.json" -a -s "$tmp/merged-here/model.safetensors"
ok "merged_save_dir: nothing in final_model_dir/merged" test ! -e "$tmp/run3/lora/merged"

# the adapters inside a training checkpoint: read by generate, exported beside it
tiny_config "$tmp/ck.yaml" "$tmp/ck" "max_steps: 16
learning_rate: 0.01
load_in_4bit: false
save_steps: 8"
sed -i "s|^model_name: .*|model_name: \"$base\"|" "$tmp/ck.yaml"
run "$tmp/ck.yaml"
logits "$tmp/ck16" "$base" --no-4bit --adapter "$tmp/ck/checkpoint-16.h5"
logits "$tmp/ckfinal" "$base" --no-4bit --adapter "$tmp/ck/lora"
ok "the last checkpoint's adapters give the final adapter's logits exactly" cmp -s "$tmp/ckfinal" "$tmp/ck16"
run export --model "$base" --adapter "$tmp/ck/checkpoint-8.h5"
ok "export of checkpoint-8.h5 writes its PEFT and GGUF adapters into checkpoint-8/" test "$rc" = 0 -a -s \
    "$tmp/ck/checkpoint-8/adapter_model.safetensors" -a -s "$tmp/ck/checkpoint-8/adapter.gguf"
logits "$tmp/ck8" "$base" --no-4bit --adapter "$tmp/ck/checkpoint-8.h5"
logits "$tmp/ck8p" "$base" --no-4bit --adapter "$tmp/ck/checkpoint-8"
ok "... and they give checkpoint-8's logits exactly (not the final ones)" cmp -s "$tmp/ck8" "$tmp/ck8p"
ok "... which differ from the final adapter's" "$CMP" "$tmp/ckfinal" "$tmp/ck8" 1 1e-3

# merged Hugging Face directories, read back by ptrain
run export --model "$base" --adapter "$lora" --out "$tmp/x32" --hf --dtype f32 --no-adapter-files
expect_eq "export --hf --dtype f32: exit 0" 0 "$rc"
ok "the merged directory has weights, config and tokenizer" test -s "$tmp/x32/merged/model.safetensors" -a -s \
    "$tmp/x32/merged/config.json" -a -s "$tmp/x32/merged/tokenizer.json"
logits "$tmp/m32" "$tmp/x32/merged" --no-4bit
ok "merged f32 = base + adapter (relative 1e-5)" "$CMP" "$tmp/h5" "$tmp/m32" 1e-5
run export --model "$base" --adapter "$lora" --out "$tmp/x16" --hf --no-adapter-files
logits "$tmp/m16" "$tmp/x16/merged" --no-4bit
ok "merged bf16 = base + adapter (relative 2e-2)" "$CMP" "$tmp/h5" "$tmp/m16" 2e-2

# merged GGUF from the Hugging Face base (metadata and tokenizer made from its files; Llama 3 rope
# scaling as rope_freqs), read back by ptrain
run export --model "$base" --adapter "$lora" --out "$tmp/xg" --gguf f32,q8_0 --no-adapter-files
expect_eq "export --gguf from an HF base: exit 0" 0 "$rc"
logits "$tmp/g32" "$tmp/xg/merged-f32.gguf" --no-4bit
ok "merged f32 GGUF (HF base) tokenizes the prompt as the base does" cmp -s "$tmp/h5.ids" "$tmp/g32.ids"
ok "merged f32 GGUF (HF base) = base + adapter (relative 1e-5)" "$CMP" "$tmp/h5" "$tmp/g32" 1e-5
logits "$tmp/g8" "$tmp/xg/merged-q8_0.gguf" --no-4bit
ok "merged q8_0 GGUF (HF base) = base + adapter (relative 2e-2)" "$CMP" "$tmp/h5" "$tmp/g8" 2e-2

# an adapter of another model is refused, naming the tensor
mkdir -p "$tmp/other"
cat >"$tmp/other/config.json" <<JSON
$(sed 's/"hidden_size": 64/"hidden_size": 128/; s/"head_dim": 16/"head_dim": 32/' "$base/config.json")
JSON
run export --model "$tmp/other" --adapter "$tmp/peft" --out "$tmp/xo"
expect_eq "an adapter of another model: exit 1" 1 "$rc"
ok "an adapter of another model: names the tensor and the shape" contains "$err" "down_proj.lora_B.weight is F32 [64, 4]; this model needs [128, 4]"

# an output path that cannot be a directory (root writes anywhere else): one error, nothing written
: >"$tmp/afile"
run export --model "$base" --adapter "$lora" --out "$tmp/afile/out" --hf
ok "an output directory that cannot be made: exit 1, naming it" test "$rc" = 1 -a -n "$(echo "$err" | grep "$tmp/afile/out")"
if [ "$(id -u)" != 0 ]; then
    mkdir -p "$tmp/ro"
    chmod 555 "$tmp/ro"
    run export --model "$base" --adapter "$lora" --out "$tmp/ro" --hf
    ok "a read-only output directory: exit 1, nothing written" test "$rc" = 1 -a -z "$(ls -A "$tmp/ro")"
fi

model=$(smollm_model)
if [ -z "$model" ]; then
    skip_test "GGUF exports and the Modelfile" "SmolLM2-135M-Instruct.Q4_1.gguf not found (share/scripts/fetch-model.sh fetches it)"
    done_testing
    exit $?
fi

# SmolLM2 (a GGUF base, Q4_1) with an adapter from one hard training step
smollm_config "$tmp/s.yaml" "$tmp/srun" "$model"
run "$tmp/s.yaml"
slora="$tmp/srun/lora"
expect_eq "one step on SmolLM2: exit 0" 0 "$rc"
prompt="The capital of France is"
logits "$tmp/sref" "$model" --adapter "$slora"
logits "$tmp/sgg" "$model" --adapter "$slora/adapter.gguf"
ok "SmolLM2's adapter.gguf (q/k rows interleaved) read back gives adapter.h5's logits exactly" cmp -s "$tmp/sref" "$tmp/sgg"
run generate --model "$model" --adapter "$lora/adapter.gguf" --prompt hi
ok "an adapter.gguf of another model: refused naming the tensor" contains "$err" "lora_a is [4, 64]; this model needs [4, 576]"
logits "$tmp/splain" "$model"
ok "the SmolLM2 adapter moves the logits (at least 1e-3)" "$CMP" "$tmp/splain" "$tmp/sref" 1 1e-3
run export --model "$model" --adapter "$slora" --out "$tmp/g" --gguf f32,f16,q8_0,q4_1,q4_k_m --no-adapter-files
expect_eq "export --gguf f32,f16,q8_0,q4_1,q4_k_m: exit 0" 0 "$rc"
for q in f32:1e-5 f16:5e-3 q8_0:5e-2; do
    logits "$tmp/g.${q%:*}" "$tmp/g/merged-${q%:*}.gguf" --no-4bit
    ok "merged ${q%:*} GGUF = base + adapter (relative ${q#*:})" "$CMP" "$tmp/sref" "$tmp/g.${q%:*}" "${q#*:}"
done
for q in q4_1 q4_k_m; do
    "$P" generate --model "$tmp/g/merged-$q.gguf" --prompt "$prompt" --temperature 0 --max-new-tokens 4 >"$tmp/out" 2>/dev/null
    ok "ptrain reads merged-$q.gguf back (it says: $(head -c 40 "$tmp/out" | tr '\n' ' '))" test -s "$tmp/out"
done

# a write that fails halfway (the file-size limit stands in for a full disk) leaves no GGUF behind
(ulimit -f 20000 && "$P" export --model "$model" --out "$tmp/full" --gguf f16 --no-adapter-files >"$tmp/out" 2>"$tmp/err")
rc=$?
ok "a write that fails halfway: exit 1, naming the file" test "$rc" = 1 -a -n "$(grep 'cannot write' "$tmp/err")"
ok "a write that fails halfway: no file is left, not even the temporary one" test -z "$(ls -A "$tmp/full")"

# Ollama: the Modelfile, and `ollama create` when ollama is on PATH (a stand-in records its call)
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "$PWD $*" >"%s"\n' "$tmp/ollama.call" >"$tmp/bin/ollama"
chmod +x "$tmp/bin/ollama"
PATH="$tmp/bin:$PATH" run export --model "$model" --adapter "$slora" --out "$tmp/o" --gguf q4_k_m --ollama pirate \
    --no-adapter-files
expect_eq "export --ollama: exit 0" 0 "$rc"
mf=$(cat "$tmp/o/Modelfile")
ok "the Modelfile is FROM the merged GGUF" contains "$mf" "FROM ./merged-q4_k_m.gguf"
ok "the Modelfile has SmolLM2's chat template and stop strings" contains "$mf" 'PARAMETER stop "<|im_end|>"'
ok "the Modelfile's template is Ollama's syntax" contains "$mf" "{{ .Prompt }}<|im_end|>"
expect_eq "ollama create ran in the output directory" "$tmp/o create pirate -f Modelfile" "$(cat "$tmp/ollama.call")"
run export --model "$model" --adapter "$slora" --out "$tmp/o2" --ollama pirate
ok "without ollama on PATH the command is printed" contains "$out" "ollama create 'pirate' -f Modelfile"
ok "without a merged GGUF: FROM the base, ADAPTER adapter.gguf" contains "$(cat "$tmp/o2/Modelfile")" "ADAPTER ./adapter.gguf"
# the peer's model_parameters: "8b" is the Ollama model's tag
{ cat "$tmp/s.yaml"; printf 'ollama_save: true\nollama_model: pirate\nmodel_parameters: "8b"\n'; } >"$tmp/s8.yaml"
run export "$tmp/s8.yaml" --out "$tmp/o8"
ok "model_parameters: \"8b\" names the Ollama model pirate:8b" contains "$out" "ollama create 'pirate:8b' -f Modelfile"

# the Modelfile's TEMPLATE, run by Go's text/template (Ollama's engine), gives the prompt ptrain
# trains and generates with, for SmolLM2 (smollm2) and a model without a template (chatml)
if ! command -v go >/dev/null 2>&1; then
    skip_test "Ollama's template engine renders the Modelfiles" "no go on PATH (Debian's golang-go)"
    done_testing
    exit $?
fi
export GOCACHE="$tmp/gocache"
go build -o "$tmp/mfcheck" "$PTRAIN_SRCDIR/tests/export/modelfile_check.go" 2>"$tmp/go.err" || cat "$tmp/go.err"
render_same() { # render_same MODELFILE MODEL [SYSTEM]: Go's rendering = ptrain's chat prompt
    if [ -n "${3:-}" ]; then
        "$tmp/mfcheck" "$1" "What is the capital of France?" "$3" >"$tmp/go.txt" || return 1
        "$P" generate --model "$2" --chat --prompt "What is the capital of France?" --system "$3" --show-prompt >"$tmp/pt.txt" 2>/dev/null
    else
        "$tmp/mfcheck" "$1" "What is the capital of France?" >"$tmp/go.txt" || return 1
        "$P" generate --model "$2" --chat --prompt "What is the capital of France?" --show-prompt >"$tmp/pt.txt" 2>/dev/null
    fi
    cmp -s "$tmp/go.txt" "$tmp/pt.txt"
}
ok "SmolLM2's Modelfile renders ptrain's prompt (default system prompt)" render_same "$tmp/o/Modelfile" "$model"
ok "SmolLM2's Modelfile renders ptrain's prompt (a system prompt)" render_same "$tmp/o/Modelfile" "$model" "Speak like a pirate."
run export --model "$PTRAIN_SRCDIR/tests/data/qwen2/hf" --out "$tmp/q" --gguf f32 --ollama q
ok "a model without a template gets chatml, as training renders" render_same "$tmp/q/Modelfile" \
    "$PTRAIN_SRCDIR/tests/data/qwen2/hf" "Speak like a pirate."
for t in chatml smollm2 qwen2.5 llama-3 llama-3.1 llama-3.2 gemma mistral mistral-v3 alpaca; do
    run export --model "$model" --adapter "$slora" --out "$tmp/t-$t" --ollama x --chat-template "$t"
    "$tmp/mfcheck" "$tmp/t-$t/Modelfile" "Hello there" "Be brief." >"$tmp/go.txt" 2>&1
    ok "the $t TEMPLATE parses and runs in Go's text/template with the prompt and system" \
        test $? = 0 -a -n "$(grep -F 'Hello there' "$tmp/go.txt")" -a -n "$(grep -F 'Be brief.' "$tmp/go.txt")"
done
done_testing
