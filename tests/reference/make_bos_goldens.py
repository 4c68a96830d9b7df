#!/usr/bin/env python3
"""make_bos_goldens.py — what transformers' tokenizer(text) (encode with add_special_tokens=True)
puts around plain text, for the tokenizers under tests/data/tokenizer, written to
bos_goldens.json for test_tokenizer.c (tokenizer_encode_text, tokenizer_adds_bos).

Forms: each tokenizer.json directory as it is; llama3-mini with the post-processor of Meta's
Llama 3 tokenizer.json (ByteLevel, then TemplateProcessing "<|begin_of_text|> $A"); spm/ with
that kind of post-processor ("<s> $A"); the SentencePiece GGUFs spm/vocab.gguf and
spm/gemma.gguf (transformers' GGUF loader, with the dummy prefix "▁" as the model's SentencePiece
and llama.cpp put it: before every text between special tokens); and llama3-mini/bos.gguf, written here: llama3-mini's vocabulary as llama.cpp
writes a Llama 3 GGUF (tokenizer.ggml.model gpt2, pre llama-bpe, add_bos_token true). With
--models DIR, also the files test_tokenizer.c looks for there when present: SmolLM2's Q4_1 GGUF
(add_bos_token false), Mistral's V1 vocabulary GGUF and the real Llama 3 tokenizer.json with
Meta's post-processor. Each GGUF is loaded alone in a temporary directory (a tokenizer.json
beside it would be loaded instead).

For each form and text: "hf", the ids transformers gives; "adds_bos", whether it put a bos
first; "ids", what ptrain must give: "hf", except that where the text's own ids already start
with bos, transformers' second bos is dropped (ptrain adds bos once; TRL's SFTTrainer avoided
the double bos by turning add_special_tokens off for such text).

Written with transformers 5.24.0, tokenizers 0.23.3, gguf 0.19.0 (PyPI). Re-run with:
  /tmp/refenv/bin/python tests/reference/make_bos_goldens.py [--models /tmp/models]
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import warnings

import gguf
import tokenizers
import transformers
from transformers import AutoTokenizer

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_spm_goldens  # noqa: E402  (the dummy prefix of SentencePiece GGUFs)

TEXTS = [
    "Hello world",
    " Hello  world ",
    "",
    "naïve café, 東京 2024!",
    "<s> Hello",
    "<s>",
    "<bos>Hi",
    "<|begin_of_text|>Hi",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<s> [INST] hi [/INST] ok</s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>user\nHi<|im_end|>\n",
    "x<s>y",
]


def template_post(bos, bos_id):
    """A TemplateProcessing that puts bos before the text, as Llama 2/3, Mistral and Gemma have."""
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


def meta_llama3_post(bos_id):
    """Meta's Llama 3 post-processor: ByteLevel, then bos before the text."""
    return {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        template_post("<|begin_of_text|>", bos_id)]}


def load_json_form(path, patch, config):
    """transformers' tokenizer from a tokenizer.json with top-level keys replaced by patch."""
    tmp = tempfile.mkdtemp()
    tok = json.load(open(path, encoding="utf-8"))
    tok.update(copy.deepcopy(patch or {}))
    json.dump(tok, open(os.path.join(tmp, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    if config is not None:
        json.dump(config, open(os.path.join(tmp, "tokenizer_config.json"), "w"))
    return AutoTokenizer.from_pretrained(tmp)


def load_gguf_form(path):
    """transformers' GGUF loader; for a SentencePiece vocabulary with the dummy prefix as the model
    itself (and llama.cpp) puts it (make_spm_goldens.with_sentencepiece_prefix)."""
    tmp = tempfile.mkdtemp()
    shutil.copy(path, tmp)
    tok = AutoTokenizer.from_pretrained(tmp, gguf_file=os.path.basename(path))
    if make_spm_goldens.gguf_adds_prefix(path):
        tok._tokenizer = make_spm_goldens.with_sentencepiece_prefix(tok.backend_tokenizer)
    return tok


def write_llama3_gguf(path):
    """llama3-mini's vocabulary as llama.cpp writes a Llama 3 GGUF, add_bos_token true."""
    src = json.load(open(os.path.join(HERE, "llama3-mini", "tokenizer.json"), encoding="utf-8"))
    vocab = dict(src["model"]["vocab"])
    vocab.update({a["content"]: a["id"] for a in src["added_tokens"]})
    tokens = [None] * (max(vocab.values()) + 1)
    for text, i in vocab.items():
        tokens[i] = text
    special = {a["id"] for a in src["added_tokens"]}
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in special else 1 for i in range(len(tokens))])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in src["model"]["merges"]])
    w.add_bos_token_id(vocab["<|begin_of_text|>"])
    w.add_eos_token_id(vocab["<|eot_id|>"])
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def encode_form(tok):
    """hf ids, whether bos was added, and ptrain's expected ids for each text."""
    bos = tok.bos_token_id
    hf, ids, added = [], [], []
    for text in TEXTS:
        with_special = tok.encode(text)
        plain = tok.encode(text, add_special_tokens=False)
        adds = bos is not None and with_special[:1] == [bos] and with_special[1:] == plain
        hf.append(with_special)
        ids.append(plain if adds and plain[:1] == [bos] else with_special)
        added.append(adds)
    if len(set(added)) != 1:
        raise SystemExit(f"bos added to some texts only: {added}")
    return {"bos": -1 if bos is None else bos, "adds_bos": added[0], "hf": hf, "ids": ids}


