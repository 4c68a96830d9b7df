#!/usr/bin/env python3
"""make_family_goldens.py — reference logits from Hugging Face transformers for the qwen2 and
gemma2 families (tests/unit/test_model.c, test_grad.c, test_train.c).

For each family it makes one tiny random model and writes, under tests/data/<family>/:
  tiny-{f32,q8_0,q4_0}.gguf       the model as llama.cpp's converter writes it: qwen2 with
      attn_{q,k,v}.bias and no q/k row permutation; gemma2 with every RMSNorm weight stored as
      1 + w, post_attention_norm / post_ffw_norm, and its gemma2.* keys (sliding window, both
      soft-caps, key/value length). Each file is read back with transformers' own GGUF reader
      and must give the model's weights again (so the layout is the one transformers expects);
  NAME.ids.txt / NAME.logits.f32  40 token ids and transformers' logits [40, vocab] (float32
      little-endian) computed in float64 from exactly the weights the file holds (dequantized);
  tiny-f32.nf4.logits.f32        the same for the f32 file loaded with load_in_4bit (projections
      whose rows are whole 64-blocks through bitsandbytes' NF4);
  tiny.greedy.txt                 prompt ids (the first 8), then 12 ids transformers' greedy
      decoding (float64, f32 weights) continues them with, and the smallest top-1/top-2 margin;
  peft.json, peft.init.f32, peft.grads.f32
                                  LoRA gradients from PEFT on the f32 file's model (see peft_goldens);
  bad-*.gguf                      files that parse but are not usable models (one error each);
  hf/                             the model as a Hugging Face directory: config.json,
      model.safetensors (bf16), tokenizer.json + tokenizer_config.json (a 384-token byte-level
      BPE trained here on tests/data/tokenizer/corpus.txt), with hf.ids.txt / hf.logits.f32: the
      logits transformers computes in float64 on the bf16 weights, and hf.greedy.txt: the first
      8 ids and the 12 ids transformers' greedy decoding continues them with (see
      make_hf_goldens.write_greedy). gemma2's directory sets query_pre_attn_scalar = 24, which a
      GGUF file cannot carry (llama.cpp derives the scale from the head size), so the attention
      scale from config.json is exercised too;
  hf-bnb4/                        hf/ as a pre-quantized bitsandbytes 4-bit checkpoint (NF4, double
      quantization, made as make_hf_goldens.write_bnb4_dir makes tiny-llama-bnb4), with
      hf-bnb4.{ids.txt,logits.f32,greedy.txt}: the same from the weights bitsandbytes dequantizes
      it to. Rows of 32 (gemma2) and 96 (qwen2) values are not whole 64-blocks, so those
      projections have 4-bit blocks that straddle rows.

The models are made so that every family feature shows in the logits: random biases and norm
weights, weights large enough that the soft-caps (gemma2: attention 4, final 6) are well inside
their non-linear range, and a sliding window (gemma2: 6) far shorter than the 40 test tokens.

Run (the outputs are committed; CI only reads them):
  /tmp/refenv/bin/python tests/reference/make_family_goldens.py
"""
import json
import os
import shutil

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, quants
from safetensors.torch import load_file
from transformers import Gemma2Config, Gemma2ForCausalLM, Qwen2Config, Qwen2ForCausalLM

from make_hf_goldens import write_bnb4_dir, write_greedy

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
VOCAB = 384
TYPES = {"f32": Q.F32, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0}

FAMILIES = {
    "qwen2": dict(cls=Qwen2ForCausalLM, cfg=Qwen2Config, kwargs=dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, rms_norm_eps=1e-6, rope_theta=1000000.0,
        max_position_embeddings=256, tie_word_embeddings=True)),
    "gemma2": dict(cls=Gemma2ForCausalLM, cfg=Gemma2Config, kwargs=dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, vocab_size=VOCAB, rms_norm_eps=1e-6, rope_theta=10000.0,
        max_position_embeddings=256, query_pre_attn_scalar=16, sliding_window=6,
        attn_logit_softcapping=4.0, final_logit_softcapping=6.0, hidden_activation="gelu_pytorch_tanh",
        attn_implementation="eager")),
}

