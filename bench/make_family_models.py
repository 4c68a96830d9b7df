#!/usr/bin/env python3
"""make_family_models.py — the random models of run-family.sh: a Qwen3 and a Gemma 3 with the layer shapes of
released sizes (Qwen3-0.6B: hidden 1024, 16 query and 8 key/value heads of 128, q/k norms, MLP 3072; Gemma 3 1B:
hidden 1152, 4 query heads and 1 key/value head of 256, q/k norms, post-norms, GeGLU MLP 6912, a window of 512 on 5
layers of 6, local rope base 10000, global 1e6), fewer layers (6 each) and a 32768-token vocabulary, so that a
training step takes seconds, not minutes, on a small CPU and neither side's logits dominate. Weights as transformers
initializes them, saved in bf16 as the released checkpoints are.
Usage: make_family_models.py OUT   (writes OUT/qwen3 and OUT/gemma3)"""
import os
import sys

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, Qwen3Config, Qwen3ForCausalLM

SHAPES = {
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(
        hidden_size=1024, intermediate_size=3072, num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=8,
        head_dim=128, vocab_size=32768, max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=1e6)),
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
        hidden_size=1152, intermediate_size=6912, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
        head_dim=256, vocab_size=32768, max_position_embeddings=4096, sliding_window=512, query_pre_attn_scalar=256,
        pad_token_id=0, bos_token_id=2, eos_token_id=1)),
}


def main(out):
    for name, (cls, cfg) in SHAPES.items():
        torch.manual_seed(0)
        model = cls(cfg).to(torch.bfloat16)
        dest = os.path.join(out, name)
        model.save_pretrained(dest, safe_serialization=True)
        n = sum(p.numel() for p in model.parameters())
        print(f"{name}: {n / 1e6:.1f}M parameters in {dest}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
