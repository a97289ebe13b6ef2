#!/bin/bash
# virtiofsd's request path under libFuzzer (tools/virtiofsd/fuzz/).
#   mk/fuzz.sh build            build $BUILD/fuzz/fuzz-request
#   mk/fuzz.sh replay           run the seeds and the regressions once
#   mk/fuzz.sh run [SECONDS]    replay, then fuzz for SECONDS (default
#                               $FUZZ_SECONDS or 300)
#   mk/fuzz.sh coverage         line coverage of the daemon's files by the
#                               corpus (committed seeds and what runs found)
#   mk/fuzz.sh seccomp          replay the seeds and the regressions under
#                               the daemon's seccomp filter (replay-seccomp.c)
#   mk/fuzz.sh run-vhost [SECONDS]  the same for the vhost-user transport
#                               (fuzz-vhost.c, seeds in vhost-corpus/)
#   mk/fuzz.sh run-migrate [SECONDS]  the same for the live-migration state
#                               stream a destination loads (fuzz-migrate.c,
#                               seeds in migrate-corpus/)
# build and replay cover the three fuzzers.
# Built outside meson (clang, not the QEMU build's compiler) from the
# daemon's sources minus main.c, vhost*.c, sandbox.c and seccomp-filter.c,
# with the include paths its meson.build uses.  Fails, naming the input, on any
# crash; new crashes are kept in $BUILD/fuzz/crashes/.
# The seeds: corpus/ (gen-corpus.py) and captured/ (capture-corpus.sh,
# requests of a real guest).
set -euo pipefail
. "$(dirname "$0")/common.sh"

VFSD=$TOP/tools/virtiofsd
FUZZ_DIR=$VFSD/fuzz
# What the transport's fuzzer shares with its unit test (vu-frontend.c)
TEST_HELPERS=$TOP/tests/unit/virtiofsd
OUT=$BUILD/fuzz
BIN=$OUT/fuzz-request
SRC=${QEMU_SRC:-$BUILD/src}
CC=${FUZZ_CC:-clang}

# compile OUTPUT EXTRA-FLAGS...: the harness and the daemon's core files.
# $HARNESS (default fuzz-request.c) is the harness; with $WITH_SECCOMP=1
# seccomp-filter.c is linked too, with $WITH_VHOST=1 vhost*.c,
# libvhost-user and the tests' vhost-user front-end (vu-frontend.c).
# libseccomp always: the broker (broker.c) filters itself.
compile() {
    local out=$1 srcs=() f libs=() harness=${HARNESS:-fuzz-request.c}
    shift
    for f in "$VFSD"/*.c; do
        case ${f##*/} in
        seccomp-filter.c) [ "${WITH_SECCOMP:-0}" = 1 ] && srcs+=("$f") ;;
        vhost.c|vhost-*.c) [ "${WITH_VHOST:-0}" = 1 ] && srcs+=("$f") ;;
        main.c|sandbox.c) ;;
        *) srcs+=("$f") ;;
        esac
    done
    srcs+=("$FUZZ_DIR/$harness")
    libs=(-lseccomp)
    [ "${WITH_VHOST:-0}" = 1 ] &&
        srcs+=("$SRC/subprojects/libvhost-user/libvhost-user.c"
               "$SRC/subprojects/libvhost-user/libvhost-user-shmem.c"
               "$TEST_HELPERS/vu-frontend.c")
    # shellcheck disable=SC2046
    "$CC" -std=gnu11 -g -O1 -fno-omit-frame-pointer "$@" \
        -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -fwrapv -fno-strict-aliasing \
        -Wall -Wno-unused-parameter \
        -I"$VFSD" -I"$SRC/subprojects/libvhost-user" -I"$TEST_HELPERS" \
        -iquote "$SRC/include" \
        $(pkg-config --cflags glib-2.0 libcap-ng) \
        "${srcs[@]}" -o "$out.tmp" \
        -Wl,--wrap=openat,--wrap=openat64 \
        $(pkg-config --libs glib-2.0 libcap-ng) "${libs[@]}" -lpthread
    mv "$out.tmp" "$out"
}

