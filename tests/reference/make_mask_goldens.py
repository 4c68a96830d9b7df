#!/usr/bin/env python3
"""Goldens for ptrain's assistant-only labels at the dataset level (tests/unit/test_dataset.c,
test_masks_match_trl): conversation rows tokenized with the Qwen2-mini tokenizer
(tests/data/tokenizer/qwen2-mini) and a real chat template, and the assistant mask TRL 1.16's
SFTTrainer trains with (assistant_only_loss=True):

  generation   templates with {% generation %} blocks (LFM2.5, Laguna): apply_chat_template(...,
               return_dict=True, return_assistant_tokens_mask=True), as SFTTrainer's tokenize_fn
               calls it; ptrain must give the same ids and the same mask.
  trl-training Qwen3's template, which has no such blocks: SFTTrainer swaps in TRL's training
               variant of it (get_training_chat_template: the same rendering plus {% generation %}
               blocks around each assistant turn, its <think> block kept), which renders the
               conversations below exactly as Qwen3's own template does (checked here); the mask
               comes from that variant. ptrain renders with Qwen3's own template (the generation
               prompt method of src/data/label.c).
  trl-completion Qwen3's template on a multi-turn conversation as a conversational prompt +
               completion row: TRL's completion_mask (the tokens after the prompt rendered with the
               generation prompt); compared from the prompt's end on ("from"), the earlier turns
               being TRL's prompt.

The other templates of the corpus TRL has a training variant of (Qwen2.5, Gemma 2, Gemma 3,
Phi-3.5, Qwen3.5, Nemotron 3 Nano, gpt-oss; Llama 3.1/3.2 have none) are compared as Qwen3's on the conversations the
variant renders exactly as the template does; Qwen2.5's, Qwen3.5's and Nemotron's as prompt +
completion (their variants label the newline after "<|im_start|>assistant", or the "<think>" of
the generation prompt, which the prompt holds); gpt-oss's with its special tokens added to the
tokenizer (saved as masks/gptoss-tokenizer), its variant's mask less each turn's header
"<|start|>assistant" (inside the block there, in the prompt for ptrain).

  With enable_thinking false the generation prompt holds the empty <think> block, so ptrain (as
  TRL's prompt + completion rows, and inference) takes it as prompt, where TRL's training variant
  labels it: those rows are compared as prompt + completion (qwen3-nothink).

Without {% generation %} blocks ptrain labels a turn's end-of-turn token but not the white space
the template writes after it (the "\\n" after <|im_end|>): "mask" is TRL's with such trailing
white-space-only tokens of each span dropped there, "trl_mask" TRL's own. Writes tests/data/templates/masks/<group>.jsonl (the rows,
one dataset per template and chat_template_kwargs) and masks/goldens.json. Run with
~/.cache/ptrain/pyenv/bin/python (transformers, trl==1.16.0).
"""
import json
import os
import shutil

import datetime as _dt

import transformers.utils.chat_template_utils as ctu
import trl
from transformers import AutoTokenizer
from trl.chat_template_utils import get_training_chat_template

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = _dt.datetime(2023, 11, 14, 22, 13, 20)  # strftime_now (gpt-oss's date); the C test sets SOURCE_DATE_EPOCH