# HF name (per layer) -> GGUF name; q/k are not permuted for qwen2 and gemma2
LAYER_NAMES = {
    "qwen2": {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"},
    "gemma2": {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
               "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
               "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"},
}


def make_model(family):
    spec = FAMILIES[family]
    torch.manual_seed(4321 + len(family))
    model = spec["cls"](spec["cfg"](**spec["kwargs"])).double().eval()
    gain = 2.5 if family == "gemma2" else 1.0  # gemma2: scores and logits reach the soft-caps
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # qwen2 w in [0.5, 1.5]; gemma2 stores w with (1 + w) in [0.5, 1.5]
                p.uniform_(-0.5, 0.5)
                if family == "qwen2":
                    p.add_(1.0)
            elif name.endswith(".bias"):
                p.uniform_(-0.5, 0.5)
            elif p.dim() == 2:
                p.normal_(0.0, gain / np.sqrt(p.shape[1]))
    return model


def store(qtype, w):
    """What the file will hold for w, and the float values a reader gets back."""
    if qtype == Q.F32:
        return w.astype(np.float32), w.astype(np.float32)
    packed = quants.quantize(w.astype(np.float32), qtype)
    return packed, quants.dequantize(packed, qtype).astype(np.float32)


def write_header(w, family, cfg):
    w.add_name("tiny-" + family)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    if family == "gemma2":  # the keys llama.cpp's Gemma2 converter writes
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
        w.add_sliding_window(cfg.sliding_window)
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)


def write_gguf(path, family, model, qtype):
    """Write the model; return the HF state dict holding what a reader gets back (float64)."""
    cfg = model.config
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(path, family)
    write_header(w, family, cfg)
    back = {}

    def put(gname, hfname):
        t = sd[hfname]
        vec = t.ndim == 1  # norms and biases stay f32, as llama.cpp keeps 1-d tensors
        if family == "gemma2" and "norm" in hfname:
            t = t + 1.0  # llama.cpp's converter stores Gemma's (1 + w)
        stored, deq = store(Q.F32 if vec else qtype, t)
        w.add_tensor(gname, stored, raw_dtype=qtype if not vec and qtype != Q.F32 else None)
        if family == "gemma2" and "norm" in hfname:
            deq = deq.astype(np.float64) - 1.0
        back[hfname] = torch.from_numpy(deq.astype(np.float64))

    put("token_embd.weight", "model.embed_tokens.weight")
    put("output_norm.weight", "model.norm.weight")
    for i in range(cfg.num_hidden_layers):
        for hf, g in LAYER_NAMES[family].items():
            put(f"blk.{i}.{g}.weight", f"model.layers.{i}.{hf}.weight")
            if f"model.layers.{i}.{hf}.bias" in sd:
                put(f"blk.{i}.{g}.bias", f"model.layers.{i}.{hf}.bias")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    back["lm_head.weight"] = back["model.embed_tokens.weight"]
    return back


