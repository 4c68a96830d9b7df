#!/usr/bin/env python3
"""make_spmmodel_goldens.py — parity data for SentencePiece tokenizer.model files and for the
NFC/NFD/NFKC/NFKD and Precompiled normalizers of tokenizer.json.

Everything under tests/data/tokenizer/spm-model/ is written by this script, with Hugging Face
`transformers` (AutoTokenizer on a model directory that has a tokenizer.model and no
tokenizer.json) and `tokenizers` as the reference: the C tokenizer (src/tokenizer/) must match
them id for id. Plus the seed corpus of the fuzz target tests/fuzz/fuzz_spmmodel.c.

Exact commands (only PyPI is needed):

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install tokenizers transformers gguf numpy sentencepiece protobuf jinja2
    /tmp/refenv/bin/python tests/reference/make_spmmodel_goldens.py --models /tmp/models

(Written with tokenizers 0.23.3, transformers 5.25.0, sentencepiece 0.2.3, protobuf 7.36.2.)

How transformers 5.25 converts a directory with a tokenizer.model and no tokenizer.json depends
on tokenizer_config.json's tokenizer_class alone (config.json's model_type does not count):
  LlamaTokenizer / LlamaTokenizerFast: the pieces as a BPE vocabulary, merges of every piece
      split in two pieces ranked by the merged piece's id (then the left half's length), byte
      fallback, no unknown token, no normalizer (a precompiled_charsmap is ignored), Metaspace
      (prepend "first"; "always" with legacy true; "never" with add_prefix_space false), control
      and user-defined pieces as added tokens.
  none, TokenizersBackend, PreTrainedTokenizerFast: the model's own settings (SpmConverter.
      build_tokenizer_from_spm_proto): merges of normal pieces ranked by score, the unknown piece,
      byte fallback as trained, a normalizer of the precompiled_charsmap (Precompiled), the
      extra-whitespace removal and "▁" escaping, Metaspace only with add_dummy_prefix (prepend
      "always" unless legacy is false), user-defined pieces split off whole.

The models, trained here with SentencePiece (BPE) on make_tokenizer_goldens.make_corpus text:
  llama.model  2,000 pieces, identity normalization, byte fallback, dummy prefix, digits split,
               no extra-whitespace removal (as Llama 2 and Mistral), control pieces
               <start_of_turn> <end_of_turn> <|im_start|> <|im_end|>, user-defined <think> </think>.
  nfkc.model   1,500 pieces, normalization_rule_name nmt_nfkc (a precompiled charsmap), extra
               whitespace removed, no byte fallback, control <|im_start|> <|im_end|>, user-defined
               <think> </think>.

What it writes (under tests/data/tokenizer/spm-model/):
  llama.model, nfkc.model   the two models.
  configs.json  {name: {"model": file, "config": tokenizer_config.json or null, "vocab_size",
                "bos", "eos", "adds_bos", "adds_eos"}}: each directory the C test builds (the
                model as tokenizer.model, the config beside it unless null) and what transformers
                says of it. "MODELS/..." models are the real Mistral V1 one (below).
  tokenizer.json  the TokenizersBackend conversion of nfkc.model with its Precompiled normalizer
                replaced by NFKC (the charsmap is in nfkc.model; not stored twice).
  variants.json  {name: normalizer} to put into tokenizer.json: json-nfc, json-nfd, json-nfkd, and
                json-precompiled, whose "precompiled_charsmap" value "nfkc.model" stands for the
                base64 of that model's charsmap (the C test puts it in).
  extra.json    texts beyond the corpus (special tokens, byte fallback, spaces, as ../spm/extra.json has, and normalization
                cases: compatibility characters, combining sequences, long grapheme clusters,
                odd whitespace).
  ids.txt       golden ids of configuration "llama", special tokens parsed: one line per text
                (the lines of ../corpus.txt, the 8-line chunks as make_tokenizer_goldens.py makes
                them, then extra.json), each id two characters of A-Z a-z 0-9 - _, high 6 bits
                first.
  variants.txt  the low 24 bits of the 32-bit FNV-1a hash (6 hex digits) of the ids (as
                little-endian int32) of every text, one column per configuration named in the
                first line: each name of configs.json (special tokens parsed), NAME/nospecial
                (not parsed, for some), dec-NAME (of the decoded text, for some), json-nfkc (tokenizer.json)
                and the json-* variants.
Not committed: Mistral's V1 tokenizer.model (32,000 pieces, Mistral-7B v0.1's) from the PyPI
package mistral_common 1.12.0 (data/tokenizer.model.v1), copied to
MODELS/mistral-v1-tokenizer.model, where test_spm_model.c finds it (it skips that check, saying
so, when it is not there); its columns are mistral-v1-model (the tokenizer_config.json of
Mistral-7B-v0.1's repository: LlamaTokenizer, legacy false), mistral-v1-model-legacy (legacy
true) and mistral-v1-model-generic (no tokenizer_config.json).
And tests/fuzz/corpus/spmmodel/: small models and charsmaps after the fuzz target's selector byte.
It also checks (and fails, printing the new one, when it is not) the table of code points that
tokenizers' Unicode normalization does not know (unorm_inert[] in src/tokenizer/normalize.c).
"""

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as sp_pb2
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_spm_goldens as spm_goldens  # noqa: E402  (the hashes and the writers of ids.txt, variants.txt)
import make_tokenizer_goldens as corpus_maker  # noqa: E402  (the corpus and its chunks)

