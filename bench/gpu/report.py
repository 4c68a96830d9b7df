#!/usr/bin/env python3
"""report.py — the numbers of bench/gpu/run.sh: one JSON line per benchmark cell, and the tables.

  report.py ptrain-cell SHAPE SEQ BATCH MODE RUN_DIR LOG WARMUP RC WALL_S
      a ptrain cell (MODE: use_gradient_checkpointing false, true or unsloth): tokens/s from the
      median of the per-step records after WARMUP in RUN_DIR/metrics.jsonl (ptrain counts target
      tokens, SEQ - 1 per sequence; converted here to sequence tokens, as the peer counts), the
      `memory plan:` and `peak device memory:` bytes of LOG (the first integer after the colon).
      A run stopped by its timeout still gives its logged steps ("partial").
  report.py peer-cell SHAPE SEQ BATCH MODE LOG RC WALL_S     a peer cell (MODE ckpt-on or ckpt-off)
  report.py skip SIDE SHAPE SEQ BATCH MODE REASON           a cell not run, and why
  report.py table WORKDIR      the speed table of WORKDIR/cells.jsonl, with MFU and the targets
  report.py longest WORKDIR    the longest-sequence table of WORKDIR/longest.jsonl

FLOPs per token of LoRA training on a frozen base (the model's FLOPs, what MFU counts):
  4 * N_lin            forward (2 N) and input gradients (2 N) through the frozen projections and
                       the LM head; N_lin = their weights (q,k,v,o,gate,up,down of every layer, and
                       vocab x hidden for the head, tied or not); no weight gradients
  + 6 * P_lora         LoRA: forward, input gradients and weight gradients of its A and B
  + 12 * H * hd * C    attention: QK^T and PV forward (4 * ctx * hd per head), backward twice that;
                       C = the sum over layers of the mean causal context (about SEQ / 2 a layer;
                       less in a sliding window)
Hardware FLOPs per token add what the implementation computes again: with gradient checkpointing
(ptrain's true and unsloth, the peer's ckpt-on) each layer's forward once more, 2 * (N_lin - the
head) + 2 * P_lora + 4 * H * hd * C; and a flash-style attention backward's recomputed scores,
2 * H * hd * C (ptrain; the peer's SDPA, not its eager attention, which keeps the probabilities).
MFU = model FLOPs per token x tokens/s over the bf16 rate gemm_rate.py measured in the same run,
and over the datasheet's 989 TFLOP/s dense bf16 (H100/H200 SXM): both are printed."""
import json
import os
import re
import statistics
import sys

DATASHEET_TFLOPS = 989.4  # H100/H200 SXM dense bf16


def first_int_after(log, prefix):
    for line in log.splitlines():
        i = line.find(prefix)
        if i >= 0:
            m = re.search(r"\d+", line[i + len(prefix):])
            if m:
                return int(m.group())
    return None


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def json_lines(path):
    out = []
    for line in read(path).splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def status_of(rc, timed):
    if rc == 0 and timed:
        return "ok"
    if timed:
        return "partial" if rc in (124, 137) else "failed"
    return "timeout" if rc in (124, 137) else "failed"


def ptrain_cell(shape, seq, batch, mode, run_dir, log_path, warmup, rc, wall):
    recs = [r for r in json_lines(os.path.join(run_dir, "metrics.jsonl")) if "tokens_per_s" in r]
    log = read(log_path)
    timed = [r for r in recs if r["step"] > warmup] or recs[1:]
    out = {"side": "ptrain", "shape": shape, "seq": seq, "batch": batch, "mode": mode, "rc": rc, "wall_s": wall,
           "status": status_of(rc, timed), "steps_logged": len(recs), "steps_timed": len(timed),
           "plan_bytes": first_int_after(log, "memory plan:"), "peak_bytes": first_int_after(log, "peak device memory:")}
    host = re.search(r"memory plan: (\d+) bytes of pinned host memory", log)
    if host:
        out["host_bytes"] = int(host.group(1))
    if timed:
        step_s = statistics.median(batch * (seq - 1) / r["tokens_per_s"] for r in timed)
        out.update(step_s=round(step_s, 4), tokens_per_s=round(batch * seq / step_s, 1),
                   loss_first=recs[0]["loss"], loss_last=recs[-1]["loss"])
    if out["status"] != "ok":
        err = [line for line in log.splitlines() if "error" in line.lower()]
        out["reason"] = (err[-1] if err else f"exit {rc}" + (" (its timeout)" if rc in (124, 137) else ""))[:240]
    return out


