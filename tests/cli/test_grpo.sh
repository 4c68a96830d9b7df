#!/bin/sh
# test_grpo.sh — method: grpo through the whole trainer on the tiny Llama in tests/data and the
# prompts of share/data/pirate-preferences.jsonl (their chosen/rejected columns kept for the
# reward functions):
# - a run with a built-in reward (length) trains: metrics.jsonl has TRL's metrics, the loss and
#   gradient norm are finite, the checkpoints and the adapter files are written;
# - exact resume: a run killed (kill -9) after its step-3 checkpoint and run again ends with the
#   uninterrupted run's adapter, bit-identical (the completions are drawn from the step alone);
# - a Python reward function (module:function, run by share/reward_worker.py) works beside a
#   built-in one, under TRL's metric names (its __name__);
# - a Python reward function that raises stops the run with its message, and one that returns a
#   string stops it naming the completion; neither leaves a checkpoint or an adapter; one that
#   returns None for some completions (TRL's "no reward") trains; a module that does not import
#   stops the run before training with Python's message;
# - num_iterations 2: a generation batch trained on for two steps (step 1 as with one iteration, the
#   reused step logging the loss's metrics only, as TRL), resume at a block's start bit-identical;
# - epsilon and epsilon_high: a narrow clip range clips tokens of the second pass that 0.2 does not;
# - use_dora (with num_iterations 2): trains, writes the magnitudes in PEFT's files, resumes exactly;
# - evaluation (val_split_ratio): every eval_steps the held-out prompts' completions are generated and
#   scored, metrics.jsonl gets TRL's eval record (eval_loss, eval_reward, eval_rewards/<f>/mean, ...);
#   a run killed and resumed logs the same evaluation (the completions drawn from the step alone);
# - num_generations_eval 1: one completion per held-out prompt, every eval group zero-std;
# - ptrain check refuses num_generations 1 and a batch (or eval batch) that is no multiple of it (or
#   of num_generations_eval).
# The C side of the loss (fixed completions against TRL) is tests/unit/test_grpo.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap '[ -n "$KEEP" ] || rm -rf "$tmp"' EXIT
PY=${PTRAIN_PYTHON:-python3}

write_config() { # write_config FILE OUTDIR REWARDS [extra yaml]
    cat >"$1" <<YAML
model_name: "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4"
method: grpo
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl"
    num_samples: 16
num_generations: ${GEN:-4}
max_completion_length: 12
reward_funcs: $3
beta: 0.04
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: 8
learning_rate: 5e-3
warmup_steps: 0
max_steps: ${MAX_STEPS:-6}
logging_steps: 1
save_steps: ${SAVE_STEPS:-3}
seed: 11
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
$4
YAML
}

write_config "$tmp/one.yaml" "$tmp/one" "[length]"
"$P" train "$tmp/one.yaml" >"$tmp/one.out" 2>&1
expect_eq "the GRPO run exits 0" 0 "$?"
ok "metrics.jsonl has TRL's GRPO metrics" grep -q '"rewards/length/mean": [-0-9.]*, "rewards/length/std": [-0-9.]*, "reward": [-0-9.]*, "reward_std": [-0-9.]*, "frac_reward_zero_std": [0-9.]*, "completions/mean_length": [0-9.]*, .*"kl": [-0-9.e]*, "entropy": [0-9.e]*, "clip_ratio/low_mean": 0[.0]*, "clip_ratio/low_min": 0[.0]*, "clip_ratio/high_mean": 0[.0]*, "clip_ratio/high_max": 0[.0]*, "clip_ratio/region_mean": 0[.0]*}' "$tmp/one/metrics.jsonl"
ok "every logged loss and gradient norm is a number" sh -c "! grep -q '\"loss\": null\|\"grad_norm\": null' '$tmp/one/metrics.jsonl'"
ok "the checkpoints and the adapter are written" test -f "$tmp/one/checkpoint-3.h5" -a -f "$tmp/one/checkpoint-6.h5" \
    -a -f "$tmp/one/lora/adapter_model.safetensors"

