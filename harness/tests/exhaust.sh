#!/usr/bin/env bash
# A guest that tries to exhaust our virtiofsd's file descriptors
# (CVE-2020-10717): it holds files open and looks up far more inodes than
# the daemon may hold, never forgetting any.  The daemon, started with
# --rlimit-nofile=$NOFILE and holding inodes by fd
# (--inode-file-handles=never: by handle, lookups hold no fd), must answer
# ENFILE past its bound (the limit minus the fds it keeps for itself) and
# stay healthy; once the guest drops its caches (FORGET), everything works
# again.
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
NOFILE=256
# fs.c keeps 64 fds for the daemon itself
BOUND=$((NOFILE - 64))
FILES=1000
tmpdir shared exhaust
chmod 755 "$shared"
mkdir "$shared/many"
(cd "$shared/many" && seq -f 'f%g' 1 $FILES | xargs touch)
echo hello > "$shared/hello"

guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
# Held open for the whole flood: a handle and an inode each
for i in 1 2 3 4 5 6 7 8 9 10; do
    sleep 600 < /mnt/many/f\$i &
done
exec 5</mnt/hello
found=\$(find /mnt/many -type f 2>/tmp/find.err | wc -l)
refused=\$(grep -c "open files" /tmp/find.err || true)
echo "looked up \$found of $FILES files, \$refused refused"
head -n 2 /tmp/find.err
# With the default limit (as many as allowed) nothing would be refused.
# More than the bound may succeed in all: a dentry whose revalidation
# the daemon refuses is dropped, and its inode forgotten.
[ "\$refused" -gt 0 ] || fail "no lookup was refused: --rlimit-nofile=$NOFILE not enforced?"
[ "\$found" -ge $((BOUND / 2)) ] || fail "only \$found inodes before ENFILE (bound $BOUND)"
pass "lookups past the bound fail with ENFILE"
# Still serving: what is open reads, attributes of known inodes come back
read line <&5 || fail "read of an open file at the bound"
[ "\$line" = hello ] || fail "read \$line at the bound"
stat /mnt/many/f1 >/dev/null || fail "stat of a held inode at the bound"
# Inodes whose revalidation was refused are forgotten asynchronously, so
# the daemon may have fds to spare again by now: walk the tree once more
# to take them up, then create.  A creation may still win a race with a
# late FORGET, so it gets a few tries; a daemon that does not bound
# creations succeeds every time.
refused_create=0
for try in 1 2 3 4 5; do
    find /mnt/many -type f >/dev/null 2>&1 || true
    if touch /mnt/at-bound-\$try 2>/tmp/touch.err; then
        echo "creation \$try at the bound succeeded (a FORGET freed an fd)"
        continue
    fi
    grep -q "open files" /tmp/touch.err ||
        fail "creation at the bound: \$(cat /tmp/touch.err), not ENFILE"
    cat /tmp/touch.err
    refused_create=1
    break
done
[ \$refused_create = 1 ] || fail "every creation succeeded at the bound"
pass "daemon healthy at the bound, creations refused with ENFILE"
# The guest forgets: the daemon must give the fds back
kill \$(jobs -p) 2>/dev/null
wait 2>/dev/null
exec 5<&-
sync
echo 3 > /proc/sys/vm/drop_caches
sleep 1
i=1
while [ \$i -le 50 ]; do
    stat /mnt/many/f\$i >/dev/null || fail "lookup \$i after FORGET"
    i=\$((i + 1))
done
touch /mnt/new || fail "creation after FORGET"
[ "\$(cat /mnt/hello)" = hello ] || fail "read after FORGET"
pass "fds come back once the guest forgets"
umount /mnt || fail "umount"
pass "guest side done"
GUEST

# The most fds our daemon (the one serving $shared) holds during the run
watch_fds() {
    local max=0 pid n
    while :; do
        for pid in $(pgrep -x virtiofsd); do
            tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
                grep -q -- "--shared-dir=$shared " || continue
            n=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
            [ "$n" -le "$max" ] || { max=$n; echo "$max" > "$work/maxfd"; }
        done
        sleep 0.2
    done
}
watch_fds &
watcher=$!
on_exit 'kill $watcher 2>/dev/null || true'

vm --daemon ours --shared "$shared" \
    --daemon-args="--rlimit-nofile=$NOFILE --inode-file-handles=never ${EXHAUST_DAEMON_ARGS:-}" \
    "$@" "$work/guest.sh"
kill $watcher 2>/dev/null || true
[ -e "$shared/new" ] || fail "the guest's file is not on the host"
maxfd=$(cat "$work/maxfd" 2>/dev/null || echo 0)
echo "the daemon held at most $maxfd fds (limit $NOFILE, guest bound $BOUND)"
[ "$maxfd" -gt $((BOUND / 2)) ] || fail "the fd watcher saw no flood"
[ "$maxfd" -le "$NOFILE" ] || fail "more fds than --rlimit-nofile"
pass "the daemon survived the flood within its limit"
