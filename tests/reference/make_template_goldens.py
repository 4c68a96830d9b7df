#!/usr/bin/env python3
"""Goldens for ptrain's Jinja interpreter (src/template), rendered by transformers itself.

Writes into tests/data/templates/:
  unit_goldens.json    small templates, one feature each, rendered by the environment transformers
                       compiles chat templates with (ImmutableSandboxedEnvironment, trim_blocks,
                       lstrip_blocks, loopcontrols, its tojson/raise_exception/strftime_now/namespace);
                       a template that fails records the error's text instead.
  corpus_goldens.json  the real chat templates of tests/data/templates/*.jinja, each with the
                       conversations below (system or not, multi-turn, tools, tool results,
                       reasoning, generation prompt on and off, enable_thinking both ways), rendered
                       by render_jinja_template as apply_chat_template(..., tokenize=False) calls it,
                       with the assistant spans of return_assistant_tokens_mask where a template has
                       {% generation %} blocks (byte offsets into the UTF-8 text).

strftime_now is pinned to 2023-11-14 22:13:20 (the C test renders with the same time, TZ=UTC).
Run with the Python environment that has transformers (~/.cache/ptrain/pyenv/bin/python).
"""
import datetime as _dt
import glob
import json
import os

import transformers.utils.chat_template_utils as ctu

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "templates")
NOW = _dt.datetime(2023, 11, 14, 22, 13, 20)


class _PinnedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = _PinnedDatetime  # strftime_now reads the module's datetime at call time


def env_render(template, variables):
    return ctu._compile_jinja_template(template).render(**variables)


# ------------------------------------------------------------------------------------------------
# unit cases: (name, template, variables)
# ------------------------------------------------------------------------------------------------

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}]

