"""gguf_meta_check.py — does llama.cpp tokenize like Hugging Face with the tokenizer metadata
ptrain writes (gguf_meta_from_hf)? For each Hugging Face directory (the test models, and test
tokenizers given a config.json), gguf_meta_main writes a GGUF with no tensors; llama.cpp
(llama-cpp-python, vocab_only) then tokenizes the texts with special tokens parsed, with bos/eos
added, and with special tokens as plain text, and so do transformers' AutoTokenizer and the
tokenizer.json alone in HF `tokenizers` (which ptrain's tokenizer follows; transformers 5's
Qwen2Tokenizer overrides the file with NFC and Qwen2's regex). A case passes when llama.cpp
matches `tokenizers` on every text (except the texts a known llama.cpp behaviour excuses: the
SentencePiece ▁ prefix after special tokens, NFC) and the chat template is transformers'; the
transformers counts are printed beside. Directories llama.cpp could not tokenize the same way must
be refused with a message naming why.

  gguf_meta_check.py DRIVER [--hf-python PY] [--work DIR] [--show N] [CASE ...]

DRIVER is the built gguf_meta_main. Run it with a Python that has llama-cpp-python; transformers
runs in --hf-python (default: this Python when it has transformers, as ~/.cache/ptrain/pyenv does,
else bench/.venv/bin/python). Texts: the pirate dataset's messages and
conversations (chatml, with special tokens), tests/data/tokenizer/corpus.txt and tricky strings.
Exit 0 when every case passes (or is refused as expected); the numbers are printed either way."""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
TOK_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

TRICKY = [
    "", " ", "  ", "\n", "\n\n\n", "\t", " \t \n ", "a", "hello", " hello", "hello ", "  hello  world  ",
    "0", "12", "123", "1234", "12345678901234567890", "3.14159", "-42", "1,000,000", "0x7fff", "1e-9", "v1.2.3",
    "I'm", "you're", "they'll", "we've", "he'd", "I'M", "YOU'RE", "it's", "IT'S", "'s", "don't",
    "café", "naïve", "Ünïcödé", "日本語のテキスト", "中文字符", "한국어", "Привет, мир!", "مرحبا بالعالم",
    "עברית", "ελληνικά", "🙂", "👍🏽", "👨‍👩‍👧‍👦", "🚀🚀🚀", "e\u0301", "\u00a0nbsp\u00a0", "zero\u200bwidth",
    "\u3000ideographic space", "line\r\nbreak", "tabs\t\tand    spaces", "trailing   ", "   leading",
    "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|><|im_end|><|endoftext|>", "<|im_start|user", "< |im_end| >",
    "<s>hello</s>", "<s> hello </s>", "</s><s>", "<unk>", "<pad>", "<think>x</think>", "<|begin_of_text|>hi",
    "<|eot_id|>", "<start_of_turn>model\nok<end_of_turn>", "def f(x):\n    return x ** 2\n", "if (a && b) { c(); }",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\System32", "$100.00 + 5% = $105",
    "!!!???...", "----====", "'''''", '""""', "```python\nprint('hi')\n```", "a\u2581b", "\u2581\u2581x",
    "x" * 300, " " * 40 + "x", "\n" * 20, "ab " * 100,
]


def read_texts():
    texts = []
    with open(os.path.join(ROOT, "share", "data", "pirate-instructions.jsonl"), encoding="utf-8") as f:
        for line in f:
            msgs = json.loads(line)["messages"]
            texts += [m["content"] for m in msgs]
            texts.append("".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs))
    with open(os.path.join(DATA, "tokenizer", "corpus.txt"), encoding="utf-8", newline="") as f:
        texts += f.read().split("\n")
    return texts + TRICKY


# ---- the cases ----

def max_id(tok_json):
    t = json.load(open(tok_json, encoding="utf-8"))
    ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
    return max(ids)


def tiny_config(model_type, vocab):
    cls = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[model_type]
    return {"architectures": [cls], "model_type": model_type, "hidden_size": 64, "intermediate_size": 128,
            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": vocab,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "tie_word_embeddings": True}


def copy_tokenizer(src, dst):
    for name in TOK_FILES:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dst)


