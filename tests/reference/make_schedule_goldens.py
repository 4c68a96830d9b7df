#!/usr/bin/env python3
"""make_schedule_goldens.py — the learning rate of every step from transformers' get_scheduler, for
ptrain's schedules and their lr_scheduler_kwargs (tests/unit/test_train.c, test_schedule_matches_transformers).

Each case: a schedule name, its scheduler_specific_kwargs (what lr_scheduler_kwargs passes), the peak
learning rate, warmup and total steps; the learning rate is read from a torch optimizer driven by
the scheduler as the Trainer drives it (the rate of step s is the one after s scheduler steps), for
steps 0 to total + 1. Writes tests/data/schedule/transformers_lr.json.
Run: $PTRAIN_PYTHON tests/reference/make_schedule_goldens.py  (transformers, torch)
"""
import json
import os

import torch
import transformers
from transformers import get_scheduler

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "schedule", "transformers_lr.json")

CASES = [
    ("linear", {}, 2e-4, 3, 20),
    ("cosine", {}, 2e-4, 3, 20),
    ("cosine", {"num_cycles": 1.5}, 2e-4, 2, 25),
    ("cosine", {"num_cycles": 0.25}, 1e-3, 0, 16),
    ("constant", {}, 5e-5, 0, 10),
    ("constant_with_warmup", {}, 5e-5, 4, 10),
    ("cosine_with_restarts", {}, 2e-4, 3, 20),
    ("cosine_with_restarts", {"num_cycles": 3}, 2e-4, 2, 31),
    ("polynomial", {}, 2e-4, 3, 20),
    ("polynomial", {"power": 2.0, "lr_end": 1e-5}, 2e-4, 2, 17),
    ("polynomial", {"power": 0.5}, 1e-3, 0, 12),
    ("cosine_with_min_lr", {"min_lr_rate": 0.1}, 2e-4, 3, 20),
    ("cosine_with_min_lr", {"min_lr": 1e-5, "num_cycles": 1.0}, 2e-4, 2, 21),
]


def rates(name, kwargs, lr, warmup, total):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    sched = get_scheduler(name, opt, num_warmup_steps=warmup, num_training_steps=total,
                          scheduler_specific_kwargs=dict(kwargs))
    out = []
    for _ in range(total + 2):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    cases = [{"type": n, "kwargs": k, "learning_rate": lr, "warmup_steps": w, "total_steps": t,
              "lr": rates(n, k, lr, w, t)} for n, k, lr, w, t in CASES]
    with open(OUT, "w") as f:
        json.dump({"transformers": transformers.__version__, "cases": cases}, f, indent=1)
    print(f"{len(cases)} schedules written to {OUT}")


if __name__ == "__main__":
    main()
