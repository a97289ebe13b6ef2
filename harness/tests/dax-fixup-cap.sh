#!/usr/bin/env bash
# What QEMU's SIGBUS fix-up may cost.  Every page past the end of a file
# truncated on the host that the guest touches through its DAX window gets
# a page of zeros from the fix-up, and each such page may cost QEMU a VMA
# out of vm.max_map_count, which QEMU's own mmap()s and large malloc()s
# need too.  So each window has a budget of fix-up pages, and a guest that
# touches more dies at the budget, saying so, instead of leaving QEMU
# unable to map memory.
#
# The guest maps a file of more pages than any budget vm.max_map_count
# allows (it is at most a 32nd of it), the host truncates the file to
# nothing, then the guest touches each page once and records in another
# file of the share how many it touched.  QEMU must die of SIGBUS with the
# message naming its budget, and only after the guest has touched exactly
# that many pages past the end: not before (the fix-up worked up to its
# budget) and not later (the budget holds).  Arguments go to harness/vm.py.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
shared=$(mktemp -d /tmp/vfsdax-fixcap.XXXXXX)
work=$(mktemp -d /tmp/vfsdax-fixcap-run.XXXXXX)
trap 'rm -rf "$shared" "$work"' EXIT

fail() {
    echo "FAIL: $*"
    [ -e "$work/vm.out" ] && tail -n 40 "$work/vm.out"
    exit 1
}

limit=$(cat /proc/sys/vm/max_map_count)
# More pages than any budget (<= limit / 32), in whole 2 MiB ranges
mib=$(( ((limit / 32 + 64) * 4096 + (2 << 20) - 1) / (2 << 20) * 2 ))
[ "$mib" -le 512 ] ||
    fail "vm.max_map_count=$limit needs a ${mib} MiB file: too slow under TCG"
# A window that holds the whole file and the progress file: no reclaim
window=16
while [ "$window" -lt $((mib + 4)) ]; do window=$((window * 2)); done
python3 "$top/harness/tests/pattern.py" write "$shared/data.bin" \
    $((mib << 20)) 1

cat > "$work/guest.sh" <<'GUEST'
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio touchpast /mnt/data.bin 1 /mnt /mnt/progress.txt ||
    fail "touchpast failed"
fail "QEMU survived every page past the end of the file"
GUEST

truncate_data() {
    truncate -s 0 "$shared/data.bin"
}

rc=0
run_vm_with_host_step "$shared" truncate_data --daemon ours \
    --cache-size "${window}M" --mem 1G --state-dir "$work/state" \
    "$@" "$work/guest.sh" > "$work/vm.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "the guest finished: QEMU never gave up"
grep -q "touchpast /mnt/data.bin: $((mib << 20)) bytes mapped and checked" \
    "$work/vm.out" || fail "the guest did not map the whole file through DAX"
grep -q "QEMU ended (killed by SIGBUS) before the guest script finished" \
    "$work/vm.out" || fail "QEMU did not end by SIGBUS"
budget=$(sed -n 's/.*the guest touched more than \([0-9]*\) pages past the end of truncated files; giving up.*/\1/p' \
         "$work/vm.out" | head -n 1)
[ -n "$budget" ] || fail "QEMU did not say it gave up at its budget"
echo "ok: QEMU gave up at its budget of $budget pages"
touched=$(tr -d ' \n' < "$shared/progress.txt")
[ -n "$touched" ] || fail "the guest recorded no progress"
# The page that hit the budget was never counted: the guest died on it
[ "$touched" = "$budget" ] ||
    fail "the guest touched $touched pages past the end, the budget is $budget"
echo "ok: the fix-up served $budget pages past the end, then QEMU gave up"
[ "$budget" -lt $((mib << 8)) ] ||
    fail "the budget ($budget) is not below the file's $((mib << 8)) pages"
# After QEMU's death the daemon must still end by itself (vm.py waited)
[ "$(cat "$work/state/daemon.exit")" = 0 ] ||
    fail "virtiofsd ended with $(cat "$work/state/daemon.exit") after QEMU died"
echo "ok: virtiofsd ended cleanly after QEMU died"