# exact resume: killed after the step-3 checkpoint, run again
write_config "$tmp/cut.yaml" "$tmp/cut" "[length]" "resume_from_checkpoint: true"
PTRAIN_TEST_KILL_STEP=5 "$P" train "$tmp/cut.yaml" >"$tmp/cut.out" 2>&1
rc=$?
ok "resume: the first run is killed at step 5 (exit $rc) after checkpoint-3" test "$rc" -ne 0 -a -f "$tmp/cut/checkpoint-3.h5"
"$P" train "$tmp/cut.yaml" >"$tmp/cut2.out" 2>&1
expect_eq "resume: the second run exits 0" 0 "$?"
ok "resume: the adapter is bit-identical to the uninterrupted run's" \
    cmp "$tmp/one/lora/adapter_model.safetensors" "$tmp/cut/lora/adapter_model.safetensors"
ok "resume: the steps after the checkpoint logged the same losses" sh -c \
    "grep -o '\"step\": [456], \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/one/metrics.jsonl' >'$tmp/a' &&
     grep -o '\"step\": [456], \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/cut/metrics.jsonl' >'$tmp/b' && cmp '$tmp/a' '$tmp/b'"

# num_iterations 2 (TRL's mu): each generation batch trained on for two steps; the reused steps log
# the loss's metrics only (entropy, clip_ratio/*), as TRL; resuming at a block's start is exact
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/mu.yaml" "$tmp/mu" "[length]" "num_iterations: 2"
"$P" train "$tmp/mu.yaml" >"$tmp/mu.out" 2>&1
expect_eq "num_iterations 2: the run exits 0" 0 "$?"
ok "num_iterations 2: a generation step logs the rewards and the loss's metrics" \
    grep -q '"step": 3,.*"reward": [-0-9.]*,.*"entropy": [0-9.]*, "clip_ratio/low_mean": [0-9.e-]*, "clip_ratio/low_min"' "$tmp/mu/metrics.jsonl"
ok "num_iterations 2: a reused step logs entropy and clip_ratio but no reward" sh -c \
    "grep '\"step\": 4,' '$tmp/mu/metrics.jsonl' | grep '\"clip_ratio/region_mean\": [0-9.e-]*' | grep -v -q '\"reward\"'"
ok "num_iterations 2: step 1 (ratio 1, the same completions) logs num_iterations 1's loss" sh -c \
    "grep -o '\"step\": 1, \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/one/metrics.jsonl' >'$tmp/a1' &&
     grep -o '\"step\": 1, \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/mu/metrics.jsonl' >'$tmp/b1' && cmp '$tmp/a1' '$tmp/b1'"
ok "num_iterations 2: step 2 trains on step 1's completions with the moved policy (another loss)" sh -c \
    "test \"\$(grep -o '\"step\": 2, \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/mu/metrics.jsonl' | sed 's/.*loss//')\" != \"\$(sed 's/.*loss//' '$tmp/b1')\""
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/mucut.yaml" "$tmp/mucut" "[length]" "num_iterations: 2
resume_from_checkpoint: true"
MAX_STEPS=4 PTRAIN_TEST_KILL_STEP=4 "$P" train "$tmp/mucut.yaml" >"$tmp/mucut.out" 2>&1
"$P" train "$tmp/mucut.yaml" >"$tmp/mucut2.out" 2>&1
expect_eq "num_iterations 2: resumed at a block's start, the run exits 0" 0 "$?"
ok "num_iterations 2: ... and ends bit-identical to the uninterrupted run" \
    cmp "$tmp/mu/lora/adapter_model.safetensors" "$tmp/mucut/lora/adapter_model.safetensors"

