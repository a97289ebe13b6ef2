#!/usr/bin/env bash
# The back-end dies under a guest that has live DAX mappings and I/O in
# flight: virtiofsd gets SIGKILL.  QEMU must keep running, drop every file
# mapping from the window (checked in /proc/PID/maps), say so in its log,
# and leave the guest's file system requests waiting rather than failing
# them with wrong data.  Then (default) a new virtiofsd is started on the
# same socket: QEMU (chardev reconnect-ms) hands it the device, the old
# FUSE session's requests fail with EIO, and a fresh mount works again.
# With --no-restart the guest powers off with requests still hanging.
# Either way QEMU must then exit 0 (vm.py checks it) and the restarted
# daemon end by itself, status 0, once QEMU is gone.
# Other arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
restart=1
vm_args=()
for a in "$@"; do
    if [ "$a" = --no-restart ]; then
        restart=0
    else
        vm_args+=("$a")
    fi
done
tmpdir shared kill
out=$work/vm.out
newd=
on_exit '[ -z "$newd" ] || kill -KILL "$newd" 2>/dev/null || true'
on_fail 'echo "--- vm.py output"; cat "$out" 2>/dev/null'
on_fail 'echo "--- qemu.log"; cat "$work/logs/qemu.log" 2>/dev/null'

# Wait (up to 5 minutes) for the guest to print a line
wait_for_guest() {
    for _ in $(seq 1 3000); do
        grep -qx "$1" "$out" && return 0
        kill -0 "$vm" 2>/dev/null || fail "the VM ended before printing $1"
        sleep 0.1
    done
    fail "the guest never printed $1"
}

$pattern write "$shared/data.bin" $((4 << 20)) 1

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio check /mnt/data.bin 1 || fail "data.bin through DAX"
# Live DAX mappings (an mmap reader) and FUSE requests in flight.
mmapio loop /mnt/data.bin 3600 > /dev/null 2>&1 &
bg="$!"
(while :; do cat /mnt/data.bin > /dev/null; mmapio write /mnt/w.bin 65536 5; done) \
    > /dev/null 2>&1 &
bg="$bg $!"
sleep 2
echo READY-TO-KILL
# probe NAME: whether a LOOKUP of a new name gets an answer within 3 s.
# A request the back-end has received can only wait (even SIGKILL waits
# for it), so a probe that does not finish is left behind.
probe() {
    stat "/mnt/$1" > "/tmp/$1.out" 2>&1 &
    p=$!
    for _ in $(seq 1 30); do
        kill -0 $p 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}
i=0
while probe probe-$i; do
    i=$((i + 1)); [ $i -gt 200 ] && fail "the back-end never stopped answering"
    sleep 0.5
done
pass "requests wait while the back-end is gone"
echo SEEN-DEAD
if [ "$VFS_RESTART" = 0 ]; then
    # Hung requests must not keep the guest from powering off.
    exit 0
fi
i=0
until probe again-$i; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "no answer from a restarted back-end"
done
grep -q "Input/output error" /tmp/again-$i.out ||
    fail "the old session after a reconnect: $(cat /tmp/again-$i.out)"
pass "the old FUSE session fails with EIO after the back-end came back"
# The loops' own children (a cat, an mmapio) outlive a killed subshell and
# keep the old mount busy: kill them by name too, then give the ones that
# were waiting on the old session a moment to see its EIO and exit.
kill -KILL $bg 2>/dev/null
killall -KILL mmapio cat stat 2>/dev/null
wait 2>/dev/null
i=0
until umount /mnt 2>/tmp/umount.err; do
    i=$((i + 1))
    if [ $i -gt 50 ]; then
        ps -o pid,stat,args 2>/dev/null || ps
        fail "umount of the old session: $(cat /tmp/umount.err)"
    fi
    killall -KILL mmapio cat stat 2>/dev/null
    sleep 0.1
done
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "DAX not active after the new mount"
mmapio check /mnt/data.bin 1 || fail "data.bin through DAX after the restart"
mmapio fill /mnt/after.bin $((3 << 20)) 7 || fail "mmap writes after the restart"
sync
umount /mnt || fail umount
pass "a new mount works with the restarted back-end"
GUEST

vm --shared "$shared" --cache-size 16M \
    --reconnect-ms 500 --state-dir "$work/state" --log-dir "$work/logs" \
    --expect-daemon-exit=-9 --env VFS_RESTART=$restart "${vm_args[@]}" \
    "$work/guest.sh" > "$out" 2>&1 &
vm=$!

wait_for_guest READY-TO-KILL
qemu=$(cat "$work/state/qemu.pid")
daemon=$(cat "$work/state/daemon.pid")
# The daemon's sandbox may show QEMU the files under another path.
files='/(data|w)\.bin( \(deleted\))?$'
grep -Eq "$files" "/proc/$qemu/maps" ||
    fail "data.bin is not mapped into QEMU: DAX is not in use"
kill -KILL "$daemon"
for _ in $(seq 1 100); do
    grep -Eq "$files" "/proc/$qemu/maps" || break
    sleep 0.1
done
kill -0 "$qemu" 2>/dev/null || fail "QEMU died with its back-end"
if grep -E "$files" "/proc/$qemu/maps"; then
    fail "files of the dead back-end are still mapped into QEMU"
fi
pass "QEMU runs on and unmapped the window after virtiofsd was killed"
wait_for_guest SEEN-DEAD
grep -q 'back-end of device .* disconnected' "$work/logs/qemu.log" ||
    fail "QEMU did not report the disconnect"
pass "QEMU reported: $(grep -m1 'disconnected' "$work/logs/qemu.log")"

if [ $restart = 1 ]; then
    # The same command line, hence the same socket path
    python3 -c 'import json, os, sys
cmd = json.load(open(sys.argv[1]))
os.execvp(cmd[0], cmd)' "$work/state/daemon.cmd" > "$work/logs/virtiofsd2.log" 2>&1 &
    newd=$!
fi

rc=0
wait $vm || rc=$?
cat "$out"
[ $rc = 0 ] || fail "guest script or VM failed (exit $rc)"
if [ $restart = 1 ]; then
    for _ in $(seq 1 200); do
        kill -0 "$newd" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$newd" 2>/dev/null &&
        fail "the restarted virtiofsd still runs 20 s after QEMU exited"
    nrc=0
    wait "$newd" || nrc=$?
    newd=
    [ $nrc = 0 ] || fail "the restarted virtiofsd ended with status $nrc"
    pass "the restarted virtiofsd ended by itself, status 0, after QEMU"
    $pattern check "$shared/after.bin" 7 $((3 << 20)) || fail "after.bin on the host"
    grep -q 'has a back-end again' "$work/logs/qemu.log" ||
        fail "QEMU did not report the reconnect"
    pass "files written after the reconnect are right on the host"
else
    pass "the guest powered off with requests hanging on a dead back-end"
fi
