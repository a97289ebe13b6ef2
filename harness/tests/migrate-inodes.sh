#!/usr/bin/env bash
# Live migration of a guest that knows many inodes: the guest lists a
# directory of N files with their attributes (a lookup each), is migrated
# by harness/migrate.py, and lists it again on the destination.  Both
# daemons' logs must show every inode carried (N files, the directory and
# the guest's files of its own), and the measurements are printed:
#   # inodes N, state B bytes, saved in S us, restored in R us, downtime D ms
#
#   [MIGRATE_INODES=N] migrate-inodes.sh [migrate.py/vm.py options]
#
# MIGRATE_INODES (default 10000) is N; --daemon/--dest-daemon pick the
# daemons (the Rust one logs no sizes: only its downtime is printed).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
n=${MIGRATE_INODES:-10000}
shared=$work/shared
mkdir -p "$shared/many"
(cd "$shared/many" && seq -w 1 "$n" | sed 's/^/f/' | xargs touch)

guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
[ "\$(ls -l /mnt/many | grep -c '^-')" = $n ] || fail "listing before"
touch /mnt/.migrate-ready
i=0
while [ ! -e /mnt/.migrate-done ]; do
    sleep 0.1; i=\$((i + 1)); [ \$i -gt 1200 ] && fail "no migration"
done
[ "\$(cat /mnt/.migrate-done)" = completed ] || fail "migration failed"
[ "\$(ls -l /mnt/many | grep -c '^-')" = $n ] || fail "listing after"
stat /mnt/many/f$(seq -w 1 "$n" | tail -1) > /dev/null || fail "stat after"
pass "$n files listed with their attributes on the destination"
GUEST

# Which daemon runs each end: only ours logs what it saved and restored
src_daemon=ours dst_daemon=
prev=
for a in "$@"; do
    case $prev in
    --daemon) src_daemon=$a ;;
    --dest-daemon) dst_daemon=$a ;;
    esac
    case $a in
    --daemon=*) src_daemon=${a#--daemon=} ;;
    --dest-daemon=*) dst_daemon=${a#--dest-daemon=} ;;
    esac
    prev=$a
done
[ "$src_daemon" = auto ] && src_daemon=ours
dst_daemon=${dst_daemon:-$src_daemon}

migrate_vm --shared "$shared" --log-dir "$work/log" \
    --stats-file "$work/stats.json" "$@" "$work/guest.sh"

downtime=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["downtime_ms"])' "$work/stats.json")
saved=$(grep -h "state saved" "$work/log/virtiofsd-src.log" || true)
restored=$(grep -h "state restored" "$work/log/virtiofsd-dst.log" || true)
if [ "$src_daemon" != ours ]; then
    echo "# downtime $downtime ms (the source daemon logs no state size)"
    exit 0
fi
[ -n "$saved" ] ||
    fail "our source daemon never said \"state saved\""
[ "$dst_daemon" != ours ] || [ -n "$restored" ] ||
    fail "our destination daemon never said \"state restored\""
inodes=$(sed -n 's/.*bytes: \([0-9]*\) inodes.*/\1/p' <<< "$saved")
bytes=$(sed -n 's/.*state saved, \([0-9]*\) bytes.*/\1/p' <<< "$saved")
save_us=$(sed -n 's/.* in \([0-9]*\) us$/\1/p' <<< "$saved")
[ "$inodes" -ge "$n" ] ||
    fail "the source saved $inodes inodes, the guest knew $n"
if [ -n "$restored" ]; then
    got=$(sed -n 's/.*bytes: \([0-9]*\) inodes.*/\1/p' <<< "$restored")
    [ "$got" = "$inodes" ] ||
        fail "the destination restored $got of $inodes inodes"
    load_us=$(sed -n 's/.* in \([0-9]*\) us$/\1/p' <<< "$restored")
    pass "$inodes inodes saved and restored"
fi
echo "# inodes $inodes, state $bytes bytes, saved in $save_us us," \
     "restored in ${load_us:-?} us, downtime $downtime ms"
