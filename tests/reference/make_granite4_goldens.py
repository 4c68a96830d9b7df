#!/usr/bin/env python3
"""make_granite4_goldens.py — reference logits and LoRA gradients from Hugging Face transformers and PEFT for
Granite 4.0's attention-only dense sizes (`granitemoehybrid`, GraniteMoeHybridForCausalLM with every layer
"attention" and num_local_experts 0; tests/unit/test_hf_model.c, test_grad.c).

Such a model is Granite 3's block (the four multipliers: embeddings, attention scores, both residual branches,
logits) whose MLP is the "shared_mlp": one input_linear [2 * shared_intermediate_size, hidden] whose first half of
rows is the gate (SiLU) and second half the up projection, and output_linear [hidden, shared_intermediate_size].
`intermediate_size` is the experts' width and unused here. position_embedding_type "rope" rotates q and k; absent
or null, no layer rotates (NoPE). The tiny model: hidden 64, 4 heads of 16, 2 key/value heads, 2 layers,
shared_intermediate_size 96 (intermediate_size 40, to be ignored), tied embeddings (as the published sizes),
embedding_multiplier 2, attention_multiplier 0.5, residual_multiplier 0.6, logits_scaling 2. Its config.json
keeps layer_types as the published files write them ("attention"; transformers maps them to "full_attention").

It writes tests/data/granite4/: hf/ (bf16 safetensors + tokenizer, as make_family_goldens.write_hf_dir) with
hf.{ids.txt,logits.f32} and hf.greedy.txt (float64 transformers on the bf16 weights); hf-nope/ (the same weights,
position_embedding_type null) with hf-nope.{ids.txt,logits.f32} and hf-nope.greedy.txt; and peft.{json,init.f32,
grads.f32}: PEFT's LoRA gradients on hf/'s bf16 weights (r 4, alpha 8 on q_proj, k_proj, v_proj, o_proj and the
shared MLP's input_linear and output_linear, PEFT's module names for this model; the rest as
make_family_goldens.peft_goldens). It prints how far NoPE and the fused MLP's halves move the logits.

With the argument `gguf` it writes tiny-f32.gguf with tiny-f32.{ids.txt,logits.f32}: hf/'s weights as llama.cpp's
converter writes an attention-only granitemoehybrid (its GraniteHybridModel turns to the plain `granite`
architecture when no layer is Mamba: input_linear split into ffn_gate and ffn_up, output_linear as ffn_down, q/k rows
permuted, the multipliers under granite's keys, feed_forward_length = shared_intermediate_size), written here with
the gguf package (the pyenv has no converter script), and transformers' granitemoehybrid logits on those weights.
llama.cpp itself (llama-cpp-python) must run the file to transformers' logits within 1e-4.

With the argument `bnb` it writes hf-bnb4/: hf/ as a pre-quantized bitsandbytes 4-bit checkpoint (NF4, double
quantization, as make_hf_goldens.write_bnb4_dir makes the other families'; the shared MLP's input_linear and
output_linear quantized as the attention projections are, as Unsloth's bnb-4bit Granite files have them), with
hf-bnb4.{ids.txt,logits.f32,greedy.txt}: float64 transformers on the weights bitsandbytes dequantizes it to (bitsandbytes
0.50 on PYTHONPATH).

Run (the outputs are committed; CI only reads them) with the test environment (transformers 5.25, peft 0.21):
  $PTRAIN_PYTHON tests/reference/make_granite4_goldens.py [gguf | bnb]
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file
from gguf import GGMLQuantizationType as Q
from transformers import GraniteConfig, GraniteForCausalLM, GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM

import make_family_goldens as fam
import make_more_goldens as more

FAMILY = "granite4"
KWARGS = dict({k: v for k, v in more.SMALL.items() if k != "head_dim"}, intermediate_size=40,
              shared_intermediate_size=96, num_hidden_layers=2, num_local_experts=0, layer_types=["attention"] * 2,
              position_embedding_type="rope", rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
              tie_word_embeddings=True, embedding_multiplier=2.0, attention_multiplier=0.5,
              residual_multiplier=0.6, logits_scaling=2.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)
SPEC = dict(cls=GraniteMoeHybridForCausalLM, cfg=GraniteMoeHybridConfig, gguf_arch=None, permute=True,
            names=more.LLAMA_NAMES, kwargs=KWARGS)
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "input_linear", "output_linear"]


def published_layer_types(dest):
    """config.json's layer_types as the published Granite 4.0 files write them ("attention")."""
    path = os.path.join(dest, "config.json")
    with open(path) as f:
        config = json.load(f)
    assert config["layer_types"] == ["full_attention"] * 2 and config["num_local_experts"] == 0
    config["layer_types"] = ["attention"] * 2
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def peft_goldens(bf16, out):
    """make_family_goldens.peft_goldens with this model's module names (the MLP's under shared_mlp)."""
    base = more.make_model(FAMILY)
    fam.load_weights(base, bf16)
    fam.peft_lora_step(base, MODULES, lambda layer, mod: getattr(layer.shared_mlp if mod.endswith("_linear")
                                                                 else layer.self_attn, mod),
                       out, f"tests/data/{FAMILY}/hf", {"target_modules": MODULES})


