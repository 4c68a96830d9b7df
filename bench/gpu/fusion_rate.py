#!/usr/bin/env python3
"""fusion_rate.py — what the GEMM fusions ptrain has not built would save on this GPU (issue 26,
point 2), measured instead of guessed: for each projection group of a shape, the time of the
separate bf16 products ptrain runs against the one product a fusion would run, at the benchmark's
token counts:

  qkv       x·Wqᵀ, x·Wkᵀ, x·Wvᵀ           against x·[Wq;Wk;Wv]ᵀ
  kv        x·Wkᵀ, x·Wvᵀ                   against x·[Wk;Wv]ᵀ (GQA's small pair)
  gate_up   x·Wgᵀ, x·Wuᵀ                   against x·[Wg;Wu]ᵀ
  lora_fold x·Wᵀ, then x·Aᵀ (r 16)         against x·[W;A]ᵀ (gate's shape)
  residual  x·Wdᵀ, then + r                against addmm(r, x, Wdᵀ) (the epilogue: beta 1)
  qkv_bwd   dq·Wq + dk·Wk + dv·Wv (beta 1) against [dq dk dv]·[Wq;Wk;Wv] (the input gradient)
  gate_up_bwd  dg·Wg + du·Wu (beta 1)      against [dg du]·[Wg;Wu]

Each time is the median of 20 runs timed with CUDA events after 3 warm-ups (torch's bf16 matmul:
cuBLAS/cuBLASLt, as ptrain's). Prints one JSON line per group and token count: both times in
microseconds, the saving per call, and per training step with checkpointing (x layers x 2 forward
passes, the first and the recomputed one, for the forward groups; x layers for the backward ones);
report.py puts them beside the measured step time. Without a GPU (the scripts' dry run) it runs
tiny sizes on the CPU, which only shows that the script runs.
Usage: fusion_rate.py [TOKENS...]   (default 2048 8192)"""
import json
import statistics
import sys
import time

import torch

# hidden, q width, kv width, ffn, layers (gemma-2-2b and SmolLM2-135M, as make_random_model.py writes them)
SHAPES = {"gemma2-2b": (2304, 2048, 1024, 9216, 26), "smollm2-135m": (576, 576, 192, 1536, 30)}
RANK = 16


def timed(fn, cuda, reps=20):
    for _ in range(3):
        fn()
    out = []
    for _ in range(reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def groups(dim, qw, kvw, ffn):
    """name -> (weights of the separate products, what the fused one adds)"""
    return {"qkv": ([qw, kvw, kvw], None), "kv": ([kvw, kvw], None), "gate_up": ([ffn, ffn], None),
            "lora_fold": ([ffn, RANK], None), "residual": ([dim], "residual"), "qkv_bwd": ([qw, kvw, kvw], "bwd"),
            "gate_up_bwd": ([ffn, ffn], "bwd")}


def measure(widths, kind, x, dev, cuda):
    dt, k_in = x.dtype, x.shape[1]
    ws = [torch.randn(n, k_in, device=dev, dtype=dt) * 0.02 for n in widths]
    if kind == "residual":
        r = torch.randn(x.shape[0], widths[0], device=dev, dtype=dt)
        apart = timed(lambda: torch.matmul(x, ws[0].t()).add_(r), cuda)
        fused = timed(lambda: torch.addmm(r, x, ws[0].t()), cuda)
    elif kind == "bwd":  # dx[t, k_in] = sum of dy_i[t, n_i] · W_i[n_i, k_in]
        dys = [torch.randn(x.shape[0], n, device=dev, dtype=dt) for n in widths]
        dyc, cat = torch.cat(dys, 1), torch.cat(ws, 0)

        def apart_bwd():
            dx = torch.matmul(dys[0], ws[0])
            for dy, w in zip(dys[1:], ws[1:]):
                dx.addmm_(dy, w)
        apart = timed(apart_bwd, cuda)
        fused = timed(lambda: torch.matmul(dyc, cat), cuda)
    else:
        cat = torch.cat(ws, 0)
        apart = timed(lambda: [torch.matmul(x, w.t()) for w in ws], cuda)
        fused = timed(lambda: torch.matmul(x, cat.t()), cuda)
    return apart, fused


def main():
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    tokens = [int(t) for t in sys.argv[1:]] or ([2048, 8192] if cuda else [32])
    for shape, (dim, qw, kvw, ffn, layers) in SHAPES.items():
        if not cuda:
            dim, qw, kvw, ffn = 64, 64, 32, 128
        for t in tokens:
            x = torch.randn(t, dim, device=dev, dtype=torch.bfloat16)
            xf = torch.randn(t, ffn, device=dev, dtype=torch.bfloat16)
            for name, (widths, kind) in groups(dim, qw, kvw, ffn).items():
                src = xf if kind == "residual" else x
                apart, fused = measure(widths, kind, src, dev, cuda)
                calls = 2 if name == "lora_fold" else 1  # gate and up each carry an adapter
                passes = 1 if kind == "bwd" else 2
                per_step = (apart - fused) * calls * layers * passes
                print(json.dumps({"gpu": torch.cuda.get_device_name() if cuda else "cpu (dry run)", "shape": shape,
                                  "tokens": t, "group": name, "apart_us": round(apart, 1), "fused_us": round(fused, 1),
                                  "saved_us_per_call": round(apart - fused, 1),
                                  "saved_ms_per_step": round(per_step / 1e3, 3)}), flush=True)
            del x, xf
            if cuda:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
