#!/bin/sh
# test_tools.sh — the files ptrain writes, loaded by the tools people use them with (the Python
# environment of share/scripts/test-python.sh, given as $PTRAIN_PYTHON):
#   PEFT: ptrain's adapter on a Hugging Face base and on a GGUF base gives ptrain's logits (fp32,
#     1e-4 relative); an adapter PEFT wrote gives PEFT's logits in ptrain; a DoRA adapter gives
#     PEFT's logits in generate, and merged (HF directory and GGUF);
#   transformers: merged directories (f32, bf16; from an HF base and from a GGUF base; also for the
#     tiny qwen2, gemma2, qwen3 and gemma3 models);
#   llama.cpp (llama-cpp-python): base GGUF + ptrain's adapter.gguf, and each merged GGUF, run
#     ptrain's greedy tokens (llama_check.py says what "the same" allows).
# Skips, saying why, without that environment or without SmolLM2.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
plain_build_only "its time is PEFT, transformers and llama.cpp loading what ptrain wrote; the same exports run under the sanitizers in test_export.sh and test_peft_select.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
PY=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$PY" ] || ! "$PY" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("torch", "transformers", "peft", "llama_cpp")))' 2>/dev/null; then
    skip_test "PEFT, transformers and llama.cpp load ptrain's exports" \
        "no Python with torch, transformers, peft and llama_cpp in \$PTRAIN_PYTHON (share/scripts/test-python.sh makes one)"
    done_testing
    exit $?
fi
# The PEFT and transformers checks run together at the end, in one Python process (importing torch
# takes seconds): hfq NAME COMMAND ARGS... queues hf_check.py's COMMAND; hf_flush runs the queue and
# prints one TAP line per check, in the order queued, with its output as comments.
hfq() {
    printf '%s\n' "$1" >>"$tmp/hf.names"
    shift
    (IFS="$(printf '\t')"; printf '%s\n' "$*") >>"$tmp/hf.batch"
}
hf_flush() {
    [ -s "$tmp/hf.batch" ] || return 0
    "$PY" "$PTRAIN_SRCDIR/tests/export/hf_check.py" batch "$tmp/hf.batch" >"$tmp/hf.out" 2>&1
    n=0
    while IFS= read -r name; do
        n=$((n + 1))
        ok "$name" grep -q "^@@ RESULT $n 1\$" "$tmp/hf.out"
        # the check's own lines: those after the previous result line, up to its own
        awk -v n="$n" '/^@@ RESULT /{ if ($3 == n) exit; keep = ($3 == n - 1); next } keep || n == 1' "$tmp/hf.out" |
            grep -v -i warn | sed 's/^/# /'
    done <"$tmp/hf.names"
    if ! grep -q "^@@ RESULT $n " "$tmp/hf.out"; then tail -n 20 "$tmp/hf.out" | sed 's/^/# /'; fi
    : >"$tmp/hf.batch"
    : >"$tmp/hf.names"
}
llama() { "$PY" "$PTRAIN_SRCDIR/tests/export/llama_check.py" "$@" >"$tmp/py.out" 2>&1; r=$?; sed 's/^/# /' "$tmp/py.out"; return $r; }
logits() { # logits OUT MODEL PROMPT [generate options...]: the prompt's logits, the ids, 16 greedy tokens
    o=$1 m=$2 pr=$3
    shift 3
    "$P" generate --model "$m" --prompt "$pr" --temperature 0 --max-new-tokens 16 --logits "$o" --ids "$o.ids" \
        "$@" >/dev/null 2>"$tmp/gen.err" || cat "$tmp/gen.err"
}
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    err=$(cat "$tmp/err")
}

# train8 CONFIG OUT MODEL: the tiny config's 8 steps (lr 0.01, no warm-up, no 4-bit) on MODEL into OUT
train8() {
    tiny_config "$1" "$2" "max_steps: 8
learning_rate: 0.01
warmup_steps: 0
load_in_4bit: false"
    sed -i "s|^model_name: .*|model_name: \"$3\"|" "$1"
    run "$1"
}

# --- a Hugging Face base: the tiny fp32 Llama with a tokenizer
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
pr="Arr, the sea is wide and the ship"
logits "$tmp/t" "$base" "$pr" --no-4bit --adapter "$lora"
hfq "PEFT loads ptrain's adapter onto the HF base: ptrain's logits" peft "$base" "$lora" "$tmp/t.ids" "$tmp/t"

# PEFT's own adapters (random A and B) to read back: on the HF base (plain, and DoRA) and on
# SmolLM2 when it is here, and on phi3, made in one Python process
tab=$(printf '\t')
printf 'make-peft%s%s%s%s\nmake-peft%s%s%s%s%sdora\n' "$tab" "$base" "$tab" "$tmp/peft" "$tab" "$base" "$tab" \
    "$tmp/dora" "$tab" >"$tmp/make.batch"
