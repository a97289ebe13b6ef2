#!/usr/bin/env bash
# DAX past the end of a small file.  The guest maps whole 2 MiB ranges:
# a 4200-byte file gets one, and all but its first two pages lie past the
# end of the file.  With our virtiofsd QEMU must never hold a file page
# there, since touching one raises SIGBUS (fatal to QEMU outside vCPU
# threads, and a stopped VM under KVM).  The guest reads and writes every
# page of the window through its BAR (winpeek, iomem=relaxed), past what
# any file lets it reach: everything past the end must read as zeros and
# QEMU's SIGBUS fix-up must never run (its trace counts the pages it
# fills).  Then the file grows, by the guest's own appending write() and
# on the host: the guest must read the new data through the range it
# already has, never zeros.  Last, a control: the host truncates the file
# and the guest touches its first page, which the fix-up must fill, and
# be seen to (QEMU traces it lazily, at its next map): the trace must
# count that one fix-up and no other.
# Extra arguments go to harness/vm.py (default: ours, 16 MiB window).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared eof
trace=$work/trace
: > "$trace"
out=$work/vm.out
ctl=
on_exit '[ -z "$ctl" ] || kill "$ctl" 2>/dev/null || true'

# "DAXEOF01", then bytes that are never zero, 4200 in all
{ printf DAXEOF01; head -c 4192 /dev/zero | tr '\0' 'x'; } > "$shared/small.bin"
head -c 65536 /dev/urandom > "$shared/host-tail"
{ printf FLUSHDAX; head -c 8184 /dev/zero | tr '\0' 'y'; } > "$shared/flush.bin"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
res=$(window_bar) || fail "no virtio-fs device with a window"
win=$(stat -c %s "$res")
# The first read maps the file at the start of the window
[ "$(head -c 8 /mnt/small.bin)" = DAXEOF01 ] || fail "reading the file"
scan=$(winpeek scan "$res" "$win") || fail "winpeek: $scan"
echo "$scan"
case "$scan" in
*"first word 0x3130464f45584144") ;;
*) fail "the window does not start with the file" ;;
esac

# The guest appends (an extending write goes through FUSE_WRITE), then
# reads the new tail through its range, with read() and in the window
dd if=/dev/urandom of=/tmp/tail bs=1024 count=64 2>/dev/null
cat /tmp/tail >> /mnt/small.bin || fail "append"
tail -c 65536 /mnt/small.bin > /tmp/back
cmp /tmp/back /tmp/tail || fail "the guest's appended data reads back wrong"
winpeek dump "$res" 4200 65536 > /tmp/w || fail "winpeek dump"
cmp /tmp/w /tmp/tail || fail "the window does not show the appended data"
pass "the guest's own growth reads back through its range"

# The host appends; the guest learns the size once its attributes expire
host_step /mnt
sleep 2
size=$(stat -c %s /mnt/small.bin)
[ "$size" = $((4200 + 2 * 65536)) ] || fail "size after the host grew it: $size"
tail -c 65536 /mnt/small.bin > /tmp/hback
cmp /tmp/hback /mnt/host-tail || fail "the host's appended data reads back wrong"
pass "growth on the host reads back through the guest's range"

# The control: the host truncates the file under the guest's range, and
# the guest touches its first page, which only the fix-up can save.  A
# new file's mapping then makes QEMU report the pages it filled (it does
# so lazily, at its next map or unmap), so that the trace counts every
# fix-up made before, this one included: exactly 1 means none before.
# (One fix-up fills all of a mapping past the file's end at once.)
touch /mnt/ctl-go
i=0
while [ ! -e /mnt/ctl-done ]; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "the host never truncated the file"
    sleep 0.1
done
winpeek dump "$res" 0 8 > /tmp/ctl || fail "winpeek dump after the truncation"
head -c 8 /dev/zero | cmp -s - /tmp/ctl ||
    fail "the truncated file's page does not read as zeros"
[ "$(head -c 8 /mnt/flush.bin)" = FLUSHDAX ] || fail "reading flush.bin"
pass "the guest touched a page past the end of a file truncated on the host"
umount /mnt || fail umount
GUEST

host_grow() {
    cat "$shared/host-tail" >> "$shared/small.bin"
    # The control's truncation, once the guest is done with the file
    (
        i=0
        while [ ! -e "$shared/ctl-go" ]; do
            i=$((i + 1)); [ $i -gt 3000 ] && exit 0
            sleep 0.1
        done
        truncate -s 0 "$shared/small.bin"
        touch "$shared/ctl-done"
    ) > /dev/null 2>&1 &
    ctl=$!
}
rc=0
run_vm_with_host_step "$shared" host_grow --daemon ours --cache-size 16M \
    --append iomem=relaxed \
    --qemu-args "-trace enable=virtio_shmem_arena_sigbus,file=$trace" \
    "$@" "$work/guest.sh" > "$out" || rc=$?
cat "$out"
[ "$rc" = 0 ] || fail "the guest run failed (status $rc)"

# Every page but the file's two (16 MiB: 4096) read as zeros
grep -q '^winpeek: 4096 pages, 4094 zero pages' "$out" ||
    fail "the guest did not read the window past the end of the file"
pass "the guest read and wrote 4094 window pages past the end of the file"
# "F fix-ups: N pages past the end of truncated files now read as zeros"
fixups=$(fixup_sum "$trace" fix-ups:)
[ "$fixups" != 0 ] ||
    fail "the control's page past the end is not in the fix-up's" \
         "trace: its zero would prove nothing"
[ "$fixups" = 1 ] ||
    fail "QEMU's SIGBUS fix-up ran $((fixups - 1)) times besides" \
         "the control's: the window held file pages past the end of the file"
pass "QEMU's SIGBUS fix-up filled the control's mapping, and never ran before"
