#!/bin/sh
# test_moe_export.sh — exports of the mixtures of experts (issue 38), loaded by the tools people use
# them with (the Python environment of share/scripts/test-python.sh, given as $PTRAIN_PYTHON).
# A LoRA adapter on the attention, the experts and the router (PEFT's target_parameters) of the tiny Mixtral
# (make_mixtral_goldens.py), trained 4 hard steps:
#   transformers loads the merged Hugging Face directories (f32, from the HF base stored expert by expert and
#     from the fused one: each expert's s·Bₑ Aₑ merged into its weight) with ptrain's logits of base + adapter
#     (1e-4 relative), every expert weight changed;
#   llama.cpp (llama-cpp-python) runs the base GGUF (make_moe_gguf_goldens.py: the same weights as
#     llama.cpp's converter writes them, architecture llama with experts) with ptrain's adapter.gguf (its
#     3-D ffn_*_exps pairs), and the merged GGUFs (f32 and q8_0, from the GGUF base), on ptrain's ids
#     (llama_check.py with an f32 KV cache: the prompt's logits within 1e-4 on the f32 files, 0.15 on q8_0,
#     as test_tools.sh allows: llama.cpp multiplies q8_0 weights with 8-bit activations; its greedy choice
#     must be ptrain's).
#     ptrain's reference is the HF base with its sliding window turned off (llama.cpp runs llama files
#     with full attention).
# The same for the tiny Qwen3-MoE: merged directories from its HF directories; its GGUF (every layer sparse,
# another model) trained on directly, run by llama.cpp (qwen3moe) with adapter.gguf and merged. Exports that
# would move experts between the formats are refused, naming what is built. Skips, saying why, without that
# environment.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
PY=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
D=$PTRAIN_SRCDIR/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

train() { # train NAME MODEL: an adapter on the attention, experts and router, 4 steps at a high rate
    tiny_config "$tmp/$1.yaml" "$tmp/$1" "learning_rate: 2e-2
warmup_steps: 0
max_steps: 4
seed: 5
load_in_4bit: false
chat_template: chatml
lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
target_parameters: [mlp.experts.gate_up_proj, mlp.experts.down_proj, mlp.gate.weight]"
    sed -i "s|^model_name: .*|model_name: \"$2\"|" "$tmp/$1.yaml"
    run train "$tmp/$1.yaml"
    expect_eq "$1: training exits 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
}
train mx "$D/mixtral/hf"
train q3 "$D/qwen3moe/hf"
ok "Mixtral: adapter.gguf has the experts' 3-D pairs" test -s "$tmp/mx/lora/adapter.gguf"

# refused: experts moved between formats
run export --model "$D/mixtral/hf" --adapter "$tmp/mx/lora" --out "$tmp/no1" --gguf q8_0
expect_eq "Mixtral, HF base to merged GGUF: exit 1" 1 "$rc"
ok "Mixtral, HF base to merged GGUF: names what is built" grep -q "merged GGUF (and ollama) exports of its experts from it are not built yet: export a merged Hugging Face directory from this base" "$tmp/err"
run export --model "$D/mixtral/gguf-f32.gguf" --adapter "$tmp/mx/lora" --out "$tmp/no2" --hf
expect_eq "Mixtral, GGUF base to merged HF: exit 1" 1 "$rc"
ok "Mixtral, GGUF base to merged HF: names what is built" grep -q "export a merged GGUF from this base" "$tmp/err"

if [ -z "$PY" ] || ! "$PY" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("torch", "transformers", "peft", "llama_cpp")))' 2>/dev/null; then
    skip_test "transformers and llama.cpp load ptrain's MoE exports" \
        "no Python with torch, transformers, peft and llama_cpp in \$PTRAIN_PYTHON (share/scripts/test-python.sh makes one)"
    done_testing
    exit $?
fi