# A digest of what the binary is built from: the daemon's sources and
# headers, libvhost-user (the transport fuzzer links it), the patched
# QEMU headers it includes (make prepare rewrites them with their
# patches), this script, the compiler and the libraries' flags.  By
# content, not by date: a header put back to an older version is a
# change too.
build_inputs() {
    {
        find "$VFSD" "$SRC/include" "$SRC/subprojects/libvhost-user" \
            "$TEST_HELPERS"/vu-frontend.[ch] \
            -type f -name '*.[ch]' | LC_ALL=C sort |
            xargs sha256sum
        sha256sum "$0"
        "$CC" --version 2>&1
        pkg-config --cflags --libs glib-2.0 libcap-ng
    } | sha256sum | cut -d' ' -f1
}

# build_fuzzer BINARY HARNESS WITH-VHOST: a libFuzzer binary
build_fuzzer() {
    local bin=$1 harness=$2 vhost=$3 inputs
    [ -r "$SRC/include/standard-headers/linux/fuse.h" ] ||
        die "no $SRC/include/standard-headers/linux/fuse.h: run make prepare"
    command -v "$CC" >/dev/null || die "no $CC: run mk/deps.sh fuzz"
    mkdir -p "$OUT"
    # Rebuild unless the binary was built from exactly these inputs
    inputs=$(build_inputs)
    if [ -x "$bin" ] && [ "$(cat "$bin.inputs" 2>/dev/null)" = "$inputs" ]; then
        return
    fi
    say "fuzz: building $bin"
    rm -f "$bin.inputs"
    HARNESS=$harness WITH_VHOST=$vhost compile "$bin" \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
    echo "$inputs" > "$bin.inputs"
}

# The transport's fuzzer (fuzz-vhost.c): queue layouts, not requests
VHOST_BIN=$OUT/fuzz-vhost
VHOST_CORPUS=$FUZZ_DIR/vhost-corpus

# The migration stream's fuzzer (fuzz-migrate.c): a source's state, not
# a guest's requests
MIGRATE_BIN=$OUT/fuzz-migrate
MIGRATE_CORPUS=$FUZZ_DIR/migrate-corpus

