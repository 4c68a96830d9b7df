#!/usr/bin/env python3
"""make_phi3_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and PEFT
for the phi3 family (Phi-3.5, Phi-4, Phi-4-mini; tests/unit/test_model.c, test_grad.c,
test_hf_model.c, test_cuda_model.c, tests/export/test_tools.sh).

Phi-3 is llama's block with two weights fused in the checkpoint: self_attn.qkv_proj ([q; k; v] rows,
GGUF attn_qkv) and mlp.gate_up_proj ([gate; up] rows, GGUF ffn_up with 2 x intermediate rows), and a
partial rotary embedding: only the first head_dim x partial_rotary_factor values of each head rotate
(rotate-half over those, llama.cpp's NEOX RoPE with rope.dimension_count), the rest pass. PEFT
adapts a fused module as one: one lora_A [r, hidden] and one lora_B [rows of the fused weight, r].

The tiny model here: hidden 64, 4 heads of 16 and 2 key/value heads (so q, k and v parts differ in
size), partial_rotary_factor 0.75 (12 of 16 values rotate), intermediate 128, 2 layers, untied
lm_head (llama.cpp's phi3 needs output.weight), norms in [0.5, 1.5].

It writes tests/data/phi3/ with the files make_family_goldens.py writes for a family:
tiny-{f32,q8_0,q4_0}.gguf (as llama.cpp's Phi3 converter lays them out: attn_qkv and ffn_up fused,
rows as HF has them, phi3.rope.dimension_count) with NAME.ids.txt / NAME.logits.f32 (float64
transformers on the weights the file holds), tiny-f32.nf4.logits.f32 (each part of a fused weight
through bitsandbytes' NF4 on its own, as ptrain quantizes the parts it splits the weight into),
tiny.greedy.txt, peft.{json,init.f32,grads.f32} (LoRA on qkv_proj, o_proj, gate_up_proj, down_proj),
hf/ (bf16) and hf-bnb4/ with their logits and greedy tokens. llama.cpp (llama-cpp-python) runs the
f32 file and must agree with transformers within 1e-4 of the largest logit.

tests/data/phi3-longrope/: the same shapes with LongRoPE (see LONG_SPEC): tiny-f32.gguf (rope_factors_long /
short tensors and phi3.rope.scaling.attn_factor, as llama.cpp's converter writes them; llama.cpp runs it) with
its logits and tiny.greedy.txt, hf/ (bf16) with its, and peft.{json,init.f32,grads.f32}.

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(pip install --target DIR bitsandbytes==0.50.0 and put DIR on PYTHONPATH):
  $PTRAIN_PYTHON tests/reference/make_phi3_goldens.py
"""
import math
import os

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter
from transformers import Phi3Config, Phi3ForCausalLM

import make_family_goldens as fam
import make_more_goldens as more

FAMILY = "phi3"
VOCAB = fam.VOCAB
NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
         "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
SPEC = dict(cls=Phi3ForCausalLM, cfg=Phi3Config, gguf_arch="phi3", permute=False, names=NAMES,
            kwargs=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=VOCAB, rms_norm_eps=1e-5, max_position_embeddings=256,
                        original_max_position_embeddings=256, partial_rotary_factor=0.75, rope_theta=10000.0,
                        tie_word_embeddings=False, sliding_window=None, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, attn_implementation="eager"))
MODULES = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]

# phi3-longrope: the same shapes with LongRoPE (Phi-3.5-mini, Phi-4-mini): short and long factors (6 each: the
# rotated pairs), original_max_position_embeddings 256 of 1024, so the attention factor is sqrt(1 + ln 4 / ln 256);
# every test sequence stays within the 256 original positions, where transformers runs the short factors (and
# llama.cpp too: it takes the long ones when its context, at least 256, exceeds the original positions)
LONG = "phi3-longrope"
_rng = np.random.default_rng(36)
LONG_SPEC = dict(SPEC, kwargs=dict(SPEC["kwargs"], max_position_embeddings=1024, original_max_position_embeddings=256,
                                   rope_scaling={
    "type": "longrope", "short_factor": [round(float(x), 4) for x in _rng.uniform(1.0, 3.0, 6)],
    "long_factor": [round(float(x), 4) for x in _rng.uniform(2.0, 12.0, 6)]}))


def rope_dim(cfg):
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return int(head_dim * cfg.rope_parameters.get("partial_rotary_factor", 1.0))


