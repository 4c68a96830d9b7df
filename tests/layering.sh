#!/bin/sh
# layering.sh — the source folders only look down: a file may include headers of its own layer and
# of the layers below it, never of one above. The layers, from the bottom:
#
#    0 base      src/*.c utilities (error, log, util, jsonfile, quant, nf4, backend, arena,
#                blas_kernel, sample, dist, signals), the backends (src/cpu, cuda)
#    1 model     src/model, src/tokenizer, src/hfcache.c: model files, families, weights, tokenizers
#    2 config    src/config*.c: config.yaml, its keys and checks
#    3 io        src/io: safe file writing, the output_dir lock, GGUF/safetensors/HDF5 writers,
#                the checkpoint file format
#    4 adapter   src/adapter: LoRA adapters and their files (adapter.h5, PEFT, adapter.gguf)
#    5 forward   src/forward: the one forward pass (generation, evaluation, training), loss head
#    6 data      src/data: datasets, templates, batches
#    7 export    src/export: merged models, Ollama
#    8 hub       src/hub: publishing to the Hugging Face Hub
#    9 watch     src/watch: watching a run: TensorBoard event files, metrics.jsonl read back, the
#                picture of a run, the heartbeat, `ptrain status` and `ptrain plot`
#   10 train     src/train: the training loop, its checkpoints, optimizer, progress
#   11 commands  src/main.c, src/generate.c, src/inspect.c
#
# A public header (include/ptrain/NAME.h) belongs to the layer of the code that implements it (the
# table below); a private header to its folder's. A header missing from the table fails the check,
# so a new one must be given its layer here. Prints one TAP line per layer and every offending
# include as "file: includes header (layer N above M)".
. "${PTRAIN_SRCDIR:?set PTRAIN_SRCDIR to the source tree}/tests/tap.sh"
cd "$PTRAIN_SRCDIR" || exit 1

header_layer() { # header_layer NAME (without .h): prints its layer, or nothing when unknown
    case $1 in
    error | util | log | jsonfile | quant | quant_blocks | nf4 | backend | arena | blas_kernel | sample | dist | signals) echo 0 ;;
    arch | model | gguf | gguf_methods | hf_model | safetensors | rope | tokenizer | model_io | hfcache | weight_check | model_share) echo 1 ;;
    config | settings | repo_id) echo 2 ;;
    safefs | filewrite | dirlock | gguf_write | st_write | checkpoint) echo 3 ;;
    adapter | peft) echo 4 ;;
    forward) echo 5 ;;
    dataset | dataset_cache) echo 6 ;;
    export | hf_meta | gguf_meta) echo 7 ;;
    hub) echo 8 ;;
    tfevents | runlog | plot | heartbeat | watch) echo 9 ;;
    train | step | lora | optimizer | gradsync | memplan | progress | resume | schedule | config_options) echo 10 ;;
    generate | inspect) echo 11 ;;
    esac
}

path_layer() { # path_layer FILE: the layer of a source file or private header
    case $1 in
    src/cpu/* | cuda/*) echo 0 ;;
    src/model/* | src/tokenizer/* | src/hfcache.c) echo 1 ;;
    src/config*) echo 2 ;;
    src/io/*) echo 3 ;;
    src/adapter/*) echo 4 ;;
    src/forward/*) echo 5 ;;
    src/data/*) echo 6 ;;
    src/export/*) echo 7 ;;
    src/hub/*) echo 8 ;;
    src/watch/*) echo 9 ;;
    src/train/*) echo 10 ;;
    src/main.c | src/generate.c | src/inspect.c) echo 11 ;;
    src/*.c) echo 0 ;;
    include/ptrain/*.h) header_layer "$(basename "$1" .h)" ;;
    esac
}

names="base model config io adapter forward data export hub watch train commands"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
find src cuda include/ptrain -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort | while read -r file; do
    own=$(path_layer "$file")
    if [ -z "$own" ]; then
        echo "0 $file: has no layer (add its folder or header to tests/layering.sh)" >>"$report"
        continue
    fi
    grep -o '^#include "[^"]*"' "$file" | sed 's/^#include "//; s/"$//' | while read -r inc; do
        case $inc in
        ptrain/*) layer=$(header_layer "$(basename "$inc" .h)") ;;
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
n=0
for name in $names; do
    bad=$(grep "^$n " "$report" | cut -d' ' -f2-)
    expect_eq "layer $n ($name) includes nothing from above it" "" "$bad"
    n=$((n + 1))
done
done_testing
