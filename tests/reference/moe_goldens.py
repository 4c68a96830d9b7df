"""moe_goldens.py — what the mixture-of-experts golden scripts share (make_qwen3moe_goldens.py,
make_mixtral_goldens.py; through them make_moe_lora_goldens.py and make_moe_gguf_goldens.py): the tiny random
model's set-up, its bf16 directory, its logits, how many tokens each expert gets, the experts fused as transformers 5 holds them,
and PEFT's LoRA gradients on the attention. Each family's script gives its class, config, seed and names.
"""
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import load_file

import make_family_goldens as fam

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]


def make_model(model_cls, config, seed):
    """A float64 model of config with random weights: norms around 1, routers large enough that the top-k
    choice varies from token to token, every other matrix of unit-variance outputs."""
    torch.manual_seed(seed)
    model = model_cls(config).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith("mlp.gate.weight"):
                p.normal_(0.0, 3.0 / np.sqrt(p.shape[1]))
            elif p.dim() >= 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[-1]))
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids))[None]).logits[0].numpy()


def routing_counts(model, ids, n_experts):
    """How many tokens each expert of each sparse layer gets (all experts used, not all alike)."""
    counts = {}

    def hook(layer):
        def f(module, args, out):
            counts[layer] = np.bincount(out[2].reshape(-1).numpy(), minlength=n_experts)
        return f

    hs = [m.mlp.gate.register_forward_hook(hook(i)) for i, m in enumerate(model.model.layers)
          if hasattr(m.mlp, "gate")]
    logits_of(model, ids)
    for h in hs:
        h.remove()
    return counts


def fused_state(sd, block, names, n_experts):
    """The state dict save_pretrained writes (experts one by one: <block>.experts.E.<gate, up, down name>.weight,
    the router <block>.gate.weight) as transformers 5 holds it in memory: the router mlp.gate.weight, each sparse
    layer's experts mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and mlp.experts.down_proj [E, H, I]."""
    gate, up, down = names
    out = {k.replace(f".{block}.gate.", ".mlp.gate."): v for k, v in sd.items() if f".{block}.experts." not in k}
    for pre in sorted({k.split(f".{block}.experts.")[0] for k in sd if f".{block}.experts." in k}):
        e = [f"{pre}.{block}.experts.{i}." for i in range(n_experts)]
        out[f"{pre}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([sd[x + gate + ".weight"], sd[x + up + ".weight"]], 0) for x in e]).contiguous()
        out[f"{pre}.mlp.experts.down_proj"] = torch.stack([sd[x + down + ".weight"] for x in e]).contiguous()
    return out


def peft_goldens(base, out, family, seed):
    """peft.json, peft.init.f32, peft.grads.f32 in out: PEFT's LoRA r=4, alpha=8 on q/k/v/o of every layer of base
    (weights loaded), A and B random (rounded to f32), the router and experts frozen (the gradient flows through
    them), a batch of 2 x 16 tokens (rng seed) with some labels -100, transformers' mean cross-entropy."""
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg).double()
    params = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        for mod in MODULES:
            lin = getattr(layer.self_attn, mod)
            params += [(i, mod, "A", lin.lora_A["default"].weight), (i, mod, "B", lin.lora_B["default"].weight)]
    with torch.no_grad():
        for _, _, _, p in params:
            p.copy_(p.float().double())
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, fam.VOCAB, size=(2, 16))
    labels = ids.copy()
    labels[0, :4] = -100
    labels[1, 9:12] = -100
    loss = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss
    loss.backward()
    router = model.base_model.model.model.layers[0].mlp.gate.weight
    assert router.grad is None or not router.requires_grad  # frozen
    cat = lambda f: np.concatenate([f(p).detach().numpy().astype("<f4").ravel() for *_, p in params])  # noqa: E731
    cat(lambda p: p).tofile(os.path.join(out, "peft.init.f32"))
    cat(lambda p: p.grad).tofile(os.path.join(out, "peft.grads.f32"))
    with open(os.path.join(out, "peft.json"), "w") as f:
        json.dump({"model": f"tests/data/{family}/hf", "r": 4, "alpha": 8, "batch": 2, "seq": 16,
                   "ids": ids.ravel().tolist(), "labels": labels.ravel().tolist(), "loss": loss.item(),
                   "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)}
                               for i, m, w, p in params]}, f, indent=1)
    print(f"  PEFT: loss {loss.item():.6f}, {len(params)} LoRA tensors")


def save_bf16(model, model_cls, config, dest):
    """model's weights rounded to bf16 (model then holds them in float64: the reference runs on the bf16 weights),
    saved to dest as save_pretrained writes them (no generation_config.json), with the tiny tokenizer. Returns the
    bf16 state dict and the tensors as saved."""
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    fam.load_weights(model, {k: v.double() for k, v in bf16.items()})
    shutil.rmtree(dest, ignore_errors=True)
    saver = model_cls(config).to(torch.bfloat16)
    saver.load_state_dict(bf16)
    saver.save_pretrained(dest, safe_serialization=True)
    gen = os.path.join(dest, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    fam.make_tokenizer(dest)
    return bf16, load_file(os.path.join(dest, "model.safetensors"))
