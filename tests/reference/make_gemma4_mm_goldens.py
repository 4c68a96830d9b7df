#!/usr/bin/env python3
"""make_gemma4_mm_goldens.py — a multimodal Gemma 4 checkpoint (`gemma4`, Gemma4ForConditionalGeneration) whose text
tower ptrain loads (tests/unit/test_hf_model.c, test_gemma4_mm).

The text model is make_gemma4_goldens.py's (the same config and weights: 7 layers S S F S S F F, KV sharing of
both kinds, per-layer inputs, soft-cap), with a one-layer vision tower and a one-layer audio tower and their
projectors beside it (random weights). Saved in bf16 as transformers 5.25 saves it: model.language_model.*,
model.vision_tower.*, model.audio_tower.*, model.embed_vision.*, model.embed_audio.*, tied (no lm_head). The goldens
are transformers' logits of the whole multimodal model on text-only input (float64, on the stored bf16 weights) and
its greedy tokens; they are checked here to be the text model's own on the same weights (what ptrain computes) within 1e-5
(measured 4.4e-7 of the largest).

Writes tests/data/gemma4-mm/hf/ and hf.{ids.txt,logits.f32,greedy.txt}.

Run (the outputs are committed; CI only reads them): $PTRAIN_PYTHON tests/reference/make_gemma4_mm_goldens.py
"""
import os
import shutil

import numpy as np
import torch
from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4VisionConfig

import make_gemma4_goldens as g4
from make_family_goldens import logits_of, make_tokenizer, write_logits
from make_hf_goldens import write_greedy

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gemma4-mm")


def mm_config():
    vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=16, patch_size=8, position_embedding_size=64)
    audio = Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                              subsampling_conv_channels=[8, 4], output_proj_dims=32)
    return Gemma4Config(text_config=g4.config().to_dict(), vision_config=vision.to_dict(),
                        audio_config=audio.to_dict(), tie_word_embeddings=True, attn_implementation="eager")


def main():
    text = g4.make_model()
    g4.check_config(text)
    torch.manual_seed(4321 + 44)
    mm = Gemma4ForConditionalGeneration(mm_config()).double().eval()
    with torch.no_grad():
        for name, p in mm.named_parameters():
            if not name.startswith("model.language_model.") and p.dim() >= 2:
                p.normal_(0.0, 1.0 / np.sqrt(p[0].numel()))
    sd = mm.state_dict()
    for k, v in text.state_dict().items():  # the text tower: make_gemma4_goldens' model
        sd["model.language_model." + k[len("model."):] if k.startswith("model.") else k] = v.clone()
    mm.load_state_dict(sd)
    mm.tie_weights()
    shutil.rmtree(os.path.join(OUT, "hf"), ignore_errors=True)
    os.makedirs(OUT, exist_ok=True)
    saver = Gemma4ForConditionalGeneration(mm_config()).to(torch.bfloat16)
    saver.load_state_dict({k: v.to(torch.bfloat16) for k, v in mm.state_dict().items()})
    dest = os.path.join(OUT, "hf")
    saver.save_pretrained(dest, safe_serialization=True)
    if os.path.exists(os.path.join(dest, "generation_config.json")):
        os.remove(os.path.join(dest, "generation_config.json"))
    make_tokenizer(dest)
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)
    back = Gemma4ForConditionalGeneration.from_pretrained(dest, dtype=torch.float64).eval()
    towers = {k.split(".")[1] for k in back.state_dict() if not k.startswith("model.language_model.")}
    print(f"gemma4-mm: modules beside the text model: {sorted(towers)}")
    ids = np.random.default_rng(7).integers(0, g4.VOCAB, size=40)
    logits = logits_of(back, ids)
    own = logits_of(g4.rounded(text, torch.bfloat16), ids)
    diff = np.abs(logits - own).max() / np.abs(own).max()
    print(f"gemma4-mm: logits |max| {np.abs(logits).max():.3f}; the text model's on the same weights: {diff:.2g}")
    assert diff < 1e-5, diff  # measured 4.4e-7: the wrapper rounds somewhere through fp32
    write_logits(OUT, "hf", ids, logits)
    write_greedy(os.path.join(OUT, "hf"), back, ids[:8])


if __name__ == "__main__":
    main()