def make_case(work, name, src, model_type=None, edit=None, config_edit=None):
    """A directory work/name with src's tokenizer files and its config.json (or a tiny one)."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    copy_tokenizer(src, d)
    if model_type:
        cfg = tiny_config(model_type, max_id(os.path.join(d, "tokenizer.json")) + 1)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    else:
        cfg = json.load(open(os.path.join(src, "config.json")))
        if config_edit:
            config_edit(cfg)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    if edit:
        path = os.path.join(d, "tokenizer.json")
        t = json.load(open(path, encoding="utf-8"))
        edit(t)
        json.dump(t, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    return d


def spm_legacy(t):
    """Llama 2's legacy form: normalizers Prepend("▁") and Replace(" ", "▁"), no pre-tokenizer."""
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    t["pre_tokenizer"] = None


def spm_gemma(t):
    """Gemma's form: Replace(" ", "▁") alone, no prefix, no pre-tokenizer."""
    t["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    t["pre_tokenizer"] = None


def spm_split(t):
    t["pre_tokenizer"]["split"] = True


def bos_eos(t):
    """Llama 3's post-processor (bos before the text), with an eos after it too."""
    tok = lambda s: {"SpecialToken": {"id": s, "type_id": 0}}
    seq = lambda s: {"Sequence": {"id": s, "type_id": 0}}
    ids = {a["content"]: a["id"] for a in t["added_tokens"]}
    t["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing", "single": [tok("<|begin_of_text|>"), seq("A"), tok("<|eot_id|>")],
         "pair": [tok("<|begin_of_text|>"), seq("A"), tok("<|begin_of_text|>"), seq("B"), tok("<|eot_id|>")],
         "special_tokens": {s: {"id": s, "ids": [ids[s]], "tokens": [s]}
                            for s in ("<|begin_of_text|>", "<|eot_id|>")}}]}


def nfc(t):
    plain_added(t)
    t["normalizer"] = {"type": "NFC"}


def plain_added(t):
    """The added tokens without single_word/lstrip/rstrip (which a GGUF cannot carry)."""
    for a in t["added_tokens"]:
        a.update(single_word=False, lstrip=False, rstrip=False)


def unknown_regex(t):
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\p{N}+|\\s+|[^\\s\\p{L}\\p{N}]+"


def gemma_scale(cfg):
    """query_pre_attn_scalar = head_dim: the attention scale llama.cpp's gemma2 uses."""
    cfg["query_pre_attn_scalar"] = cfg["head_dim"]


# name, source, config model_type (None: the source's config.json), tokenizer.json edit, refusal
# text; config.json edit
CASES = [
    ("tiny-llama", "hf/tiny-llama-bnb4", None, None, None),
    ("qwen2-hf", "qwen2/hf", None, None, None),
    ("gemma2-hf", "gemma2/hf", None, None, None, gemma_scale),
    ("gemma2-scale", "gemma2/hf", None, None, "query_pre_attn_scalar 24"),
    ("smollm2", "tokenizer/smollm2", "llama", None, None),
    ("llama3-mini", "tokenizer/llama3-mini", "llama", None, None),
    ("qwen2-mini", "tokenizer/qwen2-mini", "qwen2", plain_added, None),
    # Qwen2's NFC normalizer (ptrain's tokenizer runs it; llama.cpp skips it: text already NFC is the same)
    ("qwen2-mini-nfc", "tokenizer/qwen2-mini", "qwen2", nfc, None),
    ("llama3-bos-eos", "tokenizer/llama3-mini", "llama", bos_eos, None),
    ("spm", "tokenizer/spm", "llama", None, None),
    ("spm-legacy", "tokenizer/spm", "llama", spm_legacy, None),
    ("spm-gemma", "tokenizer/spm", "llama", spm_gemma, None),
    ("spm-split", "tokenizer/spm", "llama", spm_split, "Metaspace with split true"),
    ("gpt2-mini", "tokenizer/gpt2-mini", "llama", None, "add_prefix_space is true"),
    ("unknown-regex", "tokenizer/llama3-mini", "llama", unknown_regex, "is not one llama.cpp knows by name"),
    ("qwen2-mini-flags", "tokenizer/qwen2-mini", "qwen2", None, "has single_word true"),
]


def excused(d, texts):
    """Texts where llama.cpp is known to differ from the tokenizer.json, and why."""
    t = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    pre, norm = t.get("pre_tokenizer") or {}, t.get("normalizer") or {}
    if pre.get("type") == "Metaspace" and pre.get("prepend_scheme", "always") == "first":
        return prefix_explained(d, texts), "start with a space or hold an added token (▁ prefix)"
    if norm.get("type") == "NFC":
        return {i for i, x in enumerate(texts) if unicodedata.normalize("NFC", x) != x}, "are not NFC"
    return set(), ""


