#!/usr/bin/env python3
"""matrix.py — the runs of the GPU benchmark (bench/gpu/run.sh calls it), each cell one process under
its own timeout, in priority order, within a deadline: a cell whose estimated time no longer fits is
skipped with the reason written down, so the important cells run first and the report says what
was left out.

  matrix.py speed WORKDIR     ptrain (use_gradient_checkpointing false, true, unsloth) and the peer
      (gradient checkpointing on and off) on the big shape (gemma-2-2b's) at seq 2048 and 8192 and
      the small one (SmolLM2-135M's) at 2048, batch 1 and 4: WARMUP untimed and STEPS timed steps
      each. A cell's time is estimated from the cells of its side and shape that ran (step time
      scaled by batch and by seq^1.5, between linear layers and quadratic attention; loading as
      measured), or from a prior before any ran. Appends to WORKDIR/cells.jsonl.
  matrix.py longest WORKDIR   the longest sequence that trains at batch 1, on each shape of
      LONGEST_SHAPES (gemma-2-2b's, Llama-3.1-8B's): ptrain's by its memory plan (`ptrain inspect`,
      from the config alone: no weights loaded) doubling from LONGEST_START while the plan fits the GPU's
      free memory (plan x 1.10 + 1 GiB, and the offloaded inputs within 80% of the host's available
      memory), for each checkpointing mode, then one real training step at the largest (unsloth's);
      the peer's by peer_peft.py --longest (one step per trial, doubling until out of memory or its
      time limit). Appends to WORKDIR/longest.jsonl.

Environment (run.sh sets it): PTRAIN, DEVICE (cuda; cpu: the dry run), PYTHON, DEADLINE (epoch
seconds), BIG, SMALL (shape names), SEQS ("2048 8192": the small shape runs the first), BATCHES
("1 4"), STEPS (4), WARMUP (1), CELLS (a file of "side shape seq batch mode" lines instead of the
built-in list), LONGEST_SHAPES, LONGEST_START (2048), MAX_SEQ (1048576), LONGEST_STEP_SECONDS (240: the one ptrain step),
PEER_LONGEST_SECONDS (120), BENCH_CONTINUE (1: keep the cells an earlier call ran in WORKDIR, run the rest)."""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
from make_random_model import write_dataset  # noqa: E402

ENV = os.environ
DEVICE = ENV.get("DEVICE", "cuda")
PTRAIN = ENV.get("PTRAIN", "build/ptrain")
PYTHON = ENV.get("PYTHON", "python3")
DEADLINE = float(ENV.get("DEADLINE", time.time() + 600))
STEPS, WARMUP = int(ENV.get("STEPS", 4)), int(ENV.get("WARMUP", 1))
# priors before a cell of the side and shape ran: (load s, step s at 2048 x 1); the H200's first run
# (docs/cuda-backend.md): gemma-2-2b 2950 tok/s ptrain, 4592 peer; SmolLM2 7308 and 6467
PRIOR = {"gemma2-2b": {"ptrain": (45, 0.7), "peer": (25, 0.45)},
         "smollm2-135m": {"ptrain": (10, 0.3), "peer": (15, 0.32)},
         "llama3.1-8b": {"ptrain": (90, 2.5), "peer": (40, 1.2)}}
PRIOR_SEQ = 2048
MARGIN = 15  # seconds kept for the tables


def left():
    return DEADLINE - time.time() - MARGIN


def run(cmd, limit, log, cwd=None):
    """cmd under a wall-clock limit in a process group of its own, output to log: (rc, seconds);
    rc 124 when the limit ended it, as timeout(1) says."""
    t0 = time.time()
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            rc = p.wait(timeout=max(limit, 1))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            rc = 124
    return rc, int(round(time.time() - t0))


