#!/usr/bin/env python3
"""make_llama_goldens.py — reference logits from Hugging Face transformers for ptrain's parity tests.

Writes, under tests/data/llama/:
  tiny-{mha,gqa}-{f32,q8_0,q4_0,q4_1}.gguf  tiny random Llama models as GGUF, written the way
      llama.cpp's converter writes them (q/k rows permuted for interleaved RoPE; Llama 3 rope
      scaling as a rope_freqs tensor);
  NAME.ids.txt / NAME.logits.f32            input ids and transformers' logits [T, vocab] (float32,
      little-endian), computed in float64 from the very weights stored in the file (dequantized).
and, when the SmolLM2 GGUF is given, tests/data/smollm2/next_token.json: prompts, their ids and
transformers' top-20 next tokens with logits (transformers dequantizes the Q4_1 file itself).

Run (the outputs are committed; CI only reads them):
  python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch transformers gguf numpy accelerate bitsandbytes
  /tmp/refenv/bin/python tests/reference/make_llama_goldens.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import json
import math
import os
import sys

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, quants
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "llama")

MODELS = {
    # name: (config kwargs, tied embeddings)
    "mha": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, vocab_size=320, rms_norm_eps=1e-5, rope_theta=10000.0,
                max_position_embeddings=256, tie_word_embeddings=False),
    "gqa": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=288, rms_norm_eps=1e-6, rope_theta=500000.0,
                max_position_embeddings=256, tie_word_embeddings=True,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=32)),
}
TYPES = {"f32": Q.F32, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1}


def permute(w, n_head):
    """llama.cpp's q/k row permutation (HF rotate-half -> interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def store(qtype, w):
    """What the file will hold for w, and the float values a reader gets back."""
    if qtype == Q.F32:
        return w.astype(np.float32), w.astype(np.float32)
    packed = quants.quantize(w.astype(np.float32), qtype)
    return packed, quants.dequantize(packed, qtype).astype(np.float32)


