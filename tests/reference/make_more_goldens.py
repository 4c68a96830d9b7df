#!/usr/bin/env python3
"""make_more_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and
PEFT for the families added after qwen2 and gemma2 (tests/unit/test_model.c, test_grad.c,
test_hf_model.c, test_cuda_model.c):

  smollm3   SmolLM3: llama blocks with RoPE left out on every 4th layer (no_rope_layers); 5
            layers so that layer 3 is a NoPE layer and layer 4 a RoPE layer after it; head_dim 24
            against hidden 64 / 4 heads.
  granite   Granite 3.x: embedding_multiplier 12, attention_multiplier 0.1 (instead of 1/sqrt(16)),
            residual_multiplier 0.22 on both branches, logits divided by logits_scaling 8.
  olmo2     OLMo 2: no norm before attention or the MLP, RMSNorm after each (post_attention_layernorm,
            post_feedforward_layernorm) before its residual add, and q_norm / k_norm over the whole
            projection width (not per head) before RoPE; untied lm_head (llama.cpp's olmo2 takes
            no head_dim other than hidden / heads).
  olmo3     OLMo 3: OLMo 2's block with a sliding window (6, shorter than the 40-token prompt and the 16-token
            PEFT rows) on every layer but every 4th (layer_types' default; 5 layers, so layer 3 is full and layer
            4 sliding after it), the rope per layer type (transformers 5's rope_parameters.full_attention and
            .sliding_attention, both base 500000 here). llama.cpp converts it as olmo2 with
            olmo2.attention.sliding_window (and sliding_window_pattern, which llama.cpp does not read: it fixes
            every 4th layer full). Also olmo3-yarn/hf: the same model with YaRN (factor 4 over 64 of 256
            positions) on the full layers only, as transformers 5 runs OLMo 3's rope_scaling, and the sliding
            layers on base 10000: hf.{ids.txt,logits.f32} and hf/greedy.txt.
  mistral   Mistral NeMo / Ministral style: an explicit head_dim (24) that is not hidden / heads,
            which loads as ptrain's llama (GGUF architecture llama with key_length 24).

For each it writes under tests/data/<family>/ the same files make_family_goldens.py writes for
qwen2 and gemma2 (its make_family runs here with this script's models and GGUF writer):
tiny-{f32,q8_0,q4_0}.gguf with NAME.ids.txt / NAME.logits.f32, tiny-f32.nf4.logits.f32,
tiny.greedy.txt, peft.{json,init.f32,grads.f32}, hf/ (bf16 safetensors + tokenizer) with
hf.{ids.txt,logits.f32,greedy.txt}, and hf-bnb4/ with its logits. The GGUF files are laid out as
llama.cpp's converter writes these architectures (q/k rows permuted for llama.cpp's interleaved
RoPE, as its LlamaModel converter does for both); transformers cannot read smollm3 GGUF files,
so instead of its reader llama.cpp itself (llama-cpp-python) runs each f32 file and its logits
must agree with transformers' within 1e-4 of the largest: that holds the layout, the permutation
and llama.cpp's own NoPE layers (it has no key for them: every 4th layer) to transformers'.

Run (the outputs are committed; CI only reads them; written with transformers 5.25, peft 0.21,
gguf and llama-cpp-python 0.3.36 of the test environment, plus bitsandbytes 0.50.0 for the NF4
references, which that environment lacks: pip install --target DIR bitsandbytes==0.50.0 and put DIR
on PYTHONPATH):
  $PTRAIN_PYTHON tests/reference/make_more_goldens.py [FAMILY ...]
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter
from transformers import (AutoModelForCausalLM, GraniteConfig, GraniteForCausalLM, MistralConfig, MistralForCausalLM, Olmo2Config,
                          Olmo2ForCausalLM, Olmo3Config, Olmo3ForCausalLM, SmolLM3Config, SmolLM3ForCausalLM)

import make_family_goldens as fam

VOCAB = fam.VOCAB
LLAMA_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
               "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"}
OLMO2_NAMES = {"post_attention_layernorm": "post_attention_norm", "post_feedforward_layernorm": "post_ffw_norm",
               "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
               "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"}

SMALL = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
             vocab_size=VOCAB, rms_norm_eps=1e-6, max_position_embeddings=256, attn_implementation="eager")
MORE = {
    "smollm3": dict(cls=SmolLM3ForCausalLM, cfg=SmolLM3Config, gguf_arch="smollm3", permute=True,
                    names=LLAMA_NAMES,
                    kwargs=dict(SMALL, num_hidden_layers=5, rope_theta=10000.0, tie_word_embeddings=True,
                                pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "olmo2": dict(cls=Olmo2ForCausalLM, cfg=Olmo2Config, gguf_arch="olmo2", permute=False,
                  names=OLMO2_NAMES,
                  kwargs=dict({k: v for k, v in SMALL.items() if k != "head_dim"}, num_hidden_layers=2,
                              rope_theta=500000.0, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
                              eos_token_id=2)),
    "olmo3": dict(cls=Olmo3ForCausalLM, cfg=Olmo3Config, gguf_arch="olmo2", permute=False,
                  names=OLMO2_NAMES,
                  kwargs=dict({k: v for k, v in SMALL.items() if k != "head_dim"}, num_hidden_layers=5,
                              sliding_window=6, rope_theta=500000.0, tie_word_embeddings=False, pad_token_id=0,
                              bos_token_id=1, eos_token_id=2)),
    "mistral": dict(cls=MistralForCausalLM, cfg=MistralConfig, gguf_arch="llama", permute=True,
                    names=LLAMA_NAMES,
                    kwargs=dict(SMALL, num_hidden_layers=2, rope_theta=1000000.0, sliding_window=None,
                                tie_word_embeddings=True)),
    "granite": dict(cls=GraniteForCausalLM, cfg=GraniteConfig, gguf_arch="granite", permute=True,
                    names=LLAMA_NAMES,
                    kwargs=dict({k: v for k, v in SMALL.items() if k != "head_dim"}, num_hidden_layers=2, rope_theta=10000.0,
                                tie_word_embeddings=True, embedding_multiplier=12.0, attention_multiplier=0.1,
                                residual_multiplier=0.22, logits_scaling=8.0)),
}


def permute(w, n_head):
    """llama.cpp's q/k row permutation (HF rotate-half -> interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make_model(family):
    """Random weights: norms in [0.5, 1.5], projections N(0, 1/fan_in), biases in [-0.5, 0.5]."""
    spec = fam.FAMILIES[family]
    torch.manual_seed(4321 + len(family))
    model = spec["cls"](spec["cfg"](**spec["kwargs"])).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.uniform_(-0.5, 0.5)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
    return model