# epsilon / epsilon_high (the clip range; the arithmetic against TRL: tests/unit/test_grpo): with a
# narrow range the second pass on a batch clips tokens that 0.2 leaves alone, so another loss
MAX_STEPS=2 SAVE_STEPS=2 write_config "$tmp/eps.yaml" "$tmp/eps" "[length]" "num_iterations: 2
epsilon: 0.002
epsilon_high: 0.001"
"$P" train "$tmp/eps.yaml" >"$tmp/eps.out" 2>&1
expect_eq "epsilon 0.002, epsilon_high 0.001: the run exits 0" 0 "$?"
ok "epsilon: the default 0.2 clips nothing at step 2" \
    grep -q '"step": 2,.*"clip_ratio/region_mean": 0.000000}' "$tmp/mu/metrics.jsonl"
ok "epsilon: the narrow range clips both sides at step 2" \
    grep -q '"step": 2,.*"clip_ratio/low_mean": 0.[0-9]*[1-9][0-9]*,.*"clip_ratio/high_mean": 0.[0-9]*[1-9][0-9]*,' "$tmp/eps/metrics.jsonl"
ok "epsilon: ... and step 2's loss is another" sh -c \
    "test \"\$(grep -o '\"step\": 2, \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/mu/metrics.jsonl')\" != \
          \"\$(grep -o '\"step\": 2, \"epoch\": [0-9.]*, \"loss\": [-0-9.]*' '$tmp/eps/metrics.jsonl')\""

# evaluation: the held-out prompts (4 of 16) generated for and scored every 2 steps, TRL's eval record
EVAL="val_split_ratio: 0.25
eval_strategy: steps
eval_steps: 2"
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/ev.yaml" "$tmp/ev" "[length, regex:arr]" "$EVAL"
"$P" train "$tmp/ev.yaml" >"$tmp/ev.out" 2>&1
expect_eq "evaluation: the run exits 0" 0 "$?"
ok "evaluation: at steps 2 and 4, TRL's eval metrics" sh -c "test \$(grep -c '^{\"step\": [24], \"eval_loss\": [-0-9.]*, \"eval_rewards/length/mean\": [0-9.]*, \"eval_rewards/length/std\": [0-9.]*, \"eval_rewards/regex/mean\": [0-9.]*, \"eval_rewards/regex/std\": [0-9.]*, \"eval_reward\": [0-9.]*, \"eval_reward_std\": [0-9.]*, \"eval_frac_reward_zero_std\": [0-9.]*, \"eval_completions/mean_length\": [0-9.]*, .*\"eval_kl\": [0-9.]*, \"eval_entropy\": [0-9.]*, \"eval_clip_ratio/low_mean\": 0.000000, .*\"eval_clip_ratio/region_mean\": 0.000000}' '$tmp/ev/metrics.jsonl') = 2"
ok "evaluation: ptrain prints eval_loss and eval_reward" grep -q "eval at step 4: eval_loss [-0-9.]*, eval_reward [0-9.]*" "$tmp/ev.out"
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/evcut.yaml" "$tmp/evcut" "[length, regex:arr]" "$EVAL
resume_from_checkpoint: true"
PTRAIN_TEST_KILL_STEP=4 "$P" train "$tmp/evcut.yaml" >"$tmp/evcut.out" 2>&1
"$P" train "$tmp/evcut.yaml" >"$tmp/evcut2.out" 2>&1
expect_eq "evaluation: resumed after checkpoint-2, the run exits 0" 0 "$?"
ok "evaluation: ... and logs step 4's evaluation as the uninterrupted run" sh -c \
    "test -n \"\$(grep '\"step\": 4, \"eval_loss\"' '$tmp/ev/metrics.jsonl')\" &&
     test \"\$(grep '\"step\": 4, \"eval_loss\"' '$tmp/ev/metrics.jsonl')\" = \"\$(grep '\"step\": 4, \"eval_loss\"' '$tmp/evcut/metrics.jsonl' | tail -1)\""

