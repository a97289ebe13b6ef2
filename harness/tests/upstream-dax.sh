#!/usr/bin/env bash
# DAX through unmodified upstream QEMU (Debian's 11.1, mk/upstream-qemu.sh):
# its generic vhost-user-test-device-pci with virtio-id=26 and our
# virtiofsd, which gives it the tag (GET_CONFIG) and the window
# (GET_SHMEM_CONFIG) and maps files with upstream's SHMEM_MAP/UNMAP.
#
#  - dax=always: a host file read through DAX mappings in the guest, files
#    the guest writes through mmap and write() byte-identical on the host;
#  - a file whose size is not a whole number of pages: upstream QEMU cannot
#    map its last page, so under dax=always the read fails with EIO (and
#    the daemon says why) instead of hanging or reading zeros;
#  - fsx with -P (sizes kept to whole pages) on three files of up to 16 MiB
#    through a 32 MiB window: the guest must keep reclaiming ranges, which
#    the daemon's --stats proves (more SETUPMAPPINGs than the window has
#    ranges, and REMOVEMAPPINGs); host copies compared with fsx's model;
#  - dax=inode: files of whole pages get DAX, the others are served
#    through the queue and read back whole.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
ops=${FSX_OPS:-8000}
# 16 ranges: with 8, Linux 6.12's own reclaim sometimes fails a write with
# EBUSY (see fsx.sh); the three files still need up to 24.
window=$((32 << 20))
tmpdir shared updax
logs=$work/logs

$pattern write "$shared/host.bin" $((3 << 20)) 1
printf 'not a whole page\n' > "$shared/small.txt"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active: $(grep ' /mnt ' /proc/self/mountinfo)"
pass "DAX active through upstream QEMU's generic device"
mmapio check /mnt/host.bin 1 || fail "host file through a DAX mmap"
mmapio fill /mnt/mmap.bin $((5 << 20)) 2 || fail "mmap writes"
mmapio write /mnt/write.bin $((3 << 20)) 3 || fail "write()"
mmapio check /mnt/write.bin 3 || fail "reading back write() through mmap"
pass "file round trip both ways through the window"
if out=$(cat /mnt/small.txt 2>&1); then
    fail "a file of a partial page read through DAX on upstream QEMU: '$out'"
fi
case $out in
*"Input/output error"*) pass "a partial last page under dax=always: EIO, no hang ($out)" ;;
*) fail "a partial last page under dax=always: '$out', expected EIO" ;;
esac
mkdir /tmp/model
fsx -P -n "$FSX_OPS" -s 1 -c 5000 -w 120 -o /tmp/model \
    /mnt/f0 /mnt/f1 /mnt/f2 > /tmp/fsx.out 2>&1 || {
    grep "^fsx:   " /tmp/fsx.out
    tail -n 30 /tmp/fsx.out
    # The models at the failure, for the host to compare (fsx-diff.py)
    mkdir -p /mnt/fsx-failed && cp /tmp/model/* /mnt/fsx-failed/ && sync
    fail "$(grep -m1 -e "fsx: FAIL" -e MISMATCH /tmp/fsx.out)"
}
tail -n 4 /tmp/fsx.out
pass "fsx -P: $FSX_OPS operations through a window smaller than the files"
(cd /tmp/model && sha256sum f0 f1 f2) > /mnt/model.sha256
sync
umount /mnt || fail umount

mount_virtiofs "$VFS_TAG" /mnt dax=inode
grep -q "^not a whole page$" /mnt/small.txt ||
    fail "dax=inode: a file of a partial page not read back: $(cat /mnt/small.txt 2>&1)"
mmapio check /mnt/host.bin 1 || fail "dax=inode: host file through mmap"
pass "dax=inode: a partial-page file through the queue, whole pages through DAX"
umount /mnt || fail umount
GUEST

on_fail '[ ! -d "$shared/fsx-failed" ] ||
    python3 "$top/harness/tests/fsx-diff.py" "$shared/fsx-failed" "$shared"'
vm --upstream-device --daemon ours \
    --shared "$shared" --cache-size $((window >> 20))M --log-dir "$logs" \
    --daemon-args=--stats --env FSX_OPS="$ops" --timeout 1000 \
    "$@" "$work/guest.sh" || guest_run_failed $? "$logs"
$pattern check "$shared/mmap.bin" 2 $((5 << 20))
$pattern check "$shared/write.bin" 3 $((3 << 20))
pass "the guest's mmap and write() data byte-identical on the host"
(cd "$shared" && sha256sum -c --quiet model.sha256) ||
    fail "the host's files differ from fsx's model"
pass "the host's files equal fsx's model"
grep -q "the front-end cannot map file offset 0x0+0x200000 of a file of 17 bytes" \
    "$logs/virtiofsd.log" ||
    fail "the daemon did not say why the partial page was refused"
pass "the daemon logged why it refused the partial page"

maps=$(stat_count "$logs/virtiofsd.log" SETUPMAPPING)
unmaps=$(stat_count "$logs/virtiofsd.log" REMOVEMAPPING)
echo "daemon: ${maps:-0} SETUPMAPPING, ${unmaps:-0} REMOVEMAPPING for a window of $((window >> 21)) ranges"
[ "${maps:-0}" -gt $((4 * (window >> 21))) ] && [ "${unmaps:-0}" -gt 0 ] || {
    on_fail 'tail -n 30 "$logs/virtiofsd.log"'
    fail "the guest did not keep reclaiming window ranges"
}
pass "the guest reclaimed ranges throughout"
