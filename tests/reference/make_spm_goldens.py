#!/usr/bin/env python3
"""make_spm_goldens.py — SentencePiece-style BPE parity data: a small tokenizer and golden ids.

Everything under tests/data/tokenizer/spm/ is written by this script, with Hugging Face
`tokenizers` and `transformers` as the reference (the C tokenizer in src/tokenizer/ must match
them id for id), and two seeds of the tokenizer fuzz corpus.

Exact commands (only PyPI is needed):

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install tokenizers transformers gguf numpy sentencepiece protobuf jinja2
    /tmp/refenv/bin/python tests/reference/make_spm_goldens.py --models /tmp/models

(Written with tokenizers 0.23.3, transformers 5.24.0, sentencepiece 0.2.3, gguf from PyPI.)

The tokenizer: SentencePiece trains a BPE model of 3,000 pieces with byte fallback on text from
make_tokenizer_goldens.make_corpus(seed 2) (as Llama 2 and Mistral are set up: identity
normalization, a dummy prefix, digits split, no extra-whitespace removal), with control pieces
<start_of_turn> <end_of_turn> <|im_start|> <|im_end|> and user-defined pieces <think> </think>.
transformers converts it (LlamaTokenizer from tokenizer.model). llama.cpp's way of writing a SentencePiece vocabulary is followed for
the GGUF forms (tokens, scores, token types, special ids; no merges).

What it writes (under tests/data/tokenizer/spm/):
  tokenizer.json, tokenizer_config.json
                 the converted tokenizer (BPE, byte_fallback, Metaspace with prepend "first"),
                 bos <s>, eos </s>, add_bos_token, and the mistral chat template.
  vocab.gguf     the vocabulary as llama.cpp writes it (general.architecture llama), with the gemma
                 chat template; transformers' GGUF loader gives the same ids as tokenizer.json
                 (checked here), but the model's SentencePiece puts its dummy prefix "▁" also
                 before a text that starts with a space, and after every special token, as
                 llama.cpp does: the columns gguf* below (with_sentencepiece_prefix).
  gemma.gguf     the same vocabulary as a Gemma file (general.architecture gemma2, runs of "▁"
                 spelled with spaces, add_space_prefix false, <s> </s> <|im_start|> <|im_end|>
                 renamed <bos> <eos> <pad> <mask> as Gemma calls them, pad id 5).
  extra.json     texts beyond the corpus: special tokens, byte fallback, "▁" in the input, spaces,
                 and renderings of the gemma and mistral chat templates.
  ids.txt        golden ids of tokenizer.json with special tokens parsed: one line per text
                 (the corpus lines of ../corpus.txt, then the multi-line chunks exactly as
                 make_tokenizer_goldens.py makes them, then extra.json). Each id is two
                 characters of the URL-safe base64 alphabet (A-Z a-z 0-9 - _), high 6 bits first.
  variants.json  what each variant below changes in tokenizer.json (its normalizer,
                 pre_tokenizer, decoder, added_tokens, and model keys), as `tokenizers`
                 serializes it.
  variants.txt   for every text, the low 24 bits of 32-bit FNV-1a hashes (6 hex digits; of the ids
                 as little-endian int32, or of the decoded UTF-8) under the columns named in its
                 first line:
                   nospecial     tokenizer.json, special tokens not parsed
                   gguf, gguf-nospecial, dec-gguf
                                 vocab.gguf: transformers' GGUF loader with the dummy prefix as
                                 the model's SentencePiece and llama.cpp put it (normalizer
                                 Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer): ids with
                                 and without special tokens parsed, and the decoded text
                   legacy        Llama 2 / Mistral v0.1 Hub style: normalizer Prepend("▁") +
                                 Replace(" ", "▁"), no pre-tokenizer, unk_token "<unk>"; and
                                 a normalized added token "QLoRA" (matched as "▁QLoRA")
                   always-split  Metaspace(prepend "always", split true)
                   never         Metaspace(prepend "never"), no Strip in the decoder
                   gemma         normalizer Replace(" ", "▁"), Split(" ", merged_with_previous),
                                 decoder Replace + ByteFallback + Fuse (as transformers' Gemma)
                   nobytes       byte_fallback false and unk_token "<unk>"
                   gguf-gemma    transformers' GGUF loader on gemma.gguf (its ids; with special
                                 tokens parsed)
                   dec-main, dec-legacy, dec-never, dec-metaspace
                                 HF decode of the ids (the last: tokenizer.json with the older
                                 Metaspace decoder) — hashes of the decoded text
                   mistral-v1, mistral-v1-gguf, mistral-v1-legacy, dec-mistral-v1
                                 the real Mistral V1 vocabulary (below): ids of its tokenizer.json
                                 and of its GGUF (transformers' GGUF loader: merges ranked by
                                 score, which its conversion of the .model does not do; with
                                 the dummy prefix as for the gguf column), ids with
                                 the legacy normalizer (variant legacy-plain: legacy without the
                                 added token), and the decoded text
  chat_goldens.json
                 apply_chat_template renderings (transformers' Jinja renderer) of conversations
                 with the gemma and mistral templates written below and Mistral-7B-Instruct-v0.3's
                 own (tests/data/real/templates), cases the templates refuse,
                 and the template texts chat_template_detect must and must not recognise.
Not committed: Mistral's V1 SentencePiece model (tokenizer.model.v1, 32,000 pieces, the one of
Mistral-7B v0.1) from the PyPI package mistral_common 1.12.0, kept as
MODELS/mistral-v1-tokenizer.model, converted by transformers into MODELS/mistral-v1-tokenizer.json
and written as MODELS/mistral-v1-vocab.gguf, where test_spm.c finds them
(share/scripts/fetch-tokenizers.sh, which CI runs, does only this); it skips that check, saying so,
when they are not there.
And tests/fuzz/corpus/tokenizer/gguf-5-spm (a small SentencePiece GGUF with byte tokens) and
gguf-6-gemma (a Gemma one without), each after the fuzz target's selector byte 3.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as sp_pb2
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tokenizer_goldens as corpus_maker  # noqa: E402  (the corpus, the chunks, the templates' helpers)

DATA = os.path.join(HERE, "..", "data", "tokenizer")
OUT = os.path.join(DATA, "spm")
FUZZ = os.path.join(HERE, "..", "fuzz", "corpus", "tokenizer")
SPACE = "\u2581"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# ------------------------------------------------------------------------------------------------
# chat templates (written here to render as the models' own do)
# ------------------------------------------------------------------------------------------------

# Gemma (Gemma 3's behaviour; Gemma 1/2 render the same but refuse a system message): bos, then
# <start_of_turn>ROLE\n CONTENT|trim <end_of_turn>\n, the assistant named "model", a system
# message folded into the first turn followed by a blank line, roles alternating from user.
GEMMA = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set prefix = messages[0]['content'] + '\n\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\n' }}"
    "{% if loop.first %}{{ prefix }}{% endif %}"
    "{{ m['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

# Mistral's V1 instruct format (Mistral-7B-Instruct-v0.1's template): bos, then
# " [INST] USER [/INST]" and " ASSISTANT" + eos, a system message folded into the first user
# turn followed by a blank line, roles alternating from user, no generation prompt of its own.
MISTRAL = (
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set system = messages[0]['content'] %}{% set turns = messages[1:] %}"
    "{% else %}{% set turns = messages %}{% endif %}"
    "{{ bos_token }}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}"
    "{% if m['role'] == 'user' %}"
    "{% if loop.first and system is defined %}{{ ' [INST] ' + system + '\n\n' + m['content'] + ' [/INST]' }}"
    "{% else %}{{ ' [INST] ' + m['content'] + ' [/INST]' }}{% endif %}"
    "{% elif m['role'] == 'assistant' %}{{ ' ' + m['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported, with the exception of an "
    "initial optional system message!') }}{% endif %}"
    "{% endfor %}"
)


def real_template(name):
    """A chat template as published, from the corpus of real files (tests/data/real/templates)."""
    with open(os.path.join(HERE, "..", "data", "real", "templates", name + ".jinja"), encoding="utf-8",
              newline="") as f:
        return f.read()


# Mistral's v3 template (Mistral-7B-Instruct-v0.3's format; the copy is Mistral-Large-Instruct-2407's,
# see tests/data/real/SOURCES.md), and Mistral Nemo's tekken variant ("[INST]" with no space after,
# replies untrimmed), which is another format
MISTRAL_V3 = real_template("mistralai-Mistral-Large-Instruct-2407")
MISTRAL_TEKKEN = real_template("mistralai-Mistral-Nemo-Instruct-2407")


CONVERSATIONS = corpus_maker.CONVERSATIONS + [
    [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": " again "},
     {"role": "assistant", "content": " Yes "}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
    [],
    [{"role": "system", "content": "only a system message"}],
]
REFUSED = [
    [{"role": "assistant", "content": "first"}],
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    [{"role": "system", "content": "s"}, {"role": "system", "content": "t"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}],
]
REFUSED_MISTRAL = [
    [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}],
]

# Template texts: what the models ship (paraphrased where only the markers matter) and look-alikes
# that must not be taken for them.
DETECT = [
    (GEMMA, "gemma"),
    ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
     "{% endif %}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
     "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}", "gemma"),
    (MISTRAL, "mistral"),
    (MISTRAL_V3, "mistral-v3"),
    (MISTRAL_TEKKEN, None),
    ("{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}"
     "{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- elif message['role'] == 'assistant' %}"
     "{{- ' ' + message['content'] + eos_token}}{%- endif %}{%- endfor %}", "mistral"),
    # Llama 2: [INST] with <<SYS>>
    ("{% for message in messages %}{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + message['content'] + "
     "'\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + "
     "' [/INST]' }}{% endif %}{% endfor %}", None),
    # Mistral V3 (v0.3): [INST] without a leading space, tools
    ("{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{%- if tools is not none "
     "%}{{- '[AVAILABLE_TOOLS] [' }}{%- endif %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
     "{%- endfor %}", None),
    # Mistral's first v0.1 template: no space before [INST], none after [/INST]
    ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
     "eos_token + ' ' }}{% endif %}{% endfor %}", None),
]


def render(template, messages, gen, bos, eos):
    from transformers.utils.chat_template_utils import render_jinja_template
    out, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                   add_generation_prompt=gen, bos_token=bos, eos_token=eos)
    return out[0]


def chat_goldens():
    cases = []
    plan = [("gemma", GEMMA, "<bos>", None, False), ("gemma", GEMMA, "<s>", "</s>", True),
            ("mistral", MISTRAL, "<s>", "</s>", False), ("mistral", MISTRAL, "<BOS>", "<EOS>", True),
            ("mistral-v3", MISTRAL_V3, "<s>", "</s>", False), ("mistral-v3", MISTRAL_V3, "<BOS>", "<EOS>", True)]
    refused = []
    for name, tmpl, bos, eos, explicit in plan:
        for msgs in CONVERSATIONS:
            for gen in (False, True):
                try:
                    expected = render(tmpl, msgs, gen, bos, eos or "")
                except Exception as e:  # v3 reads messages[0]: no messages at all is an error there
                    if not explicit and not gen:
                        refused.append({"template": name, "messages": msgs, "why": str(e)})
                    continue
                case = {"template": name, "messages": msgs, "add_generation_prompt": gen, "expected": expected}
                if explicit:
                    case["bos"], case["eos"] = bos, eos
                cases.append(case)
    for name, tmpl in (("gemma", GEMMA), ("mistral", MISTRAL), ("mistral-v3", MISTRAL_V3)):
        for msgs in REFUSED + (REFUSED_MISTRAL if name.startswith("mistral") else []):
            try:
                render(tmpl, msgs, False, "<s>", "</s>")
            except Exception as e:  # the template's raise_exception
                refused.append({"template": name, "messages": msgs, "why": str(e)})
            else:
                raise AssertionError(f"{name} accepted {msgs}")
    detect = [{"text": text, "name": name} for text, name in DETECT]
    return {"renders": cases, "refused": refused, "detect": detect}


# ------------------------------------------------------------------------------------------------
# the tokenizer
# ------------------------------------------------------------------------------------------------

EXTRA = [
    "<s>", "</s>", "<unk>", "<s> hi</s>", " <s>  x", "<s><s></s>", "x<unk>y", "<start_of_turn>user\nHi<end_of_turn>\n",
    "<start_of_turn><end_of_turn>", "<|im_start|>system\nok<|im_end|>", "[INST] hi [/INST]", " [INST] hi [/INST] ok</s>",
    "<0x41><0xFF>", "<0x0A>", SPACE, SPACE * 3 + "x", "x" + SPACE, "a" + SPACE + "b c", " " + SPACE + " ",
    "<think>x</think>", "<think> </think>", "QLoRA QLoRA", " QLoRA", "qlora QLoRAs", "a QLoRA", "QLoRA", "\u00a0x", "x\u3000y",
    "\t\tx", " ", "  ", "   ", "\n", "\n\n", " \n ", "\r\n", "\U0001f600\U0001f600", "\U0001f468\u200d\U0001f469",
    "\u01c4", "\U000e0001", "\ufffd", "\x00", "\x01\x02", "\u0800\u0801", "\U00010000", "\U0010ffff",
    "\u6f22\u5b57\u304b\u306a", "\uac00\ud7a3", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "e\u0301", "A\u030a\u212b\u00c5", "12345678901234567890", "3.14 -2 1e10", "aaaa" * 40, "ab" * 300,
    "    def f(x):\n        return x\n", "hello    world", "trailing   ", "   leading", "<s>" * 5,
    "</s> </s>", "<unk><unk>", "<s>\n", "word<|im_end|>", "<|im_end|>word",
]


def train_spm(workdir):
    text = os.path.join(workdir, "train.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus_maker.make_corpus(2, 30000)) + "\n")
    prefix = os.path.join(workdir, "sp")
    spm.SentencePieceTrainer.train(
        input=text, model_prefix=prefix, model_type="bpe", vocab_size=3000, byte_fallback=True,
        character_coverage=0.9995, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, allow_whitespace_only_pieces=True,
        user_defined_symbols=["<think>", "</think>"],
        control_symbols=["<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>"],
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2, max_sentence_length=20000)
    return prefix + ".model"


def convert(model_path, workdir):
    """transformers' conversion of the SentencePiece model (as a model directory would have it)."""
    from transformers import LlamaTokenizer
    d = os.path.join(workdir, "hf")
    os.makedirs(d, exist_ok=True)
    shutil.copy(model_path, os.path.join(d, "tokenizer.model"))
    return LlamaTokenizer.from_pretrained(d).backend_tokenizer


