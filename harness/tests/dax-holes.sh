#!/usr/bin/env bash
# What the DAX window's holes cost the host.  The guest writes one byte
# into every page of a 4 GiB window with nothing mapped in it, through
# its BAR (the share is mounted without DAX, only to fetch the tool, so
# nothing is ever mapped; then the driver lets the window go).  QEMU's memory must grow by less
# than 64 MiB: the holes all show one small scratch buffer, rather than
# anonymous memory that grows a page per page the guest writes.
#
# The memory is counted the way the kernel charges it: Pss (smaps_rollup)
# and RssAnon.  VmRSS counts a page once per place it is mapped, so the
# scratch, mapped all over the window, shows there up to the window's
# size although it is allocated once; it is reported, not checked.  The
# host samples QEMU from the guest's go until QEMU ends; the guest waits
# after writing so that a sample sees it.  Arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared holes
sampler=
on_exit '[ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true'
on_fail '[ ! -e "$work/vm.out" ] || tail -n 40 "$work/vm.out"'

# This tree's winpeek, so that the test does not depend on the guest
# image being rebuilt with its touch mode
gcc -O2 -static -Wall -o "$shared/winpeek" \
    "$top/harness/guest-tools/winpeek.c" || fail "cannot build winpeek"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=never
grep " /mnt " /proc/self/mountinfo | grep -q "dax=never" ||
    fail "the share is not mounted with dax=never"
res=$(window_bar) || fail "no virtio-fs device with a window"
win=$(stat -c %s "$res")
[ "$win" = $((4 << 30)) ] || fail "the window is $win bytes, not 4 GiB"
cp /mnt/winpeek /tmp/winpeek || fail "copying winpeek"
host_step /mnt
# The driver maps the window write-back for DAX, and PAT then refuses
# the BAR's own (uncached) mapping: let the window go
umount /mnt || fail umount
vdev=$(basename "$(ls -d "${res%/resource2}"/virtio*)")
echo "$vdev" > /sys/bus/virtio/drivers/virtiofs/unbind ||
    fail "cannot unbind $vdev from virtiofs"
/tmp/winpeek touch "$res" "$win" || fail "winpeek touch"
# Let the host's sampler see QEMU after the last write
sleep 3
pass "the guest wrote into every page of the empty window"
GUEST

# smaps_rollup's Pss and status's RssAnon and VmRSS, in KiB, of PID
memory() {
    local pss anon rss
    pss=$(awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup")
    anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$1/status")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status")
    echo "$pss $anon $rss"
}

# The largest of each until QEMU ends
sample() {
    local pid=$1 m peak=(0 0 0) i
    while m=($(memory "$pid" 2>/dev/null)) && [ ${#m[@]} = 3 ]; do
        for i in 0 1 2; do
            [ "${m[i]}" -gt "${peak[i]}" ] && peak[i]=${m[i]}
        done
        echo "${peak[*]}" > "$work/peak"
        sleep 0.5
    done
}

start_sampling() {
    local pid
    pid=$(cat "$work/state/qemu.pid")
    memory "$pid" > "$work/before"
    sample "$pid" &
    sampler=$!
}

rc=0
run_vm_with_host_step "$shared" start_sampling --daemon ours \
    --cache-size 4G --mem 1G \
    --state-dir "$work/state" "$@" "$work/guest.sh" \
    > "$work/vm.out" 2>&1 || rc=$?
wait "$sampler" 2>/dev/null || true
sampler=
cat "$work/vm.out"
[ "$rc" = 0 ] || fail "the guest run failed (status $rc)"
grep -q "winpeek: touched 1048576 pages" "$work/vm.out" ||
    fail "the guest did not write into every page of the window"

read -r pss0 anon0 rss0 < "$work/before"
read -r pss1 anon1 rss1 < "$work/peak"
echo "QEMU memory (KiB), before the guest wrote and at the peak:" \
     "Pss $pss0 -> $pss1, RssAnon $anon0 -> $anon1, VmRSS $rss0 -> $rss1"
limit=$((64 << 10))
[ $((pss1 - pss0)) -lt "$limit" ] ||
    fail "QEMU's Pss grew by $(((pss1 - pss0) >> 10)) MiB"
[ $((anon1 - anon0)) -lt "$limit" ] ||
    fail "QEMU's anonymous memory grew by $(((anon1 - anon0) >> 10)) MiB"
pass "writing every page of a 4 GiB hole cost QEMU less than 64 MiB"