DATA = os.path.join(HERE, "..", "data", "tokenizer")
OUT = os.path.join(DATA, "spm-model")
FUZZ = os.path.join(HERE, "..", "fuzz", "corpus", "spmmodel")
SPACE = "\u2581"

# the texts of ../spm/extra.json's kind: special tokens, byte fallback, "▁" in the input, spaces
EXTRA = [
    "<s>", "</s>", "<unk>", "<s> hi</s>", " <s>  x", "<s><s></s>", "x<unk>y", "<start_of_turn>user\nHi<end_of_turn>\n",
    "<|im_start|>system\nok<|im_end|>", "[INST] hi [/INST]", " [INST] hi [/INST] ok</s>", "<0x41><0xFF>", SPACE,
    SPACE * 3 + "x", "x" + SPACE, "a" + SPACE + "b c", " " + SPACE + " ", "<think>x</think>", "<think> </think>",
    "QLoRA QLoRA", " QLoRA", "a QLoRA", "<extra>x<pad>", "\u00a0x", "x\u3000y", "\t\tx", " ", "  ", "   ", "\n", "\n\n",
    " \n ", "\r\n", "\U0001f600\U0001f600", "\U000e0001", "\ufffd", "\x00", "\x01\x02", "\U0010ffff",
    "\u6f22\u5b57\u304b\u306a", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "12345678901234567890",
    "aaaa" * 40, "ab" * 300, "    def f(x):\n        return x\n", "hello    world", "<s>" * 5, "word<|im_end|>",
]

