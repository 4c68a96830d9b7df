#!/usr/bin/env python3
"""peer_trl.py — the peer of bench/run-trl.sh: TRL's own DPOTrainer or GRPOTrainer with PEFT LoRA
(r 16, alpha 32, dropout 0, all seven projections) on the CPU in fp32, the same GGUF file
(dequantized on load), data and settings as share/examples/smollm2-dpo.yaml / smollm2-grpo.yaml
(DPO: beta 0.1, max_length 256, 2 pairs x accumulation 2; GRPO: 4 completions of 2 prompts,
max_completion_length 48, beta 0.04, the regex and length rewards as Python functions), seeded,
`steps` optimizer steps. A callback stamps each step's end; the first step warms up and is not
timed. Prints one JSON object: seconds per step (steps 2..N).
Usage: peer_trl.py dpo|grpo MODEL.gguf DATA.jsonl threads steps"""
import json
import os
import re
import sys
import tempfile
import time

import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

PATTERN = re.compile(r"[Aa]rr|[Mm]atey|[Aa]hoy|[Yy]e ")


def regex_reward(completions, **kwargs):
    return [1.0 if PATTERN.search(c[0]["content"] if isinstance(c, list) else c) else 0.0 for c in completions]


def length_reward(completion_ids, **kwargs):
    return [1.0 - len(ids) / 48 for ids in completion_ids]


class Stamps(TrainerCallback):
    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def main():
    method, path, data, threads, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    # the GGUF weights are dequantized to fp32 on load: a plain model, not one the Trainer must refuse
    model.hf_quantizer = None
    if getattr(model, "is_quantized", False):
        model.is_quantized = False
    model.config.quantization_config = None
    peft = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    ds = load_dataset("json", data_files=data, split="train")
    out = tempfile.mkdtemp()
    common = dict(output_dir=out, max_steps=steps, learning_rate=5e-5, lr_scheduler_type="cosine",
                  logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, seed=42,
                  dataloader_num_workers=0, gradient_checkpointing=False, bf16=False, fp16=False)
    stamps = Stamps()
    if method == "dpo":
        from trl import DPOConfig, DPOTrainer
        cfg = DPOConfig(beta=0.1, max_length=256, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                        **common)
        trainer = DPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=peft,
                             callbacks=[stamps])
    else:
        from trl import GRPOConfig, GRPOTrainer
        ds = ds.remove_columns([c for c in ds.column_names if c != "prompt"])
        cfg = GRPOConfig(num_generations=4, max_completion_length=48, beta=0.04, per_device_train_batch_size=8,
                         gradient_accumulation_steps=1, **common)
        trainer = GRPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=peft,
                              reward_funcs=[regex_reward, length_reward], callbacks=[stamps])
    t0 = time.perf_counter()
    trainer.train()
    ends = stamps.ends
    timed = (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else ends[0] - t0
    print(json.dumps({"peer": f"TRL {__import__('trl').__version__} + PEFT {__import__('peft').__version__}",
                      "method": method, "steps": len(ends), "step_s": round(timed, 3)}))


if __name__ == "__main__":
    main()
