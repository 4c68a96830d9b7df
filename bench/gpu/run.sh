#!/bin/bash
# run.sh — the GPU training benchmark, all on one GPU in one run: ptrain (QLoRA, NF4 base, each
# use_gradient_checkpointing mode) against transformers + PEFT at its strongest there (peer_peft.py:
# bitsandbytes NF4 and Liger's kernels when they import, else a bf16 base, said in the table) on
# random models in the shapes of gemma-2-2b, SmolLM2-135M and Llama-3.1-8B (make_random_model.py
# writes them on the GPU: nothing large travels). Same settings on both sides: LoRA r 16 alpha 32 on
# all 7 projections, AdamW. Parts, in the order given by PARTS:
#   speed    matrix.py speed: the cells (shape x seq x batch x checkpointing) in priority order, each
#            under its own timeout, skipped with a reason once the deadline is near; the bf16
#            matrix-product rate first (gemm_rate.py), for MFU
#   longest  matrix.py longest: the longest sequence that trains at batch 1, ptrain's found by its
#            memory plan without loading weights (then one real step at the largest), the peer's by
#            doubling one step at a time
# and prints the tables of report.py (table.md, longest.md in WORKDIR).
# Usage: bench/gpu/run.sh [WORKDIR]   (default /tmp/ptrain-bench; models are kept there for reruns)
# Environment: PTRAIN (default build/ptrain), DEVICE (cuda; cpu tries the scripts out on tiny
# shapes), PARTS ("speed longest"), PYTHON (python3), DEADLINE (epoch seconds; default 10 minutes
# from now), LONGEST_SHARE (percent of the time left that `longest` keeps when both run: 35), and
# matrix.py's own (BIG, SMALL, SEQS, BATCHES, STEPS, WARMUP, CELLS, LONGEST_SHAPES, MAX_SEQ, ...);
# BENCH_CONTINUE=1 keeps the speed cells an earlier run left in WORKDIR (a second call on the same
# machine) and runs the others.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/ptrain-bench}
export PTRAIN=${PTRAIN:-build/ptrain} DEVICE=${DEVICE:-cuda} PYTHON=${PYTHON:-python3}
PARTS=${PARTS:-speed longest}
DEADLINE=${DEADLINE:-$(($(date +%s) + 600))}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$DEVICE" = cpu ]; then # the dry run: tiny shapes, short sequences, few steps
    export BIG=${BIG:-tiny-gemma2} SMALL=${SMALL:-tiny} SEQS=${SEQS:-64 128} BATCHES=${BATCHES:-1 2}
    export STEPS=${STEPS:-2} WARMUP=${WARMUP:-1} LONGEST_SHAPES=${LONGEST_SHAPES:-tiny-gemma2 tiny-llama3}
    export LONGEST_START=${LONGEST_START:-128} MAX_SEQ=${MAX_SEQ:-512} LONGEST_STEP_SECONDS=${LONGEST_STEP_SECONDS:-60}
    export PEER_LONGEST_SECONDS=${PEER_LONGEST_SECONDS:-30}
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
echo "bench: device $DEVICE, parts $PARTS, work dir $work, $((DEADLINE - $(date +%s))) s to the deadline"

for part in $PARTS; do
    case $part in
    speed)
        deadline=$DEADLINE
        case " $PARTS " in *" longest "*)
            deadline=$(($(date +%s) + (DEADLINE - $(date +%s)) * (100 - ${LONGEST_SHARE:-35}) / 100)) ;;
        esac
        [ "${BENCH_CONTINUE:-0}" = 1 ] || rm -f "$work/cells.jsonl" "$work/gemm.json" "$work/fusion.jsonl" "$work/table.md"
        [ -s "$work/gemm.json" ] || timeout 90 "$PYTHON" "$here/gemm_rate.py" | tee "$work/gemm.json"
        # what the GEMM fusions not built would save (report.py puts it beside the step)
        [ -s "$work/fusion.jsonl" ] || timeout 60 "$PYTHON" "$here/fusion_rate.py" >"$work/fusion.jsonl"
        DEADLINE=$deadline "$PYTHON" "$here/matrix.py" speed "$work"
        echo "bench: speed: exit $?"
        ;;
    longest)
        rm -f "$work/longest.jsonl" "$work/longest.md"
        DEADLINE=$DEADLINE "$PYTHON" "$here/matrix.py" longest "$work"
        echo "bench: longest: exit $?"
        ;;
    *) echo "bench: unknown part '$part' (speed, longest)" ;;
    esac
done
echo
case " $PARTS " in *" speed "*) "$PYTHON" "$here/report.py" table "$work" | tee "$work/table.md" ;; esac
echo
case " $PARTS " in *" longest "*) "$PYTHON" "$here/report.py" longest "$work" | tee "$work/longest.md" ;; esac
