# shellcheck shell=sh
# cluster.sh — a throw-away Slurm cluster for the Slurm tests, one node or several, sourced after
# tap.sh:
#
#   . "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
#   cluster_start 2          # munged + slurmctld + slurmd with 2 fake GPUs; SLURM_CONF exported
#   cluster_start 2 2        # the same with two nodes, each with 2 fake GPUs (see below)
#   ... srun, sbatch, scontrol, squeue against it; $cluster_dir is a private scratch directory,
#   $cluster_node the (first) node's name, $cluster_nodes every node's, $cluster_nodelist the
#   nodes as SLURM_JOB_NODELIST writes them
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
# Several nodes on one machine: each node is a network, UTS and mount namespace of its own (a
# `sleep` started by unshare holds them), with its own hostname (ptPORTn1, ptPORTn2, ...), its own
# address 10.A.B.2, .3, ... on a private bridge that the test makes, its own /tmp of the jobs
# ($cluster_dir/tmp, bind-mounted from $cluster_dir/nodes/NAME/tmp) and its own /dev/shm (a
# tmpfs): what the nodes of a real cluster have apart, so that nothing is shared between them by
# accident. The bridge sits in a network namespace of its own (the switch), out of reach of this
# machine's firewall; this machine joins it by one link, ptPORTh, as 10.A.B.1, where the nodes
# reach slurmctld (10.A.B.0/24 comes from the port, the next /24 when a route of the machine
# overlaps it). Each node's slurmd runs inside its namespaces (slurmd -N NAME, NodeAddr in
# slurm.conf); the files, the munge socket included, are seen by every node as on a shared
# filesystem. MPI's locality (MPI_COMM_TYPE_SHARED) follows the nodes: ranks launched on one node
# share memory, ranks on two do not. $cluster_dir/rsh HOST CMD... runs a command on a node, an
# ssh stand-in for mpirun's launch agent (--mca plm_rsh_agent); $cluster_subnet is the bridge's
# subnet (for btl_tcp_if_include and oob_tcp_if_include).
# Making the namespaces and links needs root and iproute2 (installed when missing, as Slurm is); a
# machine where they cannot be made (an unprivileged container) skips, saying why.
#
# Missing Slurm or munge packages are installed with apt-get when this runs as root (or with
# passwordless sudo); the test skips, saying why, only when that is not possible. A cluster that
# is installed but does not come up is a failure ("Bail out!"), not a skip.
# cluster_stop cancels every job, waits for them, stops the daemons, kills any process still
# carrying this cluster's SLURM_CONF (a job step, slurmstepd) or living in a node's namespaces,
# ends the namespaces (the bridge and the links go with them) and removes the temp dir.

cluster_dir=""
cluster_node=""
cluster_nodes=""
cluster_nodelist=""
cluster_pids=""
cluster_munged=""
cluster_subnet=""
cluster_link=""
cluster_holders=""

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

