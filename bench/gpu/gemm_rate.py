#!/usr/bin/env python3
"""gemm_rate.py — the bf16 matrix-product ceiling of this GPU, the denominator of MFU in
bench/gpu/run.sh: torch.matmul of random 8192 x 8192 bf16 matrices, 3 warm-ups, then the median of
20 products timed with CUDA events. Prints one JSON line. Usage: gemm_rate.py [N]"""
import json
import statistics
import sys

import torch


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    s = statistics.median(times)
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "n": n, "median_s": s,
                      "bf16_tflops": round(2 * n ** 3 / s / 1e12, 1)}))


if __name__ == "__main__":
    main()