def sp_proto(model_path):
    m = sp_pb2.ModelProto()
    with open(model_path, "rb") as f:
        m.ParseFromString(f.read())
    return m


def write_gguf(path, arch, tokens, scores, types, ids, flags, template=None):
    """A vocabulary-only GGUF as llama.cpp writes a SentencePiece one."""
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    bos, eos, unk, pad = ids
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    if unk is not None:
        w.add_unk_token_id(unk)
    if pad is not None:
        w.add_pad_token_id(pad)
    for key, value in flags.items():
        {"add_bos": w.add_add_bos_token, "add_eos": w.add_add_eos_token,
         "add_space_prefix": w.add_add_space_prefix}[key](value)
    if template:
        w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_forms(proto, workdir):
    tokens = [p.piece for p in proto.pieces]
    scores = [p.score for p in proto.pieces]
    types = [int(p.type) for p in proto.pieces]  # SentencePiece's piece types are llama.cpp's token types
    write_gguf(os.path.join(OUT, "vocab.gguf"), "llama", tokens, scores, types, (1, 2, 0, None),
               {"add_bos": True, "add_eos": False}, GEMMA)
    # Gemma files spell runs of "▁" with spaces (transformers' GGUF loader turns them back); the
    # control pieces take Gemma's names, which transformers' Gemma tokenizer would otherwise add
    gemma_tokens = [" " * len(t) if t and set(t) == {SPACE} and len(t) > 1 else t for t in tokens]
    for i, name in GEMMA_NAMES.items():
        gemma_tokens[i] = name
    write_gguf(os.path.join(OUT, "gemma.gguf"), "gemma2", gemma_tokens, scores, types, (1, 2, 0, 5),
               {"add_bos": True, "add_eos": False, "add_space_prefix": False})


