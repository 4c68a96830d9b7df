"""make_imatrix_files.py — importance matrices for a GGUF model in both of llama.cpp's formats, for
test_imatrix.sh (imatrix_file, issue 46). Written as llama-imatrix writes them (its tools/imatrix
describes both): the GGUF one with the gguf package (general.type imatrix, imatrix.datasets,
imatrix.chunk_count, imatrix.chunk_size; per weight NAME.in_sum2 float32 [n_mat, cols] and NAME.counts
float32 [n_mat, 1]), the legacy .dat with struct (int32 entry count; per entry int32 name length, the
name, int32 ncall, int32 nval, nval float32 sums; then the last chunk and the dataset's name).

  make_imatrix_files.py MODEL.gguf OUT.gguf OUT.dat [SEED]

Every 2-D tensor of MODEL but token_embd.weight gets an entry of its row length, except one left out
(blk.1.ffn_up.weight: quantized without); the sums are seeded random squares times the count, so the
values (sum / count) spread over two decades as activations' mean squares do. Corner cases of the
formats: in the GGUF file blk.0.ffn_gate.weight has count 0 (llama.cpp reads every value as 1) and an
entry names a tensor the model lacks; in the .dat blk.0.ffn_gate.weight has ncall 0 (the sums are the
values)."""
import struct
import sys

import numpy as np
import gguf


def entries(model):
    r = gguf.GGUFReader(model)
    out = []
    for t in r.tensors:
        if len(t.shape) == 2 and t.name != "token_embd.weight" and t.name != "blk.1.ffn_up.weight":
            out.append((t.name, int(t.shape[0])))
    return out


def values(rng, cols):
    return (np.exp(rng.normal(0.0, 1.2, cols)) * 0.05).astype(np.float32)


def write_gguf(path, ents, seed):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch="imatrix")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["pirate-instructions.jsonl"])
    w.add_uint32("imatrix.chunk_count", 7)
    w.add_uint32("imatrix.chunk_size", 512)
    for name, cols in ents + [("blk.9.attn_q.weight", 64)]:
        count = 0.0 if name == "blk.0.ffn_gate.weight" else 7.0 * 512
        w.add_tensor(name + ".in_sum2", (values(rng, cols) * np.float32(max(count, 1.0))).reshape(1, cols))
        w.add_tensor(name + ".counts", np.array([[count]], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_dat(path, ents, seed):
    rng = np.random.default_rng(seed + 1)
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(ents)))
        for name, cols in ents:
            ncall = 0 if name == "blk.0.ffn_gate.weight" else 13
            raw = name.encode()
            f.write(struct.pack("<i", len(raw)) + raw + struct.pack("<ii", ncall, cols))
            f.write((values(rng, cols) * np.float32(max(ncall, 1))).astype("<f4").tobytes())
        dataset = b"pirate-instructions.jsonl"
        f.write(struct.pack("<ii", 13, len(dataset)) + dataset)


def main(argv):
    model, out_gguf, out_dat = argv[:3]
    seed = int(argv[3]) if len(argv) > 3 else 46
    ents = entries(model)
    write_gguf(out_gguf, ents, seed)
    write_dat(out_dat, ents, seed)
    print(f"{len(ents)} entries written to {out_gguf} and {out_dat}")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1:])
