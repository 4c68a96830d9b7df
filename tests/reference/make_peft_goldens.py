#!/usr/bin/env python3
"""make_peft_goldens.py — LoRA gradients and a 20-step AdamW run from PEFT + torch, for ptrain's
training parity test (tests/unit/test_train.c).

Model: the tiny multi-head Llama of make_llama_goldens.py (tests/data/llama/tiny-mha-f32.gguf,
same seed, weights rounded to float32 as the file stores them), run in float64. Adapters: r=4,
alpha=8 on all seven projections, with A and B both random (init_lora_weights=False) so that every
gradient is non-trivial. Batch: 2 sequences of 24 tokens, some labels -100. Loss: the mean
cross-entropy over the labelled tokens, as transformers computes it (labels shifted inside).
Then 20 optimizer steps of torch.optim.AdamW (lr 2e-3, weight decay 0.01) with
clip_grad_norm_(1.0) on the same batch.

Writes tests/data/peft/: manifest.json (shapes, ids, labels, losses, grad norms), init.f32 (A and B
before training), grads.f32 (their gradients at the start), final.f32 (after 20 steps); and the
same start with use_rslora=True and lora_alpha 5 (scaling alpha/sqrt(r) = 2.5): rslora_first_loss and
grads_rslora.f32.
Run: /tmp/refenv/bin/python tests/reference/make_peft_goldens.py  (venv: torch transformers peft)
"""
import json
import os

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "peft")
MHA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=4, vocab_size=320, rms_norm_eps=1e-5, rope_theta=10000.0,
           max_position_embeddings=256, tie_word_embeddings=False)
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def base_model():
    cfg = LlamaConfig(**MHA)
    torch.manual_seed(1234 + len("mha"))
    model = LlamaForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        model.model.norm.weight.uniform_(0.5, 1.5)
        for p in model.parameters():  # what the f32 GGUF file holds
            p.copy_(p.float().double())
    return model


def lora_params(model):
    out = []
    for i in range(MHA["num_hidden_layers"]):
        for mod in MODULES:
            block = "mlp" if mod in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            lin = getattr(getattr(model.base_model.model.model.layers[i], block), mod)
            out.append((i, mod, "A", lin.lora_A["default"].weight))
            out.append((i, mod, "B", lin.lora_B["default"].weight))
    return out


def dump(params, what, path):
    arr = np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for _, _, _, p in params])
    arr.tofile(path)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base_model(), cfg).double()
    params = lora_params(model)
    with torch.no_grad():  # adapters as f32 values too, since ptrain stores them in f32
        for _, _, _, p in params:
            p.copy_(p.float().double())
    rng = np.random.default_rng(5)
    ids = rng.integers(0, MHA["vocab_size"], size=(2, 24))
    labels = ids.copy()
    labels[0, :5] = -100  # a masked prompt
    labels[1, 10:14] = -100
    ids_t, labels_t = torch.from_numpy(ids), torch.from_numpy(labels)
    dump(params, lambda p: p, os.path.join(OUT, "init.f32"))
    loss = model(input_ids=ids_t, labels=labels_t).loss
    loss.backward()
    dump(params, lambda p: p.grad, os.path.join(OUT, "grads.f32"))
    first_loss = float(loss)
    opt = torch.optim.AdamW([p for _, _, _, p in params], lr=2e-3, weight_decay=0.01)
    losses, norms = [], []
    for _ in range(20):
        opt.zero_grad()
        loss = model(input_ids=ids_t, labels=labels_t).loss
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([p for _, _, _, p in params], 1.0)))
        opt.step()
        losses.append(float(loss))
    dump(params, lambda p: p, os.path.join(OUT, "final.f32"))
    manifest = {
        "model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "batch": 2, "seq": 24,
        "ids": ids.ravel().tolist(), "labels": labels.ravel().tolist(), "first_loss": first_loss,
        "lr": 2e-3, "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "max_grad_norm": 1.0,
        "losses": losses, "grad_norms": norms,
        "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params],
    }
    # rsLoRA (use_rslora=True) with lora_alpha 5: scaling alpha/sqrt(r) = 2.5 where alpha/r would be
    # 1.25 (near the 2 above, float32's own error of the gradients stays near 3e-6; at 4 it is 4e-4 on
    # these random adapters); the same initial A and B, the same batch, its loss and gradients
    # (grads_rslora.f32)
    torch.manual_seed(99)
    rs = get_peft_model(base_model(), LoraConfig(r=4, lora_alpha=5, lora_dropout=0.0, target_modules=MODULES,
                                                 init_lora_weights=False, bias="none", use_rslora=True,
                                                 task_type="CAUSAL_LM")).double()
    rs_params = lora_params(rs)
    init = np.fromfile(os.path.join(OUT, "init.f32"), dtype="<f4")
    offset = 0
    with torch.no_grad():
        for _, _, _, p in rs_params:
            p.copy_(torch.from_numpy(init[offset:offset + p.numel()].astype(np.float64)).reshape(p.shape))
            offset += p.numel()
    lin = rs.base_model.model.model.layers[0].self_attn.q_proj
    assert lin.scaling["default"] == 5 / 2, lin.scaling
    loss = rs(input_ids=ids_t, labels=labels_t).loss
    loss.backward()
    dump(rs_params, lambda p: p.grad, os.path.join(OUT, "grads_rslora.f32"))
    manifest["rslora_first_loss"] = float(loss)
    manifest["rslora_scaling"] = lin.scaling["default"]
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("first loss", first_loss, "losses", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main()
