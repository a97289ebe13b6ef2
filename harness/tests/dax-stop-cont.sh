#!/usr/bin/env bash
# KNOWN TO FAIL (deadlock, QEMU side): QMP stop/cont in a loop while the
# guest churns DAX mappings through a small window.
#
# "stop" makes QEMU send GET_VRING_BASE and wait for the reply, without
# serving the back-end channel meanwhile.  If a queue thread of the daemon
# is waiting for QEMU's answer to a SHMEM_MAP/UNMAP (or MEM_READ/WRITE)
# at that moment, the daemon cannot stop the queue, and QEMU never
# answers: both wait forever (QEMU's main thread in recvmsg on the
# vhost-user socket, the daemon's queue thread in recvmsg on the back-end
# channel).  Needs the front-end to serve back-end requests while it
# waits for a reply.
# Extra arguments go to harness/vm.py (default: our daemon).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/vfsdax-stopcont.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/shared"

cat > "$work/guest.sh" <<'GUEST'
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt dax=always
mmapio write /mnt/big.bin $((48 << 20)) 4 || fail "write"
i=0
while [ $i -lt 40 ]; do
    echo 3 > /proc/sys/vm/drop_caches
    mmapio check /mnt/big.bin 4 >/dev/null || fail "check $i"
    i=$((i + 1))
done
pass "DAX churn done"
umount /mnt
GUEST

cat > "$work/qmp.py" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(600):
    try:
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.1)
f = s.makefile("rw")
s.settimeout(30)
def cmd(c):
    f.write(json.dumps({"execute": c}) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r
f.readline()
cmd("qmp_capabilities")
time.sleep(8)
n, t0 = 0, time.time()
try:
    while time.time() - t0 < 120:
        cmd("stop")
        cmd("cont")
        n += 1
        time.sleep(0.01)
except socket.timeout:
    print(f"FAIL: QEMU stopped answering QMP after {n} stop/cont cycles")
    sys.exit(1)
except (OSError, ValueError):
    pass        # the guest finished and QEMU quit
print(f"ok: {n} stop/cont cycles")
PY

python3 "$work/qmp.py" "$work/qmp.sock" > "$work/qmp.log" 2>&1 &
qmp=$!
rc=0
python3 "$top/harness/vm.py" --shared "$work/shared" --cache-size 16M \
    --daemon ours --timeout 240 \
    --qemu-args="-qmp unix:$work/qmp.sock,server=on,wait=off" \
    "$@" "$work/guest.sh" || rc=$?
wait $qmp || rc=1
cat "$work/qmp.log"
exit $rc
