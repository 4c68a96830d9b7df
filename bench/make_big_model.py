"""make_big_model.py — a 2B-class Llama GGUF with random F16 weights (and SmolLM2's tokenizer, so
ptrain and llama.cpp can load it) plus a random PEFT adapter for it: the inputs of
bench/run-export.sh, which measures how much memory and time `ptrain export` needs.
Usage: make_big_model.py SMOLLM2.gguf OUT_DIR"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType
from safetensors.numpy import save_file

DIM, LAYERS, FFN, HEADS, KV = 2048, 24, 8192, 16, 8  # ~2.2B parameters with a 49152-token vocab
HD = DIM // HEADS


def copy_tokenizer(src, w):
    r = GGUFReader(src)
    for name, field in r.fields.items():
        if not name.startswith("tokenizer."):
            continue
        t = field.types[0]
        if t.name == "ARRAY":
            vals = [field.parts[i] for i in field.data]
            if field.types[1].name == "STRING":
                w.add_array(name, [bytes(v).decode("utf-8", "replace") for v in vals])
            else:
                w.add_array(name, [v.tolist()[0] for v in vals])
        elif t.name == "STRING":
            w.add_string(name, bytes(field.parts[field.data[0]]).decode())
        elif t.name == "BOOL":
            w.add_bool(name, bool(field.parts[field.data[0]][0]))
        else:
            w.add_uint32(name, int(field.parts[field.data[0]][0]))


def main(src, out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    w = GGUFWriter(os.path.join(out, "big-f16.gguf"), "llama")
    w.add_block_count(LAYERS)
    w.add_context_length(2048)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    copy_tokenizer(src, w)
    vocab = 49152

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    w.add_tensor("token_embd.weight", mat(vocab, DIM))
    w.add_tensor("output_norm.weight", np.ones(DIM, np.float32))
    shapes = {"attn_q": (DIM, DIM), "attn_k": (KV * HD, DIM), "attn_v": (KV * HD, DIM), "attn_output": (DIM, DIM),
              "ffn_gate": (FFN, DIM), "ffn_up": (FFN, DIM), "ffn_down": (DIM, FFN)}
    for l in range(LAYERS):
        w.add_tensor(f"blk.{l}.attn_norm.weight", np.ones(DIM, np.float32))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", np.ones(DIM, np.float32))
        for name, (r, c) in shapes.items():
            w.add_tensor(f"blk.{l}.{name}.weight", mat(r, c))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # a PEFT adapter, r 16, on every projection
    peft = os.path.join(out, "adapter")
    os.makedirs(peft, exist_ok=True)
    hf = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj"}
    tensors = {}
    for l in range(LAYERS):
        for name, (r, c) in shapes.items():
            p = f"base_model.model.model.layers.{l}.{hf[name]}"
            tensors[p + ".lora_A.weight"] = rng.standard_normal((16, c), dtype=np.float32) * 0.01
            tensors[p + ".lora_B.weight"] = rng.standard_normal((r, 16), dtype=np.float32) * 0.01
    save_file(tensors, os.path.join(peft, "adapter_model.safetensors"))
    json.dump({"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": list(hf.values()),
               "use_rslora": False, "bias": "none"}, open(os.path.join(peft, "adapter_config.json"), "w"))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
