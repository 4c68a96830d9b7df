#!/bin/sh
# test_moe_train.sh — training a mixture of experts (issue 38): LoRA on the attention of the tiny
# Qwen3-MoE of tests/reference/make_qwen3moe_goldens.py, the router and experts frozen (test_moe.c
# holds one micro-batch's gradients to PEFT's). A run of 8 steps with a checkpoint every 4, killed
# (kill -9) at step 6 and resumed, ends with the uninterrupted run's adapter bit for bit (h5diff -d 0)
# and the same logged losses; the loss goes down; gate_proj without up_proj and one expert's names are refused, saying
# why (lora_moe_names.c). With
# LoRA on the experts too (target_parameters) and the aux loss (output_router_logits): the loss goes down, aux_loss
# is logged, a kill -9 and resume ends bit for bit the same, and PEFT loads the adapter (nested ParamWrappers).
# PEFT loads the adapter ptrain wrote onto transformers' model with ptrain's logits (1e-4 relative,
# fp32 weights: the bf16 directory read as f32 by both; skipped, saying why, without the Python
# environment of share/scripts/test-python.sh). The tiny Mixtral of make_mixtral_goldens.py (every layer
# sparse, a sliding window of 12) trains the same way: the loss goes down, PEFT loads its adapter; named by its
# per-expert modules (w1, w2, w3), the adapter is the one PEFT 0.21 makes of those names on transformers 5 (its
# targets, ranks and alphas compared with PEFT's mapping) and PEFT loads it with ptrain's logits.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
PY=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$PTRAIN_SRCDIR/tests/data/qwen3moe/hf