def peer_cell(shape, seq, batch, mode, log_path, rc, wall):
    res = [r for r in json_lines(log_path) if r.get("mode") == "speed"]
    out = {"side": "peer", "shape": shape, "seq": seq, "batch": batch, "mode": mode, "rc": rc, "wall_s": wall}
    if res:
        r = res[-1]
        out.update(status="ok", step_s=r["step_s"], tokens_per_s=r["tokens_per_s"], peak_bytes=r["peak_alloc_bytes"],
                   reserved_bytes=r["peak_reserved_bytes"], loss_first=r["loss_first"], loss_last=r["loss_last"],
                   base=r["base"], liger=r["liger"], attn=r["attn"], peer=r["peer"], load_s=r.get("load_s"))
    else:
        lines = [x for x in read(log_path).splitlines() if x.strip()]
        oom = [x for x in lines if "out of memory" in x.lower()]
        out.update(status="timeout" if rc in (124, 137) else "failed",
                   reason=((oom or lines or [f"exit {rc}"])[-1])[:240])
    return out


# ---- FLOPs ----

def shape_numbers(cfg, seq, r=16):
    """(N_lin, N_head, P_lora, attention per token without the factor: H * hd * C)."""
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    hd = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    h, kvh, layers = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"], cfg[
        "num_hidden_layers"]
    q, kv = h * hd, kvh * hd
    shapes = [(d, q), (d, kv), (d, kv), (q, d), (d, f), (d, f), (f, d)]  # (in, out) of the 7 projections
    head = cfg["vocab_size"] * d
    n_lin = layers * sum(i * o for i, o in shapes) + head
    p_lora = layers * r * sum(i + o for i, o in shapes)
    window = cfg.get("sliding_window") or 0
    ctx = 0.0
    for layer in range(layers):
        w = window if cfg.get("model_type") == "gemma2" and layer % 2 == 0 and window else seq
        # mean over t < seq of min(t + 1, w), in closed form
        k = min(w, seq)
        ctx += (k * (k + 1) / 2 + (seq - k) * w) / seq
    return n_lin, head, p_lora, h * hd * ctx


def flops_per_token(cfg, seq, recompute=False, flash_bwd=False):
    """(model FLOPs, hardware FLOPs) per token."""
    n_lin, head, p_lora, attn = shape_numbers(cfg, seq)
    model = 4 * n_lin + 6 * p_lora + 12 * attn
    hw = model
    if recompute:
        hw += 2 * (n_lin - head) + 2 * p_lora + 4 * attn
    if flash_bwd:
        hw += 2 * attn
    return model, hw


def cell_flops(cfg, c):
    recompute = c["mode"] in ("true", "unsloth", "ckpt-on")
    flash = c["side"] == "ptrain" or c.get("attn") == "sdpa"
    return flops_per_token(cfg, c["seq"], recompute, flash)


# ---- tables ----

def fmt(x, spec="{:.0f}"):
    return "n/a" if x is None else spec.format(x)


def mib(b):
    return None if b is None else b / 2**20


def load_cfg(work, shape, cache={}):  # noqa: B006 - a cache across calls
    if shape not in cache:
        txt = read(os.path.join(work, shape, "config.json"))
        cache[shape] = json.loads(txt) if txt else None
    return cache[shape]


def gemm_rate(work):
    g = json_lines(os.path.join(work, "gemm.json"))
    return g[-1] if g else {}


