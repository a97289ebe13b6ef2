#!/usr/bin/env bash
# A host truncate under the back-end's own accesses to the window: QEMU's
# SIGBUS fix-up must serve VHOST_USER_BACKEND_MEM_READ and MEM_WRITE as it
# serves the guest's vCPUs.
#
# The guest maps a 32 MiB file through its DAX window (every range), then
# the host truncates the file to nothing.  The guest, whose cached size
# (cache=always) still says 32 MiB, hands pages of that mapping to the
# device as the buffer of O_DIRECT I/O on a file outside the window:
#   - a write() from them: the daemon cannot reach window pages, asks
#     QEMU to read them (MEM_READ), and QEMU's copy touches the truncated
#     file's pages;
#   - a read() into them: QEMU writes the data there (MEM_WRITE).
# QEMU must live, the write must carry zeros (what lies past the end of a
# file), the read must succeed, the mount must serve other files, and
# the host's files must be untouched.  QEMU's trace must show both
# requests and the fix-up, so that the test reached its case.
# Arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared fixbe
LEN=$((4 << 20))
on_fail '[ ! -e "$work/vm.out" ] || tail -n 40 "$work/vm.out"'

pattern="python3 $top/harness/tests/pattern.py"
$pattern write "$shared/data.bin" $((32 << 20)) 1
$pattern write "$shared/src.bin" $LEN 2
$pattern write "$shared/other.bin" $((4 << 20)) 3
# Only data.bin by DAX (--dax-policy=xattr): the others' O_DIRECT I/O
# must reach the daemon
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.virtiofsd.dax", b"1")' \
    "$shared/data.bin"
cp "$shared/src.bin" "$shared/other.bin" "$work/"

guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt dax=inode
daxattr /mnt/data.bin | grep -q ' dax$' || fail "data.bin is not DAX"
daxattr /mnt/src.bin | grep -q ' dax$' && fail "src.bin is DAX"
mmapio check /mnt/data.bin 1 || fail "the file reads back wrong"
# Held open: its inode, and the size the guest caches, stay
exec 4</mnt/data.bin
# host_step, whose wait for phase2 would see the negative entry that
# cache=always keeps: unused dentries are dropped at each look
touch /mnt/phase1
i=0
while echo 2 > /proc/sys/vm/drop_caches && [ ! -e /mnt/phase2 ]; do
    i=\$((i + 1)); [ \$i -gt 600 ] && fail "host never answered"
    sleep 0.1
done
# The guest still believes data.bin has 32 MiB (cache=always)
[ "\$(stat -c %s /mnt/data.bin)" = $((32 << 20)) ] ||
    fail "the guest learned the new size: the test cannot reach its case"
winio write /mnt/data.bin /mnt/out.bin $LEN direct ||
    fail "O_DIRECT write from the truncated file's mapping"
pass "write() from pages past the end of a truncated file"
winio read /mnt/src.bin /mnt/data.bin $LEN direct ||
    fail "O_DIRECT read into the truncated file's mapping"
pass "read() into pages past the end of a truncated file"
mmapio check /mnt/other.bin 3 || fail "another file reads back wrong"
echo fresh > /mnt/fresh.txt && [ "\$(cat /mnt/fresh.txt)" = fresh ] ||
    fail "the mount is no longer usable"
pass "the mount still serves other files"
exec 4<&-
umount /mnt || fail umount
GUEST

printf '%s\n' virtio_shmem_arena_sigbus vhost_user_backend_mem_read \
    vhost_user_backend_mem_write > "$work/events"

truncate_data() {
    truncate -s 0 "$shared/data.bin"
}

rc=0
run_vm_with_host_step "$shared" truncate_data --daemon ours \
    --cache-mode always --cache-size 64M --mem 1G \
    --daemon-args="--dax-policy=xattr" \
    --qemu-args "-trace events=$work/events,file=$work/trace" \
    "$@" "$work/guest.sh" > "$work/vm.out" 2>&1 || rc=$?
cat "$work/vm.out"
[ "$rc" = 0 ] || fail "the guest run failed (status $rc)"

reads=$(grep -c "vhost_user_backend_mem_read " "$work/trace" || true)
writes=$(grep -c "vhost_user_backend_mem_write " "$work/trace" || true)
[ "$reads" -gt 0 ] || fail "no MEM_READ: the daemon reached the buffer another way"
[ "$writes" -gt 0 ] || fail "no MEM_WRITE: the daemon reached the buffer another way"
# Fix-ups after the first back-end request: the back-end's, not a vCPU's
pages=$(fixup_sum "$work/trace" pages "vhost_user_backend_mem_(read|write) ")
[ "$pages" -gt 0 ] ||
    fail "no SIGBUS fix-up during the back-end's requests"
pass "$reads MEM_READ, $writes MEM_WRITE, fix-ups over $pages pages"

[ "$(stat -c %s "$shared/out.bin")" = $LEN ] ||
    fail "out.bin has $(stat -c %s "$shared/out.bin") bytes, not $LEN"
n=$(tr -d '\000' < "$shared/out.bin" | wc -c)
[ "$n" = 0 ] || fail "out.bin has $n non-zero bytes: not what lies past the end"
pass "the write carried zeros, as past the end of a file"
[ "$(stat -c %s "$shared/data.bin")" = 0 ] ||
    fail "the truncated file grew back to $(stat -c %s "$shared/data.bin")"
for f in src.bin other.bin; do
    cmp "$shared/$f" "$work/$f" || fail "host file $f changed"
done
pass "the host's other files are byte for byte unchanged"
