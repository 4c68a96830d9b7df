#!/usr/bin/env python3
"""make_qwen3_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and
PEFT for the qwen3 family (tests/unit/test_model.c, test_hf_model.c, test_grad.c).

Qwen3 is Qwen2 without the q/k/v biases and with an RMSNorm (x * rstd * w, no +1) over each head
of q and of k before RoPE (self_attn.q_norm / k_norm, GGUF attn_q_norm / attn_k_norm, head_dim
values each), and an explicit head_dim. The tiny model here has head_dim 24 against hidden 64 /
4 heads = 16, tied embeddings (as Qwen3-0.6B ... 4B), and random q/k norm weights in [0.5, 1.5].

Writes tests/data/qwen3/ with exactly the files make_family_goldens.py writes for a family (see
its docstring): tiny-{f32,q8_0,q4_0}.gguf with their ids/logits (float64 transformers on the
weights the file holds), tiny-f32.nf4.logits.f32, tiny.greedy.txt, peft.{json,init.f32,grads.f32},
hf/ (bf16) and hf-bnb4/ with their logits and greedy tokens. The GGUF files carry what llama.cpp's
Qwen3 converter writes: general.architecture qwen3, attention.key_length/value_length = head_dim,
rows not permuted, no output.weight when tied.

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(the NF4 and hf-bnb4 references; e.g. `pip install --target /tmp/bnb --no-deps bitsandbytes`):
  PYTHONPATH=/tmp/bnb $PTRAIN_PYTHON tests/reference/make_qwen3_goldens.py
"""
import numpy as np
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

import make_family_goldens as fam

FAMILY = "qwen3"

fam.FAMILIES[FAMILY] = dict(cls=Qwen3ForCausalLM, cfg=Qwen3Config, kwargs=dict(
    hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=24, vocab_size=fam.VOCAB, rms_norm_eps=1e-6, rope_theta=1000000.0,
    max_position_embeddings=256, tie_word_embeddings=True, attention_bias=False))

fam.LAYER_NAMES[FAMILY] = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}

family_make_model = fam.make_model
family_write_header = fam.write_header


def make_model(family):
    """make_family_goldens' model; qwen3's norms (the q/k norms too) get w in [0.5, 1.5]."""
    if family != FAMILY:
        return family_make_model(family)
    spec = fam.FAMILIES[family]
    torch.manual_seed(4321 + 7)
    model = spec["cls"](spec["cfg"](**spec["kwargs"])).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
    return model


def write_header(w, family, cfg):
    family_write_header(w, family, cfg)
    if family == FAMILY:  # llama.cpp's converter writes head_dim as the key and value lengths
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)


fam.make_model = make_model
fam.write_header = write_header


def check_config():
    """The head size differs from hidden/heads, so a reader that derives it gets other shapes."""
    kw = fam.FAMILIES[FAMILY]["kwargs"]
    assert kw["head_dim"] != kw["hidden_size"] // kw["num_attention_heads"]
    m = make_model(FAMILY)
    q = m.model.layers[0].self_attn.q_norm.weight
    assert q.shape == (kw["head_dim"],) and float((q.detach() - 1).abs().max()) > 0.1


if __name__ == "__main__":
    check_config()
    fam.make_family(FAMILY)
