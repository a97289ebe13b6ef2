#!/usr/bin/env bash
# Data integrity under DAX with constant reclaim: harness/guest-tools/fsx.c
# runs random writes, reads, mmap reads and writes, truncates, fallocates,
# hole punches and copy_file_ranges on three files of up to 16 MiB each,
# through -o dax=always and a 32 MiB cache window (16 ranges of 2 MiB for
# up to 24 the files need), so the guest keeps reclaiming ranges.
#
# That it did is checked, not assumed: QEMU traces every window mapping
# (virtio_shmem_arena_map) to a file, and a window range mapped again at
# another file offset than before was reclaimed by the guest and given to
# other data (a host-side cut or an upgrade to writable keeps the offset).
# The run fails unless there are more such remaps than the window has
# ranges.  Remaps to the same offset of another file are not told apart
# and not counted, so the figure is a lower bound.
#
# Linux 6.12's own reclaim can fail a read or write with EBUSY, with no
# request failing in the daemon and no wrong byte read; fsx tries such a
# call again (and reports how often), and this script fails if the
# daemon's log shows a mapping QEMU refused, so that a back-end EBUSY is
# never taken for the guest's.  Smaller windows (2 to 8 ranges) make it
# common: within a few thousand operations; at 32 MiB it was seen once
# in about ten runs (operation 59,732 of seed 1, on QEMU 10.2).  When no range is
# free, read() and write() reclaim one of the file's own ranges inline
# (fs/fuse/dax.c, inode_inline_reclaim_one_dmap()): after writing the
# range back, invalidate_inode_pages2_range() must drop its DAX entries,
# drops only clean ones, and its EBUSY goes back to the caller instead of
# a retry.  The guest's dynamic debug shows that call failing with -16
# (its background reclaim, try_to_free_dmap_chunks(), too).  It is the
# mmap writes that leave such entries: with -x mapwrite, 20,000
# operations on a 4 MiB window ran clean.  Run with --cache-size 4M to
# see it.
#
# Each read is checked against the tool's model of the files.  Then the
# host, while the guest still has the share mounted, compares its copies
# with the guest's model (sha256), and once more after the guest is gone.
#
# Before that, a short run with a byte changed behind the model's back must
# fail: the checker is shown to catch a difference in every run.  An
# operation stuck for two minutes fails the run too.
#
# FSX_SEED and FSX_OPS (environment) change the run; the seed is printed.
# FSX_EXTRA adds fsx options (e.g. "-x mapwrite" to narrow a failure down).
# Extra arguments go to harness/vm.py (default: ours, 32 MiB window); a
# --qemu-args of their own must keep the -trace option below.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
seed=${FSX_SEED:-1}
ops=${FSX_OPS:-100000}
window=$((32 << 20))
range=$((2 << 20))
tmpdir shared fsx
trace=$work/trace
: > "$trace"
logs=$work/logs

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mkdir /mnt/self
if fsx -n 400 -s 3 -c 100 -X 250 /mnt/self/a /mnt/self/b > /tmp/self.out 2>&1; then
    cat /tmp/self.out
    fail "fsx self-test: a byte changed behind the model's back went unnoticed"
fi
grep -q "MISMATCH" /tmp/self.out ||
    fail "fsx self-test failed, but not with a mismatch: $(cat /tmp/self.out)"
pass "fsx self-test: a changed byte is caught ($(grep -m1 MISMATCH /tmp/self.out))"
rm -r /mnt/self
mkdir /tmp/model
start=$(date +%s)
kernel_says() {
    echo "--- guest kernel messages about the file system"
    dmesg | grep -i -e fuse -e dax -e virtio -e warn -e bug -e "call trace" | tail -n 20
}
# In the background, watched: an operation that never returns (a fault
# waiting for a window range) must fail the run, not hold it until the
# harness's timeout.  fsx's watchdog says so and this loop gives up.
fsx -n "$FSX_OPS" -s "$FSX_SEED" -c 10000 -w 120 $FSX_EXTRA -o /tmp/model \
    /mnt/f0 /mnt/f1 /mnt/f2 > /tmp/fsx.out 2>&1 &
