#!/usr/bin/env bash
# Live migration of a guest on virtio-fs without DAX: two QEMUs, two
# daemons on one directory, migrated over a unix socket by
# harness/migrate.py.  Across the migration the guest keeps a file open
# for reading and one for writing, holds a POSIX lock and has a directory
# listing half read (harness/guest-tools/migstate.c); afterwards it reads,
# writes, closes, releases and lists on, and the host checks what it sees.
#
#   migrate.sh [migrate.py/vm.py options] CASE [options]
#
# CASE:
#   basic          the migration completes, everything carries over
#   file-handles   the same with --migration-mode=file-handles on both
#                  ends (the destination opens each inode by handle)
#   file-handles-refused  the source sends handles, the destination runs
#                  with --inode-file-handles=never: it starts no broker
#                  (the process that alone may open handles), so it
#                  cannot tell which file a handle names, the migration
#                  fails and the source goes on
#   from-rust      the Rust virtiofsd on the source, ours on the
#                  destination: ours refuses the Rust daemon's stream
#                  (another format), the migration fails cleanly and the
#                  guest goes on on the source
#   refused        the source daemon offers no state transfer
#                  (--no-migration): QEMU fails the migration with a clear
#                  message and the guest goes on on the source
#   missing-abort  a file the guest holds open is gone from the shared
#                  directory: with --migration-on-error=abort the
#                  destination fails the migration, the source goes on
#   missing-guest-error  the same with guest-error: the migration
#                  completes and only that file gives EIO
# Our daemon runs with --posix-lock and --flock (so the locks are the
# host's).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pick_case "migrate.sh [options] CASE" "basic|file-handles|file-handles-refused|from-rust|refused|missing-abort|missing-guest-error" "$@"
set -- "${args[@]}"
shared=$work/shared
mkdir -p "$shared/dir"
printf 0000111111 > "$shared/read.txt"
printf 'lock me\n' > "$shared/lock.txt"
printf 'flock me\n' > "$shared/flock.txt"
printf 'gone\n' > "$shared/gone.txt"
for i in $(seq -w 0 199); do : > "$shared/dir/e$i"; done

daemon_args="--posix-lock --flock"
dest_args="--posix-lock --flock"
expect=completed
extra=()
gone=
case $case_ in
basic) ;;
file-handles)
    daemon_args="--posix-lock --flock --migration-mode=file-handles"
    dest_args="$daemon_args"
    ;;
file-handles-refused)
    daemon_args="--posix-lock --flock --migration-mode=file-handles"
    dest_args="--posix-lock --flock --inode-file-handles=never"
    expect=failed
    extra=(--expect-error "as this daemon opens none (start it with --migration-mode=file-handles")
    ;;
from-rust)
    # The Rust daemon passes no locks to the host: the guest keeps them
    daemon_args=
    dest_args=
    expect=failed
    extra=(--daemon rust --dest-daemon ours
           --expect-error "not a virtiofsd state stream of ours")
    ;;
refused)
    daemon_args="--posix-lock --flock --no-migration"
    expect=failed
    extra=(--expect-error "does not support migration")
    ;;
missing-abort)
    gone=gone
    dest_args="--posix-lock --flock --migration-on-error=abort"
    expect=failed
    extra=(--host-step 'rm "$SHARED/gone.txt"')
    ;;
missing-guest-error)
    gone=gone
    dest_args="--posix-lock --flock --migration-on-error=guest-error"
    extra=(--host-step 'rm "$SHARED/gone.txt"')
    ;;
*) echo "unknown case $case_" >&2; exit 2 ;;
esac

guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
migstate /mnt $gone || exit 1
GUEST

migrate_vm --shared "$shared" --log-dir "$work/log" \
    --daemon-args="$daemon_args" --dest-daemon-args="$dest_args" \
    --expect-migration "$expect" "${extra[@]}" "$@" "$work/guest.sh" ||
    fail "migrate.py ended with status $?"

# What the host sees once the guest is done, wherever it ran
[ "$(cat "$shared/write.txt")" = "$(printf 'before\nafter')" ] ||
    fail "write.txt on the host: $(cat "$shared/write.txt")"
pass "the host has both writes, before and after the migration"
[ "$(cat "$shared/post.txt")" = "$expect" ] ||
    fail "post.txt on the host: $(cat "$shared/post.txt")"
pass "the guest ran on the $([ $expect = completed ] && echo destination || echo source) to its end"

if [ "$case_" = file-handles ]; then
    # Without handles (a file system without export support) the source
    # silently sends paths instead: the daemons' counts say which went
    by_handle() {
        sed -n "/state $1, /s/.*[(,] *\([0-9]*\) by file handle only.*/\1/p" \
            "$work/log/virtiofsd-$2.log"
    }
    sent=$(by_handle saved src)
    found=$(by_handle restored dst)
    inodes=$(sed -n 's/.*state saved, .* bytes: \([0-9]*\) inodes.*/\1/p' \
        "$work/log/virtiofsd-src.log")
    grep -h "state saved\|state restored" "$work/log/virtiofsd-src.log" \
        "$work/log/virtiofsd-dst.log"
    [ -n "$sent" ] && [ -n "$inodes" ] && [ "$sent" -gt 0 ] &&
        [ "$sent" = "$inodes" ] ||
        fail "the source sent ${sent:-no} of ${inodes:-?} inodes by file handle alone"
    [ "$found" = "$sent" ] ||
        fail "the destination found ${found:-no} of $sent inodes by file handle"
    pass "all $sent inodes went by file handle alone and were opened by it"
fi
