#!/usr/bin/env python3
"""make_cpo_goldens.py — CPO as TRL 1.16's experimental CPOTrainer computes it, with PEFT, for
ptrain's CPO parity test (tests/unit/test_dpo.c).

Loss: the trainer's own get_batch_loss_metrics (loss_type sigmoid, beta 0.1, cpo_alpha 1: the
pairs' mean -log sigmoid(beta (logp chosen - logp rejected)), log-probs summed over each
completion, plus the chosen completions' mean token cross-entropy), on the tiny Llama and the two
pairs of make_dpo_goldens.py, batched by the trainer's collator from TRL's tokenized columns
(tokenize_row is skipped since they are tokenized already). Cases "zero" (B = 0) and "random",
then 20 AdamW steps from "zero".

Tokenization: the rows of make_dpo_goldens.ROWS through TRL's own maybe_apply_chat_template and
CPOTrainer.tokenize_row (the older tokenization CPO and ORPO keep: the prompt found from the
prompt + answer encoding, bos and eos added when missing, the answer cut to max_length) with the
tokenizers of tests/data/tokenizer/{smollm2, llama3-mini}.

Writes tests/data/cpo/: manifest.json, {zero,random}_{init,grads}.f32, tokenized.json.
Run: $PTRAIN_PYTHON tests/reference/make_cpo_goldens.py (torch transformers peft trl)
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
from trl.data_utils import maybe_apply_chat_template
from trl.experimental.cpo import CPOConfig, CPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_dpo_goldens import ROWS, TOKENIZERS, pairs, stand_in_tokenizer  # noqa: E402
from make_peft_goldens import MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "cpo")
BETA = 0.1
TOKENIZE_ROW = CPOTrainer.tokenize_row


def features(row):
    out = {"prompt_input_ids": row["prompt_ids"], "prompt_attention_mask": [1] * len(row["prompt_ids"])}
    for side in ("chosen", "rejected"):
        ids = row["prompt_ids"] + row[f"{side}_ids"]
        out[f"{side}_input_ids"] = ids
        out[f"{side}_attention_mask"] = [1] * len(ids)
        out[f"{side}_labels"] = [-100] * len(row["prompt_ids"]) + row[f"{side}_ids"]
    return out


def make(init_random):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="CAUSAL_LM",
                     init_lora_weights=not init_random)
    rows = [features(r) for r in pairs()]
    args = CPOConfig(output_dir="/tmp/ptrain-cpo-golden", beta=BETA, bf16=False, fp16=False, use_cpu=True,
                     gradient_checkpointing=False, report_to="none", per_device_train_batch_size=2, max_length=4096)
    CPOTrainer.tokenize_row = lambda self, feature, model=None: feature  # rows are tokenized already
    trainer = CPOTrainer(model=base_model(), args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=stand_in_tokenizer(), peft_config=cfg)
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():
        for _, _, _, p in params:
            p.copy_(p.float().double())
    return trainer, model, params, trainer.data_collator(rows)


def flat(params, what):
    return np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for _, _, _, p in params])


def loss_and_grads(trainer, model, params, batch):
    model.train()
    for _, _, _, p in params:
        p.grad = None
    loss, metrics = trainer.get_batch_loss_metrics(model, batch, "train")
    loss.backward()
    keep = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
            "logps/rejected", "nll_loss")
    return float(loss.detach()), {k: float(v) for k, v in metrics.items() if k in keep}


def tokenized():
    out = {}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", name))
        stub = SimpleNamespace(processing_class=tok, is_encoder_decoder=False, max_length=4096)
        stub.build_tokenized_answer = lambda p, a, s=stub: CPOTrainer.build_tokenized_answer(s, p, a)
        got = []
        for row in ROWS:
            f = TOKENIZE_ROW(stub, maybe_apply_chat_template(row, tok))
            got.append({k: f[k] for k in ("chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels")})
        out[name] = got
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenized.json"), "w") as f:
        json.dump(tokenized(), f)
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "beta": BETA, "cpo_alpha": 1.0,
                "pairs": pairs(), "lr": 5e-3}
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