# num_generations_eval 1 (TRL's key; the arithmetic of a group of one: tests/unit/test_grpo): one
# completion per held-out prompt, so an eval batch of 3 (no multiple of num_generations 4, refused
# without the key) evaluates, each group's std 0
MAX_STEPS=2 SAVE_STEPS=2 write_config "$tmp/ev1.yaml" "$tmp/ev1" "[length, regex:arr]" "$EVAL
num_generations_eval: 1
per_device_eval_batch_size: 3"
"$P" train "$tmp/ev1.yaml" >"$tmp/ev1.out" 2>&1
expect_eq "num_generations_eval 1: the run exits 0" 0 "$?"
ok "num_generations_eval 1: step 2's eval record has frac_reward_zero_std 1" \
    grep -q '^{"step": 2, "eval_loss": .*"eval_frac_reward_zero_std": 1.000000,' "$tmp/ev1/metrics.jsonl"
grep -v '^num_generations_eval' "$tmp/ev1.yaml" >"$tmp/ev4.yaml"
"$P" check "$tmp/ev4.yaml" >"$tmp/ev4.out" 2>&1
ok "... without num_generations_eval, the eval batch of 3 is refused (no multiple of 4)" \
    grep -q "per_device_eval_batch_size.*multiple of 4" "$tmp/ev4.out"

# use_dora with num_iterations 2: completions sampled and old log-probs taken with the magnitudes,
# the PEFT files carry them, resuming at a block's start is exact (the loss: tests/unit/test_grpo)
DORA="num_iterations: 2
use_dora: true
resume_from_checkpoint: true"
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/dora.yaml" "$tmp/dora" "[length]" "$DORA"
MAX_STEPS=4 SAVE_STEPS=2 write_config "$tmp/dora2.yaml" "$tmp/dora2" "[length]" "$DORA"
"$P" train "$tmp/dora2.yaml" >"$tmp/dora2.out" 2>&1
expect_eq "use_dora: the run exits 0" 0 "$?"
ok "use_dora: every logged loss and gradient norm is a number" sh -c "! grep -q '\"loss\": null\|\"grad_norm\": null' '$tmp/dora2/metrics.jsonl'"
ok "use_dora: the PEFT adapter holds the magnitudes" sh -c \
    "grep -q '\"use_dora\": true' '$tmp/dora2/lora/adapter_config.json' && grep -q lora_magnitude_vector '$tmp/dora2/lora/adapter_model.safetensors'"
PTRAIN_TEST_KILL_STEP=4 "$P" train "$tmp/dora.yaml" >"$tmp/dora.out" 2>&1
ok "use_dora: a run is killed at step 4 after checkpoint-2" test -f "$tmp/dora/checkpoint-2.h5"
"$P" train "$tmp/dora.yaml" >"$tmp/dora3.out" 2>&1
expect_eq "use_dora: the resumed run exits 0" 0 "$?"
ok "use_dora: ... and ends bit-identical to the uninterrupted run" \
    cmp "$tmp/dora2/lora/adapter_model.safetensors" "$tmp/dora/lora/adapter_model.safetensors"

# Python reward functions, called as TRL calls them
mkdir -p "$tmp/py"
cat >"$tmp/py/myrewards.py" <<'PYEOF'
def mentions_arr(prompts, completions, completion_ids, chosen, **kwargs):
    assert len(chosen) == len(completions) and isinstance(prompts[0], list)
    return [1.0 if "arr" in c[0]["content"].lower() else 0.1 * (len(ids) % 3) for c, ids in zip(completions, completion_ids)]

def boom(completions, **kwargs):
    raise ValueError("the judge is out to lunch")

def words(completions, **kwargs):
    return ["many" for _ in completions]

def some(completions, **kwargs):  # TRL's None: no reward for that completion
    return [None if i % 2 else 1.0 for i in range(len(completions))]
