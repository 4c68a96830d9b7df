#!/usr/bin/env python3
"""make_kto_goldens.py — KTO as TRL 1.16's KTOTrainer computes it, with PEFT (the reference is the
same model with the adapter disabled), for ptrain's KTO parity test (tests/unit/test_dpo.c).

Model: the tiny Llama of make_peft_goldens.py (tests/data/llama/tiny-mha-f32.gguf) in float64;
LoRA r=4, alpha=8 on all seven projections. Data: four unpaired rows as token ids (prompt_ids,
completion_ids, label: desirable, undesirable, undesirable, desirable) with the KL completions
KTOTrainer's _prepare_dataset adds (each batch of per_device_train_batch_size = 4 rotated by one:
row k gets row k-1's completion, row 0 the last one's), batched by the trainer's own collator and
the loss from its compute_loss (loss_type kto, beta 0.1, desirable_weight 1, undesirable_weight
1.5): the KL estimate from the mismatched sequences, the reference with the adapter off.
_prepare_dataset is skipped since the rows are tokenized already. Cases "zero" (B = 0: every
loss is 1 - sigmoid(0), the mean weight / 2) and "random"; then 20 AdamW steps from "zero" (lr
5e-3, weight decay 0.01, clip 1.0) on the same batch.

Tokenization: text rows, conversational rows and text pairs (unrolled) through TRL's own
KTOTrainer._prepare_dataset with the tokenizers of tests/data/tokenizer/{smollm2, llama3-mini}:
its prompt_ids, completion_ids, label and KL_completion_ids in order, for src/data/pair.c and
src/data/unpaired.c.

Writes tests/data/kto/: manifest.json, {zero,random}_{init,grads}.f32, text.jsonl, chat.jsonl,
pairs.jsonl and tokenized.json. Run: $PTRAIN_PYTHON tests/reference/make_kto_goldens.py
(torch transformers peft trl)
"""
import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer
from trl import KTOConfig, KTOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_dpo_goldens import TOKENIZERS, stand_in_tokenizer  # noqa: E402
from make_peft_goldens import MHA, MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "kto")
BETA, DESIRABLE, UNDESIRABLE, BATCH = 0.1, 1.0, 1.5, 4
PREPARE = KTOTrainer._prepare_dataset  # TRL's own tokenization, before make() bypasses it
TEXT = [
    {"prompt": "The sky is", "completion": " blue.", "label": True},
    {"prompt": "Q: 2+2?\nA:", "completion": " five, I think", "label": False},
    {"prompt": "The sun is", "completion": " cold.", "label": False},
]
CHAT = [
    {"prompt": [{"role": "user", "content": "What colour is the sky?"}],
     "completion": [{"role": "assistant", "content": "Blue."}], "label": True},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
     "completion": [{"role": "assistant", "content": "Lyon, or maybe Marseille."}], "label": False},
]
PAIRS = [
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    {"prompt": "Q: 2+2?\nA:", "chosen": " 4", "rejected": " five, I think"},
    {"prompt": "Water is", "chosen": " wet.", "rejected": " dry."},
]


def rows():
    rng = np.random.default_rng(46)
    out = []
    for plen, clen, label in ((5, 7, True), (3, 6, False), (4, 3, False), (6, 5, True)):
        ids = lambda n: rng.integers(0, MHA["vocab_size"] - 1, size=n).tolist()  # noqa: E731
        out.append({"prompt_ids": ids(plen), "completion_ids": ids(clen), "label": label})
    for k, r in enumerate(out):  # KTOTrainer's add_kl_completion_ids over one batch of BATCH rows
        r["KL_completion_ids"] = out[k - 1]["completion_ids"]
    return out


def make(init_random):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="CAUSAL_LM",
                     init_lora_weights=not init_random)
    data = rows()
    args = KTOConfig(output_dir="/tmp/ptrain-kto-golden", beta=BETA, desirable_weight=DESIRABLE,
                     undesirable_weight=UNDESIRABLE, bf16=False, fp16=False, use_cpu=True,
                     gradient_checkpointing=False, report_to="none", per_device_train_batch_size=BATCH,
                     max_length=None, logging_steps=1)
    KTOTrainer._prepare_dataset = lambda self, ds, *a, **k: ds  # rows are tokenized already
    trainer = KTOTrainer(model=base_model(), args=args, train_dataset=Dataset.from_list(data),
                         processing_class=stand_in_tokenizer(), peft_config=cfg)
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():  # adapters as f32 values, as ptrain stores them
        for _, _, _, p in params:
            p.copy_(p.float().double())
    return trainer, model, params, trainer.data_collator(data)


def flat(params, what):
    return np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for _, _, _, p in params])


KEEP = ("rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected", "kl")


def loss_and_grads(trainer, model, params, batch):
    model.train()
    for _, _, _, p in params:
        p.grad = None
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(model, batch)
    loss.backward()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k in KEEP}
    return float(loss.detach()), metrics


def tokenized():
    """TRL's prompt_ids/completion_ids/label/KL_completion_ids of TEXT, CHAT and PAIRS (each a
    dataset of its own, as TRL prepares a dataset by its first row), per tokenizer."""
    args = KTOConfig(output_dir="/tmp/ptrain-kto-golden", use_cpu=True, report_to="none", max_length=1024,
                     per_device_train_batch_size=2)
    out = {}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", name))
        stub = SimpleNamespace(_tokenizer=tok, calculate_KL=True)
        got = {}
        for group, data in (("text", TEXT), ("chat", CHAT), ("pairs", PAIRS)):
            ds = PREPARE(stub, Dataset.from_list(data), tok, args, "eval")
            got[group] = [{k: r[k] for k in ("prompt_ids", "completion_ids", "label", "KL_completion_ids")}
                          for r in ds]
        out[name] = got
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in (("text", TEXT), ("chat", CHAT), ("pairs", PAIRS)):
        with open(os.path.join(OUT, f"{name}.jsonl"), "w") as f:
            for r in data:
                f.write(json.dumps(r) + "\n")
    with open(os.path.join(OUT, "tokenized.json"), "w") as f:
        json.dump(tokenized(), f)
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "beta": BETA,
                "desirable_weight": DESIRABLE, "undesirable_weight": UNDESIRABLE, "rows": rows(), "lr": 5e-3,
                "weight_decay": 0.01, "max_grad_norm": 1.0}
    for case, rnd in (("zero", False), ("random", True)):
        trainer, model, params, batch = make(rnd)
        flat(params, lambda p: p).tofile(os.path.join(OUT, f"{case}_init.f32"))
        loss, metrics = loss_and_grads(trainer, model, params, batch)
        flat(params, lambda p: p.grad).tofile(os.path.join(OUT, f"{case}_grads.f32"))
        manifest[case] = {"first_loss": loss, "metrics": metrics}
        print(case, "loss", loss, metrics)
        if case == "zero":
            want = 0.5 * (2 * DESIRABLE + 2 * UNDESIRABLE) / 4
            assert abs(loss - want) < 1e-6, (loss, want)
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
