#!/usr/bin/env bash
# Large REMOVEMAPPING batches: the guest maps every 2 MiB range of a 160 MiB
# file (80 ranges), then evicts the inode, which removes all of them in one
# request.  The daemon must serve it and go on.  (A REMOVEMAPPING of more
# than 64 ranges once killed our daemon: sorting it called sysinfo(), which
# its seccomp filter did not allow.)
# That the 80-range request was sent is checked, not assumed: our daemon's
# debug log gives each request's length, hence the number of ranges of
# each REMOVEMAPPING (an inode that is not evicted sends none).  So the
# daemon is ours.  Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared batch
head -c $((160 << 20)) /dev/zero > "$shared/big"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "DAX not active"
cat /mnt/big > /dev/null || fail "reading 160 MiB through DAX"
echo 3 > /proc/sys/vm/drop_caches
sleep 1
echo alive > /mnt/alive || fail "write after the big REMOVEMAPPING"
[ "$(cat /mnt/alive)" = alive ] || fail "read after the big REMOVEMAPPING"
pass "daemon alive after the inode's eviction"
umount /mnt
GUEST
vm --shared "$shared" --cache-size 512M --timeout 120 \
    "$@" --daemon ours --log-dir "$work/logs" \
    --daemon-args=--log-level=debug "$work/guest.sh" ||
    fail "the guest run failed (status $?)"
# "REMOVEMAPPING unique U nodeid N len L": a 40-byte header, a 4-byte
# count, then 16 bytes per range
most=$(sed -n 's/.*REMOVEMAPPING unique [0-9]* nodeid [0-9]* len \([0-9]*\).*/\1/p' \
           "$work/logs/virtiofsd.log" |
       awk '{ n = ($1 - 44) / 16; if (n > most) most = n } END { print most + 0 }')
if [ "$most" != 80 ]; then
    on_fail 'grep REMOVEMAPPING "$work/logs/virtiofsd.log" | tail -n 5'
    fail "the largest REMOVEMAPPING the daemon served had $most ranges, not 80"
fi
pass "an 80-range REMOVEMAPPING was served, and the daemon went on"
