#!/usr/bin/env bash
# The front-end dies under the daemon: QEMU gets SIGKILL while the guest
# has live DAX mappings and requests in flight (a guest killed
# mid-request).  virtiofsd must notice the disconnect and exit by itself,
# with status 0, within vm.py's 10 s grace: nothing of it may hang on the
# requests it was serving.
# That the case was reached is checked, not assumed: the guest mounted
# with DAX active and read the file through it, the file was mapped into
# QEMU's window when the host killed it, and vm.py saw QEMU end by that
# SIGKILL before the guest script finished (a guest that panics, or
# powers off, ends QEMU otherwise).  Arguments go to harness/vm.py.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
shared=$(mktemp -d /tmp/vfsdax-qkill.XXXXXX)
work=$(mktemp -d /tmp/vfsdax-qkill-run.XXXXXX)
trap 'rm -rf "$shared" "$work"' EXIT

python3 "$top/harness/tests/pattern.py" write "$shared/data.bin" $((4 << 20)) 1
cat > "$work/guest.sh" <<'GUEST'
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio check /mnt/data.bin 1 || fail "data.bin through DAX"
echo "DAX-MOUNTED"
mmapio loop /mnt/data.bin 3600 > /dev/null 2>&1 &
(while :; do cat /mnt/data.bin > /dev/null; mmapio write /mnt/w.bin 65536 5; done) \
    > /dev/null 2>&1 &
(while :; do ls -l /mnt > /dev/null; done) &
sleep 2
host_step /mnt
sleep 60
fail "QEMU was not killed"
GUEST

kill_qemu() {
    local qemu
    qemu=$(cat "$work/state/qemu.pid")
    # The daemon's sandbox may show QEMU the file under another path
    grep -E '/data\.bin( \(deleted\))?$' "/proc/$qemu/maps" \
        > "$work/mapped" || true
    kill -KILL "$qemu"
}

rc=0
run_vm_with_host_step "$shared" kill_qemu --quiet --daemon ours \
    --cache-size 16M --state-dir "$work/state" --timeout 300 \
    "$@" "$work/guest.sh" > "$work/vm.out" 2>&1 || rc=$?
fail() {
    echo "FAIL: $*"
    cat "$work/vm.out"
    exit 1
}
[ "$rc" != 0 ] || fail "the guest finished although QEMU was killed"
grep -qx "DAX-MOUNTED" "$work/vm.out" ||
    fail "the guest did not mount the share with DAX and read through it"
[ -s "$work/mapped" ] ||
    fail "data.bin was not mapped into QEMU's window when QEMU was killed"
echo "ok: killed with data.bin mapped: $(head -n 1 "$work/mapped")"
grep -q "QEMU ended (killed by SIGKILL) before the guest script finished" \
    "$work/vm.out" || fail "QEMU did not end by the host's SIGKILL"
status=$(cat "$work/state/daemon.exit" 2>/dev/null || echo "unknown")
if [ "$status" = 0 ]; then
    echo "ok: virtiofsd exited by itself, status 0, after QEMU was killed mid-I/O"
else
    echo "FAIL: virtiofsd after QEMU was killed: $status"
    cat "$work/vm.out"
    exit 1
fi
