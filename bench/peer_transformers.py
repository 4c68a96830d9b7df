#!/usr/bin/env python3
"""peer_transformers.py — the peer side of bench/run-model.sh: Hugging Face transformers on CPU
(fp32, torch threads = the given count) loading the same GGUF file (dequantized on load), measured
exactly like bench_model.c: load time, resident memory, prefill tokens/s at 128 and 512 tokens,
generation tokens/s with the KV cache. Prints one JSON object."""
import json
import os
import resource
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def main():
    path, threads = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    d, f = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    rss = rss_mb()
    vocab = model.config.vocab_size
    out = {"peer": "transformers " + __import__("transformers").__version__, "load_s": round(load_s, 3),
           "rss_after_load_mb": round(rss, 1)}
    with torch.no_grad():
        for n, reps in ((128, 3), (512, 2)):
            ids = torch.tensor([[(i * 7919) % vocab for i in range(n)]])
            best = 1e30
            for _ in range(reps):
                t = time.perf_counter()
                model(ids, use_cache=False)
                best = min(best, time.perf_counter() - t)
            out[f"prefill{n}_tok_s"] = round(n / best, 1)
        ids = torch.tensor([[(i * 7919) % vocab for i in range(32)]])
        res = model(ids, use_cache=True)
        past = res.past_key_values
        t = time.perf_counter()
        for s in range(64):
            res = model(torch.tensor([[(s * 31) % vocab]]), past_key_values=past, use_cache=True)
            past = res.past_key_values
        out["generate_tok_s"] = round(64 / (time.perf_counter() - t), 2)
        # GRPO's group: 8 sequences of one 32-token prompt, 32 new tokens each, sampled at temperature 1
        ids = torch.tensor([[(i * 7919) % vocab for i in range(32)]] * 8)
        t = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32, min_new_tokens=32, do_sample=True,
                       temperature=1.0, top_p=1.0, top_k=0, pad_token_id=0)
        out["generate8_tok_s"] = round(8 * 32 / (time.perf_counter() - t), 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
