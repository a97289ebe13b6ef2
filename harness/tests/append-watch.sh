#!/usr/bin/env bash
# A host process appends to a file through one long-lived fd while the
# guest reads it as it grows (a log and its tail -f): the guest must see
# each new record within the bound --cache=adaptive documents, and read
# it right (docs/tools/virtiofsd.rst, --adaptive-timeouts).
#
# The daemon runs with --cache=adaptive --adaptive-timeouts=TIMEOUTS
# (default 1:4:0.5).  The bound for a change: the timeout of the guest's
# last look at the file, FRACTION of how long the file had been unchanged
# then, at least MIN and at most MAX.  The guest looks all the time, so
# its last look before an append came at most as long after the previous
# change as the append itself: bound = FRACTION x (time since the
# previous append), clamped to MIN..MAX.  The host appends a 64-byte
# record, waits for the guest's acknowledgement (a file it creates on the
# share once it has read the record and checked it), then waits GAPS
# (0.5 1 2 4 6 10 s) before the next, so the bounds go from MIN to MAX.
# The delay is measured on the host, from its write() to the guest's
# acknowledgement; the test fails when one is over its bound plus MARGIN
# (2 s: a guest under TCG, its polling every 0.1 s, the acknowledgement).
#
# Cases:
#   adaptive   no DAX window: the guest reads through its page cache; a
#              read at the end of the file asks for the attributes again
#              once they expired (FUSE_AUTO_INVAL_DATA drops stale pages)
#   dax        a window, mount -o dax=always: a read through the window
#              never asks for attributes, so the guest's reader stats the
#              file as it polls, and once stat shows a new size the new
#              bytes must read at once, right, through the window (the
#              daemon's --stats must count no READ, some SETUPMAPPING)
# DAEMON_TIMEOUTS gives the daemon other timeouts than the bounds are
# computed from (to show the test fails when the daemon caches longer).
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pick_case "$0 [--timeout N] adaptive|dax [VM-ARGS]" "adaptive|dax" "$@"
TIMEOUTS=${TIMEOUTS:-1:4:0.5}
DAEMON_TIMEOUTS=${DAEMON_TIMEOUTS:-$TIMEOUTS}
GAPS=${GAPS:-0.5 1 2 4 6 10}
MARGIN=${MARGIN:-2}
# 62 records before the guest looks (3968 bytes): the appends cross into
# the file's second page, past the end when the guest first mapped it
INITIAL=62
appender=
on_exit '[ -z "$appender" ] || { kill "$appender"; wait "$appender"; } 2>/dev/null || true'
shared=$work/share
mkdir -p "$shared/s" "$work/logs"
ngaps=$(echo $GAPS | wc -w)
total=$((INITIAL + ngaps))

# Record N: "rec NNNN " and 54 times one letter, then a newline
record() {
    python3 -c 'import sys; n = int(sys.argv[1])
sys.stdout.write(f"rec {n:04d} " + chr(97 + n % 26) * 54 + "\n")' "$1"
}
for n in $(seq 0 $((total - 1))); do record $n; done > "$shared/expected"
head -n $INITIAL "$shared/expected" > "$shared/s/log"

guest_script "$work/guest.sh" <<'GUEST'
if [ "$WATCH_CASE" = dax ]; then
    mount_virtiofs "$VFS_TAG" /mnt dax=always
    dax_active /mnt || fail "dax=always requested, DAX not active"
else
    mount_virtiofs "$VFS_TAG" /mnt
fi
cp /mnt/expected /tmp/expected || fail "expected records"
f=/mnt/s/log
exec 3< $f || fail "open $f"
next=0 pos=0
# got LINE: record $next read right, or the test fails
got() {
    want=$(sed -n "$((next + 1))p" /tmp/expected)
    [ "$1" = "$want" ] || fail "record $next reads '$1', want '$want'"
    next=$((next + 1))
    pos=$((pos + 64))
}
while [ $next -lt "$INITIAL" ]; do
    read -r line <&3 || fail "the first records: only $next"
    got "$line"