def append(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def ensure_model(work, shape, dataset_tokens):
    """The random model (setup may be writing it: wait for config.json while its writer lives), and
    text.jsonl; written here when missing."""
    cfg = os.path.join(work, shape, "config.json")
    while not os.path.exists(cfg) and os.path.exists(os.path.join(work, f"{shape}.writing")) and left() > 0:
        time.sleep(2)
    if not os.path.exists(cfg):
        ds = ["--dataset", os.path.join(work, "text.jsonl"), "--rows", "32", "--dataset-tokens", str(dataset_tokens)]
        rc, s = run([PYTHON, os.path.join(HERE, "make_random_model.py"), shape, os.path.join(work, shape), "--device",
                     DEVICE] + ds, min(300, left()), os.path.join(work, f"{shape}.model.log"))
        print(f"bench: model {shape}: exit {rc} after {s} s", flush=True)
    if not os.path.exists(os.path.join(work, "text.jsonl")):
        write_dataset(os.path.join(work, "text.jsonl"), 32, dataset_tokens, 1234)
    return os.path.exists(cfg)


# ---- speed ----

def default_cells(big, small, seqs, batches):
    s, l = seqs[0], seqs[-1]
    b1, b4 = batches[0], batches[-1]
    order = [("ptrain", big, s, b1, "unsloth"), ("peer", big, s, b1, "ckpt-on"), ("ptrain", big, s, b1, "true"),
             ("ptrain", big, s, b1, "false"), ("ptrain", small, s, b1, "unsloth"), ("peer", small, s, b1, "ckpt-on"),
             ("ptrain", big, l, b1, "unsloth"), ("peer", big, l, b1, "ckpt-on"), ("ptrain", big, s, b4, "unsloth"),
             ("peer", big, s, b4, "ckpt-on"), ("ptrain", small, s, b4, "unsloth"), ("peer", small, s, b4, "ckpt-on"),
             ("peer", big, s, b1, "ckpt-off")]
    for shape, seq, b in ((big, l, b1), (big, s, b4), (small, s, b1), (small, s, b4)):
        order += [("ptrain", shape, seq, b, "true"), ("ptrain", shape, seq, b, "false")]
    order += [("peer", small, s, b1, "ckpt-off"), ("peer", big, s, b4, "ckpt-off"), ("ptrain", big, l, b4, "unsloth"),
              ("peer", big, l, b4, "ckpt-on"), ("ptrain", big, l, b4, "true"), ("ptrain", big, l, b4, "false"),
              ("peer", big, l, b1, "ckpt-off"), ("peer", big, l, b4, "ckpt-off"), ("peer", small, s, b4, "ckpt-off")]
    seen, out = set(), []
    for c in order:  # SEQS or BATCHES of one value make some cells the same
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def cell_list():
    if ENV.get("CELLS"):
        with open(ENV["CELLS"]) as f:
            return [(x[0], x[1], int(x[2]), int(x[3]), x[4]) for x in (ln.split() for ln in f) if len(x) == 5]
    seqs = [int(x) for x in ENV.get("SEQS", "2048 8192").split()]
    batches = [int(x) for x in ENV.get("BATCHES", "1 4").split()]
    return default_cells(ENV.get("BIG", "gemma2-2b"), ENV.get("SMALL", "smollm2-135m"), seqs, batches)


def estimate(done, side, shape, seq, batch):
    """(load s, step s) for a cell, from the done cells of the side and shape, else the prior."""
    ran = [c for c in done if c["side"] == side and c["shape"] == shape and c.get("step_s")]
    load, step0 = PRIOR.get(shape, {}).get(side, (30, 1.0))
    if ran:
        ref = min(ran, key=lambda c: abs(c["seq"] * c["batch"] - seq * batch))
        step = ref["step_s"] * batch / ref["batch"] * (seq / ref["seq"]) ** 1.5
        loads = [c["load_s"] for c in ran if c.get("load_s") is not None]
        load = max(loads) if loads else load
    else:
        step = step0 * batch * (seq / PRIOR_SEQ) ** 1.5
    return load, step


def ptrain_config(work, shape, seq, batch, mode, out, steps):
    return f"""model_name: "{work}/{shape}"
max_seq_length: {seq}
device: {DEVICE}
dataset:
  - name: "{work}/text.jsonl"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
use_gradient_checkpointing: {mode}
per_device_train_batch_size: {batch}
gradient_accumulation_steps: 1
max_steps: {steps}
learning_rate: 1e-4
lr_scheduler_type: constant
warmup_steps: 0
optim: adamw_torch
weight_decay: 0.01
max_grad_norm: 1.0
logging_steps: 1
save_strategy: "no"
output_dir: "{out}"
final_model_dir: "{out}/lora"
"""


def ptrain_cell(work, shape, seq, batch, mode, limit):
    name = f"{shape}.{seq}x{batch}.{mode}"
    out = os.path.join(work, name + ".out")
    subprocess.run(["rm", "-rf", out])
    with open(os.path.join(work, name + ".yaml"), "w") as f:
        f.write(ptrain_config(work, shape, seq, batch, mode, out, WARMUP + STEPS))
    log = os.path.join(work, name + ".ptrain.log")
    rc, s = run([PTRAIN, "train", os.path.join(work, name + ".yaml")], limit, log)
    c = report.ptrain_cell(shape, seq, batch, mode, out, log, WARMUP, rc, s)
    if c.get("step_s"):
        c["load_s"] = max(0, round(s - (WARMUP + STEPS) * c["step_s"]))
    return c


LIGER = {"flag": "auto", "why": ""}  # "off" after Liger's kernels failed in a peer's step


def peer_run(args, limit, log):
    """peer_peft.py ARGS; once Liger fails in a step (exit 3), this cell and the later ones run
    without it, and their rows say why."""
    cmd = [PYTHON, os.path.join(HERE, "peer_peft.py")] + args
    rc, s = run(cmd + ["--liger", LIGER["flag"]], limit, log)
    if rc == 3:
        failed = [r for r in report.json_lines(log) if "liger_failed" in r]
        LIGER.update(flag="off", why=failed[-1]["liger_failed"] if failed else "exit 3")
        print(f"bench: Liger failed in a step ({LIGER['why']}): the peer runs without it from here", flush=True)
        rc, s2 = run(cmd + ["--liger", "off"], max(limit - s, 1), log)
        s += s2
    return rc, s


def peer_cell(work, shape, seq, batch, mode, limit):
    log = os.path.join(work, f"{shape}.{seq}x{batch}.{mode}.peer.log")
    rc, s = peer_run([os.path.join(work, shape), "--device", DEVICE, "--steps", str(STEPS), "--warmup", str(WARMUP),
                      "--seq", str(seq), "--batch", str(batch), "--checkpointing", "on" if mode == "ckpt-on" else "off"],
                     limit, log)
    c = report.peer_cell(shape, seq, batch, mode, log, rc, s)
    if LIGER["why"] and c.get("liger", "").startswith("off"):
        c["liger"] = f"off (failed: {LIGER['why']})"
    return c


def carried_over(path):
    """BENCH_CONTINUE=1: the cells an earlier call ran (kept; the rest of the file dropped)."""
    if ENV.get("BENCH_CONTINUE") != "1":
        return []
    kept = [c for c in report.json_lines(path) if c.get("status") in ("ok", "partial")]
    with open(path, "w") as f:
        f.writelines(json.dumps(c) + "\n" for c in kept)
    return kept


def speed(work):
    cells = cell_list()
    path = os.path.join(work, "cells.jsonl")
    done = carried_over(path)
    ran = {(c["side"], c["shape"], c["seq"], c["batch"], c["mode"]) for c in done}
    seq_max = max(c[2] for c in cells)
    for side, shape, seq, batch, mode in cells:
        if (side, shape, seq, batch, mode) in ran:
            continue
        load, step = estimate(done, side, shape, seq, batch)
        need = load + (WARMUP + STEPS) * step
        if need > left():
            append(path, report_skip(side, shape, seq, batch, mode,
                                     f"about {need:.0f} s needed ({load:.0f} s loading, {WARMUP + STEPS} steps of "
                                     f"{step:.1f} s), {max(left(), 0):.0f} s left"))
            continue
        if not ensure_model(work, shape, seq_max):
            append(path, report_skip(side, shape, seq, batch, mode, "its random model could not be written"))
            continue
        limit = min(left(), 2 * need + 30)
        fn = ptrain_cell if side == "ptrain" else peer_cell
        c = fn(work, shape, seq, batch, mode, limit)
        c["estimate_s"] = round(need)
        append(path, c)
        done.append(c)


def report_skip(side, shape, seq, batch, mode, why):
    return {"side": side, "shape": shape, "seq": seq, "batch": batch, "mode": mode, "status": "skipped", "reason": why}


# ---- longest ----

def free_memory():
    """(device bytes free, host bytes available): nvidia-smi's GPU 0, /proc/meminfo's MemAvailable.
    In the dry run (cpu) the device is the host."""
    host = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                host = int(line.split()[1]) * 1024
    if DEVICE != "cuda":
        return host // 2, host
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, timeout=30).stdout.split()
    return int(out[0]) * 2**20 if out else 0, host


