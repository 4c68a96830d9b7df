#!/bin/sh
# test_hf_meta.sh — the Hugging Face metadata files made from a GGUF (hf_meta_from_gguf, through
# the test driver tests/export/hf_meta_main):
#   without Python: the five files are written (and no temporary file is left), ptrain reads the
#     config.json back to the GGUF's hyperparameters and the tokenizer.json back to the GGUF
#     tokenizer's ids on tests/data/tokenizer/corpus.txt; a bad dtype is refused;
#   with transformers ($PTRAIN_PYTHON): AutoConfig and AutoTokenizer load the directory; the
#     tokenizer encodes ~3500 texts and renders ~1100 chats as ptrain does (hf_meta_check.py);
#     rope scaling (Llama 3.1's rope_freqs, linear) gives the GGUF's frequencies; rope_freqs that
#     are not Llama 3's and yarn are refused before anything is written.
# Models: SmolLM2-135M-Instruct (skipped, saying why, when absent) and the tokenizer fixtures
# of tests/data/tokenizer (Llama 3 byte-level, SentencePiece, Gemma) plus qwen2 and rope
# fixtures hf_meta_check.py makes, and Qwen3.5's vocabulary from llama.cpp's test files when there.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
D=${HF_META_MAIN:-$(dirname "$P")/tests/export/hf_meta_main}
PY=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
CHECK="$PTRAIN_SRCDIR/tests/export/hf_meta_check.py"
CORPUS="$PTRAIN_SRCDIR/tests/data/tokenizer/corpus.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$D" ]; then
    skip_test "hf_meta_from_gguf writes Hugging Face metadata" "no test driver at $D (make check builds it)"
    done_testing
    exit $?
fi
if [ -n "$PY" ] && ! "$PY" -c 'import transformers, tokenizers, gguf' 2>/dev/null; then PY=""; fi
nopy="no Python with transformers, tokenizers and gguf in \$PTRAIN_PYTHON"
if [ "${PTRAIN_SANITIZERS:-0}" = 1 ]; then # the C side above runs here; transformers' in the plain build
    PY=""
    nopy="in the sanitizer build: transformers' side of the comparison runs in the plain build"
fi

# quiet CMD...: run it, its output as TAP comments
quiet() { "$@" >"$tmp/out" 2>&1; r=$?; grep -v "Token indices\|Warn\|warn" "$tmp/out" | sed 's/^/# /'; return $r; }
write_ok() { "$D" write "$@" 2>"$tmp/err" || { sed 's/^/# /' "$tmp/err"; return 1; }; }
five_files() {
    for f in config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json; do
        [ -s "$1/$f" ] || return 1
    done
    [ "$(ls -A "$1" | wc -l)" -eq 5 ]
}
same_ids() { # same_ids GGUF DIR: ptrain's ids from both tokenizers, corpus line by line
    "$D" encode "$1" "$CORPUS" >"$tmp/a" && "$D" encode "$2/tokenizer.json" "$CORPUS" >"$tmp/b" && cmp -s "$tmp/a" "$tmp/b" &&
        [ "$(wc -l <"$tmp/a")" -eq "$(wc -l <"$CORPUS")" ]
}
# model NAME GGUF [vocab-only]: every check on one GGUF
model() {
    label=$1 g=$2 v=${3:-}
    out="$tmp/$label"
    mkdir -p "$out"
    ok "$label: the five files are written" write_ok "$g" "$out" bfloat16 ${v:+"$v"}
    ok "$label: nothing else is left in the directory" five_files "$out"
    ok "$label: ptrain reads config.json back to the GGUF's hyperparameters" quiet "$D" config "$g" "$out" ${v:+"$v"}
    ok "$label: ptrain reads tokenizer.json back to the GGUF tokenizer's ids" same_ids "$g" "$out"
    if [ -n "$PY" ]; then
        ok "$label: transformers loads it and tokenizes as ptrain does" quiet "$PY" "$CHECK" check "$D" "$g" "$out" "$PTRAIN_SRCDIR" ${v:+"$v"}
    else
        skip_test "$label: transformers loads it and tokenizes as ptrain does" "$nopy"
    fi
}