def rope_factors(cfg):
    """Llama 3 scaling as llama.cpp's converter stores it: one divisor per rotary frequency."""
    rs = cfg.rope_parameters
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    base = rs["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    orig, factor = rs["original_max_position_embeddings"], rs["factor"]
    low_wl, high_wl = orig / rs["low_freq_factor"], orig / rs["high_freq_factor"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            s = (orig / wl - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def nf4_roundtrip(w):
    """What bitsandbytes' NF4 with double quantization (blocksize 64) gives back for w."""
    import bitsandbytes.functional as F
    t = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    q, state = F.quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=True)
    return F.dequantize_4bit(q, state).numpy().astype(np.float64)


def write_nf4_reference(name, kind):
    """Logits for the f32 file loaded with load_in_4bit: the 7 projections go through NF4."""
    cfg = LlamaConfig(**MODELS[kind])
    torch.manual_seed(1234 + len(kind))
    model = LlamaForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        model.model.norm.weight.uniform_(0.5, 1.5)
        for layer in model.model.layers:
            for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
                        layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
                w = lin.weight.numpy().astype(np.float32)  # the file stores f32
                if w.shape[1] % 64 == 0:  # ptrain's rule: NF4 blocks of 64 never straddle two rows
                    lin.weight.copy_(torch.from_numpy(nf4_roundtrip(w)))
                else:
                    lin.weight.copy_(torch.from_numpy(w.astype(np.float64)))
        for emb in {model.model.embed_tokens.weight.data_ptr(): model.model.embed_tokens,
                    model.lm_head.weight.data_ptr(): model.lm_head}.values():
            emb.weight.copy_(torch.from_numpy(emb.weight.numpy().astype(np.float32).astype(np.float64)))
        for norm in [model.model.norm] + [l.input_layernorm for l in model.model.layers] + \
                [l.post_attention_layernorm for l in model.model.layers]:
            norm.weight.copy_(torch.from_numpy(norm.weight.numpy().astype(np.float32).astype(np.float64)))
        ids = np.random.default_rng(7).integers(0, cfg.vocab_size, size=40)
        logits = model(torch.from_numpy(ids)[None]).logits[0].numpy().astype(np.float32)
    logits.astype("<f4").tofile(os.path.join(OUT, name + ".nf4.logits.f32"))
    print(f"{name} (NF4 on load): logits {logits.shape}")


def write_model(name, kind, qname):
    kwargs = dict(MODELS[kind])
    cfg = LlamaConfig(**kwargs)
    torch.manual_seed(1234 + len(kind))
    model = LlamaForCausalLM(cfg).double().eval()
    with torch.no_grad():  # random norms too, so a wrong norm cannot hide
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        model.model.norm.weight.uniform_(0.5, 1.5)
    qtype = TYPES[qname]
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(os.path.join(OUT, name + ".gguf"), "llama")
    w.add_name("tiny-" + kind)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(kwargs["rope_theta"])
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    back = {}

    def put(gname, hfname, quantize=True, perm_heads=0):
        t = sd[hfname]
        if perm_heads:
            t = permute(t, perm_heads)
        stored, deq = store(qtype if quantize else Q.F32, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if quantize and qtype != Q.F32 else None)
        if perm_heads:  # undo the permutation for the HF reference
            deq = deq.reshape(perm_heads, deq.shape[0] // perm_heads // 2, 2, -1).swapaxes(1, 2).reshape(deq.shape)
        back[hfname] = deq

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight", quantize=False)
    if not cfg.tie_word_embeddings:
        put("output.weight", "lm_head.weight")
    if "rope_scaling" in kwargs:
        w.add_tensor("rope_freqs.weight", rope_factors(cfg))
    names = {"attn_q": ("self_attn.q_proj", cfg.num_attention_heads), "attn_k": ("self_attn.k_proj", cfg.num_key_value_heads),
             "attn_v": ("self_attn.v_proj", 0), "attn_output": ("self_attn.o_proj", 0),
             "ffn_gate": ("mlp.gate_proj", 0), "ffn_up": ("mlp.up_proj", 0), "ffn_down": ("mlp.down_proj", 0)}
    for i in range(cfg.num_hidden_layers):
        put(f"blk.{i}.attn_norm.weight", f"model.layers.{i}.input_layernorm.weight", quantize=False)
        put(f"blk.{i}.ffn_norm.weight", f"model.layers.{i}.post_attention_layernorm.weight", quantize=False)
        for g, (hf, heads) in names.items():
            put(f"blk.{i}.{g}.weight", f"model.layers.{i}.{hf}.weight", perm_heads=heads)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # the reference: transformers on exactly the stored (dequantized) weights, in float64
    with torch.no_grad():
        new_sd = model.state_dict()
        for k, v in back.items():
            new_sd[k] = torch.from_numpy(v.astype(np.float64))
        if cfg.tie_word_embeddings:
            new_sd["lm_head.weight"] = new_sd["model.embed_tokens.weight"]
        model.load_state_dict(new_sd)
        rng = np.random.default_rng(7)
        ids = rng.integers(0, cfg.vocab_size, size=40)
        logits = model(torch.from_numpy(ids)[None]).logits[0].numpy().astype(np.float32)
    with open(os.path.join(OUT, name + ".ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits.astype("<f4").tofile(os.path.join(OUT, name + ".logits.f32"))
    print(f"{name}: {len(ids)} tokens, logits {logits.shape}, |max| {np.abs(logits).max():.3f}")


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n <",
    "1, 2, 3, 4, 5,",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy",
    "Photosynthesis is the process by which plants",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nName a primary colour.<|im_end|>\n<|im_start|>assistant\n",
    "In 1969, Neil Armstrong became the first person to",
]


def smollm2_goldens(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for text in PROMPTS:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([ids])).logits[0, -1].double()
            top = torch.topk(logits, 20)
            out.append({"text": text, "ids": ids, "top_ids": top.indices.tolist(),
                        "top_logits": [round(float(x), 6) for x in top.values]})
            print(repr(text[:40]), "->", repr(tok.decode([top.indices[0]])))
    dest = os.path.join(HERE, "..", "data", "smollm2", "next_token.json")
    with open(dest, "w") as fh:
        json.dump(out, fh, indent=1)


def write_bad_models():
    """Small GGUF files that are valid GGUF but not a usable model: each must give one clear error."""
    def header(w, layers=1):
        w.add_block_count(layers)
        w.add_embedding_length(32)
        w.add_feed_forward_length(64)
        w.add_head_count(2)
        w.add_head_count_kv(2)

    def finish(w):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    w = GGUFWriter(os.path.join(OUT, "bad-arch.gguf"), "bert")
    header(w)
    w.add_tensor("token_embd.weight", zeros(16, 32))
    finish(w)
    w = GGUFWriter(os.path.join(OUT, "bad-missing-tensor.gguf"), "llama")
    header(w)
    w.add_tensor("token_embd.weight", zeros(16, 32))
    w.add_tensor("output_norm.weight", zeros(32))
    finish(w)
    w = GGUFWriter(os.path.join(OUT, "bad-shape.gguf"), "llama")
    header(w)
    w.add_tensor("token_embd.weight", zeros(16, 32))
    w.add_tensor("output_norm.weight", zeros(32))
    w.add_tensor("blk.0.attn_norm.weight", zeros(32))
    w.add_tensor("blk.0.attn_q.weight", zeros(48, 32))  # should be [32, 32]
    finish(w)


def main():
    os.makedirs(OUT, exist_ok=True)
    write_bad_models()
    for kind in MODELS:
        for qname in TYPES:
            write_model(f"tiny-{kind}-{qname}", kind, qname)
        write_nf4_reference(f"tiny-{kind}-f32", kind)
    if len(sys.argv) > 1:
        smollm2_goldens(sys.argv[1])


if __name__ == "__main__":
    main()
