#!/bin/bash
# Runs inside the fstests root (chroot, harness/fstests/guest.sh): each
# test of /run-share/tests.list through fstests' ./check, one at a time,
# and one line per test into /run-share/results.tsv:
#
#   TEST <tab> pass|fail|notrun|timeout <tab> SECONDS <tab> WHY
#
# One ./check per test rather than one for the whole list: a test that
# hangs is cut by `timeout` and the next one still runs, and a test the
# guest never comes back from is known by its start mark
# (/run-share/started), so harness/fstests/run.py can boot a fresh guest
# for the rest.  What the test left is in /run-share/results/ (fstests'
# RESULT_BASE: NNN.out.bad, NNN.full, NNN.dmesg, NNN.notrun).
set -u
RS=/run-share
cd /fstests || { echo "in-root: no /fstests"; exit 2; }

export FSTYP=virtiofs
export TEST_DEV=$FST_TEST_TAG TEST_DIR=/mnt/test
export SCRATCH_DEV=$FST_SCRATCH_TAG SCRATCH_MNT=/mnt/scratch
# dax=always (or another mode) for both mounts when the run asks for it
export TEST_FS_MOUNT_OPTS=${FST_MOUNT_OPTS:-}
export MOUNT_OPTIONS=${FST_MOUNT_OPTS:-}
export RESULT_BASE=$RS/results
# Diffs in full: the report quotes their first lines
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

# The first line of what explains a failure: the diff's first changed
# line, or what check said (dmesg, a filesystem check, a timeout).
why_failed() {
    local t=$1 out=$2 bad=$RESULT_BASE/$1.out.bad line
    if [ -f "$bad" ]; then
        line=$(diff "tests/$t.out" "$bad" 2>/dev/null | grep -m1 '^[<>]' | cut -c1-200)
        printf 'output mismatch: %s' "${line:-?}"
    elif [ -f "$RESULT_BASE/$t.dmesg" ]; then
        printf 'dmesg: %s' "$(grep -m1 -E 'WARNING|BUG|Oops|error' "$RESULT_BASE/$t.dmesg" | cut -c1-200)"
    else
        grep -m1 -E '\[failed|_check|not ok|error' "$out" | cut -c1-200 |
            tr '\t' ' ' || printf 'failed (see check-out/%s)' "${t//\//_}"
    fi
}

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

n=0
while read -r t; do
    [ -n "$t" ] || continue
    # Already done in an earlier guest of this run
    grep -q "^$t	" "$RS/results.tsv" 2>/dev/null && continue
    echo "$t" >> "$RS/started"; sync
    out=$RS/check-out/${t//\//_}
    t0=$(date +%s.%N)
    timeout -k 30 "${FST_TEST_TIMEOUT:-900}" ./check "$t" >"$out" 2>&1
    rc=$?
    secs=$(echo "$(date +%s.%N) - $t0" | bc)
    secs=$(printf '%.1f' "$secs")
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        st=timeout why="no result within ${FST_TEST_TIMEOUT:-900} s"
        # What it left mounted must not spoil the next test
        umount -l /mnt/test /mnt/scratch 2>/dev/null
    elif grep -q "^Not run: $t\$" "$out"; then
        st=notrun why=$(head -n1 "$RESULT_BASE/$t.notrun" 2>/dev/null)
    elif grep -q "^Passed all 1 tests" "$out"; then
        st=pass why=
    else
        st=fail why=$(why_failed "$t" "$out")
    fi
    printf '%s\t%s\t%s\t%s\n' "$t" "$st" "$secs" "$(printf '%s' "$why" | tr '\t\n' '  ')" \
        >> "$RS/results.tsv"
    sync
    n=$((n + 1))
    echo "fstests: $t $st ${secs}s $why"
done < "$RS/tests.list"
echo "fstests: $n tests run in this guest"
