#!/usr/bin/env python3
"""make_gptoss_goldens.py — reference logits and greedy tokens from Hugging Face transformers for the
gpt_oss family (tests/unit/test_moe.c).

A tiny random GptOssForCausalLM: hidden 64, 4 heads of 16, 2 KV heads, 2 layers (layer 0 sliding with
window 12, shorter than the 40 ids; layer 1 full, as transformers' default layer_types alternate), YaRN
rope (factor 4 over 64 original positions, truncate false as gpt-oss ships it), 6 experts of width 64,
top-2. Every feature shows in the logits: random non-zero q/k/v/o biases, per-head sinks, router bias,
expert biases; expert weights large enough that the clamped SwiGLU's clamps (gate <= 7, up in +-7)
bite on some values (the script counts them), router weights large enough that the top-2 choice varies.

Writes tests/data/gptoss/:
  hf/            config.json, model.safetensors (bf16, as save_pretrained writes it: mlp.router.{weight,
                 bias}, mlp.experts.gate_up_proj [E, H, 2I] with gate = even columns, up = odd, and its
                 bias [E, 2I], mlp.experts.down_proj [E, I, H] and its bias [E, H], self_attn.sinks [heads]),
                 the tokenizer of make_family_goldens;
  hf.ids.txt, hf.logits.f32, hf.greedy.txt
                 40 ids, transformers' logits on them (float64 on the bf16 weights, eager attention and
                 experts), greedy tokens (make_hf_goldens.write_greedy);
  hf-mxfp4/      the same model with MXFP4 experts as the published gpt-oss checkpoints store them
                 (quantization_config quant_method mxfp4; mlp.experts.{gate_up,down}_proj_blocks [E, rows,
                 cols/32, 16] uint8 and _scales [E, rows, cols/32] uint8, E8M0), random FP4 codes (every code
                 used) and scales (some of them 0 and 1: subnormal powers of two), the rest as hf/;
  hf-mxfp4.ids.txt, hf-mxfp4.logits.f32, hf-mxfp4.greedy.txt
                 transformers' logits and greedy tokens with the experts decoded by transformers'
                 convert_moe_packed_tensors (float64 from its float32 decode);
  mxfp4.decoded.f32
                 layer 0's gate_up_proj as convert_moe_packed_tensors decodes it ([E, H, 2I], float32).

Run (the outputs are committed; CI only reads them):
  $PTRAIN_PYTHON tests/reference/make_gptoss_goldens.py
"""
import os
import shutil

import numpy as np
import torch
from transformers import GptOssConfig, GptOssForCausalLM

import make_family_goldens as fam
import moe_goldens as moe
from make_hf_goldens import write_greedy

OUT = os.path.join(fam.DATA, "gptoss")
E = 6
KWARGS = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, head_dim=16,
              num_key_value_heads=2, vocab_size=fam.VOCAB, rms_norm_eps=1e-5, max_position_embeddings=256,
              rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                               "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 64},
              tie_word_embeddings=False, num_local_experts=E, num_experts_per_tok=2, sliding_window=12,
              layer_types=["sliding_attention", "full_attention"], attention_bias=True)


def make_model(**over):
    torch.manual_seed(4321 + 3802)
    cfg = GptOssConfig(**{**KWARGS, **over}, attn_implementation="eager", experts_implementation="eager")
    model = GptOssForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith("sinks"):
                p.normal_(0.0, 1.5)
            elif name.endswith("router.weight"):
                p.normal_(0.0, 3.0 / np.sqrt(p.shape[1]))
            elif name.endswith("gate_up_proj"):  # [E, H, 2I]: large enough that the clamps bite
                p.normal_(0.0, 3.5 / np.sqrt(p.shape[1]))
            elif name.endswith("down_proj"):  # [E, I, H]
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
            elif p.dim() >= 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[-1]))
            else:  # biases
                p.normal_(0.0, 0.5)
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids))[None]).logits[0].numpy()


def probe(model, ids):
    """Tokens per expert of each layer, and how many gate/up values the clamps cut."""
    counts, clamped = {}, [0, 0]

    def route(layer):
        def f(module, args, out):
            counts[layer] = np.bincount(out[2].reshape(-1).numpy(), minlength=E)
        return f

    def experts(module, args, out):
        x, idx = args[0], args[1]
        for e in range(E):
            rows = (idx == e).any(-1)
            gu = x[rows] @ module.gate_up_proj[e] + module.gate_up_proj_bias[e]
            clamped[0] += int((gu[..., ::2] > module.limit).sum())
            clamped[1] += int((gu[..., 1::2].abs() > module.limit).sum())

    hs = [m.mlp.router.register_forward_hook(route(i)) for i, m in enumerate(model.model.layers)]
    hs += [m.mlp.experts.register_forward_hook(experts) for m in model.model.layers]
    logits_of(model, ids)
    for h in hs:
        h.remove()
    return counts, clamped


