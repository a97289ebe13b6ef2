#!/usr/bin/env bash
# DAX and host-side truncation: while the guest reads a file through a DAX
# mmap, a host program truncates it.  The guest's next accesses hit pages
# past the new end of file; QEMU must survive them (they read as zeros)
# instead of dying of SIGBUS.
# Extra arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
shared=$(mktemp -d /tmp/vfsdax-trunc.XXXXXX)
guest_script=$(mktemp)
trap 'rm -rf "$shared" "$guest_script"' EXIT

head -c $((4 << 20)) /dev/urandom > "$shared/victim.bin"

cat > "$guest_script" <<'GUEST'
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio loop /mnt/victim.bin 8 > /tmp/loop.out 2>&1 &
loop=$!
sleep 2
host_step /mnt
wait $loop || fail "mmapio loop: $(cat /tmp/loop.out)"
cat /tmp/loop.out
pass "guest kept reading a file truncated on the host"
umount /mnt || fail umount
GUEST

host_truncate() {
    truncate -s 0 "$shared/victim.bin"
}
run_vm_with_host_step "$shared" host_truncate --cache-size 16M "$@" "$guest_script"
echo "ok: QEMU survived a host-side truncate under DAX"
