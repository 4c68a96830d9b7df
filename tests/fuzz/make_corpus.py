#!/usr/bin/env python3
"""make_corpus.py — the seed corpus of fuzz_gguf (tests/fuzz/corpus/gguf/): small valid GGUF
files written by llama.cpp's own writer (the PyPI gguf package), each under 4 KiB, covering every
metadata value type, string and numeric arrays, v2 and v3 headers, a custom alignment, and
tensors of every block type ptrain reads (plus one it only knows the size of).
Re-run with: python3 make_corpus.py (needs numpy and gguf; deterministic)."""
import os
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGML_QUANT_SIZES, GGUFWriter

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")
rng = np.random.default_rng(7)


def raw_tensor(w, name, qtype, shape):
    """A tensor of random bytes of a block type (shape in ggml order: fastest first)."""
    block, size = GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(shape[1:]))
    data = rng.integers(0, 256, size=(rows, shape[0] // block * size), dtype=np.uint8)
    w.add_tensor(name, data, raw_dtype=qtype)


def write(name, build, alignment=None, version=3):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.gguf")
        w = GGUFWriter(path, "llama")
        if alignment:
            w.add_custom_alignment(alignment)
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = bytearray(open(path, "rb").read())
    if version != 3:
        data[4:8] = version.to_bytes(4, "little")
    assert len(data) < 4096, (name, len(data))
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")


def minimal(w):
    w.add_block_count(1)
    w.add_tensor("output_norm.weight", np.arange(8, dtype=np.float32))
    w.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))


def all_types(w):
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_uint64("t.u64", 2**40 + 5)
    w.add_int64("t.i64", -(2**40))
    w.add_float64("t.f64", 2.25)
    w.add_array("t.strs", ["a", "", "bc"])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.0])
    w.add_array("t.bools", [True, False])
    w.add_tensor("f16", np.arange(16, dtype=np.float16).reshape(2, 8))


def tokenizer(w):
    toks = ["<unk>", "<s>", "</s>"] + [chr(ord("a") + i) for i in range(26)] + ["ab", "abc", "Ġthe"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(toks)
    w.add_token_types([3, 3, 3] + [1] * (len(toks) - 3))
    w.add_token_scores([float(-i) for i in range(len(toks))])
    w.add_token_merges(["a b", "ab c"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    raw_tensor(w, "token_embd.weight", Q.Q8_0, [32, 4])


def quants(w):
    raw_tensor(w, "q4_0", Q.Q4_0, [32, 2])
    raw_tensor(w, "q4_1", Q.Q4_1, [32, 2])
    raw_tensor(w, "q5_0", Q.Q5_0, [32, 1])
    raw_tensor(w, "q5_1", Q.Q5_1, [32, 1])
    raw_tensor(w, "q4_k", Q.Q4_K, [256, 1])
    raw_tensor(w, "q6_k", Q.Q6_K, [256, 1])


def kquants(w):
    raw_tensor(w, "q2_k", Q.Q2_K, [256, 1])
    raw_tensor(w, "q3_k", Q.Q3_K, [256, 1])
    raw_tensor(w, "q5_k", Q.Q5_K, [256, 1])
    raw_tensor(w, "iq4_xs", Q.IQ4_XS, [256, 1])
    raw_tensor(w, "bf16", Q.BF16, [8, 1])


def main():
    os.makedirs(HERE, exist_ok=True)
    write("minimal-v3.gguf", minimal)
    write("minimal-v2.gguf", minimal, version=2)
    write("all-kv-types.gguf", all_types, alignment=64)
    write("tokenizer.gguf", tokenizer)
    write("quants.gguf", quants)
    write("kquants.gguf", kquants, alignment=16)
    with open(os.path.join(HERE, "empty-vocab-only.gguf"), "wb") as f:
        # header only: no tensors, one kv (the architecture)
        f.write(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little"))
        key = b"general.architecture"
        f.write(len(key).to_bytes(8, "little") + key + (8).to_bytes(4, "little"))
        f.write((5).to_bytes(8, "little") + b"llama")


if __name__ == "__main__":
    main()
