#!/usr/bin/env python3
"""make_qwen35_peft_goldens.py — LoRA gradients from PEFT 0.21.2 on transformers 5.25's Qwen3.5 text model, for
ptrain's training of the family (tests/unit/test_grad.c, test_qwen35_peft).

The model is make_qwen35_goldens.py's tiny Qwen3_5ForCausalLM (tests/data/qwen35/hf: linear, linear, linear,
full, linear; fp32). LoRA r=4, alpha=8 on every projection PEFT can adapt there: the full layer's q_proj (its
rows interleave each head's query and output gate, as transformers lays q_proj out), k_proj, v_proj, o_proj,
the Gated DeltaNet layers' linear_attn.in_proj_qkv, in_proj_z, in_proj_b, in_proj_a and out_proj, and every
MLP's gate_proj, up_proj, down_proj; A and B random within 0.1 (init_lora_weights=False, then redrawn), so every
gradient is non-trivial (within 0.3 the model's gradients are so sensitive that transformers' own fp32 run is 6e-5 off
its float64 one in some tensors; within 0.1 both fp32 runs, transformers' and ptrain's, stay well inside 1e-4). The batch is ptrain's two rows of 72 tokens (longer than transformers' chunk of 64): row 0 one
example, row 1 two packed examples of 40 and 32. transformers' torch delta rule has no packed form, so each
example runs alone and the losses are summed: what a packed row must give when its state and conv window start
afresh at each boundary. Loss: the sum of each example's next-token cross-entropy (some labels -100) over the
count of labelled tokens, as ptrain's step computes the mean.

Writes tests/data/qwen35/peft.json (rows, ids, labels, loss, tensor order), peft.init.f32 (A, B of every
adapted module, layer by layer in the order of MODULES, PEFT's shapes and row order) and peft.grads.f32 (their
gradients, the same order).

Run (the outputs are committed; CI only reads them): $PTRAIN_PYTHON tests/reference/make_qwen35_peft_goldens.py
"""
import json
import os

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3_5ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "qwen35")
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj",
           "gate_proj", "up_proj", "down_proj"]
ROWS = [[72], [40, 32]]


def lora_params(model):
    """(layer, module, 'A'/'B', parameter) in MODULES' order, layer by layer."""
    params = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        for mod in MODULES:
            owner = layer.mlp if mod in ("gate_proj", "up_proj", "down_proj") else \
                getattr(layer, "self_attn", None) if mod in ("q_proj", "k_proj", "v_proj", "o_proj") else \
                getattr(layer, "linear_attn", None)
            lin = getattr(owner, mod, None) if owner is not None else None
            if lin is None:
                continue
            params += [(i, mod, "A", lin.lora_A["default"].weight), (i, mod, "B", lin.lora_B["default"].weight)]
    return params


def main():
    torch.manual_seed(7)
    base = Qwen3_5ForCausalLM.from_pretrained(os.path.join(OUT, "hf"), dtype=torch.float32).eval()
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    params = lora_params(model)
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for _, _, which, p in params:
            p.copy_(torch.empty(p.shape).uniform_(-0.1, 0.1, generator=g))
    rng = np.random.default_rng(13)
    vocab = base.config.vocab_size
    ids, labels, total, n = [], [], 0.0, 0
    for row in ROWS:
        for length in row:
            seq = rng.integers(3, vocab, size=length)
            lab = seq.copy()
            lab[rng.random(length) < 0.15] = -100
            logits = model(input_ids=torch.from_numpy(seq)[None]).logits[0]
            target = torch.from_numpy(lab[1:])
            total = total + torch.nn.functional.cross_entropy(logits[:-1], target, ignore_index=-100, reduction="sum")
            n += int((target != -100).sum())
            ids += seq.tolist()
            labels += lab.tolist()
    loss = total / n
    loss.backward()
    cat = lambda f: np.concatenate([f(p).detach().numpy().astype("<f4").ravel() for *_, p in params])  # noqa: E731
    cat(lambda p: p).tofile(os.path.join(OUT, "peft.init.f32"))
    cat(lambda p: p.grad).tofile(os.path.join(OUT, "peft.grads.f32"))
    with open(os.path.join(OUT, "peft.json"), "w") as f:
        json.dump({"model": "tests/data/qwen35/hf", "r": 4, "alpha": 8, "rows": ROWS, "seq": 72, "labelled": n,
                   "ids": ids, "labels": labels, "loss": loss.item(),
                   "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]},
                  f, indent=1)
    print(f"qwen35 PEFT: loss {loss.item():.6f} over {n} labels, {len(params)} LoRA tensors")


if __name__ == "__main__":
    main()