def forms(models):
    """(name, where the C test finds it, loader) for each form."""
    llama3_cfg = json.load(open(os.path.join(HERE, "llama3-mini", "tokenizer_config.json")))
    spm_cfg = json.load(open(os.path.join(HERE, "spm", "tokenizer_config.json")))
    llama3 = json.load(open(os.path.join(HERE, "llama3-mini", "tokenizer.json"), encoding="utf-8"))
    bos_id = next(a["id"] for a in llama3["added_tokens"] if a["content"] == "<|begin_of_text|>")
    out = []
    for d in ("smollm2", "llama3-mini", "qwen2-mini", "gpt2-mini", "spm"):
        out.append(({"name": d, "json": f"{d}/tokenizer.json"},
                    lambda d=d: AutoTokenizer.from_pretrained(os.path.join(HERE, d))))
    patch = {"post_processor": meta_llama3_post(bos_id)}
    out.append(({"name": "llama3-mini, Meta's post-processor", "json": "llama3-mini/tokenizer.json", "patch": patch,
                 "config": llama3_cfg},
                lambda: load_json_form(os.path.join(HERE, "llama3-mini", "tokenizer.json"), patch, llama3_cfg)))
    spm_patch = {"post_processor": template_post("<s>", 1)}
    out.append(({"name": "spm, <s> $A post-processor", "json": "spm/tokenizer.json", "patch": spm_patch,
                 "config": spm_cfg},
                lambda: load_json_form(os.path.join(HERE, "spm", "tokenizer.json"), spm_patch, spm_cfg)))
    for rel in ("spm/vocab.gguf", "spm/gemma.gguf", "llama3-mini/bos.gguf"):
        out.append(({"name": rel, "gguf": rel}, lambda rel=rel: load_gguf_form(os.path.join(HERE, rel))))
    if not models:
        return out
    real = [("SmolLM2-135M-Instruct.Q4_1.gguf", None), ("mistral-v1-vocab.gguf", None),
            ("llama3-tokenizer.json", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})]
    for name, cfg in real:
        path = os.path.join(models, name)
        if not os.path.exists(path):
            print(f"{path}: not there, left out")
        elif cfg is None:
            out.append(({"name": name, "model_gguf": name}, lambda p=path: load_gguf_form(p)))
        else:
            p = {"post_processor": meta_llama3_post(128000)}
            out.append(({"name": name + ", Meta's post-processor", "model_json": name, "patch": p, "config": cfg},
                        lambda path=path, p=p, cfg=cfg: load_json_form(path, p, cfg)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help="also the real tokenizers in this directory, when there")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    write_llama3_gguf(os.path.join(HERE, "llama3-mini", "bos.gguf"))
    result = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
              "texts": TEXTS, "forms": []}
    for form, load in forms(args.models):
        form.update(encode_form(load()))
        result["forms"].append(form)
        print(f"{form['name']}: bos {form['bos']}, adds bos {form['adds_bos']}")
    with open(os.path.join(HERE, "bos_goldens.json"), "w", encoding="utf-8") as f:  # a line per form
        forms_text = ",\n  ".join(json.dumps(form, ensure_ascii=False) for form in result.pop("forms"))
        f.write(json.dumps(result, ensure_ascii=False, indent=1)[:-2] + ',\n "forms": [\n  ' + forms_text + "\n ]\n}\n")


if __name__ == "__main__":
    main()
