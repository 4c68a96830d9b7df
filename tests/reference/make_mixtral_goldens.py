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
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import MixtralConfig, MixtralForCausalLM

import make_family_goldens as fam
import moe_goldens as moe
from make_hf_goldens import write_greedy

OUT = os.path.join(fam.DATA, "mixtral")
E = 6
KWARGS = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=fam.VOCAB, rms_norm_eps=1e-5, max_position_embeddings=256,
              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False,
              num_local_experts=E, num_experts_per_tok=2, sliding_window=12)


def make_model():
    return moe.make_model(MixtralForCausalLM, MixtralConfig(**KWARGS, experts_implementation="eager"), 4321 + 3801)


def fused_state(sd):
    """The saved (block_sparse_moe, w1/w2/w3) state dict as transformers 5 holds it in memory."""
    return moe.fused_state(sd, "block_sparse_moe", ("w1", "w3", "w2"), E)


def peft_goldens(weights):
    base = make_model()
    fam.load_weights(base, weights)
    moe.peft_goldens(base, OUT, "mixtral", 12)


def main():
    model = make_model()
    dest = os.path.join(OUT, "hf")
    bf16, saved = moe.save_bf16(model, MixtralForCausalLM, MixtralConfig(**KWARGS), dest)  # the reference on the bf16 weights
    assert "model.layers.0.block_sparse_moe.experts.5.w2.weight" in saved, sorted(saved)[:12]
    fused = os.path.join(OUT, "hf-fused")
    shutil.rmtree(fused, ignore_errors=True)
    os.makedirs(fused)
    shutil.copy(os.path.join(dest, "config.json"), fused)
    save_file(fused_state(saved), os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    ids = np.random.default_rng(8).integers(0, fam.VOCAB, size=40)
    ref = moe.logits_of(model, ids)
    for d in (dest, fused):  # transformers reads both alike
        back = MixtralForCausalLM.from_pretrained(d, dtype=torch.float64, experts_implementation="eager").eval()
        assert np.abs(moe.logits_of(back, ids) - ref).max() < 1e-9, f"{d} reads differently"
    full = MixtralForCausalLM(MixtralConfig(**{**KWARGS, "sliding_window": None}, experts_implementation="eager")).double().eval()
    full.load_state_dict(model.state_dict())
    assert np.abs(moe.logits_of(full, ids) - ref).max() > 1e-3, "the sliding window changes nothing"
    counts = moe.routing_counts(model, ids, E)
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
