#!/bin/sh
# test_peft_select.sh — PEFT's selectors (issue 46): layers_to_transform with layers_pattern,
# finetune_last_n_layers, rank_pattern and alpha_pattern, held to PEFT 0.21 on the tiny fp32 Llama
# (tests/export/select_check.py): ptrain trains adapters only where PEFT would put them, with the
# ranks and alphas PEFT would give them; PEFT loads them (adapter_config.json carries the selectors)
# with ptrain's logits; ptrain reads adapters PEFT wrote with selectors (Python regex syntax) with
# PEFT's logits; llama.cpp runs the adapter.gguf (alphas folded into B) as ptrain does; a run with
# selectors resumed from its checkpoint ends with the same adapter bits; on phi3 (fused qkv_proj, gate_up_proj)
# target_modules by name, all-linear and regex select what PEFT selects. Skips, saying why, without
# the Python environment of share/scripts/test-python.sh.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
. "$PTRAIN_SRCDIR/tests/export/peft_env.sh"
peft_require "PEFT's selectors against PEFT" torch transformers peft llama_cpp
logits() { # logits OUT ADAPTER: the prompt's logits and ids on the base with ADAPTER
    "$P" generate --model "$base" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$1" --ids "$1.ids" \
        --no-4bit --adapter "$2" >/dev/null 2>"$tmp/gen.err" || cat "$tmp/gen.err"
}
base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
# config CONFIG OUT [yaml]: 8 steps at lr 0.01 on the fp32 base; train: the same, run
config() {
    tiny_config "$1" "$2" "max_steps: 8
learning_rate: 0.01
warmup_steps: 0
lr_scheduler_type: constant
load_in_4bit: false
$3"
    sed -i "s|^model_name: .*|model_name: \"$base\"|" "$1"
}
train() {
    config "$@"
    run "$1"
}

"$PY" "$PTRAIN_SRCDIR/tests/export/select_check.py" make "$base" "$tmp/peft" >"$tmp/py.out" 2>&1 ||
    sed 's/^/# /' "$tmp/py.out"
sel='layers_to_transform: [1]
layers_pattern: layers
rank_pattern: {q_proj: 2, "layers\\.\\d+\\.mlp\\.down_proj": 6, "(?:k|v)_proj": 3}
alpha_pattern: {v_proj: 3, model.layers.1.self_attn.o_proj: 5.5}'
train "$tmp/s.yaml" "$tmp/s" "$sel"
ok "a run with layers_to_transform, layers_pattern, rank_pattern and alpha_pattern trains (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
train "$tmp/n.yaml" "$tmp/n" "finetune_last_n_layers: 1"
ok "a run with finetune_last_n_layers: 1 trains (exit $rc)" test "$rc" = 0
names=$("$PY" -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n)); print(" ".join(sorted(k.split("layers.")[1].split(".lora")[0]+"="+str(min(v["shape"])) for k,v in h.items() if "lora_A" in k)))' "$tmp/s/lora/adapter_model.safetensors")
expect_eq "the adapter has layer 1's modules only, with the patterns' ranks" \
    "1.mlp.down_proj=6 1.mlp.gate_proj=4 1.mlp.up_proj=4 1.self_attn.k_proj=3 1.self_attn.o_proj=4 1.self_attn.q_proj=2 1.self_attn.v_proj=3" "$names"
ok "adapter_config.json carries layers_to_transform and the patterns" \
    grep -q '"layers_to_transform": \[' "$tmp/s/lora/adapter_config.json"
ok "finetune_last_n_layers: 1 is layers_to_transform [1] in adapter_config.json" \
    "$PY" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["layers_to_transform"] != [1])' "$tmp/n/lora/adapter_config.json"