def write_gguf(path, family, model, qtype, vocab_none=False):
    """The model as llama.cpp's converter writes it; returns the HF state dict a reader gets back
    (float64). vocab_none adds tokenizer.ggml.model = none (for llama.cpp, which needs the key)."""
    spec, cfg = MORE[family], model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    arch = spec["gguf_arch"]
    w = GGUFWriter(path, arch)
    w.add_name("tiny-" + family)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)  # olmo3: per layer type
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_vocab_size(cfg.vocab_size)
    if arch == "granite":  # the keys llama.cpp's Granite converter writes
        w.add_embedding_scale(cfg.embedding_multiplier)
        w.add_attention_scale(cfg.attention_multiplier)
        w.add_residual_scale(cfg.residual_multiplier)
        w.add_logit_scale(cfg.logits_scaling)
    if family == "olmo3":  # the keys llama.cpp's Olmo2Model converter writes for OLMo 3
        w.add_sliding_window(cfg.sliding_window)
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types])
    if vocab_none:
        w.add_tokenizer_model("none")
    back = {}

    def put(gname, hfname, heads=0):
        t = sd[hfname]
        vec = t.ndim == 1
        if heads:
            t = permute(t, heads)
        stored, deq = fam.store(Q.F32 if vec else qtype, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if not vec and qtype != Q.F32 else None)
        deq = deq.astype(np.float64)
        back[hfname] = torch.from_numpy(unpermute(deq, heads) if heads else deq)

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight")
    for i in range(cfg.num_hidden_layers):
        for hf, g in spec["names"].items():
            heads = 0
            if spec["permute"] and hf == "self_attn.q_proj":
                heads = cfg.num_attention_heads
            elif spec["permute"] and hf == "self_attn.k_proj":
                heads = cfg.num_key_value_heads
            put(f"blk.{i}.{g}.weight", f"model.layers.{i}.{hf}.weight", heads)
            if f"model.layers.{i}.{hf}.bias" in sd:
                put(f"blk.{i}.{g}.bias", f"model.layers.{i}.{hf}.bias")
    if "lm_head.weight" in sd and not cfg.tie_word_embeddings:
        put("output.weight", "lm_head.weight")
    else:
        back["lm_head.weight"] = back["model.embed_tokens.weight"]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return back


