#!/bin/sh
# test_ptxas.sh — what ptxas says of the kernels, before any GPU runs them (issue 39, point 2): each
# cuda/*.cu compiled with the project's NVCCFLAGS (sm_80 and sm_90) and -Xptxas -v, device code
# only (-fatbin), two files at a time; tests/gpu/ptxas_check.py reads per kernel instance and
# architecture the registers, spill stores and loads, stack frame and static shared memory, and
# per launch in the sources the kernel, block size and dynamic shared memory, and fails on:
#   - spills in a hot kernel (the list below; spills elsewhere are printed, not failed), or a stack
#     frame (local memory) in one beyond its stated allowance;
#   - static shared memory over 48 KiB, static + dynamic over the opt-in limit (sm_80 163 KiB,
#     sm_90 227 KiB), or over 48 KiB without cudaFuncSetAttribute(kernel,
#     cudaFuncAttributeMaxDynamicSharedMemorySize, the launch's size) before the launch;
#   - a launch whose block exceeds the kernel's __launch_bounds__(N[, M]), or registers x N (x M)
#     over the register file; registers x block over the register file (65536) for every launch;
#   - a launch it cannot read, a kernel without a launch, a hot kernel that no longer exists.
# Every kernel's numbers are printed as comments. Skips, saying why, without nvcc (a build without
# CUDA), python3, c++ or c++filt. About 1 minute of CPU (2-4 minutes on 2 busy cores).
# Environment: NVCC, NVCCFLAGS (from make check), PTXAS_CUDA_DIR (the kernels' sources, default
# $PTRAIN_SRCDIR/cuda: a changed copy, to see the check fail without touching the tree).
. "$PTRAIN_SRCDIR/tests/tap.sh"
cuda=${PTXAS_CUDA_DIR:-$PTRAIN_SRCDIR/cuda}
why=""
if [ -z "${NVCC:-}" ] || [ ! -x "$NVCC" ]; then
    why="no nvcc (this build has no CUDA backend: ./configure --with-cuda)"
else
    for tool in python3 c++ c++filt; do
        [ -z "$why" ] && ! command -v "$tool" >/dev/null 2>&1 && why="$tool not found"
    done
fi
if [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The hot kernels: those on every training step's path (or every GEMM's), where a spill costs
# local-memory traffic at each call. Names without template arguments; each must exist.
cat >"$tmp/hot" <<'EOF'
# GEMM-adjacent: the frozen weights dequantized for each GEMM, the casts around cuBLASLt, the bias
dequant8_kernel f32_to_bf16_kernel bf16_to_f32_kernel add_bias_kernel
# attention on the tensor cores, forward and backward, and the backward's rowsum(dO * O)
attention_tc_fwd_kernel attention_tc_dq_kernel attention_tc_dkv_kernel attention_delta_kernel
# the per-row layers and their gradients
rmsnorm_kernel rmsnorm_dx_kernel rmsnorm_dw_partial_kernel rmsnorm_dw_sum_kernel rope_kernel glu_kernel
glu_bwd_kernel add_kernel dropout_kernel
# the loss and the optimizer (and the gradient norm it clips by)
cross_entropy_kernel adamw_kernel sum_squares_kernel
EOF
# The stack frame (local memory) a hot kernel may have, in bytes; 0 for those not named.
cat >"$tmp/stack" <<'EOF'
# double cos and sin (the CPU's rotation, bit for bit) reduce a huge angle in a local array
rope_kernel 40
EOF
# The largest value of each term of a launch's dynamic shared memory where it is a variable
# (`smem = EXPRESSION;` before the launch): TEXT=VALUE, DMAX the instance's first template
# argument. A row whose TEXT the expression no longer has fails, and so does a variable launch
# without a row.
cat >"$tmp/largest" <<'EOF'
# the fp32 reference kernels: head_dim <= MAX_HEAD_DIM (attn_check, cuda/attention.h)
attention_fwd_kernel    a->head_dim=MAX_HEAD_DIM
attention_dq_kernel     a->head_dim=MAX_HEAD_DIM
attention_dkv_kernel    a->head_dim=MAX_HEAD_DIM
# the tensor-core kernels: the instance <DMAX, ...> takes head_dim <= DMAX (tc_dmax, cuda/attention_tc.h)
attention_tc_fwd_kernel dmax=DMAX a->head_dim=DMAX
attention_tc_dq_kernel  dmax=DMAX a->head_dim=DMAX
attention_tc_dkv_kernel dmax=DMAX a->head_dim=DMAX
EOF

# the project's flags, the architectures they ask for; config.h of the build when there is one
archs=$(echo "$NVCCFLAGS" | grep -o 'code=sm_[0-9a-z]*' | sed 's/code=//' | sort -u | tr '\n' ' ' | sed 's/ $//')
build=$(dirname "${PTRAIN:-/nonexistent/ptrain}")
cfg=""
[ -f "$build/config.h" ] && cfg="-I$build -DHAVE_CONFIG_H"
export NVCC NVCCFLAGS cfg cuda tmp PTRAIN_SRCDIR
start=$(date +%s)
# shellcheck disable=SC2016 # expanded by the sh that xargs starts
printf '%s\n' "$cuda"/*.cu | xargs -P 2 -n 1 sh -c '
    f=$1 b=$(basename "$1" .cu)
    # shellcheck disable=SC2086 # NVCCFLAGS and cfg are lists of flags
    $NVCC $NVCCFLAGS $cfg -I"$PTRAIN_SRCDIR/include" -I"$cuda" -Xptxas -v -fatbin -o "$tmp/$b.fatbin" "$f" \
        >"$tmp/$b.log" 2>&1
    echo $? >"$tmp/$b.rc"' sh
set -- "$cuda"/*.cu
echo "# compiled $# files for ${archs:-the default architecture} in $(($(date +%s) - start)) s"
PTXAS_ARCHS=$archs python3 "$PTRAIN_SRCDIR/tests/gpu/ptxas_check.py" "$cuda" "$tmp" "$tmp/hot" "$tmp/stack" "$tmp/largest"