# cluster_require_net: ip (iproute2, installed when missing), unshare and nsenter, and a machine
# that lets root make network namespaces, bridges and veth pairs (tried in a namespace of its own,
# which leaves nothing behind)
cluster_require_net() {
    if ! command -v ip >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        echo "# installing iproute2 (no ip command)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null 2>&1 &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 >/dev/null 2>&1; }
    fi
    for tool in ip unshare nsenter mount; do
        command -v "$tool" >/dev/null 2>&1 ||
            cluster_skip "several nodes need $tool (Debian: apt-get install iproute2 util-linux mount)"
    done
    why=$(unshare --net --uts --mount sh -c 'ip link add ptprobe0 type bridge &&
        ip link add ptprobe1 type veth peer name ptprobe2 && mount -t tmpfs tmpfs /dev/shm && hostname ptprobe' 2>&1) ||
        cluster_skip "this machine does not let root make the nodes' namespaces, bridge and links (unshare --net --uts --mount; ip link add; mount -t tmpfs): $(echo "$why" | head -n 1)"
}

cluster_port_free() { # cluster_port_free PORT: nothing listens on TCP PORT
    hex=$(printf '%04X' "$1")
    ! awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

cluster_free_ports() { # prints two free TCP ports next to each other (no test link ptPORTh either)
    base=$((20000 + ($$ * 37 + $(od -An -N2 -tu2 /dev/urandom)) % 40000))
    i=0
    while [ "$i" -lt 200 ]; do
        p=$((base + 2 * i))
        [ "$p" -gt 65000 ] && p=$((p - 44000))
        if cluster_port_free "$p" && cluster_port_free $((p + 1)) && ! ip link show "pt${p}h" >/dev/null 2>&1; then
            echo "$p $((p + 1))"
            return 0
        fi
        i=$((i + 1))
    done
    return 1
}

# cluster_start [GPUS [NODES]]: start the cluster, GPUS fake GPUs on each of its NODES nodes
# (default 2 GPUs, 1 node; several nodes each get namespaces of their own, see above)
cluster_start() {
    gpus=${1:-2}
    nodes=${2:-1}
    cluster_require
    [ "$nodes" -gt 1 ] && cluster_require_net
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
    first_job=$(((ctld_port % 1000 + 1) * 1000))
    cpus=$(nproc)
    mem=$(awk -v n="$nodes" '/MemTotal/ {print int($2 / 1024 / 2 / n)}' /proc/meminfo)
    mkdir -p "$d/state" "$d/spool" "$d/tmp"
    ctld_host=$host
    if [ "$nodes" -gt 1 ]; then
        cluster_net_start "$nodes" "$ctld_port"
        ctld_host="$host(${cluster_subnet%.0/24}.1)"
        cluster_nodelist="pt${ctld_port}n[1-$nodes]"
        # per node: the spool dir, pid and log file (%n: the node's name)
        slurmd_files="SlurmdSpoolDir=$d/spool/%n
SlurmdPidFile=$d/slurmd-%n.pid
SlurmdLogFile=$d/slurmd-%n.log"
    else
        cluster_nodes=pt$ctld_port
        cluster_nodelist=$cluster_nodes
        slurmd_files="SlurmdSpoolDir=$d/spool
SlurmdPidFile=$d/slurmd.pid
SlurmdLogFile=$d/slurmd.log"
    fi
    cluster_node=${cluster_nodes%% *}
    gres_conf=""
    node_gres=""
    : >"$d/gres.conf"
    if [ "$gpus" -gt 0 ]; then
        for name in $cluster_nodes; do
            set -- /dev/null /dev/zero /dev/full /dev/urandom
            [ "$gpus" -le $# ] || cluster_bail "at most $# fake GPUs"
            i=0
            while [ "$i" -lt "$gpus" ]; do
                printf 'NodeName=%s Name=gpu File=%s\n' "$name" "$1" >>"$d/gres.conf"
                shift
                i=$((i + 1))
            done
        done
        gres_conf="GresTypes=gpu"
        node_gres="Gres=gpu:$gpus"
    fi
    node_lines=""
    i=1
    for name in $cluster_nodes; do
        if [ "$nodes" -gt 1 ]; then
            addr=${cluster_subnet%.0/24}.$((i + 1))
            mkdir -p "$d/spool/$name"
        else
            name=$cluster_node
            addr=$host
        fi
        node_lines="${node_lines}NodeName=$name NodeHostname=$([ "$nodes" -gt 1 ] && echo "$name" || echo "$host") NodeAddr=$addr CPUs=$cpus RealMemory=$mem $node_gres State=UNKNOWN
"
        i=$((i + 1))
    done
    cat >"$d/slurm.conf" <<CONF
ClusterName=ptraintest
SlurmctldHost=$ctld_host
AuthType=auth/munge
AuthInfo=socket=$d/munge/socket,cred_expire=5
CredType=cred/munge
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$d/state
$slurmd_files
SlurmctldPidFile=$d/slurmctld.pid
SlurmctldLogFile=$d/slurmctld.log
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
${node_lines}PartitionName=debug Nodes=$cluster_nodelist Default=YES MaxTime=30 State=UP OverSubscribe=FORCE
CONF
    # PMIx keeps its rendezvous files under the spool dir and TmpFS, the jobs' TMPDIR is private too
    # (and each node's own, with several nodes)
    printf 'PMIxCliTmpDirBase=%s/tmp\n' "$d" >"$d/mpi.conf"
    SLURM_CONF="$d/slurm.conf"
    TMPDIR="$d/tmp"
    export SLURM_CONF TMPDIR
    slurmctld -D -f "$SLURM_CONF" </dev/null >"$d/slurmctld.err" 2>&1 &
    cluster_pids="$!"
    cluster_wait_file "$d/slurmctld.pid" slurmctld
    if [ "$nodes" -gt 1 ]; then
        for name in $cluster_nodes; do
            # nsenter execs slurmd in the node's namespaces: $! is slurmd
            nsenter -t "$(cluster_node_pid "$name")" --net --uts --mount -- \
                slurmd -D -N "$name" -f "$SLURM_CONF" </dev/null >"$d/slurmd-$name.err" 2>&1 &
            cluster_pids="$! $cluster_pids"
        done
        for name in $cluster_nodes; do
            cluster_wait_file "$d/slurmd-$name.pid" "slurmd on $name"
        done
    else
        slurmd -D -N "$cluster_node" -f "$SLURM_CONF" </dev/null >"$d/slurmd.err" 2>&1 &
        cluster_pids="$! $cluster_pids"
        cluster_wait_file "$d/slurmd.pid" slurmd
    fi
    i=0
    until [ "$(sinfo -h -N -o %T 2>/dev/null | grep -c '^idle')" -eq "$nodes" ]; do
        i=$((i + 1))
        [ "$i" -gt 60 ] && cluster_bail "the test cluster did not come up in 60 s ($(sinfo -h -N -o '%N %T' 2>/dev/null | tr '\n' ' '))"
        sleep 1
    done
}

# cluster_subnet_free A B: no IPv4 route or address of this machine overlaps 10.A.B.0/24
cluster_subnet_free() {
    ip -4 route show table all 2>/dev/null | awk -v a="$1" -v b="$2" '
        function num(s, p) { split(s, p, "."); return ((p[1] * 256 + p[2]) * 256 + p[3]) * 256 + p[4] }
        {
            pre = $1
            if (pre ~ /^(unicast|local|broadcast|anycast|multicast|unreachable|blackhole|prohibit|throw)$/) pre = $2
            if (pre == "default") next
            len = 32
            if (index(pre, "/")) { len = substr(pre, index(pre, "/") + 1) + 0; pre = substr(pre, 1, index(pre, "/") - 1) }
            if (len > 24) len = 24
            unit = 2 ^ (32 - len)
            if (int(num(pre) / unit) == int(num("10." a "." b ".0") / unit)) taken = 1
        }
        END { exit taken }'
}

# cluster_net_start NODES PORT: the nodes' namespaces, hostnames and addresses, and the switch
# that joins them to this machine (names and subnet from PORT, the controller's, so two test
# clusters do not meet); sets cluster_nodes, cluster_subnet, cluster_link and cluster_holders,
# writes $cluster_dir/nodes.list ("NAME PID ADDRESS" a line) and $cluster_dir/rsh
cluster_net_start() {
    n=$1
    port=$2
    a=$((port / 256 % 256))
    b=$((port % 256))
    i=0
    until cluster_subnet_free "$a" "$b"; do
        i=$((i + 1))
        [ "$i" -gt 50 ] && cluster_bail "no free 10.x.y.0/24 for the nodes' bridge"
        b=$(((b + 1) % 256))
    done
    cluster_subnet=10.$a.$b.0/24
    # the switch: a bridge in a network namespace of its own, so that this machine's firewall
    # (a FORWARD policy of DROP with br_netfilter, as Docker leaves it) never sees the nodes'
    # traffic; this machine joins it by one link, ptPORTh, with 10.A.B.1
    cluster_holder switch --net
    sw=$held
    cluster_link=pt${port}h
    { ip link add "$cluster_link" type veth peer name uplink netns "$sw" &&
        ip addr add "10.$a.$b.1/24" dev "$cluster_link" && ip link set "$cluster_link" up &&
        nsenter -t "$sw" --net sh -c 'ip link add br0 type bridge && ip link set br0 up &&
            ip link set uplink master br0 up'; } ||
        cluster_bail "the bridge and this machine's link to it ($cluster_link, 10.$a.$b.1/24) would not come up"
    : >"$cluster_dir/nodes.list"
    cluster_nodes=""
    i=1
    while [ "$i" -le "$n" ]; do
        name=pt${port}n$i
        addr=10.$a.$b.$((i + 1))
        cluster_holder "node $name" --net --uts --mount
        pid=$held
        mkdir -p "$cluster_dir/nodes/$name/tmp"
        nsenter -t "$sw" --net sh -c "ip link add port$i type veth peer name eth0 netns $pid &&
            ip link set port$i master br0 up" || cluster_bail "the link from the bridge to node $name would not come up"
        nsenter -t "$pid" --net --uts --mount sh -c "hostname $name && ip link set lo up &&
            ip addr add $addr/24 dev eth0 && ip link set eth0 up &&
            mount --bind '$cluster_dir/nodes/$name/tmp' '$cluster_dir/tmp' &&
            mount -t tmpfs -o mode=1777 tmpfs /dev/shm" || cluster_bail "node $name would not take its hostname, address and mounts"
        echo "$name $pid $addr" >>"$cluster_dir/nodes.list"
        cluster_nodes="$cluster_nodes${cluster_nodes:+ }$name"
        i=$((i + 1))
    done
    cat >"$cluster_dir/rsh" <<SH
#!/bin/sh
# rsh HOST COMMAND...: an ssh stand-in for mpirun (--mca plm_rsh_agent) on the test cluster of
# $cluster_dir: runs COMMAND on the node HOST, in its namespaces, with a shell as ssh does
pid=\$(awk -v h="\$1" '\$1 == h { print \$2 }' "$cluster_dir/nodes.list")
[ -n "\$pid" ] || { echo "rsh: \$1 is not a node of the test cluster in $cluster_dir" >&2; exit 255; }
shift
exec nsenter -t "\$pid" --net --uts --mount --wd=/ -- /bin/sh -c "\$*"
SH
    chmod +x "$cluster_dir/rsh"
}

# cluster_holder WHAT UNSHARE-OPTIONS...: a new process that holds new namespaces, its pid in
# $held (a sleep that unshare execs, so the pid is the process in them; a child of this shell, in
# cluster_holders, which cluster_net_stop ends)
cluster_holder() {
    what=$1
    shift
    unshare "$@" sleep 100000 </dev/null >/dev/null 2>&1 &
    held=$!
    cluster_holders="$cluster_holders $held"
    j=0
    until [ "$(cat "/proc/$held/comm" 2>/dev/null)" = sleep ]; do
        j=$((j + 1))
        [ "$j" -gt 100 ] && cluster_bail "the namespaces of $what were not made in 10 s"
        sleep 0.1
    done
}

# cluster_node_pid NAME: the process holding the node's namespaces (nothing: not a node)
cluster_node_pid() {
    awk -v h="$1" '$1 == h { print $2 }' "$cluster_dir/nodes.list" 2>/dev/null
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
    cluster_net_stop
    if [ -n "$cluster_munged" ]; then
        kill "$cluster_munged" 2>/dev/null
        wait "$cluster_munged" 2>/dev/null
    fi
    rm -rf "$cluster_dir"
    cluster_dir=""
    cluster_pids=""
    cluster_munged=""
}

cluster_ns_pids() ( # the pids of the processes in the network namespace of process $1, but $1
    ns=$(readlink "/proc/$1/ns/net" 2>/dev/null) || exit 0
    [ "$ns" = "$(readlink /proc/$$/ns/net)" ] && exit 0 # (never the machine's own)
    for link in /proc/[0-9]*/ns/net; do
        pid=${link#/proc/}
        pid=${pid%/ns/net}
        [ "$pid" = "$1" ] && continue
        [ "$(readlink "$link" 2>/dev/null)" = "$ns" ] && echo "$pid"
    done
)

# cluster_net_stop: whatever still runs on the nodes, then the holders of the nodes' and the
# switch's namespaces: each namespace ends with its last process, and its links with it
cluster_net_stop() {
    for pid in $cluster_holders; do
        left=$(cluster_ns_pids "$pid")
        # shellcheck disable=SC2086
        [ -n "$left" ] && kill -9 $left 2>/dev/null
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    # gone with the switch's namespace already; in case a process kept it
    [ -n "$cluster_link" ] && ip link del "$cluster_link" 2>/dev/null
    cluster_holders=""
    cluster_link=""
}

# cluster_job_field JOBID FIELD: one field of `scontrol show job` (JobState, Restarts, ExitCode...)
cluster_job_field() {
    scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
