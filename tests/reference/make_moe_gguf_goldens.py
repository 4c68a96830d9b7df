#!/usr/bin/env python3
"""make_moe_gguf_goldens.py — GGUF files of the tiny mixtures of experts as llama.cpp's converter
(convert_hf_to_gguf.py) writes them, with reference logits and greedy tokens from transformers, and
llama.cpp (llama-cpp-python) running each file to the same logits (tests/unit/test_moe.c).

  mixtral:  tests/data/mixtral/hf (make_mixtral_goldens.py) as llama.cpp converts MixtralForCausalLM:
            general.architecture llama, llama.expert_count / expert_used_count, q/k rows permuted as
            for llama, per layer ffn_gate_inp [E, H] (f32) and the experts stacked into 3-D tensors
            ffn_gate_exps (w1) and ffn_up_exps (w3) {H, I, E}, ffn_down_exps (w2) {I, H, E}. llama.cpp
            runs llama files with full attention (the converter writes no sliding window), so the
            reference is transformers with sliding_window None.
  qwen3moe: a tiny Qwen3-MoE (make_qwen3moe_goldens.py's shapes and seed, every layer sparse: llama.cpp's
            qwen3moe has no dense layers) as llama.cpp converts Qwen3MoeForCausalLM: qwen3moe.expert_count,
            expert_used_count, expert_feed_forward_length (moe_intermediate_size), q/k not permuted,
            attn_q_norm / attn_k_norm, the same expert tensors.
The older files' split experts (blk.L.ffn_gate.E.weight, one tensor per expert) are not written: the llama.cpp
of llama-cpp-python 0.3.36 no longer loads them (a file of that form fails to load there), so ptrain does
not read them either.

Each file says tokenizer.ggml.model none (llama.cpp needs the key; the ids are the tests' own), so llama.cpp
loads the files as committed and the merged GGUFs ptrain writes from them (tests/export/test_moe_export.sh).
Each family gets two files: gguf-f32.gguf (everything f32) and gguf-q4.gguf (every expert tensor Q4_0, as
llama.cpp's quantizer leaves 4-bit experts; the rest f32), with <name>.ids.txt, <name>.logits.f32
(transformers, float64, on the weights the file holds) and <name>.greedy.txt. llama.cpp's logits agree within
1e-4 (max relative) on the f32 files and 5e-2 on the Q4_0 ones (its 4-bit products round the activations to
8 bits; a wrong layout or order of the experts moves logits by their whole size).

Run (the outputs are committed; CI only reads them):
  $PTRAIN_PYTHON tests/reference/make_moe_gguf_goldens.py
"""
import os
import tempfile

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter
from transformers import AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM

import make_family_goldens as fam
import make_qwen3moe_goldens as q3
from make_hf_goldens import write_greedy
from make_more_goldens import permute, unpermute

ATTN = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
        "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate": "ffn_gate_inp"}


def mixtral_model():
    d = os.path.join(fam.DATA, "mixtral", "hf")
    cfg = MixtralConfig.from_pretrained(d)
    cfg.sliding_window = None  # llama.cpp's llama runs full attention
    model = AutoModelForCausalLM.from_pretrained(d, config=cfg, dtype=torch.float64,
                                                 experts_implementation="eager").eval()
    return model, "llama", True


def qwen3moe_model():
    q3.KWARGS = {**q3.KWARGS, "mlp_only_layers": []}
    model = q3.make_model()
    bf16 = {k: v.to(torch.bfloat16).double() for k, v in model.state_dict().items()}
    fam.load_weights(model, bf16)
    return model, "qwen3moe", False


def write_header(w, cfg, arch):
    w.add_name("tiny-moe")
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
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_vocab_size(cfg.vocab_size)
    w.add_expert_count(getattr(cfg, "num_local_experts", None) or cfg.num_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    if arch == "qwen3moe":
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)