done
touch /mnt/ready
i=0 stats=0
while [ $next -lt "$TOTAL" ]; do
    i=$((i + 1))
    [ $i -lt 1500 ] || fail "record $next never seen"
    if [ "$WATCH_CASE" = dax ]; then
        # A read through the window never asks for the size: stat does,
        # once the attributes expired; the bytes it shows read at once
        size=$(stat -c %s $f) || fail "stat"
        stats=$((stats + 1))
        if [ "$size" -gt $pos ]; then
            while [ $pos -lt "$size" ]; do
                read -r line <&3 ||
                    fail "stat shows $size bytes, a read at $pos gets none"
                got "$line"
                touch /mnt/ack-$((next - 1))
            done
            continue
        fi
    elif read -r line <&3; then
        got "$line"
        touch /mnt/ack-$((next - 1))
        continue
    fi
    sleep 0.1
done
pass "all $TOTAL records read right ($stats stats)"
GUEST

# The appender: one fd for its life; each record once the guest has
# acknowledged the one before, after its gap
python3 - "$shared" "$INITIAL" "$TIMEOUTS" "$MARGIN" "$work/appender.out" \
    $GAPS <<'PY' &
import os, sys, time
shared, initial, timeouts, margin, out = sys.argv[1:6]
gaps = [float(g) for g in sys.argv[6:]]
initial, margin = int(initial), float(margin)
lo, hi, frac = (float(x) for x in (timeouts.split(":") + ["0.1"])[:3])
log = os.path.join(shared, "s", "log")
expected = open(os.path.join(shared, "expected")).read().splitlines(True)
fd = os.open(log, os.O_WRONLY | os.O_APPEND)
res = open(out, "w")
start = time.time()
while not os.path.exists(os.path.join(shared, "ready")):
    if time.time() - start > 300:
        res.write("never ready\n")
        sys.exit(1)
    time.sleep(0.05)
prev = os.stat(log).st_ctime
for k, gap in enumerate(gaps):
    n = initial + k
    time.sleep(gap)
    os.write(fd, expected[n].encode())
    t = time.time()
    bound = min(hi, max(lo, frac * (t - prev)))
    ack = os.path.join(shared, f"ack-{n}")
    while not os.path.exists(ack) and time.time() - t < bound + margin + 30:
        time.sleep(0.01)
    if not os.path.exists(ack):
        res.write(f"{n} {t - prev:.2f} {bound:.2f} never\n")
        break
    res.write(f"{n} {t - prev:.2f} {bound:.2f} {time.time() - t:.2f}\n")
    res.flush()
    prev = t
PY
appender=$!

window=()
dargs="--adaptive-timeouts=$DAEMON_TIMEOUTS"
if [ $case_ = dax ]; then
    window=(--cache-size 64M)
    dargs="$dargs --stats"
fi
rc=0
vm --quiet --shared "$shared" --daemon ours \
    --cache-mode adaptive "--daemon-args=$dargs" "${window[@]}" \
    --log-dir "$work/logs" --env WATCH_CASE=$case_ --env INITIAL=$INITIAL \
    --env TOTAL=$total "${args[@]}" "$work/guest.sh" > "$work/out" || rc=$?
cat "$work/out"
wait "$appender" || true
appender=
if [ $rc != 0 ] || ! grep -q "^ok: all $total records read right" "$work/out"; then
    bad "$case_: the guest's reader failed (status $rc)"
fi
# Each record's delay against its bound
seen=0
while read -r n quiet bound delay; do
    if [ "$delay" = never ]; then
        bad "$case_: record $n (unchanged ${quiet} s before, bound" \
            "$bound s) never seen by the guest"
        continue
    fi
    seen=$((seen + 1))
    echo "record $n: the file unchanged $quiet s before, bound $bound s," \
         "seen after $delay s"
    if awk -v d="$delay" -v b="$bound" -v m="$MARGIN" 'BEGIN { exit !(d > b + m) }'; then
        bad "$case_: record $n seen after $delay s, over its bound" \
            "$bound s + $MARGIN s"
    fi
done < "$work/appender.out"
if [ $seen != "$ngaps" ]; then
    bad "$case_: $seen of $ngaps appended records measured"
fi
if [ $case_ = dax ]; then
    # Through the window: no READ at all, the file mapped
    reads=$(stat_count "$work/logs/virtiofsd.log" READ)
    maps=$(stat_count "$work/logs/virtiofsd.log" SETUPMAPPING)
    echo "daemon: ${reads:-0} READ, ${maps:-0} SETUPMAPPING"
    if [ -n "$reads" ] || [ -z "$maps" ]; then
        bad "dax: the guest did not read through the window"
    fi
fi
finish "$case_: the host's appends seen within the bound, read right"
