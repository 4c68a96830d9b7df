#!/usr/bin/env python3
"""make_dpo_goldens.py — DPO as TRL 1.16's DPOTrainer computes it, with PEFT (the reference is the
same model with the adapter disabled), for ptrain's DPO parity test (tests/unit/test_dpo.c).

Model: the tiny multi-head Llama of make_peft_goldens.py (tests/data/llama/tiny-mha-f32.gguf),
in float64; LoRA r=4, alpha=8 on all seven projections. Data: two preference pairs as token ids
(prompt, chosen, rejected; TRL's tokenized columns prompt_ids/chosen_ids/rejected_ids), batched
by TRL's own collator (chosen rows then rejected rows, completion_mask) and the loss from the
trainer's compute_loss (sigmoid loss, beta 0.1; the adapter made by the trainer from peft_config, so the
reference is the model with the adapter disabled, as for ptrain's new adapters): `_prepare_dataset` is skipped since the rows are
already tokenized, so the tokenizer given is a stand-in word-level one of the model's vocabulary.

Cases: "zero": PEFT's default initialisation (B = 0), whose first loss is ln 2 and whose A
gradients are zero; "random": A and B random (init_lora_weights=False), every gradient non-zero.
Then 20 torch.optim.AdamW steps (lr 5e-3, weight decay 0.01, clip 1.0) on the same batch from the
"zero" adapters: the losses and TRL's logged metrics of the first step.

Tokenization: the rows of ROWS (text and conversational) through TRL's own _prepare_dataset with
the tokenizers of tests/data/tokenizer/{smollm2, llama3-mini} (its prompt_ids, chosen_ids,
rejected_ids), for ptrain's src/data/pair.c.

Writes tests/data/dpo/: manifest.json, zero_init.f32, zero_grads.f32, random_init.f32,
random_grads.f32, pairs.jsonl (ROWS) and tokenized.json. Run: $PTRAIN_PYTHON tests/reference/make_dpo_goldens.py (torch transformers peft trl)
"""
import json
import math
import os
import sys

import numpy as np
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from trl import DPOConfig, DPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_peft_goldens import MHA, MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "dpo")
BETA = 0.1
TOKENIZERS = ["smollm2", "llama3-mini"]  # tests/data/tokenizer/: a chat model's, and one that adds bos
PREPARE = DPOTrainer._prepare_dataset  # TRL's own tokenization, before make() bypasses it
ROWS = [  # TRL's preference rows: standard (text) and conversational
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    {"prompt": "Q: 2+2?\nA:", "chosen": " 4", "rejected": " five, I think"},
    {"prompt": [{"role": "user", "content": "What colour is the sky?"}],
     "chosen": [{"role": "assistant", "content": "Blue."}],
     "rejected": [{"role": "assistant", "content": "Green, surely."}]},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
     "chosen": [{"role": "assistant", "content": "Paris."}],
     "rejected": [{"role": "assistant", "content": "Lyon, or maybe Marseille."}]},
]


def pairs():
    rng = np.random.default_rng(45)
    out = []
    for plen, clen, rlen in ((5, 7, 4), (3, 6, 9)):
        ids = lambda n: rng.integers(0, MHA["vocab_size"] - 1, size=n).tolist()  # noqa: E731
        out.append({"prompt_ids": ids(plen), "chosen_ids": ids(clen), "rejected_ids": ids(rlen)})
    return out


def stand_in_tokenizer():
    vocab = {f"t{i}": i for i in range(MHA["vocab_size"])}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="t0")))
    tok.eos_token = f"t{MHA['vocab_size'] - 1}"
    tok.pad_token = tok.eos_token
    return tok


def make(init_random):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="CAUSAL_LM",
                     init_lora_weights=not init_random)
    rows = pairs()
    args = DPOConfig(output_dir="/tmp/ptrain-dpo-golden", beta=BETA, bf16=False, fp16=False, use_cpu=True,
                     gradient_checkpointing=False, report_to="none", per_device_train_batch_size=2,
                     max_length=None, logging_steps=1)
    DPOTrainer._prepare_dataset = lambda self, ds, *a, **k: ds  # rows are tokenized already
    # a new adapter (peft_config): TRL's reference is the model with the adapter disabled
    trainer = DPOTrainer(model=base_model(), args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=stand_in_tokenizer(), peft_config=cfg)
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():  # adapters as f32 values, as ptrain stores them
        for _, _, _, p in params:
            p.copy_(p.float().double())
    batch = trainer.data_collator(rows)
    return trainer, model, params, batch


def tokenized():
    """TRL's prompt_ids/chosen_ids/rejected_ids of ROWS (text rows apart from conversational ones, as
    TRL prepares a dataset by its first row) with each tokenizer of TOKENIZERS."""
    from transformers import AutoTokenizer
    from types import SimpleNamespace
    args = DPOConfig(output_dir="/tmp/ptrain-dpo-golden", use_cpu=True, report_to="none", max_length=None)
    out = {}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", name))
        stub = SimpleNamespace(_tokenizer=tok)
        got = []
        for group in (ROWS[:2], ROWS[2:]):
            ds = PREPARE(stub, Dataset.from_list(group), tok, args, "train")
            got += [{k: r[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for r in ds]
        out[name] = got
    return out


def flat(params, what):
    return np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for _, _, _, p in params])


def loss_and_grads(trainer, model, params, batch):
    model.train()
    for _, _, _, p in params:
        p.grad = None
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(model, batch)
    loss.backward()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k in (
        "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
        "logps/rejected")}
    return float(loss.detach()), metrics


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "beta": BETA,
                "pairs": pairs(), "lr": 5e-3, "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-8,
                "max_grad_norm": 1.0}
    for case, rnd in (("zero", False), ("random", True)):
        trainer, model, params, batch = make(rnd)
        flat(params, lambda p: p).tofile(os.path.join(OUT, f"{case}_init.f32"))
        loss, metrics = loss_and_grads(trainer, model, params, batch)
        flat(params, lambda p: p.grad).tofile(os.path.join(OUT, f"{case}_grads.f32"))
        manifest[case] = {"first_loss": loss, "metrics": metrics}
        print(case, "loss", loss, metrics)
        if case == "zero":
            assert abs(loss - math.log(2)) < 1e-6, loss  # TRL runs the LM head in float32
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
    with open(os.path.join(OUT, "pairs.jsonl"), "w") as f:
        for r in ROWS:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(OUT, "tokenized.json"), "w") as f:
        json.dump(tokenized(), f)
    manifest["tensors"] = [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
