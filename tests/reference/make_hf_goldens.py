#!/usr/bin/env python3
"""make_hf_goldens.py — tiny Hugging Face Llama models as safetensors, and transformers' logits on
them, for ptrain's safetensors loader parity tests (tests/unit/test_hf_model.c).

Writes (outputs are committed; CI never runs this script):
  tests/data/hfcache/models--ptrain-test--tiny-llama/
      refs/main, snapshots/<40-hex>/{config.json, model.safetensors, tokenizer.json,
      tokenizer_config.json}: a tiny random Llama (grouped-query attention, linear rope scaling,
      untied lm_head) saved by transformers in bfloat16, laid out as the HF hub cache does (plain
      files instead of symlinks into blobs/), so it resolves by id with HF_HUB_CACHE set.
  tests/data/hf/tiny-llama-f32/   the same kind of model in float32 with tied embeddings and Llama 3
      rope scaling, saved sharded (model.safetensors.index.json + 2 shards).
  tests/data/hf/tiny-llama-bnb4/  the bf16 model quantized by bitsandbytes to NF4 with double
      quantization (blocksize 64, nested blocksize 256), saved as a `*-bnb-4bit` checkpoint:
      packed U8 weights with .absmax, .quant_map, .nested_absmax, .nested_quant_map and
      .quant_state.bitsandbytes__nf4 beside them, quantization_config in config.json.
  tests/data/hf/NAME.ids.txt, NAME.logits.f32: input ids and transformers' logits [T, vocab]
      (float32 little-endian) computed in float64 from exactly the weights ptrain gets: the stored
      bf16/f32 values, and for bnb4 bitsandbytes' own NF4 dequantization computed in fp32.
      NAME = tiny-llama-bf16, tiny-llama-f32, tiny-llama-bnb4, and tiny-llama-bf16.nf4 (the bf16
      model with its projections quantized on load: the reference went through bitsandbytes'
      quantize_4bit of the same fp32 values). NAME.greedy.txt: the first 8 ids, the 12 ids
      transformers' greedy decoding (float64, same weights) continues them with, and the smallest
      top-1/top-2 margin on the way (see write_greedy).
make_family_goldens.py uses write_greedy and write_bnb4_dir for its qwen2 and gemma2 directories.
The tokenizer is a small byte-level BPE (ChatML specials) trained here with `tokenizers`.

Run (written with torch 2.x, transformers 5.24, safetensors 0.8, bitsandbytes 0.50, tokenizers 0.23):
  /tmp/refenv/bin/python tests/reference/make_hf_goldens.py
"""
import hashlib
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
HF = os.path.join(DATA, "hf")
REPO = os.path.join(DATA, "hfcache", "models--ptrain-test--tiny-llama")
COMMIT = hashlib.sha1(b"ptrain tiny-llama v1").hexdigest()

BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            vocab_size=320, rms_norm_eps=1e-5, max_position_embeddings=256)
MODELS = {
    "bf16": dict(BASE, num_key_value_heads=2, rope_theta=10000.0, tie_word_embeddings=False,
                 rope_scaling=dict(rope_type="linear", factor=2.0)),
    "f32": dict(BASE, num_key_value_heads=4, rope_theta=500000.0, tie_word_embeddings=True,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=32)),
}
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def tokenizer_files(dest):
    """A byte-level BPE of about 300 tokens with ChatML special tokens, as tokenizer.json +
    tokenizer_config.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = ["The capital of France is Paris. The quick brown fox jumps over the lazy dog.",
            "What is the capital of Italy? Rome is the capital of Italy.",
            "def f(x):\n    return x * 2\n", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"] * 20
    tok.train_from_iterator(text, trainer)
    tok.save(os.path.join(dest, "tokenizer.json"))
    with open(os.path.join(dest, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": CHATML}, f, indent=1)
    assert tok.get_vocab_size() <= BASE["vocab_size"]


def random_model(kind):
    cfg = LlamaConfig(**MODELS[kind])
    torch.manual_seed(4321 + len(kind))
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # random norms too, so a wrong norm cannot hide
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        model.model.norm.weight.uniform_(0.5, 1.5)
    return cfg, model


def golden(name, cfg, weights):
    """transformers' logits in float64 on exactly these (fp64) weights."""
    model = LlamaForCausalLM(cfg).double().eval()
    sd = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in weights.items()}
    if cfg.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    ids = np.random.default_rng(11).integers(0, cfg.vocab_size, size=40)
    with torch.no_grad():
        logits = model(torch.from_numpy(ids)[None]).logits[0].numpy().astype(np.float32)
    with open(os.path.join(HF, name + ".ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits.astype("<f4").tofile(os.path.join(HF, name + ".logits.f32"))
    print(f"{name}: {len(ids)} tokens, logits {logits.shape}, |max| {np.abs(logits).max():.3f}")
    write_greedy(os.path.join(HF, name), model, ids[:8])


def write_greedy(prefix, model, prompt, steps=12):
    """prefix.greedy.txt: the prompt ids, the ids transformers' greedy decoding continues them with
    (model in float64) and the smallest top-1/top-2 margin on the way. Decoded twice, and the two
    must agree: an argmax loop over the whole sequence without a cache, and generate() through
    transformers' own KV cache (no eos: all steps are taken)."""
    ids, margin = [int(i) for i in prompt], float("inf")
    with torch.no_grad():
        for _ in range(steps):
            last = model(torch.tensor([ids])).logits[0, -1].numpy()
            top2 = np.sort(last)[-2:]
            margin = min(margin, float(top2[1] - top2[0]))
            ids.append(int(np.argmax(last)))
        model.generation_config.eos_token_id = None
        out = model.generate(torch.tensor([ids[:len(prompt)]]), max_new_tokens=steps,
                             do_sample=False, use_cache=True, pad_token_id=0)
    gen = ids[len(prompt):]
    assert out[0, len(prompt):].tolist() == gen, (out[0, len(prompt):].tolist(), gen)
    with open(prefix + ".greedy.txt", "w") as f:
        f.write(" ".join(map(str, ids[:len(prompt)])) + "\n" + " ".join(map(str, gen)) + "\n" + f"{margin:.6g}\n")
    print(f"  {os.path.basename(prefix)}: greedy {gen}, smallest top-2 margin {margin:.3g}")


def fp64_of(sd):
    return {k: v.float().numpy().astype(np.float64) for k, v in sd.items()}


def nf4(w32):
    """bitsandbytes NF4 with double quantization of fp32 w: (packed, quant_state)."""
    import bitsandbytes.functional as F
    return F.quantize_4bit(w32.contiguous(), blocksize=64, quant_type="nf4", compress_statistics=True)


def nf4_dequant_fp32(q, state):
    """bitsandbytes' own NF4 dequantization, in fp32: with double quantization the absmax is
    dequantize_blockwise of its codes plus the offset, as functional.dequantize_4bit computes it,
    and the 64-blocks run over the flattened weight, as in bitsandbytes' CUDA kernel and its
    portable backend (used here). bitsandbytes 0.50's native CPU kernel takes every row for whole
    blocks and gets rows of 32 or 96 values wrong; where rows are whole blocks it must agree with
    the portable code bit for bit."""
    import copy
    import bitsandbytes.functional as F
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
    absmax = state.absmax
    if state.nested:
        absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
    portable = getattr(_dequantize_4bit_compute, "__wrapped__", _dequantize_4bit_compute)  # eager, not compiled
    w = portable(q.reshape(-1), absmax.float(), state.code, state.blocksize, state.shape, torch.float32)
    if state.shape[-1] % state.blocksize == 0:
        s = copy.deepcopy(state)
        s.dtype = torch.float32
        assert torch.equal(w, F.dequantize_4bit(q, s))
    return w


def write_bf16():
    cfg, model = random_model("bf16")
    model = model.to(torch.bfloat16)
    snap = os.path.join(REPO, "snapshots", COMMIT)
    shutil.rmtree(REPO, ignore_errors=True)
    os.makedirs(os.path.join(REPO, "refs"))
    with open(os.path.join(REPO, "refs", "main"), "w") as f:
        f.write(COMMIT)
    model.save_pretrained(snap)
    tokenizer_files(snap)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(snap, extra)):
            os.remove(os.path.join(snap, extra))
    sd = load_file(os.path.join(snap, "model.safetensors"))
    assert all(v.dtype == torch.bfloat16 for v in sd.values())
    golden("tiny-llama-bf16", cfg, fp64_of(sd))
    # load_in_4bit: the projections (bf16 -> fp32) go through bitsandbytes' NF4
    ref = fp64_of(sd)
    for k, v in sd.items():
        if any(p in k for p in PROJ):
            q, st = nf4(v.float())
            ref[k] = nf4_dequant_fp32(q, st).numpy().astype(np.float64)
    golden("tiny-llama-bf16.nf4", cfg, ref)
    return cfg, snap, sd


def write_f32():
    cfg, model = random_model("f32")
    dest = os.path.join(HF, "tiny-llama-f32")
    shutil.rmtree(dest, ignore_errors=True)
    model.save_pretrained(dest, max_shard_size="200KB")
    if os.path.exists(os.path.join(dest, "generation_config.json")):
        os.remove(os.path.join(dest, "generation_config.json"))
    index = json.load(open(os.path.join(dest, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2, shards
    sd = {}
    for s in shards:
        sd.update(load_file(os.path.join(dest, s)))
    assert all(v.dtype == torch.float32 for v in sd.values())
    golden("tiny-llama-f32", cfg, fp64_of(sd))


BNB_CONFIG = {
    "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
    "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_storage": "uint8", "llm_int8_skip_modules": ["lm_head"]}


def bnb4_tensors(sd_bf16):
    """The projection weights of a bf16 state dict quantized by bitsandbytes (NF4, double
    quantization) and serialized by QuantState.as_dict(packed=True) exactly as transformers saves
    Linear4bit layers; everything else (embeddings, norms, biases) as it is. Returns the tensors to
    save and the float64 weights bitsandbytes dequantizes them to (in fp32)."""
    out, ref = {}, fp64_of(sd_bf16)
    for k, v in sd_bf16.items():
        if not any(k.endswith(p + ".weight") for p in PROJ):
            out[k] = v
            continue
        q, state = nf4(v.float())
        state.dtype = torch.bfloat16  # the dtype of the weights it came from, as transformers records
        out[k] = q
        for sk, sv in state.as_dict(packed=True).items():
            out[k + "." + sk] = sv
        ref[k] = nf4_dequant_fp32(q, state).numpy().astype(np.float64)
    return out, ref


def write_bnb4_dir(src, dest, sd_bf16):
    """dest: the bf16 checkpoint sd_bf16 of directory src as a pre-quantized `*-bnb-4bit` one
    (model.safetensors, config.json with quantization_config, src's tokenizer files). Returns the
    float64 weights it holds for transformers (see bnb4_tensors), checked by reading it back."""
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    out, ref = bnb4_tensors(sd_bf16)
    save_file(out, os.path.join(dest, "model.safetensors"), metadata={"format": "pt"})
    conf = json.load(open(os.path.join(src, "config.json")))
    conf["quantization_config"] = BNB_CONFIG
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    for t in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, t), dest)
    check_bnb_roundtrip(dest, ref)
    return ref


def write_bnb4(cfg, snap, sd_bf16):
    """The bf16 checkpoint as a bitsandbytes 4-bit one, and its goldens."""
    ref = write_bnb4_dir(snap, os.path.join(HF, "tiny-llama-bnb4"), sd_bf16)
    golden("tiny-llama-bnb4", cfg, ref)


def check_bnb_roundtrip(dest, ref):
    """bitsandbytes reads the checkpoint back (QuantState.from_dict) to exactly the reference weights."""
    import bitsandbytes.functional as F
    sd = load_file(os.path.join(dest, "model.safetensors"))
    for k in [k for k in sd if any(k.endswith(p + ".weight") for p in PROJ)]:
        qs = {s[len(k) + 1:]: v for s, v in sd.items() if s.startswith(k + ".")}
        state = F.QuantState.from_dict(qs, device=torch.device("cpu"))
        w = nf4_dequant_fp32(sd[k], state).numpy().astype(np.float64)
        assert np.array_equal(w, ref[k]), k
    print("bnb4: bitsandbytes reads its checkpoint back to the reference weights, bit for bit")


def main():
    os.makedirs(HF, exist_ok=True)
    cfg, snap, sd = write_bf16()
    write_f32()
    write_bnb4(cfg, snap, sd)
    for root in (HF, REPO):  # safetensors writes 0600 files
        for d, _, files in os.walk(root):
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)


if __name__ == "__main__":
    main()
