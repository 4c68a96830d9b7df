#!/usr/bin/env python3
"""make_reward_goldens.py — reward modelling as TRL 1.16's RewardTrainer computes it with PEFT, for
ptrain's reward parity test (tests/unit/test_dpo.c, test_reward_*).

Model: the tiny multi-head Llama of make_peft_goldens.py (tests/data/llama/tiny-mha-f32.gguf) as
LlamaForSequenceClassification (num_labels 1: `score`, a [1, hidden] linear without bias on the
final-normed hidden state of the last token that is not the pad token), in float64; LoRA r=4,
alpha=8 on all seven projections, task_type SEQ_CLS, so PEFT puts `score` in modules_to_save and
trains it in full. The score's first value is transformers' normal(0, initializer_range) under
torch.manual_seed(99); it is written out (score_init.f32) so ptrain's test starts from the same one.
Data: two pairs as token ids (TRL's tokenized columns chosen_ids/rejected_ids, so the trainer's
`_prepare_dataset` leaves them alone; the tokenizer is a stand-in word-level one whose eos and pad
are the last id), the first chosen ending in the pad id twice (the score is then read before it),
batched by TRL's own collator (chosen rows then rejected rows, right-padded) and the loss from the
trainer's compute_loss: -logsigmoid(r_chosen - r_rejected [- margin]).mean()
[+ center_rewards_coefficient * mean((r_chosen + r_rejected)^2)].

Cases: "zero": PEFT's default initialisation (B = 0; A gradients zero); "random": A and B random
(init_lora_weights=False); "margin": the random adapters with a margin column and
center_rewards_coefficient 0.01. Then 20 torch.optim.AdamW steps (lr 5e-3, weight decay 0.01,
clip 1.0 over the LoRA matrices and the score together) on the same batch from "zero".

Tokenization: the preference rows of make_dpo_goldens.py (tests/data/dpo/pairs.jsonl; text and
conversational) through TRL's own RewardTrainer._prepare_dataset with the tokenizers of
tests/data/tokenizer/{smollm2, llama3-mini} (its chosen_ids and rejected_ids), and with max_length
CUT the rows it keeps, for ptrain's src/data/pair.c (reward: whole sequences, long pairs dropped).

The margin column: ROWS with margins (margins.jsonl) through _prepare_dataset and
DataCollatorForPreference: the float32 margins compute_loss subtracts (manifest's margin_rows).

Writes tests/data/reward/: tokenized.json, margins.jsonl, manifest.json, score_init.f32, {zero,random}_init.f32 (the LoRA
matrices in manifest order), {zero,random,margin}_grads.f32 (the LoRA gradients, then the score's).
Run: $PTRAIN_PYTHON tests/reference/make_reward_goldens.py (torch transformers peft trl)
"""
import json
import os
import sys

import numpy as np
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import LlamaConfig, LlamaForSequenceClassification
from trl import RewardConfig, RewardTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_dpo_goldens import ROWS, TOKENIZERS, stand_in_tokenizer  # noqa: E402
from make_peft_goldens import MHA, MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "reward")
PAD = MHA["vocab_size"] - 1
MARGINS = [0.5, -0.25]
CUT = 40  # a max_length that drops some of ROWS' pairs
PREPARE = RewardTrainer._prepare_dataset
CENTER = 0.01


def pairs(margin):
    rng = np.random.default_rng(46)
    ids = lambda n: rng.integers(0, PAD - 1, size=n).tolist()  # noqa: E731
    out = [{"chosen_ids": ids(7) + [PAD, PAD], "rejected_ids": ids(5)},
           {"chosen_ids": ids(6), "rejected_ids": ids(10)}]
    if margin:
        for row, m in zip(out, MARGINS):
            row["margin"] = m
    return out


def seq_cls_model():
    """The causal tiny Llama's weights in LlamaForSequenceClassification (its lm_head dropped)."""
    causal = base_model()
    cfg = LlamaConfig(**MHA, num_labels=1, pad_token_id=PAD)
    torch.manual_seed(98)
    model = LlamaForSequenceClassification(cfg).double()
    missing, _ = model.load_state_dict({k: v for k, v in causal.state_dict().items() if k != "lm_head.weight"},
                                       strict=False)
    assert missing == ["score.weight"], missing
    return model


def score_param(model):
    return model.base_model.model.score.modules_to_save["default"].weight


