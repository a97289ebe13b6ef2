#!/usr/bin/env bash
# An ordinary user runs QEMU and our virtiofsd, with the DAX window, as
# the Rust virtiofsd 1.14 lets it.  The user is uid 1000's (UNPRIV_USER
# names another); this script runs as root only to become that user and
# to give it subordinate ids in a mount namespace of its own, so that the
# host's /etc/subuid and /etc/subgid are never touched.
#
#   default  virtiofsd --socket-path=S --shared-dir=D --cache-size=...:
#            the daemon makes a user namespace where the user's ids are
#            the only ones, mapped to themselves (its log says so, and
#            /proc/PID/uid_map of the serving process), and builds its
#            namespace sandbox there.  The guest mounts with dax=always;
#            what its root writes through the window, by mmap and by
#            write(), reads back right on the host and belongs to the
#            user; guest user 1000's creation, that same id, works too;
#            a host file of root's shows as 65534.
#   session  the command line libvirt 10.0 and later run in session mode
#            (qemu:///session; Debian 12's libvirt 9.0 refuses virtiofs
#            there): --fd, --shared-dir, --uid-map=:0:UID:1:
#            --uid-map=:1:SUB:65536: and the same for gids, through
#            newuidmap(1)/newgidmap(1).  The guest's root files are the
#            user's; guest user 1000's are SUB+999.
#   refused  a subordinate range the user has none of, and newuidmap
#            missing from PATH: the daemon exits 1 at once, with one line
#            naming what is missing.
#
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 2 "$@"

build=${BUILD:-$top/build}
virtiofsd=$build/qemu/tools/virtiofsd/virtiofsd
pattern="python3 $top/harness/tests/pattern.py"
sub=200000

user=${UNPRIV_USER:-$(getent passwd 1000 | cut -d: -f1)}
if [ -z "$user" ] || ! getent passwd "$user" >/dev/null; then
    fail "no ordinary user to run as: no uid 1000 (getent passwd 1000); set UNPRIV_USER"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
[ "$(id -u)" = 0 ] ||
    fail "run as root (it becomes $user and bind-mounts /etc/subuid privately)"
for tool in setpriv unshare newuidmap newgidmap; do
    need "$tool" "newuidmap/newgidmap: apt-get install uidmap"
done

chmod 755 "$work"
mkdir -m 700 "$work/home"
chown "$uid:$gid" "$work/home"

# as_user CMD...: CMD as the user, with no capability and its own groups
as_user() {
    setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all \
        env HOME="$work/home" "$@"
}

# What the user must reach; a path it cannot is named, not skipped
for f in "$virtiofsd" "$build/qemu/qemu-system-x86_64" "$top/harness/vm.py" \
         "${GUEST_DIR:-$build/guest}/vmlinuz" \
         "${GUEST_DIR:-$build/guest}/initramfs.cpio.gz"; do
    as_user test -r "$f" ||
        fail "$user cannot read $f: give it o+rx on the way (chmod o+rx on each directory above it)"
done


# --- default -----------------------------------------------------------
share=$work/default
mkdir -m 777 "$share"
chown "$uid:$gid" "$share"
echo root > "$share/hostroot"
$pattern write "$share/host.bin" $((3 << 20)) 5
chown "$uid:$gid" "$share/host.bin"
mkdir -m 755 "$work/state" "$work/logs"
chown "$uid:$gid" "$work/state" "$work/logs"

guest_script "$work/default.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "DAX not active: $(grep ' /mnt ' /proc/self/mountinfo)"
pass "DAX active, the daemon unprivileged"
mmapio check /mnt/host.bin 5 || fail "the user's file through a DAX mmap"
mmapio fill /mnt/mmap.bin $((5 << 20)) 2 || fail "stores through the window"
mmapio write /mnt/write.bin $((3 << 20)) 3 || fail "write()"
echo 3 > /proc/sys/vm/drop_caches
mmapio check /mnt/write.bin 3 || fail "reading write() back through the window"
mmapio check /mnt/mmap.bin 2 || fail "reading stores back through the window"
pass "written and read through the window"
ids=$(stat -c %u:%g /mnt/mmap.bin)
[ "$ids" = "$USER_IDS" ] || fail "the guest sees its file as $ids, not $USER_IDS"
ids=$(stat -c %u:%g /mnt/hostroot)
[ "$ids" = 65534:65534 ] || fail "host root's file shows as $ids"
pass "the user's ids as themselves, others as 65534"
r=$(acltool as "${USER_IDS%:*}" "${USER_IDS#*:}" c /mnt/byuser)
[ "$r" = ok ] || fail "create as guest user ${USER_IDS%:*}: $r"
r=$(acltool as 1234 1234 c /mnt/by1234)
[ "$r" = EPERM ] || fail "guest user 1234, no id in the namespace, created: $r"
pass "guest user ${USER_IDS%:*} creates, 1234 gets EPERM"
host_step /mnt
sync
umount /mnt || fail umount
GUEST

userns_seen=
check_daemon() {
    local pid serving
    pid=$(cat "$work/state/daemon.pid")
    serving=$(serving_pid "$pid")
    userns_seen="$(readlink "/proc/$serving/ns/user") $(tr -s ' ' < "/proc/$serving/uid_map" | sed 's/^ //')"
}

run_with_host_step "$share" check_daemon \
    as_user python3 "$top/harness/vm.py" --shared "$share" --daemon ours \
    --cache-size 64M --daemon-args=--stats --state-dir "$work/state" \
    --log-dir "$work/logs" --env "USER_IDS=$uid:$gid" \
    "${vm_args[@]}" "$work/default.sh" ||
    bad "the default run failed (status $?)"

