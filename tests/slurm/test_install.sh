#!/bin/sh
# test_install.sh — `make install` as cluster software is installed, into a temporary prefix:
# the binary, the man page ptrain(1), share/ptrain/slurm/train.sh whose default ptrain is the
# installed one, the example configs, the sample data, the docs and the (empty) models directory;
# the installed train.sh then trains under a throw-away Slurm cluster (tests/slurm/cluster.sh)
# with no PTRAIN set, and `make uninstall` leaves no file behind. The source tree's train.sh keeps
# ptrain on PATH as its default. Skips, saying why, only when Slurm is missing and cannot be
# installed (the install checks run first, whatever happens to Slurm).
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
build=$(cd "$(dirname "$P")" && pwd)
prefix=$(mktemp -d /tmp/ptrain-prefix.XXXXXX)
trap 'rm -rf "$prefix" "$prefix.install.log" "$prefix.man"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 141' PIPE
# a make of its own, not the jobserver of the `make check` running this test
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$build" "$@"; }

mk install prefix="$prefix" >"$prefix.install.log" 2>&1
rc=$?
expect_eq "make install prefix=TMP: exit 0" 0 "$rc"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$prefix.install.log"
rm -f "$prefix.install.log"
sh_inst=$prefix/share/ptrain/slurm/train.sh
ok "bin/ptrain runs" "$prefix/bin/ptrain" --version
ok "share/ptrain/slurm/train.sh is installed, executable" test -x "$sh_inst"
expect_eq "its default ptrain is the installed one" "installed_ptrain=$prefix/bin/ptrain" \
    "$(grep '^installed_ptrain=' "$sh_inst" 2>/dev/null)"
ok "it keeps the PTRAIN override" grep -qxF 'ptrain=${PTRAIN:-${installed_ptrain:-ptrain}}' "$sh_inst"
expect_eq "the source tree's train.sh defaults to ptrain on PATH" "installed_ptrain=" \
    "$(grep '^installed_ptrain=' "$PTRAIN_SRCDIR/slurm/train.sh")"
missing=""
for f in share/man/man1/ptrain.1 share/ptrain/examples/smollm2-demo.yaml \
    share/ptrain/examples/multi-gpu-resume.yaml share/ptrain/examples/resume-after-preemption.yaml \
    share/ptrain/examples/push-checkpoints.yaml share/ptrain/data/pirate-instructions.jsonl \
    share/doc/ptrain/README.md share/doc/ptrain/configuration.md share/doc/ptrain/training.md \
    share/doc/ptrain/models.md share/doc/ptrain/adapter-format.md share/doc/ptrain/checkpoint-format.md \
    share/doc/ptrain/watching.md share/ptrain/reward_worker.py share/ptrain/examples/smollm2-grpo.yaml; do
    [ -s "$prefix/$f" ] || missing="$missing $f"
done
expect_eq "the man page, examples, sample data, docs and the GRPO reward worker are installed" "" "$missing"
ok "share/ptrain/models exists" test -d "$prefix/share/ptrain/models"
if command -v man >/dev/null 2>&1; then
    MANPATH=$prefix/share/man MANWIDTH=200 man ptrain >"$prefix.man" 2>/dev/null
    ok "man ptrain (from the prefix) covers train, check, generate, inspect" sh -c \
        "grep -q 'ptrain \[train\] CONFIG' '$prefix.man' && grep -q 'ptrain check CONFIG' '$prefix.man' &&
         grep -Eq 'ptrain +generate ' '$prefix.man' && grep -Eq 'ptrain +inspect +MODEL' '$prefix.man'"
    rm -f "$prefix.man"
else
    ok "the man page covers train, check, generate, inspect" grep -q '^\.B ptrain inspect' "$prefix/share/man/man1/ptrain.1"
fi

# the installed train.sh under Slurm, no PTRAIN: it must find the installed binary itself
. "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
cluster_start 2
trap 'cluster_stop; rm -rf "$prefix"' EXIT
. "$PTRAIN_SRCDIR/tests/slurm/jobs.sh"
write_config installed
job=$(unset PTRAIN; TRAIN_SH=$sh_inst submit installed)
wait_end "$job" 120
expect_eq "the installed train.sh trains under Slurm, no PTRAIN set" "COMPLETED 0:0" \
    "$(job_state "$job") $(job_field "$job" ExitCode)"
ok "it ran the installed ptrain" grep -q "^train.sh   .* job $job, restart 0, .*config installed.yaml, $prefix/bin/ptrain\$" \
    "$cluster_dir/installed.log"
ok "the adapter is written" test -s "$cluster_dir/installed/lora/adapter.h5"

mk uninstall prefix="$prefix" >/dev/null 2>&1
expect_eq "make uninstall leaves no file behind" "" "$(find "$prefix" -type f | sed "s|^$prefix/||" | tr '\n' ' ')"
show_logs installed
done_testing
