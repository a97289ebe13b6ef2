#!/bin/bash
# Runs inside the fstests root (chroot, harness/fstests/guest.sh): the
# tests of /run-share/tests.list through fstests' ./check, in chunks,
# with its xunit report (-R xunit-quiet).  The harness (run.py) reads,
# from the host, check's output as it is written (the test in progress, to cut a
# guest that hangs in one) and the report (rewritten by check before
# each test: a guest cut in a test still leaves the results of those
# before it).  Each guest of a run is a "boot" (FST_BOOT): its output is
# /run-share/check-out/boot-N.out, its results /run-share/results/boot-N/
# (fstests' RESULT_BASE: result-K.xml per chunk, NNN.out.bad, NNN.full,
# NNN.dmesg).
#
# One ./check for many tests, not one per test: check's own start
# (sourcing its config and common/rc, mounting the test share, its
# header) cost more than most tests under TCG, 3 s unloaded, 35-45 s
# with three guests on two cores.
set -u
RS=/run-share
cd /fstests || { echo "in-root: no /fstests"; exit 2; }

export FSTYP=virtiofs
export TEST_DEV=$FST_TEST_TAG TEST_DIR=/mnt/test
export SCRATCH_DEV=$FST_SCRATCH_TAG SCRATCH_MNT=/mnt/scratch
# dax=always (or another mode) for both mounts when the run asks for it
export TEST_FS_MOUNT_OPTS=${FST_MOUNT_OPTS:-}
export MOUNT_OPTIONS=${FST_MOUNT_OPTS:-}
export RESULT_BASE=$RS/results/boot-$FST_BOOT
# Diffs in full in NNN.out.bad's neighbour; the report quotes their
# first changed line
export DIFF_LENGTH=0
mkdir -p "$RESULT_BASE" "$RS/check-out"

# fstests' own prerequisites, before any test: a missing tool here would
# turn every test into a failure that says nothing about the daemon.
for p in xfs_io fsstress fsx perl setfacl getfattr bc gawk; do
    case $p in
    fsstress|fsx) [ -x ltp/$p ] || { echo "in-root: fstests has no ltp/$p"; exit 2; } ;;
    *) command -v $p >/dev/null || { echo "in-root: the root has no $p"; exit 2; } ;;
    esac
done

# Both shares mount as the run asks (a window refused would make
# dax=always fail here, not quietly run without DAX), and what the
# kernel made of the options goes to the host (run.py checks it).
: > "$RS/mounts.txt"
for dm in "$TEST_DEV $TEST_DIR" "$SCRATCH_DEV $SCRATCH_MNT"; do
    set -- $dm
    # shellcheck disable=SC2086
    mount -t virtiofs $MOUNT_OPTIONS "$1" "$2" ||
        { echo "in-root: cannot mount $1 on $2 with '$MOUNT_OPTIONS'"; exit 2; }
    grep " $2 " /proc/mounts >> "$RS/mounts.txt"
    umount "$2"
done
cat "$RS/mounts.txt"

# Without a test, check would run every test it has
mapfile -t tests < "$RS/tests.list"
[ ${#tests[@]} -gt 0 ] && [ -n "${tests[0]}" ] ||
    { echo "in-root: no tests to run"; exit 2; }
echo "fstests: ${#tests[@]} tests in this guest"
# In chunks: check looks every test it is given up in its group file
# with a few forks each before it runs any, which for the whole generic
# group took 3 minutes under load, paid again by every fresh guest after
# a hang.  Each chunk's report is kept as result-K.xml (check rewrites
# result.xml); a chunk cut in a test leaves its result.xml.
out=$RS/check-out/boot-$FST_BOOT.out
: > "$out"
chunk=${FST_CHUNK:-40} k=0
for ((i = 0; i < ${#tests[@]}; i += chunk)); do
    rm -f "$RESULT_BASE/result.xml"
    ./check --exact-order -R xunit-quiet "${tests[@]:i:chunk}" >> "$out" 2>&1
    rc=$?
    sync
    [ -f "$RESULT_BASE/result.xml" ] ||
        { tail -n 5 "$out"; echo "in-root: check wrote no report (status $rc)"; exit 2; }
    mv "$RESULT_BASE/result.xml" "$RESULT_BASE/result-$k.xml"
    k=$((k + 1))
done
sync
grep -E '^(Ran|Not run|Failures|Failed|Passed)' "$out" | tail -n 4
exit 0