def write_gguf(path, model, arch, permuted, q4, vocab_none=False):
    """The model as llama.cpp's converter writes it (experts Q4_0 when q4); returns the state dict a reader
    gets back (float64, the experts in transformers 5's fused form)."""
    cfg = model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(path, arch)
    write_header(w, cfg, arch)
    if vocab_none:
        w.add_tokenizer_model("none")
    back = {}

    def put(gname, t, qtype=Q.F32):
        stored, deq = fam.store(qtype, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if qtype != Q.F32 else None)
        return deq.astype(np.float64)

    def put_hf(gname, hfname, heads=0):
        t = permute(sd[hfname], heads) if heads else sd[hfname]
        deq = put(gname, t)
        back[hfname] = torch.from_numpy(unpermute(deq, heads) if heads else deq)

    put_hf("token_embd.weight", "model.embed_tokens.weight")
    put_hf("output_norm.weight", "model.norm.weight")
    put_hf("output.weight", "lm_head.weight")
    heads = {"self_attn.q_proj": cfg.num_attention_heads, "self_attn.k_proj": cfg.num_key_value_heads}
    for i in range(cfg.num_hidden_layers):
        pre = f"model.layers.{i}."
        for hf, g in ATTN.items():
            if pre + hf + ".weight" in sd:
                put_hf(f"blk.{i}.{g}.weight", pre + hf + ".weight", heads.get(hf, 0) if permuted else 0)
        gate_up, down = sd[pre + "mlp.experts.gate_up_proj"], sd[pre + "mlp.experts.down_proj"]
        inter = gate_up.shape[1] // 2
        qt = Q.Q4_0 if q4 else Q.F32
        g = put(f"blk.{i}.ffn_gate_exps.weight", np.ascontiguousarray(gate_up[:, :inter]), qt)
        u = put(f"blk.{i}.ffn_up_exps.weight", np.ascontiguousarray(gate_up[:, inter:]), qt)
        back[pre + "mlp.experts.gate_up_proj"] = torch.from_numpy(np.concatenate([g, u], 1))
        back[pre + "mlp.experts.down_proj"] = torch.from_numpy(put(f"blk.{i}.ffn_down_exps.weight", down, qt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return back


def llama_cpp_logits(model, arch, permuted, q4, ids):
    from llama_cpp import Llama
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "m.gguf")
        write_gguf(copy, model, arch, permuted, q4, vocab_none=True)
        llm = Llama(model_path=copy, n_ctx=64, logits_all=True, verbose=False, n_threads=2, seed=0,
                    type_k=0, type_v=0)  # an f32 cache
        llm.eval([int(i) for i in ids])
        got = np.array(llm.scores[:len(ids)], dtype=np.float64)
        del llm
    return got


def make(family, maker):
    model, arch, permuted = maker()
    out = os.path.join(fam.DATA, family)
    ids = np.random.default_rng(9).integers(0, fam.VOCAB, size=40)
    for name, q4 in (("gguf-f32", False), ("gguf-q4", True)):
        back = write_gguf(os.path.join(out, name + ".gguf"), model, arch, permuted, q4, vocab_none=True)
        ref, _, _ = maker()
        fam.load_weights(ref, back)
        want = fam.logits_of(ref, ids)
        fam.write_logits(out, name, ids, want)
        write_greedy(os.path.join(out, name), ref, ids[:8])
        got = llama_cpp_logits(model, arch, permuted, q4, ids)
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        print(f"  llama.cpp runs {family}/{name}.gguf: logits within {rel:.1e} of transformers'")
        tol = 5e-2 if q4 else 1e-4  # against 4-bit weights llama.cpp rounds the activations to 8 bits (q8_0)
        assert rel < tol, f"{family}/{name}: llama.cpp's logits are {rel} away from transformers'"
        os.chmod(os.path.join(out, name + ".gguf"), 0o644)


def main():
    make("mixtral", mixtral_model)
    make("qwen3moe", qwen3moe_model)


if __name__ == "__main__":
    main()