def nope_dir(out, bf16, ids):
    """hf-nope/: hf/ with position_embedding_type null, and its logits and greedy tokens."""
    src, dest = os.path.join(out, "hf"), os.path.join(out, "hf-nope")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    path = os.path.join(dest, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["position_embedding_type"] = None
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    model = GraniteMoeHybridForCausalLM(GraniteMoeHybridConfig(**dict(KWARGS, position_embedding_type=None)))
    model = model.double().eval()
    assert model.model.rotary_emb is None
    fam.load_weights(model, bf16)
    logits = fam.logits_of(model, ids)
    fam.write_logits(out, "hf-nope", ids, logits)
    fam.write_greedy(os.path.join(out, "hf-nope"), model, ids[:8])
    return logits


def main():
    fam.FAMILIES[FAMILY] = SPEC
    fam.LAYER_NAMES[FAMILY] = SPEC["names"]
    more.MORE[FAMILY] = SPEC
    out = os.path.join(fam.DATA, FAMILY)
    os.makedirs(out, exist_ok=True)
    model = more.make_model(FAMILY)
    assert model.model.layers[0].block_sparse_moe is None and model.model.layers[0].mamba is None
    back = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fam.write_hf_dir(FAMILY, model, back, out)
    published_layer_types(os.path.join(out, "hf"))
    bf16 = {k: v.double() for k, v in load_file(os.path.join(out, "hf", "model.safetensors")).items()}
    bf16.setdefault("lm_head.weight", bf16["model.embed_tokens.weight"])
    peft_goldens(bf16, out)
    ids = np.fromfile(os.path.join(out, "hf.ids.txt"), sep=" ", dtype=np.int64)
    ref = more.make_model(FAMILY)
    fam.load_weights(ref, bf16)
    rope = fam.logits_of(ref, ids)
    nope = nope_dir(out, bf16, ids)
    print(f"{FAMILY}: NoPE moves the logits by {np.abs(rope - nope).max() / np.abs(rope).max():.3g} of the largest")
    swapped = dict(bf16)
    for i in range(KWARGS["num_hidden_layers"]):  # the gate and up halves exchanged: the split must matter
        w = bf16[f"model.layers.{i}.shared_mlp.input_linear.weight"]
        swapped[f"model.layers.{i}.shared_mlp.input_linear.weight"] = torch.cat(w.chunk(2, dim=0)[::-1])
    fam.load_weights(ref, swapped)
    moved = np.abs(fam.logits_of(ref, ids) - rope).max() / np.abs(rope).max()
    print(f"{FAMILY}: exchanging input_linear's gate and up halves moves the logits by {moved:.3g} of the largest")


def as_granite(bf16):
    """The same weights as a GraniteForCausalLM (the model llama.cpp's granite runs): input_linear's gate and up
    halves as mlp.gate_proj and mlp.up_proj, output_linear as mlp.down_proj."""
    f = KWARGS["shared_intermediate_size"]
    kwargs = {k: v for k, v in KWARGS.items() if k not in ("shared_intermediate_size", "num_local_experts",
                                                            "layer_types", "position_embedding_type")}
    model = GraniteForCausalLM(GraniteConfig(**dict(kwargs, intermediate_size=f))).double().eval()
    sd = {}
    for k, v in bf16.items():
        if k.endswith("shared_mlp.input_linear.weight"):
            sd[k.replace("shared_mlp.input_linear", "mlp.gate_proj")] = v[:f]
            sd[k.replace("shared_mlp.input_linear", "mlp.up_proj")] = v[f:]
        else:
            sd[k.replace("shared_mlp.output_linear", "mlp.down_proj")] = v
    fam.load_weights(model, sd)
    return model


def gguf_file():
    fam.FAMILIES[FAMILY] = SPEC
    more.MORE[FAMILY] = dict(more.MORE["granite"], kwargs=KWARGS)
    out = os.path.join(fam.DATA, FAMILY)
    bf16 = {k: v.double() for k, v in load_file(os.path.join(out, "hf", "model.safetensors")).items()}
    bf16.setdefault("lm_head.weight", bf16["model.embed_tokens.weight"])
    granite = as_granite(bf16)
    path = os.path.join(out, "tiny-f32.gguf")
    more.write_gguf(path, "granite4", granite, Q.F32)
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    ref = more.make_model(FAMILY)
    fam.load_weights(ref, bf16)
    want = fam.logits_of(ref, ids)
    rel = np.abs(fam.logits_of(granite, ids) - want).max() / np.abs(want).max()
    print(f"{FAMILY}: transformers' granite on the split weights: {rel:.1e} of granitemoehybrid's logits")
    fam.write_logits(out, "tiny-f32", ids, want)
    from llama_cpp import Llama
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "m.gguf")
        more.write_gguf(copy, "granite4", granite, Q.F32, vocab_none=True)
        llm = Llama(model_path=copy, n_ctx=64, logits_all=True, verbose=False, n_threads=2, seed=0, type_k=0, type_v=0)
        llm.eval([int(i) for i in ids])
        got = np.array(llm.scores[:len(ids)], dtype=np.float64)
        del llm
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"  llama.cpp runs tiny-f32.gguf: logits within {rel:.1e} of transformers' granitemoehybrid")
    assert rel < 1e-4