model=$(smollm_model)
[ -n "$model" ] && printf 'make-peft%s%s%s%s\n' "$tab" "$model" "$tab" "$tmp/speft" >>"$tmp/make.batch"
# phi3's on its fused qkv_proj and gate_up_proj (one A and one B each), read back further down
printf 'make-peft%s%s%s%s%s%sqkv_proj,gate_up_proj\n' "$tab" "$PTRAIN_SRCDIR/tests/data/phi3/hf" "$tab" "$tmp/phi3peft" "$tab" "$tab" \
    >>"$tmp/make.batch"
# granite4's on its shared MLP (input_linear: gate and up fused; output_linear) and o_proj
printf 'make-peft%s%s%s%s%s%sinput_linear,output_linear,o_proj\n' "$tab" "$PTRAIN_SRCDIR/tests/data/granite4/hf" "$tab" \
    "$tmp/g4peft" "$tab" "$tab" >>"$tmp/make.batch"
# qwen35's on q_proj (queries and output gates interleaved per head) and the DeltaNet's in_proj_qkv, in_proj_a, out_proj
printf 'make-peft%s%s%s%s%s%sq_proj,in_proj_qkv,in_proj_a,out_proj\n' "$tab" "$PTRAIN_SRCDIR/tests/data/qwen35/hf" "$tab" \
    "$tmp/q35peft" "$tab" "$tab" >>"$tmp/make.batch"
"$PY" "$PTRAIN_SRCDIR/tests/export/hf_check.py" batch "$tmp/make.batch" >"$tmp/make.out" 2>&1
logits "$tmp/p" "$base" "$pr" --no-4bit --adapter "$tmp/peft"
hfq "ptrain reads an adapter PEFT wrote (r 8, rsLoRA, q/v/down only): PEFT's logits" peft "$base" "$tmp/peft" "$tmp/p.ids" "$tmp/p"
run export --model "$base" --adapter "$tmp/peft" --out "$tmp/peft2"
hfq "PEFT loads that adapter as ptrain writes it back (rsLoRA kept): the same logits" peft "$base" "$tmp/peft2" "$tmp/p.ids" "$tmp/p"
# DoRA in generate (issue 46): each adapted output column times m / ||W + s·B·A|| (that row's norm)
logits "$tmp/dd" "$base" "$pr" --no-4bit --adapter "$tmp/dora"
hfq "generate applies a DoRA adapter PEFT wrote: PEFT's logits" peft "$base" "$tmp/dora" "$tmp/dd.ids" "$tmp/dd"
# DoRA (issue 46): ptrain merges PEFT's magnitudes as merge_and_unload does, row by row
# W' = m / ||W + s·B·A|| (W + s·B·A) (q_proj's rows interleaved for GGUF): the merged directory and
# the f32 GGUF give PEFT's logits with the DoRA adapter
run export --model "$base" --adapter "$tmp/dora" --out "$tmp/dm" --hf --dtype f32 --gguf f32
ok "a DoRA adapter merges into a Hugging Face directory and a GGUF (exit $rc)" test "$rc" = 0
logits "$tmp/dh" "$tmp/dm/merged" "$pr" --no-4bit
hfq "DoRA merged into the f32 directory: PEFT's logits with the DoRA adapter" peft "$base" "$tmp/dora" "$tmp/dh.ids" "$tmp/dh"
logits "$tmp/dg" "$tmp/dm/merged-f32.gguf" "$pr" --no-4bit
hfq "DoRA merged into the f32 GGUF: PEFT's logits with the DoRA adapter" peft "$base" "$tmp/dora" "$tmp/dg.ids" "$tmp/dg"

for d in f32:1e-4 bf16:2e-2; do
    run export --model "$base" --adapter "$lora" --out "$tmp/m-${d%:*}" --hf --dtype "${d%:*}" --no-adapter-files
    hfq "transformers loads the merged ${d%:*} directory (HF base): ptrain's logits with the adapter (${d#*:})" \
        merged "$tmp/m-${d%:*}/merged" "$tmp/t.ids" "$tmp/t" "${d#*:}"
done

run export --model "$base" --adapter "$lora" --out "$tmp/hg" --gguf f32,q4_k_m --no-adapter-files
for q in f32:1e-3 q4_k_m:0.15; do
    logits "$tmp/hg.${q%:*}" "$tmp/hg/merged-${q%:*}.gguf" "$pr" --no-4bit
    ok "llama.cpp loads merged-${q%:*}.gguf made from the HF base and runs ptrain's greedy tokens" \
        llama "$tmp/hg/merged-${q%:*}.gguf" "$tmp/hg.${q%:*}.ids" "$tmp/hg.${q%:*}" "${q#*:}"
done
ok "llama.cpp tokenizes as HF tokenizers with the GGUF metadata ptrain makes from HF directories" \
    "$PY" "$PTRAIN_SRCDIR/tests/export/gguf_meta_check.py" "$(dirname "$P")/tests/export/gguf_meta_main" \
    --work "$tmp/gm"

