# shellcheck shell=sh
# cluster.sh — a throw-away one-node Slurm cluster for the Slurm tests, sourced after tap.sh:
#
#   . "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
#   cluster_start 2          # munged + slurmctld + slurmd with 2 fake GPUs; SLURM_CONF exported
#   ... srun, sbatch, scontrol, squeue against it; $cluster_dir is a private scratch directory,
#   $cluster_node the node's name (SLURM_JOB_NODELIST)
#   (cluster_stop runs on exit, whatever happens)
#
# Slurm holds a requeued job for cred_expire + 1 s (120 + 1 by default) before it may run again;
# the test cluster's cred_expire is 5 s, so requeued jobs come back within seconds, by Slurm's own
# BeginTime rather than by the test moving it.
# Everything lives in one temp dir: the munge key and socket, slurm.conf and gres.conf, the state
# and spool dirs, the logs, the jobs' TMPDIR and the PMIx directories. Ports are picked free, so two
# test clusters can run side by side. The daemons run as root (SlurmUser=root). The fake GPUs are
# existing character devices (/dev/null, /dev/zero, ...; no mknod, so unprivileged containers do
# too): Slurm hands them out and sets CUDA_VISIBLE_DEVICES per task as on a real GPU node, and
# nothing opens them (no cgroup device constraint).
#
# Missing Slurm or munge packages are installed with apt-get when this runs as root (or with
# passwordless sudo); the test skips, saying why, only when that is not possible. A cluster that
# is installed but does not come up is a failure ("Bail out!"), not a skip.
# cluster_stop cancels every job, waits for them, stops the daemons, kills any process still
# carrying this cluster's SLURM_CONF (a job step, slurmstepd) and removes the temp dir.

cluster_dir=""
cluster_node=""
cluster_pids=""
cluster_munged=""

cluster_skip() { # cluster_skip REASON: the whole test file skips (the rest of it, after some tests)
    if [ "${tap_n:-0}" -gt 0 ]; then
        skip_test "the tests on Slurm" "$1"
        done_testing
        exit $?
    fi
    echo "1..0 # SKIP $1"
    exit 0
}

cluster_bail() { # cluster_bail REASON: the cluster should have come up and did not
    echo "Bail out! $1"
    [ -n "$cluster_dir" ] && for log in "$cluster_dir"/*.log "$cluster_dir"/*.err; do
        [ -s "$log" ] && tail -n 5 "$log" | sed "s|^|# ${log##*/}: |"
    done
    exit 1
}

# cluster_require: the Slurm and munge commands, installed when missing and possible
cluster_require() {
    missing=""
    for tool in munged slurmctld slurmd srun sbatch squeue scontrol scancel sinfo; do
        command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
    done
    if [ -n "$missing" ]; then
        sudo=""
        if [ "$(id -u)" -ne 0 ]; then
            sudo -n true 2>/dev/null || cluster_skip "Slurm is not installed (missing:$missing) and cannot be installed without root (Debian: apt-get install slurm-wlm munge)"
            sudo="sudo -n"
        fi
        command -v apt-get >/dev/null 2>&1 || cluster_skip "Slurm is not installed (missing:$missing) and there is no apt-get to install it"
        echo "# installing slurm-wlm and munge (missing:$missing)"
        # shellcheck disable=SC2086
        if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1; then
            $sudo apt-get update -q >/dev/null 2>&1
            # shellcheck disable=SC2086
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1 ||
                cluster_skip "Slurm is not installed (missing:$missing) and apt-get install slurm-wlm munge failed"
        fi
        for tool in $missing; do
            command -v "$tool" >/dev/null 2>&1 ||
                cluster_skip "$tool is still missing after apt-get install slurm-wlm munge"
        done
    fi
    if [ "$(id -u)" -ne 0 ]; then
        cluster_skip "starting a private slurmctld/slurmd needs root"
    fi
}