GEMMA_NAMES = {1: "<bos>", 2: "<eos>", 5: "<pad>", 6: "<mask>"}  # in place of <s> </s> <|im_start|> <|im_end|>


def hf_from_gguf(name, where=OUT):
    """transformers' tokenizer from the GGUF alone (a directory holding nothing else)."""
    from transformers import AutoTokenizer
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(where, name), d)
        return AutoTokenizer.from_pretrained(d, gguf_file=name).backend_tokenizer


def gguf_adds_prefix(path):
    """Whether a SentencePiece GGUF asks for the dummy prefix: tokenizer.ggml.add_space_prefix
    (true when absent), never for Gemma (general.architecture gemma, gemma2, gemma3)."""
    r = gguf.GGUFReader(path)
    field = lambda k: r.fields[k].contents() if k in r.fields else None
    if field("tokenizer.ggml.model") != "llama" or str(field("general.architecture")).startswith("gemma"):
        return False
    return bool(field("tokenizer.ggml.add_space_prefix") if "tokenizer.ggml.add_space_prefix" in r.fields else True)


def with_sentencepiece_prefix(tok):
    """A tokenizers.Tokenizer made to put SentencePiece's dummy prefix as the model's own
    SentencePiece, its Hub tokenizer.json (Llama 2's) and llama.cpp put it: normalizer
    Prepend("▁") + Replace(" ", "▁"), so "▁" goes before every text between special tokens, also
    one that starts with a space; no pre-tokenizer. transformers' GGUF loader writes Metaspace
    prepend "first" instead, which drops the prefix before a leading space (" " gives "▁" where
    the model gives "▁▁")."""
    tok = Tokenizer.from_str(tok.to_str())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok


def gguf_reference(name, where=OUT):
    """What ptrain must give for a SentencePiece GGUF: transformers' GGUF loader (its merges,
    ranked by score, its added tokens), with the model's own dummy prefix when the file asks."""
    tok = hf_from_gguf(name, where)
    return with_sentencepiece_prefix(tok) if gguf_adds_prefix(os.path.join(where, name)) else tok


# ------------------------------------------------------------------------------------------------
# variants of tokenizer.json
# ------------------------------------------------------------------------------------------------

def variant(base, name):
    tok = Tokenizer.from_str(base.to_str())
    dec_strip = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    dec_plain = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    if name in ("legacy", "legacy-plain"):
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        tok.pre_tokenizer = None
        tok.decoder = dec_strip
        if name == "legacy":
            tok.add_tokens([AddedToken("QLoRA", normalized=True, special=False)])  # matched as "▁QLoRA"
        return with_model(tok, unk_token="<unk>")
    if name == "always-split":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
        return tok
    if name == "never":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=False)
        tok.decoder = dec_plain
        return tok
    if name == "gemma":
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
        tok.decoder = dec_plain
        return with_model(tok, unk_token="<unk>")
    if name == "nobytes":
        return with_model(tok, unk_token="<unk>", byte_fallback=False)
    if name == "metaspace-decoder":
        tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        return tok
    raise ValueError(name)


