#!/usr/bin/env bash
# QMP stop/cont, over and over, while the guest churns DAX mappings through
# a small window.
#
# "stop" makes QEMU send GET_VRING_BASE and wait for the reply.  A daemon
# queue thread may be waiting at that moment for QEMU's answer to the
# SHMEM_MAP of a FUSE_SETUPMAPPING (or to a SHMEM_UNMAP, MEM_READ or
# MEM_WRITE), and the daemon cannot stop the queue before it has it: QEMU
# must serve the back-end channel while it waits (patches/*-vhost-user-
# serve-back-end-requests-*), or both wait for each other forever.
#
# Passes when: QEMU answers every stop and cont (a deadlock shows up as a
# QMP timeout), the cycles really overlap the guest's DAX I/O (the guest
# announces its churn and keeps going until the host is done), the guest
# reads its data intact all along and writes new data afterwards, the host
# sees the same bytes, and QEMU and the daemon are alive to the end.
# Extra arguments go to harness/vm.py (default: our daemon).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir "$work/shared"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
# Three times the window: every pass over it remaps all of it
mmapio write /mnt/big.bin $((48 << 20)) 4 || fail "write"
mmapio check /mnt/big.bin 4 >/dev/null || fail "first check"
touch /mnt/churn-started
i=0
while [ ! -e /mnt/stopcont-done ]; do
    i=$((i + 1))
    [ $i -gt 500 ] && fail "the host never finished its stop/cont cycles"
    echo 3 > /proc/sys/vm/drop_caches
    mmapio check /mnt/big.bin 4 >/dev/null || fail "check, pass $i"
done
echo "$i passes over the file during the host's stop/cont cycles"
mmapio fill /mnt/after.bin $((8 << 20)) 9 || fail "fill after the cycles"
mmapio check /mnt/after.bin 9 >/dev/null || fail "check after the cycles"
umount /mnt || fail "umount"
pass "DAX data intact across stop/cont"
GUEST

cat > "$work/qmp.py" <<'PY'
import json, os, socket, sys, time

sock, shared = sys.argv[1], sys.argv[2]
MIN_CYCLES, SECONDS, MAX_CYCLES = 30, 20, 2000

s = socket.socket(socket.AF_UNIX)
for _ in range(600):
    try:
        s.connect(sock)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("FAIL: no QMP socket")
s.settimeout(30)
f = s.makefile("rw")


def cmd(c):
    f.write(json.dumps({"execute": c}) + "\n")
    f.flush()
    while True:
        line = f.readline()
        if not line:
            raise EOFError(f"QEMU closed QMP during {c}")
        r = json.loads(line)
        if "error" in r:
            raise RuntimeError(f"{c}: {r['error']}")
        if "return" in r:
            return r["return"]


f.readline()
cmd("qmp_capabilities")
started = os.path.join(shared, "churn-started")
deadline = time.time() + 400
while not os.path.exists(started):
    if time.time() > deadline:
        sys.exit("FAIL: the guest never started its DAX churn")
    time.sleep(0.2)

n, t0 = 0, time.time()
try:
    while n < MAX_CYCLES and (n < MIN_CYCLES or time.time() - t0 < SECONDS):
        cmd("stop")
        if cmd("query-status")["status"] != "paused":
            sys.exit(f"FAIL: not paused after stop (cycle {n})")
        cmd("cont")
        n += 1
        time.sleep(0.01)
    if cmd("query-status")["status"] != "running":
        sys.exit("FAIL: not running after the last cont")
except socket.timeout:
    sys.exit(f"FAIL: QEMU stopped answering QMP after {n} stop/cont cycles "
             "(deadlock with the back-end?)")
except (OSError, EOFError, RuntimeError) as e:
    sys.exit(f"FAIL: after {n} stop/cont cycles: {e}")
open(os.path.join(shared, "stopcont-done"), "w").close()
print(f"ok: {n} stop/cont cycles in {time.time() - t0:.1f} s while the "
      "guest churned DAX mappings")
PY

python3 "$work/qmp.py" "$work/qmp.sock" "$work/shared" > "$work/qmp.log" 2>&1 &
qmp=$!
rc=0
vm --shared "$work/shared" --cache-size 16M \
    --daemon ours --daemon-must-live --timeout 420 \
    --qemu-args="-qmp unix:$work/qmp.sock,server=on,wait=off -D $work/trace.log -trace vhost_user_backend_serve_while_waiting" \
    "$@" "$work/guest.sh" || rc=$?
wait $qmp || rc=1
cat "$work/qmp.log"
# Informational: how often a stop (or another wait) caught the daemon with
# a back-end request in flight.  It depends on timing, so it is not checked.
served=$(grep -c serve_while_waiting "$work/trace.log" 2>/dev/null || true)
echo "QEMU served ${served:-0} back-end requests while waiting for the daemon"
[ $rc = 0 ] || bad "the guest run or the stop/cont cycles failed (status $rc)"
while read -r f seed bytes; do
    if [ ! -f "$work/shared/$f" ]; then
        bad "$f is missing on the host"
    elif ! python3 "$top/harness/tests/pattern.py" check \
        "$work/shared/$f" "$seed" "$bytes"; then
        bad "$f differs on the host"
    fi
done <<FILES
big.bin 4 $((48 << 20))
after.bin 9 $((8 << 20))
FILES
finish "stop/cont under DAX I/O, data intact, QEMU and daemon alive"
