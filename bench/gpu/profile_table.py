#!/usr/bin/env python3
"""profile_table.py — the tables of bench/gpu/profile.sh from Nsight Compute's CSV (--csv
--print-units base --metrics ...): every kernel launch's metrics, grouped by kernel family (attention
forward and backward, bf16 and fp32 GEMMs, dequantization, casts, norms, RoPE, activations, loss,
AdamW, NCCL, the rest) with each family's share of the summed kernel time and what it achieved:
  TFLOP/s  tensor-core math ops (sm__ops_path_tensor_src_bf16_dst_fp32) plus fp32 FLOPs (2 per FFMA,
           1 per FADD and FMUL, from smsp__sass_thread_inst_executed_op_*_pred_on), over its time
  GB/s     DRAM bytes read and written (dram__bytes_read, dram__bytes_write), over its time
(n/a where ncu did not collect the metric); then the 25 longest kernels by name.
Usage: profile_table.py NCU_CSV [TITLE]"""
import collections
import csv
import re
import sys

FAMILIES = [  # (family, pattern on the lower-cased kernel name); the first that matches
    ("attention backward", r"(attn|attention|flash|fmha).*(bwd|backward|dq|dk|dv)|(bwd|backward).*(attn|attention)"),
    ("attention forward", r"attn|attention|flash|fmha|softmax"),
    ("GEMM bf16 (tensor cores)", r"(gemm|gemv|cutlass|nvjet|xmma|cublas|sm90_|sm80_|wgmma|matmul).*(bf16|16816|hmma)|bf16.*(gemm|nvjet)|nvjet"),
    ("GEMM fp32", r"gemm|gemv|cutlass|xmma|cublas|sgemm|matmul|ffma"),
    ("dequantization", r"dequant"),
    ("casts", r"cast|convert|to_bf16|f32_to|bf16_from|round"),
    ("norms", r"norm|rstd"),
    ("RoPE", r"rope|rotary"),
    ("activations (GLU, soft-cap, dropout)", r"glu|gelu|silu|swish|softcap|tanh|dropout|act_"),
    ("loss (cross-entropy)", r"cross|entropy|loss|logsumexp|lse"),
    ("AdamW, clipping", r"adam|optim|clip|sumsq|norm2"),
    ("NCCL", r"nccl"),
    ("copies, adds, fills", r"copy|add|fill|memset|scale|axpy|gather|scatter|embed"),
]
METRICS = {"time": "gpu__time_duration.sum", "rd": "dram__bytes_read.sum", "wr": "dram__bytes_write.sum",
           "tensor": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
           "ffma": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
           "fadd": "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
           "fmul": "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"}


def family(name):
    low = name.lower()
    for fam, pat in FAMILIES:
        if re.search(pat, low):
            return fam
    return "other"


def launches(path):
    """{launch id: (kernel name, {metric: value})} from ncu's CSV (its other lines skipped)."""
    out = {}
    with open(path, errors="replace") as f:
        for r in csv.DictReader(line for line in f if line.startswith('"')):
            name, metric, value = r.get("Kernel Name"), r.get("Metric Name"), r.get("Metric Value")
            if not name or not metric:
                continue
            try:
                v = float(value.replace(",", ""))
            except (AttributeError, ValueError):
                continue
            k = (r.get("ID"), r.get("Process ID"))
            out.setdefault(k, (name, {}))[1][metric] = v
    return out


def work_of(m):
    """(FLOPs or None, DRAM bytes or None) of one launch's metrics."""
    flops = None
    if METRICS["tensor"] in m or METRICS["ffma"] in m:
        flops = m.get(METRICS["tensor"], 0) + 2 * m.get(METRICS["ffma"], 0) + m.get(METRICS["fadd"], 0) + m.get(
            METRICS["fmul"], 0)
    dram = m[METRICS["rd"]] + m.get(METRICS["wr"], 0) if METRICS["rd"] in m else None
    return flops, dram


def rate(x, ns, scale):
    return "n/a" if x is None or ns <= 0 else f"{x / ns / scale:.1f}"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = launches(sys.argv[1])
    fam = collections.defaultdict(lambda: [0, 0.0, None, None])
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for name, m in runs.values():
        ns = m.get(METRICS["time"], 0.0)
        flops, dram = work_of(m)
        f = fam[family(name)]
        f[0] += 1
        f[1] += ns
        if flops is not None:
            f[2] = (f[2] or 0) + flops
        if dram is not None:
            f[3] = (f[3] or 0) + dram
        by_name[name[:100]][0] += 1
        by_name[name[:100]][1] += ns
    total = sum(v[1] for v in fam.values()) or 1.0
    title = sys.argv[2] if len(sys.argv) > 2 else "the profiled run"
    print(f"{len(runs)} kernel launches in {title}, {total / 1e6:.1f} ms of kernel time in all")
    print()
    print("| kernel family | launches | ms | share of kernel time | TFLOP/s | DRAM GB/s |")
    print("|---|---|---|---|---|---|")
    for name, (n, ns, flops, dram) in sorted(fam.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {n} | {ns / 1e6:.2f} | {100 * ns / total:.1f}% | {rate(flops, ns, 1e3)} "
              f"| {rate(dram, ns, 1.0)} |")
    print()
    print("| kernel | family | launches | ms | share |")
    print("|---|---|---|---|---|")
    for name, (n, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"| {name} | {family(name)} | {n} | {ns / 1e6:.2f} | {100 * ns / total:.1f}% |")


if __name__ == "__main__":
    main()