# --- the other families: Qwen2 (q/k/v biases) and Gemma 2 (norms stored as w, soft-caps), from
# their tiny Hugging Face test models; Qwen2 also as a GGUF base that ptrain export makes
for fam in qwen2 gemma2; do
    fbase="$PTRAIN_SRCDIR/tests/data/$fam/hf"
    train8 "$tmp/$fam.yaml" "$tmp/$fam" "$fbase"
    logits "$tmp/$fam.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/$fam/lora"
    hfq "$fam: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
        peft "$fbase" "$tmp/$fam/lora" "$tmp/$fam.l.ids" "$tmp/$fam.l"
    run export --model "$fbase" --adapter "$tmp/$fam/lora" --out "$tmp/$fam.x" --hf --dtype f32 --no-adapter-files
    hfq "$fam: transformers loads the merged f32 directory: ptrain's logits with the adapter (1e-4)" \
        merged "$tmp/$fam.x/merged" "$tmp/$fam.l.ids" "$tmp/$fam.l" 1e-4
done
run export --model "$PTRAIN_SRCDIR/tests/data/qwen2/hf" --out "$tmp/q2" --gguf f32
qbase="$tmp/q2/merged-f32.gguf"
train8 "$tmp/q2.yaml" "$tmp/q2run" "$qbase"
logits "$tmp/q2.l" "$qbase" "$pr" --no-4bit --adapter "$tmp/q2run/lora"
hfq "qwen2 GGUF base: PEFT loads ptrain's adapter (transformers reads the GGUF): ptrain's logits" \
    peft "$qbase" "$tmp/q2run/lora" "$tmp/q2.l.ids" "$tmp/q2.l"
ok "qwen2 GGUF base: llama.cpp runs base + adapter.gguf as ptrain does" \
    llama "$qbase" --lora "$tmp/q2run/lora/adapter.gguf" "$tmp/q2.l.ids" "$tmp/q2.l" 1e-3

