#!/bin/sh
# test_imatrix.sh — imatrix_file / `ptrain export --imatrix` (llama.cpp's importance matrix in the GGUF
# export, issue 46), held to ggml itself: ggml_quantize_chunk of llama-cpp-python's libggml-base, called
# through ctypes (tests/export/imatrix_check.py). Per type (q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, and
# q8_0, which ignores the weights) ptrain's blocks for seeded rows are ggml's byte for byte, with weights,
# with some zero weights and without. Then a tiny Llama is exported with importance matrices in both of
# llama.cpp's formats (written by tests/reference/make_imatrix_files.py): every quantized tensor is ggml's
# quantization of the f32 export's tensor with that file's entry (read by the check as llama-quantize
# reads it), some of them weighted, and llama.cpp loads the files. Bad files and a length mismatch are
# one error naming the file or the tensor. Skips, saying why, without the test Python.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
. "$PTRAIN_SRCDIR/tests/export/peft_env.sh"
peft_require "the importance matrix against ggml" numpy gguf llama_cpp
TOOL=$(dirname "$P")/tests/export/quant_imatrix_main
CHECK="$PTRAIN_SRCDIR/tests/export/imatrix_check.py"
MAKE="$PTRAIN_SRCDIR/tests/reference/make_imatrix_files.py"
show() { grep -v "^ *$" "$1" | sed 's/^/# /'; }

for t in q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k q8_0; do
    "$PY" "$CHECK" rows "$TOOL" "$t" "$tmp" >"$tmp/rows.out" 2>&1
    rc=$?
    show "$tmp/rows.out"
    ok "$t: ptrain's blocks are ggml_quantize_chunk's byte for byte, with an importance matrix and without" test "$rc" = 0
done

base="$tmp/base"
mkdir -p "$base"
for f in "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer*; do
    ln -s "$f" "$base/"