def cell_row(work, c, peak):
    cfg = load_cfg(work, c["shape"])
    tps = c.get("tokens_per_s")
    mfu_m = mfu_d = hw = None
    if cfg and tps:
        model, hwf = cell_flops(cfg, c)
        mfu_m = 100 * model * tps / (peak * 1e12) if peak else None
        mfu_d = 100 * model * tps / (DATASHEET_TFLOPS * 1e12)
        hw = hwf * tps / 1e12
    mem = fmt(mib(c.get("peak_bytes")))
    if c["side"] == "ptrain" and c.get("plan_bytes"):
        mem += f" (plan {fmt(mib(c['plan_bytes']))})"
    note = c.get("reason", "") if c["status"] != "ok" else ""
    if c["side"] == "peer" and c.get("base"):
        note = f"{c['base'].split(' (')[0]} base, Liger {c['liger'].split(' (')[0]}, {c['attn']}" + (
            f"; {note}" if note else "")
    return (f"| {c['side']} | {c['shape']} | {c['seq']} x {c['batch']} | {c['mode']} | {c['status']} | {fmt(tps)} "
            f"| {fmt(c.get('step_s'), '{:.3f}')} | {mem} | {fmt(mfu_m, '{:.1f}%')} | {fmt(mfu_d, '{:.1f}%')} "
            f"| {fmt(hw, '{:.3g}')} | {note} |")


CKPT_ON, CKPT_OFF = ("true", "unsloth"), ("false",)  # ptrain's modes with and without checkpointing
PEER_OF = {"true": "ckpt-on", "unsloth": "ckpt-on", "false": "ckpt-off"}  # the peer's run in the same setting
# issue 26's targets (H200, the same run): gemma2-2b at 2048, checkpointing on: >= 2x the peer's tokens/s at
# <= 0.5x its peak memory and >= 25% MFU of the datasheet's rate; checkpointing off: >= 35%; smollm2: >= 2x the
# peer; the longest sequence that trains (report.py longest): >= 4x the peer's on each shape
MFU_TARGET = {CKPT_ON: 25.0, CKPT_OFF: 35.0}


def yes(ok):
    return "n/a" if ok is None else "yes" if ok else "NO"


def mfu_datasheet(work, c):
    cfg = load_cfg(work, c["shape"])
    return 100 * cell_flops(cfg, c)[0] * c["tokens_per_s"] / (DATASHEET_TFLOPS * 1e12) if cfg else None


def pairs(cells, key, modes):
    """(ptrain cell, the peer's cell in the same setting) for each of modes that both sides ran at key."""
    ran = {(c["side"], c["mode"]): c for c in cells if (c["shape"], c["seq"], c["batch"]) == key
           and c.get("tokens_per_s")}
    return [(ran[("ptrain", m)], ran.get(("peer", PEER_OF[m]))) for m in modes if ("ptrain", m) in ran]


def ratio(a, b, field):
    return a[field] / b[field] if a and b and a.get(field) and b.get(field) else None


def speed_target(cells, key, modes, label, memory):
    """tokens/s >= 2x the peer in the same setting (and, with memory, peak <= 0.5x in the same cell): the
    best of modes; n/a when no pair ran."""
    tried = []  # (met, tokens/s ratio, memory ratio) of each pair that ran
    for ours, theirs in pairs(cells, key, modes):
        r_t, r_m = ratio(ours, theirs, "tokens_per_s"), ratio(ours, theirs, "peak_bytes")
        if r_t is not None:
            tried.append((r_t >= 2 and (not memory or (r_m is not None and r_m <= 0.5)), r_t, r_m))
    ok, best_t, best_m = max(tried, key=lambda t: t[:2], default=(None, None, None))  # met first, then fastest
    what = f"{fmt(best_t, '{:.2f}x')}" + (f" at {fmt(best_m, '{:.2f}x')} memory" if memory else "")
    need = ">= 2x peer" + (" at <= 0.5x its memory" if memory else "")
    return f"{label} tokens/s {need} {yes(ok)} ({what})"


