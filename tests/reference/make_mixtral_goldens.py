#!/usr/bin/env python3
"""make_mixtral_goldens.py — reference logits, greedy tokens and LoRA gradients from Hugging Face
transformers and PEFT for the mixtral family (tests/unit/test_moe.c).

A tiny random Mixtral: llama attention (hidden 64, 4 heads, 2 KV heads), 2 layers, each a mixture of
6 experts, top-2 (softmax over all experts, the two renormalised, as MixtralTopKRouter computes), expert
width (intermediate_size) 64 so every expert weight is whole NF4 blocks, sliding_window 12 (shorter
than the 40 ids and the 16-token training rows), untied lm_head, router weights large enough that the
top-2 choice varies from token to token (each layer's routing counts are printed and checked).

Writes tests/data/mixtral/:
  hf/            config.json, model.safetensors (bf16, as save_pretrained writes it: the original
                 Mixtral names block_sparse_moe.gate and block_sparse_moe.experts.E.{w1,w2,w3}), the
                 tokenizer of make_family_goldens;
  hf-fused/      the same weights as transformers 5 holds them in memory (mlp.gate,
                 mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]);
  hf.ids.txt, hf.logits.f32, hf.greedy.txt
                 40 ids, transformers' logits on them (float64 on the bf16 weights), greedy tokens;
  peft.json, peft.init.f32, peft.grads.f32
                 LoRA gradients from PEFT (float64 on the bf16 weights): r=4, alpha=8 on q_proj, k_proj,
                 v_proj, o_proj of every layer, A and B random (rounded to f32), the router and experts
                 frozen, a batch of 2 x 16 tokens with some labels -100, mean cross-entropy.

Run (the outputs are committed; CI only reads them):
  $PTRAIN_PYTHON tests/reference/make_mixtral_goldens.py
"""
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import MixtralConfig, MixtralForCausalLM

import make_family_goldens as fam
from make_hf_goldens import write_greedy

OUT = os.path.join(fam.DATA, "mixtral")
E = 6
KWARGS = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=fam.VOCAB, rms_norm_eps=1e-5, max_position_embeddings=256,
              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False,
              num_local_experts=E, num_experts_per_tok=2, sliding_window=12)
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]


def make_model():
    torch.manual_seed(4321 + 3801)
    model = MixtralForCausalLM(MixtralConfig(**KWARGS, experts_implementation="eager")).double().eval()
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


def routing_counts(model, ids):
    """How many tokens each expert of each layer gets (all experts used, not all alike)."""
    counts = {}

    def hook(layer):
        def f(module, args, out):
            counts[layer] = np.bincount(out[2].reshape(-1).numpy(), minlength=E)
        return f

    hs = [m.mlp.gate.register_forward_hook(hook(i)) for i, m in enumerate(model.model.layers)]
    logits_of(model, ids)
    for h in hs:
        h.remove()
    return counts


def fused_state(sd):
    """The saved (block_sparse_moe, w1/w2/w3) state dict as transformers 5 holds it in memory."""
    out = {k.replace(".block_sparse_moe.gate.", ".mlp.gate."): v for k, v in sd.items() if ".experts." not in k}
    for pre in sorted({k.split(".block_sparse_moe.")[0] for k in sd if ".experts." in k}):
        e = [f"{pre}.block_sparse_moe.experts.{i}." for i in range(E)]
        out[f"{pre}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([sd[x + "w1.weight"], sd[x + "w3.weight"]], 0) for x in e]).contiguous()
        out[f"{pre}.mlp.experts.down_proj"] = torch.stack([sd[x + "w2.weight"] for x in e]).contiguous()
    return out


def peft_goldens(weights):
    from peft import LoraConfig, get_peft_model
    base = make_model()
    fam.load_weights(base, weights)
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
    rng = np.random.default_rng(12)
    ids = rng.integers(0, fam.VOCAB, size=(2, 16))
    labels = ids.copy()
    labels[0, :4] = -100
    labels[1, 9:12] = -100
    loss = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss
    loss.backward()
    router = model.base_model.model.model.layers[0].mlp.gate.weight
    assert router.grad is None or not router.requires_grad  # frozen
    cat = lambda f: np.concatenate([f(p).detach().numpy().astype("<f4").ravel() for *_, p in params])  # noqa: E731
    cat(lambda p: p).tofile(os.path.join(OUT, "peft.init.f32"))
    cat(lambda p: p.grad).tofile(os.path.join(OUT, "peft.grads.f32"))
    with open(os.path.join(OUT, "peft.json"), "w") as f:
        json.dump({"model": "tests/data/mixtral/hf", "r": 4, "alpha": 8, "batch": 2, "seq": 16,
                   "ids": ids.ravel().tolist(), "labels": labels.ravel().tolist(), "loss": loss.item(),
                   "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)}
                               for i, m, w, p in params]}, f, indent=1)
    print(f"  PEFT: loss {loss.item():.6f}, {len(params)} LoRA tensors")


def main():
    model = make_model()
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    fam.load_weights(model, {k: v.double() for k, v in bf16.items()})  # the reference on the bf16 weights
    dest = os.path.join(OUT, "hf")
    shutil.rmtree(dest, ignore_errors=True)
    saver = MixtralForCausalLM(MixtralConfig(**KWARGS)).to(torch.bfloat16)
    saver.load_state_dict(bf16)
    saver.save_pretrained(dest, safe_serialization=True)
    gen = os.path.join(dest, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    fam.make_tokenizer(dest)
    saved = load_file(os.path.join(dest, "model.safetensors"))
    assert "model.layers.0.block_sparse_moe.experts.5.w2.weight" in saved, sorted(saved)[:12]
    fused = os.path.join(OUT, "hf-fused")
    shutil.rmtree(fused, ignore_errors=True)
    os.makedirs(fused)
    shutil.copy(os.path.join(dest, "config.json"), fused)
    save_file(fused_state(saved), os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    ids = np.random.default_rng(8).integers(0, fam.VOCAB, size=40)
    ref = logits_of(model, ids)
    for d in (dest, fused):  # transformers reads both alike
        back = MixtralForCausalLM.from_pretrained(d, dtype=torch.float64, experts_implementation="eager").eval()
        assert np.abs(logits_of(back, ids) - ref).max() < 1e-9, f"{d} reads differently"
    full = MixtralForCausalLM(MixtralConfig(**{**KWARGS, "sliding_window": None}, experts_implementation="eager")).double().eval()
    full.load_state_dict(model.state_dict())
    assert np.abs(logits_of(full, ids) - ref).max() > 1e-3, "the sliding window changes nothing"
    counts = routing_counts(model, ids)
    print("tokens per expert (top-2 of 40 tokens):", {k: v.tolist() for k, v in counts.items()})
    assert all((v > 0).all() for v in counts.values()) and len(counts) == 2
    fam.write_logits(OUT, "hf", ids, ref)
    write_greedy(os.path.join(OUT, "hf"), model, ids[:8])
    peft_goldens({k: v.double() for k, v in bf16.items()})
    for d in (dest, fused):
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)


if __name__ == "__main__":
    main()
