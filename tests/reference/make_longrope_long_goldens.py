#!/usr/bin/env python3
"""make_longrope_long_goldens.py — transformers' LongRoPE beyond original_max_position_embeddings, for
tests/unit/test_model.c (test_phi3_longrope_long).

transformers (longrope_frequency_update) picks the frequency set per forward pass: long_factor when the
largest position of the pass reaches original_max_position_embeddings, short_factor otherwise; the keys a
cache already holds keep the rotation they were made with. On tests/data/phi3-longrope/hf (make_phi3_goldens.py:
256 original of 1024 positions, bf16 weights, computed here in float64) it writes to tests/data/phi3-longrope/:
  long.ids.txt, long.tail.logits.f32  264 ids (one pass, so every position runs the long factors) and the
                                      logits of its last 8 positions [8, vocab];
  long.greedy.txt                     250 prompt ids (a pass within the original positions: short factors),
                                      then the 12 ids greedy decoding continues them with through transformers'
                                      DynamicCache, one model forward per token (from position 256 on: long
                                      factors for the new token, the cached keys as they were), and the smallest
                                      top-1/top-2 margin. (transformers' Phi-3 generate() differs: its
                                      prepare_inputs_for_generation drops the cache on the step that first
                                      reaches 257 tokens and re-encodes them all with the long factors.)
It prints how far the long factors move those logits from the short ones.

Run (the outputs are committed; CI only reads them) with the test environment (transformers 5.25):
  $PTRAIN_PYTHON tests/reference/make_longrope_long_goldens.py
"""
import os

import numpy as np
import torch
from transformers import AutoModelForCausalLM, DynamicCache

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "phi3-longrope")


def main():
    model = AutoModelForCausalLM.from_pretrained(os.path.join(OUT, "hf"), dtype=torch.float64).eval()
    cfg = model.config
    assert cfg.rope_parameters["rope_type"] == "longrope"
    orig = cfg.rope_parameters["original_max_position_embeddings"]
    assert orig == 256
    vocab = cfg.vocab_size
    ids = np.random.default_rng(17).integers(3, vocab, size=orig + 8)
    with torch.no_grad():
        logits = model(torch.from_numpy(ids)[None]).logits[0].numpy()
    with open(os.path.join(OUT, "long.ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits[-8:].astype("<f4").tofile(os.path.join(OUT, "long.tail.logits.f32"))
    with torch.no_grad():  # the short factors on the same ids, for the report
        short = model(torch.from_numpy(ids[:orig])[None]).logits[0].numpy()
    moved = np.abs(logits[:orig] - short).max() / np.abs(short).max()
    print(f"long factors move the logits of the first {orig} positions by {moved:.3g} of the largest")
    prompt = ids[:250]
    gen, margin = [], float("inf")
    with torch.no_grad():
        cache = DynamicCache(config=cfg)
        last = model(torch.from_numpy(prompt)[None], past_key_values=cache, use_cache=True).logits[0, -1]
        for step in range(12):
            top2 = np.sort(last.numpy())[-2:]
            margin = min(margin, float(top2[1] - top2[0]))
            gen.append(int(torch.argmax(last)))
            pos = torch.tensor([[len(prompt) + step]])
            last = model(torch.tensor([[gen[-1]]]), past_key_values=cache, use_cache=True,
                         position_ids=pos).logits[0, -1]
    with open(os.path.join(OUT, "long.greedy.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in prompt) + "\n" + " ".join(map(str, gen)) + "\n" + f"{margin:.6g}\n")
    print(f"greedy across position 256: {gen}, smallest top-2 margin {margin:.3g}")
    with torch.no_grad():  # the pass at position 256 alone: long factors move its logits
        again = model(torch.from_numpy(np.concatenate([prompt, gen[:7]]))[None]).logits[0, -1]
    print(f"(one uncached pass over those 257 tokens, all long, gives token {int(torch.argmax(again))})")


if __name__ == "__main__":
    main()