def inspect_plan(model, seq, mode):
    """ptrain inspect's plan for batch 1 x seq: (device bytes, host bytes)."""
    out = subprocess.run([PTRAIN, "inspect", model, "--max-seq-length", str(seq), "--batch-size", "1", "--lora-r", "16",
                          "--gradient-checkpointing", mode, "--device", DEVICE], capture_output=True, text=True,
                         timeout=60).stdout
    dev = re.search(r"^memory plan: (\d+) bytes on", out, re.M)
    host = re.search(r"^memory plan: (\d+) bytes of pinned host memory", out, re.M)
    return (int(dev.group(1)) if dev else None), (int(host.group(1)) if host else 0)


START = int(ENV.get("LONGEST_START", 2048))


def plan_search(model, mode, free, host_free, max_seq):
    """Double from START while the plan fits; (largest seq, its plan, the trials)."""
    seq, best, trials = START, None, []
    while seq <= max_seq:
        dev, host = inspect_plan(model, seq, mode)
        fits = dev is not None and dev * 1.10 + 2**30 <= free and host <= 0.8 * host_free
        trials.append(f"{seq}: {report.fmt(report.mib(dev))} MiB" + (f" + host {host >> 20} MiB" if host else "")
                      + ("" if fits else " (does not fit)"))
        if not fits:
            break
        best = (seq, dev, host)
        seq *= 2
    return best, trials


