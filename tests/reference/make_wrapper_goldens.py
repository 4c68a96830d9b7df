#!/usr/bin/env python3
"""make_wrapper_goldens.py — multimodal checkpoints whose text tower ptrain loads (tests/unit/test_hf_model.c):
Mistral 3 / Ministral 3 (`mistral3`, Mistral3ForConditionalGeneration, text_config ministral3) and Gemma 3
(`gemma3`, Gemma3ForConditionalGeneration, text_config gemma3_text).

Each tiny model is the text model of make_ministral3_goldens.py / make_gemma3_goldens.py (same sizes, rope,
query temperature, sliding window) with a one-layer vision tower and its projector beside it, random weights
everywhere. ptrain reads the text model and must leave the rest unread; the goldens are transformers' logits of
the whole multimodal model on text-only input (float64, on the stored bf16 weights) and its greedy tokens.

Writes:
  tests/data/mistral3/hf/           save_pretrained of the bf16 model (transformers 5.25 saves the layout of the
                                    published checkpoints: language_model.model.*, language_model.lm_head (untied
                                    here), vision_tower.*, multi_modal_projector.*)
  tests/data/mistral3/hf.{ids.txt,logits.f32}, hf.greedy.txt
  tests/data/mistral3/hf-bnb4/      the same as a pre-quantized bitsandbytes 4-bit checkpoint (every *_proj
                                    weight NF4, the vision tower's too), with its goldens on the weights
                                    bitsandbytes dequantizes
  tests/data/gemma3-mm/hf/          the bf16 model with its weights under the modules' names (model.language_model.*,
                                    model.vision_tower.*, ...; tied, so no lm_head), checked to load in
                                    transformers 5 to the very same weights
  tests/data/gemma3-mm/hf.{ids.txt,logits.f32}, hf.greedy.txt

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(e.g. `pip install --target /tmp/bnb --no-deps bitsandbytes`):
  PYTHONPATH=/tmp/bnb $PTRAIN_PYTHON tests/reference/make_wrapper_goldens.py
"""
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, Ministral3Config,
                          Mistral3Config, Mistral3ForConditionalGeneration, PixtralVisionConfig,
                          SiglipVisionConfig)

import make_family_goldens as fam
import make_hf_goldens as hfg
import make_ministral3_goldens as mini

GEMMA3_TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=7, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=24, vocab_size=fam.VOCAB, rms_norm_eps=1e-6,
                   max_position_embeddings=256, query_pre_attn_scalar=20, sliding_window=6,
                   rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                   hidden_activation="gelu_pytorch_tanh")


def mistral3_config():
    text = Ministral3Config(**mini.SPEC["kwargs"])
    vision = PixtralVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                                 head_dim=32, image_size=32, patch_size=8)
    return Mistral3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_index=5,
                          tie_word_embeddings=False, attn_implementation="eager")


def gemma3_config():
    text = Gemma3TextConfig(**GEMMA3_TEXT)
    vision = SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                                image_size=32, patch_size=8)
    return Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                        boi_token_index=3, eoi_token_index=4, image_token_index=5, tie_word_embeddings=True,
                        attn_implementation="eager")


