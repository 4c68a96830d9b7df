#!/usr/bin/env python3
"""make_family_models.py — the random models of run-family.sh: a Qwen3 and a Gemma 3 with the layer shapes of
released sizes (Qwen3-0.6B: hidden 1024, 16 query and 8 key/value heads of 128, q/k norms, MLP 3072; Gemma 3 1B:
hidden 1152, 4 query heads and 1 key/value head of 256, q/k norms, post-norms, GeGLU MLP 6912, a window of 512 on 5
layers of 6, local rope base 10000, global 1e6), fewer layers (6 each) and a 32768-token vocabulary, so that a
training step takes seconds, not minutes, on a small CPU and neither side's logits dominate. Weights as transformers
initializes them, saved in bf16 as the released checkpoints are.
run-moe.sh's qwen3moe is Qwen3-30B-A3B's shape scaled down: a quarter of its width (hidden 512, query heads of 128
twice the hidden size wide, 8 query heads to 1 key/value head as its 32 to 4, experts of width 192 against 768), a
quarter of its layers (12 of 48, every one sparse), half its experts (64 of 128) with its top-8, the same vocabulary
as the others.
Usage: make_family_models.py OUT [NAME...]   (writes OUT/qwen3 and OUT/gemma3, or the NAMEs given: qwen3moe)"""
import os
import sys

import torch
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

SHAPES = {
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(
        hidden_size=1024, intermediate_size=3072, num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=8,
        head_dim=128, vocab_size=32768, max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=1e6)),
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
        hidden_size=1152, intermediate_size=6912, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
        head_dim=256, vocab_size=32768, max_position_embeddings=4096, sliding_window=512, query_pre_attn_scalar=256,
        pad_token_id=0, bos_token_id=2, eos_token_id=1)),
    "qwen3moe": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        hidden_size=512, intermediate_size=1536, moe_intermediate_size=192, num_hidden_layers=12, num_attention_heads=8,
        num_key_value_heads=1, head_dim=128, num_experts=64, num_experts_per_tok=8, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[], vocab_size=32768, max_position_embeddings=4096,
        tie_word_embeddings=False, rope_theta=1e6)),
}
DEFAULT = ("qwen3", "gemma3")


def main(out, names):
    for name in names:
        cls, cfg = SHAPES[name]
        torch.manual_seed(0)
        model = cls(cfg).to(torch.bfloat16)
        dest = os.path.join(out, name)
        model.save_pretrained(dest, safe_serialization=True)
        n = sum(p.numel() for p in model.parameters())
        print(f"{name}: {n / 1e6:.1f}M parameters in {dest}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or any(n not in SHAPES for n in sys.argv[2:]):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:] or DEFAULT)
