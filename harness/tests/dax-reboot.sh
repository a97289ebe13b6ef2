#!/usr/bin/env bash
# A guest reboot while DAX mappings are live, then a new mount: q35 with
# cache-size=16G.  The guest maps a file it wrote through DAX and keeps
# reading it (the host checks /proc/PID/maps that it is in QEMU's
# window), then reboots at once (reboot -f); QEMU resets the device with
# the mapping live, the guest boots again (the same script: a file in
# the share says which boot it is), mounts again, reads what it wrote
# before the reboot and writes more.  The console must show two boots.
# Extra arguments go to harness/vm.py (the daemon is ours).
#
# Before the daemon took a second FUSE_INIT as a new session, it refused
# the second boot's INIT ("INIT on an initialized session") and the new
# mount's requests failed with ECONNREFUSED in the guest.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
mkdir "$work/share"

guest_script "$work/reboot.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
if [ ! -e /mnt/first-boot ]; then
    touch /mnt/first-boot
    mmapio fill /mnt/a.bin $((8 << 20)) 6 || fail "mmap writes"
    mmapio loop /mnt/a.bin 3600 > /dev/null 2>&1 &
    sleep 2
    host_step /mnt
    echo "REBOOTING with a.bin mapped"
    reboot -f
    sleep 30
    fail "reboot -f did not reboot"
fi
echo "SECOND BOOT"
mmapio check /mnt/a.bin 6 || fail "a.bin after the reboot"
mmapio fill /mnt/b.bin $((8 << 20)) 7 || fail "mmap writes after the reboot"
umount /mnt || fail umount
pass "mounted again after a reboot with live mappings"
GUEST

# The host step: the file is in QEMU's window right now
host_check() {
    local qemu
    qemu=$(cat "$work/state/qemu.pid")
    grep -E '/a\.bin( \(deleted\))?$' "/proc/$qemu/maps" > "$work/mapped" ||
        true
}
rc=0
run_vm_with_host_step "$work/share" host_check --quiet --machine q35 \
    --cache-size 16G --allow-reboot --log-dir "$work/log" \
    --state-dir "$work/state" "$@" --daemon ours "$work/reboot.sh" \
    > "$work/out" 2>&1 || rc=$?
cat "$work/out"
on_fail 'tail -n 5 "$work/log/virtiofsd.log" 2>/dev/null'
[ $rc = 0 ] || fail "the guest run failed (status $rc)"
[ -s "$work/mapped" ] || fail "a.bin was not mapped into QEMU before the reboot"
# The console runs at loglevel 4, which does not show the kernel's banner:
# the guest script says which boot it is in (a file in the share).
grep -qx "REBOOTING with a.bin mapped" "$work/out" &&
    grep -qx "SECOND BOOT" "$work/out" ||
    fail "the guest did not run its script in two boots"
grep -q "the guest started a new FUSE session" "$work/log/virtiofsd.log" ||
    fail "the daemon did not start a new session for the second boot"
$pattern check "$work/share/b.bin" 7 $((8 << 20)) ||
    fail "b.bin written after the reboot differs on the host"
pass "reboot with a.bin mapped, then a new mount works (2 boots)"
