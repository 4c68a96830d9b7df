"""select_check.py — PEFT's selectors (layers_to_transform, layers_pattern, rank_pattern,
alpha_pattern) between ptrain and PEFT 0.21, in one Python process per direction:

  select_check.py make BASE OUT                      PEFT writes OUT/sel (layers_to_transform [1],
                                                     layers_pattern, rank and alpha patterns with
                                                     Python regex syntax) and OUT/pat (patterns only),
                                                     A and B random
  select_check.py phi3-make BASE OUT                 PEFT writes OUT on phi3's BASE with target_modules a
                                                     regex (qkv_proj and down_proj), A and B random
  select_check.py phi3 BASE CASE...                  CASE = FORM;ADAPTER_DIR;IDS;LOGITS: the LoRA modules
                                                     PEFT makes on BASE for target_modules FORM (names
                                                     joined by ',', all-linear, or a regex) must be the
                                                     adapter's, PEFT must load the adapter onto exactly
                                                     them, with ptrain's logits (1e-4)
  select_check.py check BASE CASE... [--llama ARGS]  CASE = ADAPTER_DIR:IDS:LOGITS[:RANKS]; PEFT loads
                                                     each adapter onto BASE and its logits must match
                                                     ptrain's (1e-4 relative, fp32); RANKS (name=r,...)
                                                     are the LoRA ranks PEFT must have made, and '-'
                                                     names the modules that must have none; ARGS:
                                                     llama_check.py's, run in the same process
Exit 0 when every comparison holds; the numbers are printed either way."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_check import compare, load_base, logits_of, read_ids  # noqa: E402

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# the same selectors as the test's ptrain config, in PEFT's own spelling
SEL = dict(layers_to_transform=[1], layers_pattern="layers",
           rank_pattern={"q_proj": 2, r"layers\.\d+\.mlp\.down_proj": 6, "(?:k|v)_proj": 3},
           alpha_pattern={"v_proj": 3, "model.layers.1.self_attn.o_proj": 5.5})
PAT = dict(rank_pattern={r"layers\.0\..*": 2, "up_proj": 8}, alpha_pattern={"gate_proj": 1.5, r"layers\.1\.self_attn\.[qk]_proj": 12})


def cmd_make(base, out):
    from peft import LoraConfig, get_peft_model
    for name, extra in (("sel", SEL), ("pat", PAT)):
        torch.manual_seed(0)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=MODULES, init_lora_weights=False, task_type="CAUSAL_LM",
                         **extra)
        model = get_peft_model(load_base(base), cfg)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        model.save_pretrained(os.path.join(out, name))
    return True


PHI3_REGEX = r".*\.(qkv_proj|down_proj)$"


def cmd_phi3_make(base, out):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=PHI3_REGEX, init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(load_base(base), cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    model.save_pretrained(out)
    return True


def peft_form(form):
    """target_modules as the test spells it: a regex (has a backslash or a '$'), all-linear, or names."""
    if "\\" in form or "$" in form or form == "all-linear":
        return form
    return form.split(",")


def cmd_phi3(base, *cases):
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors import safe_open
    ok = True
    for case in cases:
        form, adapter, ids_path, logits_path = case.split(";")
        want = set(ranks_of(get_peft_model(load_base(base), LoraConfig(r=4, target_modules=peft_form(form)))))
        with safe_open(os.path.join(adapter, "adapter_model.safetensors"), "pt") as f:
            have = {k.split("base_model.model.", 1)[-1].split(".lora_A")[0] for k in f.keys() if ".lora_A" in k}
        model = PeftModel.from_pretrained(load_base(base), adapter)
        loaded = set(ranks_of(model))
        name = f"{os.path.basename(adapter)} (target_modules {form})"
        short = lambda s: sorted({m.rsplit(".", 1)[-1] for m in s})  # noqa: E731
        print(f"{name}: PEFT selects {len(want)} modules {short(want)}; the adapter has {len(have)} {short(have)}; "
              f"PEFT loads it onto {len(loaded)}")
        good = want == have == loaded
        if not good:
            print(f"{name}: WRONG: PEFT only {sorted(want - have)}, adapter only {sorted(have - want)}, "
                  f"loaded {sorted(loaded ^ have)} differently")
        ids = read_ids(ids_path)
        ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), -1)
        ok = compare(name, ours, logits_of(model, ids), 1e-4, logits_of(load_base(base), ids)) and good and ok
    return ok


def ranks_of(model):
    got = {}
    for n, mod in model.named_modules():
        if hasattr(mod, "lora_A") and "default" in getattr(mod, "lora_A", {}):
            got[n.split("base_model.model.", 1)[-1]] = (mod.r["default"], mod.scaling["default"])
    return got


def cmd_check(base, *cases):
    from peft import PeftModel
    ok = True
    if "--llama" in cases:
        import llama_check
        at = cases.index("--llama")
        cases, llama_args = cases[:at], list(cases[at + 1:])
        ok = llama_check.main(llama_args)
    plain_model = load_base(base)
    for case in cases:
        adapter, ids_path, logits_path, *want = case.split(":")
        ids = read_ids(ids_path)
        plain = logits_of(plain_model, ids)
        model = PeftModel.from_pretrained(load_base(base), adapter)
        theirs = logits_of(model, ids)
        ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), -1)
        ok = compare(os.path.basename(adapter), ours, theirs, 1e-4, plain) and ok
        got = ranks_of(model)
        for item in (want[0].split(",") if want and want[0] else []):
            name, r = item.split("=")
            have = got.get(name, (None, None))[0]
            good = (have is None) if r == "-" else (have == int(r))
            print(f"{os.path.basename(adapter)}: {name} has rank {have} in PEFT (want {r}): {'ok' if good else 'WRONG'}")
            ok = ok and good
        cfg = json.load(open(os.path.join(adapter, "adapter_config.json")))
        print(f"{os.path.basename(adapter)}: adapter_config.json layers_to_transform {cfg.get('layers_to_transform')}, "
              f"rank_pattern {cfg.get('rank_pattern')}, alpha_pattern {cfg.get('alpha_pattern')}")
    return ok


if __name__ == "__main__":
    cmds = {"make": cmd_make, "check": cmd_check, "phi3-make": cmd_phi3_make, "phi3": cmd_phi3}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    sys.exit(0 if cmds[sys.argv[1]](*sys.argv[2:]) else 1)
