#!/bin/bash
# virtiofsd's request path under libFuzzer (tools/virtiofsd/fuzz/).
#   mk/fuzz.sh build            build $BUILD/fuzz/fuzz-request
#   mk/fuzz.sh replay           run the seeds and the regressions once
#   mk/fuzz.sh run [SECONDS]    replay, then fuzz for SECONDS (default
#                               $FUZZ_SECONDS or 300)
#   mk/fuzz.sh coverage         line coverage of the daemon's files by the
#                               corpus (committed seeds and what runs found)
# Built outside meson (clang, not the QEMU build's compiler) from the
# daemon's sources minus main.c, vhost.c, sandbox.c and seccomp-filter.c,
# with the include paths its meson.build uses.  Fails, naming the input, on any
# crash; new crashes are kept in $BUILD/fuzz/crashes/.
# The seeds: corpus/ (gen-corpus.py) and captured/ (capture-corpus.sh,
# requests of a real guest).
set -euo pipefail
. "$(dirname "$0")/common.sh"

VFSD=$TOP/tools/virtiofsd
FUZZ_DIR=$VFSD/fuzz
OUT=$BUILD/fuzz
BIN=$OUT/fuzz-request
SRC=${QEMU_SRC:-$BUILD/src}
CC=${FUZZ_CC:-clang}

# compile OUTPUT EXTRA-FLAGS...: the harness and the daemon's core files
compile() {
    local out=$1 srcs=() f
    shift
    for f in "$VFSD"/*.c; do
        case ${f##*/} in
        main.c|vhost.c|sandbox.c|seccomp-filter.c) ;;
        *) srcs+=("$f") ;;
        esac
    done
    srcs+=("$FUZZ_DIR/fuzz-request.c")
    # shellcheck disable=SC2046
    "$CC" -std=gnu11 -g -O1 -fno-omit-frame-pointer "$@" \
        -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -fwrapv -fno-strict-aliasing \
        -Wall -Wno-unused-parameter \
        -I"$VFSD" -iquote "$SRC/include" \
        $(pkg-config --cflags glib-2.0 libcap-ng) \
        "${srcs[@]}" -o "$out.tmp" \
        -Wl,--wrap=openat,--wrap=openat64 \
        $(pkg-config --libs glib-2.0 libcap-ng) -lpthread
    mv "$out.tmp" "$out"
}

# A digest of what the binary is built from: the daemon's sources and
# headers, the patched QEMU headers it includes (make prepare rewrites
# them with their patches), this script, the compiler and the libraries'
# flags.  By content, not by date: a header put back to an older version
# is a change too.
build_inputs() {
    {
        find "$VFSD" "$SRC/include" -type f -name '*.[ch]' | LC_ALL=C sort |
            xargs sha256sum
        sha256sum "$0"
        "$CC" --version 2>&1
        pkg-config --cflags --libs glib-2.0 libcap-ng
    } | sha256sum | cut -d' ' -f1
}

build() {
    [ -r "$SRC/include/standard-headers/linux/fuse.h" ] ||
        die "no $SRC/include/standard-headers/linux/fuse.h: run make prepare"
    command -v "$CC" >/dev/null || die "no $CC: run mk/deps.sh fuzz"
    mkdir -p "$OUT"
    # Rebuild unless the binary was built from exactly these inputs
    local inputs
    inputs=$(build_inputs)
    if [ -x "$BIN" ] && [ "$(cat "$BIN.inputs" 2>/dev/null)" = "$inputs" ]; then
        return
    fi
    say "fuzz: building $BIN"
    rm -f "$BIN.inputs"
    compile "$BIN" -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=all
    echo "$inputs" > "$BIN.inputs"
}