NORM_EXTRA = [
    "\uff21\uff22\uff23\uff11\uff12\uff13", "\ufb01\ufb02 \ufb03", "\u2460\u2461\u2462", "\u337b", "\u216b", "x\u00b2\u00b3",
    "\u00bd \u00bc", "\uff76\uff80\uff76\uff85", "\uac00\uac01", "\u1100\u1161\u11a8", "e\u0301\u0302", "A\u030a", "\u212b",
    "\u00c5", "\u01c5", "\u1e9b\u0323", "\u0958", "\u0915\u094d\u200d\u0937", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea", "a\u200bb", "soft\u00adhyphen", "a\x00b", "\x07bell\x1b[0m", "\t tab\t",
    "\u3000full\u3000space", "\u00a0nbsp\u00a0", "  leading", "trailing  ", "a  b   c    d", " \n ", "\r\n\r\n", "x\u2028y",
    "\ufeffbom", "\uff9e", "\u30ac\u3099", "\uff71\uff9e", "\U0001d400\U0001d401\U0001d7ce", "\u2122 \u2121 \u3231",
    "\u2026", "\u201cquotes\u201d \u2018s\u2019", "a\u2014b\u2013c", "\u00e9\u0065\u0301", "\u0041\u0308\u0304",
    "\u0e01\u0e33", "\u0915\u093f", "\u1f80\u0345", "\u0391\u0301\u0345", "<s>\uff21</s>", "<think>\uff21\uff22</think>",
    "\uff1c\uff53\uff1e", "<|im_start|>\u3000x<|im_end|>", "\u2581\u2581", "\u3000\u3000x", "x\u3000\u3000",
    "a\u0301" * 12, "\u1100\u1161\u11a8" * 5, "\U0001f469\U0001f3fd\u200d\U0001f4bb", "\u00df\u1e9e", "\u0130i\u0307",
    "\u03a3\u03c3\u03c2", "\u2126\u03a9", "\u00b5\u03bc", "\u2167\u2177", "\u24b6\u24d0", "\u3392\u33a1", "\uffe5\uffe1",
]

# Mistral-7B-v0.1's tokenizer_config.json (the keys that count; its chat template is elsewhere)
MISTRAL_CONFIG = {
    "add_bos_token": True, "add_eos_token": False, "add_prefix_space": None,
    "added_tokens_decoder": {
        str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True} for i, c in ((0, "<unk>"), (1, "<s>"), (2, "</s>"))},
    "additional_special_tokens": [], "bos_token": "<s>", "clean_up_tokenization_spaces": False,
    "eos_token": "</s>", "legacy": False, "model_max_length": 1000000000000000019884624838656,
    "pad_token": None, "sp_model_kwargs": {}, "spaces_between_special_tokens": False,
    "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>", "use_default_system_prompt": False,
}

LLAMA = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "add_bos_token": True, "add_eos_token": False, "legacy": False}
FLAGS = {"0": {"content": "<unk>", "special": True},
         "1": {"content": "<s>", "lstrip": True, "rstrip": True, "normalized": False, "special": True},
         "2": {"content": "</s>", "normalized": True, "special": True},
         "2000": {"content": "<extra>", "special": True}, "2001": {"content": "QLoRA", "special": False}}

CONFIGS = {
    "llama": ("llama.model", LLAMA),
    "llama-legacy": ("llama.model", {**LLAMA, "legacy": True}),
    "llama-noprefix": ("llama.model", {**LLAMA, "add_prefix_space": False}),
    "llama-fast-eos": ("llama.model", {**LLAMA, "tokenizer_class": "LlamaTokenizerFast", "add_eos_token": True,
                                       "pad_token": "<pad>"}),
    "llama-flags": ("llama.model", {**LLAMA, "added_tokens_decoder": FLAGS}),
    "llama-generic": ("llama.model", None),
    "llama-generic-first": ("llama.model", {"legacy": False, "add_bos_token": True}),
    "nfkc": ("nfkc.model", None),
    "nfkc-first": ("nfkc.model", {"tokenizer_class": "TokenizersBackend", "legacy": False, "bos_token": None}),
    "nfkc-llama": ("nfkc.model", {"tokenizer_class": "LlamaTokenizer"}),
}
MISTRAL = {
    "mistral-v1-model": ("MODELS/mistral-v1-tokenizer.model", MISTRAL_CONFIG),
    "mistral-v1-model-legacy": ("MODELS/mistral-v1-tokenizer.model", {**MISTRAL_CONFIG, "legacy": True}),
    "mistral-v1-model-generic": ("MODELS/mistral-v1-tokenizer.model", None),
}
NOSPECIAL = ("llama", "nfkc", "mistral-v1-model")
DECODED = ("llama", "llama-noprefix", "llama-generic", "nfkc", "mistral-v1-model")


