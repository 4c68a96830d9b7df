#!/usr/bin/env python3
"""peer_peft.py — the peer of ptrain's GPU training benchmark: transformers + PEFT at its strongest
on the machine: LoRA r=16 alpha=32 (dropout 0) on all seven projections, AdamW (lr 1e-4, weight
decay 0.01, gradient clipping at 1.0, as ptrain's config in bench/gpu/run.sh), batch x seq random
token ids. The base is NF4 through bitsandbytes with double quantization (QLoRA) when bitsandbytes
imports and loads it, else bf16 (LoRA), and Liger's Triton kernels (fused linear cross-entropy: no
logits tensor; RMSNorm, RoPE, SwiGLU/GeGLU) patch the model when liger-kernel imports and the
device is a GPU (a first step that fails under them exits 3: run again with --liger off); each line
of output says which ran. Gemma 2 runs with eager attention (the transformers
implementation that applies its attention soft-cap, as ptrain does), others with SDPA.

Two modes:
  speed (default): --warmup untimed steps, then --steps timed ones (synchronised); one JSON line:
      tokens/s from the median step, torch.cuda.max_memory_allocated and max_memory_reserved.
  --longest: the longest sequence that trains at batch 1: seq = --seq, doubled after each step
      that ran, one step per trial, until a step runs out of memory (or fails), --max-seq is
      passed, or the next step would not end within --time-limit seconds of the start (its time
      guessed as 4x the last: attention grows as seq^2). One JSON line per trial, then a summary.

Usage: peer_peft.py MODEL [--steps 10] [--warmup 3] [--seq 2048] [--batch 1] [--device cuda]
                    [--checkpointing on|off] [--liger auto|on|off] [--attn auto|eager|sdpa]
                    [--longest --max-seq N --time-limit S]"""
import argparse
import importlib
import importlib.util
import json
import statistics
import sys
import time

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def apply_liger(model_type, want, device):
    """Patch transformers' classes for model_type with Liger's kernels (before loading). Returns
    what ran, for the output."""
    if want == "off":
        return "off"
    if device != "cuda":
        return "off (Triton kernels: GPU only)"
    if not importlib.util.find_spec("liger_kernel"):
        return "not installed (share/scripts/gpu-wheels.sh fetches it)"
    try:
        mp = importlib.import_module("liger_kernel.transformers.monkey_patch")
        fn = getattr(mp, "MODEL_TYPE_TO_APPLY_LIGER_FN", {}).get(model_type)
        fn = fn or getattr(mp, f"apply_liger_kernel_to_{model_type}")
        fn()  # its defaults: rope, rms_norm, the GLU, fused linear cross-entropy
        ver = importlib.import_module("importlib.metadata").version("liger-kernel")
        return f"on (liger-kernel {ver}: {fn.__name__} defaults)"
    except Exception as e:  # noqa: BLE001 - any failure: run without it, and say why
        if want == "on":
            raise
        return f"failed, not used ({type(e).__name__}: {e})"[:200]


def bnb_missing():
    """Why bitsandbytes cannot give the base here, or None."""
    if not importlib.util.find_spec("bitsandbytes"):
        return "bitsandbytes is not installed here"
    try:
        importlib.import_module("bitsandbytes")
    except Exception as e:  # noqa: BLE001 - e.g. no native library for this CUDA
        return f"bitsandbytes does not import ({type(e).__name__}: {str(e)[:120]})"
    return None


def load(path, device, attn, checkpointing):
    """The model with LoRA: an NF4 base through bitsandbytes when it works, else bf16 (said)."""
    cuda = device == "cuda"
    kw = {"dtype": torch.bfloat16 if cuda else torch.float32, "attn_implementation": attn}
    base, why = ("bf16" if cuda else "fp32 (CPU)"), bnb_missing() if cuda else None
    model = None
    if cuda and not why:
        qc = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                             bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)
        try:
            model = AutoModelForCausalLM.from_pretrained(path, device_map={"": device}, quantization_config=qc, **kw)
            ver = importlib.import_module("importlib.metadata").version("bitsandbytes")
            base = f"nf4 (bitsandbytes {ver}, double quantization: QLoRA)"
        except Exception as e:  # noqa: BLE001 - fall back to bf16, and say why
            why = f"loading through bitsandbytes failed ({type(e).__name__}: {str(e)[:120]})"
    if model is None:
        if why:
            base = f"bf16 ({why}: LoRA on a bf16 base, not QLoRA)"
        model = AutoModelForCausalLM.from_pretrained(path, device_map={"": device}, **kw)
    # no prepare_model_for_kbit_training: it would upcast the embeddings and the head to fp32, a
    # slower peer; norms and the head stay bf16 as in QLoRA recipes that skip it
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.config.use_cache = False
    cfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     target_modules=TARGETS)
    return get_peft_model(model, cfg), base


