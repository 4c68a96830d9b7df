#!/usr/bin/env python3
"""make_cleanup_goldens.py — what transformers 5's tokenizer.decode gives under the clean-up flags of
tokenizer_config.json, for test_tokenizer's test_decode_clean_up: the SmolLM2 tokenizer.json of
tests/data/tokenizer/smollm2 (a BPE model) with three tokenizer_config.json texts: the file's own
(no flag), clean_up_tokenization_spaces true (transformers ignores it for a BPE model and warns),
and with clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output true as well (the
" ." / " n't" / " 'm" ... replacements of clean_up_tokenization). Writes
tests/data/tokenizer/cleanup_goldens.json: {"texts", "cases": [{"config", "ids", "decoded"}]}.
Usage: tests/reference/make_cleanup_goldens.py"""
import json
import os
import shutil
import tempfile

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tokenizer")
TEXTS = [
    "Hello , world ! Isn 't it ? I 'm here . It 's fine , we 've seen they 're ' quoted ' .",
    "No clean-up here: a.b, c!d?e",
    "  spaces .. before  ,  marks !! and don 't",
    " ' ' '",
]


def main():
    src = os.path.join(DATA, "smollm2")
    base = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    configs = [
        {},
        {"clean_up_tokenization_spaces": True},
        {"clean_up_tokenization_spaces": True,
         "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True},
    ]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(src, "tokenizer.json"), tmp)
        for extra in configs:
            cfg = dict(base, **extra)
            with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            tok = AutoTokenizer.from_pretrained(tmp)
            ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
            cases.append({"config": extra, "ids": ids, "decoded": [tok.decode(i) for i in ids]})
    with open(os.path.join(DATA, "cleanup_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": TEXTS, "cases": cases}, f, ensure_ascii=False, indent=1)
    for c in cases:
        print(c["config"], c["decoded"][0])


if __name__ == "__main__":
    main()
