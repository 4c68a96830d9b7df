#!/bin/sh
# test_gemma4.sh — a Gemma 4 text model (tests/data/gemma4/hf, make_gemma4_goldens.py) through the
# commands a user starts with: `ptrain inspect` describes its features (the global layers' head size,
# rope and k_eq_v, the value norm, KV sharing, the per-layer inputs) and says what is not built yet;
# `ptrain generate` runs it greedily and reproducibly (its logits are held to transformers' in
# test_hf_model); `ptrain train` trains LoRA on it (the loss falls; no k/v pairs on the KV-shared layers,
# no v_proj pair on the k_eq_v global layers) and writes adapter.h5 and PEFT's files but no adapter.gguf;
# generate applies that adapter (other logits than the base's); `ptrain export` writes the PEFT files and the
# merged directory (--hf) and refuses the merged GGUF with one clear message, naming the family; the multimodal checkpoint
# (tests/data/gemma4-mm/hf) trains as its text tower.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
G=$PTRAIN_SRCDIR/tests/data/gemma4/hf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

run inspect "$G"
expect_eq "inspect gemma4: exit 0" 0 "$rc"
ok "inspect gemma4: the family" contains "$out" "gemma4 (model_type gemma4_text, Gemma4ForCausalLM)"
ok "inspect gemma4: the global layers" contains "$out" \
    "global layers: head size 32, key/value heads 1, 4 of 16 rotary pairs turning (proportional), values are the keys"
ok "inspect gemma4: KV sharing" contains "$out" "the last 3 layers reuse the keys and values of earlier ones"
ok "inspect gemma4: per-layer inputs" contains "$out" "per-layer inputs of 64 values (embed_tokens_per_layer 384 x 448"
ok "inspect gemma4: merged GGUF exports not yet" contains "$out" "merged GGUF exports (--gguf, --ollama)"

run generate --model "$G" --prompt "the quick brown fox" --max-new-tokens 8 --temperature 0 --device cpu \
    --ids "$tmp/ids1"
expect_eq "generate gemma4: exit 0" 0 "$rc"
run generate --model "$G" --prompt "the quick brown fox" --max-new-tokens 8 --temperature 0 --device cpu \
    --ids "$tmp/ids2"
ok "generate gemma4: greedy, the same tokens twice" cmp -s "$tmp/ids1" "$tmp/ids2"
ok "generate gemma4: 8 tokens generated" test "$(sed -n 2p "$tmp/ids1" | wc -w)" = 8

tiny_config "$tmp/c.yaml" "$tmp/c" "max_steps: 6
learning_rate: 0.02
warmup_steps: 0
logging_steps: 1
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
sed -i "s|^model_name: .*|model_name: \"$G\"|" "$tmp/c.yaml"
run train "$tmp/c.yaml"
expect_eq "train gemma4: exit 0" 0 "$rc"
first=$(grep '"loss"' "$tmp/c/metrics.jsonl" | head -1 | sed 's/.*"loss": \([^,]*\),.*/\1/')
last=$(grep '"loss"' "$tmp/c/metrics.jsonl" | tail -1 | sed 's/.*"loss": \([^,]*\),.*/\1/')
ok "train gemma4: the loss falls ($first to $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a) }'
ok "train gemma4: adapter.h5 and PEFT's files" test -s "$tmp/c/lora/adapter.h5" -a -s "$tmp/c/lora/adapter_model.safetensors"
ok "train gemma4: no adapter.gguf, said" contains "$err$out" "no adapter.gguf: llama.cpp's tensor names of gemma4 models"
ok "train gemma4: no adapter.gguf written" test ! -e "$tmp/c/lora/adapter.gguf"
run generate --model "$G" --prompt "the quick brown fox" --max-new-tokens 8 --temperature 0 --device cpu \
    --adapter "$tmp/c/lora" --ids "$tmp/ids3"
expect_eq "generate gemma4 with the trained adapter: exit 0" 0 "$rc"
ok "generate gemma4 with the trained adapter: other tokens than the base's" test "$(sed -n 2p "$tmp/ids3")" != "$(sed -n 2p "$tmp/ids1")"

run export --model "$G" --adapter "$tmp/c/lora" --out "$tmp/exp"
expect_eq "export gemma4 (the adapter): exit 0" 0 "$rc"
ok "export gemma4: PEFT's files" test -s "$tmp/exp/adapter_config.json" -a -s "$tmp/exp/adapter_model.safetensors"
run export --model "$G" --adapter "$tmp/c/lora" --out "$tmp/exp2" --hf
expect_eq "export gemma4 --hf: exit 0" 0 "$rc"
ok "export gemma4 --hf: the merged directory" test -s "$tmp/exp2/merged/model.safetensors" -a -s "$tmp/exp2/merged/config.json"
run export --model "$G" --adapter "$tmp/c/lora" --out "$tmp/exp3" --gguf q8_0
expect_eq "export gemma4 --gguf: exit 1" 1 "$rc"
ok "export gemma4 --gguf: refused, naming the family" contains "$err" \
    "a merged GGUF export (--gguf, --ollama) is not available for gemma4 models yet"

M=$PTRAIN_SRCDIR/tests/data/gemma4-mm/hf
tiny_config "$tmp/m.yaml" "$tmp/m" "max_steps: 1"
sed -i "s|^model_name: .*|model_name: \"$M\"|" "$tmp/m.yaml"
run train "$tmp/m.yaml"
expect_eq "train the multimodal gemma4 checkpoint: exit 0" 0 "$rc"
ok "train the multimodal gemma4 checkpoint: its text tower, the rest said" contains "$err$out" \
    "leaves its 86 other tensors (the vision and audio towers, their projectors) unread"
done_testing
