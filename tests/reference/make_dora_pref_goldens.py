#!/usr/bin/env python3
"""make_dora_pref_goldens.py — DoRA (PEFT's use_dora) with the preference methods and GRPO, as TRL
1.16's trainers compute it with PEFT 0.21, for ptrain's parity tests (tests/unit/test_dpo.c,
test_dora_matches_trl; tests/unit/test_grpo.c, test_dora_matches_trl).

Each method's golden script (make_dpo_goldens.py, make_kto_goldens.py, make_cpo_goldens.py,
make_orpo_goldens.py, make_reward_goldens.py's SEQ_CLS LoRA, make_grpo_goldens.py's "random" case:
beta 0.04, the fixed completions) builds its trainer, model and batch as it does for plain LoRA, with one change:
the LoraConfig it hands the trainer (peft_config) has use_dora=True. A and B random
(init_lora_weights=False, every gradient non-zero), rounded to float32 as ptrain stores them; every
magnitude set to PEFT's dora_init value ‖W + s·B·A‖ per output row times a seeded factor in
[0.8, 1.2] (also rounded to float32), so the magnitudes move the policy and their gradients are not
those of a fixed point. The reference of DPO, KTO and GRPO is the same model with the adapter disabled,
which in PEFT turns DoRA off too (the base alone). One loss and backward pass per method
(float64), with TRL's logged metrics.

Writes tests/data/dora_pref/: METHOD_init.f32 (A and B in the manifest's tensor order, then every
magnitude in layer and module order), METHOD_grads.f32 (their gradients, same order; reward: then the
score head's, which starts as make_reward_goldens.py's score_init.f32) and
manifest.json (per method the first loss and metrics). Run:
$PTRAIN_PYTHON tests/reference/make_dora_pref_goldens.py  (torch transformers peft trl)
"""
import functools
import json
import os
import sys

import numpy as np
import peft
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_cpo_goldens  # noqa: E402
import make_dpo_goldens  # noqa: E402
import make_grpo_goldens  # noqa: E402
import make_kto_goldens  # noqa: E402
import make_orpo_goldens  # noqa: E402
import make_reward_goldens  # noqa: E402
from make_peft_goldens import MHA, MODULES  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "dora_pref")
METHODS = {"dpo": make_dpo_goldens, "kto": make_kto_goldens, "cpo": make_cpo_goldens, "orpo": make_orpo_goldens,
           "reward": make_reward_goldens, "grpo": make_grpo_goldens}


def magnitudes(model):
    out = []
    for i in range(MHA["num_hidden_layers"]):
        for mod in MODULES:
            block = "mlp" if mod in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            out.append(getattr(getattr(model.base_model.model.model.layers[i], block), mod))
    return out


def set_magnitudes(lins, seed):
    rng = np.random.default_rng(seed)
    mags = []
    with torch.no_grad():
        for lin in lins:
            s = lin.scaling["default"]
            w = lin.base_layer.weight + s * lin.lora_B["default"].weight @ lin.lora_A["default"].weight
            m = lin.lora_magnitude_vector["default"].weight
            factor = torch.from_numpy(rng.uniform(0.8, 1.2, m.shape[0])).to(m.dtype)
            m.copy_((torch.linalg.norm(w, dim=1) * factor).float().double())
            mags.append(m)
    return mags


def one(name, mod, seed):
    mod.LoraConfig = functools.partial(peft.LoraConfig, use_dora=True)
    reward, grpo = name == "reward", name == "grpo"
    if grpo:  # make_grpo_goldens.py's "random" case (beta 0.04, temperature 1)
        trainer, model, params, batch = mod.make(True, 0.04)
    else:
        trainer, model, params, batch = mod.make(True, False) if reward else mod.make(True)
    lins = magnitudes(model)
    assert all("default" in lin.lora_magnitude_vector for lin in lins), "use_dora did not reach the model"
    mags = set_magnitudes(lins, seed)
    ab = [p for _, _, _, p in params]
    for m in mags:
        m.grad = None
    values = np.concatenate([p.detach().numpy().astype("<f4").ravel() for p in ab + mags])
    extra = []
    if reward:  # the score head: as make_reward_goldens.py's (tests/data/reward/score_init.f32); its gradient last
        score = mod.score_param(model)
        want = np.fromfile(os.path.join(HERE, "..", "data", "reward", "score_init.f32"), dtype="<f4")
        assert np.array_equal(score.detach().numpy().astype("<f4").ravel(), want), "another score head"
        loss, metrics, _ = mod.loss_and_grads(trainer, model, params, batch)
        extra = [score]
    elif grpo:
        loss, metrics, _ = mod.run(trainer, model, params, batch)
    else:
        loss, metrics = mod.loss_and_grads(trainer, model, params, batch)
    grads = np.concatenate([p.grad.detach().numpy().astype("<f4").ravel() for p in ab + mags + extra])
    values.tofile(os.path.join(OUT, f"{name}_init.f32"))
    grads.tofile(os.path.join(OUT, f"{name}_grads.f32"))
    mg = max(float(m.grad.abs().max()) for m in mags)
    print(f"{name}: loss {loss:.9f}, {len(mags)} magnitude vectors (|grad| max {mg:.3g}), metrics {metrics}")
    return {"first_loss": loss, "metrics": {k: float(v) for k, v in metrics.items()}, "floats": int(values.size)}


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"peft": peft.__version__, "trl": __import__("trl").__version__, "factor_range": [0.8, 1.2]}
    for seed, (name, mod) in enumerate(METHODS.items()):
        manifest[name] = one(name, mod, 46 + seed)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
