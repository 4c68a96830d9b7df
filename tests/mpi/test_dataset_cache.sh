#!/bin/sh
# test_dataset_cache.sh — the dataset cache in output_dir (issue 27), on the tiny Llama:
# - a first run tokenizes, keeps the examples in output_dir/dataset-*.ptdata and says so; a second
#   run on the same data reuses them, says so, and trains the same adapter to the bit;
# - two ranks tokenize a share of the rows each: the cache rank 0 writes is byte for byte the one a
#   single process writes, and a cached two-rank run trains the adapter of an uncached one;
# - a changed dataset file makes the cache stale, a flipped byte or a file cut short makes it
#   damaged: each is said, tokenized again and replaced (the next run reuses the new one), and the
#   adapter is the one fresh data gives; a link planted at the cache's name is replaced, never
#   written through;
# - a rank that cannot see output_dir (its own mount namespace, a tmpfs over the directory, as on a
#   node without the shared filesystem) is sent the cache by rank 0 and trains the same adapter.
# Skips, saying why, without mpirun (the last case also without unshare/mount).
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
need_mpirun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl" "$tmp/data.jsonl"

config() { # config NAME: $tmp/NAME.yaml training into $tmp/NAME on $tmp/data.jsonl
    tiny_config "$tmp/$1.yaml" "$tmp/$1" "max_steps: 3
seed: 5"
    sed -i "s|\"$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl\"|\"$tmp/data.jsonl\"|" "$tmp/$1.yaml"
}
run() { # run NAME [NP]: train NAME's config (one process, or NP ranks); sets rc
    if [ "${2:-1}" -eq 1 ]; then
        timeout 300 "$P" train "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1
    else
        timeout 300 "$mpirun" --oversubscribe -np "$2" "$P" train "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1
    fi
    rc=$?
}
says() { grep -qF "$2" "$tmp/$1.out"; }
cache_of() { ls "$tmp/$1"/dataset-*.ptdata 2>/dev/null; }
bit_equal() { # bit_equal A.h5 B.h5: every tensor the same to the bit (adapter_diff's max_abs is 0)
    "$DIFF" "$1" "$2" 2>&1 | grep -q '^max_rel 0 .* max_abs 0 tensors [1-9]'
}
same_adapter() { bit_equal "$tmp/$1/lora/adapter.h5" "$tmp/$2/lora/adapter.h5"; }
again() { # again NAME: train NAME again from scratch, keeping its dataset cache
    find "$tmp/$1" -mindepth 1 ! -name 'dataset-*.ptdata' -exec rm -rf {} + 2>/dev/null
    run "$@"
}

config one
run one
expect_eq "first run: trains (exit 0)" 0 "$rc"
ok "first run: says it tokenized and where the cache is" says one "dataset    tokenized on 1 rank, kept in $tmp/one/dataset-"
ok "first run: the cache is in output_dir" test -f "$(cache_of one)"
cp -r "$tmp/one/lora" "$tmp/one-cold"
again one
expect_eq "second run: trains (exit 0)" 0 "$rc"
ok "second run: says it reused the cache" says one "dataset    reused $(cache_of one)"
ok "second run: the same adapter to the bit" bit_equal "$tmp/one-cold/adapter.h5" "$tmp/one/lora/adapter.h5"
ok "second run: the start-up record has the dataset phase" grep -q '"dataset_s": ' "$tmp/one/metrics.jsonl"

config two
run two 2
expect_eq "two ranks: train (exit 0)" 0 "$rc"
ok "two ranks: say both tokenized" says two "dataset    tokenized on 2 ranks"
ok "two ranks: the cache is byte for byte one process's" cmp "$(cache_of one)" "$(cache_of two)"
cp -r "$tmp/two/lora" "$tmp/two-cold"
again two 2
ok "two ranks again: reuse the cache" says two "dataset    reused"
ok "two ranks again: the same adapter to the bit" bit_equal "$tmp/two-cold/adapter.h5" "$tmp/two/lora/adapter.h5"

# rank 1 in a mount namespace of its own with an empty tmpfs over output_dir
config hidden
mkdir -p "$tmp/hidden"
if unshare -m sh -c "mount -t tmpfs none '$tmp/hidden'" 2>/dev/null; then
    timeout 300 "$mpirun" --oversubscribe -np 1 "$P" train "$tmp/hidden.yaml" : -np 1 unshare -m sh -c \
        "mount -t tmpfs none '$tmp/hidden' && exec '$P' train '$tmp/hidden.yaml'" >"$tmp/hidden.out" 2>&1
    rc=$?
    expect_eq "a rank that cannot see output_dir: trains (exit 0)" 0 "$rc"
    ok "a rank that cannot see output_dir: rank 0 says it sent the cache" says hidden \
        "dataset    sent the cache to the ranks that cannot see $(cache_of hidden)"
    ok "a rank that cannot see output_dir: the adapter of two ranks that see it" bit_equal "$tmp/two-cold/adapter.h5" "$tmp/hidden/lora/adapter.h5"
else
    for t in trains sent adapter; do skip_test "a rank that cannot see output_dir: $t" \
        "cannot mount a tmpfs in a new mount namespace here (needs root or user namespaces)"; done
fi

config edit
run edit
sed -i '3s/e/E/' "$tmp/data.jsonl"
again edit
ok "a changed dataset file: the cache is said to be stale" says edit "is stale (the dataset files changed since it was made): tokenizing again"
config fresh
run fresh
ok "a changed dataset file: the adapter is the one the new data gives" same_adapter edit fresh
again edit
ok "a changed dataset file: the next run reuses the new cache" says edit "dataset    reused"

damage() { # damage NAME HOW: HOW is flip or cut
    f=$(cache_of "$1")
    size=$(wc -c <"$f")
    if [ "$2" = flip ]; then
        printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
    else
        truncate -s $((size - 16)) "$f"
    fi
}
damage edit flip
again edit
ok "a flipped byte: the cache is said to be damaged" says edit "is damaged (its CRC-32 does not match its bytes): tokenizing again"
ok "a flipped byte: the adapter is the one fresh data gives" same_adapter edit fresh
damage edit cut
again edit
ok "a cache cut short: said to be damaged" says edit "is damaged (it has "
ok "a cache cut short: the adapter is the one fresh data gives" same_adapter edit fresh
again edit
ok "after a damaged cache: the next run reuses the one written again" says edit "dataset    reused"

f=$(cache_of edit)
echo "not yours" >"$tmp/target"
rm -f "$f"
ln -s "$tmp/target" "$f"
again edit
ok "a link at the cache's name: not followed (its target is untouched)" grep -qx "not yours" "$tmp/target"
ok "a link at the cache's name: replaced by the cache" test -f "$f" -a ! -L "$f"
expect_eq "a link at the cache's name: trains (exit 0)" 0 "$rc"

done_testing
