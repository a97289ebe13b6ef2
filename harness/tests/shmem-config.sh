#!/usr/bin/env bash
# GET_SHMEM_CONFIG between QEMU and virtiofsd: the daemon states the
# window its --cache-size gives it, and QEMU checks that against the
# device's cache-size when the daemon connects.
#   - a daemon that expects 32 MiB behind a 64 MiB device: QEMU refuses it
#     at realize, with both sizes in its error, and the guest never runs;
#   - the same daemon behind a 32 MiB device: a DAX mount works.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mkdir -p "$work/shared" "$work/bad" "$work/good"
head -c $((4 << 20)) /dev/urandom > "$work/shared/f"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
sha256sum /mnt/f
umount /mnt || fail umount
pass "a DAX mount behind a daemon that states the window's size"
GUEST

rc=0
vm --shared "$work/shared" --cache-size 64M \
    --daemon ours --daemon-args=--cache-size=32M --expect-qemu-exit 1 \
    --expect-daemon-exit any --log-dir "$work/bad" --timeout 60 "$@" \
    "$work/guest.sh" > "$work/bad.out" 2>&1 || rc=$?
want="the back-end expects shared memory region 0 to be 33554432 bytes, the device's is 67108864"
if ! grep -F -q "$want" "$work/bad/qemu.log"; then
    cat "$work/bad.out"; tail -5 "$work/bad/qemu.log"
    fail "QEMU did not refuse the daemon's 32 MiB window (status $rc)"
fi
# The guest's verdict line (its pass()) must never come: QEMU stopped at
# realize, before the guest ran, which vm.py reports as its own failure
# (125) naming QEMU's exit status.
verdict="ok: a DAX mount behind a daemon that states the window's size"
if grep -F -q "$verdict" "$work/bad.out"; then
    cat "$work/bad.out"
    fail "the guest ran behind a refused daemon"
fi
if [ "$rc" != 125 ] ||
   ! grep -F -q "QEMU ended (status 1) before the guest script finished" \
       "$work/bad.out"; then
    cat "$work/bad.out"
    fail "vm.py ended with status $rc, not 125 with QEMU's status 1" \
         "before the guest ran"
fi
pass "QEMU refused it: $(grep -F -m1 "$want" "$work/bad/qemu.log")"

vm --shared "$work/shared" --cache-size 32M \
    --daemon ours --log-dir "$work/good" "$@" "$work/guest.sh" ||
    fail "the guest behind a daemon of the same size"
sum=$(sha256sum < "$work/shared/f" | cut -d' ' -f1)
grep -q "$sum" "$work/good/output.log" ||
    fail "the guest read other data"
pass "a 32 MiB device serves a DAX mount behind a daemon of 32 MiB"