def write_gguf(path, family, model, qtype, vocab_none=False):
    """The model as llama.cpp's Phi3 converter writes it; returns the HF state dict a reader gets back."""
    cfg = model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(path, "phi3")
    w.add_name("tiny-phi3")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_rope_scaling_orig_ctx_len(cfg.original_max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(rope_dim(cfg))
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_vocab_size(cfg.vocab_size)
    rp = cfg.rope_parameters
    if rp.get("rope_type") == "longrope":  # as llama.cpp's Phi3 converter: the factors as tensors, the attention factor
        scale = cfg.max_position_embeddings / cfg.original_max_position_embeddings
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(cfg.original_max_position_embeddings)))
        w.add_tensor("rope_factors_long.weight", np.array(rp["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(rp["short_factor"], dtype=np.float32))
    if vocab_none:
        w.add_tokenizer_model("none")
    back = {}

    def put(gname, hfname):
        t = sd[hfname]
        vec = t.ndim == 1
        stored, deq = fam.store(Q.F32 if vec else qtype, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if not vec and qtype != Q.F32 else None)
        back[hfname] = torch.from_numpy(deq.astype(np.float64))

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight")
    put("output.weight", "lm_head.weight")
    for i in range(cfg.num_hidden_layers):
        for hf, g in NAMES.items():
            put(f"blk.{i}.{g}.weight", f"model.layers.{i}.{hf}.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return back


def parts(name, cfg):
    """The row ranges ptrain splits a fused weight into (q, k, v; gate, up), or None."""
    hd = cfg.hidden_size // cfg.num_attention_heads
    q, kv, f = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd, cfg.intermediate_size
    if name.endswith("qkv_proj.weight"):
        return [(0, q), (q, q + kv), (q + kv, q + 2 * kv)]
    if name.endswith("gate_up_proj.weight"):
        return [(0, f), (f, 2 * f)]
    return None


def nf4_weights(model, back):
    """The f32 file's weights with ptrain's load_in_4bit: each projection whose rows are whole 64-blocks through
    NF4, a fused weight part by part (ptrain quantizes the q, k, v and gate, up weights it splits it into)."""
    out = dict(back)
    for name, v in back.items():
        if not (name.startswith("model.layers.") and v.dim() == 2 and v.shape[1] % 64 == 0):
            continue
        w = v.numpy()
        pieces = parts(name, model.config) or [(0, w.shape[0])]
        out[name] = torch.from_numpy(np.concatenate([fam.nf4_roundtrip(w[a:b]) for a, b in pieces]))
    return out


def peft_goldens(family, f32_back, out):
    """make_family_goldens.peft_goldens for phi3's four modules: r=4, alpha=8, A and B random (rounded to f32),
    the same batch; PEFT adapts qkv_proj and gate_up_proj as one module each."""
    base = more.make_model(family)
    fam.load_weights(base, f32_back)
    mlp = ("gate_up_proj", "down_proj")
    fam.peft_lora_step(base, MODULES, lambda layer, mod: getattr(layer.mlp if mod in mlp else layer.self_attn, mod),
                       out, f"tests/data/{family}/tiny-f32.gguf")


def check_config():
    """The quirks show: q, k, v parts of three sizes, 12 of 16 values rotating, a fused gate_up_proj."""
    m = more.make_model(FAMILY)
    cfg = m.config
    assert rope_dim(cfg) == 12 and cfg.hidden_size // cfg.num_attention_heads == 16
    assert tuple(m.model.layers[0].self_attn.qkv_proj.weight.shape) == (128, 64)
    assert tuple(m.model.layers[0].mlp.gate_up_proj.weight.shape) == (256, 64)


def make_longrope():
    """tests/data/phi3-longrope/: tiny-f32.gguf (llama.cpp runs it to transformers' logits) with its logits and
    greedy tokens, hf/ (bf16) with its, and PEFT's LoRA gradients."""
    out = os.path.join(fam.DATA, LONG)
    os.makedirs(out, exist_ok=True)
    model = more.make_model(LONG)
    assert model.config.rope_parameters["rope_type"] == "longrope"
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    path = os.path.join(out, "tiny-f32.gguf")
    back = write_gguf(path, LONG, model, Q.F32)
    more.check_with_llama_cpp(path, back, model)
    ref = more.make_model(LONG)
    fam.load_weights(ref, back)
    fam.write_logits(out, "tiny-f32", ids, fam.logits_of(ref, ids))
    gen, margin = fam.greedy(ref, ids[:8], 12)
    with open(os.path.join(out, "tiny.greedy.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids[:8]) + "\n" + " ".join(map(str, gen)) + "\n" + f"{margin:.6g}\n")
    fam.write_hf_dir(LONG, model, back, out)
    peft_goldens(LONG, back, out)
    plain = dict(SPEC)
    short = more.make_model(LONG)
    fam.load_weights(short, back)
    base = Phi3ForCausalLM(Phi3Config(**plain["kwargs"])).double().eval()
    fam.load_weights(base, back)
    moved = np.abs(fam.logits_of(short, ids) - fam.logits_of(base, ids)).max() / np.abs(fam.logits_of(base, ids)).max()
    print(f"{LONG}: LongRoPE moves the logits by {moved:.3g} of the largest against plain RoPE")


def main():
    fam.FAMILIES[FAMILY] = SPEC
    fam.LAYER_NAMES[FAMILY] = NAMES
    more.MORE[FAMILY] = SPEC
    fam.make_model = more.make_model
    fam.write_gguf = write_gguf
    more.write_gguf = write_gguf
    fam.check_with_transformers_reader = more.check_with_llama_cpp
    fam.write_bnb_dir = more.write_bnb_dir
    fam.nf4_weights = nf4_weights
    fam.peft_goldens = peft_goldens
    hf = __import__("make_hf_goldens")  # phi3's fused projections are quantized too (as Unsloth's bnb-4bit are)
    hf.PROJ = tuple(hf.PROJ) + ("qkv_proj", "gate_up_proj")
    fam.FAMILIES[LONG] = LONG_SPEC
    fam.LAYER_NAMES[LONG] = NAMES
    more.MORE[LONG] = LONG_SPEC
    check_config()
    fam.make_family(FAMILY)
    make_longrope()


if __name__ == "__main__":
    main()