coverage() {
    build
    local cov=$OUT/fuzz-request-cov dir=$OUT/cov
    say "fuzz: building $cov"
    compile "$cov" -fsanitize=fuzzer -fprofile-instr-generate \
        -fcoverage-mapping
    rm -rf "$dir" && mkdir -p "$dir" "$OUT/corpus"
    cp -f "$FUZZ_DIR"/corpus/* "$FUZZ_DIR"/captured/* "$OUT/corpus/" \
        2>/dev/null || true
    mkdir -p "$dir/tmp"
    LLVM_PROFILE_FILE=$dir/cov.profraw TMPDIR=$dir/tmp "$cov" \
        -handle_xfsz=0 -runs=0 "$OUT/corpus" >"$dir/run.log" 2>&1 || {
        tail -n 20 "$dir/run.log" >&2; die "coverage run failed"; }
    llvm-profdata merge -sparse "$dir/cov.profraw" -o "$dir/cov.profdata"
    # shellcheck disable=SC2046
    llvm-cov report "$cov" -instr-profile="$dir/cov.profdata" \
        $(ls "$VFSD"/*.c | grep -v -e /main.c -e /vhost.c -e /sandbox.c \
          -e /seccomp-filter.c -e /options.c)
    say "fuzz: per line: llvm-cov show $cov -instr-profile=$dir/cov.profdata FILE"
}

# Each run gets its own directory under $OUT/tmp for the harness's
# scratch tmpfs mount point and sentinel, removed once it exits: removing
# another live run's mount point would detach its tmpfs.  Writes past
# RLIMIT_FSIZE must fail with EFBIG as they would in the daemon, not stop
# the fuzzer on SIGXFSZ.
run_fuzzer() {
    local tmp rc=0
    mkdir -p "$OUT/tmp"
    tmp=$(mktemp -d "$OUT/tmp/run.XXXXXX")
    TMPDIR=$tmp ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$BIN" -handle_xfsz=0 "$@" || rc=$?
    rm -rf "$tmp"
    return $rc
}

replay() {
    local f failed=0 inputs=()
    for f in "$FUZZ_DIR"/corpus/* "$FUZZ_DIR"/captured/* \
             "$FUZZ_DIR"/regressions/*; do
        [ -f "$f" ] && inputs+=("$f")
    done
    # No input means nothing was tested: the corpus went missing
    [ ${#inputs[@]} -gt 0 ] ||
        die "fuzz: no seed or regression input to replay in $FUZZ_DIR"
    # One process per input: a crash names its input
    for f in "${inputs[@]}"; do
        if ! run_fuzzer "$f" >"$OUT/replay-$$.log" 2>&1; then
            cat "$OUT/replay-$$.log" >&2
            say "fuzz: CRASH replaying $f"
            failed=1
        fi
    done
    rm -f "$OUT/replay-$$.log"
    [ $failed = 0 ] || return 1
    say "fuzz: ${#inputs[@]} seeds and regression inputs replayed, no crash"
}

fuzz() {
    local secs=$1 rc=0 crash log=$OUT/fuzz-$$.log
    mkdir -p "$OUT/corpus" "$OUT/crashes"
    # The committed seeds (newer than an earlier run's copy of the same
    # name) plus what earlier runs found
    cp -f "$FUZZ_DIR"/corpus/* "$FUZZ_DIR"/captured/* "$OUT/corpus/" \
        2>/dev/null || true
    say "fuzz: fuzzing for ${secs}s (corpus $OUT/corpus)"
    run_fuzzer "$OUT/corpus" -max_total_time="$secs" -max_len=16384 \
        -timeout=25 -rss_limit_mb=2048 -close_fd_mask=2 -print_final_stats=1 \
        -artifact_prefix="$OUT/crashes/" >"$log" 2>&1 || rc=$?
    if [ $rc != 0 ]; then
        crash=$(grep -o "Test unit written to [^ ]*" "$log" |
                tail -n 1 | sed 's/Test unit written to //')
        if [ -n "$crash" ]; then
            # Again with stderr open: the harness's own verdict shows
            { run_fuzzer "$crash" 2>&1 || true; } | tail -n 60 >&2
        else
            tail -n 60 "$log" >&2
        fi
        say "fuzz: CRASH (exit status $rc), input: ${crash:-see $log}"
        say "fuzz: reproduce with: mk/fuzz.sh build && $BIN -handle_xfsz=0 ${crash:-INPUT}"
        return 1
    fi
    grep '^stat::' "$log" >&2 || true
    say "fuzz: no crash in ${secs}s (log: $log)"
}

case ${1:-run} in
build)
    build ;;
replay)
    build && replay ;;
coverage)
    coverage ;;
run)
    build
    replay
    fuzz "${2:-${FUZZ_SECONDS:-300}}" ;;
*)
    die "usage: mk/fuzz.sh build|replay|run [SECONDS]|coverage" ;;
esac
