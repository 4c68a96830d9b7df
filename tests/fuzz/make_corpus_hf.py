#!/usr/bin/env python3
"""make_corpus_hf.py — the seed corpora of fuzz_safetensors (tests/fuzz/corpus/safetensors/) and
fuzz_hfconfig (tests/fuzz/corpus/hfconfig/): small valid safetensors files (every dtype,
__metadata__, header padding, an empty tensor, a bitsandbytes NF4 weight with its parts) and
config.json files of each supported family and rope style, each under 4 KiB.
Re-run with: python3 make_corpus_hf.py (standard library only; deterministic)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "U32": 4, "I32": 4, "U64": 8, "I64": 8,
         "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def safetensors(name, tensors, metadata=None, pad=0):
    """tensors: [(name, dtype, shape, bytes or None)], written in order, each aligned to 8."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for tname, dtype, shape, raw in tensors:
        n = SIZES[dtype]
        for s in shape:
            n *= s
        data += b"\0" * (-len(data) % 8)
        raw = raw if raw is not None else bytes((i * 37 + 11) % 256 for i in range(n))
        assert len(raw) == n
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (pad + (-(8 + len(text)) % 8))
    blob = struct.pack("<Q", len(text)) + text + data
    assert len(blob) < 4096, (name, len(blob))
    with open(os.path.join(HERE, "corpus", "safetensors", name), "wb") as f:
        f.write(blob)


def config(name, obj):
    text = json.dumps(obj, indent=1).encode()
    assert len(text) < 4096
    with open(os.path.join(HERE, "corpus", "hfconfig", name), "wb") as f:
        f.write(text)


def main():
    os.makedirs(os.path.join(HERE, "corpus", "safetensors"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "corpus", "hfconfig"), exist_ok=True)
    safetensors("all-dtypes.safetensors", [(f"t.{d.lower()}", d, [2, 3], None) for d in SIZES],
                metadata={"format": "pt"})
    safetensors("padded-empty.safetensors", [("w", "F32", [4, 4], None), ("empty", "BF16", [0, 8], None),
                                             ("scalar", "F64", [], None)], pad=13)
    state = json.dumps({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4, 64],
                        "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.01}).encode()
    w = "model.layers.0.self_attn.q_proj.weight"
    safetensors("bnb-nf4.safetensors", [(w, "U8", [128, 1], None), (w + ".absmax", "U8", [4], None),
                                        (w + ".quant_map", "F32", [16], None),
                                        (w + ".nested_absmax", "F32", [1], None),
                                        (w + ".nested_quant_map", "F32", [256], None),
                                        (w + ".quant_state.bitsandbytes__nf4", "U8", [len(state)], state)],
                metadata={"format": "pt"})
    base = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 320, "max_position_embeddings": 256, "rms_norm_eps": 1e-05}
    config("llama-v5.json", dict(base, architectures=["LlamaForCausalLM"], model_type="llama",
                                 rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 32}, tie_word_embeddings=True))
    config("llama-old-rope.json", dict(base, model_type="llama", rope_theta=10000.0,
                                       rope_scaling={"type": "linear", "factor": 2.0}, torch_dtype="bfloat16"))
    config("mistral.json", dict(base, model_type="mistral", head_dim=32, sliding_window=None, rope_theta=1e6))
    config("qwen2.json", dict(base, model_type="qwen2", rope_theta=1e6, rope_scaling=None, use_sliding_window=False,
                              sliding_window=4096, tie_word_embeddings=True))
    config("gemma2.json", dict(base, model_type="gemma2", head_dim=32, hidden_activation="gelu_pytorch_tanh",
                               query_pre_attn_scalar=32, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                               sliding_window=4096, layer_types=["sliding_attention", "full_attention"]))
    config("qwen3.json", dict(base, model_type="qwen3", head_dim=32, rope_theta=1e6, attention_bias=False,
                              use_sliding_window=False, sliding_window=None, tie_word_embeddings=True))
    config("gemma3.json", dict(base, num_hidden_layers=6, model_type="gemma3_text", head_dim=32,
                               hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=32, sliding_window=16,
                               rope_theta=1e6, rope_local_base_freq=10000.0, sliding_window_pattern=6,
                               layer_types=["sliding_attention"] * 5 + ["full_attention"],
                               rope_scaling={"rope_type": "linear", "factor": 8.0}))
    config("gemma4.json", dict(base, num_hidden_layers=4, model_type="gemma4_text", head_dim=16,
                               hidden_activation="gelu_pytorch_tanh", sliding_window=8, attention_k_eq_v=True,
                               layer_types=["sliding_attention", "full_attention"] * 2, num_kv_shared_layers=2,
                               per_layer_config={"1": {"head_dim": 32, "num_key_value_heads": 1},
                                                 "3": {"head_dim": 32, "num_key_value_heads": 1}},
                               rope_parameters={"full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
                                                                   "partial_rotary_factor": 0.25},
                                                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
                               hidden_size_per_layer_input=16, vocab_size_per_layer_input=320,
                               final_logit_softcapping=30.0, tie_word_embeddings=True))
    config("smollm3.json", dict(base, num_hidden_layers=4, model_type="smollm3", rope_theta=5e6,
                                no_rope_layers=[1, 1, 1, 0], no_rope_layer_interval=4, use_sliding_window=False))
    config("granite.json", dict(base, model_type="granite", embedding_multiplier=12.0,
                                attention_multiplier=0.0078125, residual_multiplier=0.22, logits_scaling=8.0))
    config("olmo2.json", dict(base, model_type="olmo2", rope_theta=500000.0, attention_bias=False))
    config("phi3.json", dict(base, model_type="phi3", architectures=["Phi3ForCausalLM"], partial_rotary_factor=0.75,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.75},
                             sliding_window=262144, original_max_position_embeddings=256, tie_word_embeddings=True,
                             resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, pad_token_id=0))
    config("phi3-longrope.json", dict(base, model_type="phi3", partial_rotary_factor=0.75, max_position_embeddings=1024,
                                      original_max_position_embeddings=256, sliding_window=None,
                                      rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5],
                                                    "long_factor": [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]}))
    config("qwen3-yarn.json", dict(base, model_type="qwen3", head_dim=24, max_position_embeddings=256,
                                   rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                    "original_max_position_embeddings": 64}))
    config("mistral-yarn.json", dict(base, model_type="mistral", rope_theta=10000.0,
                                     rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 8.0, "beta_slow": 0.5,
                                                   "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5}))
    qwen35 = dict(base, num_hidden_layers=4, model_type="qwen3_5_text", head_dim=32, linear_conv_kernel_dim=4,
                  linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                  layer_types=["linear_attention"] * 3 + ["full_attention"], tie_word_embeddings=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                   "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    config("qwen35.json", qwen35)
    config("qwen35-vl.json", {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                              "tie_word_embeddings": False, "text_config": dict(qwen35, layer_types=None),
                              "vision_config": {"model_type": "qwen3_5_vision", "depth": 1}})
    config("bnb.json", dict(base, model_type="llama", quantization_config={
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True, "bnb_4bit_quant_storage": "uint8"}))


if __name__ == "__main__":
    main()