build() {
    build_fuzzer "$BIN" fuzz-request.c 0
    build_fuzzer "$VHOST_BIN" fuzz-vhost.c 1
    build_fuzzer "$MIGRATE_BIN" fuzz-migrate.c 0
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
        $(ls "$VFSD"/*.c | grep -v -e /main.c -e /vhost -e /sandbox.c \
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
        "${FUZZ_BIN:-$BIN}" -handle_xfsz=0 "$@" || rc=$?
    rm -rf "$tmp"
    return $rc
}

# Sets inputs to the seeds and the regression inputs
replay_inputs() {
    local f
    inputs=()
    for f in "$FUZZ_DIR"/corpus/* "$FUZZ_DIR"/captured/* \
             "$FUZZ_DIR"/regressions/*; do
        [ -f "$f" ] && inputs+=("$f")
    done
    # No input means nothing was tested: the corpus went missing
    [ ${#inputs[@]} -gt 0 ] ||
        die "fuzz: no seed or regression input to replay in $FUZZ_DIR"
}

# The replay under the seccomp filter: no sanitizer (their runtimes make
# calls of their own, which the daemon never does), built like the fuzzer
# otherwise, and rebuilt on the same inputs.
SECCOMP_BIN=$OUT/replay-seccomp
build_seccomp() {
    local inputs
    [ -r "$SRC/include/standard-headers/linux/fuse.h" ] ||
        die "no $SRC/include/standard-headers/linux/fuse.h: run make prepare"
    command -v "$CC" >/dev/null || die "no $CC: run mk/deps.sh fuzz"
    mkdir -p "$OUT"
    inputs=$(build_inputs)
    if [ -x "$SECCOMP_BIN" ] &&
       [ "$(cat "$SECCOMP_BIN.inputs" 2>/dev/null)" = "$inputs" ]; then
        return
    fi
    say "fuzz: building $SECCOMP_BIN"
    rm -f "$SECCOMP_BIN.inputs"
    HARNESS=replay-seccomp.c WITH_SECCOMP=1 compile "$SECCOMP_BIN" \
        -Wl,--wrap=vfsd_fs_init
    echo "$inputs" > "$SECCOMP_BIN.inputs"
}

replay_seccomp() {
    local tmp rc=0 inputs
    replay_inputs
    mkdir -p "$OUT/tmp"
    tmp=$(mktemp -d "$OUT/tmp/run.XXXXXX")
    TMPDIR=$tmp "$SECCOMP_BIN" "${inputs[@]}" || rc=$?
    rm -rf "$tmp"
    [ $rc = 0 ] || die "fuzz: replay under the seccomp filter failed"
}

replay() {
    local f failed=0 inputs
    replay_inputs
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
    replay_vhost
}

# The transport's seeds.  Two well-formed ones must have reached the
# daemon's queue processing: a harness that stopped laying out a queue the
# daemon can pop would otherwise replay nothing and pass.
replay_vhost() {
    local f failed=0 n=0 log=$OUT/replay-vhost-$$.log
    for f in "$VHOST_CORPUS"/* "$FUZZ_DIR"/vhost-regressions/*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        if ! FUZZ_BIN=$VHOST_BIN FUZZ_VHOST_VERBOSE=1 run_fuzzer "$f" \
                >"$log" 2>&1; then
            cat "$log" >&2
            say "fuzz: CRASH replaying $f (fuzz-vhost)"
            failed=1
        fi
        case ${f##*/} in
        getattr|indirect)
            grep -q "fuzz-vhost: 1 of 1 heads used$" "$log" || {
                cat "$log" >&2
                say "fuzz: $f did not reach the daemon's queue processing"
                failed=1
            } ;;
        esac
    done
    rm -f "$log"
    [ $n -gt 0 ] || die "fuzz: no transport seed to replay in $VHOST_CORPUS"
    [ $failed = 0 ] || return 1
    say "fuzz: $n transport seeds replayed, no crash"
}

# The migration seeds.  Those named good-* are streams a destination must
# take, good-dax* with its DAX mappings and good-handles with the files it
# names by handle alone: a harness that stopped getting one restored (a
# placeholder handle left unresolved, options that refuse the session, a
# front-end that maps nothing) would otherwise replay nothing past the
# first check and pass.  forged-* must be
# refused, or load with what they forged lost: the harness itself
# aborts if anything outside the share was reached.
replay_migrate() {
    local f failed=0 n=0 log=$OUT/replay-migrate-$$.log
    for f in "$MIGRATE_CORPUS"/* "$FUZZ_DIR"/migrate-regressions/*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        if ! FUZZ_BIN=$MIGRATE_BIN FUZZ_MIGRATE_VERBOSE=1 run_fuzzer "$f" \
                >"$log" 2>&1; then
            cat "$log" >&2
            say "fuzz: CRASH replaying $f (fuzz-migrate)"
            failed=1
        fi
        case ${f##*/} in
        good-*)
            grep -q "^fuzz-migrate: loaded$" "$log" || {
                grep "^fuzz-migrate:" "$log" >&2
                say "fuzz: $f was not loaded"
                failed=1
            } ;;
        esac
        case ${f##*/} in
        good-dax*)
            grep -q "^fuzz-migrate: restored .*, [1-9][0-9]* DAX mappings$" \
                "$log" || {
                grep "^fuzz-migrate:" "$log" >&2
                say "fuzz: $f restored no DAX mapping"
                failed=1
            } ;;
        good-handles)
            grep -q "^fuzz-migrate: restored [1-9][0-9]* inodes (0 lost)" \
                "$log" || {
                grep "^fuzz-migrate:" "$log" >&2
                say "fuzz: $f did not restore its files by handle"
                failed=1
            } ;;
        esac
    done
    rm -f "$log"
    [ $n -gt 0 ] || die "fuzz: no migration seed to replay in $MIGRATE_CORPUS"
    [ $failed = 0 ] || return 1
    say "fuzz: $n migration stream seeds replayed, no crash"
}

