#!/usr/bin/env bash
# Large REMOVEMAPPING batches: the guest maps every 2 MiB range of a 160 MiB
# file (80 ranges), then evicts the inode, which removes all of them in one
# request.  The daemon must serve it and go on.  (A REMOVEMAPPING of more
# than 64 ranges once killed our daemon: sorting it called sysinfo(), which
# its seccomp filter did not allow.)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
shared=$(mktemp -d /tmp/vfsdax-batch.XXXXXX)
guest_script=$(mktemp)
trap 'rm -rf "$shared" "$guest_script"' EXIT
head -c $((160 << 20)) /dev/zero > "$shared/big"

cat > "$guest_script" <<'GUEST'
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "DAX not active"
cat /mnt/big > /dev/null || fail "reading 160 MiB through DAX"
echo 3 > /proc/sys/vm/drop_caches
sleep 1
echo alive > /mnt/alive || fail "write after the big REMOVEMAPPING"
[ "$(cat /mnt/alive)" = alive ] || fail "read after the big REMOVEMAPPING"
pass "80-range REMOVEMAPPING served, daemon alive"
umount /mnt
GUEST
python3 "$top/harness/vm.py" --shared "$shared" --cache-size 512M --timeout 120 "$@" "$guest_script"