def check_with_transformers_reader(path, back, model):
    """transformers' GGUF reader (which undoes llama.cpp's conventions) must give back our weights."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    read = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
    worst = 0.0
    for name, want in back.items():
        if name == "lm_head.weight" and name not in read:
            continue
        got = np.asarray(read[name], dtype=np.float64)
        worst = max(worst, float(np.abs(got - want.numpy()).max()))
    assert worst < 1e-6, f"{path}: transformers reads weights {worst} away from ours"
    return worst


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids))[None]).logits[0].numpy()


def load_weights(model, back):
    sd = model.state_dict()
    for k, v in back.items():
        sd[k] = v.clone()
    model.load_state_dict(sd)


def write_logits(out, name, ids, logits):
    with open(os.path.join(out, name + ".ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits.astype("<f4").tofile(os.path.join(out, name + ".logits.f32"))


def greedy(model, prompt, steps):
    """Greedy continuation without a cache, and the smallest margin between the top two logits."""
    ids, margin = list(prompt), float("inf")
    for _ in range(steps):
        last = logits_of(model, ids)[-1]
        top2 = np.sort(last)[-2:]
        margin = min(margin, float(top2[1] - top2[0]))
        ids.append(int(np.argmax(last)))
    return ids[len(prompt):], margin


def nf4_roundtrip(w):
    import bitsandbytes.functional as F
    t = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    q, state = F.quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=True)
    return F.dequantize_4bit(q, state).numpy().astype(np.float64)


def nf4_weights(model, back):
    """The f32 file's weights with ptrain's load_in_4bit applied: projections whose rows are
    whole 64-blocks go through NF4 (embeddings, norms and biases stay)."""
    out = dict(back)
    for name, v in back.items():
        if name.startswith("model.layers.") and v.dim() == 2 and v.shape[1] % 64 == 0:
            out[name] = torch.from_numpy(nf4_roundtrip(v.numpy()))
    return out


def make_tokenizer(dest):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 2, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([os.path.join(DATA, "tokenizer", "corpus.txt")], trainer)
    assert tok.get_vocab_size() <= VOCAB
    tok.save(os.path.join(dest, "tokenizer.json"))
    with open(os.path.join(dest, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "model_max_length": 256}, f, indent=1)


def hf_kwargs(family):
    """The config of the hf/ directory (gemma2: query_pre_attn_scalar 24)."""
    kwargs = dict(FAMILIES[family]["kwargs"])
    if family == "gemma2":
        kwargs["query_pre_attn_scalar"] = 24
    return kwargs


def write_hf_dir(family, model, f32_back, out):
    """config.json + bf16 model.safetensors (+ tokenizer), and float64 logits and greedy tokens on
    the bf16 weights."""
    dest = os.path.join(out, "hf")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    spec = FAMILIES[family]
    kwargs = hf_kwargs(family)
    hf = spec["cls"](spec["cfg"](**kwargs)).double().eval()
    load_weights(hf, f32_back)
    bf16 = {k: v.to(torch.bfloat16) for k, v in hf.state_dict().items()}
    # the reference keeps its float64 buffers (rotary inv_freq, gemma's embedding scale): only the
    # weights are rounded to bf16, which is what a reader of the directory gets
    load_weights(hf, {k: v.double() for k, v in bf16.items()})
    saver = spec["cls"](spec["cfg"](**kwargs)).to(torch.bfloat16)
    saver.load_state_dict(bf16)
    saver.save_pretrained(dest, safe_serialization=True)
    os.chmod(os.path.join(dest, "model.safetensors"), 0o644)
    for extra in ("generation_config.json",):
        p = os.path.join(dest, extra)
        if os.path.exists(p):
            os.remove(p)
    make_tokenizer(dest)
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    write_logits(out, "hf", ids, logits_of(hf, ids))
    write_greedy(os.path.join(out, "hf"), hf, ids[:8])


def write_bnb_dir(family, out):
    """hf-bnb4/ from hf/'s bf16 weights, with float64 logits and greedy tokens on the weights
    bitsandbytes dequantizes it to (the tied lm_head is the embedding, which stays bf16)."""
    src, dest = os.path.join(out, "hf"), os.path.join(out, "hf-bnb4")
    ref = write_bnb4_dir(src, dest, load_file(os.path.join(src, "model.safetensors")))
    ref["lm_head.weight"] = ref["model.embed_tokens.weight"]
    spec = FAMILIES[family]
    model = spec["cls"](spec["cfg"](**hf_kwargs(family))).double().eval()
    load_weights(model, {k: torch.from_numpy(v) for k, v in ref.items()})
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    write_logits(out, "hf-bnb4", ids, logits_of(model, ids))
    write_greedy(os.path.join(out, "hf-bnb4"), model, ids[:8])
    for f in os.listdir(dest):  # safetensors writes 0600 files
        os.chmod(os.path.join(dest, f), 0o644)


def make_family(family):
    out = os.path.join(DATA, family)
    os.makedirs(out, exist_ok=True)
    model = make_model(family)
    ids = np.random.default_rng(7).integers(0, VOCAB, size=40)
    for qname, qtype in TYPES.items():
        path = os.path.join(out, f"tiny-{qname}.gguf")
        back = write_gguf(path, family, model, qtype)
        err = check_with_transformers_reader(path, back, model)
        ref = make_model(family)
        load_weights(ref, back)
        logits = logits_of(ref, ids)
        write_logits(out, f"tiny-{qname}", ids, logits)
        print(f"{family} {qname}: transformers' reader agrees to {err:.1e}; logits |max| {np.abs(logits).max():.3f}")
        if qname == "f32":
            f32_back = back
            gen, margin = greedy(ref, ids[:8], 12)
            with open(os.path.join(out, "tiny.greedy.txt"), "w") as f:
                f.write(" ".join(str(int(i)) for i in ids[:8]) + "\n" + " ".join(map(str, gen)) + "\n")
                f.write(f"{margin:.6g}\n")
            print(f"  greedy {gen}, smallest top-2 margin {margin:.3g}")
            load_weights(ref, nf4_weights(ref, back))
            logits_of(ref, ids).astype("<f4").tofile(os.path.join(out, "tiny-f32.nf4.logits.f32"))
    write_hf_dir(family, model, f32_back, out)
    write_bnb_dir(family, out)
    peft_goldens(family, f32_back, out)
    report_features(family, model, ids)


def report_features(family, model, ids):
    """How active the features are: attention scores and final logits against their soft-caps."""
    if family != "gemma2":
        return
    cfg = model.config
    with torch.no_grad():
        raw = model.lm_head(model.model(torch.from_numpy(ids)[None]).last_hidden_state)
    print(f"  final logits before the cap: |max| {raw.abs().max():.2f} (cap {cfg.final_logit_softcapping})")


MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def peft_goldens(family, f32_back, out):
    """LoRA gradients from PEFT for the f32 file's model (float64): r=4, alpha=8 on all seven
    projections with A and B random (init_lora_weights=False, rounded to f32 as ptrain keeps
    them), a batch of 2 x 16 tokens with some labels -100, the mean cross-entropy as transformers
    computes it (labels shifted inside; gemma2 on soft-capped logits). Writes peft.json (ids,
    labels, loss, tensor order), peft.init.f32 and peft.grads.f32."""
    base = make_model(family)
    load_weights(base, f32_back)
    mlp = ("gate_proj", "up_proj", "down_proj")
    peft_lora_step(base, MODULES, lambda layer, mod: getattr(layer.mlp if mod in mlp else layer.self_attn, mod), out,
                   f"tests/data/{family}/tiny-f32.gguf")


def peft_lora_step(base, modules, module_of, out, model_path, extra=None):
    """The PEFT golden every family shares: LoRA r=4, alpha=8 on modules (module_of(layer, name) finds each in a
    decoder layer), A and B random (init_lora_weights=False, seed 99) rounded to f32 as ptrain keeps them, in
    float64; a batch of 2 x 16 tokens (seed 11) with some labels -100; the loss and its gradients. Writes
    peft.init.f32, peft.grads.f32 and peft.json (model_path, the batch, the loss, extra's keys, the tensor order)."""
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=modules, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg).double()
    params = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        for mod in modules:
            lin = module_of(layer, mod)
            params += [(i, mod, "A", lin.lora_A["default"].weight), (i, mod, "B", lin.lora_B["default"].weight)]
    with torch.no_grad():
        for *_, p in params:
            p.copy_(p.float().double())
    rng = np.random.default_rng(11)
    ids = rng.integers(0, VOCAB, size=(2, 16))
    labels = ids.copy()
    labels[0, :4] = -100
    labels[1, 9:12] = -100
    loss = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss
    loss.backward()
    cat = lambda f: np.concatenate([f(p).detach().numpy().astype("<f4").ravel() for *_, p in params])  # noqa: E731
    cat(lambda p: p).tofile(os.path.join(out, "peft.init.f32"))
    cat(lambda p: p.grad).tofile(os.path.join(out, "peft.grads.f32"))
    with open(os.path.join(out, "peft.json"), "w") as f:
        json.dump({"model": model_path, "r": 4, "alpha": 8, "batch": 2, "seq": 16,
                   "ids": ids.ravel().tolist(), "labels": labels.ravel().tolist(), "loss": loss.item(),
                   **(extra or {}),
                   "tensors": [{"layer": i, "module": m, "which": w, "shape": list(p.shape)}
                               for i, m, w, p in params]}, f, indent=1)
    print(f"  PEFT: loss {loss.item():.6f}, {len(params)} LoRA tensors")


