#!/usr/bin/env python3
"""report.py — the numbers of bench/gpu/run.sh.

  report.py ptrain RUN_DIR LOG WARMUP SEQ BATCH   one JSON line from a ptrain run: tokens/s from the
      median of the per-step records after WARMUP in RUN_DIR/metrics.jsonl (ptrain counts target
      tokens, SEQ - 1 per sequence; converted here to sequence tokens), the `memory plan:` and
      `peak device memory:` bytes of LOG (the first integer after the colon)
  report.py table WORKDIR SHAPE...   the table: ptrain against the peer, and MFU

MFU counts, per token, the FLOPs of LoRA training on a frozen base (gradient checkpointing's
recomputed forward is not counted):
  4 * N_lin            forward (2 N) and input gradients (2 N) through the frozen projections and
                       the LM head; N_lin = their weights (q,k,v,o,gate,up,down of every layer, and
                       vocab x hidden for the head, tied or not); no weight gradients
  + 6 * P_lora         LoRA: forward, input gradients and weight gradients of its A and B
  + 12 * H * hd * sum over layers of the mean causal context (about SEQ / 2; less in a sliding
                       window): QK^T and PV forward (4 * ctx * hd per head), backward twice that
over the bf16 matrix-product rate measured in the same run (gemm_rate.py)."""
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


def ptrain_result(run_dir, log_path, warmup, seq, batch):
    recs = []
    path = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            recs = [json.loads(line) for line in f if '"tokens_per_s"' in line]
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    timed = [r for r in recs if r["step"] > warmup] or recs[1:] or recs
    out = {"steps_logged": len(recs), "steps_timed": len(timed),
           "plan_bytes": first_int_after(log, "memory plan:"),
           "peak_bytes": first_int_after(log, "peak device memory:")}
    if timed:
        target_tps = statistics.median(r["tokens_per_s"] for r in timed)
        step_s = batch * (seq - 1) / target_tps
        out.update(step_s=round(step_s, 4), tokens_per_s=round(batch * seq / step_s, 1),
                   loss_first=recs[0]["loss"], loss_last=recs[-1]["loss"])
    return out


def flops_per_token(cfg, seq, r=16):
    d, f, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg.get("head_dim") or cfg["hidden_size"] // cfg[
        "num_attention_heads"]
    h, kvh, layers = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"], cfg[
        "num_hidden_layers"]
    q, kv = h * hd, kvh * hd
    shapes = [(d, q), (d, kv), (d, kv), (q, d), (d, f), (d, f), (f, d)]  # (in, out) of the 7 projections
    n_lin = layers * sum(i * o for i, o in shapes) + cfg["vocab_size"] * d
    p_lora = layers * r * sum(i + o for i, o in shapes)
    window = cfg.get("sliding_window") or 0
    ctx = 0.0
    for layer in range(layers):
        sliding = cfg.get("model_type") == "gemma2" and layer % 2 == 0 and window
        w = window if sliding else seq
        ctx += sum(min(t + 1, w) for t in range(seq)) / seq
    attn = 12 * h * hd * ctx
    return 4 * n_lin + 6 * p_lora + attn, n_lin, p_lora


def load_json(path):
    try:
        with open(path) as f:
            lines = [x for x in f.read().splitlines() if x.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except OSError:
        return {}


def fmt(x, spec="{:.0f}"):
    return "n/a" if x is None else spec.format(x)


def ratio(a, b):
    return None if a is None or not b else a / b


def table(work, shapes):
    gemm = load_json(os.path.join(work, "gemm.json"))
    peak = gemm.get("bf16_tflops")
    mib = lambda b: None if b is None else b / 2**20  # noqa: E731
    rows, notes, targets = [], [], []
    for shape in shapes:
        cfg_path = os.path.join(work, shape, "config.json")
        if not os.path.exists(cfg_path):
            rows.append(f"| {shape} | model not made | | | | | | | |")
            continue
        cfg = json.load(open(cfg_path))
        ours = load_json(os.path.join(work, shape + ".ptrain.json"))
        peer = load_json(os.path.join(work, shape + ".peer.json"))
        seq = peer.get("seq") or int(os.environ.get("SEQ", 2048))
        fpt, n_lin, p_lora = flops_per_token(cfg, seq)
        mfu = lambda tps: None if tps is None or not peak else 100 * fpt * tps / (peak * 1e12)  # noqa: E731
        t_ours, t_peer = ours.get("tokens_per_s"), peer.get("tokens_per_s")
        m_ours, m_peer = ours.get("peak_bytes"), peer.get("peak_alloc_bytes")
        rows.append(f"| {shape} | {fmt(t_ours)} | {fmt(t_peer)} | {fmt(ratio(t_ours, t_peer), '{:.2f}x')} "
                    f"| {fmt(mib(m_ours))} | {fmt(mib(m_peer))} | {fmt(ratio(m_ours, m_peer), '{:.2f}x')} "
                    f"| {fmt(mfu(t_ours), '{:.1f}%')} | {fmt(mfu(t_peer), '{:.1f}%')} |")
        yes = lambda ok: "n/a" if ok is None else "yes" if ok else "NO"  # noqa: E731
        r_t, r_m, u = ratio(t_ours, t_peer), ratio(m_ours, m_peer), mfu(t_ours)
        targets.append(f"targets {shape}: tokens/s >= 2x peer {yes(None if r_t is None else r_t >= 2)}, "
                       f"peak memory <= 0.5x peer {yes(None if r_m is None else r_m <= 0.5)}"
                       + (f", MFU >= 40% {yes(None if u is None else u >= 40)}" if shape == "gemma2-2b" else ""))
        notes.append(f"- {shape}: N_lin {n_lin / 1e9:.3f} G, P_lora {p_lora / 1e6:.2f} M, "
                     f"{fpt / 1e9:.2f} GFLOP per token at seq {seq}; ptrain memory plan "
                     f"{fmt(mib(ours.get('plan_bytes')))} MiB, peak {fmt(mib(m_ours))} MiB; ptrain loss "
                     f"{ours.get('loss_first')} -> {ours.get('loss_last')} over {ours.get('steps_logged')} steps; "
                     f"peer loss {peer.get('loss_first')} -> {peer.get('loss_last')}, peer reserved "
                     f"{fmt(mib(peer.get('peak_reserved_bytes')))} MiB")
        if peer.get("base"):
            notes.append(f"- {shape}: peer {peer.get('peer')}, base {peer['base']}, attention {peer.get('attn')}")
    print("| shape | ptrain tok/s | peer tok/s | ratio (target >= 2x) | ptrain peak MiB | peer peak MiB "
          "| ratio (target <= 0.5x) | ptrain MFU (target >= 40% on gemma2-2b) | peer MFU |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(f"MFU = FLOPs per token x tokens/s / the measured bf16 rate ({fmt(peak, '{:.1f}')} TFLOP/s on "
          f"{gemm.get('gpu', 'n/a')}; datasheet {DATASHEET_TFLOPS}); FLOPs per token = 4 N_lin + 6 P_lora + "
          f"12 H hd sum(mean causal context) (bench/gpu/README.md). Peak memory: ptrain's `peak device "
          f"memory`, the peer's torch.cuda.max_memory_allocated.")
    print("\n".join(notes))
    print("\n".join(targets))


def main():
    if len(sys.argv) >= 7 and sys.argv[1] == "ptrain":
        run_dir, log, warmup, seq, batch = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(
            sys.argv[6])
        print(json.dumps(ptrain_result(run_dir, log, warmup, seq, batch)))
    elif len(sys.argv) >= 3 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