smol=""
for dir in "${PTRAIN_MODELS:-}" "$PTRAIN_SRCDIR/models" /tmp/models; do
    [ -n "$dir" ] && [ -f "$dir/SmolLM2-135M-Instruct.Q4_1.gguf" ] && smol="$dir/SmolLM2-135M-Instruct.Q4_1.gguf" && break
done
if [ -n "$smol" ]; then
    model smollm2 "$smol"
else
    skip_test "smollm2: Hugging Face metadata" "SmolLM2-135M-Instruct.Q4_1.gguf not found in \$PTRAIN_MODELS, models/ or /tmp/models"
fi
model llama3-bpe "$PTRAIN_SRCDIR/tests/data/tokenizer/llama3-mini/bos.gguf" vocab-only
model spm "$PTRAIN_SRCDIR/tests/data/tokenizer/spm/vocab.gguf" vocab-only
model gemma2-spm "$PTRAIN_SRCDIR/tests/data/tokenizer/spm/gemma.gguf" vocab-only

# a pre-tokenizer of tok_pre_names.c's table beyond the original few: Qwen3.5's real vocabulary
# (llama.cpp's test file, share/scripts/fetch-llama-vocabs.sh), its tokenizer.json read back
vocabs=${PTRAIN_LLAMA_VOCABS:-$HOME/.cache/ptrain/llama-vocabs}
if [ -f "$vocabs/ggml-vocab-qwen35.gguf" ]; then
    mkdir -p "$tmp/qwen35"
    ok "qwen35 vocabulary: the five files are written" write_ok "$vocabs/ggml-vocab-qwen35.gguf" "$tmp/qwen35" bfloat16 vocab-only
    ok "qwen35 vocabulary: ptrain reads tokenizer.json back to the GGUF tokenizer's ids" same_ids "$vocabs/ggml-vocab-qwen35.gguf" "$tmp/qwen35"
    ok "qwen35 vocabulary: its Split regex is Qwen3.5's" grep -q 'p{M}]+|' "$tmp/qwen35/tokenizer.json"
else
    skip_test "qwen35 vocabulary: Hugging Face metadata" "no $vocabs/ggml-vocab-qwen35.gguf (share/scripts/fetch-llama-vocabs.sh)"
fi

mkdir -p "$tmp/bad"
"$D" write "$PTRAIN_SRCDIR/tests/data/tokenizer/spm/vocab.gguf" "$tmp/bad" fp8 vocab-only 2>"$tmp/err"
ok "an unknown torch_dtype is refused, naming the choices" contains "$(cat "$tmp/err")" "expected bfloat16, float16 or float32"

if [ -z "$PY" ]; then
    skip_test "qwen2 and rope fixtures" "$nopy"
    done_testing
    exit $?
fi
fx="$tmp/fixtures"
quiet "$PY" "$CHECK" fixtures "$fx" "$PTRAIN_SRCDIR"
model qwen2 "$fx/qwen2.gguf" vocab-only
for kind in llama3 linear; do
    mkdir -p "$tmp/rope-$kind"
    "$D" write "$fx/rope-$kind.gguf" "$tmp/rope-$kind" float32 vocab-only
    ok "rope $kind: transformers' frequencies equal the GGUF's" quiet "$PY" "$CHECK" rope "$fx/rope-$kind.gguf" "$tmp/rope-$kind"
    ok "rope $kind: ptrain reads the config.json back" quiet "$D" config "$fx/rope-$kind.gguf" "$tmp/rope-$kind" vocab-only
done
mkdir -p "$tmp/rope-bad" "$tmp/rope-yarn"
"$D" write "$fx/rope-bad.gguf" "$tmp/rope-bad" float32 vocab-only 2>"$tmp/err"
ok "rope_freqs that are not Llama 3's are refused, naming the tensor" contains "$(cat "$tmp/err")" "rope_freqs.weight tensor"
ok "  and nothing is written" test -z "$(ls -A "$tmp/rope-bad")"
"$D" write "$fx/rope-yarn.gguf" "$tmp/rope-yarn" float32 vocab-only 2>"$tmp/err"
ok "yarn rope scaling is refused, naming the key" contains "$(cat "$tmp/err")" "llama.rope.scaling.type \"yarn\""
ok "  and nothing is written" test -z "$(ls -A "$tmp/rope-yarn")"
done_testing
