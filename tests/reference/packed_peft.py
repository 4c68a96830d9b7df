"""packed_peft.py — what the packed-rows PEFT golden scripts share (make_qwen35_peft_goldens.py,
make_gemma4_peft_goldens.py, qwen35_grad_precision.py): the LoRA parameters in the script's module order, their
random values, the loss of ptrain's packed rows computed one example at a time (transformers has no packed form for
these families, so each example runs alone and the losses are summed), and the files test_grad's
check_packed_peft reads.
"""
import json
import os

import numpy as np
import torch

MLP = ("gate_proj", "up_proj", "down_proj")
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def lora_params(model, modules):
    """(layer, module, 'A'/'B', parameter) in the order of modules, layer by layer, where the layer has the module
    (the MLP's, the attention's, or a Gated DeltaNet layer's linear_attn)."""
    params = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        for mod in modules:
            owner = layer.mlp if mod in MLP else getattr(layer, "self_attn" if mod in ATTENTION else "linear_attn", None)
            lin = getattr(owner, mod, None)
            if lin is None or not hasattr(lin, "lora_A"):
                continue
            params += [(i, mod, "A", lin.lora_A["default"].weight), (i, mod, "B", lin.lora_B["default"].weight)]
    return params


def randomize(params, bound):
    """Every A and B drawn within +-bound (in fp32, whatever the model's dtype), so every gradient is non-trivial."""
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for *_, p in params:
            p.copy_(torch.empty(p.shape).uniform_(-bound, bound, generator=g).to(p.dtype))


def packed_loss(model, rows, seed, **forward):
    """The batch: each row's examples of the given lengths, random ids (some labels -100). Returns the mean
    next-token cross-entropy over the labelled tokens, as ptrain's step computes it, the count, ids and labels."""
    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    ids, labels, total, n = [], [], 0.0, 0
    for row in rows:
        for length in row:
            seq = rng.integers(3, vocab, size=length)
            lab = seq.copy()
            lab[rng.random(length) < 0.15] = -100
            logits = model(input_ids=torch.from_numpy(seq)[None], **forward).logits[0]
            target = torch.from_numpy(lab[1:])
            total = total + torch.nn.functional.cross_entropy(logits[:-1], target, ignore_index=-100, reduction="sum")
            n += int((target != -100).sum())
            ids += seq.tolist()
            labels += lab.tolist()
    return total / n, n, ids, labels


def write(out, model_dir, rows, seq, params, loss, n, ids, labels, **extra):
    """peft.json (rows, ids, labels, loss, tensor order), peft.init.f32 (every A and B in params' order, PEFT's
    shapes) and peft.grads.f32 (their gradients), little-endian f32."""
    os.makedirs(out, exist_ok=True)
    cat = lambda f: np.concatenate([f(p).detach().double().numpy().astype("<f4").ravel() for *_, p in params])  # noqa
    cat(lambda p: p).tofile(os.path.join(out, "peft.init.f32"))
    cat(lambda p: p.grad).tofile(os.path.join(out, "peft.grads.f32"))
    with open(os.path.join(out, "peft.json"), "w") as f:
        json.dump({"model": model_dir, "r": 4, "alpha": 8, "rows": rows, "seq": seq, "labelled": n, "ids": ids,
                   "labels": labels, "loss": loss.item(), **extra,
                   "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]},
                  f, indent=1)