def randomize(model, seed, norm_lo):
    """Norms in [norm_lo, norm_lo + 1], biases in [-0.5, 0.5], matrices N(0, 1/fan_in)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(norm_lo, norm_lo + 1.0)
            elif name.endswith(".bias"):
                p.uniform_(-0.5, 0.5)
            elif p.dim() >= 2:
                p.normal_(0.0, 1.0 / np.sqrt(p[0].numel()))


def save_bf16(cls, config, seed, norm_lo, dest):
    """A random model saved as bf16; returns the float64 model holding exactly the stored weights."""
    shutil.rmtree(dest, ignore_errors=True)
    model = cls(config).double().eval()
    randomize(model, seed, norm_lo)
    model.tie_weights()
    saver = cls(config).to(torch.bfloat16)
    saver.load_state_dict({k: v.to(torch.bfloat16) for k, v in model.state_dict().items()})
    saver.save_pretrained(dest, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(dest, extra)):
            os.remove(os.path.join(dest, extra))
    os.chmod(os.path.join(dest, "model.safetensors"), 0o644)
    fam.make_tokenizer(dest)
    back = cls.from_pretrained(dest, dtype=torch.float64).eval()
    for k, v in back.state_dict().items():
        assert torch.equal(v, model.state_dict()[k].to(torch.bfloat16).double()), k
    return back


def modern(name):
    """A name of the 4.x file layout as transformers 5's modules name it."""
    for old, new in (("language_model.lm_head.", "lm_head."), ("language_model.model.", "model.language_model."),
                     ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector.")):
        if name.startswith(old):
            return new + name[len(old):]
    return name


def reload(cls, config, weights):
    model = cls(config).double().eval()
    missing, unexpected = model.load_state_dict({modern(k): v for k, v in weights.items()}, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    model.tie_weights()
    return model


def write_bnb4(src, dest):
    """dest: src as a pre-quantized bitsandbytes 4-bit checkpoint, as Unsloth's multimodal ones: the text model's
    projections NF4, the vision tower and projector left in bf16 (llm_int8_skip_modules). Returns the float64
    weights it holds for transformers, checked by bitsandbytes reading it back."""
    import bitsandbytes.functional as F
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    out, ref = hfg.bnb4_tensors(load_file(os.path.join(src, "model.safetensors")))
    save_file(out, os.path.join(dest, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(src, "config.json")) as f:
        conf = json.load(f)
    conf["quantization_config"] = dict(hfg.BNB_CONFIG, llm_int8_skip_modules=["lm_head", "vision_tower",
                                                                               "multi_modal_projector"])
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    for t in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, t), dest)
    packed = [k for k in out if k + ".quant_state.bitsandbytes__nf4" in out]
    assert packed and all(k.startswith("language_model.") for k in packed)
    for k in packed:
        qs = {s[len(k) + 1:]: v for s, v in out.items() if s.startswith(k + ".")}
        state = F.QuantState.from_dict(qs, device=torch.device("cpu"))
        assert np.array_equal(hfg.nf4_dequant_fp32(out[k], state).numpy().astype(np.float64), ref[k]), k
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)
    return ref


def goldens(model, out, name):
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    fam.write_logits(out, name, ids, fam.logits_of(model, ids))
    hfg.write_greedy(os.path.join(out, name), model, ids[:8])


def mistral3():
    out = os.path.join(fam.DATA, "mistral3")
    os.makedirs(out, exist_ok=True)
    cfg = mistral3_config()
    model = save_bf16(Mistral3ForConditionalGeneration, cfg, 3303, 0.5, os.path.join(out, "hf"))
    names = list(load_file(os.path.join(out, "hf", "model.safetensors")))
    assert any(n.startswith("vision_tower.") for n in names) and "language_model.lm_head.weight" in names
    goldens(model, out, "hf")
    src, dest = os.path.join(out, "hf"), os.path.join(out, "hf-bnb4")
    ref = write_bnb4(src, dest)
    weights = {k: torch.from_numpy(v) for k, v in ref.items()}
    bnb = reload(Mistral3ForConditionalGeneration, cfg, weights)
    goldens(bnb, out, "hf-bnb4")
    vision = sum(1 for n in names if not n.startswith("language_model."))
    print(f"mistral3: {len(names)} tensors, {vision} of the vision tower and projector")


def gemma3():
    out = os.path.join(fam.DATA, "gemma3-mm")
    os.makedirs(out, exist_ok=True)
    cfg = gemma3_config()
    dest = os.path.join(out, "hf")
    model = save_bf16(Gemma3ForConditionalGeneration, cfg, 3313, -0.5, dest)
    # save_pretrained writes the 4.x layout (language_model.model.*); here the modules' own names instead
    # (model.language_model.*, as Qwen3.5's checkpoints have them)
    path = os.path.join(dest, "model.safetensors")
    sd = {modern(k): v for k, v in load_file(path).items()}
    assert "lm_head.weight" not in sd and any(k.startswith("model.language_model.") for k in sd)
    save_file(sd, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    back = Gemma3ForConditionalGeneration.from_pretrained(dest, dtype=torch.float64)
    for k, v in back.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    print("gemma3: transformers 5 reads the model.language_model.* layout back to the same weights")
    goldens(model, out, "hf")
    with open(os.path.join(dest, "config.json")) as f:
        assert json.load(f)["model_type"] == "gemma3"


if __name__ == "__main__":
    mistral3()
    gemma3()
