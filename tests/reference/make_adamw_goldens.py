#!/usr/bin/env python3
"""make_adamw_goldens.py — torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ goldens for
tests/unit/test_grad.c.

Made with torch 2.15.0 from PyPI, on the CPU (no GPU needed; AdamW runs torch's single-tensor
path, foreach=False, which is also what torch picks for CPU tensors):

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch numpy
    /tmp/refenv/bin/python tests/reference/make_adamw_goldens.py tests/data/optim

For each AdamW case it runs `steps` updates of one float32 parameter vector of n values with
fixed pseudo-random gradients and writes tests/data/optim/adamw_<name>.bin, little-endian:

    char magic[4] = "ADWG"; u32 version = 1; i64 n, steps;
    f64 lr, beta1, beta2, eps, weight_decay;
    f32 param0[n];                 the parameter before step 1
    f32 grad[steps][n];            the gradient of each step
    f32 param[steps][n];           the parameter after each step
    f32 exp_avg[n], exp_avg_sq[n]; the optimizer state after the last step

For each clipping case it clips a list of float32 gradients and writes
tests/data/optim/clip_<name>.bin:

    char magic[4] = "CLPG"; u32 version = 1; i64 count; f64 max_norm; f32 total_norm;
    i64 numel[count];
    f32 before[sum numel];         the gradients, concatenated, before clipping
    f32 after[sum numel];          after clip_grad_norm_(grads, max_norm) (norm_type 2)

manifest.txt lists the cases, "adamw <name>" or "clip <name>".
"""
import os
import struct
import sys

import numpy as np
import torch

ADAMW_CASES = [
    # name, n, steps, lr, betas, eps, weight_decay, gradient scale per element (None: 1)
    ("default", 257, 20, 1e-3, (0.9, 0.999), 1e-8, 0.01, None),
    ("strong", 300, 20, 1e-2, (0.8, 0.95), 1e-6, 0.1, "mixed"),
    ("nodecay", 129, 20, 3e-4, (0.3, 0.99), 1e-8, 0.0, None),
]

CLIP_CASES = [
    # name, sizes, gradient scale, max_norm
    ("clipped", [100, 37, 1], 1.0, 1.0),
    ("unclipped", [64, 5], 0.01, 1.0),
    ("tight", [513, 1024], 3.0, 0.25),
]


def f32(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def gradient_scales(n, kind, rng):
    if kind is None:
        return np.ones(n)
    # magnitudes from 1e-9 (below eps: eps dominates the denominator) to 1e2, with some zeros
    s = 10.0 ** rng.uniform(-9, 2, n)
    s[rng.random(n) < 0.05] = 0.0
    return s


def adamw_case(out_dir, name, n, steps, lr, betas, eps, wd, kind, rng):
    p0 = rng.standard_normal(n).astype(np.float32)
    scales = gradient_scales(n, kind, rng)
    grads = [(rng.standard_normal(n) * scales).astype(np.float32) for _ in range(steps)]
    param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = torch.optim.AdamW([param], lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=False)
    after = []
    for g in grads:
        param.grad = torch.from_numpy(g.copy())
        opt.step()
        after.append(param.detach().numpy().copy())
    state = opt.state[param]
    with open(os.path.join(out_dir, f"adamw_{name}.bin"), "wb") as fp:
        fp.write(b"ADWG" + struct.pack("<Iqq", 1, n, steps))
        fp.write(struct.pack("<5d", lr, betas[0], betas[1], eps, wd))
        fp.write(f32(p0))
        for g in grads:
            fp.write(f32(g))
        for a in after:
            fp.write(f32(a))
        fp.write(f32(state["exp_avg"].numpy()))
        fp.write(f32(state["exp_avg_sq"].numpy()))


def clip_case(out_dir, name, sizes, scale, max_norm, rng):
    before = [(rng.standard_normal(s) * scale).astype(np.float32) for s in sizes]
    params = [torch.nn.Parameter(torch.zeros(s)) for s in sizes]
    for p, g in zip(params, before):
        p.grad = torch.from_numpy(g.copy())
    total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    with open(os.path.join(out_dir, f"clip_{name}.bin"), "wb") as fp:
        fp.write(b"CLPG" + struct.pack("<Iqdf", 1, len(sizes), max_norm, float(total)))
        fp.write(struct.pack(f"<{len(sizes)}q", *sizes))
        for g in before:
            fp.write(f32(g))
        for p in params:
            fp.write(f32(p.grad.numpy()))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/optim"
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(20240611)
    manifest = []
    for case in ADAMW_CASES:
        adamw_case(out_dir, *case, rng)
        manifest.append(f"adamw {case[0]}")
    for case in CLIP_CASES:
        clip_case(out_dir, *case, rng)
        manifest.append(f"clip {case[0]}")
    with open(os.path.join(out_dir, "manifest.txt"), "w") as fp:
        fp.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
