#!/usr/bin/env python3
"""reward_check.py — PEFT loads ptrain's reward adapter and scores pairs as ptrain does (test_reward_mpi.sh).

Usage: reward_check.py MODEL_DIR LORA_DIR DATA.jsonl N METRICS.jsonl STEP
       reward_check.py MODEL_DIR LORA_DIR DATA.jsonl N --scores SCORES.tsv [--singles ROWS.jsonl SCORES.tsv]...

The first N rows of DATA.jsonl are tokenized by TRL 1.16's own RewardTrainer._prepare_dataset with
MODEL_DIR's tokenizer, batched by its collator, and scored by
AutoModelForSequenceClassification (num_labels 1, pad_token_id the tokenizer's pad, else eos, as
RewardTrainer sets it) with PeftModel.from_pretrained(LORA_DIR) (its LoRA and its modules_to_save
score). The loss and TRL's metrics of those scores must equal what ptrain logged at STEP of
METRICS.jsonl (a step whose batch is those N pairs, taken with the adapter LORA_DIR holds):
within 1e-4 (metrics.jsonl has 6 decimals). Rows with a margin column: the loss is
RewardTrainer's -logsigmoid(r_chosen - r_rejected - margin), the margins as its collator batches them.
With --scores: SCORES.tsv is what `ptrain score LORA_DIR --data DATA.jsonl` printed (a header, then
pair, chosen, rejected, margin, correct per pair): each pair's two scores, its margin and whether
chosen scored higher must be PEFT's, the scores within 1e-4 (printed with 6 decimals).
With --singles: ROWS.jsonl holds single rows (prompt + completion as text or turns, messages or
text) and SCORES.tsv what `ptrain score LORA_DIR --data ROWS.jsonl` printed (a header, then row,
score): each row is given to RewardTrainer._prepare_dataset as the chosen (and the rejected) of a
pair, so TRL tokenizes it as reward training tokenizes a chosen, and PEFT's score of that sequence
(the last non-pad token's, padded on the right) must be ptrain's within 1e-4.
"""
import json
import sys
from types import SimpleNamespace

import torch
from datasets import Dataset
from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from trl import RewardConfig, RewardTrainer
from trl.trainer.reward_trainer import DataCollatorForPreference


def main():
    model_dir, lora_dir, data, n, metrics, step = sys.argv[1:7]
    if metrics == "--scores":
        singles = sys.argv[7:]
        assert len(singles) % 3 == 0 and all(a == "--singles" for a in singles[::3]), singles
        worst = max([check_scores(*scores_of(model_dir, lora_dir, data, int(n)), step)] +
                    [check_singles(model_dir, lora_dir, rows, tsv) for rows, tsv in zip(singles[1::3], singles[2::3])])
        sys.exit(0 if worst <= 1e-4 else 1)
    rc, rr, batch = scores_of(model_dir, lora_dir, data, int(n))
    scores = torch.cat([rc, rr])
    margin = batch["margin"].double() if "margin" in batch else 0.0  # TRL's optional margin column
    mine = {"loss": float(-torch.nn.functional.logsigmoid(rc - rr - margin).mean()), "min_reward": float(scores.min()),
            "mean_reward": float(scores.mean()), "max_reward": float(scores.max()),
            "accuracy": float((rc > rr).double().mean()), "margin": float((rc - rr).mean())}
    logged = [json.loads(line) for line in open(metrics) if '"loss"' in line]
    rec = [r for r in logged if r["step"] == int(step)][-1]
    worst = 0.0
    for k, v in mine.items():
        worst = max(worst, abs(v - rec[k]))
        print(f"# {k}: PEFT {v:.6f}, ptrain {rec[k]:.6f}")
    print(f"# scores (chosen, rejected): {rc.tolist()}, {rr.tolist()}; max difference {worst:.2g}")
    sys.exit(0 if worst <= 1e-4 else 1)


