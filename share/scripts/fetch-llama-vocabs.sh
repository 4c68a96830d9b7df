#!/bin/sh
# fetch-llama-vocabs.sh — llama.cpp's vocabulary test files, which tests/unit/test_llama_vocab holds
# ptrain's tokenizer to: models/ggml-vocab-NAME.gguf (a real model's vocabulary, no weights) with
# NAME.gguf.inp (test texts) and NAME.gguf.out (the ids the model's own Hugging Face tokenizer
# gives them), for gpt-2, llama-bpe, llama-spm, phi-3, qwen2, qwen35, command-r, deepseek-*,
# falcon, mpt, refact, starcoder, gemma-4, bert-bge and more. They come from the source archive of
# llama.cpp's Python bindings on PyPI (llama-cpp-python, the version share/scripts/test-python.sh
# pins; its vendor/llama.cpp/models/), about 75 MB to download, 80 MB kept.
# Usage: share/scripts/fetch-llama-vocabs.sh [DEST_DIR]   (default: $PTRAIN_LLAMA_VOCABS, else
# ~/.cache/ptrain/llama-vocabs, where the test looks; a complete DEST_DIR is kept as it is).
# Then, when PTRAIN_PYTHON has transformers (the test environment), tests/reference/
# make_llama_vocab_hf.py makes DEST_DIR/hf/NAME/: each vocabulary as a tokenizer.json directory
# with transformers' ids for its texts (test_llama_vocab's Hugging Face side; about 5 minutes the
# first time on 2 cores, a warning and no failure when it cannot).
# PTRAIN_PYTHON: a Python with pip (default python3). Exit 1, saying why, when the archive cannot
# be fetched or does not hold the files.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-${PTRAIN_LLAMA_VOCABS:-$HOME/.cache/ptrain/llama-vocabs}}
version=$(sed -n 's/.*llama-cpp-python==\([0-9][0-9.]*\).*/\1/p' "$here/test-python.sh" | head -n 1)
if [ -z "$version" ]; then
    echo "fetch-llama-vocabs.sh: no llama-cpp-python==VERSION in $here/test-python.sh" >&2
    exit 1
fi
py=${PTRAIN_PYTHON:-python3}
hf_side() {
    [ -f "$dest/hf/gemma-4/ids.json" ] && [ -f "$dest/hf/qwen35/ids.json" ] && return 0
    if ! "$py" -c 'import transformers, tokenizers, gguf' 2>/dev/null; then
        echo "fetch-llama-vocabs.sh: $py has no transformers/tokenizers/gguf: no hf/ directories (test_llama_vocab's Hugging Face side will skip)" >&2
        return 0
    fi
    "$py" "$here/../../tests/reference/make_llama_vocab_hf.py" "$dest" >&2 ||
        echo "fetch-llama-vocabs.sh: warning: make_llama_vocab_hf.py failed; test_llama_vocab's Hugging Face side will skip" >&2
}
if [ -f "$dest/ggml-vocab-gpt-2.gguf.out" ] && [ -f "$dest/ggml-vocab-qwen35.gguf.out" ]; then
    echo "fetch-llama-vocabs.sh: $dest: there"
    hf_side
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
if ! "$py" -m pip download --quiet --no-deps --no-binary :all: -d "$work" \
    "llama-cpp-python==$version" >"$work/pip.log" 2>&1; then
    tail -n 5 "$work/pip.log" >&2
    echo "fetch-llama-vocabs.sh: could not download llama-cpp-python $version's source archive from PyPI" >&2
    exit 1
fi
archive=$(ls "$work"/llama_cpp_python-*.tar.gz)
top=$(basename "$archive" .tar.gz)
mkdir -p "$work/x"
if ! tar -xzf "$archive" -C "$work/x" --wildcards "$top/vendor/llama.cpp/models/ggml-vocab-*"; then
    echo "fetch-llama-vocabs.sh: $archive has no vendor/llama.cpp/models/ggml-vocab-* files" >&2
    exit 1
fi
mkdir -p "$dest"
cp "$work/x/$top/vendor/llama.cpp/models/"ggml-vocab-* "$dest/"
echo "fetch-llama-vocabs.sh: $dest: $(ls "$dest" | grep -c '\.gguf$') vocabularies, $(ls "$dest" | grep -c '\.inp$') with test texts (llama-cpp-python $version)"
hf_side
