#!/usr/bin/env python3
"""make_ministral3_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and PEFT
for Ministral 3 (`ministral3`, Ministral3ForCausalLM; tests/unit/test_model.c, test_grad.c,
test_cuda_model.c).

Ministral 3 is Mistral's block (explicit head_dim) with YaRN rotary scaling and a query temperature: after
RoPE, q at position p is multiplied by 1 + llama_4_scaling_beta * ln(1 + floor(p / L)), L the rope's
original_max_position_embeddings (transformers' get_llama_4_attn_scale). The tiny model here: hidden 64,
4 heads of 24 (against 64 / 4 = 16), 2 key/value heads, 2 layers, untied lm_head, and rope_parameters
{yarn, factor 4, original_max_position_embeddings 8, mscale = mscale_all_dim = 1 (attention factor 1, as
released), llama_4_scaling_beta 0.5}, so the 40 test positions span 5 temperature steps (scales 1 to
1 + 0.5 ln 5).

It writes tests/data/ministral3/: hf/ (bf16 safetensors + tokenizer, as make_family_goldens.write_hf_dir)
with hf.{ids.txt,logits.f32} and hf.greedy.txt (float64 transformers on the bf16 weights), and
peft.{json,init.f32,grads.f32}: PEFT's LoRA gradients on those same bf16 weights (make_family_goldens'
peft_goldens: r 4, alpha 8, all seven projections). It prints how far the temperature alone moves the logits.

With the argument `gguf` it writes only the GGUF files of the same model, as llama.cpp's converter writes
Ministral3ForCausalLM (its Mistral3Model / Ministral3Model: llama's keys and permuted q/k rows under the
architecture `mistral3`, the YaRN keys rope.scaling.type yarn, .factor, .original_context_length,
.yarn_beta_fast, .yarn_beta_slow, and mistral3.rope.scaling.yarn_log_multiplier = mscale_all_dim and
mistral3.attention.temperature_scale = llama_4_scaling_beta): tiny-{f32,q4_0}.gguf with tiny-*.{ids.txt,
logits.f32} (transformers on the weights each file holds) and tiny.greedy.txt. The pyenv has no converter
script, so the file is written here and llama.cpp itself (llama-cpp-python, which knows mistral3) must run the
f32 one to transformers' logits within 1e-4.

Run (the outputs are committed; CI only reads them) with the test environment (transformers 5.25, peft 0.21):
  $PTRAIN_PYTHON tests/reference/make_ministral3_goldens.py [gguf]
"""
import json
import os
import sys

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import RopeScalingType
from safetensors.torch import load_file
from transformers import Ministral3Config, Ministral3ForCausalLM

import make_family_goldens as fam
import make_more_goldens as more

FAMILY = "ministral3"
ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 8,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}
SPEC = dict(cls=Ministral3ForCausalLM, cfg=Ministral3Config, gguf_arch=None, permute=True, names=more.LLAMA_NAMES,
            kwargs=dict(more.SMALL, num_hidden_layers=2, sliding_window=None, tie_word_embeddings=False,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, rope_parameters=ROPE))


def main():
    fam.FAMILIES[FAMILY] = SPEC
    fam.LAYER_NAMES[FAMILY] = SPEC["names"]
    more.MORE[FAMILY] = SPEC
    fam.make_model = more.make_model
    out = os.path.join(fam.DATA, FAMILY)
    os.makedirs(out, exist_ok=True)
    model = more.make_model(FAMILY)
    assert model.config.rope_parameters["llama_4_scaling_beta"] == 0.5
    back = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fam.write_hf_dir(FAMILY, model, back, out)
    bf16 = {k: v.double() for k, v in load_file(os.path.join(out, "hf", "model.safetensors")).items()}
    fam.peft_goldens(FAMILY, bf16, out)
    man_path = os.path.join(out, "peft.json")
    with open(man_path) as f:
        man = json.load(f)
    man["model"] = f"tests/data/{FAMILY}/hf"
    with open(man_path, "w") as f:
        json.dump(man, f, indent=1)
    ids = np.fromfile(os.path.join(out, "hf.ids.txt"), sep=" ", dtype=np.int64)
    cool = dict(SPEC["kwargs"], rope_parameters=dict(ROPE, llama_4_scaling_beta=0.0))
    plain = Ministral3ForCausalLM(Ministral3Config(**cool)).double().eval()
    fam.load_weights(plain, bf16)
    hot = more.make_model(FAMILY)
    fam.load_weights(hot, bf16)
    a, b = fam.logits_of(hot, ids), fam.logits_of(plain, ids)
    print(f"{FAMILY}: the query temperature moves the logits by {np.abs(a - b).max() / np.abs(b).max():.3g} "
          "of the largest")


def mistral3_writer(base):
    """A GGUFWriter adding the keys llama.cpp's converter writes for ministral3 before its header."""
    class Writer(base):
        def write_header_to_file(self, *a, **k):
            self.add_rope_scaling_type(RopeScalingType.YARN)
            self.add_rope_scaling_factor(ROPE["factor"])
            self.add_rope_scaling_orig_ctx_len(ROPE["original_max_position_embeddings"])
            self.add_rope_scaling_yarn_beta_fast(ROPE["beta_fast"])
            self.add_rope_scaling_yarn_beta_slow(ROPE["beta_slow"])
            self.add_rope_scaling_yarn_log_mul(ROPE["mscale_all_dim"])
            self.add_attn_temperature_scale(ROPE["llama_4_scaling_beta"])
            return super().write_header_to_file(*a, **k)
    return Writer


def gguf_files():
    spec = dict(SPEC, gguf_arch="mistral3")
    fam.FAMILIES[FAMILY] = spec
    fam.LAYER_NAMES[FAMILY] = spec["names"]
    more.MORE[FAMILY] = spec
    more.GGUFWriter = mistral3_writer(more.GGUFWriter)
    out = os.path.join(fam.DATA, FAMILY)
    model = more.make_model(FAMILY)
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    for qname, qtype in (("f32", Q.F32), ("q4_0", Q.Q4_0)):
        path = os.path.join(out, f"tiny-{qname}.gguf")
        back = more.write_gguf(path, FAMILY, model, qtype)
        more.check_with_llama_cpp(path, back, model)
        ref = more.make_model(FAMILY)
        fam.load_weights(ref, back)
        fam.write_logits(out, f"tiny-{qname}", ids, fam.logits_of(ref, ids))
        if qname == "f32":
            gen, margin = fam.greedy(ref, ids[:8], 12)
            with open(os.path.join(out, "tiny.greedy.txt"), "w") as f:
                f.write(" ".join(str(int(i)) for i in ids[:8]) + "\n" + " ".join(map(str, gen)) + "\n" + f"{margin:.6g}\n")
            print(f"  greedy {gen}, smallest top-2 margin {margin:.3g}")


if __name__ == "__main__":
    if sys.argv[1:] == ["gguf"]:
        gguf_files()
    else:
        main()
