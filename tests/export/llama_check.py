"""llama_check.py — the llama.cpp side of the export tests: llama.cpp itself (llama-cpp-python)
loads a GGUF file ptrain wrote (a merged model, or a base model plus ptrain's adapter.gguf) and runs
the token ids ptrain ran.

  llama_check.py MODEL.gguf [--lora ADAPTER.gguf] [--kv-f32] IDS LOGITS MAX_REL

IDS is `ptrain generate --ids` output (prompt ids, then the ids ptrain generated greedily), LOGITS
its --logits file (the prompt's logits). llama.cpp evaluates prompt + generated ids in one pass
(teacher forcing) and at each generated position its own greedy choice must be ptrain's, except
where the two best logits are within 0.5 of each other (a near-tie that the two programs'
different arithmetic may break either way: llama.cpp multiplies 4-bit weights with 8-bit
activations); at least 80% must match exactly, and the prompt's logits must agree within MAX_REL
(max abs difference over max abs logit). --kv-f32 keeps llama.cpp's KV cache in f32 (its default f16 cache
alone puts about 1e-3 between the two on f32 weights; with it, 1e-6). Exit 0 when all holds; the numbers are
printed."""
import sys

import numpy as np
from llama_cpp import Llama


def main(argv):
    lora = None
    if "--lora" in argv:
        i = argv.index("--lora")
        lora = argv[i + 1]
        del argv[i:i + 2]
    kv = {}
    if "--kv-f32" in argv:
        argv.remove("--kv-f32")
        kv = {"type_k": 0, "type_v": 0}  # GGML_TYPE_F32
    model, ids_path, logits_path, max_rel = argv[0], argv[1], argv[2], float(argv[3])
    lines = open(ids_path).read().split("\n")
    prompt, gen = [int(x) for x in lines[0].split()], [int(x) for x in lines[1].split()]
    llm = Llama(model_path=model, lora_path=lora, n_ctx=len(prompt) + len(gen) + 8, logits_all=True,
                verbose=False, n_threads=2, seed=0, **kv)
    llm.eval(prompt + gen)
    scores = np.array(llm.scores[:len(prompt) + len(gen)])
    ref = np.fromfile(logits_path, dtype=np.float32).reshape(len(prompt), -1)
    v = min(ref.shape[1], scores.shape[1])
    rel = float(np.abs(scores[:len(prompt), :v] - ref[:, :v]).max() / np.abs(ref).max())
    print(f"prompt logits: max |llama.cpp - ptrain| / max |ptrain| = {rel:.2e} (at most {max_rel:.0e})")
    exact, ties, wrong = 0, 0, 0
    for i, g in enumerate(gen):
        row = scores[len(prompt) - 1 + i]
        top = int(np.argmax(row))
        if top == g:
            exact += 1
        elif row[top] - row[g] < 0.5:
            ties += 1
            print(f"  position {i}: llama.cpp prefers {top} over ptrain's {g} by {row[top] - row[g]:.3f} (near-tie)")
        else:
            wrong += 1
            print(f"  position {i}: llama.cpp prefers {top} over ptrain's {g} by {row[top] - row[g]:.3f}")
    print(f"greedy: {exact} of {len(gen)} tokens are llama.cpp's own choice, {ties} near-ties, {wrong} different")
    return rel <= max_rel and wrong == 0 and exact >= 0.8 * len(gen) and len(gen) > 0


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    sys.exit(0 if main(sys.argv[1:]) else 1)
