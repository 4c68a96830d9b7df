#!/usr/bin/env python3
"""make_group_goldens.py — group_by_length as transformers 5 orders a permutation: the order
get_length_grouped_indices (transformers/trainer_pt_utils.py, LengthGroupedSampler) makes of a
given permutation and given lengths. Its random part is torch.randperm; here it returns a fixed
permutation (numpy, seeded), so the rest, which ptrain's sampler_group_order implements, is
compared on the same input. Cases: tiny (one megabatch), 37 examples in batches of 2 (4 x 2 per
megabatch), 1000 in batches of 4 (50 x 4), 301 in batches of 3 with many equal lengths (ties keep
the permutation's order), and one whose longest example is in the last megabatch.

Writes tests/data/peft/group_by_length.json: [{n, group, perm, lengths, order}, ...], which
test_dataset's test_group_by_length holds sampler_group_order to.
Run: $PTRAIN_PYTHON tests/reference/make_group_goldens.py
"""
import json
import os

import numpy as np
import torch
from transformers.trainer_pt_utils import get_length_grouped_indices

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "peft", "group_by_length.json")


def case(n, group, seed, max_len, last_longest=False):
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(1, max_len + 1, n)]
    perm = [int(x) for x in rng.permutation(n)]
    if last_longest:
        lengths[perm[-1]] = max_len + 10
    real = torch.randperm
    torch.randperm = lambda k, generator=None: torch.tensor(perm)
    try:
        order = get_length_grouped_indices(lengths, group)
    finally:
        torch.randperm = real
    return {"n": n, "group": group, "perm": perm, "lengths": lengths, "order": [int(i) for i in order]}


def main():
    cases = [case(5, 8, 1, 20), case(37, 2, 2, 64), case(1000, 4, 3, 512), case(301, 3, 4, 5),
             case(90, 2, 5, 30, last_longest=True)]
    with open(OUT, "w") as f:
        json.dump(cases, f)
        f.write("\n")
    print(f"{len(cases)} cases written to {OUT}")


if __name__ == "__main__":
    main()
