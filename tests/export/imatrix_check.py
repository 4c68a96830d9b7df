"""imatrix_check.py — ggml's side of test_imatrix.sh: ggml's own quantizer (ggml_quantize_chunk in the
libggml-base of llama-cpp-python, called through ctypes) against ptrain's, with and without an
importance matrix.

  imatrix_check.py rows TOOL TYPE DIR
      seeded rows (gaussian, with outliers, a zero row) and imatrix weights (spread over decades,
      some zero) quantized by ptrain (TOOL: quant_imatrix_main) and by ggml; the bytes must be equal
  imatrix_check.py export F32.gguf OUT.gguf IMATRIX
      every quantized tensor of OUT (ptrain's export) must be ggml's quantization of the same tensor
      of F32.gguf (ptrain's f32 export of the same model) with IMATRIX's entry for it (read here, as
      llama-quantize reads the GGUF and legacy formats) when the entry has the row's length; at least
      one tensor must have used it and come out other than without; then llama.cpp loads OUT and
      evaluates a few tokens (finite logits)."""
import ctypes
import os
import struct
import subprocess
import sys

import numpy as np

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q4_k": 12, "q5_k": 13,
         "q6_k": 14, "bf16": 30}
BLOCK = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 0: (1, 4), 1: (1, 2), 30: (1, 2)}


def ggml():
    import llama_cpp
    lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so")
    g = ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    g.ggml_quantize_chunk.restype = ctypes.c_size_t
    g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return g


def quantize(g, type_id, x, qw):
    rows, cols = x.shape
    block, nbytes = BLOCK[type_id]
    out = np.zeros(rows * (cols // block) * nbytes, dtype=np.uint8)
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = None if qw is None else np.ascontiguousarray(qw, dtype=np.float32)
    n = g.ggml_quantize_chunk(type_id, x.ctypes.data, out.ctypes.data, 0, rows, cols,
                              None if w is None else w.ctypes.data)
    assert n == out.size, (n, out.size)
    return out


def test_rows(g, x, qw, tool, name, d, tag):
    rows, cols = x.shape
    xf, wf, of = (os.path.join(d, f"{tag}.{s}") for s in ("x.f32", "qw.f32", "out.bin"))
    x.astype("<f4").tofile(xf)
    if qw is not None:
        qw.astype("<f4").tofile(wf)
    subprocess.run([tool, name, str(rows), str(cols), xf, wf if qw is not None else "-", of], check=True)
    mine = np.fromfile(of, dtype=np.uint8)
    ref = quantize(g, TYPES[name], x, qw)
    if mine.size != ref.size:
        print(f"{tag}: {mine.size} bytes from ptrain, {ref.size} from ggml")
        return False
    per_row = ref.size // rows
    bad = [r for r in range(rows) if not np.array_equal(mine[r * per_row:(r + 1) * per_row],
                                                        ref[r * per_row:(r + 1) * per_row])]
    print(f"{tag}: {rows} rows of {cols}: {rows - len(bad)} identical to ggml's" +
          (f", first different row {bad[0]}" if bad else ""))
    return not bad


def rows_case(tool, name, d):
    g = ggml()
    rng = np.random.default_rng(46)
    good = True
    for cols in ([512, 256] if name in ("q4_k", "q5_k", "q6_k") else [512, 96]):
        x = rng.normal(0.0, 0.02, (24, cols)).astype(np.float32)
        x[3, 17] = 0.4
        x[5, :] = 0.0
        x[7] = np.abs(x[7])
        x[9, cols // 2:] *= 30.0
        qw = (np.exp(rng.normal(0.0, 1.5, cols)) * 0.1).astype(np.float32)
        good &= test_rows(g, x, qw, tool, name, d, f"{name}-{cols}")
        qw0 = qw.copy()
        qw0[rng.choice(cols, cols // 8, replace=False)] = 0.0
        good &= test_rows(g, x, qw0, tool, name, d, f"{name}-{cols}-zeros")
        good &= test_rows(g, x, None, tool, name, d, f"{name}-{cols}-none")
    return good


def read_imatrix(path):
    data = open(path, "rb").read()
    out = {}
    if data[:4] == b"GGUF":
        import gguf
        r = gguf.GGUFReader(path)
        t = {x.name: x for x in r.tensors}
        for name in t:
            if name.endswith(".in_sum2"):
                base = name[:-len(".in_sum2")]
                sums = np.array(t[name].data, dtype=np.float32).reshape(-1)
                counts = np.array(t[base + ".counts"].data, dtype=np.float32).reshape(-1)
                ne0 = sums.size // counts.size
                v = sums.reshape(counts.size, ne0).copy()
                for j, c in enumerate(counts):
                    v[j] = v[j] / c if c > 0 else 1.0
                out[base] = v.reshape(-1).astype(np.float32)
        return out
    n, at = struct.unpack_from("<i", data, 0)[0], 4
    for _ in range(n):
        ln = struct.unpack_from("<i", data, at)[0]
        name = data[at + 4:at + 4 + ln].decode()
        at += 4 + ln
        ncall, nval = struct.unpack_from("<ii", data, at)
        at += 8
        v = np.frombuffer(data, dtype="<f4", count=nval, offset=at).astype(np.float32)
        at += 4 * nval
        out[name] = v / np.float32(ncall) if ncall > 0 else v
    return out


def export_case(f32_path, out_path, im_path):
    import gguf
    g = ggml()
    im = read_imatrix(im_path)
    src = {t.name: t for t in gguf.GGUFReader(f32_path).tensors}
    good, weighted, changed, checked = True, 0, 0, 0
    for t in gguf.GGUFReader(out_path).tensors:
        type_id = int(t.tensor_type)
        if type_id in (0, 1, 30) or len(t.shape) != 2:
            continue
        cols, rows = int(t.shape[0]), int(t.shape[1])
        x = np.array(src[t.name].data, dtype=np.float32).reshape(rows, cols)
        qw = im.get(t.name)
        qw = qw if qw is not None and qw.size == cols else None
        ref = quantize(g, type_id, x, qw)
        mine = np.array(t.data, dtype=np.uint8).reshape(-1)
        same = np.array_equal(mine, ref)
        checked += 1
        if qw is not None and type_id != 8:
            weighted += 1
            changed += not np.array_equal(ref, quantize(g, type_id, x, None))
        if not same:
            print(f"  {t.name} ({t.tensor_type.name}): not ggml's quantization" + (" with the imatrix" if qw is not None else ""))
            good = False
    print(f"{checked} quantized tensors, {weighted} with imatrix weights ({changed} of them other than without): "
          f"{'all' if good else 'not all'} identical to ggml_quantize_chunk")
    good &= weighted > 0 and changed > 0
    from llama_cpp import Llama
    llm = Llama(model_path=out_path, n_ctx=32, logits_all=True, verbose=False, n_threads=2, seed=0)
    llm.eval([1, 5, 9, 14, 30])
    scores = np.array(llm.scores[:5])
    finite = bool(np.isfinite(scores).all())
    print(f"llama.cpp loads it and evaluates 5 tokens: logits {'finite' if finite else 'NOT finite'}")
    return good and finite


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    if sys.argv[1] == "rows":
        sys.exit(0 if rows_case(sys.argv[2], sys.argv[3], sys.argv[4]) else 1)
    sys.exit(0 if export_case(sys.argv[2], sys.argv[3], sys.argv[4]) else 1)