def make(init_random, margin):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="SEQ_CLS",
                     init_lora_weights=not init_random)
    rows = pairs(margin)
    args = RewardConfig(output_dir="/tmp/ptrain-reward-golden", bf16=False, fp16=False, use_cpu=True,
                        gradient_checkpointing=False, report_to="none", per_device_train_batch_size=2,
                        max_length=None, logging_steps=1, center_rewards_coefficient=CENTER if margin else None)
    trainer = RewardTrainer(model=seq_cls_model(), args=args, train_dataset=Dataset.from_list(rows),
                            processing_class=stand_in_tokenizer(), peft_config=cfg)
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():  # f32 values, as ptrain stores them
        for _, _, _, p in params + [(0, "score", "W", score_param(model))]:
            p.copy_(p.float().double())
    batch = trainer.data_collator(rows)
    return trainer, model, params, batch


def tokenized():
    """RewardTrainer's chosen_ids/rejected_ids of ROWS (text rows apart from conversational ones, as TRL
    prepares a dataset by its first row) with each tokenizer of TOKENIZERS; with max_length CUT, the
    indices of the rows kept."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    out = {"cut": CUT}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", name))
        rows, kept = [], []
        for group in (ROWS[:2], ROWS[2:]):
            for max_length in (None, CUT):
                args = RewardConfig(output_dir="/tmp/ptrain-reward-golden", use_cpu=True, report_to="none",
                                    max_length=max_length)
                ds = PREPARE(SimpleNamespace(), Dataset.from_list(group), tok, args, "train")
                got = [{k: r[k] for k in ("chosen_ids", "rejected_ids")} for r in ds]
                if max_length is None:
                    rows += got
                else:
                    kept += [len(rows) - len(group) + i for i, r in enumerate(rows[len(rows) - len(group):])
                             if r in got]
        out[name] = {"rows": rows, "kept": kept}
    return out


ROW_MARGINS = [0.1, -1.5, 2.25, 1e-3]  # a margin column on ROWS (float32 in TRL's collator)


def margin_rows():
    """ROWS with a margin column (written to margins.jsonl), through TRL's _prepare_dataset (text rows
    apart from conversational ones) and DataCollatorForPreference: the margins its batch carries into
    compute_loss, and the chosen_ids of each row (with smollm2's tokenizer)."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from trl.trainer.reward_trainer import DataCollatorForPreference
    rows = [dict(r, margin=m) for r, m in zip(ROWS, ROW_MARGINS)]
    with open(os.path.join(OUT, "margins.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", "smollm2"))
    args = RewardConfig(output_dir="/tmp/ptrain-reward-golden", use_cpu=True, report_to="none", max_length=None)
    margins, chosen = [], []
    for group in (rows[:2], rows[2:]):
        ds = PREPARE(SimpleNamespace(), Dataset.from_list(group), tok, args, "train")
        batch = DataCollatorForPreference(pad_token_id=0)([dict(r) for r in ds])
        margins += batch["margin"].tolist()
        chosen += [r["chosen_ids"] for r in ds]
    return {"tokenizer": "smollm2", "margins": margins, "chosen_ids": chosen}


def flat(tensors):
    return np.concatenate([t.detach().numpy().astype("<f4").ravel() for t in tensors])


def loss_and_grads(trainer, model, params, batch):
    model.train()
    for p in [p for _, _, _, p in params] + [score_param(model)]:
        p.grad = None
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(model, dict(batch))
    loss.backward()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.squeeze(-1)
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k != "num_tokens"}
    return float(loss.detach()), metrics, logits.tolist()


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "pad_id": PAD,
                "pairs": pairs(False), "margins": MARGINS, "center_rewards_coefficient": CENTER, "lr": 5e-3,
                "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "max_grad_norm": 1.0}
    for case, rnd, margin in (("zero", False, False), ("random", True, False), ("margin", True, True)):
        trainer, model, params, batch = make(rnd, margin)
        if case == "zero":
            flat([score_param(model)]).tofile(os.path.join(OUT, "score_init.f32"))
        if case != "margin":
            flat([p for _, _, _, p in params]).tofile(os.path.join(OUT, f"{case}_init.f32"))
        loss, metrics, scores = loss_and_grads(trainer, model, params, batch)
        flat([p.grad for _, _, _, p in params] + [score_param(model).grad]).tofile(
            os.path.join(OUT, f"{case}_grads.f32"))
        manifest[case] = {"first_loss": loss, "metrics": metrics, "scores": scores}
        print(case, "loss", loss, metrics)
        if case == "zero":
            trainable = [p for _, _, _, p in params] + [score_param(model)]
            opt = torch.optim.AdamW(trainable, lr=5e-3, weight_decay=0.01)
            losses = []
            for _ in range(20):
                opt.zero_grad()
                l, _, _ = loss_and_grads(trainer, model, params, batch)
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                opt.step()
                losses.append(l)
            manifest["zero"]["losses"] = losses
            print("losses", losses[0], "->", losses[-1])
    with open(os.path.join(OUT, "tokenized.json"), "w") as f:
        json.dump(tokenized(), f)
    manifest["margin_rows"] = margin_rows()
    manifest["tensors"] = [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