def mfu_target(work, cells, key, modes, label):
    got = [mfu_datasheet(work, c) for c, _ in pairs(cells, key, modes)]
    got = [u for u in got if u is not None]
    u = max(got) if got else None
    need = MFU_TARGET[modes]
    return f"{label} MFU >= {need:.0f}% of {DATASHEET_TFLOPS:g} {yes(None if u is None else u >= need)} ({fmt(u, '{:.1f}%')})"


def comparisons(work, cells, planned):
    """The lines and targets of every (shape, seq, batch) in planned (every cell, skipped ones too: a
    target whose cells did not run reads n/a, not absent) from the cells that ran."""
    keys = []
    for c in planned:
        k = (c["shape"], c["seq"], c["batch"])
        if k not in keys:
            keys.append(k)
    lines, targets = [], []
    for k in keys:
        for ours, theirs in pairs(cells, k, CKPT_ON + CKPT_OFF):
            u = mfu_datasheet(work, ours)
            lines.append(f"- {k[0]} {k[1]} x {k[2]}, ptrain {ours['mode']} vs peer {PEER_OF[ours['mode']]}: "
                         f"{fmt(ours['tokens_per_s'])} vs {fmt(theirs and theirs['tokens_per_s'])} tok/s "
                         f"({fmt(ratio(ours, theirs, 'tokens_per_s'), '{:.2f}x')}), peak "
                         f"{fmt(mib(ours.get('peak_bytes')))} vs {fmt(mib(theirs and theirs.get('peak_bytes')))} MiB "
                         f"({fmt(ratio(ours, theirs, 'peak_bytes'), '{:.2f}x')}), ptrain MFU {fmt(u, '{:.1f}%')} "
                         f"of {DATASHEET_TFLOPS:g}")
        t = []
        if k[0] == "gemma2-2b" and k[1] == 2048:
            t = [speed_target(cells, k, CKPT_ON, "checkpointing on:", True),
                 mfu_target(work, cells, k, CKPT_ON, "checkpointing on:"),
                 mfu_target(work, cells, k, CKPT_OFF, "checkpointing off:")]
        elif k[0] == "smollm2-135m":
            t = [speed_target(cells, k, CKPT_ON + CKPT_OFF, "same setting:", False)]
        if t:
            targets.append(f"targets {k[0]} {k[1]}x{k[2]}: " + "; ".join(t))
    return lines, targets


def table(work):
    cells = json_lines(os.path.join(work, "cells.jsonl"))
    g = gemm_rate(work)
    peak = g.get("bf16_tflops")
    print("| side | shape | seq x batch | checkpointing | status | tok/s | step s | peak MiB | MFU (measured peak) "
          "| MFU (989 TFLOP/s) | hardware TFLOP/s | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        print(cell_row(work, c, peak) if c["status"] != "skipped" else
              f"| {c['side']} | {c['shape']} | {c['seq']} x {c['batch']} | {c['mode']} | skipped | | | | | | "
              f"| {c.get('reason', '')} |")
    print()
    print(f"Measured bf16 matrix-product rate: {fmt(peak, '{:.4g}')} TFLOP/s on {g.get('gpu', 'n/a')} "
          f"(gemm_rate.py, {g.get('n', '?')}^3); datasheet {DATASHEET_TFLOPS}. MFU = model FLOPs per token x tokens/s "
          f"/ rate; hardware TFLOP/s counts the recomputed forward and attention scores too (bench/gpu/README.md). "
          f"Peak memory: ptrain's `peak device memory`, the peer's torch.cuda.max_memory_allocated.")
    shapes = sorted({c["shape"] for c in cells})
    for s in shapes:
        cfg = load_cfg(work, s)
        if cfg:
            n_lin, _, p_lora, _ = shape_numbers(cfg, 2048)
            print(f"- {s}: N_lin {n_lin / 1e9:.3f} G, P_lora {p_lora / 1e6:.2f} M; model GFLOP per token at 2048: "
                  f"{flops_per_token(cfg, 2048)[0] / 1e9:.2f}")
    lines, targets = comparisons(work, [c for c in cells if c["status"] != "skipped"], cells)
    print("\n".join(lines))
    fusions(work, cells)
    print("\n".join(targets))