class Trainer:
    def __init__(self, model, device):
        self.model, self.device = model, device
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=1e-4, weight_decay=0.01)
        self.gen = torch.Generator().manual_seed(0)
        self.vocab = min(model.config.vocab_size, 49152)
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step(self, batch, seq):
        """One optimizer step on fresh random ids: (seconds, loss)."""
        ids = torch.randint(0, self.vocab, (batch, seq), generator=self.gen).to(self.device)
        self.sync()
        t0 = time.perf_counter()
        loss = self.model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sync()
        return time.perf_counter() - t0, float(loss.detach())


def memory(device):
    if device != "cuda":
        return {"peak_alloc_bytes": None, "peak_reserved_bytes": None}
    return {"peak_alloc_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved()}


LIGER_FAILED = 3  # exit status: Liger's kernels failed in a step (matrix.py runs the cell again without)


def first_step(tr, head, batch, seq):
    """The first step; with Liger on, a failure that is not out of memory exits LIGER_FAILED."""
    try:
        return tr.step(batch, seq)
    except Exception as e:  # noqa: BLE001
        if head["liger"].startswith("on") and not is_oom(e):
            print(json.dumps({"liger_failed": f"{type(e).__name__}: {str(e)[:200]}"}))
            sys.exit(LIGER_FAILED)
        raise


def speed(a, tr, head):
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        s, loss = first_step(tr, head, a.batch, a.seq) if step == 0 else tr.step(a.batch, a.seq)
        if step >= a.warmup:
            times.append(s)
        losses.append(loss)
    step_s = statistics.median(times)
    print(json.dumps(dict(head, mode="speed", batch=a.batch, seq=a.seq, steps=a.steps, warmup=a.warmup,
                          step_s=round(step_s, 4), tokens_per_s=round(a.batch * a.seq / step_s, 1),
                          loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4),
                          lora_params=sum(p.numel() for p in tr.params), **memory(a.device))))


def is_oom(e):
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def longest(a, tr, head):
    start, seq, best, last_s, why = time.perf_counter(), a.seq, None, None, "max-seq reached"
    while seq <= a.max_seq:
        if last_s is not None and time.perf_counter() - start + 4 * last_s > a.time_limit:
            why = f"time: the step at {seq} would take about {4 * last_s:.0f} s more than the {a.time_limit:.0f} s limit"
            break
        if a.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            s, loss = first_step(tr, head, 1, seq) if best is None else tr.step(1, seq)
        except Exception as e:  # noqa: BLE001 - out of memory ends the search; anything else too, said
            why = f"{'out of memory' if is_oom(e) else type(e).__name__} at {seq}: {str(e)[:160]}"
            print(json.dumps(dict(head, mode="longest-trial", seq=seq, ok=False, error=why)))
            tr.opt.zero_grad(set_to_none=True)
            break
        last_s, best = s, dict(seq=seq, step_s=round(s, 3), loss=round(loss, 4), **memory(a.device))
        print(json.dumps(dict(head, mode="longest-trial", ok=True, **best)))
        seq *= 2
    print(json.dumps(dict(head, mode="longest", longest_seq=best and best["seq"], at_longest=best, stopped=why,
                          search_s=round(time.perf_counter() - start, 1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attn", default="auto", help="eager, sdpa or auto (eager for Gemma 2, else sdpa)")
    ap.add_argument("--checkpointing", default="on", choices=["on", "off"])
    ap.add_argument("--liger", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--longest", action="store_true")
    ap.add_argument("--max-seq", type=int, default=1 << 20)
    ap.add_argument("--time-limit", type=float, default=120)
    a = ap.parse_args()
    t0 = time.perf_counter()
    mtype = AutoConfig.from_pretrained(a.model).model_type
    attn = a.attn if a.attn != "auto" else "eager" if mtype == "gemma2" else "sdpa"
    liger = apply_liger(mtype, a.liger, a.device)
    model, base = load(a.model, a.device, attn, a.checkpointing == "on")
    model.train()
    tr = Trainer(model, a.device)
    head = {"peer": f"transformers {transformers.__version__} + peft {peft.__version__}", "base": base,
            "liger": liger, "attn": attn, "checkpointing": a.checkpointing, "load_s": round(time.perf_counter() - t0, 1)}
    print(f"peer: {head['peer']}, base {base}, Liger {liger}, attention {attn}, gradient checkpointing "
          f"{a.checkpointing}, loaded in {head['load_s']} s")
    (longest if a.longest else speed)(a, tr, head)


if __name__ == "__main__":
    main()
