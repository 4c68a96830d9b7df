#!/usr/bin/env python3
"""peer_chat.py — the peer of the chat benchmark (bench/run-chat.sh): transformers + PEFT on CPU in
fp32 fine-tuning on the demo's data as TRL's SFTTrainer does by default: each conversation rendered
with the model's own chat template and tokenized (at most max_len tokens), labels -100 outside the
assistant turns, batches of `batch` conversations in a seeded random order padded to the longest
in the batch (attention mask 0 and labels -100 on the padding), LoRA r=16 alpha=32 on all seven
projections, AdamW, gradient clipping 1.0, gradient checkpointing as given. The first step warms up
and is not timed. Prints one JSON object: examples/s, tokens/s (real tokens), padded tokens/s, peak RSS.
Usage: peer_chat.py MODEL.gguf DATA.jsonl threads steps batch max_len checkpointing(0/1)"""
import json
import os
import random
import resource
import sys
import time

import torch
from transformers import AutoTokenizer

from peer_peft_train import lora_model


def encode(tok, messages, max_len):
    """Token ids and labels of one conversation: a turn's tokens are the ones its rendering adds;
    an assistant turn is labelled after its header."""
    head = len(tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"])
    ids, labels = [], []
    for i, msg in enumerate(messages):
        text = tok.apply_chat_template(messages[: i + 1], tokenize=False)
        full = tok(text, add_special_tokens=False)["input_ids"]
        new = full[len(ids):]
        labels += [-100] * head + new[head:] if msg["role"] == "assistant" else [-100] * len(new)
        ids = full
    return ids[:max_len], labels[:max_len]


def collate(batch, pad_id):
    longest = max(len(ids) for ids, _ in batch)
    ids = [x + [pad_id] * (longest - len(x)) for x, _ in batch]
    labels = [y + [-100] * (longest - len(y)) for _, y in batch]
    mask = [[1] * len(x) + [0] * (longest - len(x)) for x, _ in batch]
    return torch.tensor(ids), torch.tensor(labels), torch.tensor(mask)


def main():
    path, data, threads, steps, batch, max_len, ckpt = sys.argv[1:8]
    threads, steps, batch, max_len, ckpt = int(threads), int(steps), int(batch), int(max_len), ckpt != "0"
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = lora_model(path, threads, ckpt)
    examples = [encode(tok, json.loads(line)["messages"], max_len) for line in open(data) if line.strip()]
    order = list(range(len(examples)))
    random.Random(42).shuffle(order)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.0)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    real = padded = 0
    t0 = 0.0
    for s in range(steps + 1):
        if s == 1:
            t0, real, padded = time.perf_counter(), 0, 0
        chosen = [examples[order[(s * batch + i) % len(order)]] for i in range(batch)]
        ids, labels, mask = collate(chosen, pad)
        real += int(mask.sum())
        padded += ids.numel()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
    dt = time.perf_counter() - t0
    print(json.dumps({"peer": "transformers+peft (TRL-style padded collation)",
                      "examples_per_s": round(steps * batch / dt, 3), "step_s": round(dt / steps, 3),
                      "tokens_per_s": round(real / dt, 1), "padded_tokens_per_s": round(padded / dt, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "loss": round(float(loss), 4), "checkpointing": ckpt}))


if __name__ == "__main__":
    main()