def mxfp4_experts(model, rng):
    """Random MXFP4 blocks and scales for every layer's experts; the model's experts set to their decode."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    H, I = KWARGS["hidden_size"], KWARGS["intermediate_size"]
    out, decoded0 = {}, None
    for li, layer in enumerate(model.model.layers):
        for what, rows, cols, e0 in (("gate_up_proj", 2 * I, H, 124), ("down_proj", H, I, 121)):
            blocks = torch.from_numpy(rng.integers(0, 256, size=(E, rows, cols // 32, 16), dtype=np.uint8))
            scales = torch.from_numpy(rng.integers(e0, e0 + 3, size=(E, rows, cols // 32), dtype=np.uint8))
            scales[0, :3, 0] = torch.tensor([0, 1, 2], dtype=torch.uint8)  # subnormal and tiny scales
            dec = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)  # [E, cols, rows]
            assert list(dec.shape) == [E, cols, rows]
            getattr(layer.mlp.experts, what).data.copy_(dec.double())
            out[f"model.layers.{li}.mlp.experts.{what}_blocks"] = blocks
            out[f"model.layers.{li}.mlp.experts.{what}_scales"] = scales
            if li == 0 and what == "gate_up_proj":
                decoded0 = dec.numpy()
    return out, decoded0


def write_mxfp4(model, bf16, ids):
    """hf-mxfp4/: the experts as MXFP4 blocks and scales, the other weights (bf16) as hf/."""
    from safetensors.torch import save_file
    packed, decoded0 = mxfp4_experts(model, np.random.default_rng(39))
    dest = os.path.join(OUT, "hf-mxfp4")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    import json
    with open(os.path.join(OUT, "hf", "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    rest = {k: v for k, v in bf16.items() if not (k.endswith("gate_up_proj") or k.endswith("down_proj"))}
    save_file({**rest, **packed}, os.path.join(dest, "model.safetensors"), metadata={"format": "pt"})
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(OUT, "hf", f), dest)
    decoded0.astype("<f4").tofile(os.path.join(OUT, "mxfp4.decoded.f32"))
    codes = np.concatenate([np.stack([v.numpy() & 15, v.numpy() >> 4]).ravel() for k, v in packed.items()
                            if k.endswith("_blocks")])
    assert len(np.unique(codes)) == 16
    fam.write_logits(OUT, "hf-mxfp4", ids, logits_of(model, ids))
    write_greedy(os.path.join(OUT, "hf-mxfp4"), model, ids[:8])
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)


def main():
    model = make_model()
    dest = os.path.join(OUT, "hf")
    bf16, saved = moe.save_bf16(model, GptOssForCausalLM, GptOssConfig(**KWARGS), dest)  # the reference on the bf16 weights
    print("saved:", {k: list(v.shape) for k, v in saved.items() if k.startswith("model.layers.0.")})
    assert list(saved["model.layers.0.mlp.experts.gate_up_proj"].shape) == [E, 64, 128]
    ids = np.random.default_rng(8).integers(0, fam.VOCAB, size=40)
    ref = logits_of(model, ids)
    back = GptOssForCausalLM.from_pretrained(dest, dtype=torch.float64, attn_implementation="eager",
                                             experts_implementation="eager").eval()
    assert np.abs(logits_of(back, ids) - ref).max() < 1e-9, "the saved directory reads differently"
    full = make_model(layer_types=["full_attention", "full_attention"])
    full.load_state_dict(model.state_dict())
    assert np.abs(logits_of(full, ids) - ref).max() > 1e-3, "the sliding window changes nothing"
    counts, clamped = probe(model, ids)
    print("tokens per expert (top-2 of 40 tokens):", {k: v.tolist() for k, v in counts.items()})
    print("values clamped: gate", clamped[0], "up", clamped[1])
    assert all((v > 0).all() for v in counts.values()) and len(counts) == 2
    assert clamped[0] > 0 and clamped[1] > 0, "the clamps never bite"
    fam.write_logits(OUT, "hf", ids, ref)
    write_greedy(os.path.join(OUT, "hf"), model, ids[:8])
    for f in os.listdir(dest):
        os.chmod(os.path.join(dest, f), 0o644)
    write_mxfp4(model, bf16, ids)


if __name__ == "__main__":
    main()