log=$work/logs/virtiofsd.log
if grep -q "not root: the sandbox is in a user namespace of its own where uid $uid and gid $gid are the only ids" "$log"; then
    pass "the daemon says it made a user namespace of its own"
else
    bad "no user namespace line in the daemon's log:"; cat "$log"
fi
init_ns=$(readlink /proc/self/ns/user)
if [ -n "$userns_seen" ] && [ "${userns_seen%% *}" != "$init_ns" ] &&
   [ "${userns_seen#* }" = "$uid $uid 1" ]; then
    pass "the serving process is in its own user namespace, uid_map \"$uid $uid 1\""
else
    bad "the serving process: namespace and uid_map \"$userns_seen\" (the host's is $init_ns)"
fi
maps=$(stat_count "$log" SETUPMAPPING)
if [ "${maps:-0}" -gt 0 ]; then
    pass "$maps SETUPMAPPING requests served"
else
    bad "no SETUPMAPPING in the daemon's stats"; grep 'stats:' "$log"
fi
for f in mmap.bin:2:$((5 << 20)) write.bin:3:$((3 << 20)); do
    IFS=: read -r name seed size <<< "$f"
    if ! $pattern check "$share/$name" "$seed" "$size"; then
        bad "$name reads wrong on the host"
    fi
done
owners=$(stat -c %u:%g "$share/mmap.bin" "$share/write.bin" "$share/byuser" 2>&1 | sort -u)
if [ "$owners" = "$uid:$gid" ]; then
    pass "the guest's files are right on the host and belong to $user ($uid:$gid)"
else
    bad "owners on the host: $owners, not $uid:$gid"
fi

# --- session: libvirt 10's command line ----------------------------------
share=$work/session
mkdir -m 777 "$share"
chown "$uid:$gid" "$share"
printf '%s:%d:65536\n' "$user" $sub > "$work/subid"
: > "$work/nosubid"

guest_script "$work/session.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "DAX not active"
ids=$(stat -c %u:%g /mnt)
[ "$ids" = 0:0 ] || fail "the share shows as $ids, not 0:0"
mmapio fill /mnt/byroot $((2 << 20)) 7 || fail "stores through the window as root"
mmapio check /mnt/byroot 7 || fail "reading them back"
r=$(acltool as 1000 1000 c /mnt/by1000)
[ "$r" = ok ] || fail "create as guest user 1000: $r"
pass "guest root and guest user 1000 create, through the subordinate ids"
sync
umount /mnt || fail umount
GUEST

# vm.py listens and passes the socket as --fd, as libvirt does
session_args="--uid-map=:0:$uid:1: --uid-map=:1:$sub:65536: --gid-map=:0:$gid:1: --gid-map=:1:$sub:65536:"
rc=0
unshare --mount --propagation private bash -c '
    mount --bind "$1" /etc/subuid && mount --bind "$1" /etc/subgid && shift &&
    exec "$@"' - "$work/subid" \
    setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all \
    env HOME="$work/home" python3 "$top/harness/vm.py" --shared "$share" \
    --daemon ours --daemon-fd --cache-size 64M --daemon-args="$session_args" \
    "${vm_args[@]}" "$work/session.sh" || rc=$?
[ "$rc" = 0 ] || bad "the session run failed (status $rc)"
want="$uid:$gid $((sub + 999)):$((sub + 999))"
got=$(echo $(stat -c %u:%g "$share/byroot" "$share/by1000" 2>&1))
if [ "$got" = "$want" ]; then
    pass "newuidmap/newgidmap: guest root's file is $uid:$gid, guest 1000's is $((sub + 999)):$((sub + 999))"
else
    bad "owners on the host: $got, not $want"
fi
$pattern check "$share/byroot" 7 $((2 << 20)) ||
    bad "byroot reads wrong on the host"

# --- refused ------------------------------------------------------------
# refused WHAT PATTERN SUBID-FILE PATH: the daemon with the session maps
# must exit 1 at once with one line matching PATTERN
refused() {
    local what=$1 pattern=$2 subid=$3 path=$4 out rc=0
    mkdir -p -m 777 "$work/refused"
    out=$(unshare --mount --propagation private bash -c '
        mount --bind "$1" /etc/subuid && mount --bind "$1" /etc/subgid &&
        shift && exec "$@"' - "$subid" \
        setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all \
        env PATH="$path" /usr/bin/timeout 10 "$virtiofsd" \
        --socket-path="$work/refused/sock" --shared-dir="$work/refused" \
        $session_args 2>&1 < /dev/null) || rc=$?
    if [ "$rc" = 1 ] && [ "$(wc -l <<< "$out")" = 1 ] &&
       grep -q -- "$pattern" <<< "$out"; then
        pass "$what: refused in one line: $out"
    else
        bad "$what: status $rc, said:"; echo "$out"
    fi
}
refused "no subordinate uids for $user" \
    "--uid-map=:1:$sub:65536:: user $user has no subordinate uids in /etc/subuid" \
    "$work/nosubid" "$PATH"
printf '%s:%d:1000\n' "$user" $sub > "$work/shortsubid"
refused "a range past $user's subordinate uids" \
    "host uids $sub-$((sub + 65535)) are not all subordinate uids of user $user in /etc/subuid, which gives it $sub-$((sub + 999))" \
    "$work/shortsubid" "$PATH"
mkdir -m 755 "$work/emptybin"
refused "no newuidmap on PATH" "needs newuidmap(1), which is not installed" \
    "$work/subid" "$work/emptybin"

finish
