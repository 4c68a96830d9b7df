#!/usr/bin/env python3
"""peer_peft_train.py — the peer of bench_train.c: transformers + PEFT on CPU in fp32 (torch
threads = the given count), the same GGUF model (dequantized to fp32 on load, as transformers
does; a Hugging Face directory in fp32), LoRA r=16 alpha=32 on all seven projections, the same batch 4 x 512 of token ids, the
same gradient checkpointing setting, forward + backward + AdamW per step. Prints one JSON object.
A mixture of experts (config.json num_experts > 0, run-moe.sh) gets LoRA on the attention's four projections and on
the experts through PEFT's target_parameters (mlp.experts.gate_up_proj, mlp.experts.down_proj), transformers' own
choice of experts implementation (reported), as bench_train adapts it.
Usage: peer_peft_train.py MODEL threads [steps] [checkpointing 0/1] [batch 4] [seq 512]"""
import json
import os
import resource
import sys
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def lora_model(path, threads, ckpt):
    """The GGUF model in fp32 with LoRA r=16 alpha=32 on all seven projections, ready to train
    (shared with peer_chat.py)."""
    torch.set_num_threads(threads)
    if os.path.isdir(path):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    else:
        d, f = os.path.split(os.path.abspath(path))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    attn, mlp = ["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]
    moe = getattr(model.config, "num_experts", 0) or 0
    params = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"] if moe else None
    cfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     target_modules=attn if moe else attn + mlp, target_parameters=params)
    model = get_peft_model(model, cfg)
    model.train()
    return model


def main():
    path, threads = sys.argv[1], int(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ckpt = (int(sys.argv[4]) if len(sys.argv) > 4 else 1) != 0
    model = lora_model(path, threads, ckpt)
    B = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    T = int(sys.argv[6]) if len(sys.argv) > 6 else 512
    vocab = model.config.vocab_size
    ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(b * T, (b + 1) * T)] for b in range(B)])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.01)
    t0 = 0
    for s in range(steps + 1):
        if s == 1:
            t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        opt.zero_grad()
    dt = (time.perf_counter() - t0) / steps
    print(json.dumps({"peer": "transformers+peft", "tokens_per_s": round(B * T / dt, 1), "step_s": round(dt, 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "loss": round(float(loss), 4), "checkpointing": ckpt, "batch": B, "seq": T,
                      "experts": getattr(model.config, "_experts_implementation", None)}))


if __name__ == "__main__":
    main()
