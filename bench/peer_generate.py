#!/usr/bin/env python3
"""peer_generate.py — the peer side of bench/run-generate.sh: transformers' generate (fp32 on the
CPU, torch threads = the given count) on the same GGUF file (dequantized on load), the same group:
`group` copies of the prompt (token i: (i x 7919) mod vocab), exactly `new` new tokens each
(min_new_tokens = max_new_tokens), sampled at temperature 1, top_p 1, top_k 0 (GRPO's defaults),
prefill included, best of `reps` after one untimed warm-up (wall clock and the process's CPU time). Prints one JSON object.
Usage: peer_generate.py MODEL.gguf threads group prompt new reps"""
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    path = sys.argv[1]
    threads, group, prompt, new, reps = (int(a) for a in sys.argv[2:7])
    torch.set_num_threads(threads)
    d, f = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    ids = torch.tensor([[(i * 7919) % vocab for i in range(prompt)]] * group)
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
              pad_token_id=0)
    best, best_cpu = 1e30, 1e30
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)  # warm-up
        for r in range(reps):
            torch.manual_seed(1234 + r)
            t, c = time.perf_counter(), time.process_time()
            out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw)
            best, best_cpu = min(best, time.perf_counter() - t), min(best_cpu, time.process_time() - c)
            assert out.shape[1] == prompt + new
    print(json.dumps({"peer": "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
                      "seconds": round(best, 4), "tok_s": round(group * new / best, 2),
                      "cpu_seconds": round(best_cpu, 4)}))


if __name__ == "__main__":
    main()
