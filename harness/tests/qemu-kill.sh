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
. "$(dirname "$0")/lib.sh"
tmpdir shared qkill

python3 "$top/harness/tests/pattern.py" write "$shared/data.bin" $((4 << 20)) 1
guest_script "$work/guest.sh" <<'GUEST'
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
on_fail 'cat "$work/vm.out"'
[ "$rc" != 0 ] || fail "the guest finished although QEMU was killed"
grep -qx "DAX-MOUNTED" "$work/vm.out" ||
    fail "the guest did not mount the share with DAX and read through it"
[ -s "$work/mapped" ] ||
    fail "data.bin was not mapped into QEMU's window when QEMU was killed"
pass "killed with data.bin mapped: $(head -n 1 "$work/mapped")"
grep -q "QEMU ended (killed by SIGKILL) before the guest script finished" \
    "$work/vm.out" || fail "QEMU did not end by the host's SIGKILL"
status=$(cat "$work/state/daemon.exit" 2>/dev/null || echo "unknown")
[ "$status" = 0 ] || fail "virtiofsd after QEMU was killed: $status"
pass "virtiofsd exited by itself, status 0, after QEMU was killed mid-I/O"