def bnb_dir():
    """hf-bnb4/ from hf/'s bf16 weights, and transformers' logits and greedy tokens on what bitsandbytes reads."""
    fam.FAMILIES[FAMILY] = SPEC
    fam.LAYER_NAMES[FAMILY] = SPEC["names"]
    more.MORE[FAMILY] = SPEC
    hf = __import__("make_hf_goldens")  # the shared MLP's two linears are quantized too
    hf.PROJ = tuple(hf.PROJ) + ("shared_mlp.input_linear", "shared_mlp.output_linear")
    out = os.path.join(fam.DATA, FAMILY)
    src, dest = os.path.join(out, "hf"), os.path.join(out, "hf-bnb4")
    ref = hf.write_bnb4_dir(src, dest, load_file(os.path.join(src, "model.safetensors")))
    ref.setdefault("lm_head.weight", ref["model.embed_tokens.weight"])
    model = more.make_model(FAMILY)
    fam.load_weights(model, {k: torch.from_numpy(v) for k, v in ref.items()})
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    fam.write_logits(out, "hf-bnb4", ids, fam.logits_of(model, ids))
    fam.write_greedy(os.path.join(out, "hf-bnb4"), model, ids[:8])
    for f in os.listdir(dest):  # safetensors writes 0600 files
        os.chmod(os.path.join(dest, f), 0o644)


if __name__ == "__main__":
    if sys.argv[1:] == ["gguf"]:
        gguf_file()
    elif sys.argv[1:] == ["bnb"]:
        bnb_dir()
    else:
        main()