def prefix_explained(d, texts):
    """Texts on which llama.cpp's SentencePiece prefix may differ from Metaspace(prepend_scheme
    "first"): llama.cpp puts a ▁ before the text even when it starts with a space (or ▁), and after
    every special or added token; transformers only at the very start, when no space is there."""
    t = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    added = [a["content"] for a in t.get("added_tokens", [])]
    return {i for i, x in enumerate(texts)
            if x[:1].isspace() or x.startswith("\u2581") or any(a in x for a in added)}


def smollm2_from_gguf(work, hf_python):
    """SmolLM2-135M-Instruct's tokenizer and config as transformers writes them from the GGUF."""
    d = os.path.join(work, "smollm2-gguf")
    if os.path.exists(os.path.join(d, "tokenizer.json")):
        return d
    code = ("import sys; from transformers import AutoTokenizer, AutoConfig; g='SmolLM2-135M-Instruct.Q4_1.gguf';"
            "AutoTokenizer.from_pretrained(sys.argv[1], gguf_file=g).save_pretrained(sys.argv[2]);"
            "AutoConfig.from_pretrained(sys.argv[1], gguf_file=g).save_pretrained(sys.argv[2])")
    subprocess.run([hf_python, "-c", code, os.path.join(ROOT, "models"), d], check=True, capture_output=True)
    # transformers writes model_max_length = 10**30, an integer ptrain's JSON reader (jansson) refuses
    path = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(path, encoding="utf-8"))
    if cfg.get("model_max_length", 0) >= 2**63:
        print(f"smollm2-gguf: note: model_max_length {cfg['model_max_length']} set to 8192 (ptrain cannot read it)")
        cfg["model_max_length"] = 8192
        json.dump(cfg, open(path, "w", encoding="utf-8"), indent=2, ensure_ascii=False)
    return d


# ---- transformers (run in --hf-python) ----

def hf_phase(job_path):
    """transformers' AutoTokenizer, and the tokenizer.json alone in HF `tokenizers` (which ptrain
    follows; transformers' own classes may override the file, as Qwen2Tokenizer does)."""
    import transformers
    from tokenizers import Tokenizer
    transformers.logging.set_verbosity_error()
    job = json.load(open(job_path, encoding="utf-8"))
    texts, out = job["texts"], {}
    for name, d in job["dirs"].items():
        tok = transformers.AutoTokenizer.from_pretrained(d)
        split = transformers.AutoTokenizer.from_pretrained(d, split_special_tokens=True)
        raw = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        raw_split = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        raw_split.encode_special_tokens = True
        out[name] = {"class": type(tok).__name__, "template": tok.chat_template, "transformers": {
            "ids": [tok.encode(t, add_special_tokens=False) for t in texts],
            "ids_added": [tok.encode(t, add_special_tokens=True) for t in texts],
            "ids_nospecial": [split.encode(t, add_special_tokens=False) for t in texts],
        }, "tokenizers": {
            "ids": [raw.encode(t, add_special_tokens=False).ids for t in texts],
            "ids_added": [raw.encode(t, add_special_tokens=True).ids for t in texts],
            "ids_nospecial": [raw_split.encode(t, add_special_tokens=False).ids for t in texts],
        }}
    json.dump(out, open(job["out"], "w"))


# ---- llama.cpp ----

class quiet_stderr:
    """llama.cpp writes warnings (a bos added before a bos ...) to fd 2 whatever verbose says."""
    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def detokenize(llm, ids):
    """Token pieces joined, special ones included (Llama.detokenize cuts pieces at 32 bytes)."""
    import ctypes
    import llama_cpp
    buf, out = (ctypes.c_char * 1024)(), b""
    for t in ids:
        n = llama_cpp.llama_token_to_piece(llm._model.vocab, t, buf, len(buf), 0, True)
        out += bytes(buf[:n])
    return out


def llama_ids(gguf, texts):
    with quiet_stderr():
        return llama_ids_loud(gguf, texts)


def llama_ids_loud(gguf, texts):
    from llama_cpp import Llama
    llm = Llama(model_path=gguf, vocab_only=True, verbose=False)
    res = {"template": llm.metadata.get("tokenizer.chat_template"), "ids": [], "ids_added": [], "ids_nospecial": []}
    for t in texts:
        b = t.encode("utf-8")
        res["ids"].append(llm.tokenize(b, add_bos=False, special=True))
        res["ids_added"].append(llm.tokenize(b, add_bos=True, special=True))
        res["ids_nospecial"].append(llm.tokenize(b, add_bos=False, special=False))
    res["roundtrip"] = sum(detokenize(llm, ids) == t.encode("utf-8") for ids, t in zip(res["ids"], texts))
    del llm
    return res