logits "$tmp/ls" "$tmp/s/lora"
logits "$tmp/ln" "$tmp/n/lora"
logits "$tmp/lp" "$tmp/peft/sel"
logits "$tmp/lq" "$tmp/peft/pat"
run export --model "$base" --adapter "$tmp/peft/sel" --out "$tmp/back" # ptrain writes PEFT's adapter back
logits "$tmp/lb" "$tmp/back"
# llama.cpp: the base as GGUF, the selectors' adapter.gguf (alphas folded into B)
run export --model "$base" --out "$tmp/g" --gguf f32
"$P" generate --model "$tmp/g/merged-f32.gguf" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$tmp/lg" \
    --ids "$tmp/lg.ids" --no-4bit --adapter "$tmp/s/lora/adapter.gguf" >/dev/null 2>&1
want_sel="model.layers.1.self_attn.q_proj=2,model.layers.1.self_attn.k_proj=3,model.layers.1.self_attn.v_proj=3,model.layers.1.mlp.down_proj=6,model.layers.1.mlp.up_proj=4,model.layers.0.self_attn.q_proj=-,model.layers.0.mlp.down_proj=-"
"$PY" "$PTRAIN_SRCDIR/tests/export/select_check.py" check "$base" "$tmp/s/lora:$tmp/ls.ids:$tmp/ls:$want_sel" \
    "$tmp/n/lora:$tmp/ln.ids:$tmp/ln:model.layers.1.mlp.up_proj=4,model.layers.0.mlp.up_proj=-" \
    "$tmp/peft/sel:$tmp/lp.ids:$tmp/lp:$want_sel" \
    "$tmp/peft/pat:$tmp/lq.ids:$tmp/lq:model.layers.0.mlp.up_proj=2,model.layers.1.mlp.up_proj=8" \
    "$tmp/back:$tmp/lb.ids:$tmp/lb:$want_sel" \
    --llama "$tmp/g/merged-f32.gguf" --lora "$tmp/s/lora/adapter.gguf" "$tmp/lg.ids" "$tmp/lg" 1e-3 >"$tmp/check.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights" "$tmp/check.out" | sed 's/^/# /'
ok "PEFT loads ptrain's adapters with selectors (layers_to_transform + patterns, finetune_last_n_layers) and ptrain reads PEFT's (also written back): the same logits and ranks; llama.cpp runs adapter.gguf as ptrain does" \
    test "$rc" = 0

# resume: 4 steps, then on to 8 from the checkpoint: the adapter of the straight run, bit for bit
config "$tmp/r.yaml" "$tmp/r" "$sel
save_steps: 4"
sed 's/^max_steps: 8$/max_steps: 4/' "$tmp/r.yaml" >"$tmp/r4.yaml"
run "$tmp/r4.yaml"
cp "$tmp/r.yaml" "$tmp/r2.yaml"
printf 'resume_from_checkpoint: true\n' >>"$tmp/r2.yaml"
run "$tmp/r2.yaml"
ok "the run with selectors resumes from its checkpoint (exit $rc)" test "$rc" = 0
ok "resumed, it ends with the straight run's adapter, bit for bit" \
    cmp "$tmp/s/lora/adapter_model.safetensors" "$tmp/r/lora/adapter_model.safetensors"
sed -i 's/^rank_pattern: .*/rank_pattern: {q_proj: 3}/' "$tmp/r2.yaml"
run "$tmp/r2.yaml"
ok "resuming with other rank_pattern is refused, saying why" contains "$err" "adapters on other layers or with other ranks"

