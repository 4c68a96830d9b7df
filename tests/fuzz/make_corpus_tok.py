#!/usr/bin/env python3
"""make_corpus_tok.py — the seed corpora of fuzz_tokjson (tests/fuzz/corpus/tokjson/) and
fuzz_tokgguf (tests/fuzz/corpus/tokgguf/): small tokenizers of every kind ptrain reads, each a few
KiB, so the fuzzers start from files that load.

tokjson: a tokenizer.json made by the tokenizers library (a BPE of 300 tokens trained on a
fixed text) with each pipeline ptrain reads: byte-level (GPT-2's ByteLevel regex; a Split regex
then ByteLevel as Llama 3 / Qwen2; Digits; NFC/NFKC normalizers; ignore_merges), SentencePiece-
style (Metaspace first/always/never; Prepend + Replace as Llama 2; Replace + newline Split as
Gemma 4; byte fallback with the Replace/ByteFallback/Fuse/Strip decoders), added tokens with
their flags, a TemplateProcessing post-processor, decoding's clean-up flags, and the
tokenizer classes whose pipeline transformers builds itself (Qwen2Tokenizer, Qwen3_5Tokenizer). A seed is: one byte (bit 0: a
tokenizer_config.json follows), the tokenizer.json text, and with bit 0 a 0x00 byte and the
tokenizer_config.json text.

tokgguf: GGUF files holding only a vocabulary (written with the PyPI gguf package, as llama.cpp
writes them): "gpt2" with several tokenizer.ggml.pre names, "llama" (SentencePiece scores and
types, byte tokens), the gemma2 architecture's, and "gemma4" (merges in the file).
Usage: tests/fuzz/make_corpus_tok.py (writes into the two corpus directories)."""
import json
import os

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = ("The quick brown fox jumps over the lazy dog 1234567890. 机器学习 и русский текст, "
        "émoji 😀 café naïve\n\n\tdef f(x): return x * 2  # code\n") * 4
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")


def train(tok, vocab_size=300, byte_level=False):
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator([TEXT], trainer=trainer)
    return tok


def byte_level(variant):
    tok = Tokenizer(models.BPE(ignore_merges=variant == "ignore_merges"))
    if variant == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    elif variant == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])
        tok.normalizer = normalizers.NFC()
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if variant == "nfkc":
            tok.normalizer = normalizers.NFKC()
    tok.decoder = decoders.ByteLevel()
    train(tok, byte_level=True)
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True), AddedToken("<|im_end|>", special=True)])
    tok.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=True), AddedToken("word", single_word=True)])
    if variant == "ignore_merges":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def sentencepiece(variant):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if variant.startswith("metaspace"):
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=variant.split("-")[1])
        tok.decoder = decoders.Metaspace(prepend_scheme=variant.split("-")[1])
    else:
        if variant == "llama2":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        else:  # gemma4
            tok.normalizer = normalizers.Replace(" ", "▁")
            tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\n]+|[\n]+"), behavior="isolated")
        steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        if variant == "llama2":
            steps.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(steps)
    tok = train(tok)
    # byte fallback needs all 256 byte tokens
    tok.add_tokens([f"<0x{b:02X}>" for b in range(256)])
    tok.add_special_tokens([AddedToken("<start_of_turn>", special=True)])
    return tok


def write_json(name, tok, config=None):
    data = json.dumps(json.loads(tok.to_str()), ensure_ascii=False, separators=(",", ":")).encode()
    out = bytes([1 if config else 0]) + data
    if config:
        out += b"\0" + json.dumps(config).encode()
    with open(os.path.join(HERE, "corpus", "tokjson", name), "wb") as f:
        f.write(out)


def write_gguf(name, arch, model, tokens, types, scores=None, merges=None, pre=None, extra=None):
    path = os.path.join(HERE, "corpus", "tokgguf", name)
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges is not None:
        w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for k, v in (extra or {}).items():
        w.add_bool(k, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def vocab_of(tok):
    v = tok.get_vocab()
    return [t for t, _ in sorted(v.items(), key=lambda x: x[1])]


def main():
    os.makedirs(os.path.join(HERE, "corpus", "tokjson"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "corpus", "tokgguf"), exist_ok=True)
    configs = {
        "llama3": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{{ messages[0]['content'] }}"},
        "nfkc": {"tokenizer_class": "Qwen3_5Tokenizer", "add_prefix_space": True},
        "digits": {"tokenizer_class": "Qwen2Tokenizer"},
        "gpt2": {"clean_up_tokenization_spaces": True,
                 "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True},
    }
    for v in ("gpt2", "llama3", "digits", "nfkc", "ignore_merges"):
        write_json(f"bytelevel-{v}", byte_level(v), configs.get(v))
    for v in ("metaspace-first", "metaspace-always", "metaspace-never", "llama2", "gemma4"):
        write_json(f"spm-{v}", sentencepiece(v), {"bos_token": "<s>"} if v == "llama2" else None)

    # GGUF vocabularies: byte-level from the llama3-style tokenizer, SentencePiece from the llama2 one
    bl = byte_level("llama3")
    tokens = vocab_of(bl)
    merges = json.loads(bl.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [3 if t.startswith("<") and t.endswith(">") and len(t) > 2 else 1 for t in tokens]
    for pre in ("gpt-2", "llama-bpe", "qwen2", "qwen35", "tekken", "deepseek-v3", "falcon", "command-r"):
        write_gguf(f"gpt2-{pre}", "llama", "gpt2", tokens, types, merges=merges, pre=pre)
    sp = sentencepiece("llama2")
    tokens = vocab_of(sp)
    types = [6 if t.startswith("<0x") else 3 if t in ("<unk>", "<s>", "</s>", "<start_of_turn>") else 1 for t in tokens]
    types[0] = 2
    scores = [-float(i) for i in range(len(tokens))]
    write_gguf("llama-spm", "llama", "llama", tokens, types, scores=scores)
    write_gguf("llama-spm-noprefix", "llama", "llama", tokens, types, scores=scores,
               extra={"tokenizer.ggml.add_space_prefix": False})
    write_gguf("gemma2-spm", "gemma2", "llama", tokens, types, scores=scores)
    g4 = sentencepiece("gemma4")
    tokens = vocab_of(g4)
    merges = json.loads(g4.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [6 if t.startswith("<0x") else 3 if t in ("<unk>", "<s>", "</s>", "<start_of_turn>") else 1 for t in tokens]
    write_gguf("gemma4", "gemma4", "gemma4", tokens, types, scores=[0.0] * len(tokens), merges=merges)
    for d in ("tokjson", "tokgguf"):
        files = sorted(os.listdir(os.path.join(HERE, "corpus", d)))
        sizes = [os.path.getsize(os.path.join(HERE, "corpus", d, f)) for f in files]
        print(f"corpus/{d}: {len(files)} files, {min(sizes)}-{max(sizes)} bytes")


if __name__ == "__main__":
    main()