def write_bad_models():
    """Valid GGUF files that are not usable models of these families: each must give one clear error."""
    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731

    def model(path, arch, key_length=8, value_length=8, final_cap=30.0, biases=False, post_norms=True):
        w = GGUFWriter(path, arch)
        w.add_block_count(1)
        w.add_embedding_length(8)
        w.add_feed_forward_length(8)
        w.add_head_count(2)
        w.add_head_count_kv(2)
        if arch == "gemma2":
            w.add_key_length(key_length)
            w.add_value_length(value_length)
            w.add_final_logit_softcapping(final_cap)
        qw = 2 * key_length if arch == "gemma2" else 8  # 2 heads
        w.add_tensor("token_embd.weight", zeros(16, 8))
        w.add_tensor("output_norm.weight", zeros(8))
        parts = {"attn_norm": (8,), "attn_q": (qw, 8), "attn_k": (qw, 8), "attn_v": (qw, 8),
                 "attn_output": (8, qw), "ffn_norm": (8,), "ffn_gate": (8, 8), "ffn_up": (8, 8), "ffn_down": (8, 8)}
        if post_norms:
            parts.update({"post_attention_norm": (8,), "post_ffw_norm": (8,)})
        for name, shape in parts.items():
            w.add_tensor(f"blk.0.{name}.weight", zeros(*shape))
        if biases:
            for name in ("attn_q", "attn_k", "attn_v"):
                w.add_tensor(f"blk.0.{name}.bias", zeros(8))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    model(os.path.join(DATA, "qwen2", "bad-no-bias.gguf"), "qwen2", post_norms=False)
    model(os.path.join(DATA, "gemma2", "bad-value-length.gguf"), "gemma2", value_length=4)
    model(os.path.join(DATA, "gemma2", "bad-softcap.gguf"), "gemma2", final_cap=-30.0)
    model(os.path.join(DATA, "gemma2", "bad-no-post-norm.gguf"), "gemma2", post_norms=False)


if __name__ == "__main__":
    for fam in FAMILIES:
        make_family(fam)
    write_bad_models()
