#!/usr/bin/env python3
"""make_random_model.py — a Hugging Face model directory with random bf16 weights in the shape of
a real model, for benchmarks that must not carry gigabytes: config.json as transformers writes it,
safetensors shards of at most 2 GB with their index, and SmolLM2's tokenizer (tests/data; its
49152 ids fit any of these vocabularies: ptrain treats the rows past them as padding). ptrain loads
the directory as 4-bit (load_in_4bit, its default, quantizes bf16 projections to NF4 on load); the
transformers + PEFT peer loads the same weights in bf16. Weights ~ N(0, 0.02), norms near their
identity; drawn on the GPU when there is one (seeded). Optionally also a plain-text jsonl dataset
whose rows are each longer than --dataset-tokens tokens.

Usage: make_random_model.py SHAPE OUT_DIR [--device cuda|cpu] [--dataset FILE --rows N --dataset-tokens T]
       make_random_model.py --dataset-only FILE --rows N --dataset-tokens T
SHAPE: gemma2-2b (google/gemma-2-2b), smollm2-135m (HuggingFaceTB/SmolLM2-135M), llama3.1-8b
(meta-llama/Llama-3.1-8B: untied lm_head, llama3 RoPE scaling, 131072 positions; 16 GB of bf16),
and for trying the scripts on a CPU tiny, tiny-gemma2 and tiny-llama3 (2 layers; tiny-llama3 untied
with llama3 RoPE, standing in for the 8B shape)."""
import argparse
import json
import os
import random
import shutil

# torch and safetensors are imported where weights are made: the dataset alone needs neither
HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "..", "tests", "data", "tokenizer", "smollm2")

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
         "attention_bias": False, "mlp_bias": False, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
         "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "max_position_embeddings": 8192,
         "initializer_range": 0.02, "dtype": "bfloat16", "use_cache": False,
         "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
SHAPES = {
    "gemma2-2b": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "num_hidden_layers": 26,
                  "hidden_size": 2304, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                  "intermediate_size": 9216, "vocab_size": 256000, "hidden_activation": "gelu_pytorch_tanh",
                  "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                  "sliding_window": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                  "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
                  "max_position_embeddings": 8192, "initializer_range": 0.02, "dtype": "bfloat16",
                  "use_cache": False, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}},
    "smollm2-135m": dict(LLAMA, num_hidden_layers=30, hidden_size=576, num_attention_heads=9,
                         num_key_value_heads=3, head_dim=64, intermediate_size=1536, vocab_size=49152),
    "tiny": dict(LLAMA, num_hidden_layers=2, hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
                 head_dim=64, intermediate_size=256, vocab_size=49152),
}
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
SHAPES["llama3.1-8b"] = dict(LLAMA, num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                             num_key_value_heads=8, head_dim=128, intermediate_size=14336, vocab_size=128256,
                             tie_word_embeddings=False, max_position_embeddings=131072, rope_parameters=LLAMA3_ROPE)
SHAPES["tiny-llama3"] = dict(SHAPES["llama3.1-8b"], num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                             num_key_value_heads=1, head_dim=64, intermediate_size=256, vocab_size=49152)
SHAPES["tiny-gemma2"] = dict(SHAPES["gemma2-2b"], num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                             num_key_value_heads=1, head_dim=64, intermediate_size=256, vocab_size=49152,
                             query_pre_attn_scalar=64)
WORDS = ("the of and to in is was for on that with as by at from his her they which this be are or had an "
         "not but one all were when we there can more if no out so said what up its about into than them "
         "only other new some could time these two may then do first any my now such like our over man me "
         "even most made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still own see "
         "ship sea wind sail captain crew island treasure map gold storm harbour anchor rope deck").split()


def config_for(shape):
    c = dict(SHAPES[shape])
    if c["model_type"] == "gemma2":
        c["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                            for i in range(c["num_hidden_layers"])]
    return c


def tensor_shapes(c):
    """(name, shape, kind) of every weight, in transformers' names; kind: linear, embed, norm."""
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    gemma = c["model_type"] == "gemma2"
    yield "model.embed_tokens.weight", (c["vocab_size"], d), "embed"
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (q, d)), ("self_attn.k_proj", (kv, d)),
                            ("self_attn.v_proj", (kv, d)), ("self_attn.o_proj", (d, q)),
                            ("mlp.gate_proj", (f, d)), ("mlp.up_proj", (f, d)), ("mlp.down_proj", (d, f))):
            yield p + name + ".weight", shape, "linear"
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for n in norms:
            yield p + n + ".weight", (d,), "norm"
    yield "model.norm.weight", (d,), "norm"
    if not c.get("tie_word_embeddings", True):
        yield "lm_head.weight", (c["vocab_size"], d), "embed"


def random_tensor(shape, kind, gemma, gen, device):
    import torch
    x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    if kind == "norm":  # Gemma computes x * (1 + w): w near 0; Llama x * w: w near 1
        x = x * 0.05 + (0.0 if gemma else 1.0)
    else:
        x = x * 0.02
    return x.to(torch.bfloat16).cpu()


def write_weights(c, out, device, seed, shard_bytes=2 << 30):
    import torch
    from safetensors.torch import save_file
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    gemma = c["model_type"] == "gemma2"
    shards, shard, size, total, weight_map = [], {}, 0, 0, {}
    for name, shape, kind in tensor_shapes(c):
        t = random_tensor(shape, kind, gemma, gen, device)
        if shard and size + t.numel() * 2 > shard_bytes:
            shards.append(shard)
            shard, size = {}, 0
        shard[name] = t
        size += t.numel() * 2
        total += t.numel() * 2
    shards.append(shard)
    for k, s in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(s, os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in s})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    return total // 2


def write_dataset(path, rows, tokens, seed):
    """rows of random words, each about 1.5x tokens words long: longer than `tokens` tokens."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            f.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(tokens * 3 // 2))}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", nargs="?", choices=sorted(SHAPES))
    ap.add_argument("out", nargs="?")
    ap.add_argument("--device", help="cuda when torch sees a GPU, else cpu")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--dataset", help="also write a plain-text jsonl dataset here")
    ap.add_argument("--dataset-only", help="write only this dataset (no model)")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--dataset-tokens", type=int, default=2048)
    a = ap.parse_args()
    if a.dataset_only:
        write_dataset(a.dataset_only, a.rows, a.dataset_tokens, a.seed)
        print(json.dumps({"dataset": a.dataset_only, "rows": a.rows, "tokens_at_least": a.dataset_tokens}))
        return
    if not a.shape or not a.out:
        ap.error("SHAPE and OUT_DIR are needed (or --dataset-only)")
    if not a.device:
        import torch
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(a.out, exist_ok=True)
    c = config_for(a.shape)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, name), os.path.join(a.out, name))
    n = write_weights(c, a.out, a.device, a.seed)
    if a.dataset:
        write_dataset(a.dataset, a.rows, a.dataset_tokens, a.seed)
    with open(os.path.join(a.out, "config.json"), "w") as f:  # last: its presence says the model is whole
        json.dump(c, f, indent=1)
    print(json.dumps({"shape": a.shape, "dir": a.out, "params": n, "device": a.device}))


if __name__ == "__main__":
    main()
