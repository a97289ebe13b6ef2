#!/usr/bin/env bash
# Data integrity under DAX with constant reclaim: harness/guest-tools/fsx.c
# runs random writes, reads, mmap reads and writes, truncates, fallocates,
# hole punches and copy_file_ranges on three files of up to 16 MiB each,
# through -o dax=always and a 32 MiB cache window (16 ranges of 2 MiB for
# up to 24 the files need), so the guest keeps reclaiming ranges.
#
# Smaller windows (2 to 8 ranges) make Linux 6.12's own reclaim fail: a
# read or write gets EBUSY within a few thousand operations (the guest's
# fs/fuse/dax.c: invalidate_inode_pages2_range() on a range that mmap
# writes dirtied), with no request failing in the daemon and no wrong
# byte read.  Run with --cache-size 4M to see it.
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
# Extra arguments go to harness/vm.py (default: ours, 32 MiB window).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
seed=${FSX_SEED:-1}
ops=${FSX_OPS:-100000}
shared=$(mktemp -d /tmp/vfsdax-fsx.XXXXXX)
guest_script=$(mktemp)
trap 'rm -rf "$shared" "$guest_script"' EXIT

cat > "$guest_script" <<'GUEST'
. /lib/vfsdax.sh
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
run_vm_with_host_step "$shared" host_compare --cache-size 32M --timeout 1400 \
    --env FSX_SEED="$seed" --env FSX_OPS="$ops" --env FSX_EXTRA="${FSX_EXTRA:-}" \
    "$@" "$guest_script" || rc=$?
[ "$rc" = 0 ] || { echo "FAIL: the guest run failed (status $rc)"; exit 1; }
[ "$host_ok" = 1 ] ||
    { echo "FAIL: the host's files differ from the guest's model while mounted"; exit 1; }
echo "ok: the host's files equal the guest's model while the guest has them mounted"
(cd "$shared" && sha256sum -c --quiet model.sha256) ||
    { echo "FAIL: the host's files differ from the guest's model after the run"; exit 1; }
echo "ok: and after the guest is gone"
