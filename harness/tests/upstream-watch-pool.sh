#!/usr/bin/env bash
# Unmodified upstream QEMU 11.1 puts every DAX mapping into the vhost
# memory table: after answering a map or unmap it sends the daemon
# ADD_MEM_REG or REM_MEM_REG and waits for the answer, holding the BQL.
# The daemon's thread that waits for a map lets its dispatch lock go
# meanwhile, so that the main thread can take that message.  A second
# thread that waited for the window's lock while holding the dispatch
# lock for reading (the --watch-truncate thread, a pool worker) used to
# keep the main thread out: daemon, QEMU and guest hung.
#
# Here all of them at once: a pool of four workers, four guest readers
# that keep mapping ranges of their own files through a window too small
# for them (maps and the guest's reclaim all the time), a fifth that
# reads a file through a shared mapping while the host truncates and
# refills it over and over (the watch thread unmaps and remaps it).  The
# guest must finish, the files read back right, and the daemon's --stats
# prove every kind of round trip happened: maps, the guest's removals,
# and unmaps beyond them (the watch thread's).
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pattern="python3 $top/harness/tests/pattern.py"
window=$((64 << 20))
files=4
size=$((24 << 20))
cuts=20
tmpdir shared upwatch
logs=$work/logs
host_loop=
on_exit '[ -z "$host_loop" ] || kill "$host_loop" 2>/dev/null || true'

for i in $(seq 0 $((files - 1))); do
    $pattern write "$shared/f$i" $size $((i + 1))
done
$pattern write "$shared/victim" $((4 << 20)) 9

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
# The victim: mapped, then cut by the host (the watch thread unmaps it),
# refilled, mapped again, as many times as CUTS says.  Never read while
# cut: upstream QEMU has no fix-up for a page past the end of a file.
(
    n=1
    while [ $n -le "$CUTS" ]; do
        dd if=/mnt/victim of=/dev/null bs=4096 count=1 2>/dev/null || exit 1
        dd if=/mnt/victim of=/dev/null bs=4096 skip=512 count=1 \
            2>/dev/null || exit 1
        touch /mnt/cut-$n
        i=0
        while [ ! -e /mnt/done-$n ]; do
            i=$((i + 1)); [ $i -gt 600 ] && exit 2
            sleep 0.1
        done
        n=$((n + 1))
    done
) &
victim=$!
pids=
i=0
while [ $i -lt "$FILES" ]; do
    (
        round=0
        while [ $round -lt 3 ]; do
            r=0
            while [ $r -lt $((SIZE >> 21)) ]; do
                dd if=/mnt/f$i of=/dev/null bs=4096 skip=$((r * 512)) \
                    count=1 2>/dev/null || exit 1
                r=$((r + 1))
            done
            round=$((round + 1))
        done
    ) &
    pids="$pids $!"
    i=$((i + 1))
done
for p in $pids; do
    wait $p || fail "a reader failed"
done
pass "$FILES readers mapped their files three times through the window"
wait $victim || fail "the victim's reader failed (status $?)"
pass "the victim mapped and cut $CUTS times"
mmapio check /mnt/victim 9 > /dev/null || fail "the victim reads back wrong"
i=0
while [ $i -lt "$FILES" ]; do
    mmapio check /mnt/f$i $((i + 1)) > /dev/null || fail "f$i reads back wrong"
    i=$((i + 1))
done
pass "every file reads back right through the window"
umount /mnt || fail umount
GUEST

# The host cuts the victim each time the guest asks, and writes it anew
(
    for n in $(seq 1 $cuts); do
        while [ ! -e "$shared/cut-$n" ]; do sleep 0.1; done
        truncate -s 0 "$shared/victim"
        sleep 0.5
        $pattern write "$shared/victim" $((4 << 20)) 9
        touch "$shared/done-$n"
    done
) &
host_loop=$!

vm --upstream-device --daemon ours \
    --shared "$shared" --cache-size $((window >> 20))M --log-dir "$logs" \
    --daemon-args="--stats --watch-truncate --thread-pool-size=4 --log-level=debug" \
    --env FILES=$files --env SIZE=$size --env CUTS=$cuts --timeout 600 \
    "$@" "$work/guest.sh" ||
    guest_run_failed $? "$logs" "a hang shows as a timeout"

grep "stats:" "$logs/virtiofsd.log" | sed 's/^/  /'
maps=$(stat_count "$logs/virtiofsd.log" SETUPMAPPING)
removals=$(stat_count "$logs/virtiofsd.log" REMOVEMAPPING)
# The watch thread's cuts (debug lines of dax-resize.c): the whole range gone
cuts_seen=$(grep -c "DAX: file shrank: .* keeps 0x0 bytes mapped" \
    "$logs/virtiofsd.log" || true)
echo "daemon: ${maps:-0} SETUPMAPPING, ${removals:-0} REMOVEMAPPING, $cuts_seen ranges cut by the watch"
ranges=$((files * (size >> 21)))
[ "${maps:-0}" -gt $ranges ] ||
    fail "expected more than $ranges SETUPMAPPINGs (the window reclaimed)"
[ "${removals:-0}" -gt 0 ] ||
    fail "the guest removed no mapping: its reclaim never ran"
[ "$cuts_seen" -ge "$cuts" ] ||
    fail "the watch thread cut $cuts_seen ranges, expected $cuts or more"
pass "maps, removals and the watch thread's cuts on upstream QEMU, no hang"
