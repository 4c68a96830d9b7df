#!/usr/bin/env python3
"""make_yarn_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and PEFT for
YaRN rotary scaling (rope_type "yarn", transformers' _compute_yarn_parameters; tests/unit/test_model.c,
test_grad.c, test_cuda_model.c).

YaRN keeps the fast rotary frequencies, divides the slow ones by `factor`, and blends those between along a
ramp over the pair index whose ends are where a frequency turns beta_fast and beta_slow times over
original_max_position_embeddings (rounded out unless truncate is false); cos and sin are multiplied by an
attention factor (0.1 ln factor + 1 by default, a ratio of two such terms with mscale / mscale_all_dim).

It writes:
  tests/data/qwen3-yarn/  the qwen3 shapes of make_qwen3_goldens.py (head_dim 24 against 64 / 4) with
      rope_parameters {rope_type yarn, factor 4, original_max_position_embeddings 64} of 256 positions, so
      the ramp runs over pairs 0..4 of 12 and the attention factor is 1 + 0.1 ln 4: tiny-f32.gguf (the keys
      llama.cpp's converter writes: qwen3.rope.scaling.type yarn, .factor, .original_context_length; llama.cpp
      itself runs it and must agree with transformers within 1e-4 of the largest logit) with its logits and
      tiny.greedy.txt, hf/ (bf16, transformers 5's rope_parameters) with its logits and greedy tokens, and
      peft.{json,init.f32,grads.f32} (LoRA on all seven projections);
  tests/data/mistral-yarn/hf/  a Mistral with head_dim 24 and every optional YaRN key: beta_fast 8, beta_slow
      0.5, truncate false, mscale 1 and mscale_all_dim 0.5 (attention factor (1 + 0.1 ln 4) / (1 + 0.05 ln 4)),
      its config.json rewritten in transformers 4's form (rope_scaling with "type": "yarn", rope_theta at the
      top level), which transformers must read back to the same logits; hf.{ids.txt,logits.f32} and
      hf/greedy.txt as make_family_goldens.write_hf_dir writes them.
Each prints how far YaRN moves the logits from the same weights under plain RoPE.

Run (the outputs are committed; CI only reads them) with the test environment (transformers 5.25, peft 0.21,
gguf, llama-cpp-python 0.3.36):
  $PTRAIN_PYTHON tests/reference/make_yarn_goldens.py
"""
import copy
import json
import os

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import RopeScalingType
from transformers import AutoModelForCausalLM, MistralConfig, MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM

import make_family_goldens as fam
import make_more_goldens as more

QWEN3_NAMES = dict(more.LLAMA_NAMES, **{"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"})
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
QWEN3 = "qwen3-yarn"
MISTRAL = "mistral-yarn"
SPECS = {
    QWEN3: dict(cls=Qwen3ForCausalLM, cfg=Qwen3Config, gguf_arch="qwen3", permute=False, names=QWEN3_NAMES,
                kwargs=dict(more.SMALL, num_hidden_layers=2, tie_word_embeddings=True, attention_bias=False,
                            rope_parameters=dict(YARN, rope_theta=10000.0))),
    MISTRAL: dict(cls=MistralForCausalLM, cfg=MistralConfig, gguf_arch="llama", permute=True,
                  names=more.LLAMA_NAMES,
                  kwargs=dict(more.SMALL, num_hidden_layers=2, sliding_window=None, tie_word_embeddings=True,
                              rope_parameters=dict(YARN, rope_theta=10000.0, beta_fast=8.0, beta_slow=0.5,
                                                   truncate=False, mscale=1.0, mscale_all_dim=0.5))),
}


def yarn_writer(base, rope):
    """A GGUFWriter that adds the YaRN keys llama.cpp's converter writes before its header."""
    class Writer(base):
        def write_header_to_file(self, *a, **k):
            self.add_rope_scaling_type(RopeScalingType.YARN)
            self.add_rope_scaling_factor(rope["factor"])
            self.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            return super().write_header_to_file(*a, **k)
    return Writer


def write_gguf(path, family, model, qtype, vocab_none=False):
    base = more.GGUFWriter
    more.GGUFWriter = yarn_writer(base, model.config.rope_parameters)
    try:
        return more.write_gguf_plain(path, family, model, qtype, vocab_none)
    finally:
        more.GGUFWriter = base


def plain_rope_moves(family, back, ids):
    """How far YaRN moves the logits against the same weights with default RoPE (relative to the largest)."""
    spec = SPECS[family]
    kw = dict(spec["kwargs"], rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    plain = spec["cls"](spec["cfg"](**kw)).double().eval()
    fam.load_weights(plain, back)
    yarn = more.make_model(family)
    fam.load_weights(yarn, back)
    a, b = fam.logits_of(yarn, ids), fam.logits_of(plain, ids)
    print(f"{family}: YaRN moves the logits by {np.abs(a - b).max() / np.abs(b).max():.3g} of the largest")


def make_qwen3():
    out = os.path.join(fam.DATA, QWEN3)
    os.makedirs(out, exist_ok=True)
    model = more.make_model(QWEN3)
    assert model.config.rope_parameters["rope_type"] == "yarn"
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    path = os.path.join(out, "tiny-f32.gguf")
    back = write_gguf(path, QWEN3, model, Q.F32)
    more.check_with_llama_cpp(path, back, model)
    ref = more.make_model(QWEN3)
    fam.load_weights(ref, back)
    fam.write_logits(out, "tiny-f32", ids, fam.logits_of(ref, ids))
    gen, margin = fam.greedy(ref, ids[:8], 12)
    with open(os.path.join(out, "tiny.greedy.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids[:8]) + "\n" + " ".join(map(str, gen)) + "\n" + f"{margin:.6g}\n")
    print(f"  greedy {gen}, smallest top-2 margin {margin:.3g}")
    fam.write_hf_dir(QWEN3, model, back, out)
    fam.peft_goldens(QWEN3, back, out)
    plain_rope_moves(QWEN3, back, ids)


def make_mistral():
    """hf/ only (truncate false has no GGUF key), its config.json in transformers 4's form."""
    out = os.path.join(fam.DATA, MISTRAL)
    os.makedirs(out, exist_ok=True)
    model = more.make_model(MISTRAL)
    back = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fam.write_hf_dir(MISTRAL, model, back, out)
    cfg_path = os.path.join(out, "hf", "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    rope = copy.deepcopy(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    cfg["rope_scaling"] = rope
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    ids = np.fromfile(os.path.join(out, "hf.ids.txt"), sep=" ", dtype=np.int64)
    want = np.fromfile(os.path.join(out, "hf.logits.f32"), dtype="<f4").reshape(len(ids), -1)
    again = AutoModelForCausalLM.from_pretrained(os.path.join(out, "hf"), dtype=torch.float64).eval()
    assert again.config.rope_parameters["rope_type"] == "yarn" and again.config.rope_parameters["truncate"] is False
    got = fam.logits_of(again, ids)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"{MISTRAL}: transformers reads the rope_scaling config.json back to logits within {rel:.1e}")
    assert rel < 1e-5
    plain_rope_moves(MISTRAL, back, ids)


def main():
    more.write_gguf_plain = more.write_gguf
    more.write_gguf = write_gguf
    fam.make_model = more.make_model
    for name, spec in SPECS.items():
        fam.FAMILIES[name] = spec
        fam.LAYER_NAMES[name] = spec["names"]
        more.MORE[name] = spec
    make_qwen3()
    make_mistral()


if __name__ == "__main__":
    main()
