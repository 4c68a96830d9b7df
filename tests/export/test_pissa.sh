#!/bin/sh
# test_pissa.sh — init_lora_weights pissa, pissa_niter_N and olora (issue 46) on the tiny fp32 Llama, held to PEFT
# 0.21 (tests/export/select_check.py check): ptrain trains from the decomposition with the residual
# as its base; the adapter it saves converted for the original base (rank 2r, init true) gives PEFT
# ptrain's logits on the original model, and so does residual_adapter/ (PEFT's own save_pretrained
# form, init_lora_weights "pissa"/"olora": PEFT recomputes the residual base on loading; for pissa_niter_2 only
# the converted one, PEFT's random matrix being torch's); a run
# resumed from its checkpoint (which recomputes the residual base) ends with the straight run's
# adapter, bit for bit; the combinations that need the original base are refused. The init math
# itself is test_adapter_decomp's. Skips, saying why, without the Python environment of
# share/scripts/test-python.sh.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
. "$PTRAIN_SRCDIR/tests/export/peft_env.sh"
peft_require "pissa and olora against PEFT" torch transformers peft
logits() { # logits OUT ADAPTER: the prompt's logits and ids on the original base with ADAPTER
    "$P" generate --model "$base" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$1" --ids "$1.ids" \
        --no-4bit --adapter "$2" >/dev/null 2>"$tmp/gen.err" || cat "$tmp/gen.err"
}
base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
# config CONFIG OUT [yaml]: 4 steps at lr 0.01 on the fp32 base, targets gate_proj and down_proj
config() {
    tiny_config "$1" "$2" "max_steps: 4
learning_rate: 0.01
warmup_steps: 0
lr_scheduler_type: constant
load_in_4bit: false
lora_target_modules: [gate_proj, down_proj]
$3"
    sed -i "s|^model_name: .*|model_name: \"$base\"|" "$1"
}

for init in pissa olora pissa_niter_2; do
    config "$tmp/$init.yaml" "$tmp/$init" "init_lora_weights: $init"
    run "$tmp/$init.yaml"
    ok "a run with init_lora_weights $init trains (exit $rc)" test "$rc" = 0
    [ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
    ok "$init: the adapter for the residual base is in residual_adapter/, with init_lora_weights \"$init\"" \
        grep -q "\"init_lora_weights\": \"$init\"" "$tmp/$init/lora/residual_adapter/adapter_config.json"
    ok "$init: the adapter beside it is converted for the original base (r 8, lora_alpha 16, init true)" \
        "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c["r"] == 8 and c["lora_alpha"] == 16 and c["init_lora_weights"] is True))' \
        "$tmp/$init/lora/adapter_config.json"
    logits "$tmp/l$init" "$tmp/$init/lora"
done
# PEFT's selectors: the converted adapter keeps them, its rank_pattern and alpha_pattern doubled
config "$tmp/sel.yaml" "$tmp/sel" 'init_lora_weights: pissa
layers_to_transform: [1]
rank_pattern: {down_proj: 2}
alpha_pattern: {gate_proj: 3}'
run "$tmp/sel.yaml"
ok "a pissa run with layers_to_transform, rank_pattern and alpha_pattern trains (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
logits "$tmp/lsel" "$tmp/sel/lora"
"$PY" "$PTRAIN_SRCDIR/tests/export/select_check.py" check "$base" \
    "$tmp/sel/lora:$tmp/lsel.ids:$tmp/lsel:model.layers.1.mlp.gate_proj=8,model.layers.1.mlp.down_proj=4,model.layers.0.mlp.gate_proj=-" \
    "$tmp/sel/lora/residual_adapter:$tmp/lsel.ids:$tmp/lsel:model.layers.1.mlp.down_proj=2,model.layers.0.mlp.down_proj=-" \
    "$tmp/pissa/lora:$tmp/lpissa.ids:$tmp/lpissa:model.layers.0.mlp.gate_proj=8,model.layers.1.mlp.down_proj=8" \
    "$tmp/pissa/lora/residual_adapter:$tmp/lpissa.ids:$tmp/lpissa:model.layers.0.mlp.gate_proj=4" \
    "$tmp/olora/lora:$tmp/lolora.ids:$tmp/lolora:model.layers.0.mlp.gate_proj=8" \
    "$tmp/olora/lora/residual_adapter:$tmp/lolora.ids:$tmp/lolora:model.layers.0.mlp.gate_proj=4" \
    "$tmp/pissa_niter_2/lora:$tmp/lpissa_niter_2.ids:$tmp/lpissa_niter_2:model.layers.0.mlp.gate_proj=8" >"$tmp/check.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights\|^ *$" "$tmp/check.out" | sed 's/^/# /'
ok "PEFT gives ptrain's logits with the converted adapters on the original model (pissa, olora, pissa_niter_2, pissa with selectors: patterns doubled), and with residual_adapter/ (PEFT recomputing the residual base; not for pissa_niter, whose random matrix is torch's there)" \
    test "$rc" = 0

# resume: 2 steps, then on to 4 from the checkpoint (the residual base recomputed): the straight run's adapter
config "$tmp/r.yaml" "$tmp/r" "init_lora_weights: pissa
save_steps: 2"
sed 's/^max_steps: 4$/max_steps: 2/' "$tmp/r.yaml" >"$tmp/r2.yaml"
run "$tmp/r2.yaml"
cp "$tmp/r.yaml" "$tmp/r4.yaml"
printf 'resume_from_checkpoint: true\n' >>"$tmp/r4.yaml"
run "$tmp/r4.yaml"
ok "the pissa run resumes from its checkpoint (exit $rc)" test "$rc" = 0
ok "resumed, it ends with the straight run's adapters, bit for bit (converted and residual)" \
    sh -c "cmp '$tmp/pissa/lora/adapter_model.safetensors' '$tmp/r/lora/adapter_model.safetensors' &&
           cmp '$tmp/pissa/lora/residual_adapter/adapter_model.safetensors' '$tmp/r/lora/residual_adapter/adapter_model.safetensors'"

# refusals
run generate --model "$base" --adapter "$tmp/r/checkpoint-2.h5" --prompt "$pr" --max-new-tokens 1 --no-4bit
ok "a pissa checkpoint is refused as an adapter of the original model, saying why" \
    contains "$err" "the checkpoint's adapters were trained with init_lora_weights pissa, on the residual base"
sed 's/^init_lora_weights: pissa$/init_lora_weights: olora/' "$tmp/r4.yaml" >"$tmp/r5.yaml"
sed -i 's/^max_steps: 4$/max_steps: 6/' "$tmp/r5.yaml"
run "$tmp/r5.yaml"
ok "resuming a pissa run as olora is refused" contains "$err" "was trained with init_lora_weights pissa, this run has olora"
config "$tmp/b2.yaml" "$tmp/b2" "init_lora_weights: corda"
run check "$tmp/b2.yaml"
ok "corda is refused, saying why" contains "$err" "it needs data"
done_testing