def fusions(work, cells):
    """fusion_rate.py's savings beside the step they would come out of: ptrain's fastest
    checkpointing cell of the shape at batch 1 and the same token count."""
    rows = json_lines(os.path.join(work, "fusion.jsonl"))
    if not rows:
        return
    print(f"\nGEMM fusions not built (issue 26, point 2), measured on {rows[0].get('gpu')} (fusion_rate.py: "
          "separate bf16 products against the fused one; saving per step with checkpointing):")
    for r in rows:
        ran = [c for c in cells if c["side"] == "ptrain" and c["shape"] == r["shape"] and c["seq"] == r["tokens"]
               and c["batch"] == 1 and c["mode"] in CKPT_ON and c.get("step_s")]
        step = min((c["step_s"] for c in ran), default=None)
        share = 100 * r["saved_ms_per_step"] / 1e3 / step if step else None
        print(f"- {r['shape']} {r['tokens']} tokens, {r['group']}: {r['apart_us']} us apart, {r['fused_us']} us "
              f"fused; {r['saved_ms_per_step']} ms a step = {fmt(share, '{:.1f}%')} of ptrain's "
              f"{fmt(step, '{:.3f}')} s step")


def longest(work):
    rows = json_lines(os.path.join(work, "longest.jsonl"))
    print("| side | shape | checkpointing | longest seq (batch 1) | how found | step at it | step s | peak MiB "
          "| plan MiB (host MiB) | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        host = f" ({fmt(mib(r.get('host_bytes')))})" if r.get("host_bytes") else ""
        print(f"| {r['side']} | {r['shape']} | {r.get('mode', '')} | {fmt(r.get('longest_seq'))} | {r.get('how', '')} "
              f"| {r.get('step', '')} | {fmt(r.get('step_s'), '{:.1f}')} | {fmt(mib(r.get('peak_bytes')))} "
              f"| {fmt(mib(r.get('plan_bytes')))}{host} | {r.get('notes', '')} |")
    print()
    for shape in dict.fromkeys(r["shape"] for r in rows):
        top = {side: max((r for r in rows if r["shape"] == shape and r["side"] == side and r.get("longest_seq")),
                         key=lambda r: r["longest_seq"], default=None) for side in ("ptrain", "peer")}
        ours, theirs = top["ptrain"], top["peer"]
        x = ours["longest_seq"] / theirs["longest_seq"] if ours and theirs else None
        verdict = yes(None if x is None else x >= 4)
        if verdict == "yes" and not str(ours.get("step", "")).startswith("ran"):
            verdict = "unverified"  # the plan says it fits; no step ran at that length
        print(f"targets longest {shape}: >= 4x the peer's {verdict} (ptrain {fmt(ours and ours['longest_seq'])}, "
              f"step at it: {ours.get('step', 'n/a') if ours else 'n/a'}; peer {fmt(theirs and theirs['longest_seq'])}: "
              f"{fmt(x, '{:.1f}x')})")


def main():
    a = sys.argv[1:]
    if len(a) == 10 and a[0] == "ptrain-cell":
        print(json.dumps(ptrain_cell(a[1], int(a[2]), int(a[3]), a[4], a[5], a[6], int(a[7]), int(a[8]), int(a[9]))))
    elif len(a) == 8 and a[0] == "peer-cell":
        print(json.dumps(peer_cell(a[1], int(a[2]), int(a[3]), a[4], a[5], int(a[6]), int(a[7]))))
    elif len(a) == 7 and a[0] == "skip":
        print(json.dumps({"side": a[1], "shape": a[2], "seq": int(a[3]), "batch": int(a[4]), "mode": a[5],
                          "status": "skipped", "reason": a[6]}))
    elif len(a) == 2 and a[0] == "table":
        table(a[1])
    elif len(a) == 2 and a[0] == "longest":
        longest(a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