done
run export --model "$base" --out "$tmp/f" --gguf f32 --no-adapter-files
ok "the f32 export (the rows the quantizers get) is written (exit $rc)" test "$rc" = 0 -a -s "$tmp/f/merged-f32.gguf"
"$PY" "$MAKE" "$tmp/f/merged-f32.gguf" "$tmp/im.gguf" "$tmp/im.dat" >"$tmp/make.out" 2>&1
ok "make_imatrix_files.py writes both formats" test -s "$tmp/im.gguf" -a -s "$tmp/im.dat"
methods="q4_k_m q4_0 q4_1 q5_0 q5_1 q8_0"
for fmt in gguf dat; do
    run export --model "$base" --out "$tmp/$fmt" --gguf "$(echo $methods | tr ' ' ,)" --imatrix "$tmp/im.$fmt" --no-adapter-files
    ok "export --imatrix im.$fmt (exit $rc)" test "$rc" = 0
    [ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
    ok "the export says how many tensors used the importance matrix" grep -q "merged-q4_0.gguf: 1[0-9] of the 1[0-9] tensors whose type uses an importance matrix quantized with" "$tmp/out"
    for m in $methods; do
        "$PY" "$CHECK" export "$tmp/f/merged-f32.gguf" "$tmp/$fmt/merged-$m.gguf" "$tmp/im.$fmt" >"$tmp/check.out" 2>&1
        rc=$?
        show "$tmp/check.out"
        if [ "$m" = q8_0 ]; then # q8_0 ignores the weights: the check's "some weighted" does not hold
            ok "$m ($fmt): each tensor is ggml's (q8_0 ignores the matrix) and llama.cpp loads it" \
                grep -q "all identical to ggml_quantize_chunk" "$tmp/check.out"
        else
            ok "$m ($fmt): each tensor is ggml's quantization with the matrix's entry, some weighted, and llama.cpp loads it" \
                test "$rc" = 0
        fi
    done
done
run export --model "$base" --out "$tmp/plain" --gguf q4_0 --no-adapter-files
ok "the importance matrix changes the q4_0 file" test "$rc" = 0 -a -n "$(cmp "$tmp/plain/merged-q4_0.gguf" "$tmp/gguf/merged-q4_0.gguf")"

# a config's imatrix_file: the export at the end of training uses it (one step on the f32 base)
tiny_config "$tmp/c.yaml" "$tmp/cfg" "max_steps: 1
huggingface_save_gguf: true
quantization_method: q4_0
imatrix_file: \"$tmp/im.gguf\""
sed -i "s|^model_name: .*|model_name: \"$base\"|" "$tmp/c.yaml"
run train "$tmp/c.yaml"
ok "a run with imatrix_file trains and writes merged-q4_0.gguf (exit $rc)" test "$rc" = 0 -a -s "$tmp/cfg/lora/merged-q4_0.gguf"
[ "$rc" = 0 ] || echo "$err" | sed 's/^/# /'
run export --model "$base" --adapter "$tmp/cfg/lora" --out "$tmp/cmp" --gguf q4_0 --imatrix "$tmp/im.gguf" --no-adapter-files
ok "it is the file export --imatrix writes from the run's adapter, byte for byte" \
    cmp -s "$tmp/cfg/lora/merged-q4_0.gguf" "$tmp/cmp/merged-q4_0.gguf"

printf 'not an importance matrix\n' >"$tmp/bad.dat"
sed -i "s|^imatrix_file: .*|imatrix_file: \"$tmp/bad.dat\"|; s|^output_dir: .*|output_dir: \"$tmp/cfg2\"|" "$tmp/c.yaml"
run train "$tmp/c.yaml"
ok "train: a bad imatrix_file stops the run before training, naming it (exit $rc)" \
    test "$rc" = 1 -a -n "$(echo "$err" | grep "$tmp/bad.dat: ")" -a ! -e "$tmp/cfg2/metrics.jsonl"

# bad files: one error naming the file and what to give instead
printf 'not an importance matrix\n' >"$tmp/bad.dat"
run export --model "$base" --out "$tmp/b" --gguf q4_0 --imatrix "$tmp/bad.dat" --no-adapter-files
ok "a file that is neither format: exit 1, naming it and llama-imatrix" \
    test "$rc" = 1 -a -n "$(echo "$err" | grep "$tmp/bad.dat: .*llama-imatrix")"
head -c 100 "$tmp/im.dat" >"$tmp/short.dat"
run export --model "$base" --out "$tmp/b" --gguf q4_0 --imatrix "$tmp/short.dat" --no-adapter-files
ok "a truncated .dat: exit 1, naming the file and the entry" \
    test "$rc" = 1 -a -n "$(echo "$err" | grep "$tmp/short.dat: entry 1 (blk.0.attn_q.weight) .*truncated")"
run export --model "$base" --out "$tmp/b" --gguf q4_0 --imatrix "$tmp/f/merged-f32.gguf" --no-adapter-files
ok "a GGUF file without entries (a model): exit 1, saying so" \
    test "$rc" = 1 -a -n "$(echo "$err" | grep "merged-f32.gguf: a GGUF file with no importance matrix entries")"
run export --model "$base" --out "$tmp/b" --gguf q4_0 --imatrix "$tmp/none.dat" --no-adapter-files
ok "a missing file: exit 1, naming it" test "$rc" = 1 -a -n "$(echo "$err" | grep "imatrix_file $tmp/none.dat: cannot open")"
"$PY" -c "
import struct, sys
name = b'blk.0.attn_q.weight'
sys.stdout.buffer.write(struct.pack('<ii', 1, len(name)) + name + struct.pack('<ii', 1, 32) + bytes(128))" >"$tmp/wrong.dat"
run export --model "$base" --out "$tmp/b" --gguf q4_0 --imatrix "$tmp/wrong.dat" --no-adapter-files
ok "an entry of another length: exit 1, naming the tensor and both lengths" \
    test "$rc" = 1 -a -n "$(echo "$err" | grep "wrong.dat: the entry for tensor blk.0.attn_q.weight has 32 values, the tensor's rows 64")"
done_testing