# phi3, whose files fuse q/k/v (qkv_proj) and gate/up (gate_up_proj): target_modules as PEFT takes them. Names (the
# four modules, some of them), all-linear and the llama names: ptrain's adapter has the modules PEFT makes for them
# and PEFT loads it onto exactly those, with ptrain's logits. The llama names are ptrain's spelling of the fused
# modules they are parts of (docs/configuration.md): PEFT itself would find only o_proj and down_proj among them,
# so that case is held to the fused list ptrain writes in adapter_config.json. PEFT's adapter made with a regex
# (qkv_proj and down_proj) loads in ptrain with PEFT's logits.
p3="$PTRAIN_SRCDIR/tests/data/phi3/hf"
p3cases=""
i=0
for c in "qkv_proj, o_proj, gate_up_proj, down_proj;qkv_proj,o_proj,gate_up_proj,down_proj" \
    "qkv_proj, down_proj;qkv_proj,down_proj" "o_proj, gate_up_proj;o_proj,gate_up_proj" "all-linear;all-linear" \
    "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;qkv_proj,o_proj,gate_up_proj,down_proj"; do
    i=$((i + 1))
    config "$tmp/p3-$i.yaml" "$tmp/p3-$i" "lora_target_modules: [${c%;*}]"
    sed -i -e "s|^model_name: .*|model_name: \"$p3\"|" -e 's/^max_steps: 8$/max_steps: 2/' "$tmp/p3-$i.yaml"
    run "$tmp/p3-$i.yaml"
    ok "phi3 with lora_target_modules [${c%;*}] trains (exit $rc)" test "$rc" = 0
    "$P" generate --model "$p3" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$tmp/p3l-$i" \
        --ids "$tmp/p3l-$i.ids" --no-4bit --adapter "$tmp/p3-$i/lora" >/dev/null 2>&1
    p3cases="$p3cases ${c#*;};$tmp/p3-$i/lora;$tmp/p3l-$i.ids;$tmp/p3l-$i"
done
"$PY" "$PTRAIN_SRCDIR/tests/export/select_check.py" phi3-make "$p3" "$tmp/p3peft" >"$tmp/p3py.out" 2>&1 ||
    sed 's/^/# /' "$tmp/p3py.out"
"$P" generate --model "$p3" --prompt "$pr" --temperature 0 --max-new-tokens 8 --logits "$tmp/p3r" --ids "$tmp/p3r.ids" \
    --no-4bit --adapter "$tmp/p3peft" >/dev/null 2>"$tmp/p3r.err" || sed 's/^/# /' "$tmp/p3r.err"
# shellcheck disable=SC2086 # p3cases: one word a case
"$PY" "$PTRAIN_SRCDIR/tests/export/select_check.py" phi3 "$p3" $p3cases \
    ".*\\.(qkv_proj|down_proj)\$;$tmp/p3peft;$tmp/p3r.ids;$tmp/p3r" >"$tmp/p3check.out" 2>&1
rc=$?
grep -v -i "warn\|Loading weights" "$tmp/p3check.out" | sed 's/^/# /'
ok "phi3: each target_modules form selects the modules PEFT selects, PEFT loads the adapters onto them with ptrain's logits, and ptrain reads PEFT's regex-targeted adapter with PEFT's logits" \
    test "$rc" = 0

# refusals
printf 'dataset:\n  - name: d.jsonl\nlayers_pattern: layers\n' >"$tmp/bad1.yaml"
run check "$tmp/bad1.yaml"
ok "layers_pattern without layers_to_transform is refused, as PEFT refuses it" contains "$err" "layers_pattern: is used only with layers_to_transform"
printf 'dataset:\n  - name: d.jsonl\nlayers_to_transform: [1]\nfinetune_last_n_layers: 2\n' >"$tmp/bad2.yaml"
run check "$tmp/bad2.yaml"
ok "layers_to_transform with finetune_last_n_layers is refused" contains "$err" "give one of the two keys"
train "$tmp/b3.yaml" "$tmp/b3" 'rank_pattern: {"(?=q)_proj": 2}'
ok "a look-ahead in rank_pattern is refused, naming the pattern" contains "$err" 'rank_pattern: the pattern "(?=q)_proj" cannot be used'
train "$tmp/b4.yaml" "$tmp/b4" 'finetune_last_n_layers: 3'
ok "finetune_last_n_layers past the model's layers is refused" contains "$err" "finetune_last_n_layers is 3, but the model has 2 layers"
done_testing
