#!/usr/bin/env python3
"""make_sampling_goldens.py — the distribution GRPO samples from, as transformers' generate builds
it for TRL's GRPOConfig (temperature, top_k, top_p): TemperatureLogitsWarper, TopKLogitsWarper and
TopPLogitsWarper in generate's order (transformers 5, generation/utils.py) applied to fixed logits
(12 tokens, two pairs of ties), then softmax. Writes tests/data/grpo/sampling.json: the logits and,
per case, the probability of each token; tests/unit/test_grpo.c's test_top_k draws from ptrain's
sampler and compares the frequencies. Run: python3 tests/reference/make_sampling_goldens.py"""
import json
import os

import torch
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

LOGITS = [1.5, -0.25, 3.0, 0.75, 3.0, -2.0, 0.5, 2.25, 0.75, -1.0, 1.0, 0.0]
CASES = [(1.0, 0, 1.0), (1.0, 3, 1.0), (0.7, 4, 1.0), (1.0, 5, 0.8), (1.3, 0, 0.7), (1.0, 11, 0.95), (0.5, 1, 1.0)]


def main():
    out = {"logits": LOGITS, "cases": []}
    for temperature, top_k, top_p in CASES:
        procs = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
        if top_k:
            procs.append(TopKLogitsWarper(top_k=top_k))
        if top_p < 1.0:
            procs.append(TopPLogitsWarper(top_p=top_p))
        scores = procs(torch.zeros(1, 1, dtype=torch.long), torch.tensor([LOGITS], dtype=torch.float32))
        probs = torch.softmax(scores.double(), dim=-1)[0].tolist()
        out["cases"].append({"temperature": temperature, "top_k": top_k, "top_p": top_p, "probs": probs})
    path = os.path.join(os.path.dirname(__file__), "..", "data", "grpo", "sampling.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