def check_with_llama_cpp(path, back, model):
    """llama.cpp runs the f32 file (a copy with tokenizer.ggml.model = none): its logits must be
    transformers' on the weights the file holds, within 1e-4 of the largest."""
    if not path.endswith("tiny-f32.gguf"):
        return 0.0
    from llama_cpp import Llama
    family = os.path.basename(os.path.dirname(path))
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "m.gguf")
        write_gguf(copy, family, model, Q.F32, vocab_none=True)
        llm = Llama(model_path=copy, n_ctx=64, logits_all=True, verbose=False, n_threads=2, seed=0,
                    type_k=0, type_v=0)  # an f32 cache (GGML_TYPE_F32), not f16
        llm.eval([int(i) for i in ids])
        got = np.array(llm.scores[:len(ids)], dtype=np.float64)
        del llm
    ref = make_model(family)
    fam.load_weights(ref, back)
    want = fam.logits_of(ref, ids)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"  llama.cpp runs {os.path.relpath(path, fam.DATA)}: logits within {rel:.1e} of transformers'")
    assert rel < 1e-4, f"{path}: llama.cpp's logits are {rel} away from transformers'"
    return rel


def write_bnb_dir(family, out):
    """make_family_goldens.write_bnb_dir, keeping an untied lm_head (olmo2) as the checkpoint has it."""
    src, dest = os.path.join(out, "hf"), os.path.join(out, "hf-bnb4")
    ref = fam.write_bnb4_dir(src, dest, fam.load_file(os.path.join(src, "model.safetensors")))
    ref.setdefault("lm_head.weight", ref["model.embed_tokens.weight"])
    spec = fam.FAMILIES[family]
    model = spec["cls"](spec["cfg"](**fam.hf_kwargs(family))).double().eval()
    fam.load_weights(model, {k: torch.from_numpy(v) for k, v in ref.items()})
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    fam.write_logits(out, "hf-bnb4", ids, fam.logits_of(model, ids))
    fam.write_greedy(os.path.join(out, "hf-bnb4"), model, ids[:8])
    for f in os.listdir(dest):  # safetensors writes 0600 files
        os.chmod(os.path.join(dest, f), 0o644)


def olmo3_yarn():
    """olmo3-yarn/hf: olmo3's bf16 weights under YaRN on the full layers (transformers 5 keeps the sliding layers
    unscaled) and the sliding layers on base 10000, with float64 logits and greedy tokens."""
    src = os.path.join(fam.DATA, "olmo3", "hf")
    out = os.path.join(fam.DATA, "olmo3-yarn")
    dest = os.path.join(out, "hf")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    with open(os.path.join(dest, "config.json")) as f:
        config = json.load(f)
    config["rope_parameters"] = {
        "full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                           "rope_theta": 500000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    model = AutoModelForCausalLM.from_pretrained(dest, dtype=torch.float64, attn_implementation="eager").eval()
    plain = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float64, attn_implementation="eager").eval()
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    a, b = fam.logits_of(model, ids), fam.logits_of(plain, ids)
    print(f"olmo3-yarn: YaRN on the full layers moves the logits by {np.abs(a - b).max():.3f} (|max| {np.abs(a).max():.3f})")
    fam.write_logits(out, "hf", ids, a)
    fam.write_greedy(dest, model, ids[:8])


def main(names):
    for name, spec in MORE.items():
        fam.FAMILIES[name] = spec
        fam.LAYER_NAMES[name] = spec["names"]
    fam.make_model = make_model
    fam.write_gguf = write_gguf
    fam.check_with_transformers_reader = check_with_llama_cpp
    fam.write_bnb_dir = write_bnb_dir
    for name in names or list(MORE) + ["olmo3-yarn"]:
        if name == "olmo3-yarn":
            olmo3_yarn()
        else:
            fam.make_family(name)


if __name__ == "__main__":
    main(sys.argv[1:])
