#!/usr/bin/env bash
# A guest that floods the hiprio queue: it looks up 12,000 files, then
# drops its caches, and Linux sends a FORGET for every one of them, far
# more than the queue holds.  Twice over.  Our virtiofsd, started with
# --rlimit-nofile=$NOFILE, keeps an fd per inode the guest knows: the
# host counts them (/proc/PID/fd) at each step.  The count must stay
# under the bound the option gives (above the 12,000), reach the 12,000
# lookups (or the test did not flood anything), fall back to where it
# started once the FORGETs are through, and not grow from one round to
# the next; the daemon must live through it all and still serve the
# mount.
# The daemon holds inodes by fd (--inode-file-handles=never; its default,
# prefer, would use handles).  Under inodes-by.sh handle they are held by
# file handle: then the count must not grow with the lookups at all, and
# the daemon's count of inodes held by handle (its log) must reach the two
# rounds' lookups.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
FILES=12000
# Within the hard limit of common hosts (a daemon cannot raise it)
NOFILE=16384
# fs.c keeps 64 fds for the daemon itself
BOUND=$((NOFILE - 64))
shared=$work/shared
watcher=
on_exit '[ -z "$watcher" ] || kill $watcher 2>/dev/null || true'
mkdir -p "$shared/many"
(cd "$shared/many" && seq -f 'f%g' 1 $FILES | xargs touch)

guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
# step NAME: the host counts the daemon's fds, then the guest goes on
step() {
    touch /mnt/.\$1
    i=0
    while [ ! -e /mnt/.\$1.done ]; do
        i=\$((i + 1)); [ \$i -gt 1200 ] && fail "the host never counted at \$1"
        sleep 0.1
    done
}
step base
for round in 1 2; do
    n=\$(ls -l /mnt/many | grep -c ' f[0-9]')
    [ "\$n" = $FILES ] || fail "round \$round: the guest sees \$n of $FILES files"
    step peak\$round
    echo 3 > /proc/sys/vm/drop_caches
    # The FORGETs are sent from a queue the guest drains at its pace
    sleep 5
    step after\$round
done
echo fresh > /mnt/fresh && [ "\$(cat /mnt/fresh)" = fresh ] ||
    fail "the mount no longer works"
pass "$FILES lookups forgotten twice, the mount still works"
umount /mnt || fail umount
GUEST

# The daemon's fd count at each of the guest's steps, in $work/fds
count_fds() {
    local pid step
    while [ ! -s "$work/state/daemon.pid" ]; do sleep 0.1; done
    pid=$(cat "$work/state/daemon.pid")
    for step in base peak1 after1 peak2 after2; do
        while [ ! -e "$shared/.$step" ]; do sleep 0.2; done
        echo "$step $(ls "/proc/$(serving_pid "$pid")/fd" | wc -l)" >> "$work/fds"
        touch "$shared/.$step.done"
    done
}
count_fds &
watcher=$!
vm --shared "$shared" --state-dir "$work/state" \
    --daemon ours --daemon-args="--rlimit-nofile=$NOFILE --inode-file-handles=never" \
    --daemon-must-live \
    --timeout 900 "$@" "$work/guest.sh" || fail "the guest run failed (status $?)"
[ "$(wc -l < "$work/fds")" = 5 ] ||
    fail "the host counted at $(wc -l < "$work/fds") of 5 steps"
read -r base peak1 after1 peak2 after2 < <(awk '{ printf "%s ", $2 } END { print "" }' "$work/fds")
echo "daemon fds: at start $base; round 1: $peak1, after the FORGETs" \
     "$after1; round 2: $peak2, then $after2 (bound $BOUND)"
case ${VFSD_OURS_ARGS:-} in
*--inode-file-handles=prefer*|*--inode-file-handles=mandatory*)
    for n in "$peak1" "$peak2"; do
        [ $((n - base)) -le 16 ] ||
            fail "$n fds at the peak, $base before: inodes held by fd"
    done
    made=$(sed -n 's/.*file handles: \([0-9]*\) inodes held by handle.*/\1/p' \
           "$VFSD_OURS_LOG" | tail -n 1)
    [ "${made:-0}" -ge $((2 * FILES)) ] ||
        fail "${made:-no} inodes held by handle: the $((2 * FILES)) lookups did not all reach the daemon"
    pass "$made inodes held by handle, the fds stayed at $base..$peak1"
    ;;
*)
    for n in "$peak1" "$peak2"; do
        [ $((n - base)) -le $BOUND ] ||
            fail "$n fds open, more than the $BOUND --rlimit-nofile=$NOFILE allows"
        [ "$n" -ge $((base + FILES)) ] ||
            fail "$n fds at the peak: the $FILES lookups did not all reach the daemon"
    done
    ;;
esac
# The share's directories and the guest's markers may stay looked up
for n in "$after1" "$after2"; do
    [ "$n" -le $((base + 16)) ] ||
        fail "$n fds after the FORGETs, $base before the lookups"
done
[ "$peak2" -le $((peak1 + 16)) ] || fail "the second round holds more fds"
pass "the daemon's fds came back to $after2 after $((2 * FILES)) FORGETs"
