#!/usr/bin/env python3
"""qwen35_grad_precision.py — where the fp32 LoRA gradients of the tiny Qwen3.5 model lose precision (issue 42):
make_qwen35_peft_goldens.py's batch and modules with A and B drawn within +-RANGE (0.3 by default), run by PEFT 0.21.2
on transformers 5.25 in several precisions, each written as that script writes its goldens (peft.json, peft.init.f32,
peft.grads.f32) under OUT/<variant>/ so that test_grad's qwen35 check can be pointed at them:

  f32         transformers' fp32 run (what the committed goldens are, at 0.1)
  f64         the whole model in float64, the delta rule too: transformers' torch_chunk_gated_delta_rule casts its
              inputs to float32 whatever the model's dtype, so a plain model.double() run is NOT float64 there; this
              variant runs the same function with that cast made float64
  f64-dr32    model.double() as is: float64 everywhere but the delta rule, which stays fp32 (chunked, as transformers)
  f64-rec32   float64 everywhere but the delta rule, run token by token in fp32 (transformers'
              torch_recurrent_gated_delta_rule: ptrain's order of sums)
  f32-rec     fp32 everywhere, the delta rule token by token (as ptrain computes it)

It prints each variant's gradients against f64 (max over tensors of max |diff| / max |f64|, the measure test_grad
uses). Run: $PTRAIN_PYTHON tests/reference/qwen35_grad_precision.py [OUT] [RANGE]   (OUT defaults to /tmp/qwen35-prec)
"""
import os
import sys

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3_5ForCausalLM
from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_qwen35_peft_goldens as golden  # noqa: E402
import packed_peft  # noqa: E402

MODEL = os.path.join(HERE, "..", "data", "qwen35", "hf")


def chunk_rule_in(dtype):
    """transformers' torch_chunk_gated_delta_rule with its float32 cast made `dtype`."""
    text = open(mq.__file__).read()  # the module attribute is a hub-kernel wrapper: read the function's source
    start = text.index("def torch_chunk_gated_delta_rule(")
    end = min(i for i in (text.find("\n@", start), text.find("\ndef ", start + 1)) if i > 0)
    src = text[start:end].replace("torch.float32", str(dtype))
    scope = dict(vars(mq))
    exec(src, scope)  # noqa: S102 - the library's own function, one dtype changed
    return scope["torch_chunk_gated_delta_rule"]


def recurrent_rule_fp32(query, key, value, g, beta, initial_state=None, output_final_state=False,
                        use_qk_l2norm_in_kernel=False, **kw):
    """The token-by-token rule in fp32 (inputs cast), its output back in the caller's dtype."""
    dt = query.dtype
    kv = dict(g=g.float(), beta=beta.float(), initial_state=initial_state, output_final_state=output_final_state,
              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    nk, nv = key.shape[2], value.shape[2]
    if nk != nv:  # the recurrent form expects as many q/k heads as v heads
        query, key = (x.repeat_interleave(nv // nk, dim=2) for x in (query, key))
    out, state = mq.torch_recurrent_gated_delta_rule(query.float(), key.float(), value.float(), **kv)
    return out.to(dt), state


ORIGINAL_RULE = mq.torch_chunk_gated_delta_rule


def set_rule(fn):
    """The delta rule the DeltaNet's forward calls (a global of the module, looked up at each call)."""
    mq.torch_chunk_gated_delta_rule = fn


def run(variant, rng_range, out):
    torch.manual_seed(7)
    dtype = torch.float32 if variant in ("f32", "f32-rec") else torch.float64
    base = Qwen3_5ForCausalLM.from_pretrained(MODEL, dtype=dtype).eval()
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=golden.MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    set_rule({"f64": chunk_rule_in(torch.float64), "f64-rec32": recurrent_rule_fp32,
              "f32-rec": recurrent_rule_fp32}.get(variant, ORIGINAL_RULE))
    params = packed_peft.lora_params(model, golden.MODULES)
    packed_peft.randomize(params, rng_range)  # drawn in fp32 as the goldens are: every variant starts the same
    loss, n, ids, labels = packed_peft.packed_loss(model, golden.ROWS, 13)
    loss.backward()
    packed_peft.write(os.path.join(out, variant), "tests/data/qwen35/hf", golden.ROWS, 72, params, loss, n, ids, labels,
                      range=rng_range, variant=variant)
    return [(i, m, w, p.grad.detach().double().numpy().copy()) for i, m, w, p in params], loss.item()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/qwen35-prec"
    rng_range = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    res = {v: run(v, rng_range, out) for v in ("f64", "f32", "f64-dr32", "f64-rec32", "f32-rec")}
    ref, ref_loss = res["f64"]
    for v, (grads, loss) in res.items():
        if v == "f64":
            continue
        errs = [(float(np.abs(g - r[3]).max() / np.abs(r[3]).max()), f"layer {r[0]} {r[1]}.{r[2]}")
                for g, r in zip((x[3] for x in grads), ref)]
        worst = max(errs)
        print(f"{v:10s} vs f64: loss {abs(loss - ref_loss) / abs(ref_loss):.2e}, gradients {worst[0]:.2e} ({worst[1]})")


if __name__ == "__main__":
    main()
