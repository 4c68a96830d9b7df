#!/bin/sh
# make_corpus_dataset.sh — the seed corpus of fuzz_dataset (tests/fuzz/corpus/dataset/): the
# committed dataset files of tests/data/datasets, each behind the 3-byte header fuzz_dataset.c
# reads (template, assistant_only_loss, .jsonl, packing, eval split; max_seq_length; shuffle,
# num_samples, filter, rename, text field), chosen so the seeds cover every format, template and
# row transform. Re-run after a change of the header:  tests/fuzz/make_corpus_dataset.sh
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
data=$src/tests/data/datasets
out=$src/tests/fuzz/corpus/dataset
mkdir -p "$out"

# seed NAME FILE BYTE0 BYTE1 BYTE2 (bytes as octal escapes)
seed() {
    { printf "\\$3\\$4\\$5"; cat "$data/$2"; } >"$out/$1"
}
# byte 0: template (0 chatml, 1 smollm2, 2 llama-3, 3 alpaca, 4 gemma, 5 mistral, 6 the tokenizer's
# own, 7 unknown) | assistant_only (010 false, 020 true) | 040 .jsonl | 0100 packing | 0200 eval
# byte 1: 0200 max_seq_length 2048, else 1 + the low 6 bits | 0100 template mistral-v3
# byte 2: 01 shuffle | 02 num_samples | 04 filter lang=en | 010 rename | 020 text field "content" | 040 rows.csv
seed messages-smollm2 messages.jsonl 061 200 000
seed sharegpt-chatml sharegpt.json 000 200 000
seed alpaca-wrapped alpaca.json 023 200 000
seed alpaca-system-gemma alpaca-system.jsonl 044 200 000
seed llama-trim-short llama-trim.jsonl 062 007 000
seed text-content text.jsonl 040 200 020
seed renamed-mistral-packed renamed.jsonl 145 200 017
seed bad-chat-own bad-chat.jsonl 046 200 000
seed lines-in-eval-packed lines-in.json 300 200 000
seed array-items array-items.json 010 200 000
seed broken-array broken-array.json 000 200 000
seed bad-rows bad.jsonl 043 200 000
seed wrapped-bad wrapped-bad.json 000 200 000
seed wrapped-train wrapped-train.json 000 010 000
seed messages-mistral-v3 messages.jsonl 060 300 000
seed bad-sharegpt-unknown bad-sharegpt.jsonl 047 200 000
seed csv-alpaca csv/alpaca.csv 003 200 040
seed csv-quotes-types csv/types.csv 000 200 042
# KTO's rows (read a second time as unpaired: they mention "label"): text and conversational
# prompt / completion / label rows, and pairs beside a label column
{ printf '\040\200\000'; cat "$src/tests/data/kto/text.jsonl"; } >"$out/kto-text"
{ printf '\041\200\000'; cat "$src/tests/data/kto/chat.jsonl"; } >"$out/kto-chat"
{ printf '\040\010\000'; sed 's/}$/, "label": true}/' "$src/tests/data/kto/pairs.jsonl"; } >"$out/kto-pairs-short"
# reward modelling's pairs (read a second time as whole sequences: they mention "chosen"): text and
# turns, long enough to keep, and short enough that some pairs are dropped
{ printf '\040\200\000'; cat "$src/tests/data/dpo/pairs.jsonl"; } >"$out/reward-pairs"
{ printf '\040\020\000'; cat "$src/tests/data/dpo/pairs.jsonl"; } >"$out/reward-pairs-short"
# GRPO's prompt rows (read a third time as prompts: they mention "prompt"): text and turns beside an
# answer column, the turns with a max_prompt_length of 3 (the options byte's 0x20 and 0x02)
{ printf '\040\200\000'; cat "$src/tests/data/grpo/text.jsonl"; } >"$out/grpo-text"
{ printf '\041\042\000'; cat "$src/tests/data/grpo/chat.jsonl"; } >"$out/grpo-chat"