fsx_pid=$!
while kill -0 $fsx_pid 2>/dev/null; do
    if grep -q "has not returned" /tmp/fsx.out; then
        cat /tmp/fsx.out
        kernel_says
        fail "$(grep -m1 "has not returned" /tmp/fsx.out)"
    fi
    sleep 1
done
wait $fsx_pid
fsx_rc=$?
cat /tmp/fsx.out
if [ "$fsx_rc" != 0 ]; then
    kernel_says
    # The models at the failure, for the host to compare (fsx-diff.py)
    mkdir -p /mnt/fsx-failed && cp /tmp/model/* /mnt/fsx-failed/ && sync
    # Again last, where a short log tail (make check's) still shows it
    fail "$(grep -m1 -e "fsx: FAIL" -e MISMATCH /tmp/fsx.out)"
fi
pass "fsx: $FSX_OPS operations, seed $FSX_SEED, $(($(date +%s) - start)) s in the guest"
(cd /tmp/model && sha256sum f0 f1 f2) > /mnt/model.sha256
# The host compares its copies while the share is still mounted here.
host_step /mnt
cat /mnt/host-verdict
umount /mnt || fail umount
GUEST

host_ok=0
host_compare() {
    # Never fail here: the guest waits for phase2 either way.
    if (cd "$shared" && sha256sum -c model.sha256) > "$shared/host-verdict" 2>&1; then
        host_ok=1
    fi
}
rc=0
run_vm_with_host_step "$shared" host_compare --cache-size $((window >> 20))M \
    --log-dir "$logs" --timeout 1400 --qemu-args "-trace enable=virtio_shmem_arena_map,file=$trace" \
    --env FSX_SEED="$seed" --env FSX_OPS="$ops" --env FSX_EXTRA="${FSX_EXTRA:-}" \
    "$@" "$work/guest.sh" || rc=$?
if [ "$rc" != 0 ]; then
    on_fail '[ ! -d "$shared/fsx-failed" ] ||
        python3 "$top/harness/tests/fsx-diff.py" "$shared/fsx-failed" "$shared"'
    fail "the guest run failed (status $rc)"
fi
if [ -e "$logs/virtiofsd.log" ] &&
   grep -m3 "DAX: front-end failed" "$logs/virtiofsd.log"; then
    fail "QEMU refused window mappings: the guest's EBUSY may be ours"
fi
[ "$host_ok" = 1 ] ||
    fail "the host's files differ from the guest's model while mounted"
pass "the host's files equal the guest's model while the guest has them mounted"
(cd "$shared" && sha256sum -c --quiet model.sha256) ||
    fail "the host's files differ from the guest's model after the run"
pass "and after the guest is gone"

# Remaps, from the trace: "offset 0x... len 0x... fd_offset 0x..."
read -r maps ranges remaps < <(awk '
    /virtio_shmem_arena_map / {
        for (i = 1; i < NF; i++) {
            if ($i == "offset") { off = $(i + 1) }
            if ($i == "fd_offset") { foff = $(i + 1) }
        }
        maps++
        if (!(off in last)) { ranges++ }
        else if (last[off] != foff) { remaps++ }
        last[off] = foff
    }
    END { printf "%d %d %d\n", maps, ranges, remaps }' "$trace")
echo "window: $maps mappings over $ranges window offsets," \
     "$remaps ranges remapped to other file offsets"
nr_ranges=$((window / range))
[ "$remaps" -gt "$nr_ranges" ] ||
    fail "$remaps remaps for a window of $nr_ranges ranges:" \
         "the guest did not keep reclaiming ranges"
pass "the guest reclaimed window ranges ($remaps remaps > $nr_ranges ranges)"
