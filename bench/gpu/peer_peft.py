#!/usr/bin/env python3
"""peer_peft.py — the peer of ptrain's GPU training benchmark: transformers + PEFT, LoRA r=16
alpha=32 (dropout 0) on all seven projections, batch 1 x 2048 random token ids, gradient
checkpointing on, AdamW (lr 1e-4, weight decay 0.01, gradient clipping at 1.0, as ptrain's
config in bench/gpu/run.sh). The base is NF4 through bitsandbytes (QLoRA) when bitsandbytes is
installed, else bf16 (LoRA), which the output says. Gemma 2 runs with eager attention (the one
transformers implementation here that applies its soft-capping), others with SDPA. After --warmup
steps, times --steps steps (synchronised) and prints a note line, then one JSON line: tokens/s
from the median step, torch.cuda.max_memory_allocated and max_memory_reserved over the run.
Usage: peer_peft.py MODEL_DIR [--steps 10] [--warmup 3] [--seq 2048] [--batch 1] [--device cuda]"""
import argparse
import importlib.util
import json
import statistics
import time

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load(path, device, attn):
    cuda = device == "cuda"
    kw = {"dtype": torch.bfloat16 if cuda else torch.float32, "attn_implementation": attn}
    base = "bf16" if cuda else "fp32 (CPU)"
    if cuda and importlib.util.find_spec("bitsandbytes"):
        kw["quantization_config"] = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16)
        base = "nf4 (bitsandbytes: QLoRA)"
    elif cuda:
        base = "bf16 (bitsandbytes is not installed here: LoRA on a bf16 base, not QLoRA)"
    model = AutoModelForCausalLM.from_pretrained(path, device_map={"": device}, **kw)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    model.config.use_cache = False
    cfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     target_modules=TARGETS)
    return get_peft_model(model, cfg), base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attn", default="auto", help="eager, sdpa or auto (eager for Gemma 2, else sdpa)")
    a = ap.parse_args()
    mtype = AutoConfig.from_pretrained(a.model).model_type
    attn = a.attn if a.attn != "auto" else "eager" if mtype == "gemma2" else "sdpa"
    model, base = load(a.model, a.device, attn)
    model.train()
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(0)
    vocab = min(model.config.vocab_size, 49152)
    ids = torch.randint(0, vocab, (a.batch, a.seq), generator=gen).to(a.device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    step_s = statistics.median(times)
    cuda = a.device == "cuda"
    print(f"peer: transformers {transformers.__version__} + peft {peft.__version__}, base {base}, "
          f"attention {attn}, {a.batch} x {a.seq} tokens, gradient checkpointing on")
    print(json.dumps({
        "peer": f"transformers {transformers.__version__} + peft {peft.__version__}", "base": base,
        "attn": attn, "batch": a.batch, "seq": a.seq, "steps": a.steps, "warmup": a.warmup,
        "step_s": round(step_s, 4), "tokens_per_s": round(a.batch * a.seq / step_s, 1),
        "peak_alloc_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
        "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
        "lora_params": sum(p.numel() for p in params)}))


if __name__ == "__main__":
    main()
