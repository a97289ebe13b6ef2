#!/usr/bin/env bash
# Two guests, each with its own QEMU and its own virtiofsd on the same host
# directory, both mounting it with -o dax=always, share one file through
# mmap(MAP_SHARED): guest A stores 1, 2, ... N into it, each only after
# guest B has acknowledged the previous value through the same mapping, so
# B must observe every increment, in order (harness/guest-tools/pingpong.c).
# No msync, no read(): the stores travel through the host's page cache,
# which both DAX windows map.  A side without progress for PINGPONG_WAIT
# seconds fails, and harness/two-vms.py stops the other.
#
# PINGPONG_N (default 1000) increments.  PINGPONG_DAX=0 runs the same
# without the cache window: each guest then has its own page cache, and
# the test must fail (that is how it was shown to catch lost stores).
# Extra arguments go to harness/vm.py for both guests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
n=${PINGPONG_N:-1000}
wait_s=${PINGPONG_WAIT:-60}
dax=${PINGPONG_DAX:-1}
mkdir "$work/shared"
head -c 4096 /dev/zero > "$work/shared/counter"

for role in writer reader; do
    guest_script "$work/$role.sh" <<GUEST
if [ "\$PINGPONG_DAX" = 1 ]; then
    mount_virtiofs "\$VFS_TAG" /mnt dax=always
    dax_active /mnt || fail "dax=always requested, DAX not active"
else
    mount_virtiofs "\$VFS_TAG" /mnt
fi
pingpong $role /mnt/counter "\$PINGPONG_N" "\$PINGPONG_WAIT" ||
    fail "guest \$VFS_GUEST ($role)"
pass "guest \$VFS_GUEST ($role) done"
umount /mnt || fail umount
GUEST
done

window=(--cache-size 16M)
[ "$dax" = 1 ] || window=(--cache-size "")
two_vms --shared "$work/shared" --daemon ours \
    --smp 1 --mem 512M "${window[@]}" --env PINGPONG_N="$n" \
    --env PINGPONG_WAIT="$wait_s" --env PINGPONG_DAX="$dax" "$@" \
    "$work/writer.sh" "$work/reader.sh" ||
    fail "the two guests did not count to $n together (status $?)"
# The file on the host ends with both words at N
python3 - "$work/shared/counter" "$n" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
value, = struct.unpack_from("<Q", data, 0)
ack, = struct.unpack_from("<Q", data, 64)
n = int(sys.argv[2])
if (value, ack) != (n, n):
    print(f"FAIL: the host file holds value {value}, ack {ack}; want {n}, {n}")
    sys.exit(1)
print(f"ok: {n} increments observed by the other guest, the host file agrees")
PY
