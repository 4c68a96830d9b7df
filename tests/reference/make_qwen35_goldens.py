#!/usr/bin/env python3
"""make_qwen35_goldens.py — reference logits and greedy tokens from Hugging Face transformers 5.25 for the
Qwen3.5 text family (qwen3_5_text, and the text tower of a multimodal qwen3_5 checkpoint; tests/unit/test_qwen35.c).

Qwen3.5 is a hybrid: linear_attention layers (Gated DeltaNet: in_proj_qkv, a depthwise causal conv1d with SiLU,
L2-normalised q and k, beta = sigmoid(in_proj_b x), g = -exp(A_log) softplus(in_proj_a x + dt_bias), the gated
delta rule, RMSNormGated with SiLU(in_proj_z x), out_proj) and every 4th layer full attention (q_proj twice as
wide: query and output gate per head, q/k norms, partial rotary 0.25, explicit head_dim); (1 + w) norms.

The tiny model: hidden 64, 5 layers (linear, linear, linear, full, linear), 4 heads of head_dim 24 with 2
key/value heads (rotary on 6 of 24 values), linear attention with 2 key heads of 16 and 4 value heads of 12
(k heads fewer than v heads), conv kernel 4, intermediate 96, tied embeddings, all weights random (norms and
dt_bias and A_log too, so each enters). The prompts are longer than transformers' chunk of 64.

Writes (fp32 weights, the reference run in fp32 on the CPU with the torch delta rule):
  tests/data/qwen35/hf/            Qwen3_5ForCausalLM (model_type qwen3_5_text), config.json, model.safetensors,
                                   tokenizer files copied from tests/data/phi3/hf
  tests/data/qwen35/hf.ids.txt     80 prompt ids;  hf.logits.f32  their logits [80, vocab]
  tests/data/qwen35/hf.nf4.logits.f32  the prompt's logits with every projection whose inputs are whole 64-value
                                   blocks through bitsandbytes' NF4 (q_proj's query and gate rows each alone, as
                                   ptrain splits and quantizes them on load)
  tests/data/qwen35/hf.pack.txt    two sequences (lengths, ids) whose logits alone are hf.pack.logits.f32,
                                   for the packed-rows check (state reset at the boundary)
  tests/data/qwen35/hf.greedy.txt  a 70-token prompt and 12 greedy tokens (transformers' generate with its
                                   cache: the recurrent form), then the smallest top-1/top-2 margin
  tests/data/qwen35-vl/hf/         the same text weights as Qwen3_5ForConditionalGeneration (model_type qwen3_5,
                                   weights under model.language_model.*, a tiny vision tower under model.visual.*)
  tests/data/qwen35-vl/hf.ids.txt, hf.logits.f32: text-only logits of the multimodal model

Run (the outputs are committed; CI only reads them) with the test environment plus bitsandbytes
(pip install --target DIR bitsandbytes==0.50.0 and put DIR on PYTHONPATH):
  $PTRAIN_PYTHON tests/reference/make_qwen35_goldens.py
"""
import json
import os
import shutil

import numpy as np
import torch
from transformers import Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
VOCAB = 384
TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=5, num_attention_heads=4,
            num_key_value_heads=2, head_dim=24, linear_conv_kernel_dim=4, linear_key_head_dim=16,
            linear_value_head_dim=12, linear_num_key_heads=2, linear_num_value_heads=4, rms_norm_eps=1e-6,
            max_position_embeddings=512, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty(p.shape).uniform_(0.5, 4.0, generator=g)))
            elif name.endswith("dt_bias"):
                p.copy_(torch.empty(p.shape).uniform_(-1.0, 1.0, generator=g))
            elif p.ndim == 1:  # norms: zero-centred (1 + w), the gated norm plain w
                p.copy_(torch.empty(p.shape).uniform_(-0.5, 0.5, generator=g) + (1.0 if "linear_attn.norm" in name else 0.0))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.15)


def nf4_round(w):
    """w through bitsandbytes' NF4 (blocks of 64, double-quantized absmax), as ptrain quantizes on load."""
    import bitsandbytes.functional as F
    q, state = F.quantize_4bit(w.contiguous(), blocksize=64, quant_type="nf4", compress_statistics=True)
    return F.dequantize_4bit(q, state).reshape(w.shape)


