#!/usr/bin/env bash
# A guest that drops a file with many DAX ranges at once, through
# unmodified upstream QEMU (Debian's 11.1, mk/upstream-qemu.sh).
#
# Evicting the inode makes the guest send one FUSE_REMOVEMAPPING for all
# of the file's ranges (180 here), and the daemon sends QEMU one
# SHMEM_UNMAP per range without waiting for replies.  Upstream QEMU reads
# none of them while it waits for our answer to the REM_MEM_REG that the
# first one caused, so the back-end socket fills up (about 139 unmaps on
# Linux: libvhost-user writes header and payload apart).  A daemon that
# keeps its dispatch lock while its write blocks cannot answer: guest,
# QEMU and daemon hang (seen in make bench).  The guest does it twice and
# reads the file again afterwards; the daemon's --stats prove that each
# removal carried more ranges than the socket holds.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ranges=180
# The daemon's largest window on upstream QEMU: 256 ranges.  180 mapped
# leaves more than the 20% the guest keeps free, so its reclaim worker
# sends no removals of its own in between.
window=$((512 << 20))
tmpdir shared upburst
logs=$work/logs

truncate -s $((ranges * 2))M "$shared/big"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
for round in 1 2; do
    i=0
    while [ $i -lt "$RANGES" ]; do
        # one page of each 2 MiB range: the guest maps the whole range
        dd if=/mnt/big of=/dev/null bs=4096 skip=$((i * 512)) count=1 \
            2>/dev/null || fail "round $round: reading range $i"
        i=$((i + 1))
    done
    # The file is closed: dropping its inode gives all its ranges back
    sync
    echo 3 > /proc/sys/vm/drop_caches
    sleep 1
    echo 3 > /proc/sys/vm/drop_caches
    pass "round $round: $RANGES ranges mapped, the inode dropped"
done
dd if=/mnt/big of=/dev/null bs=4096 skip=512 count=1 2>/dev/null ||
    fail "reading the file after the removals"
pass "the mount answers after the removals"
umount /mnt || fail umount
GUEST

vm --upstream-device --daemon ours \
    --shared "$shared" --cache-size $((window >> 20))M --log-dir "$logs" \
    --daemon-args=--stats --env RANGES="$ranges" --timeout 240 \
    "$@" "$work/guest.sh" || guest_run_failed $? "$logs"

maps=$(stat_count "$logs/virtiofsd.log" SETUPMAPPING)
unmaps=$(stat_count "$logs/virtiofsd.log" REMOVEMAPPING)
echo "daemon: ${maps:-0} SETUPMAPPING, ${unmaps:-0} REMOVEMAPPING"
# Every range mapped again after each drop (the last read too), and one
# removal a drop: each carried the file's $ranges ranges, more than the
# back-end socket holds.
[ "${maps:-0}" = $((2 * ranges + 1)) ] && [ "${unmaps:-0}" = 2 ] || {
    on_fail 'tail -n 30 "$logs/virtiofsd.log"'
    fail "expected $((2 * ranges + 1)) SETUPMAPPING and 2 REMOVEMAPPING"
}
pass "two removals of $ranges ranges each, more than the socket holds"