UNIT = [
    ("text", "plain text\n", {}),
    ("output", "{{ a }}|{{ b }}|{{ c }}|{{ d }}|{{ e }}|{{ f }}", {"a": "x", "b": 1, "c": 1.5, "d": True, "e": None, "f": [1, "a"]}),
    ("floats", "{{ 0.1 }} {{ 1e20 }} {{ 1.0 }} {{ 2.5e-5 }} {{ 10 / 4 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("undefined", "[{{ nothing }}]{{ nothing is defined }}{{ nothing | default('d') }}{{ none_v | default('d') }}", {"none_v": None}),
    ("if", "{% if x > 1 %}big{% elif x == 1 %}one{% else %}small{% endif %}", {"x": 1}),
    ("for_loop", "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ loop.first }} {{ loop.last }} {{ m.role }}\n{% endfor %}", {"messages": MSGS}),
    ("for_prev_next", "{% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", {}),
    ("for_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("loop_controls", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("scope", "{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("set_block", "{% set t %}  a {{ 1 + 1 }}  {% endset %}[{{ t }}]{% set u | trim %}  b  {% endset %}[{{ u }}]", {}),
    ("macro", "{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(a=3, b=4) }}", {}),
    ("call_block", "{% macro wrap(x) %}[{{ caller() }}{{ x }}]{% endmacro %}{% call wrap(1) %}in{% endcall %}", {}),
    ("whitespace", "a  {%- if true -%}  b  {%- endif -%}  c\n  {% if true %}\n  d\n  {% endif %}\n{{- ' e ' -}}\n f", {}),
    ("lstrip_plus", "x\n    {%+ if true %}y{% endif %}\n  {# c #}\nz", {}),
    ("comments", "a{# one #}b {#- two -#} c\n{# three #}\nd", {}),
    ("raw", "{% raw %}{{ not }}{% endraw %}!", {}),
    ("strings", "{{ 'a\\tb\\n' ~ \"q'\" ~ 'x' 'y' }}|{{ '\\u00e9\\x41' }}", {}),
    ("filters_text", "{{ '  a b  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hello world-x' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}", {}),
    ("filters_seq", "{{ [3,1,2] | length }}|{{ [3,1,2] | first }}|{{ [3,1,2] | last }}|{{ [3,1,2] | join('-') }}|{{ [3,1,2] | sort | list }}|{{ [1,1,2] | unique | list }}|{{ 'abc' | list }}|{{ [1,2] | reverse | list }}", {}),
    ("filters_attr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ messages | rejectattr('role', 'in', ['system']) | list | length }}|{{ messages | map(attribute='role') | list }}", {"messages": MSGS}),
    ("filters_misc", "{{ '42' | int + 1 }}|{{ 'x' | int }}|{{ 3 | string ~ 'a' }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'a': 1} | items | list }}|{{ 'a\\nb\\n' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", {}),
    ("tojson", "{{ x | tojson }}\n{{ x | tojson(indent=2) }}\n{{ x | tojson(separators=(',', ':')) }}\n{{ 'é\"\\n' | tojson }}\n{{ x | tojson(sort_keys=true) }}",
     {"x": {"b": [1, 2.5, None, True], "a": {"c": "d"}, "e": []}}),
    ("tests", "{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ none is none }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 'a' is in 'abc' }}{{ x is sequence }}{{ 1 is equalto 1 }}", {"x": [1]}),
    ("str_methods", "{{ 'a,b,,c'.split(',') }}{{ '  a  b '.split() }}{{ 'a b c'.rsplit(' ', 1) }}{{ 'xxaxx'.strip('x') }}{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ '{} and {}'.format(1, 'b') }}{{ 'ab'.upper() }}{{ 'a-b c'.title() }}", {}),
    ("dict_methods", "{{ d.get('a') }}{{ d.get('z', 'none') }}{{ d.get('z') }}{{ d.keys() | list }}{{ d.values() | list }}{{ d['a'] }}{{ d.a }}", {"d": {"a": 1, "b": 2}}),
    ("slicing", "{{ messages[1:] | length }}{{ messages[-1].role }}{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ [1,2,3,4][::2] }}{{ 'héllo'[1] }}", {"messages": MSGS}),
    ("operators", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ not true }} {{ 1 if false }} {{ 0 or 'x' }} {{ 1 and 2 }} {{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 4 not in [1] }} {{ -3 }}", {}),
    ("compare", "{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1, 2] == [1, 2] }}{{ none == none }}{{ 1 != 2 }}{{ true == 1 }}", {}),
    ("raise", "{% if messages | length > 1 %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}", {"messages": MSGS}),
    ("strftime", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d') }}", {}),
    ("recursive_loop", "{% for item in tree recursive %}{{ item.name }}{% if item.children %}({{ loop(item.children) }}){% endif %}{% endfor %}",
     {"tree": [{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c"}]}, {"name": "d"}]}),
    ("generation", "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}", {"messages": MSGS}),
    ("is_not", "{{ x is not defined }}{{ x is not none }}{{ not x is defined }}", {}),
    ("tuple_set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 'x') %}{{ t }}", {}),
    ("dict_literal", "{{ {'a': 1, 'b': [1, {'c': 'd'}]} }}{{ dict(a=1) }}", {}),
    ("cycle", "{% for i in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("err_undefined_attr", "{{ nothing.attr }}", {}),
    ("err_syntax", "{% if x %}unclosed", {}),
    ("err_unknown_filter", "{{ 1 | nope }}", {}),
    ("err_type", "{{ 1 + 'a' }}", {}),
    ("err_sandbox_append", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("err_range", "{% for i in range(1000000) %}{% endfor %}", {}),
    ("trailing_newline", "a\n\n", {}),
    ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
    ("unicode_strip", "[{{ '\u00a0\u2003x\u3000' | trim }}]{{ 'ÉCOLE' | lower }}{{ 'é' | length }}", {}),
    ("int_str_repr", "{{ ['a', \"b'c\", 'd\"e', 1.0, None, True] }}{{ {'k': 'v'} }}{{ (1,) }}", {}),
]


def unit_goldens():
    cases = []
    for name, template, variables in UNIT:
        case = {"name": name, "template": template, "vars": variables}
        try:
            case["expected"] = env_render(template, variables)
        except Exception as e:  # the C side must fail too, with this message where it is the template's own
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    return cases


# ------------------------------------------------------------------------------------------------
# corpus: real templates x conversations
# ------------------------------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}]

CONVERSATIONS = {
    "single": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system": {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "What is 2+2?"},
                            {"role": "assistant", "content": "2+2 = 4."}]},
    "multiturn": {"messages": [{"role": "user", "content": "  Héllo 👋\n\nwith  spaces\t"},
                               {"role": "assistant", "content": "\nSure — here:\n```py\nprint(1)\n```\n "},
                               {"role": "user", "content": "多谢"},
                               {"role": "assistant", "content": "不客气!"}]},
    "tools": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function", "function": {
            "name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is 18 C and sunny in Paris."}]},
    "tools_offered": {"tools": TOOLS, "messages": [{"role": "user", "content": "Weather in Oslo?"}]},
    "reasoning": {"messages": [
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."},
        {"role": "user", "content": "And 4*5?"},
        {"role": "assistant", "content": "20", "reasoning_content": "4 times 5 is 20."}]},
}

# special tokens as each model's tokenizer has them (apply_chat_template passes special_tokens_map)
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
DEEPSEEK = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}
TOKENS = {
    "Qwen": QWEN, "google-gemma-2": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
    "google-gemma-3": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
    "google-gemma-4": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "meta-llama": LLAMA3, "NousResearch": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "fireworks": LLAMA3, "meetkai": LLAMA3, "mistralai": MISTRAL, "Mistral": MISTRAL, "unsloth-mistral": MISTRAL,
    "microsoft-Phi-3.5": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
    "microsoft-Phi-4-mini": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                             "unk_token": "<|endoftext|>"},
    "microsoft-phi-4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|dummy_85|>"},
    "unsloth-phi-4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|dummy_85|>"},
    "deepseek": DEEPSEEK, "HuggingFaceTB-SmolLM3": {"eos_token": "<|im_end|>", "pad_token": "<|im_end|>"},
    "openai-gpt-oss": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
    "ibm-granite": {"bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>"},
    "CohereForAI": {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"},
    "moonshotai": {"bos_token": "[BOS]", "eos_token": "[EOS]"}, "GLM": {"eos_token": "<|endoftext|>"},
    "LFM2": {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>"},
    "poolside": {"bos_token": "<s>", "eos_token": "</s>"},
}


def tokens_for(name):
    for prefix, toks in TOKENS.items():
        if name.startswith(prefix):
            return toks
    return {}


def byte_spans(text, spans):
    return [[len(text[:a].encode()), len(text[:b].encode())] for a, b in spans]


def corpus_goldens():
    cases = []
    for path in sorted(glob.glob(os.path.join(OUT, "*.jinja"))):
        name = os.path.basename(path)[:-len(".jinja")]
        with open(path, encoding="utf-8", newline="") as f:
            template = f.read()
        thinking = [None] + ([True, False] if "enable_thinking" in template else [])
        masks = "generation" in template and ctu.re.search(r"\{\%-?\s*generation\s*-?\%\}", template) is not None
        for conv_name, conv in CONVERSATIONS.items():
            for gen in (False, True):
                for think in thinking:
                    kwargs = dict(tokens_for(name))
                    if think is not None:
                        kwargs["enable_thinking"] = think
                    case = {"template": name, "conversation": conv_name, "add_generation_prompt": gen,
                            "kwargs": kwargs}
                    try:
                        out, idx = ctu.render_jinja_template(
                            conversations=[json.loads(json.dumps(conv["messages"]))], tools=conv.get("tools"),
                            chat_template=template, add_generation_prompt=gen,
                            return_assistant_tokens_mask=masks, **kwargs)
                        case["expected"] = out[0]
                        if masks:
                            case["spans"] = byte_spans(out[0], idx[0])
                    except Exception as e:
                        case["error"] = f"{type(e).__name__}: {e}"
                    cases.append(case)
    return {"conversations": CONVERSATIONS, "cases": cases}


def main():
    with open(os.path.join(OUT, "unit_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(unit_goldens(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    corpus = corpus_goldens()
    with open(os.path.join(OUT, "corpus_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = len(corpus["cases"])
    errors = sum("error" in c for c in corpus["cases"])
    print(f"unit: {len(UNIT)} cases; corpus: {n} renderings ({errors} raise)")


if __name__ == "__main__":
    main()
