#!/usr/bin/env bash
# DAX and host-side truncation: while the guest reads a file through a DAX
# mmap, and writes to its second half through the same kind of mapping and
# with pwrite(2), a host program truncates it to 1 MiB.  The guest's next
# accesses hit pages past the new end of file; QEMU must survive them
# (they read as zeros, writes go nowhere) instead of dying of SIGBUS.
#
# The guest keeps the size it knew (nothing makes it ask again), so its
# pwrite()s past the new end are not extending writes: they go through
# the window like the stores, never to the daemon.  Afterwards the host
# file must be exactly its first MiB, unchanged: no write reached it.
# QEMU's trace must show its SIGBUS fixup at work, so the test cannot pass
# without reaching the case it is for.  The guest reports what its
# processes saw; the mount must still serve other files.
# Extra arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared trunc
trace=$work/trace
: > "$trace"
head_copy=$work/head

head -c $((4 << 20)) /dev/urandom > "$shared/victim.bin"
head -c $((1 << 20)) "$shared/victim.bin" > "$head_copy"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio loop /mnt/victim.bin 8 > /tmp/loop.out 2>&1 &
loop=$!
mmapio scribble /mnt/victim.bin $((2 << 20)) 8 > /tmp/scribble.out 2>&1 &
scribble=$!
sleep 2
host_step /mnt
wait $loop || fail "mmapio loop: $(cat /tmp/loop.out)"
cat /tmp/loop.out
wait $scribble || fail "mmapio scribble: $(cat /tmp/scribble.out)"
cat /tmp/scribble.out
pass "guest kept reading and writing a file truncated on the host"
echo fresh > /mnt/fresh.txt && [ "$(cat /mnt/fresh.txt)" = fresh ] ||
    fail "the mount is no longer usable"
pass "the mount still serves other files"
umount /mnt || fail umount
GUEST

host_truncate() {
    truncate -s $((1 << 20)) "$shared/victim.bin"
}
run_vm_with_host_step "$shared" host_truncate --cache-size 16M \
    --qemu-args "-trace enable=virtio_shmem_arena_sigbus,file=$trace" \
    "$@" "$work/guest.sh" || fail "the guest run failed (status $?)"
pass "QEMU survived a host-side truncate under DAX"

# "N pages past the end of truncated files now read as zeros"
pages=$(fixup_sum "$trace" pages)
[ "$pages" -gt 0 ] ||
    fail "QEMU's SIGBUS fixup never ran: the guest's accesses did not" \
         "reach the truncated pages"
pass "QEMU's SIGBUS fixup replaced $pages pages past the new end"
size=$(stat -c %s "$shared/victim.bin")
[ "$size" = $((1 << 20)) ] ||
    fail "the host file is $size bytes after the guest's writes"
cmp -s "$head_copy" "$shared/victim.bin" ||
    fail "the host file's remaining MiB changed"
pass "the guest's writes past the new end never reached the host file"
