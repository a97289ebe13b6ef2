#!/usr/bin/env bash
# DAX end to end: with the cache window and -o dax=always, data written in
# the guest through mmap and write() is byte-identical on the host, a host
# change to a file the guest has mapped is visible in the guest, and a data
# set larger than the window (the guest must reclaim ranges) stays correct.
# Coherence both ways while a mapping lives: what the guest stores through
# a DAX mapping is in the host's file at once (no msync: it is the same page
# cache), and a host pwrite() shows through the mapping the guest still has.
# Extra arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
tmpdir shared dax

$pattern write "$shared/host.bin" $((3 << 20)) 1

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active: $(grep ' /mnt ' /proc/self/mountinfo)"
pass "DAX active"
mmapio check /mnt/host.bin 1 || fail "host file through a DAX mmap"
mmapio fill /mnt/mmap.bin $((5 << 20)) 2 || fail "mmap writes"
mmapio write /mnt/write.bin $((3 << 20)) 3 || fail "write()"
mmapio check /mnt/write.bin 3 || fail "reading back write() through mmap"
# Larger than the window: every 2 MiB range gets mapped, reclaimed, mapped again.
mmapio write /mnt/big.bin $((48 << 20)) 4 || fail "write() of 48 MiB"
echo 3 > /proc/sys/vm/drop_caches
mmapio check /mnt/big.bin 4 || fail "48 MiB through a 16 MiB window"
cat /mnt/big.bin | md5sum > /tmp/big.md5
cat /mnt/big.bin | md5sum | cmp - /tmp/big.md5 || fail "read() twice differs"
pass "data set larger than the window"
# Stores through a mapping the guest keeps; the host checks them and writes
# its own bytes over them, and over host.bin, while it has the guest's turn
# (mmapio does the host_step handshake itself).
mmapio coherence /mnt/coh.bin $((3 << 20)) 10 11 /mnt ||
    fail "host write not visible through the guest's existing DAX mapping"
pass "host pwrite visible through the guest's existing mapping"
mmapio check /mnt/host.bin 9 || fail "host change not visible through DAX"
pass "host change visible"
sync
umount /mnt || fail umount
GUEST

guest_stores_seen=0
host_change() {
    # Before anything else: the guest's stores, not msync'ed, as they are.
    if $pattern check "$shared/coh.bin" 10 $((3 << 20)); then
        guest_stores_seen=1
    fi
    # In place, the same inode: what the guest has mapped must change.
    $pattern write "$shared/host.new" $((3 << 20)) 9
    dd if="$shared/host.new" of="$shared/host.bin" conv=notrunc status=none
    $pattern write "$shared/host.new" $((3 << 20)) 11
    dd if="$shared/host.new" of="$shared/coh.bin" conv=notrunc status=none
    rm -f "$shared/host.new"
}
run_vm_with_host_step "$shared" host_change --cache-size 16M "$@" "$work/guest.sh"
[ "$guest_stores_seen" = 1 ] ||
    fail "the guest's stores through DAX were not in the host file at once"
pass "guest stores through a DAX mapping seen by a host reader at once"
$pattern check "$shared/mmap.bin" 2 $((5 << 20))
$pattern check "$shared/write.bin" 3 $((3 << 20))
$pattern check "$shared/big.bin" 4 $((48 << 20))
pass "guest data byte-identical on the host"