cluster_port_free() { # cluster_port_free PORT: nothing listens on TCP PORT
    hex=$(printf '%04X' "$1")
    ! awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

cluster_free_ports() { # prints two free TCP ports next to each other
    base=$((20000 + ($$ * 37 + $(od -An -N2 -tu2 /dev/urandom)) % 40000))
    i=0
    while [ "$i" -lt 200 ]; do
        p=$((base + 2 * i))
        [ "$p" -gt 65000 ] && p=$((p - 44000))
        if cluster_port_free "$p" && cluster_port_free $((p + 1)); then
            echo "$p $((p + 1))"
            return 0
        fi
        i=$((i + 1))
    done
    return 1
}

# cluster_start [GPUS]: start the cluster, GPUS fake GPUs on its one node (default 2)
cluster_start() {
    gpus=${1:-2}
    cluster_require
    cluster_dir=$(mktemp -d /tmp/ptrain-slurm.XXXXXX)
    trap cluster_stop EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 141' PIPE
    d=$cluster_dir
    host=$(hostname -s)

    # munge: a private key and socket, so nothing on the machine is touched
    dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 2>/dev/null
    chmod 0400 "$d/munge.key"
    mkdir -p "$d/munge"
    # the daemons run in the foreground as children of this shell (reaped by it, whatever init
    # does), their output in files: nothing may hold the test's stdout open after it ends
    munged --foreground --key-file="$d/munge.key" --socket="$d/munge/socket" \
        --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munge.seed" --force \
        </dev/null >"$d/munged.err" 2>&1 &
    cluster_munged=$!
    cluster_wait_file "$d/munge/socket" munged

    ports=$(cluster_free_ports) || cluster_bail "no two free TCP ports for slurmctld and slurmd"
    ctld_port=${ports% *}
    slurmd_port=${ports#* }
    # a node name and job ids of its own, so that two test clusters on one host (make -j) are
    # told apart in every log and message
    cluster_node=pt$ctld_port
    first_job=$(((ctld_port % 1000 + 1) * 1000))
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
    mkdir -p "$d/state" "$d/spool" "$d/tmp"
    gres_conf=""
    node_gres=""
    if [ "$gpus" -gt 0 ]; then
        : >"$d/gres.conf"
        set -- /dev/null /dev/zero /dev/full /dev/urandom
        [ "$gpus" -le $# ] || cluster_bail "at most $# fake GPUs"
        i=0
        while [ "$i" -lt "$gpus" ]; do
            printf 'NodeName=%s Name=gpu File=%s\n' "$cluster_node" "$1" >>"$d/gres.conf"
            shift
            i=$((i + 1))
        done
        gres_conf="GresTypes=gpu"
        node_gres="Gres=gpu:$gpus"
    else
        : >"$d/gres.conf"
    fi
    cat >"$d/slurm.conf" <<CONF
ClusterName=ptraintest
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$d/munge/socket,cred_expire=5
CredType=cred/munge
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
TmpFS=$d/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
KillWait=15
MpiDefault=none
SchedulerParameters=sched_interval=2
FirstJobId=$first_job
$gres_conf
NodeName=$cluster_node NodeHostname=$host NodeAddr=$host CPUs=$cpus RealMemory=$mem $node_gres State=UNKNOWN
PartitionName=debug Nodes=$cluster_node Default=YES MaxTime=30 State=UP OverSubscribe=FORCE
CONF
    # PMIx keeps its rendezvous files under the spool dir and TmpFS, the jobs' TMPDIR is private too
    printf 'PMIxCliTmpDirBase=%s/tmp\n' "$d" >"$d/mpi.conf"
    SLURM_CONF="$d/slurm.conf"
    TMPDIR="$d/tmp"
    export SLURM_CONF TMPDIR
    slurmctld -D -f "$SLURM_CONF" </dev/null >"$d/slurmctld.err" 2>&1 &
    cluster_pids="$!"
    cluster_wait_file "$d/slurmctld.pid" slurmctld
    slurmd -D -N "$cluster_node" -f "$SLURM_CONF" </dev/null >"$d/slurmd.err" 2>&1 &
    cluster_pids="$! $cluster_pids"
    cluster_wait_file "$d/slurmd.pid" slurmd
    i=0
    until sinfo -h -o %T 2>/dev/null | grep -q idle; do
        i=$((i + 1))
        [ "$i" -gt 60 ] && cluster_bail "the test cluster did not come up in 60 s"
        sleep 1
    done
}

cluster_wait_file() { # cluster_wait_file FILE DAEMON: up to 10 s for a daemon's pid file or socket
    i=0
    until [ -e "$1" ]; do
        i=$((i + 1))
        [ "$i" -gt 100 ] && cluster_bail "$2 would not start (no $1 after 10 s)"
        sleep 0.1
    done
}

cluster_own_pids() ( # the pids of processes carrying this cluster's SLURM_CONF (job steps, slurmstepd)
    unset SLURM_CONF # not in the environment of tr and grep here
    for env in /proc/[0-9]*/environ; do
        pid=${env#/proc/}
        pid=${pid%/environ}
        [ "$pid" = "$$" ] && continue
        tr '\0' '\n' 2>/dev/null <"$env" | grep -qxF "SLURM_CONF=$cluster_dir/slurm.conf" && echo "$pid"
    done
)

cluster_stop() {
    [ -n "$cluster_dir" ] || return 0
    trap - EXIT HUP INT TERM PIPE
    if [ -s "$cluster_dir/slurmctld.pid" ] && kill -0 "$(cat "$cluster_dir/slurmctld.pid")" 2>/dev/null; then
        jobs=$(squeue -h -o %i 2>/dev/null)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null
            i=0
            while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ "$i" -lt 40 ]; do
                sleep 0.5
                i=$((i + 1))
            done
        fi
    fi
    # the daemons, slurmd first; then whatever is left of the jobs; munged last
    for pid in $cluster_pids; do
        kill "$pid" 2>/dev/null
    done
    for pid in $cluster_pids; do
        i=0
        while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do
            sleep 0.2
            i=$((i + 1))
        done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    left=$(cluster_own_pids)
    # shellcheck disable=SC2086
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    if [ -n "$cluster_munged" ]; then
        kill "$cluster_munged" 2>/dev/null
        wait "$cluster_munged" 2>/dev/null
    fi
    rm -rf "$cluster_dir"
    cluster_dir=""
    cluster_pids=""
    cluster_munged=""
}

# cluster_job_field JOBID FIELD: one field of `scontrol show job` (JobState, Restarts, ExitCode...)
cluster_job_field() {
    scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