fnv1a, ids_hash, encode_all = spm_goldens.fnv1a, spm_goldens.ids_hash, spm_goldens.encode_all
write_ids, write_variants = spm_goldens.write_ids, spm_goldens.write_variants


def train(workdir, name, **kw):
    text = os.path.join(workdir, "train.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus_maker.make_corpus(2, 30000)) + "\n")
    prefix = os.path.join(workdir, name)
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, model_type="bpe", character_coverage=0.9995,
                                   user_defined_symbols=["<think>", "</think>"], unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, num_threads=1, minloglevel=2, max_sentence_length=20000, **kw)
    return prefix + ".model"


def train_models(workdir):
    llama = train(workdir, "llama", vocab_size=2000, byte_fallback=True, normalization_rule_name="identity",
                  remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
                  allow_whitespace_only_pieces=True,
                  control_symbols=["<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>"])
    nfkc = train(workdir, "nfkc", vocab_size=1500, byte_fallback=False, normalization_rule_name="nmt_nfkc",
                 control_symbols=["<|im_start|>", "<|im_end|>"])
    for path in (llama, nfkc):  # without the temporary paths of the training, so that reruns are identical
        m = sp_pb2.ModelProto()
        with open(path, "rb") as f:
            m.ParseFromString(f.read())
        del m.trainer_spec.input[:]
        m.trainer_spec.model_prefix = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(OUT, os.path.basename(path)), "wb") as f:
            f.write(m.SerializeToString())


def hf_dir(model_path, config):
    """transformers' tokenizer of a directory with the model as tokenizer.model (and the config)."""
    from transformers import AutoTokenizer
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(model_path, os.path.join(d, "tokenizer.model"))
        if config is not None:
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f)
        return AutoTokenizer.from_pretrained(d)


def describe(tok, model, config):
    plain = tok.backend_tokenizer.encode("x y", add_special_tokens=False).ids
    full = tok.backend_tokenizer.encode("x y", add_special_tokens=True).ids
    adds_bos = len(full) > len(plain) and full[0] == tok.bos_token_id
    adds_eos = len(full) > len(plain) and full[-1] == tok.eos_token_id
    return {"model": model, "config": config, "vocab_size": tok.backend_tokenizer.get_vocab_size(),
            "bos": tok.bos_token_id if tok.bos_token_id is not None else -1,
            "eos": tok.eos_token_id if tok.eos_token_id is not None else -1,
            "adds_bos": adds_bos, "adds_eos": adds_eos}


def fetch_mistral_v1(models_dir):
    """Mistral's V1 tokenizer.model from the PyPI package mistral_common, to models_dir."""
    dest = os.path.join(models_dir, "mistral-v1-tokenizer.model")
    os.makedirs(models_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", work,
                            "mistral_common==1.12.0"], check=True)
            wheel = [f for f in os.listdir(work) if f.startswith("mistral_common") and f.endswith(".whl")][0]
            with zipfile.ZipFile(os.path.join(work, wheel)) as z, open(dest, "wb") as f:
                f.write(z.read("mistral_common/data/tokenizer.model.v1"))
        except (subprocess.CalledProcessError, IndexError, KeyError) as e:
            print(f"mistral_common not available ({e}); no goldens for the real Mistral V1 tokenizer.model")
            return None
    return dest


def json_forms(nfkc_tok):
    """tokenizer.json (NFKC in place of Precompiled) and the normalizer of each json-* variant."""
    j = json.loads(nfkc_tok.backend_tokenizer.to_str())
    steps = j["normalizer"]["normalizers"]
    assert steps[0]["type"] == "Precompiled", steps[0]
    variants = {}
    for name, form in (("json-nfc", "NFC"), ("json-nfd", "NFD"), ("json-nfkd", "NFKD")):
        variants[name] = {"type": "Sequence", "normalizers": [{"type": form}] + steps[1:]}
    variants["json-precompiled"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": "nfkc.model"}] + steps[1:]}
    full = copy.deepcopy(j)
    j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}] + steps[1:]}
    return j, variants, full