def variant_parts(base, tok):
    """What a variant changes in tokenizer.json: its top-level parts, and model keys."""
    b, v = json.loads(base.to_str()), json.loads(tok.to_str())
    parts = {k: v[k] for k in ("normalizer", "pre_tokenizer", "decoder", "added_tokens") if v[k] != b[k]}
    model = {k: v["model"][k] for k in v["model"] if k not in ("vocab", "merges") and v["model"][k] != b["model"][k]}
    if model:
        parts["model"] = model
    return parts


def with_model(tok, **changes):
    j = json.loads(tok.to_str())
    j["model"].update(changes)
    return Tokenizer.from_str(json.dumps(j))


# ------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------

def fnv1a(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def ids_hash(ids):
    return fnv1a(b"".join(int(i).to_bytes(4, "little", signed=True) for i in ids))


def encode_all(tok, texts, special=True):
    tok.encode_special_tokens = not special
    out = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    tok.encode_special_tokens = False
    return out


def write_ids(path, rows):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for ids in rows:
            assert all(0 <= i < 4096 for i in ids)
            f.write("".join(B64[i >> 6] + B64[i & 63] for i in ids) + "\n")


def write_variants(path, columns):
    names = list(columns)
    rows = zip(*(columns[n] for n in names))
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write(" ".join(names) + "\n")
        for row in rows:
            f.write(" ".join(f"{h & 0xFFFFFF:06x}" for h in row) + "\n")


MISTRAL_V1_FILES = ("mistral-v1-tokenizer.model", "mistral-v1-tokenizer.json", "mistral-v1-vocab.gguf")


def fetch_mistral_v1(models_dir, work):
    """Mistral's V1 SentencePiece model (Mistral-7B v0.1's 32,000 pieces), from the PyPI package
    mistral_common; written to models_dir as it is (mistral-v1-tokenizer.model), as a tokenizer.json
    (transformers' conversion) and as a GGUF vocabulary (llama.cpp's way). Not committed: the C
    tests find them there. Files already there are kept."""
    os.makedirs(models_dir, exist_ok=True)
    if all(os.path.exists(os.path.join(models_dir, f)) for f in MISTRAL_V1_FILES):
        return Tokenizer.from_file(os.path.join(models_dir, "mistral-v1-tokenizer.json"))
    model = os.path.join(work, "mistral-v1.model")
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", work,
                        "mistral_common==1.12.0"], check=True)
        wheel = [f for f in os.listdir(work) if f.startswith("mistral_common") and f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(work, wheel)) as z, open(model, "wb") as f:
            f.write(z.read("mistral_common/data/tokenizer.model.v1"))
    except (subprocess.CalledProcessError, IndexError, KeyError) as e:
        print(f"mistral_common not available ({e}); no goldens for the real Mistral V1 vocabulary")
        return None
    shutil.copy(model, os.path.join(models_dir, "mistral-v1-tokenizer.model"))
    tok = convert(model, os.path.join(work, "mistral"))
    tok.save(os.path.join(models_dir, "mistral-v1-tokenizer.json"), pretty=False)
    proto = sp_proto(model)
    write_gguf(os.path.join(models_dir, "mistral-v1-vocab.gguf"), "llama", [p.piece for p in proto.pieces],
               [p.score for p in proto.pieces], [int(p.type) for p in proto.pieces], (1, 2, 0, None),
               {"add_bos": True, "add_eos": False})
    return tok


