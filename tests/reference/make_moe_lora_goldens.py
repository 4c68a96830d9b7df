#!/usr/bin/env python3
"""make_moe_lora_goldens.py — LoRA on the experts of a mixture of experts (PEFT's target_parameters) and
the aux load-balancing loss, from PEFT 0.21.2 and transformers 5.25 (tests/unit/test_moe.c).

The models are make_qwen3moe_goldens.py's tiny Qwen3-MoE as committed in tests/data/qwen3moe/hf (3 layers,
layers 0 and 2 mixtures of 4 experts, top-2, norm_topk_prob) and make_mixtral_goldens.py's tiny Mixtral in
tests/data/mixtral/hf (2 layers, each a mixture of 6 experts, top-2, sliding window 12); bf16 weights,
computed in float64. For each, PEFT's
LoraConfig r=4, alpha=8 on q_proj, k_proj, v_proj, o_proj (target_modules) and on the fused experts
(target_parameters mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I]: lora_A
[E·r, in], lora_B [out, E·r], expert e's delta B[:, j·E + e] A[e·r + j]; and the router's mlp.gate.weight
[E, H], a plain LoRA pair, so the aux loss trains it), A and B random (rounded to f32), on a batch of 2 x 16
tokens with some labels -100.

Writes tests/data/qwen3moe/ and tests/data/mixtral/ (the same files):
  peft-experts.json    ids, labels, the mean cross-entropy (loss), transformers' aux_loss
                       (load_balancing_loss_func, output_router_logits) without a mask and with
                       aux_mask (the last 3 tokens of row 1 padding: attention_mask 0), the coefficient
                       aux_coef, the loss with coef·aux added (loss_aux), and the LoRA tensors in order
                       (per layer: q, k, v, o A then B; on sparse layers then gate_up_proj A, B,
                       down_proj A, B and the router's A, B, in PEFT's own layouts) with their names in
                       PEFT's state dict;
  peft-experts.init.f32   those tensors' values;
  peft-experts.grads.f32  their gradients of the cross-entropy;
  peft-experts.aux.grads.f32  their gradients of the cross-entropy + aux_coef · aux_loss.

Run (the outputs are committed; CI only reads them):
  $PTRAIN_PYTHON tests/reference/make_moe_lora_goldens.py [qwen3moe|mixtral]   (both without an argument)
"""
import json
import os
import sys

import numpy as np
import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
from safetensors.torch import load_file

import make_family_goldens as fam
import moe_goldens as moe
import make_mixtral_goldens as mx
import make_qwen3moe_goldens as q3

FAMILIES = {"qwen3moe": q3, "mixtral": mx}
MODULES = moe.MODULES
PARAMS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.gate.weight"]
AUX_COEF = 0.25


def peft_model(src):
    base = src.make_model()
    saved = load_file(os.path.join(src.OUT, "hf", "model.safetensors"))
    fam.load_weights(base, {k: v.double() for k, v in src.fused_state(saved).items()})
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, target_parameters=PARAMS,
                     init_lora_weights=False, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg).double()
    named = dict(model.named_parameters())
    names = {k.replace(".default", ""): k for k in named if "lora_" in k}
    assert set(names) == set(get_peft_model_state_dict(model)), "PEFT's saved names differ from the parameters'"
    params = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        pre = f"base_model.model.model.layers.{i}."
        mods = [f"self_attn.{m}" for m in MODULES]
        if hasattr(layer.mlp, "gate"):  # nested ParamWrappers: the first target innermost (base_layer.)
            mods += ["mlp.experts.base_layer", "mlp.experts", "mlp.gate"]
        for mod in mods:
            for which in "AB":
                key = f"{pre}{mod}.lora_{which}.weight"
                params.append((i, mod, which, key, named[names[key]]))
    assert len(params) == len(names)
    with torch.no_grad():
        for *_, p in params:
            p.copy_(p.float().double())
    return model, params


def batch():
    rng = np.random.default_rng(11)
    ids = rng.integers(0, fam.VOCAB, size=(2, 16))
    labels = ids.copy()
    labels[0, :4] = -100
    labels[1, 9:12] = -100
    return ids, labels


def grads(model, params, ids, labels, coef):
    model.zero_grad()
    model.base_model.model.router_aux_loss_coef = coef
    out = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels), output_router_logits=coef > 0)
    out.loss.backward()
    return out, np.concatenate([p.grad.numpy().astype("<f4").ravel() for *_, p in params])


def write(name):
    OUT = FAMILIES[name].OUT
    model, params = peft_model(FAMILIES[name])
    ids, labels = batch()
    out, g = grads(model, params, ids, labels, 0.0)
    g.tofile(os.path.join(OUT, "peft-experts.grads.f32"))
    out_aux, g_aux = grads(model, params, ids, labels, AUX_COEF)
    g_aux.tofile(os.path.join(OUT, "peft-experts.aux.grads.f32"))
    assert abs(out_aux.loss.item() - out.loss.item() - AUX_COEF * out_aux.aux_loss.item()) < 1e-6  # aux: float32
    np.concatenate([p.detach().numpy().astype("<f4").ravel() for *_, p in params]).tofile(
        os.path.join(OUT, "peft-experts.init.f32"))
    mask = np.ones_like(ids)
    mask[1, 13:] = 0
    with torch.no_grad():
        masked = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                       output_router_logits=True).aux_loss.item()
    with open(os.path.join(OUT, "peft-experts.json"), "w") as f:
        json.dump({"model": f"tests/data/{name}/hf", "r": 4, "alpha": 8, "batch": 2, "seq": 16,
                   "target_modules": MODULES, "target_parameters": PARAMS,
                   "ids": ids.ravel().tolist(), "labels": labels.ravel().tolist(), "loss": out.loss.item(),
                   "aux_coef": AUX_COEF, "aux_loss": out_aux.aux_loss.item(), "loss_aux": out_aux.loss.item(),
                   "aux_mask": mask.ravel().tolist(), "aux_loss_masked": masked,
                   "tensors": [{"layer": i, "module": m, "which": w, "name": k, "shape": list(p.shape)}
                               for i, m, w, k, p in params]}, f, indent=1)
    print(f"  {name}: PEFT: loss {out.loss.item():.6f}, aux {out_aux.aux_loss.item():.6f} (masked {masked:.6f}), "
          f"{len(params)} LoRA tensors, |grad| {np.abs(g).max():.3g}, with aux {np.abs(g_aux - g).max():.3g} apart")


def main():
    for name in sys.argv[1:] or FAMILIES:
        write(name)


if __name__ == "__main__":
    main()