# fuzz_migrate SECONDS: new state streams
fuzz_migrate() {
    local secs=$1 rc=0 crash dir=$OUT/migrate-corpus
    local log=$OUT/fuzz-migrate-$$.log
    mkdir -p "$dir" "$OUT/crashes"
    cp -f "$MIGRATE_CORPUS"/* "$dir/"
    say "fuzz: fuzzing the migration stream for ${secs}s (corpus $dir)"
    FUZZ_BIN=$MIGRATE_BIN run_fuzzer "$dir" -max_total_time="$secs" \
        -max_len=16384 -timeout=25 -rss_limit_mb=2048 -close_fd_mask=2 \
        -print_final_stats=1 -artifact_prefix="$OUT/crashes/migrate-" \
        >"$log" 2>&1 || rc=$?
    if [ $rc != 0 ]; then
        crash=$(grep -o "Test unit written to [^ ]*" "$log" |
                tail -n 1 | sed 's/Test unit written to //')
        if [ -n "$crash" ]; then
            { FUZZ_BIN=$MIGRATE_BIN FUZZ_MIGRATE_VERBOSE=1 \
                  run_fuzzer "$crash" 2>&1 || true; } | tail -n 60 >&2
        else
            tail -n 60 "$log" >&2
        fi
        say "fuzz: CRASH in the migration stream (exit status $rc), input: ${crash:-see $log}"
        say "fuzz: reproduce with: mk/fuzz.sh build && $MIGRATE_BIN -handle_xfsz=0 ${crash:-INPUT}"
        return 1
    fi
    grep '^stat::' "$log" >&2 || true
    say "fuzz: no crash in ${secs}s of the migration stream (log: $log)"
}

# fuzz_vhost SECONDS: new queue layouts (not part of make check)
fuzz_vhost() {
    local secs=$1 rc=0 dir=$OUT/vhost-corpus
    mkdir -p "$dir" "$OUT/crashes"
    cp -f "$VHOST_CORPUS"/* "$dir/"
    say "fuzz: fuzzing the transport for ${secs}s (corpus $dir)"
    FUZZ_BIN=$VHOST_BIN run_fuzzer "$dir" -max_total_time="$secs" \
        -max_len=16384 -timeout=25 -rss_limit_mb=2048 -close_fd_mask=2 \
        -print_final_stats=1 -artifact_prefix="$OUT/crashes/vhost-" || rc=$?
    [ $rc = 0 ] || die "fuzz: CRASH in the transport (exit status $rc): $OUT/crashes/"
    say "fuzz: no crash in ${secs}s of the transport"
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
    build && replay && replay_migrate ;;
coverage)
    coverage ;;
seccomp)
    build_seccomp && replay_seccomp ;;
run-vhost)
    build
    replay_vhost
    fuzz_vhost "${2:-${FUZZ_SECONDS:-300}}" ;;
run-migrate)
    build
    replay_migrate
    fuzz_migrate "${2:-${FUZZ_SECONDS:-300}}" ;;
run)
    build
    replay
    fuzz "${2:-${FUZZ_SECONDS:-300}}" ;;
*)
    die "usage: mk/fuzz.sh build|replay|run [SECONDS]|run-vhost [SECONDS]|run-migrate [SECONDS]|coverage|seccomp" ;;
esac
