"""tb_check.py - a run's TensorBoard event files read by TensorBoard's own EventAccumulator (the
reader behind `tensorboard --logdir`, with its purge of steps a restarted run logs again), compared
with the run's metrics.jsonl: every scalar at every step, once, with the value logged there.

Usage: tb_check.py LOGDIR METRICS_JSONL   prints "ok", or one line per difference
       tb_check.py LOGDIR --steps TAG     prints the steps TensorBoard has for TAG
"""
import json
import math
import sys

from tensorboard.backend.event_processing import event_accumulator as ea

# metrics.jsonl rounds: epoch to 4 decimals, tokens/s to 1; TensorBoard keeps a float
ABS_TOL = {"train/epoch": 1e-4, "train/tokens_per_second": 0.06}
TAGS = {
    "train/loss": "loss",
    "train/learning_rate": "learning_rate",
    "train/grad_norm": "grad_norm",
    "train/epoch": "epoch",
    "train/tokens_per_second": "tokens_per_s",
    "eval/loss": "eval_loss",
}


def scalars(logdir):
    acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    have = acc.Tags()["scalars"]
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in have}


def logged(path):
    want = {tag: [] for tag in TAGS}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            for tag, key in TAGS.items():
                if rec.get(key) is not None:
                    want[tag].append((rec["step"], rec[key]))
    return want


def compare(got, want):
    problems = []
    for tag, w in want.items():
        g = got.get(tag, [])
        if [s for s, _ in g] != [s for s, _ in w]:
            problems.append("%s: TensorBoard has steps %s, metrics.jsonl %s" % (tag, [s for s, _ in g], [s for s, _ in w]))
            continue
        for (step, a), (_, b) in zip(g, w):
            if not math.isclose(a, b, rel_tol=1e-4, abs_tol=ABS_TOL.get(tag, 1e-6)):
                problems.append("%s at step %d: TensorBoard %r, metrics.jsonl %r" % (tag, step, a, b))
    loss_steps = [s for s, _ in got.get("train/loss", [])]
    if [s for s, _ in got.get("memory/host_rss_mib", [])] != loss_steps:
        problems.append("memory/host_rss_mib is not logged at every training step")
    return problems


def main():
    got = scalars(sys.argv[1])
    if sys.argv[2] == "--steps":
        print(" ".join(str(s) for s, _ in got.get(sys.argv[3], [])))
        return
    problems = compare(got, logged(sys.argv[2]))
    print("\n".join(problems) if problems else "ok")


main()
