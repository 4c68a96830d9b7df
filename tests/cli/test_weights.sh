#!/bin/sh
# test_weights.sh — damaged model files end to end (the per-format cases are in
# tests/unit/test_model.c and tests/unit/test_hf_model.c): a copy of the tiny NF4 Llama in
# tests/data with a NaN nested absmax stops `ptrain train` before training with exit 1 and one
# message naming the file and the tensor, also with 2 ranks under mpirun; a copy of SmolLM2 (when
# present) with a NaN scale in one Q4_1 block is refused by `ptrain generate`, and one with an
# all-zero projection warns naming it. The copies are edited in place by plain python3, at offsets
# read from the files' own headers.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# poke_st FILE TENSOR INDEX HEX: write the bytes HEX over element INDEX of a safetensors tensor
poke_st() {
    python3 - "$@" <<'PY'
import json, struct, sys
path, name, index, data = sys.argv[1], sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))[name]
    f.seek(8 + n + t["data_offsets"][0] + index * len(data))
    f.write(data)
PY
}

# poke_gguf FILE TENSOR OFFSET HEX COUNT STRIDE: write HEX at byte OFFSET of a GGUF tensor's data,
# COUNT times, STRIDE bytes apart
poke_gguf() {
    python3 - "$@" <<'PY'
import struct, sys
path, name, off, data, count, stride = sys.argv[1], sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
d = open(path, "rb").read()
sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def string(o):
    n = struct.unpack_from("<Q", d, o)[0]
    return d[o + 8:o + 8 + n].decode(), o + 8 + n
def skip(t, o):
    if t == 8:
        return string(o)[1]
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, o)
        o += 12
        for _ in range(n):
            o = skip(et, o)
        return o
    return o + sizes[t]
n_tensors, n_kv = struct.unpack_from("<QQ", d, 8)
o, align, where = 24, 32, None
for _ in range(n_kv):
    key, o = string(o)
    t = struct.unpack_from("<I", d, o)[0]
    if key == "general.alignment":
        align = struct.unpack_from("<I", d, o + 4)[0]
    o = skip(t, o + 4)
for _ in range(n_tensors):
    tname, o = string(o)
    dims = struct.unpack_from("<I", d, o)[0]
    o += 4 + 8 * dims
    t, rel = struct.unpack_from("<IQ", d, o)
    o += 12
    if tname == name:
        where = rel
base = (o + align - 1) // align * align
with open(path, "r+b") as f:
    for i in range(count):
        f.seek(base + where + off + i * stride)
        f.write(data)
PY
}

# --- the tiny NF4 Llama with a NaN nested absmax ---
cp -r "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4" "$tmp/model"
poke_st "$tmp/model/model.safetensors" model.layers.1.mlp.up_proj.weight.nested_absmax 0 0000c07f
tiny_config "$tmp/c.yaml" "$tmp/out" "max_steps: 2"
sed -i "s|$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4|$tmp/model|" "$tmp/c.yaml"
"$P" train "$tmp/c.yaml" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
want="ptrain: error: $tmp/model/model.safetensors: model.layers.1.mlp.up_proj.weight.nested_absmax[0] is NaN (bitsandbytes NF4): the file is damaged"
expect_eq "NaN nested absmax: ptrain train exits 1" 1 "$rc"
ok "NaN nested absmax: one message naming the file and the tensor" \
    test "$(grep -c '^ptrain: error' "$tmp/err.txt")" = 1 -a -n "$(grep -F "$want" "$tmp/err.txt")"
ok "NaN nested absmax: no training step, nothing written" test ! -e "$tmp/out/metrics.jsonl" -a ! -e "$tmp/out/lora"
if command -v "$mpirun" >/dev/null 2>&1; then
    timeout 120 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/c.yaml" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    ok "NaN nested absmax, 2 ranks: the job ends non-zero, no hang (rc $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
    ok "NaN nested absmax, 2 ranks: one message, from rank 0" \
        test "$(grep -c '^ptrain: rank' "$tmp/err.txt")" = 1 -a -n "$(grep -F "ptrain: rank 0: error: $tmp/model/model.safetensors: model.layers.1.mlp.up_proj.weight.nested_absmax[0] is NaN" "$tmp/err.txt")"
else
    skip_test "NaN nested absmax, 2 ranks: exit" "mpirun not found (Debian: apt-get install openmpi-bin)"
    skip_test "NaN nested absmax, 2 ranks: one message" "mpirun not found (Debian: apt-get install openmpi-bin)"
fi

# --- SmolLM2 (Q4_1 blocks of 20 bytes: fp16 scale, fp16 min, 16 bytes of nibbles) ---
model=$(smollm_model)
if [ -z "$model" ]; then
    reason="SmolLM2-135M-Instruct.Q4_1.gguf not found in \$PTRAIN_MODELS, models/ or /tmp/models (share/scripts/fetch-model.sh fetches it)"
    skip_test "SmolLM2 with a NaN scale: refused" "$reason"
    skip_test "SmolLM2 with an all-zero projection: a warning" "$reason"
    done_testing
    exit $?
fi
cp "$model" "$tmp/smol.gguf"
poke_gguf "$tmp/smol.gguf" blk.5.ffn_down.weight $((20 * 1000)) 007e 1 0
"$P" generate --model "$tmp/smol.gguf" --prompt hi --max-new-tokens 1 >/dev/null 2>"$tmp/err.txt"
rc=$?
ok "SmolLM2 with a NaN scale: exit 1 naming the tensor and the block (rc $rc)" test "$rc" = 1 -a -n "$(grep -F \
    "$tmp/smol.gguf: tensor blk.5.ffn_down.weight (q4_1) holds NaN in the fp16 scale of block 1000" "$tmp/err.txt")"
cp "$model" "$tmp/smol.gguf"
poke_gguf "$tmp/smol.gguf" blk.7.attn_v.weight 0 00000000 $((192 * 576 / 32)) 20
"$P" generate --model "$tmp/smol.gguf" --prompt hi --max-new-tokens 1 >/dev/null 2>"$tmp/err.txt"
rc=$?
ok "SmolLM2 with an all-zero projection: it runs, with a warning naming it (rc $rc)" test "$rc" = 0 -a -n "$(grep -F \
    "ptrain: warning: $tmp/smol.gguf: tensor blk.7.attn_v.weight is all zeros" "$tmp/err.txt")"
done_testing
