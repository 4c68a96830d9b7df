#!/usr/bin/env python3
"""gemm_rate.py — the bf16 matrix-product ceiling of this GPU, the denominator of MFU in
bench/gpu/run.sh: torch.matmul of random 8192 x 8192 bf16 matrices, 3 warm-ups, then the median of
20 products timed with CUDA events. Prints one JSON line. Without a GPU (the scripts' dry run) it
times 512 x 512 products on the CPU, which only shows that the script runs.
Usage: gemm_rate.py [N]"""
import json
import statistics
import sys
import time

import torch


def timed(fn, cuda):
    if not cuda:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def main():
    cuda = torch.cuda.is_available()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192 if cuda else 512
    dev = "cuda" if cuda else "cpu"
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    s = statistics.median(timed(lambda: torch.matmul(a, b), cuda) for _ in range(20))
    print(json.dumps({"gpu": torch.cuda.get_device_name() if cuda else "cpu (dry run)", "n": n, "median_s": s,
                      "bf16_tflops": round(2 * n ** 3 / s / 1e12, 4 if not cuda else 1)}))


if __name__ == "__main__":
    main()