write_config() { # write_config FILE OUTDIR [extra yaml] (model: $model)
    tiny_config "$1" "$2" "learning_rate: 5e-3
warmup_steps: 0
max_steps: 8
logging_steps: 1
seed: 11
save_steps: 4
resume_from_checkpoint: true
load_in_4bit: false
chat_template: chatml
${3:-lora_target_modules: [q_proj, k_proj, v_proj, o_proj]}"
    sed -i "s|^model_name: .*|model_name: \"$model\"|" "$1"
}
train() { # train CONFIG [env...]
    cfg=$1
    shift
    env "$@" "$P" train "$cfg" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
logged() { grep -v '"startup"' "$1/metrics.jsonl" | sed 's/, "tokens_per_s.*//'; }

write_config "$tmp/ref.yaml" "$tmp/ref"
train "$tmp/ref.yaml"
expect_eq "Qwen3-MoE, LoRA on the attention: exit 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
first=$(grep '"step": 1,' "$tmp/ref/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
last=$(grep '"step": 8,' "$tmp/ref/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
ok "Qwen3-MoE: the loss goes down over 8 steps ($first to $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
write_config "$tmp/k.yaml" "$tmp/k"
train "$tmp/k.yaml" PTRAIN_TEST_KILL_STEP=6
expect_eq "Qwen3-MoE: killed at step 6" 137 "$rc"
train "$tmp/k.yaml"
expect_eq "Qwen3-MoE: the resumed run finishes" 0 "$rc"
ok "Qwen3-MoE: resumed from checkpoint 4" grep -q "resume     from $tmp/k/checkpoint-4.h5 at step 4" "$tmp/out"
ok "Qwen3-MoE: the resumed adapter is bit-identical" h5diff -d 0 "$tmp/ref/lora/adapter.h5" "$tmp/k/lora/adapter.h5"
expect_eq "Qwen3-MoE: the same logged losses after a resume" "$(logged "$tmp/ref")" "$(logged "$tmp/k")"

# the experts named one by one (transformers 4's modules): mapped as PEFT 0.21 maps them on transformers 5 (gate and
# up together or not at all; one expert alone refused)
write_config "$tmp/mlp.yaml" "$tmp/mlp" "lora_target_modules: [q_proj, gate_proj]"
train "$tmp/mlp.yaml"
expect_eq "Qwen3-MoE with gate_proj without up_proj: exit 1" 1 "$rc"
ok "Qwen3-MoE with gate_proj without up_proj: says why, as PEFT" grep -q "names gate_proj without up_proj.*PEFT refuses" "$tmp/err"
write_config "$tmp/one.yaml" "$tmp/one" "lora_target_modules: [q_proj, mlp.experts.3.gate_proj, mlp.experts.3.up_proj]"
train "$tmp/one.yaml"
expect_eq "Qwen3-MoE with one expert's projections: exit 1" 1 "$rc"
ok "Qwen3-MoE with one expert's projections: points to target_parameters" grep -q "names one expert's projection.*target_parameters" "$tmp/err"

# LoRA on the experts and the router too (PEFT's target_parameters) with the aux loss: the loss goes down, aux_loss is logged, the
# adapter is PEFT's (and adapter.gguf: tests/export/test_moe_export.sh runs it in llama.cpp), and a run killed and resumed ends bit for bit the same
experts="lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
target_parameters: [mlp.experts.gate_up_proj, mlp.experts.down_proj, mlp.gate.weight]
output_router_logits: true
router_aux_loss_coef: 0.02"
write_config "$tmp/ex.yaml" "$tmp/ex" "$experts"
train "$tmp/ex.yaml"
expect_eq "Qwen3-MoE, LoRA on the attention and experts: exit 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
first=$(grep '"step": 1,' "$tmp/ex/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
last=$(grep '"step": 8,' "$tmp/ex/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
ok "Qwen3-MoE experts: the loss goes down over 8 steps ($first to $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
ok "Qwen3-MoE experts: aux_loss logged" grep -q '"step": 8,.*"aux_loss": [0-9]' "$tmp/ex/metrics.jsonl"
ok "Qwen3-MoE experts: PEFT's target_parameters in adapter_config.json" grep -q '"mlp.experts.down_proj"' \
    "$tmp/ex/lora/adapter_config.json"
ok "Qwen3-MoE experts: adapter.gguf written" test -s "$tmp/ex/lora/adapter.gguf"
mkdir "$tmp/expeft" && cp "$tmp/ex/lora/adapter_config.json" "$tmp/ex/lora/adapter_model.safetensors" "$tmp/expeft/"
for a in ex/lora expeft; do # ptrain reads its PEFT files back (the experts' B from PEFT's order) as adapter.h5
    "$P" generate --model "$model" --prompt "Arr, the sea" --temperature 0 --max-new-tokens 1 --no-4bit \
        --adapter "$tmp/$a" --logits "$tmp/lg.${a%%/*}" >/dev/null 2>"$tmp/gen.err"
done
ok "Qwen3-MoE experts: the PEFT files read back give adapter.h5's logits" cmp -s "$tmp/lg.ex" "$tmp/lg.expeft"
write_config "$tmp/exk.yaml" "$tmp/exk" "$experts"
train "$tmp/exk.yaml" PTRAIN_TEST_KILL_STEP=6
expect_eq "Qwen3-MoE experts: killed at step 6" 137 "$rc"
train "$tmp/exk.yaml"
expect_eq "Qwen3-MoE experts: the resumed run finishes" 0 "$rc"
ok "Qwen3-MoE experts: the resumed adapter is bit-identical" h5diff -d 0 "$tmp/ex/lora/adapter.h5" "$tmp/exk/lora/adapter.h5"
expect_eq "Qwen3-MoE experts: the same logged losses after a resume" "$(logged "$tmp/ex")" "$(logged "$tmp/exk")"

peft_check() { # peft_check NAME MODEL ADAPTER
    "$P" generate --model "$2" --prompt "Arr, the sea is wide" --temperature 0 --max-new-tokens 2 --no-4bit \
        --adapter "$3" --logits "$tmp/lg" --ids "$tmp/ids" >/dev/null 2>"$tmp/gen.err"
    "$PY" - "$2" "$3" "$tmp/ids" "$tmp/lg" "$1" >"$tmp/py.out" 2>&1 <<'PY'
import sys
import numpy as np
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
base, adapter, ids_path, lg, name = sys.argv[1:]
ids = [int(x) for x in open(ids_path).read().split("\n")[0].split()]
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, experts_implementation="eager").eval()
with torch.no_grad():
    plain = model(torch.tensor([ids])).logits[0].numpy()
model = PeftModel.from_pretrained(model, adapter).eval()
with torch.no_grad():
    theirs = model(torch.tensor([ids])).logits[0].numpy()
ours = np.fromfile(lg, dtype=np.float32).reshape(len(ids), -1)
rel = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
moved = float(np.abs(theirs - plain).max() / np.abs(theirs).max())
print(f"PEFT on ptrain's {name} adapter: max relative difference {rel:.2e}; the adapter moves the logits {moved:.2e}")
sys.exit(0 if rel <= 1e-4 and moved >= 1e-2 else 1)
PY
    py=$?
    sed 's/^/# /' "$tmp/py.out" | tail -3
    expect_eq "PEFT loads the $1 adapter with ptrain's logits" 0 "$py"
}

model=$PTRAIN_SRCDIR/tests/data/mixtral/hf
write_config "$tmp/mx.yaml" "$tmp/mx"
train "$tmp/mx.yaml"
expect_eq "Mixtral, LoRA on the attention: exit 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
first=$(grep '"step": 1,' "$tmp/mx/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
last=$(grep '"step": 8,' "$tmp/mx/metrics.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
ok "Mixtral: the loss goes down over 8 steps ($first to $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'

write_config "$tmp/mxe.yaml" "$tmp/mxe" "lora_target_modules: [q_proj, k_proj, v_proj, o_proj, w1, w2, w3]"
train "$tmp/mxe.yaml"
expect_eq "Mixtral, LoRA on the experts named w1, w2, w3: exit 0 ($(tail -1 "$tmp/err"))" 0 "$rc"
ok "Mixtral w1/w2/w3: gate_up_proj at rank 2r in adapter_config.json" grep -q '"\.\*\\\\\.gate_up_proj": 8' \
    "$tmp/mxe/lora/adapter_config.json"

if [ -z "$PY" ] || ! "$PY" -c "import peft, transformers, torch" 2>/dev/null; then
    skip_test "PEFT loads the Qwen3-MoE and Mixtral adapters" "no Python with torch, transformers and peft in \$PTRAIN_PYTHON"
else
    peft_check Qwen3-MoE "$PTRAIN_SRCDIR/tests/data/qwen3moe/hf" "$tmp/ref/lora"
    peft_check "Qwen3-MoE experts" "$PTRAIN_SRCDIR/tests/data/qwen3moe/hf" "$tmp/ex/lora"
    "$PY" - "$PTRAIN_SRCDIR/tests/data/qwen3moe/hf" "$tmp/ex/lora" >"$tmp/py.out" 2>&1 <<'PY'
import sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, experts_implementation="eager").eval()
model = PeftModel.from_pretrained(model, sys.argv[2]).eval()
ids = torch.tensor([[5, 17, 99, 200, 3, 45, 67, 8]])
parts = {"experts'": "mlp.experts", "router's": "mlp.gate."}
with torch.no_grad():
    full = model(ids).logits
    for name, key in parts.items():  # what each part PEFT read moves (so the check above sees it)
        saved = {n: p.clone() for n, p in model.named_parameters() if key in n and "lora_B" in n}
        for n, p in model.named_parameters():
            if n in saved:
                p.zero_()
        moved = float((full - model(ids).logits).abs().max() / full.abs().max())
        print(f"PEFT: the {name} LoRA ({len(saved)} B matrices) moves the logits {moved:.2e}")
        for n, p in model.named_parameters():
            if n in saved:
                p.copy_(saved[n])
        if not saved or moved < 1e-3:
            sys.exit(1)
PY
    py=$?
    sed 's/^/# /' "$tmp/py.out" | grep "PEFT:"
    expect_eq "PEFT reads the experts' and the router's LoRA, each moving the logits" 0 "$py"
    peft_check Mixtral "$model" "$tmp/mx/lora"
    peft_check "Mixtral w1/w2/w3" "$model" "$tmp/mxe/lora"
    "$PY" - "$model" "$tmp/mxe/lora/adapter_config.json" >"$tmp/py.out" 2>&1 <<'PY'
import json, sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
ours = json.load(open(sys.argv[2]))
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3"])
theirs = get_peft_model(model, cfg).peft_config["default"]  # PEFT's own mapping of the per-expert names
same = (sorted(theirs.target_modules) == sorted(ours["target_modules"]) and
        sorted(theirs.target_parameters) == sorted(p.rsplit(".", 1)[-1] for p in ours["target_parameters"]) and
        theirs.rank_pattern == ours["rank_pattern"] and
        {k: float(v) for k, v in theirs.alpha_pattern.items()} == {k: float(v) for k, v in ours["alpha_pattern"].items()})
print("PEFT:", sorted(theirs.target_parameters), theirs.rank_pattern, theirs.alpha_pattern)
print("ptrain:", ours["target_parameters"], ours["rank_pattern"], ours["alpha_pattern"])
sys.exit(0 if same else 1)
PY
    py=$?
    sed 's/^/# /' "$tmp/py.out" | tail -2
    expect_eq "Mixtral w1/w2/w3: the targets, ranks and alphas PEFT maps the names to" 0 "$py"
fi
done_testing
