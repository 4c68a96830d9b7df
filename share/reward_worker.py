#!/usr/bin/env python3
"""reward_worker.py — the reward functions of a GRPO run (`reward_funcs: [module:function, ...]`),
run by ptrain in one long-lived Python process per node and spoken to in JSON lines over its
standard input and output (src/train/reward.c).

First line in: {"funcs": ["module:function" or "path/to/file.py:function", ...], "path": [dirs]}
  -> {"ok": true, "names": [each function's __name__]} or {"error": "..."}.
Then per batch: {"prompts": [...], "completions": [...], "completion_ids": [[...]], "columns":
  {"answer": [...], ...}} -> {"rewards": [[one number or null per completion] per function]} or
  {"error": "the message", "func": "name", "row": index or null}.
Each function is called as TRL's GRPOTrainer calls a reward function: prompts=, completions=,
completion_ids= and every other dataset column as a keyword list (plus trainer_state=None and
log_extra/log_metric that do nothing). Conversational prompts get completions as
[{"role": "assistant", "content": text}], as TRL gives them. None (TRL: no reward) is sent as null;
anything else that is not a number, or a list of the wrong length, is an error naming the row.
What a function prints goes to ptrain's standard error, not into the protocol.
"""
import importlib
import importlib.util
import json
import math
import numbers
import os
import sys
import traceback


def load(spec):
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ValueError(f"{spec!r} is not module:function or path/file.py:function")
    if where.endswith(".py") or os.sep in where:
        mod_name = os.path.splitext(os.path.basename(where))[0]
        s = importlib.util.spec_from_file_location(mod_name, where)
        if s is None:
            raise ImportError(f"cannot load {where}")
        mod = importlib.util.module_from_spec(s)
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(where)
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise AttributeError(f"{where} has no function {name}")
    return fn


def nothing(*args, **kwargs):
    return None


def score(funcs, req):
    prompts, texts = req["prompts"], req["completions"]
    conv = len(prompts) > 0 and isinstance(prompts[0], list)
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conv else texts
    kwargs = dict(req.get("columns", {}))
    for k in ("prompt", "completion", "completion_ids"):
        kwargs.pop(k, None)
    out = []
    for fn in funcs:
        name = getattr(fn, "__name__", str(fn))
        try:
            got = fn(prompts=prompts, completions=completions, completion_ids=req["completion_ids"],
                     trainer_state=None, log_extra=nothing, log_metric=nothing, **kwargs)
        except Exception as e:  # the function's own failure: its message, with where it was raised
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return {"error": f"{type(e).__name__}: {e} (at {tb.filename}:{tb.lineno})", "func": name, "row": None}
        if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
            return {"error": f"returned {type(got).__name__}, expected a list of one number per completion",
                    "func": name, "row": None}
        got = list(got)
        if len(got) != len(texts):
            return {"error": f"returned {len(got)} rewards for {len(texts)} completions", "func": name, "row": None}
        vals = []
        for i, v in enumerate(got):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                vals.append(None)
            elif isinstance(v, numbers.Real) and not isinstance(v, bool):
                vals.append(float(v))
            elif hasattr(v, "item") and isinstance(v.item(), numbers.Real) and not isinstance(v.item(), bool):
                vals.append(float(v.item()))
            else:
                return {"error": f"returned {type(v).__name__} {v!r} for completion {i}, expected a number or None",
                        "func": name, "row": i}
        out.append(vals)
    return {"rewards": out}


def main():
    proto = sys.stdout
    sys.stdout = sys.stderr  # what the functions print must not reach the protocol
    funcs = None
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError as e:
            reply = {"error": f"bad request: {e}"}
        else:
            if funcs is None:
                try:
                    for d in req.get("path", []):
                        sys.path.insert(0, d)
                    funcs = [load(s) for s in req["funcs"]]
                    reply = {"ok": True, "names": [getattr(f, "__name__", "reward") for f in funcs]}
                except Exception as e:
                    reply = {"error": f"{type(e).__name__}: {e}"}
                    funcs = None
            else:
                reply = score(funcs, req)
        proto.write(json.dumps(reply, allow_nan=False) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
