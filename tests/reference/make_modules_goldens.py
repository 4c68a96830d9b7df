#!/usr/bin/env python3
"""make_modules_goldens.py — PEFT's modules_to_save (embed_tokens and lm_head trained in full beside
LoRA) from PEFT 0.21 + torch, for ptrain's parity test (tests/unit/test_train.c,
test_modules_to_save_match_peft).

Model, adapters and batch: make_peft_goldens.py's (the tiny multi-head Llama of
tests/data/llama/tiny-mha-f32.gguf in float64, LoRA r=4 alpha=8 on all seven projections with A and
B random from init.f32, 2 sequences of 24 tokens), with modules_to_save=["embed_tokens", "lm_head"]:
PEFT wraps each in a ModulesToSaveWrapper whose trained copy starts as the base weight. Loss: the
mean cross-entropy over the labelled tokens. Then 20 steps of torch.optim.AdamW in two parameter
groups, UnslothTrainer's layout for method: cpt: the LoRA matrices at lr 2e-3 and the two modules at
embedding_learning_rate 5e-4 (weight decay 0.01 on both), clip_grad_norm_(1.0) over all of them.

Writes tests/data/peft/: modules_grads.f32 (the LoRA gradients in init.f32's order, then
embed_tokens' [vocab, dim], then lm_head's), modules_final.f32 (the same tensors after the 20 steps),
modules.json (first loss, the 20 losses and gradient norms, the learning rates, PEFT's names of the
two saved tensors and the keys of the state dict PEFT saves).
Run: $PTRAIN_PYTHON tests/reference/make_modules_goldens.py  (torch transformers peft)
"""
import json
import os
import sys

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from peft.utils import get_peft_model_state_dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_peft_goldens import MODULES, OUT, base_model, lora_params  # noqa: E402

LR, EMB_LR = 2e-3, 5e-4


def main():
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM", modules_to_save=["embed_tokens", "lm_head"])
    model = get_peft_model(base_model(), cfg).double()
    params = [p for _, _, _, p in lora_params(model)]
    init = np.fromfile(os.path.join(OUT, "init.f32"), dtype="<f4")
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(init[offset:offset + p.numel()].astype(np.float64)).reshape(p.shape))
            offset += p.numel()
    inner = model.base_model.model
    embed = inner.model.embed_tokens.modules_to_save["default"].weight
    head = inner.lm_head.modules_to_save["default"].weight
    assert embed.requires_grad and head.requires_grad
    assert torch.equal(embed, inner.model.embed_tokens.original_module.weight)
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    ids = torch.tensor(manifest["ids"]).reshape(2, 24)
    labels = torch.tensor(manifest["labels"]).reshape(2, 24)
    every = params + [embed, head]

    def dump(what, name):
        np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for p in every]).tofile(os.path.join(OUT, name))

    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    dump(lambda p: p.grad, "modules_grads.f32")
    first = float(loss)
    opt = torch.optim.AdamW([{"params": params, "lr": LR}, {"params": [embed, head], "lr": EMB_LR}],
                            weight_decay=0.01)
    losses, norms = [], []
    for _ in range(20):
        opt.zero_grad()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(every, 1.0)))
        opt.step()
        losses.append(float(loss))
    dump(lambda p: p, "modules_final.f32")
    saved = sorted(k for k in get_peft_model_state_dict(model) if "lora_" not in k)
    out = {"first_loss": first, "losses": losses, "grad_norms": norms, "lr": LR, "embedding_learning_rate": EMB_LR,
           "weight_decay": 0.01, "saved_keys": saved, "peft": __import__("peft").__version__}
    with open(os.path.join(OUT, "modules.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("first loss", first, "losses", losses[0], "->", losses[-1], "saved", saved)


if __name__ == "__main__":
    main()
