#!/usr/bin/env bash
# A guest that stats more files than our virtiofsd may hold fds:
#   many-inodes.sh fds|handles|defaults [vm.py args...]
# FILES files (default 200,000, in directories of 10,000) are listed with
# ls -l, which looks up and stats every one, under --rlimit-nofile=NOFILE
# (default 20,000).  The guest keeps every inode it looked up (nothing
# forgets them while it has memory), so:
#   fds:     the daemon holds an O_PATH fd per inode, and once it holds
#            all its bound allows each further lookup fails with ENFILE
#            ("Too many open files in system"): the test checks that the
#            stats that worked stop near the bound and that every failure
#            is that one;
#   handles: --inode-file-handles=mandatory --inode-fd-cache=0: every
#            stat works and the daemon's fds (sampled from /proc while the
#            guest works) stay far below the bound;
#   defaults: the daemon's defaults (prefer, the namespace sandbox, its
#            idle fds, cache=auto) on a share that is a directory of a
#            larger file system, the usual case: every stat works, in
#            fewer fds than the bound.
# Prints one line per mode with the counts and the guest's time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# mk/check.py puts --timeout N first
take_timeout "$@"
set -- "${args[@]}"
vm_timeout=${timeout_args[1]:-3000}
mode=${1:?usage: $0 [--timeout N] fds|handles [vm.py args...]}
shift
FILES=${FILES:-200000}
NOFILE=${NOFILE:-20000}
PER_DIR=10000
cache=always
case $mode in
fds) opt=--inode-file-handles=never ;;
handles) opt="--inode-file-handles=mandatory --inode-fd-cache=0" ;;
defaults) opt= ; cache=auto ;;
*) echo "usage: $0 fds|handles|defaults" >&2; exit 2 ;;
esac
sampler=
on_exit '[ -z "$sampler" ] || kill $sampler 2>/dev/null || true'
mkdir -p "$work/shared"
dirs=$(((FILES + PER_DIR - 1) / PER_DIR))
for d in $(seq 1 $dirs); do
    n=$((FILES - (d - 1) * PER_DIR))
    [ $n -gt $PER_DIR ] && n=$PER_DIR
    mkdir "$work/shared/d$d"
    (cd "$work/shared/d$d" && seq -f 'f%g' 1 $n | xargs touch)
done

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
start=$(cut -d' ' -f1 /proc/uptime)
ok=0
for d in /mnt/d*; do
    ls -l "$d" 2>> /tmp/err | grep -c ' f[0-9]' >> /tmp/counts || true
done
end=$(cut -d' ' -f1 /proc/uptime)
ok=$(awk '{ s += $1 } END { print s + 0 }' /tmp/counts)
errs=$(wc -l < /tmp/err)
why=$(sed 's/.*: //' /tmp/err | sort | uniq -c | tr -s ' ' | tr '\n' ';')
echo "RESULT ok=$ok errs=$errs secs=$(awk "BEGIN { print $end - $start }") why=$why"
umount /mnt || fail umount
GUEST

# The daemon's largest fd count while the guest works
sample_fds() {
    local pid max=0 n
    while [ ! -s "$work/state/daemon.pid" ]; do sleep 0.1; done
    # The sandbox's child is there once the socket is
    sleep 2
    pid=$(serving_pid "$(cat "$work/state/daemon.pid")")
    while [ -d "/proc/$pid" ]; do
        n=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        [ "$n" -gt "$max" ] && { max=$n; echo $max > "$work/maxfds"; }
        sleep 0.5
    done
}
sample_fds &
sampler=$!
rc=0
# cache=always: with cache=auto's 1 s timeouts a guest slowed down (a
# busy host) revalidates a directory while the daemon is at its bound;
# that LOOKUP fails with ENFILE, and the guest drops the directory's
# whole subtree and gives back its fds (seen: 19,872 stats with a bound
# of 9,936).  Right, but it would make the count depend on timing.
vm --quiet --shared "$work/shared" \
    --state-dir "$work/state" --daemon ours --mem 2G --cache-mode $cache \
    --daemon-args="--rlimit-nofile=$NOFILE $opt" --daemon-must-live \
    --timeout "$vm_timeout" "$@" "$work/guest.sh" > "$work/out" || rc=$?
kill $sampler 2>/dev/null || true
sampler=
line=$(grep '^RESULT' "$work/out" || true)
if [ $rc != 0 ] || [ -z "$line" ]; then
    on_fail 'cat "$work/out"'
    fail "the guest run failed (status $rc):"
fi
ok=$(echo "$line" | sed 's/.* ok=\([0-9]*\).*/\1/')
errs=$(echo "$line" | sed 's/.* errs=\([0-9]*\).*/\1/')
secs=$(echo "$line" | sed 's/.* secs=\([0-9.]*\).*/\1/')
why=$(echo "$line" | sed 's/.* why=//')
maxfds=$(cat "$work/maxfds" 2>/dev/null || echo 0)
echo "$mode: $FILES files, --rlimit-nofile=$NOFILE: $ok stat'ed, $errs" \
     "failed ($why), daemon fds at most $maxfds, $secs s in the guest"
case $mode in
fds)
    # The bound is NOFILE less the 64 fd.c keeps; the share's
    # directories and the root take a few of it, and the guest may forget
    # a few inodes (seen: 20,058 stats with a bound of 19,936)
    [ "$ok" -le $((NOFILE + NOFILE / 100)) ] &&
        [ "$ok" -gt $((NOFILE - 64 - 2 * dirs - 16)) ] ||
        fail "$ok stats worked: not stopped by the fd bound"
    [ "$errs" = $((FILES - ok)) ] || fail "$errs failures for $((FILES - ok)) missing"
    [ "$(echo "$why" | grep -c 'Too many open files in system')" = 1 ] &&
        [ "$(echo "$why" | tr ';' '\n' | grep -c .)" = 1 ] ||
        fail "failures other than ENFILE: $why"
    pass "with fds, stats fail with ENFILE past the fd bound"
    ;;
handles)
    [ "$ok" = "$FILES" ] && [ "$errs" = 0 ] || fail "$ok of $FILES stats worked"
    [ "$maxfds" -gt 0 ] && [ "$maxfds" -lt 256 ] ||
        fail "the daemon held up to $maxfds fds"
    pass "with file handles all $FILES stats work in $maxfds fds"
    ;;
defaults)
    [ "$ok" = "$FILES" ] && [ "$errs" = 0 ] || fail "$ok of $FILES stats worked ($why)"
    [ "$maxfds" -gt 0 ] && [ "$maxfds" -lt "$NOFILE" ] ||
        fail "the daemon held up to $maxfds fds"
    pass "with the defaults all $FILES stats work in at most $maxfds fds"
    ;;
esac