PYEOF
if command -v "$PY" >/dev/null 2>&1; then
    MAX_STEPS=2 SAVE_STEPS=100 write_config "$tmp/py.yaml" "$tmp/pyrun" "[myrewards:mentions_arr, length]"
    (cd "$tmp/py" && PTRAIN_PYTHON="$PY" "$P" train "$tmp/py.yaml" >"$tmp/py.out" 2>&1)
    expect_eq "a Python reward function: the run exits 0" 0 "$?"
    ok "its metrics are under its __name__" grep -q '"rewards/mentions_arr/mean": [-0-9.]*, "rewards/mentions_arr/std": [-0-9.]*, "rewards/length/mean"' "$tmp/pyrun/metrics.jsonl"
    write_config "$tmp/boom.yaml" "$tmp/boom" "[length, $tmp/py/myrewards.py:boom]"
    PTRAIN_PYTHON="$PY" "$P" train "$tmp/boom.yaml" >"$tmp/boom.out" 2>&1
    rc=$?
    ok "a reward function that raises stops the run (exit $rc)" test "$rc" -ne 0
    ok "... with its message" grep -q "reward function boom: ValueError: the judge is out to lunch" "$tmp/boom.out"
    ok "... before anything is saved" sh -c "! ls '$tmp/boom' | grep -q 'checkpoint-\|lora'"
    write_config "$tmp/words.yaml" "$tmp/words" "[$tmp/py/myrewards.py:words]"
    PTRAIN_PYTHON="$PY" "$P" train "$tmp/words.yaml" >"$tmp/words.out" 2>&1
    rc=$?
    ok "a reward function that returns text stops the run (exit $rc), naming the completion" \
        sh -c "test $rc -ne 0 && grep -q \"reward function words: returned str 'many' for completion 0, expected a number or None (completion 0: prompt\" '$tmp/words.out'"
    MAX_STEPS=1 write_config "$tmp/some.yaml" "$tmp/some" "[$tmp/py/myrewards.py:some]"
    PTRAIN_PYTHON="$PY" "$P" train "$tmp/some.yaml" >"$tmp/some.out" 2>&1
    expect_eq "a reward function may return None for some completions (TRL's no reward)" 0 "$?"
    write_config "$tmp/nomod.yaml" "$tmp/nomod" "[no_such_module_here:f]"
    PTRAIN_PYTHON="$PY" "$P" train "$tmp/nomod.yaml" >"$tmp/nomod.out" 2>&1
    ok "a reward module that does not import stops the run before training, saying so" \
        grep -q "reward_funcs: ModuleNotFoundError: No module named 'no_such_module_here'" "$tmp/nomod.out"
else
    skip_test "Python reward functions" "no $PY"
fi

write_config "$tmp/bade.yaml" "$tmp/bade" "[length]" "epsilon: 1.5"
"$P" check "$tmp/bade.yaml" >"$tmp/bade.out" 2>&1
ok "ptrain check: epsilon 1.5 (a negative lower clip) is refused" grep -q "epsilon: expected a number in (0, 1\]" "$tmp/bade.out"
write_config "$tmp/badev.yaml" "$tmp/badev" "[length]" "val_split_ratio: 0.25
per_device_eval_batch_size: 6"
"$P" check "$tmp/badev.yaml" >"$tmp/badev.out" 2>&1
ok "ptrain check: an eval batch of 6 is no multiple of num_generations 4" grep -q "per_device_eval_batch_size.*multiple of 4" "$tmp/badev.out"
write_config "$tmp/badev3.yaml" "$tmp/badev3" "[length]" "val_split_ratio: 0.25
num_generations_eval: 3"
"$P" check "$tmp/badev3.yaml" >"$tmp/badev3.out" 2>&1
ok "ptrain check: an eval batch of 8 is no multiple of num_generations_eval 3" grep -q "per_device_eval_batch_size.*num_generations_eval (3.*multiple of 3" "$tmp/badev3.out"
GEN=3 write_config "$tmp/bad.yaml" "$tmp/bad" "[length]"
"$P" check "$tmp/bad.yaml" >"$tmp/bad.out" 2>&1
ok "ptrain check: a batch of 8 is no multiple of num_generations 3" grep -q "per_device_train_batch_size.*multiple of 3" "$tmp/bad.out"
write_config "$tmp/bad1.yaml" "$tmp/bad1" "[nosuch]"
"$P" train "$tmp/bad1.yaml" >"$tmp/bad1.out" 2>&1
ok "an unknown built-in reward is named, with the built-ins" grep -q "reward_funcs: nosuch is neither a built-in reward (exact_answer" "$tmp/bad1.out"
done_testing
