"""dora_check.py — PEFT's side of tests/export/test_dora.sh: PEFT 0.21 loads the DoRA adapter
(use_dora) ptrain trained and wrote, and must give ptrain's numbers within TOL (relative).

  dora_check.py first BASE ADAPTER TEXT_IDS LOSS GRAD_NORM TOL N_TRAINABLE
      ADAPTER is the adapter ptrain trained from for one step at a learning rate too small to move
      it (so it is the adapter of that step); PEFT loads it trainable, and the loss of the one
      sequence (TEXT_IDS: `ptrain tokenize` of its text; the eos ptrain's text datasets append is
      added when missing) and the norm of the gradient over every trainable parameter (A, B and
      the magnitudes) must be ptrain's first loss and grad_norm (metrics.jsonl); PEFT's count of
      trainable parameters must be N_TRAINABLE (what ptrain says it trains).
  dora_check.py logits BASE ADAPTER IDS LOGITS TOL
      IDS and LOGITS from `ptrain generate --ids --logits` with the adapter; PEFT's logits on the
      same ids must be ptrain's, and the adapter must move them by at least 100 x TOL.
Exit 0 when the comparison holds; the numbers are printed either way."""
import json
import os
import sys

import numpy as np
import torch


def load(base, adapter, trainable):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    cfg = json.load(open(os.path.join(adapter, "adapter_config.json")))
    if cfg.get("use_dora") is not True:
        print("adapter_config.json does not say use_dora: true")
        sys.exit(1)
    return model, PeftModel.from_pretrained(model, adapter, is_trainable=trainable)


def rel(ours, theirs):
    return abs(ours - theirs) / max(abs(theirs), 1e-30)


def cmd_first(base, adapter, ids_path, loss, grad_norm, tol, n_trainable):
    from transformers import AutoTokenizer
    _, model = load(base, adapter, True)
    ids = [int(x) for x in open(ids_path).read().split()]
    eos = AutoTokenizer.from_pretrained(base).eos_token_id
    if ids[-1] != eos:
        ids.append(eos)
    x = torch.tensor([ids])
    out = model(input_ids=x, labels=x)
    out.loss.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    mags = [p for n, p in model.named_parameters() if p.requires_grad and "lora_magnitude_vector" in n]
    gn = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)))
    ours_loss, ours_gn = float(loss), float(grad_norm)
    print(f"first loss: ptrain {ours_loss:.9g}, PEFT {out.loss.item():.9g}, relative difference "
          f"{rel(ours_loss, out.loss.item()):.2e}")
    print(f"first gradient norm over {len(params)} tensors ({len(mags)} magnitude vectors): ptrain {ours_gn:.9g}, "
          f"PEFT {gn:.9g}, relative difference {rel(ours_gn, gn):.2e} (tolerance {tol:.0e})")
    mag_gn = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in mags)))
    print(f"PEFT's gradient norm over the magnitudes alone: {mag_gn:.3g} (must not be 0)")
    count = sum(p.numel() for p in params)
    print(f"trainable parameters: ptrain {n_trainable}, PEFT {count}")
    return count == n_trainable and bool(mags) and mag_gn > 0 and rel(ours_loss, out.loss.item()) <= tol and rel(ours_gn, gn) <= tol


def cmd_logits(base, adapter, ids_path, logits_path, tol):
    plain_model, model = load(base, adapter, False)
    ids = [int(x) for x in open(ids_path).read().split("\n")[0].split()]
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].float().numpy()
        with model.disable_adapter():
            plain = model(torch.tensor([ids])).logits[0].float().numpy()
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), -1)
    v = min(ours.shape[1], theirs.shape[1])
    ours, theirs, plain = ours[:, :v], theirs[:, :v], plain[:, :v]
    scale = np.abs(theirs).max()
    diff = float(np.abs(ours - theirs).max() / scale)
    effect = float(np.abs(theirs - plain).max() / scale)
    print(f"logits: max |ptrain - PEFT| / max |PEFT| = {diff:.2e} (tolerance {tol:.0e}); the adapter moves them by "
          f"{effect:.2e} (must be >= 100 x the tolerance)")
    return diff <= tol and effect >= 100 * tol


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "first":
        ok = cmd_first(args[0], args[1], args[2], args[3], args[4], float(args[5]), int(args[6]))
    elif cmd == "logits":
        ok = cmd_logits(args[0], args[1], args[2], args[3], float(args[4]))
    else:
        sys.exit(__doc__)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
