#!/usr/bin/env python3
"""make_gemma3_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and
PEFT for the gemma3 family, Gemma 3's text model (tests/unit/test_model.c, test_hf_model.c,
test_grad.c).

Gemma 3 is Gemma 2's block (norms before and after attention and the MLP, all x * (1 + w);
tanh-GELU; embeddings times sqrt(hidden)) without the soft-caps, with an RMSNorm (1 + w) over each
head of q and k before RoPE, five local (sliding-window) layers of every six, the local layers
rotating by their own base (rope_local_base_freq, unscaled) and the global ones by rope_theta with
its scaling. The tiny model here shows each: 7 layers (layer 5 global, 6 local again), a window
of 6 against 40 test tokens, head_dim 24 against hidden 64 / 4 heads, linear scaling 2 on the
global layers, random norm weights, query_pre_attn_scalar 24 (= head_dim, which is what a GGUF
file implies) and 20 in the hf/ directory (which only config.json can say).

Writes tests/data/gemma3/ with the files make_family_goldens.py writes for a family (see its
docstring). The GGUF files are what llama.cpp's Gemma 3 converter writes: general.architecture
gemma3, every norm weight (the q/k norms too) stored as 1 + w, attention.key_length /
value_length, attention.sliding_window, rope.scaling linear; no output.weight (tied).

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(e.g. `pip install --target /tmp/bnb --no-deps bitsandbytes`):
  PYTHONPATH=/tmp/bnb $PTRAIN_PYTHON tests/reference/make_gemma3_goldens.py
"""
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

import make_family_goldens as fam

FAMILY = "gemma3"

fam.FAMILIES[FAMILY] = dict(cls=Gemma3ForCausalLM, cfg=Gemma3TextConfig, kwargs=dict(
    hidden_size=64, intermediate_size=96, num_hidden_layers=7, num_attention_heads=4,
    num_key_value_heads=2, head_dim=24, vocab_size=fam.VOCAB, rms_norm_eps=1e-6,
    max_position_embeddings=256, query_pre_attn_scalar=24, sliding_window=6,
    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, attn_implementation="eager"))

fam.LAYER_NAMES[FAMILY] = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}

family_make_model = fam.make_model
family_write_gguf = fam.write_gguf
family_hf_kwargs = fam.hf_kwargs


def make_model(family):
    """Norm weights w in [-0.5, 0.5] (so 1 + w in [0.5, 1.5]); projections N(0, 1/fan_in)."""
    if family != FAMILY:
        return family_make_model(family)
    spec = fam.FAMILIES[family]
    torch.manual_seed(4321 + 11)
    model = spec["cls"](spec["cfg"](**spec["kwargs"])).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(-0.5, 0.5)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
    return model


def write_gguf(path, family, model, qtype):
    """As make_family_goldens.write_gguf, with Gemma 3's keys and every norm stored as 1 + w."""
    if family != FAMILY:
        return family_write_gguf(path, family, model, qtype)
    cfg = model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(path, family)
    w.add_name("tiny-" + family)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    full = cfg.rope_parameters["full_attention"]
    w.add_rope_freq_base(full["rope_theta"])
    w.add_rope_scaling_type(__import__("gguf").RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(full["factor"])
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_sliding_window(cfg.sliding_window)
    back = {}

    def put(gname, hfname):
        t = sd[hfname]
        norm = "norm" in hfname
        if norm:
            t = t + 1.0
        stored, deq = fam.store(Q.F32 if t.ndim == 1 else qtype, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if t.ndim > 1 and qtype != Q.F32 else None)
        if norm:
            deq = deq.astype(np.float64) - 1.0
        back[hfname] = torch.from_numpy(deq.astype(np.float64))

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight")
    for i in range(cfg.num_hidden_layers):
        for hf, g in fam.LAYER_NAMES[family].items():
            put(f"blk.{i}.{g}.weight", f"model.layers.{i}.{hf}.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    back["lm_head.weight"] = back["model.embed_tokens.weight"]
    return back


def hf_kwargs(family):
    """hf/'s config: query_pre_attn_scalar 20, which no GGUF key can carry."""
    kwargs = family_hf_kwargs(family)
    if family == FAMILY:
        kwargs["query_pre_attn_scalar"] = 20
    return kwargs


fam.make_model = make_model
fam.write_gguf = write_gguf
fam.hf_kwargs = hf_kwargs


def check_config():
    """The quirks show: a global layer inside, local layers after it, head size != hidden/heads."""
    m = make_model(FAMILY)
    types = m.config.layer_types
    assert types[5] == "full_attention" and types[6] == "sliding_attention" and types.count("full_attention") == 1
    kw = fam.FAMILIES[FAMILY]["kwargs"]
    assert kw["head_dim"] != kw["hidden_size"] // kw["num_attention_heads"]


if __name__ == "__main__":
    check_config()
    fam.make_family(FAMILY)
