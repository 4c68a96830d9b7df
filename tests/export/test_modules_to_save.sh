#!/bin/sh
# test_modules_to_save.sh — PEFT's modules_to_save (issue 46) on the tiny fp32 Llama, whose embeddings
# are tied: method cpt with modules_to_save [embed_tokens, lm_head] at embedding_learning_rate trains
# two copies apart (as PEFT makes them); PEFT 0.21 loads the adapter (its modules_to_save tensors)
# and gives ptrain's logits, read back by ptrain from adapter.h5, the PEFT files and a checkpoint;
# lm_head alone under sft likewise; a run resumed from its checkpoint ends with the straight run's
# files bit for bit; lora_model_dir continues from the modules; no adapter.gguf; the merged Hugging
# Face directory (ptrain export --hf, huggingface_save) has the trained modules, untied, and
# transformers gives ptrain's logits with it; the merged GGUF export is refused saying why. Skips, saying why, without the Python environment of
# share/scripts/test-python.sh.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
. "$PTRAIN_SRCDIR/tests/export/peft_env.sh"
peft_require "modules_to_save against PEFT" torch transformers peft safetensors
LOGITS_CMP=$(dirname "$P")/tests/export/logits_cmp
logits() { # logits OUT ADAPTER
    "$P" generate --model "$base" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$1" --ids "$1.ids" \
        --no-4bit --adapter "$2" >/dev/null 2>"$tmp/gen.err" || cat "$tmp/gen.err"
}
base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
config() { # config CONFIG OUT [yaml]: 8 steps at lr 0.01 on the fp32 base
    tiny_config "$1" "$2" "max_steps: 8
learning_rate: 0.01
warmup_steps: 0
lr_scheduler_type: constant
load_in_4bit: false
$3"
    sed -i "s|^model_name: .*|model_name: \"$base\"|" "$1"
}
cpt='method: cpt
modules_to_save: [embed_tokens, lm_head]
embedding_learning_rate: 0.005'
config "$tmp/c.yaml" "$tmp/c" "$cpt"
run "$tmp/c.yaml"
ok "cpt with modules_to_save [embed_tokens, lm_head] trains (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
ok "the run says what it trains and at which learning rate" \
    grep -q "modules    embed_tokens and lm_head trained in full (fp32) at learning rate 0.005 (the model ties them" "$tmp/out"
ok "no adapter.gguf (llama.cpp's LoRA files cannot carry whole modules)" test ! -e "$tmp/c/lora/adapter.gguf"
config "$tmp/h.yaml" "$tmp/h" "modules_to_save: [lm_head]"
run "$tmp/h.yaml"
ok "sft with modules_to_save [lm_head] trains (exit $rc)" test "$rc" = 0

logits "$tmp/lc" "$tmp/c/lora"
logits "$tmp/lp" "$tmp/c/lora/adapter_model.safetensors"
logits "$tmp/lh" "$tmp/h/lora"
ok "ptrain reads the modules back alike from adapter.h5 and the PEFT files" cmp "$tmp/lc" "$tmp/lp"
"$PY" - "$tmp/c/lora" "$base" >"$tmp/keys.out" 2>&1 <<'PY'
import json, sys
from safetensors.numpy import load_file
lora, base = sys.argv[1:]
cfg = json.load(open(lora + "/adapter_config.json"))
t = load_file(lora + "/adapter_model.safetensors")
e, h = t["base_model.model.model.embed_tokens.weight"], t["base_model.model.lm_head.weight"]
print("modules_to_save", cfg["modules_to_save"], "embed", e.shape, e.dtype, "lm_head", h.shape, h.dtype,
      "max |embed - lm_head|", float(abs(e - h).max()))
sys.exit(0 if cfg["modules_to_save"] == ["embed_tokens", "lm_head"] and e.dtype == "float32" and abs(e - h).max() > 1e-3 else 1)
PY
rc=$?
sed 's/^/# /' "$tmp/keys.out"
ok "adapter_model.safetensors holds both modules under PEFT's names, fp32, trained apart" test "$rc" = 0
# resume: 4 steps, then on to 8 from the checkpoint: the straight run's files, bit for bit
config "$tmp/r.yaml" "$tmp/r" "$cpt
save_steps: 4"
sed 's/^max_steps: 8$/max_steps: 4/' "$tmp/r.yaml" >"$tmp/r4.yaml"
run "$tmp/r4.yaml"
cp "$tmp/r.yaml" "$tmp/r2.yaml"
printf 'resume_from_checkpoint: true\n' >>"$tmp/r2.yaml"
run "$tmp/r2.yaml"
ok "the run with modules_to_save resumes from its checkpoint (exit $rc)" test "$rc" = 0
ok "resumed, it ends with the straight run's adapter_model.safetensors (LoRA and modules), bit for bit" \
    cmp "$tmp/c/lora/adapter_model.safetensors" "$tmp/r/lora/adapter_model.safetensors"
