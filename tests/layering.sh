#!/bin/sh
# layering.sh — the source folders are the layers, and a layer only looks down: a file may include
# headers of its own layer and of the layers below it, never of one above. The layers, from the
# bottom (docs/architecture.md says what each owns):
#
#    0 core      src/core: errors and the values they show, logging, strings and hashes, JSON files
#    1 runtime   src/runtime: process start-up: MPI ranks and agreements, signals, the BLAS kernel
#    2 backend   src/backend: the op seam (backend.h) and its tensors, the activation arena, the
#                weight formats it carries (GGUF blocks, NF4)
#    3 backends  src/cpu, cuda: the two implementations of the op seam
#    4 model     src/model, src/tokenizer, src/template: model files, families, weights, tokenizers, the
#                Jinja interpreter that renders chat templates
#    5 config    src/config: config.yaml, its keys and checks
#    6 io        src/io: safe file writing, the output_dir lock, GGUF/safetensors/HDF5 writers,
#                the checkpoint file format
#    7 adapter   src/adapter: LoRA adapters and their files (adapter.h5, PEFT, adapter.gguf)
#    8 forward   src/forward: the one forward pass (generation, evaluation, training), loss head,
#                next-token sampling
#    9 data      src/data: datasets, templates, batches
#   10 export    src/export: merged models, Ollama
#   11 hub       src/hub: publishing to the Hugging Face Hub
#   12 watch     src/watch: watching a run: TensorBoard event files, metrics.jsonl read back, the
#                picture of a run, the heartbeat, `ptrain status` and `ptrain plot`
#   13 train     src/train: the training loop, its checkpoints, optimizer, progress
#   14 commands  src/cmd: main.c (the entry point) and the commands that are not training
#
# A source file or private header belongs to its folder's layer; a public header
# (include/ptrain/NAME.h) to the folder of the code that implements it (the table below). A file
# in a folder not listed, or a public header missing from the table, fails the check, so a new one
# must be given its layer here. Prints one TAP line per layer and every offending include as
# "file: includes header (layer N above M)". The order of the files inside each folder is checked
# by tests/file-order.sh.
. "${PTRAIN_SRCDIR:?set PTRAIN_SRCDIR to the source tree}/tests/tap.sh"
cd "$PTRAIN_SRCDIR" || exit 1

folders="core runtime backend cpu:cuda model:tokenizer:template config io adapter forward data export hub watch train cmd"
names="core runtime backend backends model config io adapter forward data export hub watch train commands"

header_folder() { # header_folder NAME (without .h): the folder of the code behind a public header
    case $1 in
    error | util | log | jsonfile) echo core ;;
    dist | signals | blas_kernel) echo runtime ;;
    backend | arena | quant | quant_blocks | nf4) echo backend ;;
    jinja) echo template ;;
    arch | model | gguf | gguf_methods | hf_model | safetensors | rope | tokenizer | model_io | hfcache | \
        weight_check | model_share) echo model ;;
    config | settings | repo_id | method) echo config ;;
    safefs | filewrite | dirlock | gguf_write | st_write | checkpoint) echo io ;;
    adapter | peft) echo adapter ;;
    forward | sample) echo forward ;;
    dataset | dataset_cache) echo data ;;
    export | hf_meta | gguf_meta | imatrix) echo export ;;
    hub) echo hub ;;
    tfevents | runlog | plot | heartbeat | watch) echo watch ;;
    train | step | preference | grpo | reward | score_head | saved_modules | lora | optimizer | gradsync | memplan | outdir | progress | resume | schedule | config_options) echo train ;;
    generate | inspect | tokenize_cmd | score_cmd) echo cmd ;;
    esac
}

folder_layer() { # folder_layer FOLDER: its layer number, or nothing when it is not a layer's
    n=0
    for group in $folders; do
        case ":$group:" in *":$1:"*) echo $n && return ;; esac
        n=$((n + 1))
    done
}

path_layer() { # path_layer FILE: the layer of a source file, private header or public header
    case $1 in
    include/ptrain/*.h) folder=$(header_folder "$(basename "$1" .h)") ;;
    cuda/*) folder=cuda ;;
    src/*/*) folder=$(echo "$1" | cut -d/ -f2) ;;
    *) folder="" ;;
    esac
    [ -n "$folder" ] && folder_layer "$folder"
}

report=$(mktemp)
trap 'rm -f "$report"' EXIT
find src cuda include/ptrain -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort | while read -r file; do
    own=$(path_layer "$file")
    if [ -z "$own" ]; then
        echo "0 $file: has no layer (put it in a layer's folder, or give its header a folder in tests/layering.sh)" >>"$report"
        continue
    fi
    grep -o '^#include "[^"]*"' "$file" | sed 's/^#include "//; s/"$//' | while read -r inc; do
        case $inc in
        ptrain/*) layer=$(path_layer "include/$inc") ;;
        *)
            if [ -f "$(dirname "$file")/$inc" ]; then layer=$(path_layer "$(dirname "$file")/$inc")
            elif [ -f "src/$inc" ]; then layer=$(path_layer "src/$inc")
            else layer=""
            fi
            ;;
        esac
        if [ -z "$layer" ]; then
            echo "$own $file: includes $inc, which has no layer (add it to tests/layering.sh)" >>"$report"
        elif [ "$layer" -gt "$own" ]; then
            echo "$own $file: includes $inc (layer $layer above $own)" >>"$report"
        fi
    done
done
# src/ itself holds folders only
loose=$(find src -maxdepth 1 -type f | sort)
expect_eq "src/ has no loose files (each file is in its layer's folder)" "" "$loose"
n=0
for name in $names; do
    bad=$(grep "^$n " "$report" | cut -d' ' -f2-)
    expect_eq "layer $n ($name) includes nothing from above it" "" "$bad"
    n=$((n + 1))
done
done_testing
