#!/bin/sh
# run-fuzz.sh — build every libFuzzer target tests/fuzz/fuzz_NAME.c and fuzz it for a while; one
# TAP line per target: ok when it built and the fuzzer found no crash, leak, timeout or sanitizer
# report (a target's invariant failing is a crash) in ${FUZZ_SECONDS:-10} seconds, with the runs
# and the coverage reached.
#
# Two uses: `make check` runs it for 10 seconds a target (CI: each committed input still passes,
# and a short search); `make fuzz` runs it for 5 minutes a target (FUZZ_SECONDS=300), which is
# what a change to a reader or to the config needs before it is merged: a short run does not reach
# inputs like sixty bad list items or a value of 200 KB. FUZZ_TARGETS="config gguf" runs only
# those. Each input that once failed is kept in the target's corpus (tests/fuzz/corpus/NAME/,
# named regress-WHAT) once the bug is fixed, so every later run, the short ones too, replays it.
#
# Convention for a target: tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput and starts with
#   /* fuzz-sources: src/a.c src/b.c */
# naming the project sources (relative to the source root) it links; its seed corpus is the
# directory tests/fuzz/corpus/NAME/ (small committed files). The fuzzer runs on a copy of the
# corpus, so the tree stays unchanged. A crash's reproducer and the fuzzer binary are kept in
# fuzz-artifacts/ under the current directory; reproduce with `fuzz-artifacts/fuzz_NAME FILE`.
#
# Environment: PTRAIN_SRCDIR (source root; default: this script's ../..), FUZZ_SECONDS (default
# 10), FUZZ_TARGETS (default: every target), FUZZ_CC (default clang, else clang-14). Skips (with
# the reason) when clang or its libFuzzer runtime (Debian: libclang-rt-14-dev) is missing.
srcdir=${PTRAIN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# tap.sh: skip_test, done_testing, tap_n, tap_fail
# shellcheck source=/dev/null
. "$srcdir/tests/tap.sh"
# the targets are built here with their own sanitizers, whatever the build: one run is enough, the
# plain build's (make check in a sanitizer build would only repeat it)
plain_build_only "the fuzz targets are built by this script with their own sanitizers, so the same run in the plain build covers them"
seconds=${FUZZ_SECONDS:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

comment() { sed -e 's/^/# /'; }

cc=${FUZZ_CC:-}
if [ -z "$cc" ]; then
    for c in clang clang-14; do
        if command -v "$c" >/dev/null 2>&1; then
            cc=$c
            break
        fi
    done
fi

skip_reason=""
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
    skip_reason="${cc:-clang} not found (install clang and libclang-rt-14-dev)"
else
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        >"$tmp/probe.c"
    if ! "$cc" -fsanitize=fuzzer,address,undefined -o "$tmp/probe" "$tmp/probe.c" >"$tmp/probe.log" 2>&1; then
        skip_reason="$cc cannot link libFuzzer programs (the libFuzzer runtime is missing: install libclang-rt-14-dev)"
    fi
fi

# compiler and linker flags of the libraries the project sources may include
pkg_cflags=""
pkg_libs=""
if command -v pkg-config >/dev/null 2>&1; then
    for p in yaml-0.1 jansson libpcre2-8 libutf8proc openblas hdf5-serial zlib snappy libzstd liblz4 libbrotlidec; do
        if pkg-config --exists "$p" 2>/dev/null; then
            pkg_cflags="$pkg_cflags $(pkg-config --cflags "$p")"
            pkg_libs="$pkg_libs $(pkg-config --libs "$p")"
        fi
    done
fi

found=0
for target in "$srcdir"/tests/fuzz/fuzz_*.c; do
    [ -e "$target" ] || continue
    name=$(basename "$target" .c)
    name=${name#fuzz_}
    if [ -n "${FUZZ_TARGETS:-}" ] && ! contains " $FUZZ_TARGETS " " $name "; then
        continue
    fi
    found=1
    if [ -n "$skip_reason" ]; then
        skip_test "fuzz $name" "$skip_reason"
        continue
    fi
    sources=$(head -n 5 "$target" | sed -n 's|^/\* *fuzz-sources: *\(.*\) *\*/ *$|\1|p' | head -n 1)
    src_paths=""
    missing=""
    for s in $sources; do
        if [ -f "$srcdir/$s" ]; then
            src_paths="$src_paths $srcdir/$s"
        else
            missing="$missing $s"
        fi
    done
    bin="$tmp/fuzz_$name"
    if [ -n "$missing" ]; then
        tap_n=$((tap_n + 1))
        tap_fail=$((tap_fail + 1))
        echo "not ok $tap_n - fuzz $name: builds"
        echo "# fuzz-sources names files that do not exist:$missing"
        continue
    fi
    # shellcheck disable=SC2086 # the flag and source lists are meant to split
    if ! "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -std=c11 -D_GNU_SOURCE -I"$srcdir/include" -I"$srcdir/src" $pkg_cflags \
        -o "$bin" "$target" $src_paths $pkg_libs -lm >"$tmp/build-$name.log" 2>&1; then
        tap_n=$((tap_n + 1))
        tap_fail=$((tap_fail + 1))
        echo "not ok $tap_n - fuzz $name: builds"
        tail -n 30 "$tmp/build-$name.log" | comment
        continue
    fi
    corpus="$tmp/corpus-$name"
    mkdir -p "$corpus"
    if [ -d "$srcdir/tests/fuzz/corpus/$name" ]; then
        cp -R "$srcdir/tests/fuzz/corpus/$name/." "$corpus/"
    fi
    chmod -R u+w "$corpus"
    mkdir -p "$tmp/artifacts-$name"
    # the test harness asks for slow, exact malloc stacks (fast_unwind_on_malloc=0), which would
    # cut the fuzzer's speed tenfold: take fast ones here
    LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}fast_unwind_on_malloc=1" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=1" \
        "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$tmp/artifacts-$name/" "$corpus" >"$tmp/run-$name.log" 2>&1
    rc=$?
    stats=$(grep -E '^stat::number_of_executed_units' "$tmp/run-$name.log" | sed 's/.*: *//')
    cov=$(grep -E '^#[0-9]+.* cov: [0-9]+' "$tmp/run-$name.log" | tail -n 1 | sed 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/coverage \1 edges, \2 features/')
    tap_n=$((tap_n + 1))
    if [ "$rc" -eq 0 ]; then
        echo "ok $tap_n - fuzz $name: ${stats:-?} runs in ${seconds}s, ${cov:-coverage ?}, no crash"
    else
        tap_fail=$((tap_fail + 1))
        echo "not ok $tap_n - fuzz $name: the fuzzer failed (exit $rc)"
        mkdir -p fuzz-artifacts
        cp "$bin" fuzz-artifacts/
        for a in "$tmp/artifacts-$name"/*; do
            [ -e "$a" ] || continue
            cp "$a" "fuzz-artifacts/$name-$(basename "$a")"
            echo "# reproducer: $(pwd)/fuzz-artifacts/$name-$(basename "$a")"
            echo "# reproduce with: $(pwd)/fuzz-artifacts/fuzz_$name $(pwd)/fuzz-artifacts/$name-$(basename "$a")"
            echo "# once fixed, keep it: cp it to tests/fuzz/corpus/$name/regress-WHAT (a name saying what it found)"
        done
        grep -v -E '^(#[0-9]+[[:space:]]|INFO: |MS: |[[:space:]]*$)' "$tmp/run-$name.log" | tail -n 60 | comment
    fi
done
if [ "$found" -eq 0 ]; then
    skip_test "fuzz" "no tests/fuzz/fuzz_*.c target${FUZZ_TARGETS:+ named in FUZZ_TARGETS ($FUZZ_TARGETS)}"
fi
done_testing