hf_merged() { # hf_merged NAME BASE ADAPTER
    run export --model "$2" --adapter "$3" --out "$tmp/$1-x" --hf --dtype f32
    expect_eq "$1: export --hf exits 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
    "$P" generate --model "$2" --prompt "Arr, the sea is wide" --temperature 0 --max-new-tokens 2 --no-4bit \
        --adapter "$3" --logits "$tmp/$1.lg" --ids "$tmp/$1.ids" >/dev/null 2>"$tmp/gen.err"
    "$PY" - "$2" "$tmp/$1-x/merged" "$tmp/$1.ids" "$tmp/$1.lg" >"$tmp/py.out" 2>&1 <<'PY'
import sys
import numpy as np
import torch
from transformers import AutoModelForCausalLM
base, merged, ids_path, lg = sys.argv[1:]
ids = [int(x) for x in open(ids_path).read().split("\n")[0].split()]
models = {}
def logits(d):
    m = models[d] = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, experts_implementation="eager").eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0].numpy()
theirs, plain = logits(merged), logits(base)
sd, sb = models[merged].state_dict(), models[base].state_dict()
names = [k for k in sd if ".experts." in k or k.endswith("mlp.gate.weight")]
same = [k for k in names if torch.equal(sd[k], sb[k])]
print(f"{len(names) - len(same)} of {len(names)} expert and router tensors changed by the merge")
ours = np.fromfile(lg, dtype=np.float32).reshape(len(ids), -1)
rel = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
moved = float(np.abs(theirs - plain).max() / np.abs(theirs).max())
print(f"transformers on the merged directory: max relative difference {rel:.2e} from ptrain's base + adapter; "
      f"the merge moves the logits {moved:.2e}")
sys.exit(0 if rel <= 1e-4 and moved >= 1e-2 and names and not same else 1)
PY
    r=$?
    grep -v -i warn "$tmp/py.out" | sed 's/^/# /' | tail -3
    expect_eq "$1: transformers loads the merged directory with ptrain's logits" 0 "$r"
}
hf_merged Mixtral "$D/mixtral/hf" "$tmp/mx/lora"
fused() { # fused FAMILY: its hf-fused weights with hf's tokenizer (ptrain generate needs one)
    mkdir -p "$tmp/$1-fused"
    cp "$D/$1/hf-fused/model.safetensors" "$D/$1/hf-fused/config.json" "$D/$1/hf/tokenizer.json" \
        "$D/$1/hf/tokenizer_config.json" "$tmp/$1-fused/"
}
fused mixtral
fused qwen3moe
hf_merged Mixtral-fused "$tmp/mixtral-fused" "$tmp/mx/lora"
hf_merged Qwen3-MoE "$D/qwen3moe/hf" "$tmp/q3/lora"
hf_merged Qwen3-MoE-fused "$tmp/qwen3moe-fused" "$tmp/q3/lora"

llama() { "$PY" "$PTRAIN_SRCDIR/tests/export/llama_check.py" "$@" >"$tmp/py.out" 2>&1; r=$?; sed 's/^/# /' "$tmp/py.out"; return $r; }
# ptrain's reference for the GGUF: the HF base without its window, the same weights as gguf-f32.gguf
mkdir "$tmp/full"
cp "$D/mixtral/hf/model.safetensors" "$D/mixtral/hf/tokenizer.json" "$D/mixtral/hf/tokenizer_config.json" "$tmp/full/"
sed 's/"sliding_window": 12/"sliding_window": null/' "$D/mixtral/hf/config.json" >"$tmp/full/config.json"
"$P" generate --model "$tmp/full" --prompt "Arr, the sea is wide, me hearties" --temperature 0 --max-new-tokens 12 \
    --no-4bit --adapter "$tmp/mx/lora" --logits "$tmp/full.lg" --ids "$tmp/full.ids" >/dev/null 2>"$tmp/gen.err"
ok "Mixtral: ptrain's adapter.gguf is for architecture llama" "$PY" -c "
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
f = r.fields['general.architecture']
sys.exit(bytes(f.parts[f.data[0]]).decode() != 'llama')" "$tmp/mx/lora/adapter.gguf"
ok "Mixtral: llama.cpp runs the base GGUF with ptrain's adapter.gguf" \
    llama "$D/mixtral/gguf-f32.gguf" --lora "$tmp/mx/lora/adapter.gguf" --kv-f32 "$tmp/full.ids" "$tmp/full.lg" 1e-4