def ptrain_longest(work, shape, max_seq):
    model = os.path.join(work, shape)
    free, host_free = free_memory()
    rows, found = [], {}
    for mode in ("unsloth", "true", "false"):
        best, trials = plan_search(model, mode, free, host_free, max_seq)
        found[mode] = best
        rows.append({"side": "ptrain", "shape": shape, "mode": mode, "longest_seq": best and best[0],
                     "plan_bytes": best and best[1], "host_bytes": best and best[2],
                     "how": f"memory plan (ptrain inspect), doubling from {START}", "step": "not run",
                     "notes": f"free {free >> 20} MiB on the device, {host_free >> 20} MiB host; " + "; ".join(trials)})
    mode = max(found, key=lambda m: (found[m] or (0,))[0])
    if found[mode]:
        rows[[r["mode"] for r in rows].index(mode)].update(ptrain_step_at(work, shape, found[mode][0], mode))
    return rows


def step_guess(work, shape, seq):
    """The seconds of one ptrain step at 1 x seq, from the longest sequence the speed cells of shape
    ran (scaled by seq^2: attention dominates there), or None."""
    ran = [c for c in report.json_lines(os.path.join(work, "cells.jsonl"))
           if c["side"] == "ptrain" and c["shape"] == shape and c.get("step_s")]
    if not ran:
        return None
    ref = max(ran, key=lambda c: (c["seq"], -c["batch"]))
    return ref["step_s"] / ref["batch"] * (seq / ref["seq"]) ** 2, ref


def ptrain_step_at(work, shape, seq, mode):
    """One real training step at batch 1 x seq: its verdict for the longest row. When the speed
    cells say that step would outlast the time there is, the step runs at the longest power of two
    below it that fits (said in the row), or not at all."""
    limit = min(float(ENV.get("LONGEST_STEP_SECONDS", 240)), left())
    if limit < 30:
        return {"step": f"skipped: {max(left(), 0):.0f} s left"}
    guess, run_seq, note = step_guess(work, shape, seq), seq, ""
    if guess:
        load = PRIOR.get(shape, {}).get("ptrain", (30, 0))[0]
        while run_seq >= START and guess[0] * (run_seq / seq) ** 2 + load > limit:
            run_seq //= 2
        if run_seq != seq:
            note = (f"; a step at {seq} would take about {guess[0]:.0f} s (the {guess[1]['seq']}-token cell's "
                    f"{guess[1]['step_s']:.2f} s x (seq ratio)^2), over the {limit:.0f} s left for it")
        if run_seq < START:
            return {"step": "not run" + note}
    r = ptrain_step_run(work, shape, run_seq, mode, limit)
    if run_seq != seq:
        r["step"] = f"at {run_seq} instead: {r['step']}{note}"
    return r