# gemma2 as a GGUF base: llama.cpp fixes gemma2's attention scale at 1/sqrt(head_dim), so the tiny
# model (query_pre_attn_scalar 24, head_dim 16) is refused for GGUF; the same weights with 16 export
g2="$tmp/g2base"
mkdir -p "$g2"
for f in "$PTRAIN_SRCDIR"/tests/data/gemma2/hf/*; do ln -s "$f" "$g2/"; done
rm "$g2/config.json"
sed 's/"query_pre_attn_scalar": 24/"query_pre_attn_scalar": 16/' "$PTRAIN_SRCDIR/tests/data/gemma2/hf/config.json" >"$g2/config.json"
run export --model "$PTRAIN_SRCDIR/tests/data/gemma2/hf" --out "$tmp/g2no" --gguf f32
ok "gemma2 with query_pre_attn_scalar != head_dim: GGUF refused, saying why" contains "$err" "query_pre_attn_scalar 24"
run export --model "$g2" --out "$tmp/g2" --gguf f32
gbase="$tmp/g2/merged-f32.gguf"
train8 "$tmp/g2.yaml" "$tmp/g2run" "$gbase"
logits "$tmp/g2.l" "$gbase" "$pr" --no-4bit --adapter "$tmp/g2run/lora"
ok "gemma2 GGUF base: llama.cpp runs base + adapter.gguf as ptrain does" \
    llama "$gbase" --lora "$tmp/g2run/lora/adapter.gguf" "$tmp/g2.l.ids" "$tmp/g2.l" 1e-3
run export --model "$gbase" --adapter "$tmp/g2run/lora" --out "$tmp/g2m" --gguf q8_0 --hf --dtype f32 --no-adapter-files
logits "$tmp/g2m.l" "$tmp/g2m/merged-q8_0.gguf" "$pr" --no-4bit
ok "gemma2: llama.cpp loads the merged q8_0 GGUF and runs ptrain's greedy tokens" \
    llama "$tmp/g2m/merged-q8_0.gguf" "$tmp/g2m.l.ids" "$tmp/g2m.l" 0.15
hfq "gemma2: transformers loads the merged directory from the GGUF base (norms back to w): ptrain's logits" \
    merged "$tmp/g2m/merged" "$tmp/g2.l.ids" "$tmp/g2.l" 1e-4

# --- make_more_goldens.py's smollm3 (NoPE layers), granite (multipliers on embeddings, scores,
# residual branches and logits), olmo2 (post-norms only, whole-width q/k norms) and olmo3 (olmo2 with a window on 3
# of every 4 layers), make_phi3_goldens.py's phi3
# (fused qkv_proj and gate_up_proj, partial rotary; phi3-longrope with LongRoPE) and make_granite4_goldens.py's
# granite4 (Granite 4.0: granite's multipliers, the MLP as shared_mlp.input_linear, gate and up fused, which the
# GGUF exports split into llama.cpp's granite ffn_gate and ffn_up), from their tiny Hugging Face
# test models: PEFT loads ptrain's
# adapter and transformers the merged directory; llama.cpp runs ptrain's GGUF export of the base
# with the adapter.gguf of training, and the merged q8_0 GGUF. The tolerance of base + adapter is
# llama.cpp's f16 KV cache: on smollm3 it alone makes 1.3e-3, on olmo3 1.4e-3 (1.3e-6 and 7.2e-7 with an f32 cache, as
# make_more_goldens.py measures)
for ft in smollm3:2e-3 granite:1e-3 olmo2:1e-3 olmo3:2e-3 phi3:1e-3 phi3-longrope:1e-3 granite4:2e-3; do
    fam=${ft%:*}
    fbase="$PTRAIN_SRCDIR/tests/data/$fam/hf"
    train8 "$tmp/$fam.yaml" "$tmp/$fam" "$fbase"
    logits "$tmp/$fam.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/$fam/lora"
    hfq "$fam: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
        peft "$fbase" "$tmp/$fam/lora" "$tmp/$fam.l.ids" "$tmp/$fam.l"
    run export --model "$fbase" --adapter "$tmp/$fam/lora" --out "$tmp/$fam.x" --hf --dtype f32 --gguf q8_0 \
        --no-adapter-files
    hfq "$fam: transformers loads the merged f32 directory: ptrain's logits with the adapter (1e-4)" \
        merged "$tmp/$fam.x/merged" "$tmp/$fam.l.ids" "$tmp/$fam.l" 1e-4
    logits "$tmp/$fam.m" "$tmp/$fam.x/merged-q8_0.gguf" "$pr" --no-4bit
    ok "$fam: llama.cpp loads the merged q8_0 GGUF and runs ptrain's greedy tokens" \
        llama "$tmp/$fam.x/merged-q8_0.gguf" "$tmp/$fam.m.ids" "$tmp/$fam.m" 0.15
    run export --model "$fbase" --out "$tmp/$fam.b" --gguf f32
    ok "$fam GGUF base: llama.cpp runs base + adapter.gguf as ptrain does" \
        llama "$tmp/$fam.b/merged-f32.gguf" --lora "$tmp/$fam/lora/adapter.gguf" "$tmp/$fam.l.ids" "$tmp/$fam.l" "${ft#*:}"
    logits "$tmp/$fam.g" "$tmp/$fam.b/merged-f32.gguf" "$pr" --no-4bit
    run export --model "$tmp/$fam.b/merged-f32.gguf" --out "$tmp/$fam.h" --hf --dtype f32 --no-adapter-files
    hfq "$fam: transformers loads the directory ptrain makes from that GGUF (config.json from its keys): ptrain's logits" \
        merged "$tmp/$fam.h/merged" "$tmp/$fam.g.ids" "$tmp/$fam.g" 1e-4
done
# phi3: an adapter PEFT wrote on the fused qkv_proj and gate_up_proj (one A and one B each) gives PEFT's logits
fbase="$PTRAIN_SRCDIR/tests/data/phi3/hf"
logits "$tmp/p3" "$fbase" "$pr" --no-4bit --adapter "$tmp/phi3peft"
hfq "phi3: ptrain reads an adapter PEFT wrote on qkv_proj and gate_up_proj (r 8, rsLoRA): PEFT's logits" \
    peft "$fbase" "$tmp/phi3peft" "$tmp/p3.ids" "$tmp/p3"
# granite4: an adapter PEFT wrote on shared_mlp.input_linear (one A and one B over the gate and up rows),
# output_linear and o_proj gives PEFT's logits; without RoPE (position_embedding_type null) no GGUF, saying why
fbase="$PTRAIN_SRCDIR/tests/data/granite4/hf"
logits "$tmp/g4p" "$fbase" "$pr" --no-4bit --adapter "$tmp/g4peft"
hfq "granite4: ptrain reads an adapter PEFT wrote on input_linear, output_linear and o_proj: PEFT's logits" \
    peft "$fbase" "$tmp/g4peft" "$tmp/g4p.ids" "$tmp/g4p"
run export --model "$PTRAIN_SRCDIR/tests/data/granite4/hf-nope" --out "$tmp/g4nope" --gguf f32
ok "granite4 without RoPE: GGUF refused, saying why" contains "$err" \
    "position_embedding_type is not \"rope\", so no layer rotates q and k; llama.cpp's granite rotates them"
# qwen35 (Gated DeltaNet layers, a gated full-attention layer): PEFT loads the adapter ptrain trains on every projection
# PEFT adapts there (q_proj's B rows written back in transformers' interleaved order), and ptrain reads PEFT's own
fbase="$PTRAIN_SRCDIR/tests/data/qwen35/hf"
tiny_config "$tmp/q35.yaml" "$tmp/q35" "max_steps: 8
learning_rate: 0.01
warmup_steps: 0
load_in_4bit: false
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, gate_proj, up_proj, down_proj]"
sed -i "s|^model_name: .*|model_name: \"$fbase\"|" "$tmp/q35.yaml"
run "$tmp/q35.yaml"
ok "qwen35: LoRA training on every projection PEFT adapts finishes (exit $rc)" test "$rc" = 0
logits "$tmp/q35.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/q35/lora"
hfq "qwen35: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
    peft "$fbase" "$tmp/q35/lora" "$tmp/q35.l.ids" "$tmp/q35.l"
logits "$tmp/q35p" "$fbase" "$pr" --no-4bit --adapter "$tmp/q35peft"
hfq "qwen35: ptrain reads an adapter PEFT wrote on q_proj, in_proj_qkv, in_proj_a, out_proj (r 8, rsLoRA): PEFT's logits" \
    peft "$fbase" "$tmp/q35peft" "$tmp/q35p.ids" "$tmp/q35p"
# merged: s·B·A added to each weight (q_proj's B rows in the file's interleaving of queries and gates), config.json the
# base's; transformers loads the f32 directory to ptrain's logits with the adapter, and the same adapter merged into
# the multimodal checkpoint (its text tower: the same weights) to the same logits
run export --model "$fbase" --adapter "$tmp/q35/lora" --out "$tmp/q35.x" --hf --dtype f32 --no-adapter-files
ok "qwen35: a merged Hugging Face directory (exit $rc)" test "$rc" = 0
hfq "qwen35: transformers loads the merged f32 directory: ptrain's logits with the adapter (1e-4)" \
    merged "$tmp/q35.x/merged" "$tmp/q35.l.ids" "$tmp/q35.l" 1e-4
run export --model "$PTRAIN_SRCDIR/tests/data/qwen35-vl/hf" --adapter "$tmp/q35/lora" --out "$tmp/q35vl.x" --hf --dtype f32 \
    --no-adapter-files
ok "qwen3_5 (multimodal): a merged Hugging Face directory (exit $rc)" test "$rc" = 0
hfq "qwen3_5: transformers loads the merged multimodal f32 directory: the text model's logits with the adapter (1e-4)" \
    merged "$tmp/q35vl.x/merged" "$tmp/q35.l.ids" "$tmp/q35.l" 1e-4
# gemma4 (KV-shared layers, k_eq_v, per-layer inputs): PEFT loads the adapter ptrain trains on every projection PEFT
# adapts there (no k/v_proj on the shared layers, no v_proj on the k_eq_v global layers), and ptrain reads PEFT's own
gbase="$PTRAIN_SRCDIR/tests/data/gemma4/hf32"
tiny_config "$tmp/gm4.yaml" "$tmp/gm4" "max_steps: 8
learning_rate: 0.01
warmup_steps: 0
load_in_4bit: false
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
sed -i "s|^model_name: .*|model_name: \"$gbase\"|" "$tmp/gm4.yaml"
run "$tmp/gm4.yaml"
ok "gemma4: LoRA training on every projection PEFT adapts finishes (exit $rc)" test "$rc" = 0
logits "$tmp/gm4.l" "$gbase" "$pr" --no-4bit --adapter "$tmp/gm4/lora"
hfq "gemma4: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
    peft "$gbase" "$tmp/gm4/lora" "$tmp/gm4.l.ids" "$tmp/gm4.l"
run export --model "$gbase" --adapter "$tmp/gm4/lora" --out "$tmp/gm4x" --hf --dtype f32
ok "gemma4: the merged f32 directory is written (exit $rc)" test "$rc" = 0
hfq "gemma4: transformers loads the merged f32 directory: ptrain's logits with the adapter" \
    merged "$tmp/gm4x/merged" "$tmp/gm4.l.ids" "$tmp/gm4.l" 1e-4
# the multimodal gemma4 checkpoint (vision and audio towers, 0-dimensional clipping bounds among them): its text tower
# trains; PEFT loads the adapter onto the whole model, transformers the merged directory (the towers copied as stored)
mbase="$PTRAIN_SRCDIR/tests/data/gemma4-mm/hf"
sed -e "s|^model_name: .*|model_name: \"$mbase\"|" -e "s|$tmp/gm4|$tmp/gm4m|g" -e "s/^max_steps: 8/max_steps: 4/" "$tmp/gm4.yaml" \
    >"$tmp/gm4m.yaml"
run "$tmp/gm4m.yaml"
ok "gemma4 (multimodal): LoRA training of the text tower finishes (exit $rc)" test "$rc" = 0
logits "$tmp/gm4m.l" "$mbase" "$pr" --no-4bit --adapter "$tmp/gm4m/lora"
hfq "gemma4 (multimodal): PEFT loads ptrain's adapter onto Gemma4ForConditionalGeneration: ptrain's logits" \
    peft "$mbase" "$tmp/gm4m/lora" "$tmp/gm4m.l.ids" "$tmp/gm4m.l"
run export --model "$mbase" --adapter "$tmp/gm4m/lora" --out "$tmp/gm4mx" --hf --dtype f32
ok "gemma4 (multimodal): the merged f32 directory is written (exit $rc)" test "$rc" = 0
hfq "gemma4 (multimodal): transformers loads the merged f32 directory: ptrain's logits with the adapter" \
    merged "$tmp/gm4mx/merged" "$tmp/gm4m.l.ids" "$tmp/gm4m.l" 1e-4
run export --model "$gbase" --adapter "$tmp/gm4/lora" --out "$tmp/gm4g" --gguf f32
ok "gemma4: a merged GGUF export refused, saying so (exit $rc)" contains "$err" \
    "a merged GGUF export (--gguf, --ollama) is not available for gemma4 models yet"
"$PY" "$PTRAIN_SRCDIR/tests/export/hf_check.py" make-peft "$gbase" "$tmp/gm4peft" "" q_proj,k_proj,v_proj,down_proj \
    >"$tmp/gm4make.out" 2>&1 || sed 's/^/# /' "$tmp/gm4make.out"
logits "$tmp/gm4p" "$gbase" "$pr" --no-4bit --adapter "$tmp/gm4peft"
hfq "gemma4: ptrain reads an adapter PEFT wrote on q_proj, k_proj, v_proj, down_proj (r 8, rsLoRA): PEFT's logits" \
    peft "$gbase" "$tmp/gm4peft" "$tmp/gm4p.ids" "$tmp/gm4p"
# smollm3 with a NoPE layer every 5th layer: llama.cpp cannot run it so, so no GGUF
s5="$tmp/s3p5"
mkdir -p "$s5"
for f in "$PTRAIN_SRCDIR"/tests/data/smollm3/hf/*; do ln -s "$f" "$s5/"; done
rm "$s5/config.json"
"$PY" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["no_rope_layers"] = [1, 1, 1, 1, 0]; json.dump(c, open(sys.argv[2], "w"))' \
    "$PTRAIN_SRCDIR/tests/data/smollm3/hf/config.json" "$s5/config.json"
run export --model "$s5" --out "$tmp/s3p5x" --gguf f32
ok "smollm3 with RoPE left out every 5th layer: GGUF refused, saying why" contains "$err" \
    "no_rope_layers leaves RoPE out on layers l with (l + 1) % 5 == 0; llama.cpp's smollm3 leaves it out on every 4th"

# --- Qwen3 (q/k norms per head, head_dim 24 against 64/4 heads): its tiny HF model as a base, and
# as a GGUF base that ptrain export makes (transformers' GGUF reader takes Qwen3's head size as 128
# whatever the file says, so PEFT is checked on the HF base only)
fbase="$PTRAIN_SRCDIR/tests/data/qwen3/hf"
train8 "$tmp/q3.yaml" "$tmp/q3" "$fbase"
logits "$tmp/q3.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/q3/lora"
hfq "qwen3: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
    peft "$fbase" "$tmp/q3/lora" "$tmp/q3.l.ids" "$tmp/q3.l"
run export --model "$fbase" --adapter "$tmp/q3/lora" --out "$tmp/q3.x" --hf --dtype f32 --no-adapter-files
hfq "qwen3: transformers loads the merged f32 directory: ptrain's logits with the adapter (1e-4)" \
    merged "$tmp/q3.x/merged" "$tmp/q3.l.ids" "$tmp/q3.l" 1e-4
run export --model "$fbase" --out "$tmp/q3g" --gguf f32
q3base="$tmp/q3g/merged-f32.gguf"
train8 "$tmp/q3g.yaml" "$tmp/q3grun" "$q3base"
logits "$tmp/q3g.l" "$q3base" "$pr" --no-4bit --adapter "$tmp/q3grun/lora"
ok "qwen3 GGUF base: llama.cpp runs base + adapter.gguf as ptrain does" \
    llama "$q3base" --lora "$tmp/q3grun/lora/adapter.gguf" "$tmp/q3g.l.ids" "$tmp/q3g.l" 1e-3
run export --model "$q3base" --adapter "$tmp/q3grun/lora" --out "$tmp/q3m" --gguf q8_0 --hf --dtype f32 --no-adapter-files
logits "$tmp/q3m.l" "$tmp/q3m/merged-q8_0.gguf" "$pr" --no-4bit
ok "qwen3: llama.cpp loads the merged q8_0 GGUF and runs ptrain's greedy tokens" \
    llama "$tmp/q3m/merged-q8_0.gguf" "$tmp/q3m.l.ids" "$tmp/q3m.l" 0.15
hfq "qwen3: transformers loads the merged directory from the GGUF base: ptrain's logits" \
    merged "$tmp/q3m/merged" "$tmp/q3g.l.ids" "$tmp/q3g.l" 1e-4

# --- Gemma 3 (q/k norms as 1 + w, 5 local layers of 6 on their own rope base): its tiny HF model as
# a base; and, with query_pre_attn_scalar = head_dim (llama.cpp derives the scale from the head size),
# as a GGUF base that ptrain export makes
fbase="$PTRAIN_SRCDIR/tests/data/gemma3/hf"
train8 "$tmp/g3.yaml" "$tmp/g3" "$fbase"
logits "$tmp/g3.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/g3/lora"
hfq "gemma3: PEFT loads ptrain's adapter onto the HF base: ptrain's logits" \
    peft "$fbase" "$tmp/g3/lora" "$tmp/g3.l.ids" "$tmp/g3.l"
run export --model "$fbase" --adapter "$tmp/g3/lora" --out "$tmp/g3.x" --hf --dtype f32 --no-adapter-files
hfq "gemma3: transformers loads the merged f32 directory: ptrain's logits with the adapter (1e-4)" \
    merged "$tmp/g3.x/merged" "$tmp/g3.l.ids" "$tmp/g3.l" 1e-4
run export --model "$fbase" --out "$tmp/g3no" --gguf f32
ok "gemma3 with query_pre_attn_scalar != head_dim: GGUF refused, saying why" contains "$err" "query_pre_attn_scalar 20"
g3="$tmp/g3base"
mkdir -p "$g3"
for f in "$fbase"/*; do ln -s "$f" "$g3/"; done
rm "$g3/config.json"
sed 's/"query_pre_attn_scalar": 20/"query_pre_attn_scalar": 24/' "$fbase/config.json" >"$g3/config.json"
run export --model "$g3" --out "$tmp/g3g" --gguf f32
g3base="$tmp/g3g/merged-f32.gguf"
train8 "$tmp/g3g.yaml" "$tmp/g3grun" "$g3base"
logits "$tmp/g3g.l" "$g3base" "$pr" --no-4bit --adapter "$tmp/g3grun/lora"
ok "gemma3 GGUF base: llama.cpp runs base + adapter.gguf as ptrain does" \
    llama "$g3base" --lora "$tmp/g3grun/lora/adapter.gguf" "$tmp/g3g.l.ids" "$tmp/g3g.l" 1e-3
run export --model "$g3base" --adapter "$tmp/g3grun/lora" --out "$tmp/g3m" --gguf q8_0 --hf --dtype f32 --no-adapter-files
logits "$tmp/g3m.l" "$tmp/g3m/merged-q8_0.gguf" "$pr" --no-4bit
ok "gemma3: llama.cpp loads the merged q8_0 GGUF and runs ptrain's greedy tokens" \
    llama "$tmp/g3m/merged-q8_0.gguf" "$tmp/g3m.l.ids" "$tmp/g3m.l" 0.15
hfq "gemma3: transformers loads the merged directory from the GGUF base (norms back to w): ptrain's logits" \
    merged "$tmp/g3m/merged" "$tmp/g3g.l.ids" "$tmp/g3g.l" 1e-4

# --- multimodal checkpoints' text towers (make_wrapper_goldens.py): mistral3 (untied, language_model.model.*
# files) and gemma3 (tied, model.language_model.*): PEFT loads ptrain's adapter (its names under
# model.language_model, its target_modules a pattern within it) onto transformers' whole multimodal model, and
# the merged directory, the wrapper with its vision tower copied, loads as that model; the merged f32 GGUF of the
# text tower (mistral3: llama.cpp's mistral3, YaRN and the query temperature; gemma3 with query_pre_attn_scalar =
# head_dim, as llama.cpp's gemma3 fixes it) runs in llama.cpp as ptrain runs the multimodal base with the adapter
# (2e-3: llama.cpp's f16 KV cache, 6.2e-4 and 8.3e-4 measured)
for mm in mistral3 gemma3-mm; do
    fbase="$PTRAIN_SRCDIR/tests/data/$mm/hf"
    train8 "$tmp/$mm.yaml" "$tmp/$mm" "$fbase"
    logits "$tmp/$mm.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/$mm/lora"
    ok "$mm: the adapter's names are PEFT's for the multimodal model" \
        grep -q 'base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight' \
        "$tmp/$mm/lora/adapter_model.safetensors"
    hfq "$mm: PEFT loads ptrain's adapter onto the multimodal HF base: ptrain's logits" \
        peft "$fbase" "$tmp/$mm/lora" "$tmp/$mm.l.ids" "$tmp/$mm.l"
    run export --model "$fbase" --adapter "$tmp/$mm/lora" --out "$tmp/$mm.x" --hf --dtype f32 --no-adapter-files
    hfq "$mm: transformers loads the merged f32 multimodal directory: ptrain's logits with the adapter (1e-4)" \
        merged "$tmp/$mm.x/merged" "$tmp/$mm.l.ids" "$tmp/$mm.l" 1e-4
    gdir="$fbase"
    if [ "$mm" = gemma3-mm ]; then
        gdir="$tmp/g3mmbase"
        mkdir -p "$gdir"
        for f in "$fbase"/*; do ln -s "$f" "$gdir/"; done
        rm "$gdir/config.json"
        sed 's/"query_pre_attn_scalar": 20/"query_pre_attn_scalar": 24/' "$fbase/config.json" >"$gdir/config.json"
        logits "$tmp/$mm.gl" "$gdir" "$pr" --no-4bit --adapter "$tmp/$mm/lora"
    else
        cp "$tmp/$mm.l" "$tmp/$mm.gl" && cp "$tmp/$mm.l.ids" "$tmp/$mm.gl.ids"
    fi
    run export --model "$gdir" --adapter "$tmp/$mm/lora" --out "$tmp/$mm.g" --gguf f32 --no-adapter-files
    ok "$mm: the merged GGUF of the text tower is written" test "$rc" = 0 -a -s "$tmp/$mm.g/merged-f32.gguf"
    ok "$mm: llama.cpp runs the text tower's merged GGUF as ptrain runs the multimodal base with the adapter" \
        llama "$tmp/$mm.g/merged-f32.gguf" "$tmp/$mm.gl.ids" "$tmp/$mm.gl" 2e-3
done

# --- Ministral 3 (YaRN over 8 original positions, the query temperature): the merged GGUF is llama.cpp's
# mistral3 (attention.temperature_scale, rope.scaling.yarn_log_multiplier), which llama.cpp runs as ptrain runs
# the HF base with the adapter (the prompt's positions cross the temperature's steps)
fbase="$PTRAIN_SRCDIR/tests/data/ministral3/hf"
train8 "$tmp/m3.yaml" "$tmp/m3" "$fbase"
logits "$tmp/m3.l" "$fbase" "$pr" --no-4bit --adapter "$tmp/m3/lora"
run export --model "$fbase" --adapter "$tmp/m3/lora" --out "$tmp/m3x" --gguf f32 --no-adapter-files
ok "ministral3: the merged GGUF is written (mistral3)" test "$rc" = 0 -a -s "$tmp/m3x/merged-f32.gguf"
ok "ministral3: llama.cpp runs the merged mistral3 GGUF as ptrain runs the base with the adapter" \
    llama "$tmp/m3x/merged-f32.gguf" "$tmp/m3.l.ids" "$tmp/m3.l" 1e-3

# --- a GGUF base: SmolLM2-135M-Instruct Q4_1
if [ -z "$model" ]; then
    skip_test "the tools on a GGUF base" "SmolLM2-135M-Instruct.Q4_1.gguf not found (share/scripts/fetch-model.sh fetches it)"
    hf_flush
    done_testing
    exit $?
fi
smollm_config "$tmp/s.yaml" "$tmp/srun" "$model"
run "$tmp/s.yaml"
slora="$tmp/srun/lora"
pr="The capital of France is"
logits "$tmp/s" "$model" "$pr" --adapter "$slora"
hfq "PEFT loads ptrain's adapter onto the GGUF base (transformers dequantizes it): ptrain's logits" \
    peft "$model" "$slora" "$tmp/s.ids" "$tmp/s"

# llama.cpp with a strong adapter: PEFT's random one, turned into adapter.gguf by ptrain export
run export --model "$model" --adapter "$tmp/speft" --out "$tmp/sx"
logits "$tmp/sp" "$model" "$pr" --adapter "$tmp/speft"
ok "llama.cpp runs base + adapter.gguf (q/k/v/down, rsLoRA) as ptrain does" llama "$model" --lora "$tmp/sx/adapter.gguf" "$tmp/sp.ids" "$tmp/sp" 0.1
! llama "$model" "$tmp/sp.ids" "$tmp/sp" 0.1 >/dev/null
ok "... and without the adapter llama.cpp does not (the adapter matters)" test $? = 0
ok "llama.cpp runs base + the adapter.gguf of training as ptrain does" llama "$model" --lora "$slora/adapter.gguf" "$tmp/s.ids" "$tmp/s" 0.1

run export --model "$model" --adapter "$tmp/speft" --out "$tmp/g" --gguf f32,f16,bf16,q8_0,q4_0,q4_1,q4_k_m --no-adapter-files
for q in f32:1e-3 f16:1e-2 bf16:2e-2 q8_0:0.15 q4_0:0.15 q4_1:0.15 q4_k_m:0.15; do
    logits "$tmp/g.${q%:*}" "$tmp/g/merged-${q%:*}.gguf" "$pr" --no-4bit
    ok "llama.cpp loads merged-${q%:*}.gguf and runs ptrain's greedy tokens" llama "$tmp/g/merged-${q%:*}.gguf" \
        "$tmp/g.${q%:*}.ids" "$tmp/g.${q%:*}" "${q#*:}"
done

run export --model "$model" --adapter "$slora" --out "$tmp/sm" --hf --dtype f32 --no-adapter-files
if [ "$rc" = 0 ]; then
    hfq "transformers loads the merged f32 directory (GGUF base): ptrain's logits with the adapter (1e-4)" \
        merged "$tmp/sm/merged" "$tmp/s.ids" "$tmp/s" 1e-4
else
    ok "export --hf from a GGUF base (exit $rc: $err)" false
fi
hf_flush
done_testing
