#!/usr/bin/env python3
"""make_class_goldens.py — transformers 5 builds the pipeline of a tokenizer_class that has an
__init__ of its own itself, from the file's vocabulary and merges only: for test_tokenizer's
test_class_pipeline, the qwen2-mini tokenizer.json of tests/data/tokenizer with its pipeline
changed (no normalizer, GPT-2's ByteLevel regex instead of the Split) under three
tokenizer_config.json texts: no class (the file's pipeline), Qwen2Tokenizer (NFC and Qwen2's
split) and Qwen3_5Tokenizer (NFC and Qwen3.5's split, marks kept with letters), and the ids
transformers' tokenizer(text, add_special_tokens=False) gives for texts with combining marks,
digits and contractions. Writes tests/data/tokenizer/class_goldens.json:
{"patch", "texts", "cases": [{"config", "ids"}]}. Usage: tests/reference/make_class_goldens.py"""
import json
import os
import tempfile

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tokenizer")
PATCH = {
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
}
TEXTS = [
    "cafe\u0301 re\u0301sume\u0301 na\u0308ive",  # NFD: NFC composes them
    "x\u0308y \u0915\u093f\u0924\u093e\u092c",  # a mark NFC cannot compose; Devanagari vowel signs
    "It's 12345 apples, don't you think?",
    "  spaces\n\nand lines  ",
]


def main():
    src = os.path.join(DATA, "qwen2-mini")
    base = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    base.update(PATCH)
    own = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(base, f, ensure_ascii=False)
        for extra in ({}, {"tokenizer_class": "Qwen2Tokenizer"}, {"tokenizer_class": "Qwen3_5Tokenizer"}):
            with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(dict(own, **extra), f)
            tok = AutoTokenizer.from_pretrained(tmp)
            cases.append({"config": extra, "ids": [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]})
            print(extra, type(tok).__name__, cases[-1]["ids"][0])
    with open(os.path.join(DATA, "class_goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"patch": PATCH, "texts": TEXTS, "cases": cases}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
