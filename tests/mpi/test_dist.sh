#!/bin/sh
# test_dist.sh — runs the dist unit test (tests/mpi/test_dist.c) as 2 MPI ranks; it prints TAP.
mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null 2>&1; then
    echo "1..0 # SKIP mpirun not found (Debian: apt-get install openmpi-bin)"
    exit 0
fi
unset OMP_NUM_THREADS
# the gather test asks rank 0 for 4 EiB: under AddressSanitizer too that is a NULL, not an abort
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
export ASAN_OPTIONS
exec timeout 120 "$mpirun" -np 2 --oversubscribe ./tests/mpi/test_dist