def json_tokenizers(base, variants, full):
    toks = {"json-nfkc": Tokenizer.from_str(json.dumps(base))}
    for name, norm in variants.items():
        v = copy.deepcopy(full if name == "json-precompiled" else base)
        if name != "json-precompiled":
            v["normalizer"] = norm
        toks[name] = Tokenizer.from_str(json.dumps(v))
    return toks


def texts_of(extra):
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    return lines + corpus_maker.make_chunks(lines) + extra


def configurations(models_dir):
    confs = dict(CONFIGS)
    mistral = fetch_mistral_v1(models_dir)
    if mistral:
        confs.update(MISTRAL)
    paths = {n: (os.path.join(OUT, m) if not m.startswith("MODELS/") else mistral) for n, (m, _) in confs.items()}
    return confs, paths


def column_hashes(tok, texts, special):
    return [ids_hash(ids) for ids in encode_all(tok, texts, special)]


def golden_columns(confs, paths, texts, columns, described):
    for name, (model, config) in confs.items():
        tok = hf_dir(paths[name], config)
        described[name] = describe(tok, model, config)
        back = tok.backend_tokenizer
        rows = encode_all(back, texts)
        columns[name] = [ids_hash(i) for i in rows]
        if name in NOSPECIAL:
            columns[name + "/nospecial"] = column_hashes(back, texts, False)
        if name in DECODED:
            columns["dec-" + name] = [fnv1a(back.decode(i, skip_special_tokens=False).encode("utf-8"))
                                      for i in rows]
        if name == "llama":
            write_ids(os.path.join(OUT, "ids.txt"), rows)
        if name == "nfkc":
            nfkc_tok = tok
        print(f"{name}: {type(tok).__name__}, {sum(len(r) for r in rows)} tokens")
    return nfkc_tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="/tmp/models", help="where the Mistral V1 tokenizer.model goes")
    args = ap.parse_args()
    check_unorm_table()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        train_models(work)
    extra = EXTRA + NORM_EXTRA
    with open(os.path.join(OUT, "extra.json"), "w", encoding="ascii") as f:
        json.dump(extra, f, ensure_ascii=True, indent=0)
        f.write("\n")
    texts = texts_of(extra)
    confs, paths = configurations(args.models)
    columns, described = {}, {}
    nfkc_tok = golden_columns(confs, paths, texts, columns, described)
    base, variants, full = json_forms(nfkc_tok)
    for name, tok in json_tokenizers(base, variants, full).items():
        columns[name] = column_hashes(tok, texts, True)
    assert columns["json-precompiled"] == columns["nfkc"]
    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(base, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(OUT, "variants.json"), "w", encoding="utf-8") as f:
        json.dump(variants, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "configs.json"), "w", encoding="utf-8") as f:
        json.dump(described, f, ensure_ascii=False, indent=1)
        f.write("\n")
    write_variants(os.path.join(OUT, "variants.txt"), columns)
    fuzz_seeds()
    size = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {len(texts)} texts, {len(columns)} columns to {OUT} ({size / 1e3:.0f} kB)")


# ------------------------------------------------------------------------------------------------
# the code points tokenizers' NFC/NFD/NFKC/NFKD do not know (src/tokenizer/normalize.c)
# ------------------------------------------------------------------------------------------------

