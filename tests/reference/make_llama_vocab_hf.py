#!/usr/bin/env python3
"""make_llama_vocab_hf.py — the Hugging Face side of test_llama_vocab: for every vocabulary with
test texts in llama.cpp's models/ folder (share/scripts/fetch-llama-vocabs.sh puts them in
$PTRAIN_LLAMA_VOCABS, else ~/.cache/ptrain/llama-vocabs), a model directory with its
tokenizer.json, and the ids transformers' `tokenizer(text, add_special_tokens=False)` gives on
that directory for llama.cpp's texts and for tests/data/tokenizer/hf_side_texts.json.

The directory is made
  - by transformers' own GGUF conversion (AutoTokenizer.from_pretrained(dir, gguf_file=...),
    then save_pretrained) where transformers converts the vocabulary: gpt-2, llama-bpe, qwen2,
    qwen35, starcoder, phi-3, llama-spm, deepseek-coder, deepseek-llm, falcon;
  - by the tokenizers library from the GGUF's tokens, merges and token types where it does not
    (its error for each is printed), with the pipeline of the model's published tokenizer.json:
    command-r (NFC, digits one by one, ByteLevel), refact (digits one by one, ByteLevel), mpt
    (GPT-NeoX: NFC, ByteLevel), gemma-4 (SentencePiece-style BPE over "▁"-spelled tokens with byte
    fallback: Replace(" ", "▁") normalizer, newline runs split apart, the Replace/ByteFallback/Fuse
    decoder; a reconstruction, the Hub's own Gemma 4 tokenizer.json is not on PyPI).
Either way the ids are those of the saved directory loaded back with AutoTokenizer, as a user
loads it; how many of llama.cpp's texts get the .out ids is printed (a conversion may differ
from the original model there: transformers' llama-spm conversion drops the dummy prefix before
a leading space; that is the conversion's, and the test compares ptrain with transformers on
the same file).

Beside transformers' ids, ids.json has the tokenizers library's on the tokenizer.json alone
(Tokenizer.from_file(...).encode(text, add_special_tokens=False)): transformers 5 rebuilds the
pipeline of a tokenizer_class with its own __init__ (Qwen2Tokenizer: NFC and Qwen2's split regex,
whatever the file says), so the two differ where the file's pipeline is not the class's (the
qwen35 directory: the file has no normalizer).

Writes DIR/hf/NAME/{tokenizer.json, tokenizer_config.json, ..., ids.json}; ids.json holds
{"source", "tokenizer_class", "texts", "ids", "file_ids", "out_equal", "out_texts"}. One Python
process, about 5 minutes on 2 cores (a directory already there is reused; --rebuild remakes it).
Usage: make_llama_vocab_hf.py [--rebuild] [DIR]
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"
BUILT = ("command-r", "refact", "mpt", "gemma-4")
SKIPPED = ("bert-bge",)  # WordPiece, an encoder's: ptrain refuses it


def llama_texts(inp):
    with open(inp, encoding="utf-8", newline="") as f:
        data = f.read()
    texts = data.split(SEP)
    if texts and texts[-1] == "":  # the file ends with a separator
        texts.pop()
    return texts


def out_ids(out):
    with open(out, encoding="utf-8") as f:
        return [[int(x) for x in line.split()] for line in f.read().split("\n")]


def gguf_vocab(path):
    import gguf

    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields.get(key)
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data] if f else []

    def ints(key):
        f = r.fields.get(key)
        return [int(f.parts[i][0]) for i in f.data] if f else []

    def scalar(key):
        f = r.fields.get(key)
        return int(f.parts[f.data[0]][0]) if f else None

    return {
        "tokens": strings("tokenizer.ggml.tokens"),
        "merges": strings("tokenizer.ggml.merges"),
        "types": ints("tokenizer.ggml.token_type"),
        "bos": scalar("tokenizer.ggml.bos_token_id"),
        "eos": scalar("tokenizer.ggml.eos_token_id"),
        "unk": scalar("tokenizer.ggml.unknown_token_id"),
    }


def build(name, path, out_dir):
    """The tokenizer.json of a vocabulary transformers does not convert, with the tokenizers library."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    v = gguf_vocab(path)
    vocab = {}
    for i, t in enumerate(v["tokens"]):
        vocab.setdefault(t, i)  # the first id of a spelling
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    if name == "gemma-4":
        unk = v["tokens"][v["unk"]] if v["unk"] is not None else None
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\n]+|[\n]+"), behavior="isolated")
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    else:
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        if name in ("command-r", "refact"):
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tok.pre_tokenizer = byte_level
        if name in ("command-r", "mpt"):
            tok.normalizer = normalizers.NFC()
        tok.decoder = decoders.ByteLevel()
    added = []
    for i, ty in enumerate(v["types"]):
        if ty in (3, 4):  # control: special; user-defined: plain added token
            added.append((i, AddedToken(v["tokens"][i], special=ty == 3, normalized=ty == 4)))
    for _, a in sorted(added, key=lambda x: x[0]):
        tok.add_tokens([a]) if not a.special else tok.add_special_tokens([a])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    for key, k in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unk")):
        if v[k] is not None:
            cfg[key] = v["tokens"][v[k]]
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def main():
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    args = [a for a in sys.argv[1:] if a != "--rebuild"]
    rebuild = len(args) < len(sys.argv) - 1
    src = args[0] if args else os.environ.get(
        "PTRAIN_LLAMA_VOCABS", os.path.expanduser("~/.cache/ptrain/llama-vocabs"))
    with open(os.path.join(HERE, "..", "data", "tokenizer", "hf_side_texts.json"), encoding="utf-8") as f:
        own = json.load(f)["texts"]
    names = sorted(f[len("ggml-vocab-"):-len(".gguf.inp")] for f in os.listdir(src)
                   if f.startswith("ggml-vocab-") and f.endswith(".gguf.inp"))
    for name in names:
        if name in SKIPPED:
            continue
        t0 = time.time()
        gguf_name = f"ggml-vocab-{name}.gguf"
        path = os.path.join(src, gguf_name)
        out_dir = os.path.join(src, "hf", name)
        if not rebuild and os.path.exists(os.path.join(out_dir, "tokenizer.json")):
            with open(os.path.join(out_dir, "ids.json"), encoding="utf-8") as f:
                source = json.load(f)["source"]
        elif name in BUILT:
            source = "the tokenizers library (transformers does not convert it)"
            build(name, path, out_dir)
        else:
            source = "transformers' GGUF conversion"
            AutoTokenizer.from_pretrained(src, gguf_file=gguf_name).save_pretrained(out_dir)
        tok = AutoTokenizer.from_pretrained(out_dir)
        ltexts = llama_texts(path + ".inp")
        want = out_ids(path + ".out")
        texts = ltexts + own
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        file_tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
        file_ids = [file_tok.encode(t, add_special_tokens=False).ids for t in texts]
        differ = sum(a != b for a, b in zip(ids, file_ids))
        equal = sum(ids[i] == want[i] for i in range(len(ltexts)) if i < len(want))
        with open(os.path.join(out_dir, "ids.json"), "w", encoding="utf-8") as f:
            json.dump({"source": source, "tokenizer_class": type(tok).__name__, "texts": texts, "ids": ids,
                       "file_ids": file_ids, "out_equal": equal, "out_texts": len(ltexts)}, f, ensure_ascii=False)
        print(f"{name}: {source}; {equal} of {len(ltexts)} llama.cpp texts give the .out ids; "
              f"{len(texts)} texts, {differ} where {type(tok).__name__} differs from the file alone "
              f"({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
