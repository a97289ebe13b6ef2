#!/usr/bin/env bash
# A guest waits for a lock the host holds (fcntl F_SETLKW, and flock with
# --flock: FUSE_SETLKW either way) while QEMU stops the device.  Our
# virtiofsd runs such a request in a thread of its own, blocked in the
# host's fcntl()/flock(); a QMP stop (GET_VRING_BASE) or the end of a live
# migration stops the queue it came from meanwhile.  When the host lets go
# the guest must still get its answer, and the lock must be where the
# guest thinks it is.
#
#   lock-wait.sh [vm.py/migrate.py options] CASE
#
# CASE:
#   stop-cont  first two controls (POSIX, flock) released while the VM
#              runs; then p.lock (POSIX): stop, 1 s, cont, then the host
#              releases;
#              f.lock (flock): stop, the host releases while the VM is
#              stopped, cont.  The guest must get each lock.
#   migrate    the guest waits on both when the migration begins; it
#              completes, the host releases, and the guest, now on the
#              destination, must get both, held by the destination's
#              daemon.
# Before stopping or migrating, the host sees the guest's request blocked
# in our daemon (/proc/locks); while the guest holds a lock, the host
# checks that the daemon (the destination's after a migration) holds it
# and that the host itself cannot take it; after the guest lets go, that
# the lock is gone.  harness/tests/locks.py does the host's part.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pick_case "lock-wait.sh [options] CASE" "stop-cont|migrate" "$@"
set -- "${args[@]}"
shared=$work/shared
mkdir -p "$shared" "$work/state" "$work/logs"
printf 'posix\n' > "$shared/p.lock"
printf 'flock\n' > "$shared/f.lock"
locks=$top/harness/tests/locks.py
daemon_args="--posix-lock --flock"

rc=0
case $case_ in
stop-cont)
    # One after the other: the controls without a stop, then each file's
    # own stop/cont
    printf 'control\n' > "$shared/cp.lock"
    printf 'control\n' > "$shared/cf.lock"
    guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
lockwait /mnt/cp.lock posix 30 || fail "control: POSIX lock, no stop"
lockwait /mnt/cf.lock flock 30 || fail "control: flock, no stop"
rc=0
lockwait /mnt/p.lock posix 30 || rc=1
lockwait /mnt/f.lock flock 30 || rc=1
[ $rc = 0 ] || fail "a lock wait across stop/cont did not end with the lock"
pass "both lock waits across stop/cont ended with the lock"
GUEST
    python3 "$locks" stop-cont --shared "$shared" --state-dir "$work/state" \
        --log-dir "$work/logs" --qmp "$work/qmp.sock" -- \
        python3 "$top/harness/vm.py" --shared "$shared" --daemon ours \
        --daemon-args="$daemon_args" --daemon-must-live \
        --state-dir "$work/state" --log-dir "$work/logs" \
        --qemu-args="-qmp unix:$work/qmp.sock,server=on,wait=off" \
        "$@" "$work/guest.sh" || rc=$?
    ;;
migrate)
    guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
lockwait /mnt/p.lock posix 60 &
p=$!
lockwait /mnt/f.lock flock 60 &
f=$!
touch /mnt/.migrate-ready
rp=0
rf=0
wait $p || rp=$?
wait $f || rf=$?
[ "$(cat /mnt/.migrate-done 2>/dev/null)" = completed ] ||
    fail "the migration did not complete"
[ $rp = 0 ] && [ $rf = 0 ] ||
    fail "a lock wait across the migration did not end with the lock"
pass "both lock waits ended with the lock on the destination"
GUEST
    python3 "$locks" migrate --shared "$shared" --state-dir "$work/state" \
        --log-dir "$work/logs" -- \
        python3 "$top/harness/migrate.py" --shared "$shared" --daemon ours \
        --daemon-args="$daemon_args" --state-dir "$work/state" \
        --log-dir "$work/logs" --expect-migration completed \
        --host-step "python3 '$locks' waiters --state-dir '$work/state' \
--log-dir '$work/logs' --end src \"\$SHARED/p.lock:posix\" \
\"\$SHARED/f.lock:flock\"" \
        "$@" "$work/guest.sh" || rc=$?
    ;;
esac
[ $rc = 0 ] || fail "lock-wait.sh $case_: status $rc"
pass "lock-wait.sh $case_"