MODES = {"ids": "special parsed", "ids_added": "+ bos/eos added", "ids_nospecial": "special as text"}


def compare(hf, ll, texts, show, excuse):
    """Counts of texts tokenized identically. True when llama.cpp tokenizes every text as the
    tokenizer.json does in HF `tokenizers` (what ptrain trains with), except the excused ones, and
    the chat template is transformers'. transformers' counts are shown; where they differ,
    transformers itself departs from the tokenizer.json (its class overrides the file)."""
    ok, (excused, why) = True, excuse
    if excused:
        print(f"  {len(excused)} texts {why}: llama.cpp may differ there")
    for ref in ("transformers", "tokenizers"):
        for mode, what in MODES.items():
            bad = compare_mode(ref, what, hf[ref][mode], ll[mode], texts, show)
            ok &= ref == "transformers" or not bad - excused
            if ref == "tokenizers" and bad:
                print(f"      all {len(bad)} on those texts" if not bad - excused else
                      f"      {len(bad - excused)} on other texts")
    same = hf["template"] == ll["template"]
    print(f"  chat template: {'identical' if same else 'DIFFERENT'} ({len(hf['template'] or '')} chars)")
    print(f"  llama.cpp detokenize(tokenize(text)) == text: {ll['roundtrip']}/{len(texts)}")
    return ok and same


def compare_mode(ref, what, ref_ids, ll_ids, texts, show):
    bad = [i for i, (a, b) in enumerate(zip(ref_ids, ll_ids)) if a != b]
    print(f"  vs {ref:12s} {what:16s} {len(texts) - len(bad)}/{len(texts)} identical")
    for i in bad[:show]:
        a, b = ref_ids[i], ll_ids[i]
        k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"    {texts[i][:70]!r} (from id {k} of {len(a)})\n"
              f"      {ref:12s} {a[max(0, k - 2):k + 10]}\n      llama.cpp    {b[max(0, k - 2):k + 10]}")
    return set(bad)


def run_driver(driver, d, gguf):
    p = subprocess.run([driver, d, gguf], capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("driver")
    ap.add_argument("cases", nargs="*")
    bench = os.path.join(ROOT, "bench", ".venv", "bin", "python")
    ap.add_argument("--hf-python", default=sys.executable if importlib.util.find_spec("transformers") else bench)
    ap.add_argument("--work", default="/tmp/gguf_meta_check")
    ap.add_argument("--show", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    texts = read_texts()
    print(f"{len(texts)} texts")
    dirs, refusals = {}, {}
    for name, src, mt, edit, refusal, *cfg_edit in CASES:
        if a.cases and name not in a.cases:
            continue
        d = make_case(a.work, name, os.path.join(DATA, src), mt, edit, *cfg_edit)
        (refusals if refusal else dirs)[name] = (d, refusal)
    if not a.cases or "smollm2-gguf" in a.cases:
        if os.path.exists(os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")):
            dirs["smollm2-gguf"] = (smollm2_from_gguf(a.work, a.hf_python), None)
    failed = []
    for name, (d, want) in refusals.items():
        rc, err = run_driver(a.driver, d, os.path.join(a.work, name + ".gguf"))
        good = rc != 0 and want in err
        print(f"{name}: {'refused as expected' if good else 'NOT refused as expected'} (exit {rc}): {err}")
        if not good:
            failed.append(name)
    ggufs = {}
    for name, (d, _) in dirs.items():
        gguf = os.path.join(a.work, name + ".gguf")
        rc, err = run_driver(a.driver, d, gguf)
        if rc:
            print(f"{name}: gguf_meta_main failed (exit {rc}): {err}")
            failed.append(name)
        else:
            ggufs[name] = gguf
    job = {"dirs": {n: dirs[n][0] for n in ggufs}, "texts": texts, "out": os.path.join(a.work, "hf.json")}
    json.dump(job, open(os.path.join(a.work, "job.json"), "w"))
    subprocess.run([a.hf_python, __file__, "--hf-phase", os.path.join(a.work, "job.json")], check=True)
    hf = json.load(open(job["out"]))
    for name, gguf in ggufs.items():
        print(f"{name} ({hf[name]['class']}):")
        if not compare(hf[name], llama_ids(gguf, texts), texts, a.show, excused(dirs[name][0], texts)):
            failed.append(name)
    print("FAILED: " + ", ".join(failed) if failed else "all cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--hf-phase":
        hf_phase(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