def nf4_model(model, cfg):
    """model with every projection whose inputs are whole 64-value blocks through NF4; a full layer's q_proj as
    ptrain splits it: its query rows and its gate rows (interleaved per head in the file) each quantized alone."""
    nf4 = Qwen3_5ForCausalLM(cfg).float().eval()
    nf4.load_state_dict(model.state_dict())
    hd = cfg.head_dim
    with torch.no_grad():
        for name, p in nf4.named_parameters():
            if p.ndim != 2 or "embed_tokens" in name or p.shape[1] % 64:
                continue
            if name.endswith("self_attn.q_proj.weight"):
                heads = p.reshape(-1, 2, hd, p.shape[1])
                q = nf4_round(heads[:, 0].reshape(-1, p.shape[1])).reshape(-1, hd, p.shape[1])
                g = nf4_round(heads[:, 1].reshape(-1, p.shape[1])).reshape(-1, hd, p.shape[1])
                p.copy_(torch.stack([q, g], 1).reshape(p.shape))
            else:
                p.copy_(nf4_round(p))
    return nf4


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def write_ids(path, ids):
    with open(path, "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")


def copy_tokenizer(dest):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(DATA, "phi3", "hf", name), os.path.join(dest, name))


def save(model, dest):
    shutil.rmtree(dest, ignore_errors=True)
    model.save_pretrained(dest, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(dest, extra)
        if os.path.exists(p):
            os.remove(p)
    copy_tokenizer(dest)
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)


def greedy(model, prompt, n=12):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, use_cache=True,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    toks = out.sequences[0, len(prompt):].tolist()
    margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in out.scores)
    return toks, margin


def main():
    torch.manual_seed(0)
    out = os.path.join(DATA, "qwen35")
    os.makedirs(out, exist_ok=True)
    cfg = Qwen3_5TextConfig(**TEXT)
    assert cfg.layer_types == ["linear_attention"] * 3 + ["full_attention", "linear_attention"]
    model = Qwen3_5ForCausalLM(cfg).float().eval()
    randomize(model, 35)
    save(model, os.path.join(out, "hf"))
    rng = np.random.default_rng(35)
    ids = rng.integers(3, VOCAB, size=80)
    write_ids(os.path.join(out, "hf.ids.txt"), ids)
    logits_of(model, ids).astype("<f4").tofile(os.path.join(out, "hf.logits.f32"))
    logits_of(nf4_model(model, cfg), ids).astype("<f4").tofile(os.path.join(out, "hf.nf4.logits.f32"))
    # packed rows: two sequences, each run alone
    a, b = rng.integers(3, VOCAB, size=70), rng.integers(3, VOCAB, size=23)
    with open(os.path.join(out, "hf.pack.txt"), "w") as f:
        f.write(f"{len(a)} {len(b)}\n")
        f.write(" ".join(str(int(i)) for i in np.concatenate([a, b])) + "\n")
    np.concatenate([logits_of(model, a), logits_of(model, b)]).astype("<f4").tofile(os.path.join(out, "hf.pack.logits.f32"))
    prompt = rng.integers(3, VOCAB, size=70).tolist()
    toks, margin = greedy(model, prompt)
    with open(os.path.join(out, "hf.greedy.txt"), "w") as f:
        f.write(" ".join(map(str, prompt)) + "\n" + " ".join(map(str, toks)) + f"\n{margin:g}\n")

    # the multimodal checkpoint: the same text weights under model.language_model.*
    vl_out = os.path.join(DATA, "qwen35-vl")
    os.makedirs(vl_out, exist_ok=True)
    vcfg = Qwen3_5Config(text_config=dict(TEXT), tie_word_embeddings=True,
                         vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=4,
                                            out_hidden_size=64, num_position_embeddings=16, spatial_merge_size=2,
                                            temporal_patch_size=2))
    vl = Qwen3_5ForConditionalGeneration(vcfg).float().eval()
    randomize(vl, 36)
    sd = {k.replace("model.", "model.language_model.", 1): v for k, v in model.state_dict().items()
          if k.startswith("model.")}
    missing, _ = vl.load_state_dict(sd, strict=False)
    assert all(k.startswith("model.visual.") or k == "lm_head.weight" for k in missing), missing
    vl.tie_weights()
    save(vl, os.path.join(vl_out, "hf"))
    ids2 = ids[:72]
    write_ids(os.path.join(vl_out, "hf.ids.txt"), ids2)
    ref = logits_of(vl, ids2)
    assert np.abs(ref - logits_of(model, ids2)).max() < 1e-4
    ref.astype("<f4").tofile(os.path.join(vl_out, "hf.logits.f32"))
    print("margin", margin, "logits max", np.abs(ref).max())


if __name__ == "__main__":
    main()
