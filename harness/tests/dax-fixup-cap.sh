#!/usr/bin/env bash
# What QEMU's SIGBUS fix-up may cost.  A file truncated on the host while
# the guest reads it through its DAX window leaves every window page past
# the new end faulting; each guest access there raises SIGBUS in QEMU.
# The fix-up must keep the VM alive however many such pages the guest
# touches, and at a cost in VMAs (out of vm.max_map_count, which QEMU's
# own mmap()s and large malloc()s need too) bounded by the mappings the
# window holds, not by the pages touched: one fix-up per mapping puts
# zeros over all of it that lies past the end.
#
# The guest maps a 32 MiB file whole (16 window ranges, 8192 pages: more
# than the per-page budget an older fix-up had, after which it killed
# QEMU) and reads every page of it in a loop; meanwhile the host
# truncates the file to nothing.  The VM must live on, the loop must end
# by itself (zeros, or the guest's own SIGBUS once it learns the size),
# the mount must serve another file, byte for byte, afterwards, and the
# host's files must be untouched.  QEMU's trace must show the fix-up at
# work (so the test reached its case), and the peak count of QEMU's VMAs
# (lines of /proc/PID/maps) while the guest kept reading is reported and
# must stay within a few per window range.  FIXCAP_MIB sets the file's
# size (default 32; 1024 is the slow variant, run by hand: a 2 GiB window
# and about a quarter of an hour under TCG).  Arguments go to
# harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared fixcap
sampler=
on_exit '[ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true'
on_fail '[ ! -e "$work/vm.out" ] || tail -n 40 "$work/vm.out"'

mib=${FIXCAP_MIB:-32}
ranges=$((mib / 2))
python3 "$top/harness/tests/pattern.py" write "$shared/data.bin" \
    $((mib << 20)) 1
python3 "$top/harness/tests/pattern.py" write "$shared/other.bin" \
    $((4 << 20)) 2
head -c $((1 << 20)) /dev/urandom > "$shared/bystander.bin"
cp "$shared/other.bin" "$shared/bystander.bin" "$work/"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
# Every range of the file mapped into the window before the host acts
mmapio check /mnt/data.bin 1 || fail "the file reads back wrong"
mmapio survey /mnt/data.bin 40 > /tmp/survey.out 2>&1 &
survey=$!
sleep 5
host_step /mnt
wait $survey || fail "mmapio survey: $(cat /tmp/survey.out)"
cat /tmp/survey.out
pass "the guest kept reading a file truncated to nothing on the host"
mmapio check /mnt/other.bin 2 || fail "another file reads back wrong"
echo fresh > /mnt/fresh.txt && [ "$(cat /mnt/fresh.txt)" = fresh ] ||
    fail "the mount is no longer usable"
pass "the mount still serves other files"
umount /mnt || fail umount
GUEST

# Count QEMU's VMAs until it ends: the largest count, and the first
sample_vmas() {
    local pid=$1 n peak=0
    while [ -e "/proc/$pid/maps" ]; do
        n=$(wc -l < "/proc/$pid/maps" 2>/dev/null) || break
        [ "$n" -gt "$peak" ] && { peak=$n; echo "$peak" > "$work/vma.peak"; }
        sleep 0.2
    done
}

truncate_data() {
    local pid
    pid=$(cat "$work/state/qemu.pid")
    wc -l < "/proc/$pid/maps" > "$work/vma.before"
    sample_vmas "$pid" &
    sampler=$!
    truncate -s 0 "$shared/data.bin"
}

rc=0
run_vm_with_host_step "$shared" truncate_data --daemon ours \
    --cache-size $((2 * mib))M --mem 1G --state-dir "$work/state" \
    --log-dir "$work/logs" \
    --qemu-args "-trace enable=virtio_shmem_arena_sigbus,file=$work/trace" \
    "$@" "$work/guest.sh" > "$work/vm.out" 2>&1 || rc=$?
wait "$sampler" 2>/dev/null || true
sampler=
cat "$work/vm.out"
# What QEMU says when its fix-up (hw/virtio/virtio-shmem-arena.c) finds
# a fault it cannot repair, just before the SIGBUS kills it
gaveup=$(grep -F -m1 "SIGBUS in a virtio shared memory window outside its mappings" \
         "$work/logs/qemu.log" || true)
[ -z "$gaveup" ] ||
    fail "QEMU gave up on the pages past the end of the file: $gaveup"
[ "$rc" = 0 ] || fail "the guest run failed (status $rc)"
# ...and what it says once when it repaired such pages
grep -F -q "they now read as zeros" "$work/logs/qemu.log" ||
    fail "QEMU never warned that pages past the end now read as zeros"
grep -q "survey /mnt/data.bin: .* pages $((mib * 256)) " "$work/vm.out" ||
    fail "the guest did not read the whole file through its mapping"
pages=$(fixup_sum "$work/trace" pages)
[ "$pages" -gt 0 ] ||
    fail "QEMU's SIGBUS fix-up never ran: the guest missed the truncate"
pass "QEMU's fix-up put zeros over $pages pages past the end of the file"

before=$(cat "$work/vma.before")
peak=$(cat "$work/vma.peak")
echo "QEMU VMAs: $before before the truncate, peak $peak while the guest" \
     "read past the end"
# Up to two more VMAs for each of the file's window ranges, and slack
# for QEMU's own (threads, allocations)
[ "$peak" -le $((before + 2 * ranges + 64)) ] ||
    fail "QEMU's VMA count grew from $before to $peak"
pass "the fix-up cost at most a few VMAs per mapping"

[ "$(stat -c %s "$shared/data.bin")" = 0 ] ||
    fail "the truncated file grew back to $(stat -c %s "$shared/data.bin")"
for f in other.bin bystander.bin; do
    cmp "$shared/$f" "$work/$f" || fail "host file $f changed"
done
pass "the host's other files are byte for byte unchanged"
