"""hf_check.py — the Hugging Face side of the export tests: load what ptrain wrote with the real
tools (transformers, PEFT) and compare logits with ptrain's on the same token ids.

  hf_check.py peft BASE ADAPTER_DIR IDS LOGITS      PEFT loads ptrain's (or its own) adapter onto
                                                    BASE; its logits must match ptrain's
  hf_check.py merged MODEL_DIR IDS LOGITS TOL       transformers loads a merged model directory
  hf_check.py make-peft BASE OUT [dora]             PEFT writes an adapter with random A and B
  hf_check.py batch FILE                            each line of FILE a command above, its arguments
                                                    separated by tabs, run in one process (torch is
                                                    imported once); after each, the line
                                                    "@@ RESULT N 0|1" (N from 1, 1 when it holds)
BASE is a model directory or a .gguf file (transformers dequantizes it to fp32, as ptrain computes).
IDS is `ptrain generate --ids` output (first line: the prompt), LOGITS its --logits file.
Exit 0 when the comparison holds; the numbers are printed either way."""
import os
import sys

import numpy as np
import torch


def load_base(base):
    from transformers import AutoModelForCausalLM
    if base.endswith(".gguf"):
        return AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(base)),
                                                    gguf_file=os.path.basename(base), torch_dtype=torch.float32)
    return load_dir(base)


def load_dir(path):
    """A model directory as transformers loads it: a causal LM, or a multimodal model with a text tower
    (mistral3, which AutoModelForCausalLM does not map; qwen3_5, whose vision tower it would drop)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
    if AutoConfig.from_pretrained(path).model_type in ("mistral3", "qwen3_5"):
        return AutoModelForImageTextToText.from_pretrained(path, torch_dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)


def read_ids(path):
    return [int(x) for x in open(path).read().split("\n")[0].split()]


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def compare(name, ours, theirs, tol, base=None):
    v = min(ours.shape[1], theirs.shape[1])
    ours, theirs = ours[:, :v], theirs[:, :v]
    rel = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    print(f"{name}: max |ptrain - reference| / max |reference| = {rel:.2e} (tolerance {tol:.0e})")
    ok = rel <= tol
    if base is not None:
        effect = float(np.abs(theirs - base[:, :v]).max() / np.abs(theirs).max())
        print(f"{name}: the adapter moves the logits by {effect:.2e} (relative); must be >= 100 x the tolerance")
        ok = ok and effect >= 100 * tol
    return ok


def cmd_peft(base, adapter, ids_path, logits_path):
    from peft import PeftModel
    model = load_base(base)
    ids = read_ids(ids_path)
    plain = logits_of(model, ids)
    model = PeftModel.from_pretrained(model, adapter)
    theirs = logits_of(model, ids)
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), -1)
    return compare("peft", ours, theirs, 1e-4, plain)


def cmd_merged(model_dir, ids_path, logits_path, tol):
    model = load_dir(model_dir)
    ids = read_ids(ids_path)
    theirs = logits_of(model, ids)
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), -1)
    return compare("merged", ours, theirs, float(tol))


def cmd_make_peft(base, out, dora="", modules="q_proj,v_proj,down_proj"):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(0)
    cfg = LoraConfig(r=8, lora_alpha=16, use_rslora=True, target_modules=modules.split(","),
                     init_lora_weights=False, use_dora=dora == "dora", task_type="CAUSAL_LM")
    model = get_peft_model(load_base(base), cfg)
    with torch.no_grad():  # large enough to move the logits clearly
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    model.save_pretrained(out)
    return True


def cmd_batch(path):
    import traceback
    for n, line in enumerate(open(path).read().splitlines(), 1):
        args = line.split("\t")
        try:
            held = CMDS[args[0]](*args[1:])
        except Exception:  # a check that raises fails; the next one still runs
            traceback.print_exc(file=sys.stdout)
            held = False
        print(f"@@ RESULT {n} {1 if held else 0}", flush=True)
    return True


CMDS = {"peft": cmd_peft, "merged": cmd_merged, "make-peft": cmd_make_peft, "batch": cmd_batch}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CMDS:
        sys.exit(__doc__)
    sys.exit(0 if CMDS[sys.argv[1]](*sys.argv[2:]) else 1)