grep -v "^modules_to_save\|^method\|^embedding_learning_rate" "$tmp/r2.yaml" >"$tmp/r3.yaml"
run "$tmp/r3.yaml"
ok "resuming without the modules the checkpoint trained is refused, saying why" \
    contains "$err" "trained modules_to_save [embed_tokens, lm_head], this run none"
printf 'data_seed: 5\nlr_scheduler_kwargs: {num_cycles: 2}\n' >>"$tmp/r2.yaml"
sed -i 's/^lr_scheduler_type: constant$/lr_scheduler_type: cosine/' "$tmp/r2.yaml"
run "$tmp/r2.yaml"
ok "resuming with another data_seed and lr_scheduler_kwargs says so" \
    sh -c "grep -q 'resume     data_seed (the data order changes) changed: 3407 at the checkpoint, 5 now' '$tmp/out' &&
        grep -q 'resume     lr_scheduler_kwargs changed: num_cycles 0.5, .* 2, ' '$tmp/out'"
logits "$tmp/lk" "$tmp/r/checkpoint-8.h5"
ok "ptrain reads the modules from a checkpoint too (the same logits)" cmp "$tmp/lc" "$tmp/lk"

# lora_model_dir: continued training starts from the modules; a config without them is refused
config "$tmp/m.yaml" "$tmp/m" "modules_to_save: [lm_head]
lora_model_dir: \"$tmp/c/lora\""
run "$tmp/m.yaml"
ok "lora_model_dir with modules the config does not train is refused, saying which" \
    contains "$err" "trained embed_tokens in full (modules_to_save); this config does not: add embed_tokens"

# the merged GGUF: the trained modules as token_embd and an output of its own; ptrain runs it with
# the logits it gives with the adapter
run export --model "$base" --adapter "$tmp/c/lora" --out "$tmp/g" --gguf f32 --no-adapter-files
ok "the merged GGUF export of an adapter with modules_to_save runs (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
"$P" generate --model "$tmp/g/merged-f32.gguf" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$tmp/lg" \
    --no-4bit >/dev/null 2>&1
ok "the merged f32 GGUF gives the adapter's logits" "$LOGITS_CMP" "$tmp/lc" "$tmp/lg" 1e-4
# the merged Hugging Face directory: the trained modules, the tied base untied; transformers loads it
run export --model "$base" --adapter "$tmp/c/lora" --out "$tmp/x" --hf --dtype f32 --no-adapter-files
ok "the merged Hugging Face export of an adapter with modules_to_save runs (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
ok "its config.json unties the embeddings (the two modules were trained apart)" \
    grep -q '"tie_word_embeddings": false' "$tmp/x/merged/config.json"
config "$tmp/e.yaml" "$tmp/e" "modules_to_save: [embed_tokens]
huggingface_save: true
hf_model_name: me/merged
merged_save_dir: \"$tmp/e/merged\""
run "$tmp/e.yaml"
ok "sft with modules_to_save [embed_tokens] and huggingface_save trains and merges (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
logits "$tmp/le" "$tmp/e/lora"
# one Python process: PEFT loads the adapters, transformers the merged directories
{
    printf 'peft\t%s\t%s\t%s\t%s\n' "$base" "$tmp/c/lora" "$tmp/lc.ids" "$tmp/lc"
    printf 'peft\t%s\t%s\t%s\t%s\n' "$base" "$tmp/h/lora" "$tmp/lh.ids" "$tmp/lh"
    printf 'merged\t%s\t%s\t%s\t1e-4\n' "$tmp/x/merged" "$tmp/lc.ids" "$tmp/lc"
    printf 'merged\t%s\t%s\t%s\t2e-2\n' "$tmp/e/merged" "$tmp/le.ids" "$tmp/le"
} >"$tmp/batch"
"$PY" "$PTRAIN_SRCDIR/tests/export/hf_check.py" batch "$tmp/batch" >"$tmp/check.out" 2>&1
grep -v -i "warn\|Loading weights\|tie_word\|complications\|discussion\|deprecated" "$tmp/check.out" | sed 's/^/# /'
ok "PEFT loads the adapter (embed_tokens and lm_head trained apart on a tied base) with ptrain's logits" \
    grep -q "@@ RESULT 1 1" "$tmp/check.out"
ok "PEFT loads the lm_head-only adapter with ptrain's logits" grep -q "@@ RESULT 2 1" "$tmp/check.out"
ok "transformers loads the merged f32 directory with ptrain's logits (the adapter's trained embed_tokens and lm_head)" \
    grep -q "@@ RESULT 3 1" "$tmp/check.out"
ok "and the bf16 one merged at the end of training (embed_tokens trained, lm_head the base's: untied)" \
    grep -q "@@ RESULT 4 1" "$tmp/check.out"
run export --model "$base" --adapter "$tmp/c/lora" --out "$tmp/y"
ok "ptrain writes the adapter back with its modules" \
    cmp "$tmp/c/lora/adapter_model.safetensors" "$tmp/y/adapter_model.safetensors"
done_testing