def check_scores(rc, rr, batch, path):
    """ptrain score's lines against PEFT's scores of the same pairs."""
    rows = [line.rstrip("\n").split("\t") for line in open(path)][1:]
    assert len(rows) == len(rc), f"ptrain scored {len(rows)} pairs, PEFT {len(rc)}"
    worst = 0.0
    for k, (row, c, r) in enumerate(zip(rows, rc.tolist(), rr.tolist())):
        pc, pr, pm, ok = float(row[1]), float(row[2]), float(row[3]), int(row[4])
        worst = max(worst, abs(pc - c), abs(pr - r), abs(pm - (c - r)))
        print(f"# pair {k}: PEFT {c:.6f} {r:.6f}, ptrain {pc:.6f} {pr:.6f}")
        if ok != int(c > r) and abs(c - r) > 1e-4:
            print(f"# pair {k}: ptrain says correct {ok}, PEFT's scores {c} {r}")
            sys.exit(1)
    print(f"# {len(rows)} pairs: max difference {worst:.2g}")
    return worst


def as_pair(row):
    """A single row as the chosen (and rejected) of a pair, its prompt kept apart as TRL keeps it."""
    if "completion" in row:
        return {"prompt": row["prompt"], "chosen": row["completion"], "rejected": row["completion"]}
    seq = row["messages"] if "messages" in row else row["text"]
    return {"chosen": seq, "rejected": seq}


def check_singles(model_dir, lora_dir, data, path):
    """ptrain score's lines for single rows against PEFT's score of each row's sequence."""
    rows = [as_pair(json.loads(line)) for line in open(data)]
    tok, model = load(model_dir, lora_dir)
    args = RewardConfig(output_dir="/tmp/ptrain-reward-check", use_cpu=True, report_to="none", max_length=None)
    ds = RewardTrainer._prepare_dataset(SimpleNamespace(), Dataset.from_list(rows), tok, args, "train")
    ids = [torch.tensor(r["chosen_ids"]) for r in ds]
    batch = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=tok.pad_token_id)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones_like(i) for i in ids], batch_first=True, padding_value=0)
    with torch.no_grad():
        scores = model(input_ids=batch, attention_mask=mask).logits.squeeze(-1).double().tolist()
    mine = [line.rstrip("\n").split("\t") for line in open(path)][1:]
    assert len(mine) == len(scores), f"ptrain scored {len(mine)} rows, PEFT {len(scores)}"
    worst = max(abs(float(m[1]) - s) for m, s in zip(mine, scores))
    print(f"# {data.split('/')[-1]}: PEFT {[round(s, 6) for s in scores]}, ptrain {[float(m[1]) for m in mine]}; "
          f"max difference {worst:.2g}")
    return worst


_loaded = {}


def load(model_dir, lora_dir):
    """The tokenizer (pad: its own, else eos, as RewardTrainer sets it) and the PEFT reward model."""
    if (model_dir, lora_dir) not in _loaded:
        tok = AutoTokenizer.from_pretrained(model_dir)
        tok.pad_token = tok.pad_token or tok.eos_token
        model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1, dtype=torch.float32)
        model.config.pad_token_id = tok.pad_token_id
        _loaded[model_dir, lora_dir] = tok, PeftModel.from_pretrained(model, lora_dir).eval()
    return _loaded[model_dir, lora_dir]


def scores_of(model_dir, lora_dir, data, n):
    """PEFT's scores of the first n pairs of data: chosen, rejected, and the collated batch."""
    with open(f"{lora_dir}/adapter_config.json") as f:
        cfg = json.load(f)
    assert cfg["task_type"] == "SEQ_CLS" and cfg["modules_to_save"] == ["classifier", "score"], cfg
    rows = [json.loads(line) for line in open(data)][:n]
    tok, model = load(model_dir, lora_dir)
    args = RewardConfig(output_dir="/tmp/ptrain-reward-check", use_cpu=True, report_to="none", max_length=None)
    ds = RewardTrainer._prepare_dataset(SimpleNamespace(), Dataset.from_list(rows), tok, args, "train")
    batch = DataCollatorForPreference(pad_token_id=tok.pad_token_id)([dict(r) for r in ds])
    with torch.no_grad():
        scores = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.squeeze(-1)
    rc, rr = torch.chunk(scores.double(), 2)
    return rc, rr, batch


if __name__ == "__main__":
    main()
