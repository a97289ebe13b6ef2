#!/usr/bin/env bash
# DAX and host-side truncation: while the guest reads a file through a DAX
# mmap, a host program truncates it.  The guest's next accesses hit pages
# past the new end of file; QEMU must survive them (they read as zeros)
# instead of dying of SIGBUS.
# Extra arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
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
touch /mnt/phase1
i=0
while [ ! -e /mnt/phase2 ]; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "host never answered"
    sleep 0.1
done
wait $loop || fail "mmapio loop: $(cat /tmp/loop.out)"
cat /tmp/loop.out
pass "guest kept reading a file truncated on the host"
umount /mnt || fail umount
GUEST

python3 "$top/harness/vm.py" --shared "$shared" --cache-size 16M "$@" "$guest_script" &
vm=$!
for _ in $(seq 1 3000); do
    [ -e "$shared/phase1" ] && break
    kill -0 $vm 2>/dev/null || break
    sleep 0.1
done
if [ -e "$shared/phase1" ]; then
    truncate -s 0 "$shared/victim.bin"
    touch "$shared/phase2"
fi
wait $vm
echo "ok: QEMU survived a host-side truncate under DAX"