def ptrain_step_run(work, shape, seq, mode, limit):
    data = os.path.join(work, f"long-{seq}.jsonl")
    if not os.path.exists(data):
        write_dataset(data, 1, seq, 1234)
    name = f"{shape}.longest.{seq}"
    out = os.path.join(work, name + ".out")
    cfg = ptrain_config(work, shape, seq, 1, mode, out, 1).replace(f"{work}/text.jsonl", data)
    with open(os.path.join(work, name + ".yaml"), "w") as f:
        f.write(cfg)
    log = os.path.join(work, name + ".log")
    rc, s = run([PTRAIN, "train", os.path.join(work, name + ".yaml")], limit, log)
    c = report.ptrain_cell(shape, seq, 1, mode, out, log, 0, rc, s)
    verdict = {"ok": "ran: 1 step, exit 0", "timeout": f"did not finish within {int(limit)} s (its timeout)"}
    return {"step": verdict.get(c["status"], f"failed: {c.get('reason', '')}"), "peak_bytes": c.get("peak_bytes"),
            "step_s": c.get("step_s"), "wall_s": s}


def peer_longest(work, shape, max_seq):
    limit = min(float(ENV.get("PEER_LONGEST_SECONDS", 120)), left() - 60)
    if limit < 30:
        return [{"side": "peer", "shape": shape, "mode": "ckpt-on", "how": "not run",
                 "notes": f"skipped: {max(left(), 0):.0f} s left"}]
    log = os.path.join(work, f"{shape}.longest.peer.log")
    rc, s = peer_run([os.path.join(work, shape), "--device", DEVICE, "--longest", "--seq", str(START), "--max-seq",
                      str(max_seq), "--time-limit", str(int(limit))], limit + 60, log)
    res = [r for r in report.json_lines(log) if r.get("mode") == "longest"]
    trials = [r for r in report.json_lines(log) if r.get("mode") == "longest-trial"]
    row = {"side": "peer", "shape": shape, "mode": "ckpt-on", "how": f"doubling from {START}, one step each",
           "wall_s": s}
    if res:
        r, at = res[-1], res[-1].get("at_longest") or {}
        row.update(longest_seq=r["longest_seq"], step="ran" if at else "none ran", step_s=at.get("step_s"),
                   peak_bytes=at.get("peak_alloc_bytes"),
                   notes=f"{r['base'].split(' (')[0]} base, Liger {r['liger'].split(' (')[0]}, {r['attn']}; "
                         f"stopped: {r['stopped']}")
    else:
        ok = [t for t in trials if t.get("ok")]
        row.update(longest_seq=ok[-1]["seq"] if ok else None, step="ran" if ok else "none ran",
                   notes=f"the search ended with exit {rc}" + (" (its timeout)" if rc == 124 else ""))
    return [row]


def longest(work):
    path = os.path.join(work, "longest.jsonl")
    max_seq = int(ENV.get("MAX_SEQ", 1 << 20))
    shapes = ENV.get("LONGEST_SHAPES", "gemma2-2b llama3.1-8b").split()
    for shape in shapes:
        for fn in (ptrain_longest, peer_longest):
            if left() < 30:
                append(path, {"side": "ptrain" if fn is ptrain_longest else "peer", "shape": shape, "how": "not run",
                              "notes": f"skipped: {max(left(), 0):.0f} s left"})
                continue
            if not ensure_model(work, shape, 2048):
                append(path, {"side": "both", "shape": shape, "how": "not run", "notes": "no random model"})
                break
            for row in fn(work, shape, max_seq):
                append(path, row)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("speed", "longest"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    (speed if sys.argv[1] == "speed" else longest)(os.path.abspath(sys.argv[2]))


if __name__ == "__main__":
    main()