def mistral_columns(models_dir, texts, columns):
    with tempfile.TemporaryDirectory() as work:
        tok = fetch_mistral_v1(models_dir, work)
    if tok is None:
        return
    ids = encode_all(tok, texts)
    from_gguf = encode_all(gguf_reference("mistral-v1-vocab.gguf", models_dir), texts)
    # transformers' conversion of the .model ranks merges by piece id, its GGUF loader by score (as
    # SentencePiece does): Mistral's runs of "▁" have id 259.. but score -1e9, so they differ; and
    # the GGUF form has the model's dummy prefix (with_sentencepiece_prefix)
    diff = sum(a != b for a, b in zip(ids, from_gguf))
    print(f"Mistral V1: its GGUF (with the dummy prefix) vs its tokenizer.json: {diff} of {len(texts)} texts differ")
    legacy = variant(tok, "legacy-plain")
    legacy_ids = encode_all(legacy, texts)
    columns["mistral-v1"] = [ids_hash(i) for i in ids]
    columns["mistral-v1-gguf"] = [ids_hash(i) for i in from_gguf]
    columns["mistral-v1-legacy"] = [ids_hash(i) for i in legacy_ids]
    columns["dec-mistral-v1"] = [fnv1a(tok.decode(i, skip_special_tokens=False).encode("utf-8")) for i in ids]
    print(f"Mistral V1: {sum(len(i) for i in ids)} tokens; legacy normalizer differs on "
          f"{sum(a != b for a, b in zip(ids, legacy_ids))} texts")


