#!/usr/bin/env python3
"""make_gemma4_goldens.py — reference logits and greedy tokens from Hugging Face transformers 5.25 for
the gemma4 family, Gemma 4's text model (tests/unit/test_hf_model.c, test_gemma4_*).

Gemma 4's block is Gemma 3's (four norms around attention and the MLP, tanh-GELU, embeddings times
sqrt(hidden)) with norms that compute x * w (not x * (1 + w)), q/k norms then an attention scale of 1, an
unweighted RMSNorm of the values, sliding and global layers from layer_types each with their own head
size (per_layer_config), key/value heads and RoPE (sliding: default, base 1e4; global: "proportional",
the first partial_rotary_factor of each head's pairs turning by base^(-2i/head), the others not at all),
values equal to the keys before their norm on global layers (attention_k_eq_v), per-layer inputs
(embed_tokens_per_layer, per_layer_model_projection and its norm, and per layer a gate, a projection and
a norm after it), KV sharing (the last num_kv_shared_layers layers reuse the keys and values of the last
earlier layer of their kind), a scalar per layer and final logit soft-capping. The tiny model here shows
each: 7 layers, every third global and the last forced global (S S F S S F F), a window of 6 against 40
test tokens, head size 16 on sliding and 32 on global layers (1 key/value head there, 2 on sliding),
rotary fraction 0.25 of the global heads, k_eq_v, 3 KV-shared layers (one sliding reusing layer 3, two
global reusing layer 2), per-layer inputs of 64 values (so the per-layer table is NF4 under
load_in_4bit), random norm weights and layer scalars, soft-cap 5 on logits reaching about 4.

Writes tests/data/gemma4/:
  hf32/ + hf32.{ids.txt,logits.f32,greedy.txt}   the model in f32 (config.json as transformers writes
      it, per_layer_config included; a 384-token byte-level BPE tokenizer); float64 logits of 40 ids and
      12 greedy tokens (checked against transformers' generate() through its own cache);
  hf32.nf4.{ids.txt,logits.f32,greedy.txt}       the same for hf32/ loaded with load_in_4bit: every
      weight ptrain quantizes (projections with whole 64-blocks of input, each layer's rows of
      per_layer_model_projection and each layer's columns of embed_tokens_per_layer, each on its own)
      through bitsandbytes' NF4 with double quantization;
  hf/ + hf.{ids.txt,logits.f32,greedy.txt}       the model in bf16 and its logits on the bf16 weights.

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(e.g. `pip install --target /tmp/bnb --no-deps bitsandbytes`):
  PYTHONPATH=/tmp/bnb $PTRAIN_PYTHON tests/reference/make_gemma4_goldens.py
"""
import os
import shutil

import numpy as np
import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

from make_family_goldens import VOCAB, load_weights, logits_of, make_tokenizer, nf4_roundtrip, write_logits
from make_hf_goldens import write_greedy

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gemma4")
LAYERS = 7
PLE = 64

KWARGS = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=LAYERS, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
    sliding_window=6, layer_types=["sliding_attention" if (i + 1) % 3 else "full_attention" for i in range(LAYERS)],
    rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=PLE, num_kv_shared_layers=3,
    final_logit_softcapping=5.0, max_position_embeddings=256, rms_norm_eps=1e-6,
    hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, attn_implementation="eager")


def config():
    return Gemma4TextConfig(**KWARGS)


def make_model():
    """Norm weights in [0.5, 1.5] (Gemma 4's norms are x * w), the q/k norms' in [0.2, 0.6] (at attention scale 1,
    scores of unit-RMS heads would make the softmax nearly hard, and the logits chaotic in the weights' last bits),
    layer scalars in [0.8, 1.2]; matrices N(0, 1/fan_in)."""
    torch.manual_seed(4321 + 4)
    model = Gemma4ForCausalLM(config()).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "q_norm" in name or "k_norm" in name:  # scores q.k at scale 1 of a size a softmax keeps soft
                p.uniform_(0.2, 0.6)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
        for layer in model.model.layers:
            layer.layer_scalar.uniform_(0.8, 1.2)
    return model


def check_config(model):
    """The features show: the last layer forced global, layers past the period, KV sharing of both kinds."""
    cfg = model.config
    assert cfg.layer_types == ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                               "sliding_attention", "full_attention", "full_attention"], cfg.layer_types
    assert cfg.kv_sharing_modes == [None, None, "store", "store", "reuse", "reuse", "reuse"], cfg.kv_sharing_modes
    assert model.model.layers[2].self_attn.v_proj is None and model.model.layers[2].self_attn.head_dim == 32


def save_dir(model, dest, dtype):
    shutil.rmtree(dest, ignore_errors=True)
    saver = Gemma4ForCausalLM(config()).to(dtype)
    saver.load_state_dict({k: v.to(dtype) for k, v in model.state_dict().items()})
    saver.save_pretrained(dest, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(dest, extra)):
            os.remove(os.path.join(dest, extra))
    make_tokenizer(dest)
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)


def rounded(model, dtype):
    """A float64 model holding model's weights rounded to dtype (buffers such as layer_scalar too)."""
    ref = make_model()
    load_weights(ref, {k: v.to(dtype).double() for k, v in model.state_dict().items()})
    return ref


def nf4_model(model):
    """model's f32 weights as ptrain's load_in_4bit keeps them: projections whose input is whole 64-blocks,
    each layer's rows of per_layer_model_projection and each layer's columns of embed_tokens_per_layer, each
    quantized on its own; embeddings, lm_head and norms as they are."""
    sd = {k: v.float().double() for k, v in model.state_dict().items()}
    out = dict(sd)
    for name, v in sd.items():
        if name.startswith("model.layers.") and v.dim() == 2 and v.shape[1] % 64 == 0:
            out[name] = torch.from_numpy(nf4_roundtrip(v.numpy()))
    proj = sd["model.per_layer_model_projection.weight"].numpy()
    table = sd["model.embed_tokens_per_layer.weight"].numpy()
    proj_q, table_q = proj.copy(), table.copy()
    for i in range(LAYERS):
        rows = slice(i * PLE, (i + 1) * PLE)
        proj_q[rows] = nf4_roundtrip(proj[rows])
        table_q[:, rows] = nf4_roundtrip(np.ascontiguousarray(table[:, rows]))
    out["model.per_layer_model_projection.weight"] = torch.from_numpy(proj_q)
    out["model.embed_tokens_per_layer.weight"] = torch.from_numpy(table_q)
    ref = make_model()
    load_weights(ref, out)
    return ref


def main():
    os.makedirs(OUT, exist_ok=True)
    model = make_model()
    check_config(model)
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    save_dir(model, os.path.join(OUT, "hf32"), torch.float32)
    save_dir(model, os.path.join(OUT, "hf"), torch.bfloat16)
    for name, ref in (("hf32", rounded(model, torch.float32)), ("hf32.nf4", nf4_model(model)),
                      ("hf", rounded(model, torch.bfloat16))):
        logits = logits_of(ref, ids)
        write_logits(OUT, name, ids, logits)
        with torch.no_grad():
            raw = ref.lm_head(ref.model(torch.from_numpy(ids)[None]).last_hidden_state)
        print(f"{name}: logits |max| {np.abs(logits).max():.3f}, before the soft-cap {raw.abs().max():.2f}")
        write_greedy(os.path.join(OUT, name), ref, ids[:8])


if __name__ == "__main__":
    main()
