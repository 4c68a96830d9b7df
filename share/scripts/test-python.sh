#!/bin/sh
# test-python.sh — the Python tools the tests load ptrain's files with: PEFT and transformers
# (adapters, merged models), gguf, TensorBoard (event files), and llama.cpp itself
# (llama-cpp-python, which PyPI ships as source: it is compiled here, about 3 minutes on 2 cores);
# and SentencePiece, with which share/scripts/fetch-tokenizers.sh converts the real tokenizers of
# the parity tests. The
# environment is kept in ${PTRAIN_PYENV:-~/.cache/ptrain/pyenv} and reused while the pinned versions
# below stay the same, so only the first run on a machine pays for it. Prints the environment's
# python on success.
# Usage: share/scripts/test-python.sh    (exit 1, saying why, when the registry cannot be reached)
set -eu
PINS="torch==2.15.0 transformers==5.25.0 peft==0.21.2 safetensors==0.8.0 gguf==0.19.0 numpy==2.4.6 \
accelerate llama-cpp-python==0.3.36"
env=${PTRAIN_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ptrain/pyenv}
# and the tokenizer parity tests' tools (SentencePiece models), the Hub client the Hub tests read
# ptrain's uploads back with, and TensorBoard, whose own reader (EventAccumulator) reads ptrain's
# event files in tests/cli/test_watch.sh, and TRL (the DPO goldens, tests/reference/make_dpo_goldens.py), and
# datasets, pyarrow, pandas and polars (the Parquet files of tests/reference/make_parquet_rows.py), pinned: small wheels added to an existing environment
# without rebuilding it
EXTRAS="sentencepiece==0.2.3 protobuf==7.36.2 huggingface_hub==2.4.0 tensorboard==2.21.0 datasets==5.2.0 pyarrow==26.0.1 pandas==3.1.1 trl==1.16.0 polars==2.1.0"
# the seed system's release whose config keys tests/cli/test_known_keys.sh holds ptrain to: its wheel
# only (--no-deps: its source is read, never installed), kept in the environment's wheels/
SEED_WHEEL="praisonai-train==0.1.16"
seed_wheel() {
    [ -f "$env/wheels/praisonai_train-0.1.16-py3-none-any.whl" ] && return 0
    "$env/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$env/wheels" \
        "$SEED_WHEEL" >&2 && return 0
    echo "test-python.sh: could not download $SEED_WHEEL from PyPI (tests/cli/test_known_keys.sh is skipped)" >&2
    return 1
}
extras() {
    # shellcheck disable=SC2086
    "$env/bin/python" - $EXTRAS 2>/dev/null <<'PY' && return 0
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
PY
    # shellcheck disable=SC2086
    "$env/bin/pip" install -q --disable-pip-version-check $EXTRAS >&2 && return 0
    echo "test-python.sh: could not install $EXTRAS from PyPI" >&2
    return 1
}
if [ -f "$env/.ptrain-pins" ] && [ "$(cat "$env/.ptrain-pins")" = "$PINS" ] && "$env/bin/python" -c \
    'import torch, transformers, peft, gguf, llama_cpp' 2>/dev/null; then
    extras || true
    seed_wheel || true
    echo "$env/bin/python"
    exit 0
fi
rm -rf "$env"
mkdir -p "$(dirname "$env")"
python3 -m venv "$env" >&2
# llama.cpp without its multimodal library (LLAVA_BUILD: mtmd, which no test loads): 188 s instead
# of 230 s to compile on 2 cores
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="${CMAKE_ARGS:+$CMAKE_ARGS }-DLLAVA_BUILD=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL CMAKE_ARGS
# shellcheck disable=SC2086
if ! "$env/bin/pip" install -q --disable-pip-version-check $PINS >&2; then
    echo "test-python.sh: could not install $PINS from PyPI" >&2
    exit 1
fi
echo "$PINS" >"$env/.ptrain-pins"
extras || true
seed_wheel || true
echo "$env/bin/python"
