#!/usr/bin/env bash
# --cache=adaptive keeps its promise: a guest sees a host change to a file
# it looked at no later than MAX seconds after the change, later than
# cache=auto would for a file the host had left alone, and at once (MIN)
# for one the host had just changed.
#
# The daemon runs with --adaptive-timeouts=1:8:1 (a timeout is the time
# the inode, or a name's directory, had gone unchanged, from 1 to 8 s).
# The host makes s/ long before the guest looks (at least 12 s, so that
# only the 8 s cap keeps its timeouts at 8) and changes fresh just before.
# The guest looks at both (attributes, a name, a missing name, a
# listing), the host changes them all a second later, and the guest polls
# until it sees each change:
#   fresh   seen within 3 s of the look (MIN, plus the second)
#   old/*   seen no sooner than 4 s after the look (cache=auto: 1 s) and
#           no later than 10 s (the change at ~1 s, plus MAX 8, plus 1 s
#           of slack for a guest under TCG)
# With MODE=auto in the environment the same run shows the old files'
# changes early, which fails: the test can tell the modes apart; with
# TIMEOUTS=1:20:1 (no cap at 8 s) they show late, which fails too.
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
MODE=${MODE:-adaptive}
TIMEOUTS=${TIMEOUTS:-1:8:1}
shared=$work/share
# One level down: the share's root changes all the time (the guest's
# and host's step files), and a lookup of a name in it brings the named
# directory's new attributes, which would show its changes early.  Each
# check has its own directory: a new listing brings its names' new
# attributes too.
mkdir -p "$shared/s/old" "$shared/s/listed"
echo data > "$shared/s/old/attr"
chmod 644 "$shared/s/old/attr"
echo data > "$shared/s/old/gone"
echo data > "$shared/s/listed/a"
echo data > "$shared/fresh"
chmod 644 "$shared/fresh"
# The guest waits until s/ is 13 s old by the host's clock
date +%s > "$shared/made"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
now() { awk '{ print $1 }' /proc/uptime; }
# The host's clock, as the share's files carry it
made=$(cat /mnt/made)
while [ $(( $(date +%s) - made )) -lt 13 ]; do sleep 0.5; done
host_step /mnt
# The look: each answer comes with its timeout
look=$(now)
[ "$(stat -c %a /mnt/s/old/attr)" = 644 ] || fail "old/attr's mode before"
[ -e /mnt/s/old/gone ] || fail "old/gone missing before"
[ ! -e /mnt/s/old/born ] || fail "old/born there before"
[ "$(ls /mnt/s/listed)" = a ] || fail "listing before: $(ls /mnt/s/listed)"
[ "$(stat -c %a /mnt/fresh)" = 644 ] || fail "fresh's mode before"
touch /mnt/looked
seen_attr= seen_gone= seen_born= seen_list= seen_fresh=
i=0
while [ $i -lt 200 ]; do
    t=$(now)
    [ -n "$seen_attr" ] || [ "$(stat -c %a /mnt/s/old/attr)" != 600 ] ||
        seen_attr=$t
    [ -n "$seen_gone" ] || [ -e /mnt/s/old/gone ] || seen_gone=$t
    [ -n "$seen_born" ] || [ ! -e /mnt/s/old/born ] || seen_born=$t
    [ -n "$seen_list" ] || ! ls /mnt/s/listed | grep -qx b || seen_list=$t
    [ -n "$seen_fresh" ] || [ "$(stat -c %a /mnt/fresh)" != 600 ] ||
        seen_fresh=$t
    [ -n "$seen_attr" ] && [ -n "$seen_gone" ] && [ -n "$seen_born" ] &&
        [ -n "$seen_list" ] && [ -n "$seen_fresh" ] && break
    sleep 0.1
    i=$((i + 1))
done
rc=0
for what in attr gone born list fresh; do
    eval at=\$seen_$what
    if [ -z "$at" ]; then
        echo "FAIL: $what: the host's change not seen in 20 s"
        rc=1
        continue
    fi
    after=$(awk -v a="$at" -v b="$look" 'BEGIN { printf "%.2f", a - b }')
    echo "seen $what $after s after the look"
    if [ $what = fresh ]; then
        awk -v d="$after" 'BEGIN { exit !(d <= 3) }' || {
            echo "FAIL: fresh: seen $after s after the look (at most 3)"
            rc=1
        }
    else
        awk -v d="$after" 'BEGIN { exit !(d >= 4 && d <= 10) }' || {
            echo "FAIL: old/$what: seen $after s after the look (4 to 10)"
            rc=1
        }
    fi
done
[ $rc = 0 ] && pass "host changes seen within the adaptive bound"
exit $rc
GUEST

# The host's changes, a second after the guest's look, in the background
# so that the guest's look is not held up
change_later() {
    (
        i=0
        while [ ! -e "$shared/looked" ] && [ $i -lt 600 ]; do
            sleep 0.05
            i=$((i + 1))
        done
        sleep 1
        chmod 600 "$shared/s/old/attr" "$shared/fresh"
        rm "$shared/s/old/gone"
        echo data > "$shared/s/old/born"
        echo data > "$shared/s/listed/b"
    ) &
}
# Just before the guest's look: fresh is changed now
host_step() {
    chmod 644 "$shared/fresh"
    touch -c "$shared/fresh"
    change_later
}

if [ "$MODE" = adaptive ]; then
    dargs="--adaptive-timeouts=$TIMEOUTS"
else
    dargs=
fi
log=$work/log
run_vm_with_host_step "$shared" host_step --daemon ours --cache-mode "$MODE" \
    --daemon-args="$dargs" --log-dir "$log" "$@" "$work/guest.sh"
