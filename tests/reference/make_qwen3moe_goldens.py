#!/usr/bin/env python3
"""make_qwen3moe_goldens.py — reference logits and greedy tokens from Hugging Face transformers for
the qwen3_moe family (tests/unit/test_hf_model.c).

A tiny random Qwen3-MoE: Qwen3 attention (q/k norms, head_dim 24 against hidden 64 / 4 heads), 3
layers with decoder_sparse_step 1 and mlp_only_layers [1] (layers 0 and 2 mixtures of 4 experts,
top-2, norm_topk_prob true; layer 1 a dense MLP of intermediate_size 96), moe_intermediate_size 64
(so every expert weight is whole NF4 blocks), untied lm_head, router weights large enough that the
top-2 choice varies from token to token (each layer's routing counts are printed and checked).

Writes tests/data/qwen3moe/:
  hf/            config.json, model.safetensors (bf16, experts one by one as save_pretrained writes
                 them: mlp.experts.E.{gate,up,down}_proj.weight), the tokenizer of make_family_goldens;
  hf-fused/      the same weights with the experts fused as transformers 5 holds them in memory
                 (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]);
  hf.ids.txt, hf.logits.f32, hf.greedy.txt
                 40 ids, transformers' logits on them (float64 on the bf16 weights), greedy tokens;
  peft.json, peft.init.f32, peft.grads.f32
                 LoRA gradients from PEFT (float64, on the bf16 weights): r=4, alpha=8 on q_proj, k_proj,
                 v_proj, o_proj of every layer with A and B random (rounded to f32), the router and
                 experts frozen (the gradient flows through them), a batch of 2 x 16 tokens with some
                 labels -100, transformers' mean cross-entropy (as make_family_goldens.peft_goldens);
  hf.nf4.logits.f32, hf.nf4.greedy.txt
                 the same with every expert weight and every other projection of whole 64-blocks
                 through bitsandbytes' NF4 (what ptrain's load_in_4bit does; router, embeddings
                 and lm_head stay bf16). Needs bitsandbytes (skipped without it).

Run (the outputs are committed; CI only reads them):
  PYTHONPATH=/tmp/bnb $PTRAIN_PYTHON tests/reference/make_qwen3moe_goldens.py
"""
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

import make_family_goldens as fam
import moe_goldens as moe
from make_hf_goldens import write_greedy

OUT = os.path.join(fam.DATA, "qwen3moe")
KWARGS = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=64, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=fam.VOCAB, rms_norm_eps=1e-6,
              rope_theta=1000000.0, max_position_embeddings=256, tie_word_embeddings=False, num_experts=4,
              num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=True,
              attention_bias=False)


def make_model():
    return moe.make_model(Qwen3MoeForCausalLM, Qwen3MoeConfig(**KWARGS, experts_implementation="eager"), 4321 + 38)


def fused_state(sd):
    """The per-expert state dict with each layer's experts fused as transformers 5 holds them."""
    return moe.fused_state(sd, "mlp", ("gate_proj", "up_proj", "down_proj"), KWARGS["num_experts"])


def nf4_roundtrip(w):
    """bitsandbytes' NF4 round trip of w (blocks of 64, double quantization), with the 8-bit absmax codes
    the exact nearest entries of the nested map, as bitsandbytes' CUDA kernel and ptrain pick them (its
    CPU path rounds through a lookup table first and can land one code off: make_nf4_goldens.py)."""
    import bitsandbytes.functional as F
    t = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    q, state = F.quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=True)
    raw = t.reshape(-1, 64).abs().amax(1)
    nested = state.state2.absmax.repeat_interleave(state.state2.blocksize)[:raw.numel()]
    norm = (raw - state.offset) / nested
    state.absmax = (norm[:, None] - state.state2.code[None, :]).abs().argmin(1).to(torch.uint8)
    return F.dequantize_4bit(q, state).numpy().astype(np.float64)


def nf4_state(sd):
    """What ptrain's load_in_4bit holds: each projection of whole 64-blocks through NF4, every expert
    weight (gate, up, down of each expert: the fused tensors of the model's state dict cut apart) as
    a weight of its own; the router, norms, embeddings and lm_head as they are."""
    out, I = dict(sd), KWARGS["moe_intermediate_size"]

    def rt(w):
        return torch.from_numpy(nf4_roundtrip(w.float().numpy()))
    for k, v in sd.items():
        if not k.startswith("model.layers.") or k.endswith("mlp.gate.weight"):
            continue
        if k.endswith("experts.gate_up_proj"):
            out[k] = torch.stack([torch.cat([rt(e[:I]), rt(e[I:])], 0) for e in v])
        elif k.endswith("experts.down_proj"):
            out[k] = torch.stack([rt(e) for e in v])
        elif v.dim() == 2 and v.shape[1] % 64 == 0:
            out[k] = rt(v)
    assert sum(1 for k in sd if k.endswith("experts.gate_up_proj")) == 2
    return out


def peft_goldens(weights):
    base = make_model()
    fam.load_weights(base, weights)
    moe.peft_goldens(base, OUT, "qwen3moe", 11)


def main():
    model = make_model()
    dest = os.path.join(OUT, "hf")
    bf16, saved = moe.save_bf16(model, Qwen3MoeForCausalLM, Qwen3MoeConfig(**KWARGS), dest)  # the reference on the bf16 weights
    assert "model.layers.0.mlp.experts.3.down_proj.weight" in saved, "save_pretrained no longer splits experts"
    fused = os.path.join(OUT, "hf-fused")
    shutil.rmtree(fused, ignore_errors=True)
    os.makedirs(fused)
    shutil.copy(os.path.join(dest, "config.json"), fused)
    save_file(fused_state(saved), os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    back = Qwen3MoeForCausalLM.from_pretrained(fused, dtype=torch.float64, experts_implementation="eager").eval()  # transformers reads it alike
    ids = np.random.default_rng(7).integers(0, fam.VOCAB, size=40)
    ref = moe.logits_of(model, ids)
    assert np.abs(moe.logits_of(back, ids) - ref).max() < 1e-9, "the fused directory reads differently"
    counts = moe.routing_counts(model, ids, KWARGS["num_experts"])
    print("tokens per expert (top-2 of 40 tokens):", {k: v.tolist() for k, v in counts.items()})
    assert all((v > 0).all() for v in counts.values()) and len(counts) == 2
    fam.write_logits(OUT, "hf", ids, ref)
    write_greedy(os.path.join(OUT, "hf"), model, ids[:8])
    peft_goldens({k: v.double() for k, v in bf16.items()})
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        print("bitsandbytes missing: hf.nf4.* not written")
        return
    fam.load_weights(model, nf4_state({k: v.double() for k, v in bf16.items()}))
    fam.write_logits(OUT, "hf.nf4", ids, moe.logits_of(model, ids))
    write_greedy(os.path.join(OUT, "hf.nf4"), model, ids[:8])
    for d in (dest, fused):
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)


if __name__ == "__main__":
    main()
