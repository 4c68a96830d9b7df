"""hf_meta_check.py — the transformers side of tests/export/test_hf_meta.sh: load the metadata
files hf_meta_from_gguf wrote (hf_meta_main write) with transformers and check that they say what
the GGUF says and tokenize as ptrain does.

  hf_meta_check.py check DRIVER GGUF DIR SRCDIR [vocab-only]
  hf_meta_check.py fixtures OUT SRCDIR     write tokenizer-only GGUFs to OUT: qwen2.gguf (the
                                           qwen2-mini vocabulary, pre "qwen2") and rope-*.gguf
                                           (llama3: a Llama 3.1 rope_freqs tensor; bad: one
                                           that is not; linear: linear scaling; yarn)
  hf_meta_check.py rope GGUF DIR           transformers' rotary frequencies from DIR/config.json
                                           equal the GGUF's (theta, rope_freqs, linear factor)

DRIVER is hf_meta_main, GGUF the model the files were made from, DIR where they are, SRCDIR the
source tree (texts: tests/data/tokenizer/corpus.txt, its lines and 8-line chunks as the unit tests
build them, and the texts of share/data/pirate-instructions.jsonl; chats: that file's
conversations and tests/data/tokenizer/chat_goldens.json's). Checks, each printed with its
numbers:
  config     AutoConfig loads config.json; sizes, ids and rope equal the GGUF's
  encode     tokenizer.encode(text, add_special_tokens=False) == ptrain's ids from the GGUF
             (AutoTokenizer's class: for qwen2 transformers forces Qwen2Tokenizer, which
             NFC-normalizes first; texts NFC changes are counted apart), and the same with
             the `tokenizers` library reading tokenizer.json directly
  special    tokenizer(text).input_ids == ptrain's tokenizer_encode_text (texts not starting with bos)
  decode     tokenizer.decode(ids) == ptrain's decode (texts whose bytes decode as UTF-8)
  roundtrip  ptrain reading DIR/tokenizer.json gives the GGUF tokenizer's ids
  chat       apply_chat_template(tokenize=False) == ptrain's rendering of the same messages
Exit 0 when every check holds for every text."""
import json
import os
import subprocess
import sys
import tempfile
import unicodedata

import gguf
from transformers import AutoConfig, AutoTokenizer

CHUNK_LINES = 8


def gguf_fields(path):
    r = gguf.GGUFReader(path)
    out = {}
    for k, f in r.fields.items():
        if not f.types or f.types[0] == gguf.GGUFValueType.ARRAY:
            out[k] = len(f.data) if f.types else None
            continue
        v = f.parts[f.data[0]]
        out[k] = bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v.tolist()[0]
    return out, r


