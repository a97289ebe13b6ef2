#!/usr/bin/env bash
# QEMU's SIGBUS fix-up against a page that stopped faulting.  A guest
# access to a page past the end of a file truncated on the host raises
# SIGBUS in QEMU, whose fix-up maps a page of zeros there.  But by the
# time the fix-up runs, the page may be good again: the main thread may
# have remapped that part of the window (a back-end's map), or the file
# may have grown back.  Mapping zeros over it then would hide the file
# from the guest and drop its writes, so the fix-up must first ask the
# kernel whether the page still faults.
#
# The window between the fault and the fix-up is held open with gdb: a
# breakpoint on the fix-up stops QEMU there, the host rewrites the file
# with new content, and QEMU goes on.  The guest, reading through the
# mapping it held all along, must see the new content from the first
# byte on: zeros there mean the fix-up mapped over a good page.  gdb's
# output proves the breakpoint was hit, so the test cannot pass without
# the race.  Arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared fixrace
gdbpid=
on_exit '[ -z "$gdbpid" ] || kill "$gdbpid" 2>/dev/null || true'
for f in vm.out gdb.out; do
    on_fail "[ ! -e '$work/$f' ] || { echo '--- $f'; tail -n 30 '$work/$f'; }"
done

need gdb "apt-get install gdb"
size=$((4 << 20))
python3 "$top/harness/tests/pattern.py" write "$shared/data.bin" $size 1
python3 "$top/harness/tests/pattern.py" write "$work/new.bin" $size 2

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio reread /mnt/data.bin 1 2 /mnt || fail "reread"
pass "the guest read the file's new content through its old mapping"
umount /mnt || fail umount
GUEST

# Truncate the file under the guest's mapping, then stop QEMU in the
# fix-up when the guest's next access faults, and rewrite the file there.
truncate_and_arm() {
    local qemu i
    truncate -s 0 "$shared/data.bin"
    qemu=$(cat "$work/state/qemu.pid")
    gdb -p "$qemu" -batch -nx \
        -ex 'set pagination off' -ex 'set confirm off' \
        -ex 'handle all nostop noprint pass' \
        -ex 'break shmem_arena_sigbus_fixup' \
        -ex "shell touch $work/armed" \
        -ex 'continue' \
        -ex 'bt 3' \
        -ex "shell cat $work/new.bin > $shared/data.bin && echo REFILLED" \
        -ex 'delete' -ex 'detach' > "$work/gdb.out" 2>&1 < /dev/null &
    gdbpid=$!
    for ((i = 0; i < 1200; i++)); do
        [ -e "$work/armed" ] && return 0
        kill -0 "$gdbpid" 2>/dev/null || break
        sleep 0.1
    done
    fail "gdb did not attach to QEMU and set its breakpoint"
}

rc=0
run_vm_with_host_step "$shared" truncate_and_arm --daemon ours \
    --cache-size 16M --state-dir "$work/state" \
    "$@" "$work/guest.sh" > "$work/vm.out" 2>&1 || rc=$?
if [ -n "$gdbpid" ]; then
    wait "$gdbpid" || true
    gdbpid=
fi
grep -q "Breakpoint 1, .*shmem_arena_sigbus_fixup" "$work/gdb.out" ||
    fail "the guest's access never reached QEMU's SIGBUS fix-up"
grep -qx "REFILLED" "$work/gdb.out" ||
    fail "the host did not rewrite the file while QEMU was held in the fix-up"
pass "QEMU held in its SIGBUS fix-up while the host rewrote the file"
[ "$rc" = 0 ] || fail "the guest run failed (status $rc)"
pass "the guest read the new content, not the fix-up's zeros"