def unorm_table():
    """Ranges of code points that tokenizers' Unicode tables (its unicode-normalization-alignments
    crate, Unicode 9) leave alone while utf8proc (what ptrain links) decomposes, composes or
    reorders them: every code point alone in each form, and after a mark of combining class 220,
    230 and 240 under NFD (to find the combining classes tokenizers does not know). normalize.c
    holds the result as unorm_inert[]; main() checks it is current."""
    import ctypes
    import ctypes.util
    from tokenizers import normalizers
    lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
    lib.utf8proc_map.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    lib.utf8proc_map.restype = ctypes.c_ssize_t
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.free.argtypes = [ctypes.c_void_p]
    stable, compat, compose, decompose = 1 << 1, 1 << 2, 1 << 3, 1 << 4  # utf8proc.h
    opts = {"NFC": stable | compose, "NFD": stable | decompose, "NFKC": stable | compose | compat,
            "NFKD": stable | decompose | compat}

    def u8p(s, form):
        b = s.encode("utf-8")
        out = ctypes.c_void_p()
        n = lib.utf8proc_map(b, len(b), ctypes.byref(out), opts[form])
        r = ctypes.string_at(out, n).decode("utf-8")
        libc.free(out)
        return r

    cps = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
    inert = set()
    for form in opts:
        hf = getattr(normalizers, form)()
        inert |= {ord(c) for c in cps if hf.normalize_str(c) != u8p(c, form)}
    nfd = normalizers.NFD()
    for mark in ("\u0316", "\u0301", "\u0345"):
        inert |= {ord(c) for c in cps if nfd.normalize_str("a" + mark + c) != u8p("a" + mark + c, "NFD")}
    ranges = []
    for c in sorted(inert):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


def check_unorm_table():
    with open(os.path.join(HERE, "..", "..", "src", "tokenizer", "normalize.c"), encoding="utf-8") as f:
        src = f.read()
    table = src[src.index("unorm_inert[][2] = {"):]
    table = table[:table.index("};")]
    have = [[int(a, 16), int(b, 16)] for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+)\}", table)]
    want = unorm_table()
    if have != want:
        print("src/tokenizer/normalize.c: unorm_inert[] is out of date; it should be:")
        print(",\n".join("{0x%X, 0x%X}" % (a, b) for a, b in want))
        sys.exit(1)


# ------------------------------------------------------------------------------------------------
# fuzz seeds: selector byte 0 (a model), 1 (a charsmap), 2 (text for the normalizers)
# ------------------------------------------------------------------------------------------------

def tiny_model(charsmap=b"", byte_fallback=True, model_type=2):
    m = sp_pb2.ModelProto()
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("<t>", 0.0, 4)]
    if byte_fallback:
        pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces += [(p, -float(i), 1) for i, p in enumerate([SPACE, "a", "b", "c", "ab", SPACE + "a", SPACE + "ab", "\u00e9"])]
    for text, score, kind in pieces:
        p = m.pieces.add()
        p.piece, p.score, p.type = text, score, kind
    m.trainer_spec.model_type = model_type
    m.trainer_spec.byte_fallback = byte_fallback
    m.normalizer_spec.name = "tiny"
    if charsmap:
        m.normalizer_spec.precompiled_charsmap = charsmap
    return m.SerializeToString()


def tiny_charsmap(workdir):
    """A charsmap of a few rules, compiled by SentencePiece from a rule TSV."""
    tsv = os.path.join(workdir, "rules.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
        for src, dst in (("FF21", "41"), ("FB01", "66 69"), ("3000", "20"), ("41 30A", "C5"), ("200B", "")):
            f.write(f"{src}\t{dst}\n")
    text = os.path.join(workdir, "t.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("ab ab abc\n" * 50)
    prefix = os.path.join(workdir, "tiny")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, model_type="bpe", vocab_size=12,
                                   hard_vocab_limit=False, normalization_rule_tsv=tsv, minloglevel=2, num_threads=1)
    m = sp_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        m.ParseFromString(f.read())
    return m.normalizer_spec.precompiled_charsmap


def fuzz_seeds():
    os.makedirs(FUZZ, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        cmap = tiny_charsmap(work)
    seeds = {"model-bpe": b"\x00" + tiny_model(), "model-charsmap": b"\x00" + tiny_model(cmap, False),
             "model-unigram": b"\x00" + tiny_model(model_type=1), "charsmap": b"\x01" + cmap,
             "text": "\x02Ａ ﬁ\u3000x e\u0301 \U0001f468\u200d\U0001f469 <s>".encode("utf-8")}
    for name, data in seeds.items():
        with open(os.path.join(FUZZ, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
