#!/usr/bin/env python3
"""make_orpo_goldens.py — ORPO as TRL 1.16's experimental ORPOTrainer computes it, with PEFT, for
ptrain's ORPO parity test (tests/unit/test_dpo.c).

Loss: the trainer's own get_batch_loss_metrics (beta 0.1 as lambda): the chosen sequences' mean
token cross-entropy over prompt and completion, minus the mean over pairs of
beta log sigmoid(log odds(chosen) - log odds(rejected)), the log-probs averaged over each
completion's tokens; on the tiny Llama and the pairs of make_dpo_goldens.py, batched by the
trainer's collator from TRL's tokenized columns (tokenize_row skipped). Cases "zero" (B = 0) and
"random", then 20 AdamW steps from "zero". ORPO's tokenize_row is CPO's (make_cpo_goldens.py
checks it).

Writes tests/data/orpo/: manifest.json, {zero,random}_{init,grads}.f32.
Run: $PTRAIN_PYTHON tests/reference/make_orpo_goldens.py (torch transformers peft trl)
"""
import json
import os
import sys

import torch
from datasets import Dataset
from peft import LoraConfig
from trl.experimental.orpo import ORPOConfig, ORPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_cpo_goldens import features, flat  # noqa: E402
from make_dpo_goldens import pairs, stand_in_tokenizer  # noqa: E402
from make_peft_goldens import MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "orpo")
BETA = 0.1
METRICS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
           "logps/rejected", "nll_loss", "log_odds_ratio", "log_odds_chosen")


def make(init_random):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="CAUSAL_LM",
                     init_lora_weights=not init_random)
    rows = [features(r) for r in pairs()]
    args = ORPOConfig(output_dir="/tmp/ptrain-orpo-golden", beta=BETA, bf16=False, fp16=False, use_cpu=True,
                      gradient_checkpointing=False, report_to="none", per_device_train_batch_size=2, max_length=4096)
    ORPOTrainer.tokenize_row = lambda self, feature, model=None: feature  # rows are tokenized already
    trainer = ORPOTrainer(model=base_model(), args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=stand_in_tokenizer(), peft_config=cfg)
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():
        for _, _, _, p in params:
            p.copy_(p.float().double())
    return trainer, model, params, trainer.data_collator(rows)


def loss_and_grads(trainer, model, params, batch):
    model.train()
    for _, _, _, p in params:
        p.grad = None
    loss, metrics = trainer.get_batch_loss_metrics(model, batch, "train")
    loss.backward()
    return float(loss.detach()), {k: float(v) for k, v in metrics.items() if k in METRICS}


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "beta": BETA, "pairs": pairs(),
                "lr": 5e-3}
    for case, rnd in (("zero", False), ("random", True)):
        trainer, model, params, batch = make(rnd)
        flat(params, lambda p: p).tofile(os.path.join(OUT, f"{case}_init.f32"))
        loss, metrics = loss_and_grads(trainer, model, params, batch)
        flat(params, lambda p: p.grad).tofile(os.path.join(OUT, f"{case}_grads.f32"))
        manifest[case] = {"first_loss": loss, "metrics": metrics}
        print(case, "loss", loss, metrics)
        if case == "zero":
            opt = torch.optim.AdamW([p for _, _, _, p in params], lr=5e-3, weight_decay=0.01)
            losses = []
            for _ in range(20):
                opt.zero_grad()
                l, _ = loss_and_grads(trainer, model, params, batch)
                torch.nn.utils.clip_grad_norm_([p for _, _, _, p in params], 1.0)
                opt.step()
                losses.append(l)
            manifest["zero"]["losses"] = losses
            print("losses", losses[0], "->", losses[-1])
    manifest["tensors"] = [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
