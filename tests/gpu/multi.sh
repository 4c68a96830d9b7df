#!/bin/bash
# multi.sh — data-parallel training on the GPUs of one machine: `mpirun -np N` (Open MPI's, carried
# in the bundle: the GPU machine has none; `--mca plm isolated` starts the ranks without ssh, which
# it lacks too), one GPU per rank (ptrain binds rank r to GPU r mod N), gradients summed through
# real NCCL on a stream of their own while the backward pass runs (cuda/comm.cu). Checks, each
# printed as "multi: NAME: PASS|FAIL|SKIP — numbers":
#   equal      N ranks x accumulation A give the losses of one rank with accumulation N x A (the
#              sampler hands both the same sequences per step): every step within 2e-2 relative,
#              the bf16 bound of tests/gpu/train_parity.sh (the sums differ only in order)
#   overlap    the share of the step spent waiting on the gradient sums, what the backward did not
#              hide: metrics.jsonl's comm_time_s / (step_time_s + comm_time_s), median of the
#              steps after the first (reported; no bound)
#   scaling    tokens/s of the N ranks over N x that of the one rank (the same work per rank and
#              step; reported, and on the gemma-2-2b shape too when SCALE_MODEL is given and time
#              is left)
#   kill       rank 1 killed with SIGKILL in the middle of training (its first step logged): the
#              job must end non-zero within 15 s, nothing left hanging in a collective
# Usage: tests/gpu/multi.sh WORKDIR MODEL DATASET   (from the repository root)
# Environment: PT (the ptrain command), MPIRUN (default mpirun), RANKS (N: the GPUs nvidia-smi
# lists), DEVICE (cuda; cpu runs the same checks on CPU ranks, which tries the script out), SEQ
# (1024), BATCH (2), STEPS (8), SCALE_MODEL (a gemma-2-2b-shaped model directory, optional),
# MULTI_SECONDS (when to stop starting checks: 150).
set -u
work=$1 model=$2 data=$3
PT=${PT:-ptrain} MPIRUN=${MPIRUN:-mpirun} DEVICE=${DEVICE:-cuda}
N=${RANKS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
SEQ=${SEQ:-1024} BATCH=${BATCH:-2} STEPS=${STEPS:-8}
end=$(($(date +%s) + ${MULTI_SECONDS:-150}))
mkdir -p "$work"
failed=0
verdict() { # NAME PASS|FAIL|SKIP NUMBERS
    echo "multi: $1: $2 — $3"
    [ "$2" = FAIL ] && failed=1
    return 0
}
left() { echo $((end - $(date +%s))); }

config() { # FILE OUTDIR ACCUM STEPS MODEL
    cat >"$1" <<YAML
model_name: "$5"
max_seq_length: $SEQ
device: $DEVICE
dataset:
  - name: "$data"
lora_r: 16
lora_alpha: 32
lora_dropout: 0
per_device_train_batch_size: $BATCH
gradient_accumulation_steps: $3
max_steps: $4
learning_rate: 1e-4
lr_scheduler_type: constant
warmup_steps: 0
optim: adamw_torch
logging_steps: 1
save_strategy: "no"
seed: 11
threads: ${THREADS:-auto}
output_dir: "$2"
final_model_dir: "$2/lora"
YAML
}
mpi() { # SECONDS NP ARGS...: the job under a wall-clock limit; rc
    local secs=$1 np=$2
    shift 2
    timeout -k 5 "$secs" "$MPIRUN" --mca plm isolated --oversubscribe --bind-to none -np "$np" "$@"
}

echo "multi: $N ranks on $DEVICE, $BATCH x $SEQ tokens per rank and micro-batch, $STEPS steps; model $model"
[ "$N" -ge 2 ] || { verdict all SKIP "fewer than 2 ranks ($N)"; exit 0; }

# --- equal: one rank with N x A accumulation, then N ranks with A ---
config "$work/one.yaml" "$work/one" "$N" "$STEPS" "$model"
config "$work/many.yaml" "$work/many" 1 "$STEPS" "$model"
rm -rf "$work/one" "$work/many"
timeout -k 5 "$(($(left) > 30 ? $(left) / 2 : 15))" "$PT" train "$work/one.yaml" >"$work/one.log" 2>&1
one_rc=$?
mpi "$(($(left) > 20 ? $(left) : 20))" "$N" "$PT" train "$work/many.yaml" >"$work/many.log" 2>&1
many_rc=$?
grep -a '^memory plan\|^ptrain\|error' "$work/many.log" | tail -n 5
python3 - "$work/one/metrics.jsonl" "$work/many/metrics.jsonl" "$N" "$one_rc" "$many_rc" <<'PY'
import json, statistics, sys
def recs(p):
    try:
        return [json.loads(l) for l in open(p) if '"loss"' in l]
    except OSError:
        return []
one, many, n, rc1, rcn = recs(sys.argv[1]), recs(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ok = rc1 == rcn == "0" and one and len(one) == len(many)
worst = max((abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(one, many)), default=float("nan"))
ok = ok and worst <= 2e-2
print(f"multi: equal: {'PASS' if ok else 'FAIL'} — exit {rc1} (1 rank, accumulation {n}) and {rcn} ({n} ranks); "
      f"{len(many)} steps, loss {one[0]['loss'] if one else 'n/a'} -> {one[-1]['loss'] if one else 'n/a'} on one rank; "
      f"worst step relative difference {worst:.3g} (<= 2e-2)")
later = many[1:] or many
share = [r["comm_time_s"] / max(r["step_time_s"] + r["comm_time_s"], 1e-9) for r in later if "comm_time_s" in r]
if share:
    s = statistics.median(share)
    print(f"multi: overlap: PASS — {100 * s:.1f}% of the step waiting on the gradient sums (median of {len(share)} "
          f"steps; comm {statistics.median(r['comm_time_s'] for r in later):.4f} s, compute "
          f"{statistics.median(r['step_time_s'] for r in later):.4f} s a step on the slowest rank)")
else:
    print("multi: overlap: FAIL — no comm_time_s in the N-rank metrics")
t1 = statistics.median(r["tokens_per_s"] for r in (one[1:] or one)) if one else None
tn = statistics.median(r["tokens_per_s"] for r in later) if many else None
if t1 and tn:
    print(f"multi: scaling: PASS — {tn:.0f} tokens/s on {n} ranks, {t1:.0f} on one: {tn / t1:.2f}x, "
          f"{100 * tn / (n * t1):.0f}% of {n}x")
else:
    print("multi: scaling: FAIL — no tokens/s to compare")
sys.exit(0 if ok and share and t1 and tn else 1)
PY
[ $? = 0 ] || failed=1

# --- scaling on the gemma-2-2b shape, when asked and time is left ---
if [ -n "${SCALE_MODEL:-}" ] && [ "$(left)" -gt 90 ]; then
    config "$work/s1.yaml" "$work/s1" "$N" 4 "$SCALE_MODEL"
    config "$work/sn.yaml" "$work/sn" 1 4 "$SCALE_MODEL"
    rm -rf "$work/s1" "$work/sn"
    timeout -k 5 $(($(left) / 2)) "$PT" train "$work/s1.yaml" >"$work/s1.log" 2>&1
    mpi "$(($(left) > 20 ? $(left) - 20 : 5))" "$N" "$PT" train "$work/sn.yaml" >"$work/sn.log" 2>&1
    python3 - "$work/s1/metrics.jsonl" "$work/sn/metrics.jsonl" "$N" <<'PY'
import json, statistics, sys
def tps(p):
    try:
        r = [json.loads(l) for l in open(p) if '"tokens_per_s"' in l]
    except OSError:
        return None
    return statistics.median(x["tokens_per_s"] for x in (r[1:] or r)) if r else None
t1, tn, n = tps(sys.argv[1]), tps(sys.argv[2]), int(sys.argv[3])
print(f"multi: scaling-gemma2: {'PASS' if t1 and tn else 'FAIL'} — " + (
    f"{tn:.0f} tokens/s on {n} ranks, {t1:.0f} on one: {tn / t1:.2f}x, {100 * tn / (n * t1):.0f}% of {n}x"
    if t1 and tn else "a run gave no tokens/s"))
PY
elif [ -n "${SCALE_MODEL:-}" ]; then
    verdict scaling-gemma2 SKIP "$(left) s left"
fi

# --- kill: SIGKILL rank 1 once training runs; the job must end non-zero within 15 s ---
if [ "$(left)" -lt 25 ]; then
    verdict kill SKIP "$(left) s left"
    exit $failed
fi
config "$work/kill.yaml" "$work/kill" 1 100000 "$model"
rm -rf "$work/kill"
mpi "$(($(left) > 60 ? 60 : $(left)))" "$N" "$PT" train "$work/kill.yaml" >"$work/kill.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 240); do # rank 1 of this job (its command line names kill.yaml), once a step is logged
    if [ -s "$work/kill/metrics.jsonl" ]; then
        sleep 0.3
        for p in /proc/[0-9]*; do
            { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "train $work/kill.yaml" || continue
            { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=${p#/proc/}
        done
        break
    fi
    kill -0 "$job" 2>/dev/null || break
    sleep 0.5
done
start=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait "$job"
rc=$?
secs=$(($(date +%s) - start))
if [ -n "$victim" ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$secs" -lt 15 ]; then
    verdict kill PASS "rank 1 (pid $victim) killed mid-run: the job ended with exit $rc after $secs s (< 15)"
else
    verdict kill FAIL "victim ${victim:-not found}; exit $rc after $secs s$([ "$rc" = 124 ] && echo ' (hung until the timeout)')"
    tail -n 5 "$work/kill.log"
fi
exit $failed