class _PinnedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = _PinnedDatetime
TEMPLATES = os.path.join(HERE, "..", "data", "templates")
OUT = os.path.join(TEMPLATES, "masks")
TOKENIZER = os.path.join(HERE, "..", "data", "tokenizer", "qwen2-mini")
# Qwen3's template as Qwen ships it now, from the trl package (its qwen3.jinja, "Original Qwen3 chat template")
QWEN3 = "Qwen-Qwen3-trl.jinja"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
CALL = [{"type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]

SYSTEM = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 = 4."}]
SINGLE = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"}]
REASON = [{"role": "user", "content": "What is 3*7?"},
          {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."}]
THINK_IN_CONTENT = [{"role": "user", "content": "Name a sea."},
                    {"role": "assistant", "content": "<think>\nA sea near Italy.\n</think>\n\nThe Adriatic."}]
TOOL_CALL = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "", "tool_calls": CALL}]
MULTI = [{"role": "user", "content": "  Héllo 👋\n\nwith  spaces\t"},
         {"role": "assistant", "content": "\nSure — here:\n```py\nprint(1)\n```\n "},
         {"role": "user", "content": "多谢"}, {"role": "assistant", "content": "不客气!"}]
TOOL_TURNS = [{"role": "system", "content": "You can call tools."},
              {"role": "user", "content": "What's the weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": CALL},
              {"role": "tool", "name": "get_weather", "content": "18 C, sunny"},
              {"role": "assistant", "content": "It is 18 C and sunny in Paris."}]
REASON_MULTI = [{"role": "user", "content": "What is 3*7?"},
                {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."},
                {"role": "user", "content": "And 4*5?"},
                {"role": "assistant", "content": "20", "reasoning_content": "4 times 5 is 20."}]


def drop_trailing_space(tok, ids, mask):
    """TRL's mask less the white-space-only tokens that end each labelled run."""
    out = list(mask)
    t = len(out)
    while t > 0:
        t -= 1
        if not out[t]:
            continue
        end = t  # the last token of a run
        while end >= 0 and out[end] and tok.decode([ids[end]]).strip() == "" and (end == 0 or out[end - 1]):
            out[end] = 0
            end -= 1
        while t > 0 and out[t - 1]:
            t -= 1
    return out


def drop_header(tok, ids, mask, header):
    """TRL's mask less the tokens of each labelled run that spell header (the turn's own header,
    which TRL's gpt-oss variant puts inside the block and ptrain leaves to the prompt)."""
    out = list(mask)
    t = 0
    while t < len(out):
        if out[t] and (t == 0 or not out[t - 1]):
            text, u = "", t
            while u < len(out) and out[u] and header.startswith(text + tok.decode([ids[u]])) and text != header:
                text += tok.decode([ids[u]])
                u += 1
            if text == header:
                for v in range(t, u):
                    out[v] = 0
                t = u
                continue
        t += 1
    return out


def row(messages, tools):
    r = {"messages": messages}
    if tools:
        r["tools"] = tools
    return r


def main():
    shutil.copyfile(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja"),
                    os.path.join(TEMPLATES, QWEN3))
    tok = base = AutoTokenizer.from_pretrained(TOKENIZER)
    os.makedirs(OUT, exist_ok=True)
    groups = []

    def add_group(name, template, kwargs, method, cases, header=None):
        rows, golden = [], []
        for messages, tools, frm in cases:
            if method == "trl-completion":
                prompt, completion = messages[:-1], messages[-1:]
                prompt_ids = tok.apply_chat_template(prompt, chat_template=text, tools=tools, tokenize=True,
                                                     return_dict=True, add_generation_prompt=True, **kwargs)["input_ids"]
                out = tok.apply_chat_template(prompt + completion, chat_template=text, tools=tools, tokenize=True,
                                              return_dict=True, **kwargs)
                ids = list(out["input_ids"])
                assert ids[:len(prompt_ids)] == list(prompt_ids), "prompt not a prefix"
                frm = len(prompt_ids)
                trl_mask = [0] * frm + [1] * (len(ids) - frm)
            else:
                chat = text if method == "generation" else training
                if method == "trl-training":
                    own = tok.apply_chat_template(messages, chat_template=text, tools=tools, tokenize=False, **kwargs)
                    patched = tok.apply_chat_template(messages, chat_template=training, tools=tools, tokenize=False,
                                                      **kwargs)
                    assert own == patched, f"{name}: the training template renders {messages} otherwise"
                out = tok.apply_chat_template(messages, chat_template=chat, tools=tools, tokenize=True,
                                              return_dict=True, return_assistant_tokens_mask=True, **kwargs)
                ids, trl_mask = list(out["input_ids"]), list(out["assistant_masks"])
            rows.append(row(messages, tools))
            mask = trl_mask if method == "generation" else drop_trailing_space(tok, ids, trl_mask)
            if header:
                mask = drop_header(tok, ids, mask, header)
            golden.append({"ids": ids, "trl_mask": trl_mask, "mask": mask, "from": frm})
        with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        group = {"name": name, "template": template, "kwargs": kwargs, "method": method, "rows": golden}
        if tok is not base:
            group["tokenizer"] = "templates/masks/gptoss-tokenizer"
        groups.append(group)

    for template in ("LFM2.5-8B-A1B.jinja", "poolside-Laguna-XS.2.jinja"):
        with open(os.path.join(TEMPLATES, template), encoding="utf-8", newline="") as f:
            text = f.read()
        cases = [(SYSTEM, None, 0), (MULTI, None, 0), (TOOL_TURNS, TOOLS, 0), (REASON_MULTI, None, 0)]
        add_group(template.split("-")[0].split(".")[0].lower(), template, {}, "generation", cases)

    with open(os.path.join(TEMPLATES, QWEN3), encoding="utf-8", newline="") as f:
        text = f.read()
    tok.chat_template = text
    training = get_training_chat_template(tok)
    assert training and "generation" in training
    single = [(SYSTEM, None, 0), (SINGLE, None, 0), (REASON, None, 0), (THINK_IN_CONTENT, None, 0),
              (TOOL_CALL, TOOLS, 0)]
    add_group("qwen3", QWEN3, {}, "trl-training", single)
    add_group("qwen3-nothink", QWEN3, {"enable_thinking": False}, "trl-completion",
              [(SYSTEM, None, 0), (SINGLE, None, 0), (TOOL_CALL, TOOLS, 0)])
    add_group("qwen3-multi", QWEN3, {}, "trl-completion",
              [(MULTI, None, 0), (TOOL_TURNS, TOOLS, 0), (REASON_MULTI, None, 0)])

    # the other templates of the corpus that TRL has a training variant of: the conversations each
    # renders exactly as the template itself does (TRL's variants differ elsewhere: Qwen2.5's keeps
    # no more, gpt-oss's keeps earlier turns' reasoning, ...), compared as for Qwen3
    skipped = []
    # Qwen2.5's variant opens the block before the header's newline, Qwen3.5's and Nemotron's before the "<think>"
    # its generation prompt holds, which TRL's prompt + completion mask (and ptrain) leave out:
    # compared as prompt + completion
    COMPLETION = ("qwen2.5", "qwen3.5", "nemotron3-nano")
    for template, name in (("Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2.5"), ("google-gemma-2-2b-it.jinja", "gemma2"),
                           ("google-gemma-3-trl.jinja", "gemma3"), ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3.1"),
                           ("meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3.2"),
                           ("microsoft-Phi-3.5-mini-instruct.jinja", "phi3.5"), ("Qwen3.5-4B.jinja", "qwen3.5"),
                           ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "nemotron3-nano")):
        with open(os.path.join(TEMPLATES, template), encoding="utf-8", newline="") as f:
            text = f.read()
        tok.chat_template = text
        try:
            training = get_training_chat_template(tok)
        except ValueError:  # TRL stores the template for identity only (Llama 3.1/3.2: no training variant)
            skipped.append(f"{name} (no training variant in TRL)")
            continue
        assert training and "generation" in training, template
        cases = []
        for conv, messages, tools in (("system", SYSTEM, None), ("single", SINGLE, None), ("multiturn", MULTI, None),
                                      ("tools", TOOL_TURNS, TOOLS), ("reasoning", REASON_MULTI, None),
                                      ("tool_call", TOOL_CALL, TOOLS)):
            completion = name in COMPLETION
            try:
                own = tok.apply_chat_template(messages, chat_template=text, tools=tools, tokenize=False)
                patched = tok.apply_chat_template(messages, chat_template=training, tools=tools, tokenize=False)
                if completion:  # the prompt must begin the whole rendering, as TRL warns otherwise
                    prompt = tok.apply_chat_template(messages[:-1], chat_template=text, tools=tools, tokenize=False,
                                                     add_generation_prompt=True)
                    patched = own if own.startswith(prompt) else ""
            except Exception:
                own, patched = None, ""
            if own == patched:
                cases.append((messages, tools, 0))
            else:
                skipped.append(f"{name}/{conv}")
        add_group(name, template, {}, "trl-completion" if name in COMPLETION else "trl-training", cases)
    # gpt-oss with its special tokens added to Qwen2-mini's tokenizer (saved beside the rows for the
    # C test): TRL's variant renders every conversation as the template does, and labels each
    # turn from its header "<|start|>assistant" on, which the prompt holds for ptrain
    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    tok.add_special_tokens({"additional_special_tokens": ["<|start|>", "<|end|>", "<|return|>", "<|channel|>",
                                                         "<|message|>", "<|call|>", "<|constrain|>"]})
    tok_dir = os.path.join(OUT, "gptoss-tokenizer")
    tok.save_pretrained(tok_dir)
    for extra in os.listdir(tok_dir):
        if extra not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(tok_dir, extra))
    with open(os.path.join(TEMPLATES, "openai-gpt-oss-120b.jinja"), encoding="utf-8", newline="") as f:
        text = f.read()
    tok.chat_template = text
    training = get_training_chat_template(tok)
    cases = []
    for conv, messages, tools in (("system", SYSTEM, None), ("single", SINGLE, None), ("multiturn", MULTI, None),
                                  ("tools", TOOL_TURNS, TOOLS), ("reasoning", REASON_MULTI, None),
                                  ("tool_call", TOOL_CALL, TOOLS)):
        own = tok.apply_chat_template(messages, chat_template=text, tools=tools, tokenize=False)
        patched = tok.apply_chat_template(messages, chat_template=training, tools=tools, tokenize=False)
        if own == patched:
            cases.append((messages, tools, 0))
        else:
            skipped.append(f"gptoss/{conv}")
    add_group("gptoss", "openai-gpt-oss-120b.jinja", {}, "trl-training", cases, header="<|start|>assistant")

    print("not compared (TRL's training variant renders them otherwise, or the template refuses them):",
          ", ".join(skipped))

    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "qwen2-mini", "groups": groups}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(groups)} groups, {sum(len(g['rows']) for g in groups)} rows")


if __name__ == "__main__":
    main()
