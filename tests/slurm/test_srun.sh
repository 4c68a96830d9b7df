#!/bin/sh
# test_srun.sh — ptrain launched by Slurm: a throw-away one-node cluster (munge + slurmctld +
# slurmd in a temp dir) runs `srun --mpi=pmix -n 2 ptrain check` directly and inside an sbatch
# allocation; rank and local rank must come from MPI, the table is printed once, and a bad
# config ends the step non-zero with one error. Skips, saying why, without Slurm or root.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
for tool in slurmctld slurmd munged srun sbatch sinfo; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "1..0 # SKIP $tool not found (Debian: apt-get install slurm-wlm munge)"
        exit 0
    fi
done
if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP starting a private slurmctld/slurmd needs root"
    exit 0
fi
tmp=$(mktemp -d /tmp/ptrain-slurm.XXXXXX)
host=$(hostname -s)
cleanup() {
    for pidfile in "$tmp"/slurmd.pid "$tmp"/slurmctld.pid "$tmp"/munged.pid; do
        [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
    done
    sleep 1
    rm -rf "$tmp"
}
trap cleanup EXIT

# munge: a private key and socket, so nothing on the machine is touched
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 0400 "$tmp/munge.key"
mkdir -p "$tmp/munge"
munged --key-file="$tmp/munge.key" --socket="$tmp/munge/socket" --pid-file="$tmp/munged.pid" \
    --log-file="$tmp/munged.log" --seed-file="$tmp/munge.seed" --force 2>"$tmp/munged.err" || {
    echo "1..0 # SKIP munged would not start: $(head -c 200 "$tmp/munged.err")"
    exit 0
}
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=ptraintest
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$tmp/slurm.conf"
if ! slurmctld -f "$SLURM_CONF" 2>"$tmp/ctld.err" || ! slurmd -f "$SLURM_CONF" 2>"$tmp/slurmd.err"; then
    echo "1..0 # SKIP slurmctld/slurmd would not start: $(cat "$tmp"/*.err | head -c 300)"
    exit 0
fi
i=0
until sinfo -h -o %T 2>/dev/null | grep -q idle; do
    i=$((i + 1))
    if [ "$i" -gt 60 ]; then
        echo "1..0 # SKIP the test cluster did not come up in 60 s: $(tail -n 3 "$tmp/slurmctld.log" | tr '\n' ' ')"
        exit 0
    fi
    sleep 1
done

ex=$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml
timeout 120 srun --mpi=pmix -n 2 "$P" check "$ex" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect_eq "srun --mpi=pmix -n 2 ptrain check: exit 0" 0 "$rc"
expect_eq "srun: the table is printed once" 1 "$(grep -c '^key ' "$tmp/out")"
ok "srun: both ranks come from MPI" grep -q 'launch.ranks                   2 (2 on this node)' "$tmp/out"

printf 'model_name: x\nsave_steps: fifty\n' >"$tmp/bad.yaml"
timeout 120 srun --mpi=pmix -n 2 "$P" check "$tmp/bad.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
ok "srun, bad config: the step ends non-zero" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "srun, bad config: one error, from rank 0" \
    "ptrain: rank 0: error: $tmp/bad.yaml:2:13: save_steps: expected a positive integer or a fraction below 1 of the total steps, found \"fifty\"" \
    "$(grep '^ptrain' "$tmp/err")"

cat >"$tmp/job.sh" <<JOB
#!/bin/sh
srun --mpi=pmix "$P" check "$ex"
JOB
timeout 180 sbatch --wait -n 2 -o "$tmp/job.out" "$tmp/job.sh" >/dev/null 2>"$tmp/err"
rc=$?
expect_eq "sbatch -n 2 with srun inside: exit 0" 0 "$rc"
expect_eq "sbatch: the table is printed once" 1 "$(grep -c '^key ' "$tmp/job.out" 2>/dev/null)"

done_testing