run export --model "$D/mixtral/gguf-f32.gguf" --adapter "$tmp/mx/lora" --out "$tmp/mxg" --gguf f32,q8_0 --no-adapter-files
expect_eq "Mixtral: export --gguf f32,q8_0 from the GGUF base exits 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
ok "Mixtral: llama.cpp runs the merged f32 GGUF" llama "$tmp/mxg/merged-f32.gguf" --kv-f32 "$tmp/full.ids" "$tmp/full.lg" 1e-4
ok "Mixtral: llama.cpp runs the merged q8_0 GGUF" llama "$tmp/mxg/merged-q8_0.gguf" "$tmp/full.ids" "$tmp/full.lg" 0.15
ok "Mixtral: the merged q8_0 GGUF keeps the routers f32 and its experts q8_0, as llama.cpp's quantize" "$PY" -c "
import sys, gguf
t = {x.name: x.tensor_type.name for x in gguf.GGUFReader(sys.argv[1]).tensors}
sys.exit(not (t['blk.0.ffn_gate_inp.weight'] == 'F32' and t['blk.1.ffn_down_exps.weight'] == 'Q8_0'))" \
    "$tmp/mxg/merged-q8_0.gguf"

# Qwen3-MoE in llama.cpp (qwen3moe): its GGUF has every layer sparse (llama.cpp's qwen3moe has no dense layers)
# and no tokenizer; ptrain's side is the same model as a Hugging Face directory (make_moe_gguf_goldens.py's, saved
# in f32 with make_family_goldens' tokenizer), trained on, its adapter run by llama.cpp on the GGUF
"$PY" - "$tmp/q3full" "$PTRAIN_SRCDIR/tests/reference" >"$tmp/py.out" 2>&1 <<'PY'
import sys
import torch
sys.path.insert(0, sys.argv[2])
import make_family_goldens as fam
import make_moe_gguf_goldens as g
model = g.qwen3moe_model()[0].to(torch.float32)
model.save_pretrained(sys.argv[1], safe_serialization=True)
fam.make_tokenizer(sys.argv[1])
PY
expect_eq "Qwen3-MoE: the GGUF's model as a Hugging Face directory ($(tail -1 "$tmp/py.out"))" 0 "$?"
train q3g "$tmp/q3full"
q3=$D/qwen3moe/gguf-f32.gguf
"$P" generate --model "$tmp/q3full" --prompt "Arr, the sea is wide, me hearties" --temperature 0 --max-new-tokens 12 \
    --no-4bit --adapter "$tmp/q3g/lora" --logits "$tmp/q3g.lg" --ids "$tmp/q3g.ids" >/dev/null 2>"$tmp/gen.err"
"$P" generate --model "$tmp/q3full" --prompt "Arr, the sea is wide, me hearties" --temperature 0 --max-new-tokens 1 \
    --no-4bit --logits "$tmp/q3b.lg" --ids "$tmp/q3b.ids" >/dev/null 2>"$tmp/gen.err"
ok "Qwen3-MoE: the adapter moves ptrain's logits" "$PY" -c "
import sys, numpy as np
a, b = np.fromfile(sys.argv[1], np.float32), np.fromfile(sys.argv[2], np.float32)
sys.exit(not np.abs(a - b).max() / np.abs(a).max() > 1e-2)" "$tmp/q3g.lg" "$tmp/q3b.lg"
ok "Qwen3-MoE: llama.cpp runs the base GGUF with ptrain's adapter.gguf" \
    llama "$q3" --lora "$tmp/q3g/lora/adapter.gguf" --kv-f32 "$tmp/q3g.ids" "$tmp/q3g.lg" 1e-4
run export --model "$q3" --adapter "$tmp/q3g/lora" --out "$tmp/q3g-x" --gguf f32 --no-adapter-files
expect_eq "Qwen3-MoE: export --gguf f32 from the GGUF base exits 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
ok "Qwen3-MoE: llama.cpp runs the merged f32 GGUF" llama "$tmp/q3g-x/merged-f32.gguf" --kv-f32 "$tmp/q3g.ids" "$tmp/q3g.lg" 1e-4
"$P" inspect "$tmp/q3g-x/merged-f32.gguf" >"$tmp/q3g.txt" 2>&1
ok "Qwen3-MoE: the merged GGUF reads back with its experts" grep -q "mixture of experts on 3 of 3 layers: 4 experts of width 64" "$tmp/q3g.txt"
done_testing