def fuzz_seeds():
    """Two small SentencePiece GGUFs for the fuzz corpus (selector byte 3, then the image)."""
    pieces = ["<unk>", "<s>", "</s>", "<start_of_turn>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [SPACE, "H", "e", "l", "o", SPACE + "H", "ll", "He", "Hell", "Hello", SPACE + "w", "w", "r", "d"]
    types = [2, 3, 3, 3] + [6] * 256 + [1] * 14
    scores = [0.0] * 260 + [-float(i) for i in range(14)]
    small = [("gguf-5-spm", "llama", pieces, types, scores),
             ("gguf-6-gemma", "gemma2", ["<pad>", "<eos>", "<bos>", "<unk>", "  ", "a", "b", "ab", SPACE],
              [3, 3, 3, 2, 1, 1, 1, 1, 1], [0.0] * 9)]
    for name, arch, toks, tys, scs in small:
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "x.gguf")
            write_gguf(p, arch, toks, scs, tys, (1, 2, 0, None) if arch == "llama" else (2, 1, 3, 0),
                       {"add_bos": True})
            data = open(p, "rb").read()
        with open(os.path.join(FUZZ, name), "wb") as f:
            f.write(b"\x03" + data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="/tmp/models", help="where the Mistral V1 files go")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    chats = chat_goldens()
    with open(os.path.join(OUT, "chat_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(chats, f, ensure_ascii=False, indent=1)
        f.write("\n")
    rendered = sorted({c["expected"] for c in chats["renders"] if "\n" in c["expected"] or "[INST]" in c["expected"]})
    extra = EXTRA + rendered[:24]
    with open(os.path.join(OUT, "extra.json"), "w", encoding="ascii") as f:
        json.dump(extra, f, ensure_ascii=True, indent=0)
        f.write("\n")

    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    texts = lines + corpus_maker.make_chunks(lines) + extra

    with tempfile.TemporaryDirectory() as work:
        model = train_spm(work)
        proto = sp_proto(model)
        tok = convert(model, work)
    tok.save(os.path.join(OUT, "tokenizer.json"), pretty=False)
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "add_eos_token": False,
                   "chat_template": MISTRAL}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    gguf_forms(proto, OUT)

    main_ids = encode_all(tok, texts)
    write_ids(os.path.join(OUT, "ids.txt"), main_ids)
    from_gguf = encode_all(hf_from_gguf("vocab.gguf"), texts)  # Metaspace "first", as tokenizer.json
    diff = [i for i in range(len(texts)) if from_gguf[i] != main_ids[i]]
    print(f"transformers' GGUF loader (vocab.gguf) vs tokenizer.json: {len(diff)} of {len(texts)} texts differ")
    assert not diff, texts[diff[0]]

    columns = {"nospecial": [ids_hash(i) for i in encode_all(tok, texts, special=False)]}
    gguf_tok = gguf_reference("vocab.gguf")
    gguf_ids = encode_all(gguf_tok, texts)
    columns["gguf"] = [ids_hash(i) for i in gguf_ids]
    columns["gguf-nospecial"] = [ids_hash(i) for i in encode_all(gguf_tok, texts, special=False)]
    columns["dec-gguf"] = [fnv1a(gguf_tok.decode(i, skip_special_tokens=False).encode("utf-8")) for i in gguf_ids]
    print(f"vocab.gguf with the dummy prefix vs tokenizer.json: "
          f"{sum(a != b for a, b in zip(gguf_ids, main_ids))} of {len(texts)} texts differ")
    variants = {n: variant(tok, n) for n in ("legacy", "always-split", "never", "gemma", "nobytes",
                                             "metaspace-decoder", "legacy-plain")}
    var_ids = {n: encode_all(v, texts) for n, v in variants.items()}
    for n in ("legacy", "always-split", "never", "gemma", "nobytes"):
        columns[n] = [ids_hash(i) for i in var_ids[n]]
    gemma_gguf = encode_all(hf_from_gguf("gemma.gguf"), texts)
    columns["gguf-gemma"] = [ids_hash(i) for i in gemma_gguf]
    print(f"gemma.gguf vs the gemma variant: {sum(a != b for a, b in zip(gemma_gguf, var_ids['gemma']))} texts differ")
    decoders_of = {"dec-main": (tok, main_ids), "dec-legacy": (variants["legacy"], var_ids["legacy"]),
                   "dec-never": (variants["never"], var_ids["never"]),
                   "dec-metaspace": (variants["metaspace-decoder"], main_ids)}
    for col, (t, rows) in decoders_of.items():
        columns[col] = [fnv1a(t.decode(ids, skip_special_tokens=False).encode("utf-8")) for ids in rows]
    mistral_columns(args.models, texts, columns)
    write_variants(os.path.join(OUT, "variants.txt"), columns)
    with open(os.path.join(OUT, "variants.json"), "w", encoding="utf-8") as f:
        json.dump({n: variant_parts(tok, v) for n, v in variants.items()}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    unk = sum(0 in ids for ids in var_ids["nobytes"])
    print(f"nobytes: {unk} texts have <unk>; legacy vs main: "
          f"{sum(a != b for a, b in zip(var_ids['legacy'], main_ids))} texts differ")

    fuzz_seeds()
    size = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {len(lines)} lines + {len(texts) - len(lines) - len(extra)} chunks + {len(extra)} extra texts "
          f"to {OUT} ({size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