def texts(srcdir):
    raw = open(os.path.join(srcdir, "tests/data/tokenizer/corpus.txt"), "rb").read()
    lines = [b.decode("utf-8") for b in raw.split(b"\n")[:-1]]
    seps = ["\n", "\n\n", "\r\n"]
    chunks = [seps[k % 3].join(lines[k * CHUNK_LINES:(k + 1) * CHUNK_LINES]) for k in range(len(lines) // CHUNK_LINES)]
    pirate = []
    for line in open(os.path.join(srcdir, "share/data/pirate-instructions.jsonl"), encoding="utf-8"):
        pirate += [m["content"] for m in json.loads(line)["messages"]]
    return lines + chunks + pirate


def chats(srcdir):
    out = []
    for line in open(os.path.join(srcdir, "share/data/pirate-instructions.jsonl"), encoding="utf-8"):
        msgs = json.loads(line)["messages"]
        out.append({"messages": msgs, "add_generation_prompt": False})
        out.append({"messages": msgs[:-1], "add_generation_prompt": True})
        out.append({"messages": [{"role": "system", "content": "Talk like a pirate."}] + msgs, "add_generation_prompt": False})
    seen = set()
    for r in json.load(open(os.path.join(srcdir, "tests/data/tokenizer/chat_goldens.json")))["renders"]:
        key = json.dumps([r["messages"], r["add_generation_prompt"]])
        if key not in seen:
            seen.add(key)
            out.append({"messages": r["messages"], "add_generation_prompt": r["add_generation_prompt"]})
    return out


def run_driver(driver, mode, src, items, tmp):
    path = os.path.join(tmp, mode + ".jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=True) + "\n")
    out = subprocess.run([driver, mode, src, path], check=True, capture_output=True).stdout.decode("utf-8")
    return [json.loads(line) for line in out.split("\n") if line]


def report(name, good, total, detail=""):
    print(f"{name}: {good}/{total} equal{detail}")
    return good == total


def check_config(d, fields, vocab_only):
    arch = fields["general.architecture"]
    c = AutoConfig.from_pretrained(d)
    want = {
        "model_type": arch,
        "num_hidden_layers": fields.get(f"{arch}.block_count"),
        "hidden_size": fields.get(f"{arch}.embedding_length"),
        "intermediate_size": fields.get(f"{arch}.feed_forward_length"),
        "num_attention_heads": fields.get(f"{arch}.attention.head_count"),
        "num_key_value_heads": fields.get(f"{arch}.attention.head_count_kv", fields.get(f"{arch}.attention.head_count")),
        "max_position_embeddings": fields.get(f"{arch}.context_length"),
        "bos_token_id": fields.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": fields.get("tokenizer.ggml.eos_token_id"),
    }
    if not vocab_only:
        want["vocab_size"] = fields.get(f"{arch}.vocab_size", fields["tokenizer.ggml.tokens"])
        if f"{arch}.rope.freq_base" in fields:
            rp = getattr(c, "rope_parameters", None) or {}
            got_theta = rp.get("rope_theta", getattr(c, "rope_theta", None))
            want_theta = fields[f"{arch}.rope.freq_base"]
            if abs(got_theta - want_theta) > 1e-6 * want_theta:
                print(f"config: rope_theta {got_theta}, expected {want_theta}")
                return False
        if f"{arch}.attention.layer_norm_rms_epsilon" in fields:
            want_eps = fields[f"{arch}.attention.layer_norm_rms_epsilon"]
            if abs(c.rms_norm_eps - want_eps) > 1e-6 * want_eps:
                print(f"config: rms_norm_eps {c.rms_norm_eps}, expected {want_eps}")
                return False
    bad = [f"{k}: {getattr(c, k, None)} (expected {v})" for k, v in want.items() if v is not None and getattr(c, k, None) != v]
    print(f"config: {type(c).__name__} with {len(want) - len(bad)}/{len(want)} sizes and ids as the GGUF says"
          + ("" if not bad else "; differ: " + ", ".join(bad)))
    return not bad


def nfc_differs(tok, text):
    """transformers 5 loads model_type qwen2 with Qwen2Tokenizer whatever tokenizer_config.json
    says, and that class puts an NFC normalizer in front (as Qwen2's own tokenizer.json has);
    ptrain's GGUF tokenizer, like llama.cpp, does not normalize. Only text that NFC changes can
    tokenize differently."""
    return type(tok).__name__ == "Qwen2Tokenizer" and unicodedata.normalize("NFC", text) != text


def check_encode(tok, ptrain, items):
    good = nfc = first_bad = 0
    for i, (text, p) in enumerate(zip(items, ptrain)):
        hf = tok.encode(text, add_special_tokens=False)
        if hf == p["ids"]:
            good += 1
        elif nfc_differs(tok, text):
            nfc += 1
        elif not first_bad:
            first_bad = 1
            print(f"encode: first difference, text {i} {text[:80]!r}:\n  hf     {hf[:40]}\n  ptrain {p['ids'][:40]}")
    note = f" ({nfc} more differ only by transformers' NFC normalization of text that is not NFC)" if nfc else ""
    return report("encode (no special tokens)", good, len(items) - nfc, note)


def check_raw(d, ptrain, items):
    """The tokenizer.json itself, as the `tokenizers` library runs it (no transformers class)."""
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    good = sum(t.encode(text, add_special_tokens=False).ids == p["ids"] for text, p in zip(items, ptrain))
    return report("encode with `tokenizers` reading tokenizer.json", good, len(items))


def check_special(tok, ptrain, items):
    bos = tok.bos_token
    good = total = 0
    for text, p in zip(items, ptrain):
        if (bos and text.startswith(bos)) or nfc_differs(tok, text):
            continue  # ptrain adds no second bos to such text; transformers does
        total += 1
        good += tok(text)["input_ids"] == p["text_ids"]
    return report("encode (with the tokenizer's special tokens)", good, total)


def check_decode(tok, ptrain):
    good = total = 0
    for p in ptrain:
        if p.get("decoded") is None:
            continue
        total += 1
        good += tok.decode(p["ids"]) == p["decoded"]
    return report("decode", good, total)


def check_roundtrip(mine, ptrain):
    good = sum(a["ids"] == b["ids"] and a["text_ids"] == b["text_ids"] for a, b in zip(mine, ptrain))
    return report("ptrain reading the written tokenizer.json", good, len(ptrain))


def check_chat(tok, items, rendered):
    if tok.chat_template is None:
        print("chat: the GGUF has no chat template; nothing to compare")
        return True
    good = total = 0
    names = set()
    for it, r in zip(items, rendered):
        if r.get("text") is None:
            continue
        names.add(r["template"])
        total += 1
        hf = tok.apply_chat_template(it["messages"], tokenize=False, add_generation_prompt=it["add_generation_prompt"])
        if hf == r["text"]:
            good += 1
        elif good + 1 == total:
            print(f"chat: first difference:\n  hf     {hf!r}\n  ptrain {r['text']!r}")
    if total == 0:
        print("chat: ptrain knows no built-in template for this model's chat template; nothing to compare")
        return True
    return report(f"chat template ({', '.join(sorted(names))})", good, total)


def qwen2_vocab(srcdir):
    """The qwen2-mini tokenizer.json as GGUF tokenizer keys: tokens, types, merges."""
    t = json.load(open(os.path.join(srcdir, "tests/data/tokenizer/qwen2-mini/tokenizer.json"), encoding="utf-8"))
    vocab = t["model"]["vocab"]
    added = {a["id"]: a for a in t["added_tokens"]}
    n = max(max(vocab.values()), max(added)) + 1
    tokens, types = [""] * n, [1] * n
    for tok, i in vocab.items():
        tokens[i] = tok
    for i, a in added.items():
        tokens[i] = a["content"]
        if i >= len(vocab):
            types[i] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    return tokens, types, merges


def write_fixture(path, arch, srcdir, dims, extra=None, tensors=()):
    tokens, types, merges = qwen2_vocab(srcdir)
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(1)
    w.add_context_length(dims.get("ctx", 64))
    w.add_embedding_length(dims["dim"])
    w.add_feed_forward_length(16)
    w.add_head_count(dims["heads"])
    w.add_head_count_kv(dims["heads"])
    if "theta" in dims:
        w.add_rope_freq_base(dims["theta"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(json.load(open(os.path.join(srcdir, "tests/data/tokenizer/qwen2-mini/tokenizer_config.json")))["chat_template"])
    if extra:
        extra(w)
    for name, data in tensors:
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama3_factors(theta, head_dim, factor=8.0, low=1.0, high=4.0, old=8192):
    """rope_freqs as llama.cpp's converter computes it for a Llama 3.1 rope_scaling."""
    import math
    import numpy as np
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / theta ** (i / head_dim)
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def cmd_fixtures(out, srcdir):
    os.makedirs(out, exist_ok=True)
    write_fixture(os.path.join(out, "qwen2.gguf"), "qwen2", srcdir, {"dim": 8, "heads": 2})
    big = {"dim": 256, "heads": 2, "theta": 500000.0, "ctx": 131072}
    factors = llama3_factors(500000.0, 128)
    write_fixture(os.path.join(out, "rope-llama3.gguf"), "llama", srcdir, big, tensors=[("rope_freqs.weight", factors)])
    bad = factors.copy()
    bad[len(bad) // 2] *= 1.01
    write_fixture(os.path.join(out, "rope-bad.gguf"), "llama", srcdir, big, tensors=[("rope_freqs.weight", bad)])

    def linear(w):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(4.0)

    def yarn(w):
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
    write_fixture(os.path.join(out, "rope-linear.gguf"), "llama", srcdir, big, extra=linear)
    write_fixture(os.path.join(out, "rope-yarn.gguf"), "llama", srcdir, big, extra=yarn)


def cmd_rope(gguf_path, d):
    """transformers' inv_freq from config.json against theta^(-2i/d) scaled as the GGUF says."""
    import numpy as np
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    fields, r = gguf_fields(gguf_path)
    arch = fields["general.architecture"]
    c = AutoConfig.from_pretrained(d)
    params = getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {}
    kind = params.get("rope_type", "default")
    head_dim = c.head_dim
    theta = fields.get(f"{arch}.rope.freq_base", 10000.0)
    want = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = [t for t in r.tensors if t.name == "rope_freqs.weight"]
    if freqs:
        want = want / np.asarray(freqs[0].data, dtype=np.float64)
    if fields.get(f"{arch}.rope.scaling.type") == "linear":
        want = want / fields[f"{arch}.rope.scaling.factor"]
    if kind == "default":
        got = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    else:
        got = ROPE_INIT_FUNCTIONS[kind](c, "cpu")[0].double().numpy()
    rel = float(np.max(np.abs(got - want) / want))
    print(f"rope: {kind} {json.dumps({k: v for k, v in params.items() if k != 'rope_theta'})}: transformers' "
          f"{len(got)} frequencies vs the GGUF's: max relative difference {rel:.1e}")
    sys.exit(0 if rel < 1e-5 else 1)


def main():
    if sys.argv[1] == "fixtures":
        return cmd_fixtures(*sys.argv[2:4])
    if sys.argv[1] == "rope":
        return cmd_rope(*sys.argv[2:4])
    driver, gguf_path, d, srcdir = sys.argv[2:6]
    vocab_only = len(sys.argv) > 6
    fields, _ = gguf_fields(gguf_path)
    ok = check_config(d, fields, vocab_only)
    tok = AutoTokenizer.from_pretrained(d)
    print(f"tokenizer: {type(tok).__name__}, {len(tok)} tokens, bos {tok.bos_token!r}, eos {tok.eos_token!r}")
    items = texts(srcdir)
    convs = chats(srcdir)
    with tempfile.TemporaryDirectory() as tmp:
        ptrain = run_driver(driver, "encode", gguf_path, items, tmp)
        mine = run_driver(driver, "encode", os.path.join(d, "tokenizer.json"), items, tmp)
        rendered = run_driver(driver, "chat", gguf_path, convs, tmp)
    ok &= check_encode(tok, ptrain, items)
    ok &= check_raw(d, ptrain, items)
    ok &= check_special(tok, ptrain, items)
    ok &= check_decode(tok, ptrain)
    ok &= check_roundtrip(mine, ptrain)
    ok &= check_chat(tok, convs, rendered)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
