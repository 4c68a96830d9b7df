#!/usr/bin/env python3
"""make_grpo_goldens.py — GRPO as TRL 1.16's GRPOTrainer computes it, with PEFT (the reference is the
same model with the adapter disabled), for ptrain's GRPO parity test (tests/unit/test_grpo.c).

Model: the tiny Llama of make_peft_goldens.py (tests/data/llama/tiny-mha-f32.gguf) in float64; LoRA
r=4, alpha=8 on all seven projections. Data: two prompts (token ids, the same length so TRL's left
padding moves no position), num_generations 4, so one generation batch of 8 completions given as
token ids: sampling is out of the comparison (the trainer's _tokenize_prompts and
_generate_single_turn are replaced by the fixed ids; everything after them is TRL's own). Some
completions end with eos, some are cut at max_completion_length 6. The reward is a deterministic
function of the completion ids (`even_share`: the share of even ids, + 1 when it ended with eos).
TRL's _generate_and_score_completions gives the advantages (scale_rewards group), the reference
log-probs and the token count, its _compute_loss the loss (loss_type dapo, epsilon 0.2, one
iteration) and the metrics; backward the LoRA gradients; from "zero", 20 AdamW steps (lr 5e-3, weight
decay 0.01, clip 1.0) on the same completions. Cases: "zero" (B = 0, beta 0.04: the
policy is the reference, the KL 0), "random" (A and B random, beta 0.04) and "random_b0" (beta 0,
TRL's default), and "random_t07" (beta 0.04, temperature 0.7: TRL takes the log-probs of logits /
temperature); "iter2" (A and B random, beta 0.04, num_iterations 2: after one AdamW step the second
pass on the same batch, its ratio against the old log-probs clipped on some tokens); "iter2_eps" (iter2
with epsilon 0.1 and epsilon_high 0.28, DAPO's clip-higher: another clip range); "eval" (the "random"
case's batch evaluated as GRPOTrainer evaluates: eval mode, no gradient, the eval_-prefixed record
its log writes); "eval2" (trainer.evaluate over two unequal eval batches: that batch, then the first
prompt's group alone: each metric and eval_loss the mean of the batches'); "eval_g1" (num_generations_eval
1: the two prompts with one completion each, a group of one whose std TRL takes as 0). Every case's
metrics include the loss's: entropy and clip_ratio/*.

Tokenization: text and conversational prompt rows (with an answer column) through TRL's own
GRPOTrainer._tokenize_prompts with the tokenizers of tests/data/tokenizer/{smollm2, llama3-mini}:
the prompt ids it generates from, for src/data/pair.c (label_prompt).

Writes tests/data/grpo/: manifest.json, {case}_{init,grads}.f32, text.jsonl, chat.jsonl and
tokenized.json.
Run: $PTRAIN_PYTHON tests/reference/make_grpo_goldens.py (torch transformers peft trl)
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
from trl import GRPOConfig, GRPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_dpo_goldens import TOKENIZERS, stand_in_tokenizer  # noqa: E402
from make_peft_goldens import MHA, MODULES, base_model, lora_params  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "grpo")
G, MAX_COMPLETION = 4, 6
EOS = MHA["vocab_size"] - 1


TEXT = [
    {"prompt": "The sky is", "answer": "blue"},
    {"prompt": "Q: 2+2?\nA:", "answer": 4},
]
CHAT = [
    {"prompt": [{"role": "user", "content": "What colour is the sky?"}], "answer": "Blue"},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
     "answer": "Paris"},
]


def tokenized():
    """TRL's prompt ids of TEXT and CHAT, per tokenizer (GRPOTrainer._tokenize_prompts on a stand-in
    trainer holding what it reads)."""
    out = {}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(HERE, "..", "data", "tokenizer", name))
        stub = SimpleNamespace(processing_class=tok, _is_vlm=False, environment_factories=None, tools=None,
                               chat_template=None, chat_template_kwargs={})
        out[name] = {group: GRPOTrainer._tokenize_prompts(stub, [r["prompt"] for r in rows])[0]
                     for group, rows in (("text", TEXT), ("chat", CHAT))}
    return out


def even_share(prompts, completions, completion_ids, **kwargs):
    return [sum(1 for t in ids if t % 2 == 0) / len(ids) + (1.0 if ids[-1] == EOS else 0.0) for ids in completion_ids]


def data():
    rng = np.random.default_rng(45)
    ids = lambda n: rng.integers(0, EOS - 1, size=n).tolist()  # noqa: E731
    prompts = [ids(5), ids(5)]
    completions = []
    for k, n in enumerate((3, 6, 2, 6, 4, 6, 1, 5)):  # cut at MAX_COMPLETION, or ended by eos
        c = ids(n)
        if n < MAX_COMPLETION or k == 7:
            c.append(EOS)
        completions.append(c[:MAX_COMPLETION])
    return prompts, completions


def make(init_random, beta, temperature=1.0, num_iterations=1, epsilon=0.2, epsilon_high=None):
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, bias="none", task_type="CAUSAL_LM",
                     init_lora_weights=not init_random)
    prompts, completions = data()
    rows = [{"prompt": f"p{i}", "answer": str(i)} for i in range(2)]
    args = GRPOConfig(output_dir="/tmp/ptrain-grpo-golden", beta=beta, temperature=temperature, num_generations=G,
                      max_completion_length=MAX_COMPLETION, per_device_train_batch_size=2 * G, bf16=False, fp16=False,
                      num_iterations=num_iterations, epsilon=epsilon, epsilon_high=epsilon_high,
                      use_cpu=True, gradient_checkpointing=False, report_to="none", logging_steps=1)
    trainer = GRPOTrainer(model=base_model(), reward_funcs=[even_share], args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=stand_in_tokenizer(),
                          peft_config=cfg)
    by_text = {f"p{i}": p for i, p in enumerate(prompts)}
    trainer._tokenize_prompts = lambda ps: ([by_text[p] for p in ps], None, {})
    trainer._generate_single_turn = lambda prompt_ids, images, mm, n: ([list(c) for c in completions], None)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    model = trainer.model.double()
    params = lora_params(model)
    with torch.no_grad():  # adapters as f32 values, as ptrain stores them
        for _, _, _, p in params:
            p.copy_(p.float().double())
    inputs = [rows[0]] * G + [rows[1]] * G  # the RepeatSampler's order: each prompt num_generations times
    return trainer, model, params, inputs


def flat(params, what):
    return np.concatenate([what(p).detach().numpy().astype("<f4").ravel() for _, _, _, p in params])


def run(trainer, model, params, inputs):
    model.train()
    for _, _, _, p in params:
        p.grad = None
    trainer._metrics["train"].clear()
    batch = trainer._generate_and_score_completions(inputs)
    loss = trainer._compute_loss(model, batch)
    loss.backward()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    return float(loss.detach()), metrics, batch


def iterations(case="iter2", epsilon=0.2, epsilon_high=None):
    """num_iterations 2 (TRL's mu): the generation batch's old log-probs taken when it is made
    (_generate_and_score_completions), one AdamW step (lr 3e-2: far enough for the ratio to leave
    [0.8, 1.2] on some tokens), then the second pass on the same batch: its loss, LoRA gradients and
    the loss's metrics (entropy, kl, clip_ratio/*), with the ratio against the old log-probs, clipped
    to [1 - epsilon, 1 + epsilon_high] (epsilon_high None: epsilon, as GRPOConfig)."""
    trainer, model, params, inputs = make(True, 0.04, num_iterations=2, epsilon=epsilon, epsilon_high=epsilon_high)
    flat(params, lambda p: p).tofile(os.path.join(OUT, f"{case}_init.f32"))
    loss1, _, batch = run(trainer, model, params, inputs)
    assert batch.get("old_per_token_logps") is not None
    torch.nn.utils.clip_grad_norm_([p for _, _, _, p in params], 1.0)
    opt = torch.optim.AdamW([p for _, _, _, p in params], lr=3e-2, weight_decay=0.01)
    opt.step()
    for _, _, _, p in params:
        p.grad = None
    trainer._metrics["train"].clear()
    loss2 = trainer._compute_loss(model, batch)
    loss2.backward()
    flat(params, lambda p: p.grad).tofile(os.path.join(OUT, f"{case}_grads.f32"))
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    print(case, loss1, float(loss2.detach()), metrics)
    return {"beta": 0.04, "epsilon": epsilon, "epsilon_high": epsilon if epsilon_high is None else epsilon_high, "temperature": 1.0, "lr": 3e-2, "first_loss": loss1, "second_loss": float(loss2.detach()),
            "metrics": metrics, "rewards": even_share(None, None, data()[1]),
            "advantages": batch["advantages"].tolist(), "num_items_in_batch": int(batch["num_items_in_batch"])}


def evaluation():
    """TRL's evaluation of the "random" case's batch: the model in eval mode, the batch scored as
    _prepare_inputs does in eval (no buffering), its loss as prediction_step takes it (compute_loss
    under no_grad) and the record GRPOTrainer.log writes in eval mode (every metric "eval_"-prefixed)."""
    trainer, model, params, inputs = make(True, 0.04)
    model.eval()
    with torch.no_grad():
        batch = trainer._generate_and_score_completions(inputs)
        loss = float(trainer.compute_loss(model, batch).mean())
    trainer.log({"eval_loss": loss})
    record = {k: v for k, v in trainer.state.log_history[-1].items() if k.startswith("eval_")}
    print("eval", record)
    return {"beta": 0.04, "temperature": 1.0, "loss": loss, "record": record, "rewards": even_share(None, None, data()[1]),
            "advantages": batch["advantages"].tolist(), "num_items_in_batch": int(batch["num_items_in_batch"])}


def evaluation_two():
    """TRL's own evaluation loop (trainer.evaluate) over two unequal eval batches: three prompts
    (p0, p1 and p2, whose ids are p0's), per_device_eval_batch_size 2 * G, in order (the sampler
    unshuffled): batch 1 is the "random" case's batch (p0, p1: 8 completions), batch 2 p2 alone with
    p0's 4 completions. The record is what GRPOTrainer.log writes after the Trainer's loop: each metric
    the mean of the two batches' values, and eval_loss the Trainer's mean of the batches' losses as
    gather_for_metrics keeps them (the last one 3 % 8 = 3 times, the first 8)."""
    from trl.trainer.utils import RepeatSampler

    trainer, model, params, inputs = make(True, 0.04)
    prompts, completions = data()
    by_text = {"p0": (prompts[0], completions[:G]), "p1": (prompts[1], completions[G:]), "p2": (prompts[0], completions[:G])}
    seen = []

    def tokenize(ps):
        seen[:] = ps
        return [by_text[p][0] for p in ps], None, {}

    def generate(prompt_ids, images, mm, n):
        out = []
        for p in dict.fromkeys(seen):  # each prompt's G completions, in the batch's order
            out += [list(c) for c in by_text[p][1]]
        assert len(out) == len(prompt_ids), (len(out), len(prompt_ids))
        return out, None

    trainer._tokenize_prompts = tokenize
    trainer._generate_single_turn = generate
    trainer.args.per_device_eval_batch_size = 2 * G
    trainer._get_eval_sampler = lambda ds: RepeatSampler(ds, mini_repeat_count=G, shuffle=False)
    rows = [{"prompt": f"p{i}", "answer": str(i)} for i in range(3)]
    out = trainer.evaluate(eval_dataset=Dataset.from_list(rows))
    record = {k: v for k, v in trainer.state.log_history[-1].items() if k.startswith("eval_")}
    assert abs(record["eval_loss"] - out["eval_loss"]) == 0
    print("eval2", record)
    return {"beta": 0.04, "temperature": 1.0, "batches": [[0, 1], [0]], "record": record}


def evaluation_one():
    """num_generations_eval 1 (GRPOConfig's key; the trainer keeps it as num_generations_eval): an eval
    batch of the two prompts with one completion each (the first of each group: ids 0 and G), scored,
    its group std taken as 0 (so every advantage 0 and frac_reward_zero_std 1), and its loss and record
    as evaluation() takes them."""
    trainer, model, params, inputs = make(True, 0.04)
    trainer.num_generations_eval = 1  # what GRPOTrainer.__init__ sets from args.num_generations_eval = 1
    _, completions = data()
    trainer._generate_single_turn = lambda prompt_ids, images, mm, n: ([list(completions[0]), list(completions[G])], None)
    model.eval()
    with torch.no_grad():
        batch = trainer._generate_and_score_completions([inputs[0], inputs[G]])
        loss = float(trainer.compute_loss(model, batch).mean())
    trainer.log({"eval_loss": loss})
    record = {k: v for k, v in trainer.state.log_history[-1].items() if k.startswith("eval_")}
    print("eval_g1", record)
    return {"beta": 0.04, "temperature": 1.0, "completions": [0, G], "loss": loss, "record": record,
            "advantages": batch["advantages"].tolist()}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, rows in (("text", TEXT), ("chat", CHAT)):
        with open(os.path.join(OUT, f"{name}.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    with open(os.path.join(OUT, "tokenized.json"), "w") as f:
        json.dump(tokenized(), f)
    prompts, completions = data()
    manifest = {"model": "tests/data/llama/tiny-mha-f32.gguf", "r": 4, "alpha": 8, "num_generations": G,
                "max_completion_length": MAX_COMPLETION, "eos": EOS, "prompts": prompts, "completions": completions}
    for case, rnd, beta, temp in (("zero", False, 0.04, 1.0), ("random", True, 0.04, 1.0), ("random_b0", True, 0.0, 1.0),
                                  ("random_t07", True, 0.04, 0.7)):
        trainer, model, params, inputs = make(rnd, beta, temp)
        flat(params, lambda p: p).tofile(os.path.join(OUT, f"{case}_init.f32"))
        loss, metrics, batch = run(trainer, model, params, inputs)
        flat(params, lambda p: p.grad).tofile(os.path.join(OUT, f"{case}_grads.f32"))
        rewards = even_share(None, None, completions)
        manifest[case] = {"beta": beta, "temperature": temp, "first_loss": loss, "metrics": metrics, "rewards": rewards,
                          "advantages": batch["advantages"].tolist(),
                          "num_items_in_batch": int(batch["num_items_in_batch"])}
        print(case, "loss", loss, metrics)
        if case == "zero":  # 20 AdamW steps on the same completions: the KL term moves the loss
            opt = torch.optim.AdamW([p for _, _, _, p in params], lr=5e-3, weight_decay=0.01)
            losses = []
            for _ in range(20):
                opt.zero_grad()
                step_loss, _, _ = run(trainer, model, params, inputs)
                torch.nn.utils.clip_grad_norm_([p for _, _, _, p in params], 1.0)
                opt.step()
                losses.append(step_loss)
            manifest["zero"]["losses"] = losses
            print("losses", losses[0], "->", losses[-1])
    manifest["iter2"] = iterations()
    manifest["iter2_eps"] = iterations("iter2_eps", 0.1, 0.28)  # DAPO's clip-higher: another clip range
    manifest["eval"] = evaluation()
    manifest["eval2"] = evaluation_two()
    manifest["eval_g1"] = evaluation_one()
    manifest["tensors"] = [{"layer": i, "module": m, "which": w, "shape": list(p.shape)} for i, m, w, p in params]
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
