#!/usr/bin/env python3
"""make_chat_cmd_goldens.py — what transformers' apply_chat_template gives for the conversations
tests/cli/test_chat_cmd.sh renders with `ptrain tokenize --chat` and `ptrain generate --chat
--show-prompt`: the tiny Qwen2 model of tests/data/qwen2/hf with a tokenizer_config.json that has
two named templates (default and tool_use, as a list of {name, template}), a pad and a mask token
the default template prints, and an enable_thinking keyword. Writes, in tests/data/tokenizer/chat-cmd/,
tokenizer_config.json and for case N: N.json (what tokenize --chat reads), N.args (the options,
one a line: --chat-template NAME, --chat-template-kwarg KEY=VALUE), N.gen (present when the case
adds the generation prompt, as generate --chat does), N.txt (apply_chat_template(...,
tokenize=False)) and N.ids (apply_chat_template(..., tokenize=True): no special tokens added).
Also specials.json, the special tokens' texts a template sees (tokenizer.special_tokens_map) for
test_tokenizer's test_template_specials: {"gguf": {"file", "tokens"}, "spm_dirs": [{"model",
"tokenizer_config", "special_tokens_map" (or null), "tokens"}], "json_dirs": [the same with
"tokenizer" in place of "model"]}: a GGUF with unknown_token_id and padding_token_id, a bare
tokenizer.model directory and a tokenizer.json directory with and without special_tokens_map.json.
Usage: tests/reference/make_chat_cmd_goldens.py"""
import json
import os
import shutil
import tempfile

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "data", "qwen2", "hf")
OUT = os.path.join(HERE, "..", "data", "tokenizer", "chat-cmd")

DEFAULT = (
    "{%- if pad_token is defined %}[pad {{ pad_token }} mask {{ mask_token }}]\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
TOOL_USE = (
    "{%- if tools %}<|im_start|>system\ntools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }} (tool_use)\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi"}]
PROMPT = [{"role": "user", "content": "What is 2+2?"}]


def main():
    cfg = json.load(open(os.path.join(MODEL, "tokenizer_config.json"), encoding="utf-8"))
    cfg["mask_token"] = "<|im_start|>"
    cfg["chat_template"] = [{"name": "default", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)
        f.write("\n")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(MODEL, "tokenizer.json"), tmp)
        shutil.copy(os.path.join(OUT, "tokenizer_config.json"), tmp)
        tok = AutoTokenizer.from_pretrained(tmp)
        for name, inp, template, kwargs, gen in [
            ("the default template, pad and mask texts", CHAT, None, {}, False),
            ("enable_thinking=false from a kwarg", PROMPT, None, {"enable_thinking": False}, True),
            ("tools: the tool_use template", {"messages": CHAT, "tools": TOOLS}, None, {}, False),
            ("--chat-template tool_use", CHAT, "tool_use", {}, False),
            ("--chat-template default with tools", {"messages": CHAT, "tools": TOOLS}, "default", {}, False),
        ]:
            msgs = inp["messages"] if isinstance(inp, dict) else inp
            tools = inp.get("tools") if isinstance(inp, dict) else None
            args = dict(tools=tools, chat_template=template, add_generation_prompt=gen, **kwargs)
            text = tok.apply_chat_template(msgs, tokenize=False, **args)
            ids = tok.apply_chat_template(msgs, tokenize=True, return_dict=False, **args)
            if isinstance(ids, dict):
                ids = ids["input_ids"]
            kw = ["%s=%s" % (k, json.dumps(v)) for k, v in kwargs.items()]
            cases.append((inp, (["--chat-template", template] if template else []) +
                          [a for k in kw for a in ("--chat-template-kwarg", k)], gen, text, ids))
    for n, (inp, args, gen, text, ids) in enumerate(cases, 1):
        base = os.path.join(OUT, str(n))
        with open(base + ".json", "w", encoding="utf-8") as f:
            f.write(json.dumps(inp, ensure_ascii=False) + "\n")
        with open(base + ".args", "w", encoding="utf-8") as f:
            f.write("".join(a + "\n" for a in args))
        if gen:
            open(base + ".gen", "w").close()
        elif os.path.exists(base + ".gen"):
            os.remove(base + ".gen")
        with open(base + ".txt", "w", encoding="utf-8") as f:
            f.write(text)
        with open(base + ".ids", "w", encoding="utf-8") as f:
            f.write(" ".join(str(i) for i in ids) + "\n")

    specials()


SPM_DIRS = [
    ({"tokenizer_class": "LlamaTokenizer"}, None),
    ({"tokenizer_class": "LlamaTokenizer", "pad_token": "<unk>"},
     {"pad_token": "</s>", "sep_token": "<sep>",
      "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}}),
    ({}, {"unk_token": "<unk>", "cls_token": "<s>"}),
    ({"tokenizer_class": "LlamaTokenizer", "added_tokens_decoder": {}}, {"pad_token": "</s>"}),
]

JSON_DIRS = [
    ({"eos_token": "<|im_end|>"},
     {"pad_token": "<|endoftext|>", "sep_token": "<|im_start|>",
      "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}}),
    ({"eos_token": "<|im_end|>", "pad_token": "<|im_start|>", "added_tokens_decoder": {}}, {"pad_token": "<|endoftext|>"}),
    ({"eos_token": "<|im_end|>", "unk_token": "<|endoftext|>"}, None),
]


def specials():
    data = os.path.join(HERE, "..", "data", "tokenizer")
    tok = AutoTokenizer.from_pretrained(os.path.join(data, "spm"), gguf_file="gemma.gguf")
    out = {"gguf": {"file": "spm/gemma.gguf", "tokens": tok.special_tokens_map}, "spm_dirs": []}
    for cfg, smap in SPM_DIRS:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(data, "spm-model", "llama.model"), os.path.join(tmp, "tokenizer.model"))
            with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            if smap is not None:
                with open(os.path.join(tmp, "special_tokens_map.json"), "w", encoding="utf-8") as f:
                    json.dump(smap, f)
            tok = AutoTokenizer.from_pretrained(tmp)
            out["spm_dirs"].append({"model": "spm-model/llama.model", "tokenizer_config": cfg,
                                    "special_tokens_map": smap, "tokens": tok.special_tokens_map})
    out["json_dirs"] = []
    for cfg, smap in JSON_DIRS:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(MODEL, "tokenizer.json"), tmp)
            with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            if smap is not None:
                with open(os.path.join(tmp, "special_tokens_map.json"), "w", encoding="utf-8") as f:
                    json.dump(smap, f)
            tok = AutoTokenizer.from_pretrained(tmp)
            out["json_dirs"].append({"tokenizer": "../qwen2/hf/tokenizer.json", "tokenizer_config": cfg,
                                     "special_tokens_map": smap, "tokens": tok.special_tokens_map})
    with open(os.path.join(OUT, "specials.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
