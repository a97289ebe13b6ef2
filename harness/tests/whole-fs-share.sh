#!/usr/bin/env bash
# --inode-file-handles=prefer holds inodes by handle only where handles
# reach nothing beyond the share: open_by_handle_at() opens any inode of
# the file system, and no sandbox bounds it to a subtree.  One boot, five
# daemons of ours (vm.py --extra-daemon), all with the default prefer:
#
#   row    share                                    the daemon must
#   ns     a tmpfs of its own, --sandbox=namespace  hold inodes by handle,
#   chroot the same tmpfs, --sandbox=chroot         open some from one, and
#   none   the same tmpfs, --sandbox=none           restrict itself with
#                                                   Landlock all the same
#   part   a directory of that tmpfs                hold them by fd, saying
#   bind   a tmpfs with a bind mount of part of     why (which mount), and
#          another file system below it             not keep
#                                                   CAP_DAC_READ_SEARCH
#
# The guest creates, reads after dropping its caches (so the daemon opens
# inodes again), renames and removes on each.  Runs in a private mount
# namespace (unshare -m): the host's mounts are not touched.
# Extra arguments go to harness/vm.py.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${WHOLE_FS_UNSHARED:-}" ]; then
    command -v unshare >/dev/null ||
        { echo "FAIL: unshare(1) is needed (util-linux)"; exit 1; }
    WHOLE_FS_UNSHARED=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$top/harness/tests/lib.sh"
work=$(mktemp -d /tmp/vfsdax-wholefs.XXXXXX)
trap 'umount -R "$work/whole" "$work/bindtop" 2>/dev/null || true; rm -rf "$work"' EXIT
logs=$work/logs
mkdir -p "$logs" "$work/main" "$work/whole" "$work/bindtop" "$work/other"
mount -t tmpfs tmpfs "$work/whole"
mount -t tmpfs tmpfs "$work/bindtop"
mkdir -p "$work/whole/ns" "$work/whole/chroot" "$work/whole/none" \
    "$work/whole/part" "$work/bindtop/below" "$work/other/dir"
mount --bind "$work/other/dir" "$work/bindtop/below"

rows=(ns chroot none part bind)
declare -A args
args[ns]="--socket-path=@SOCK@ --shared-dir=$work/whole --sandbox=namespace"
args[chroot]="--socket-path=@SOCK@ --shared-dir=$work/whole --sandbox=chroot"
args[none]="--socket-path=@SOCK@ --shared-dir=$work/whole --sandbox=none"
args[part]="--socket-path=@SOCK@ --shared-dir=$work/whole/part"
args[bind]="--socket-path=@SOCK@ --shared-dir=$work/bindtop"

cat > "$work/guest.sh" <<'GUEST'
. /lib/vfsdax.sh
fact() { echo "fact $*"; }
for r in ns chroot none part bind; do
    mkdir -p /m/$r
    mount -t virtiofs $r /m/$r || { fact $r-ops "mount failed"; continue; }
    # ns, chroot and none share one tmpfs: each in a directory of its own
    d=/m/$r
    case $r in ns|chroot|none) d=/m/$r/$r ;; esac
    if mkdir -p $d/a/b && echo "data $r" > $d/a/b/f &&
       echo 3 > /proc/sys/vm/drop_caches && [ "$(cat $d/a/b/f)" = "data $r" ] &&
       ls -lR /m/$r > /dev/null && mv $d/a/b/f $d/a/g && rm $d/a/g &&
       rmdir $d/a/b $d/a; then
        fact $r-ops ok
    else
        fact $r-ops failed
    fi
    umount /m/$r
done
echo "guest done"
GUEST

rows_boot "$work" "$work/guest.sh" "$@"

has() {  # row, fixed string: in its daemon's log
    grep -qF "$2" "$logs/virtiofsd-$1.log" && echo yes || echo no
}
# "file handles: N inodes held by handle, M opened from one" at exit
opened() {
    sed -n 's/.*file handles: [0-9]* inodes held by handle, \([0-9]*\) opened from one.*/\1/p' \
        "$logs/virtiofsd-$1.log" | head -n 1
}
for r in "${rows[@]}"; do
    check "$r" "create, read after drop_caches, rename, remove" \
        "$(sed -n "s/^fact $r-ops //p" "$work/out")" ok
done
for r in ns chroot none; do
    check "$r" "inodes by handle" "$(has $r 'inodes are held by file handles')" yes
    n=$(opened $r)
    check "$r" "inodes opened from a handle (${n:-none})" "$([ "${n:-0}" -gt 0 ] && echo yes || echo no)" yes
    check "$r" "Landlock with handles" "$(has $r 'the file system is reachable beneath the shared directory only')" yes
done
why="prefer: inodes are held by fds, as the shared directory is not a whole file system"
# (--sandbox=namespace: the share is the root of the daemon's namespace)
check part "fds: its mount is part of the tmpfs" "$(has part "$why (its mount shows /part of its file system)")" yes
check bind "fds: names the bind mount below" "$(has bind "$why (the mount on /below shows $work/other/dir of its file system)")" yes
for r in part bind; do
    check "$r" "no inode held by handle" "$(has $r 'inodes held by handle')" no
done
[ $failed = 0 ] || exit 1
echo "ok: prefer uses handles on a whole file system only, Landlock in every mode"
