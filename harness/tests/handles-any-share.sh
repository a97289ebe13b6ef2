#!/usr/bin/env bash
# --inode-file-handles=prefer (the default) holds inodes by handle on any
# share under --sandbox=namespace: a process of its own (the broker)
# opens them, and only handles it made from fds the daemon held, so the
# share need not be a whole file system.  One boot, five daemons of ours
# (vm.py --extra-daemon), each with --rlimit-nofile=400, so that of the
# 300 files the guest makes, all but the K the idle list keeps (84,
# "up to K unused ones keep their fd") lose their fd; the guest then
# opens each by the name it still knows, and the daemon must open the
# inode again from its handle, through the broker:
#
#   row    share                                    the daemon must
#   ns     a tmpfs of its own, --sandbox=namespace  hold inodes by handle,
#   part   a directory of that tmpfs                open at least 300 - K
#   bind   a tmpfs with a bind mount of part of     through the broker,
#          another file system below it             restrict itself with
#                                                   Landlock, and keep no
#                                                   CAP_DAC_READ_SEARCH
#   chroot the same tmpfs, --sandbox=chroot         hold them by fd, saying
#   none   the same tmpfs, --sandbox=none           why, Landlock on
#
# --cache=always: a LOOKUP opens the name, and the inode takes that fd
# rather than the broker's, so only a guest that trusts the names it
# knows (for a day, not --cache=auto's second, which 300 files under TCG
# outlast) sends the OPEN of a nodeid alone that needs the handle.  For
# the same reason the guest reads the files by name, not through a glob
# (READDIRPLUS looks entries up).
#
# The guest creates, reads, reads again after dropping its caches (so
# the daemon needs the inodes again), renames and removes on each.  Runs
# in a private mount namespace (unshare -m): the host's mounts are not
# touched.  Extra arguments go to harness/vm.py.
set -euo pipefail
# In a mount namespace of its own, before the library makes $work: exec
# would leave that behind
if [ -z "${HANDLES_UNSHARED:-}" ]; then
    command -v unshare >/dev/null ||
        { echo "FAIL: unshare(1) is needed (util-linux)"; exit 1; }
    HANDLES_UNSHARED=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
on_exit 'umount -R "$work/whole" "$work/bindtop" 2>/dev/null || true'
logs=$work/logs
mkdir -p "$logs" "$work/main" "$work/whole" "$work/bindtop" "$work/other"
mount -t tmpfs tmpfs "$work/whole"
mount -t tmpfs tmpfs "$work/bindtop"
mkdir -p "$work/whole/ns" "$work/whole/chroot" "$work/whole/none" \
    "$work/whole/part" "$work/bindtop/below" "$work/other/dir"
mount --bind "$work/other/dir" "$work/bindtop/below"

rows=(ns part bind chroot none)
lim="--rlimit-nofile=400 --cache=always"
declare -A args
args[ns]="--socket-path=@SOCK@ --shared-dir=$work/whole $lim"
args[part]="--socket-path=@SOCK@ --shared-dir=$work/whole/part $lim"
args[bind]="--socket-path=@SOCK@ --shared-dir=$work/bindtop $lim"
args[chroot]="--socket-path=@SOCK@ --shared-dir=$work/whole --sandbox=chroot $lim"
args[none]="--socket-path=@SOCK@ --shared-dir=$work/whole --sandbox=none $lim"

guest_script "$work/guest.sh" <<'GUEST'
fact() { echo "fact $*"; }
for r in ns part bind chroot none; do
    mkdir -p /m/$r
    mount -t virtiofs $r /m/$r || { fact $r-ops "mount failed"; continue; }
    # ns, chroot and none share one tmpfs: each in a directory of its own
    d=/m/$r
    case $r in ns|chroot|none) d=/m/$r/$r ;; esac
    [ $r = bind ] && d=/m/$r/below
    i=0
    mkdir -p $d/a/b && echo "data $r" > $d/a/b/f
    while [ $i -lt 300 ]; do echo $i > $d/a/n$i; i=$((i + 1)); done
    # Oldest first: each open evicts an idle fd the loop needs later
    i=0
    sum=0
    while [ $i -lt 300 ]; do
        read v < $d/a/n$i && sum=$((sum + v))
        i=$((i + 1))
    done
    if [ "$sum" = 44850 ] &&
       echo 3 > /proc/sys/vm/drop_caches && [ "$(cat $d/a/b/f)" = "data $r" ] &&
       [ "$(cat $d/a/n7)" = 7 ] && ls -lR /m/$r > /dev/null &&
       mv $d/a/b/f $d/a/g && rm $d/a/g && rm $d/a/n* && rmdir $d/a/b $d/a; then
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
# K of "up to K unused ones keep their fd": the files that kept theirs
kept() {
    sed -n 's/.*up to \([0-9]*\) unused ones keep their fd.*/\1/p' \
        "$logs/virtiofsd-$1.log" | head -n 1
}
for r in "${rows[@]}"; do
    check "$r" "create, read after drop_caches, rename, remove" \
        "$(sed -n "s/^fact $r-ops //p" "$work/out")" ok
    check "$r" "Landlock" "$(has $r 'the file system is reachable beneath the shared directory only')" yes
done
for r in ns part bind; do
    check "$r" "inodes by handle, through the broker" "$(has $r 'inodes are held by file handles where the file system has them, opened by a process of their own')" yes
    n=$(opened $r) k=$(kept $r)
    # Every file but K had lost its fd when the reading began
    want=$((300 - ${k:-300}))
    check "$r" "inodes opened again from a handle (${n:-none}, at least 300 - ${k:-none} = $want)" \
        "$([ -n "$k" ] && [ "$want" -gt 0 ] && [ "${n:-0}" -ge "$want" ] && echo yes || echo no)" yes
done
for r in chroot none; do
    check "$r" "fds, saying why" "$(has $r 'inodes are held by fds outside --sandbox=namespace')" yes
    check "$r" "no inode held by handle" "$(has $r 'inodes held by handle')" no
done
finish "prefer holds inodes by handle on any share in the namespace sandbox, by fd outside it, Landlock in every mode"
