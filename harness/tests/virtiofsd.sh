#!/usr/bin/env bash
# Our virtiofsd end to end (needs the cache window): per-inode DAX chosen
# by --dax-policy=xattr, I/O whose buffer lies in the DAX window (the
# daemon must use MEM_READ/MEM_WRITE), a guest truncate of a file it has
# mapped writable followed by a write through the same ranges, and the
# usual file operations with the guest's ids.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
tmpdir shared ours
chmod 755 "$shared"

$pattern write "$shared/big.bin" $((4 << 20)) 5
$pattern write "$shared/small.bin" 65536 6
$pattern write "$shared/trunc.bin" $((6 << 20)) 7
# Which files the guest gets with DAX (mount -o dax=inode)
for f in big.bin trunc.bin; do
    setfattr -n user.virtiofsd.dax -v 1 "$shared/$f" 2>/dev/null ||
        python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.virtiofsd.dax", b"1")' "$shared/$f"
done

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=inode
grep " /mnt " /proc/self/mountinfo
# big.bin and trunc.bin are DAX, small.bin and out.bin are not
# read() of a non-DAX file into a DAX mapping: the buffer is in the window
winio read /mnt/small.bin /mnt/big.bin 65536 || fail "read into the window"
pass "read into a buffer in the DAX window"
# write() of a DAX mapping to a non-DAX file
winio write /mnt/big.bin /mnt/out.bin 131072 || fail "write from the window"
pass "write from a buffer in the DAX window"
# Map a file writable, shrink it, grow it, write through the same ranges:
# the data must reach the file
exec 4</mnt/trunc.bin
mmapio check /mnt/trunc.bin 7 || fail "mmap check"
echo before | dd of=/mnt/trunc.bin bs=1M seek=5 conv=notrunc 2>/dev/null ||
    fail "write before truncate"
truncate -s 4096 /mnt/trunc.bin || fail "truncate"
[ "$(stat -c %s /mnt/trunc.bin)" = 4096 ] || fail "size after truncate"
truncate -s $((6 << 20)) /mnt/trunc.bin || fail "grow after truncate"
# The cut part reads as zeros, through ranges the guest had mapped
n=$(dd if=/mnt/trunc.bin bs=1M skip=2 count=4 2>/dev/null | tr -d '\000' | wc -c)
[ "$n" = 0 ] || fail "$n non-zero bytes after truncate and grow"
echo grown | dd of=/mnt/trunc.bin bs=1M seek=5 conv=notrunc 2>/dev/null ||
    fail "write after truncate and grow"
[ "$(dd if=/mnt/trunc.bin bs=1M skip=5 count=1 2>/dev/null | head -c 5)" = grown ] ||
    fail "read back after truncate and grow"
pass "truncate of a mapped file"
# Files made by a user get that user's ids on the host
mkdir -m 777 /mnt/pub
chown 1000:1000 /mnt/pub && [ "$(stat -c %u:%g /mnt/pub)" = 1000:1000 ] ||
    fail "chown"
ln -s small.bin /mnt/link && [ "$(readlink /mnt/link)" = small.bin ] ||
    fail "symlink"
mkfifo /mnt/fifo && [ -p /mnt/fifo ] || fail "mkfifo"
pass "metadata operations"
sync
exec 4<&-
umount /mnt || fail umount
pass "unmounted"
GUEST

logs=$work/logs
vm --shared "$shared" --cache-size 64M \
    --daemon ours --cache-mode never --log-dir "$logs" \
    --daemon-args="--dax-policy=xattr --log-level=debug" \
    "$@" "$work/guest.sh"
# The window I/O really went through MEM_READ/MEM_WRITE
grep -q "outside the memory we map" "$logs"/virtiofsd.log ||
    fail "no request with a buffer in the window reached the daemon"
pass "buffers in the window reached the daemon"
# big.bin: the first 64 KiB now hold small.bin's pattern, the rest its own
python3 - "$shared" <<'PY'
import sys
d = sys.argv[1]
def pat(size, seed, start=0):
    return bytes(((i * 31 + seed + (i >> 12)) & 0xff) for i in range(start, start + size))
big = open(d + "/big.bin", "rb").read()
assert big[:65536] == pat(65536, 6), "read into the window: wrong data on the host"
assert big[65536:131072] == pat(65536, 5, 65536), "big.bin damaged"
out = open(d + "/out.bin", "rb").read()
assert out == big[:131072], "write from the window: wrong data on the host"
print("ok: window I/O byte-identical on the host")
PY
[ "$(dd if="$shared/trunc.bin" bs=1M skip=5 count=1 2>/dev/null | head -c 5)" = grown ] ||
    fail "write after truncate not on the host"
[ "$(stat -c %u:%g "$shared/pub")" = 1000:1000 ] || fail "ids on the host"
[ -p "$shared/fifo" ] || fail "fifo on the host"
pass "our virtiofsd end to end"
