#!/usr/bin/env bash
# The guest tries to get out of the share (harness/guest-tools/escape.c):
# ".." at the share's root, symlinks the host left pointing to / and to a
# directory and a secret file next to the share, symlinks of its own that a
# careless daemon would follow, renames and hard links out of the share,
# forged file handles, device nodes, and a FIFO and a socket the host has
# open in the share.  No read may return the secret, nothing may block,
# and afterwards the host checks that nothing outside the share changed:
# every file's content, mode, owner, times, link count and xattrs, and no
# new name in / or /tmp.
#
# Meanwhile the host checks that our daemon runs the way vm.py starts it in
# every guest test: under a seccomp filter (--seccomp=kill) with exactly
# the capabilities a passthrough server needs and, with --sandbox=namespace,
# as pid 1 of its own pid namespace, forked by a parent that keeps no
# capability, in its own mount namespace with the share as its root and in
# its own net namespace with no interface but lo; all by default, nothing
# on vm.py's command line changing them.
#
# Before the guest, without one: a daemon the host stops through its
# parent (SIGTERM, then SIGKILL) takes the namespaced daemon with it, and
# an unprivileged --sandbox=chroot fails at once, in one line (without
# root, --sandbox=namespace works in a user namespace of the daemon's
# own: harness/tests/unprivileged.sh).
#
# --sandbox-off runs the same attempts against --sandbox=none: the daemon's
# own care (no symlink followed, names checked) must hold without the
# namespace behind it.  Other arguments go to harness/vm.py.
#
# SANDBOX_SELFTEST=leak (a hard link to the secret inside the share) or
# =change (the host touches the secret during the run) must make the test
# fail: that is how its checks were shown to work.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mode=namespace
vm_args=()
for a in "$@"; do
    if [ "$a" = --sandbox-off ]; then
        mode=none
    else
        vm_args+=("$a")
    fi
done
share=$work/share
outside=$work/outside
helper_pid=
bg_pids=()
# Runs without a guest: not in $work, whose snapshot must not change, and
# somewhere the unprivileged run ("nobody") can reach
tmpdir aside sandbox-aside
on_exit 'for p in $helper_pid "${bg_pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done'
token=vfsdax-escape-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
secret="vfsdax-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

mkdir -p "$share/sub" "$outside/dir"
echo "$secret" > "$outside/secret.txt"
echo "$secret" > "$outside/dir/secret2.txt"
echo "$secret" > "$work/parent-secret.txt"
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.host", b"outside")' \
    "$outside/secret.txt"
touch -d @1000000000 "$outside/secret.txt" "$outside/dir/secret2.txt" \
    "$outside/dir" "$outside" "$work/parent-secret.txt"
touch "$share/share-marker"
ln -s / "$share/to_root"
ln -s "$outside/secret.txt" "$share/to_secret_abs"
ln -s ../outside/secret.txt "$share/to_secret_rel"
ln -s "$outside" "$share/to_outside_abs"
ln -s ../outside "$share/to_outside_rel"
if [ "${SANDBOX_SELFTEST:-}" = leak ]; then
    rm "$share/to_secret_abs"
    ln "$outside/secret.txt" "$share/to_secret_abs"
fi
disk=$(python3 -c 'import os; d = os.stat("/").st_dev; print(f"{os.major(d)}:{os.minor(d)}")')
mknod "$share/hostdisk" b "${disk%:*}" "${disk#*:}"
mkfifo "$share/hostfifo"

# What the host side holds open in the share while the guest runs: the
# FIFO, both ways, with data in it, and a listening socket.  At the stop
# file it reports what is left in the pipe and how many connected.
python3 - "$share" "$work" <<'PY' &
import os, select, socket, sys, time
share, work = sys.argv[1], sys.argv[2]
fifo = os.open(os.path.join(share, "hostfifo"), os.O_RDWR | os.O_NONBLOCK)
os.write(fifo, b"host-fifo-data")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(os.path.join(share, "hostsock"))
srv.listen(5)
srv.setblocking(False)
conns = 0
with open(os.path.join(work, "helper.ready"), "w"):
    pass
deadline = time.monotonic() + 1200
while not os.path.exists(os.path.join(work, "helper.stop")) and time.monotonic() < deadline:
    r, _, _ = select.select([srv], [], [], 0.2)
    if r:
        c, _ = srv.accept()
        conns += 1
        c.close()
try:
    left = os.read(fifo, 4096)
except BlockingIOError:
    left = b""
with open(os.path.join(work, "helper.out"), "w") as f:
    f.write(f"fifo {left.decode(errors='replace')}\nconnections {conns}\n")
PY
helper_pid=$!
for _ in $(seq 1 100); do
    [ -e "$work/helper.ready" ] && break
    sleep 0.1
done
[ -e "$work/helper.ready" ] || fail "the host's FIFO and socket holder did not start"

# Everything outside the share, as the host sees it.
snapshot() {
    python3 - "$work" "$share" <<'PY'
import hashlib, os, stat, sys
work, share = sys.argv[1], sys.argv[2]
skip = {"helper.ready", "helper.out", "helper.stop", "state", "logs",
        "snap.before", "snap.after", "guest.sh"}
for root, dirs, files in os.walk(work):
    if root == work:
        dirs[:] = [d for d in dirs if os.path.join(root, d) != share and d not in skip]
        files = [f for f in files if f not in skip]
    # The work directory itself changes (the files above): not listed
    for name in sorted(dirs + files):
        p = os.path.normpath(os.path.join(root, name))
        st = os.lstat(p)
        line = (f"{os.path.relpath(p, work)} {stat.filemode(st.st_mode)} "
                f"{st.st_uid}:{st.st_gid} n{st.st_nlink} s{st.st_size} "
                f"m{st.st_mtime_ns} c{st.st_ctime_ns}")
        if stat.S_ISREG(st.st_mode):
            line += " " + hashlib.sha256(open(p, "rb").read()).hexdigest()
        if stat.S_ISLNK(st.st_mode):
            line += " -> " + os.readlink(p)
        xattrs = os.listxattr(p, follow_symlinks=False)
        line += " " + ",".join(f"{x}={os.getxattr(p, x, follow_symlinks=False)!r}"
                               for x in sorted(xattrs))
        print(line)
PY
}
snapshot > "$work/snap.before"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
# A decoy at the outside path, in the guest's own /tmp: a symlink the guest
# follows lands here, on its own file system, and never on the host.
mkdir -p "$OUTSIDE/dir" && echo decoy > "$OUTSIDE/secret.txt" || fail "decoy"
escape /mnt "$OUTSIDE" "$SECRET" "$TOKEN" "$DISK" > /tmp/escape.out 2>&1
rc=$?
cat /tmp/escape.out
# The host checks the daemon now, while it serves us.
host_step /mnt
[ "$rc" = 0 ] || fail "escape attempts: see ESCAPE lines above"
pass "no escape from the guest's side"
umount /mnt || fail umount
GUEST

virtiofsd=$top/build/qemu/tools/virtiofsd/virtiofsd

# What vfsd_drop_capabilities() keeps: CAP_CHOWN, DAC_OVERRIDE, FOWNER,
# FSETID, SETGID, SETUID, MKNOD, LEASE, SETFCAP.  Not DAC_READ_SEARCH:
# with the default --inode-file-handles=prefer only the broker, a
# process of its own, holds it (see contained.sh), so that the daemon
# cannot open the rest of /tmp by handle.  Anything more (CAP_SYS_ADMIN
# above all) would outlive the sandbox.
want_caps=0
for bit in 0 1 3 4 6 7 27 28 31; do
    want_caps=$((want_caps | 1 << bit))
done
want_caps=$(printf '%016x' $want_caps)

status_field() { # PID FIELD: a line of /proc/PID/status, without its name
    sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null
}

# The only child of $1 (the namespaced daemon under its parent), or nothing
only_child() {
    local kids
    kids=$(cat "/proc/$1/task/$1/children" 2>/dev/null) || return 0
    set -- $kids
    [ $# = 1 ] && echo "$1"
    return 0
}

daemon_ok=0
daemon_report=
check_daemon() {
    # Never fail here: the guest waits for phase2 either way.
    local pid dpid cmd ns v ifaces
    pid=$(cat "$work/state/daemon.pid" 2>/dev/null) || { daemon_report="no daemon.pid"; return 0; }
    cmd=$(cat "$work/state/daemon.cmd")
    daemon_report="pid $pid: $cmd"
    if [ "${SANDBOX_SELFTEST:-}" = change ]; then
        touch "$outside/secret.txt"
    fi
    if [ "$mode" = namespace ]; then
        case "$cmd" in
        *--sandbox*|*--seccomp*|*sandbox=*|*seccomp=*)
            daemon_report+="; vm.py overrides the sandbox"; return 0 ;;
        esac
    fi
    # Every mode forks: vm.py started the parent, which keeps the log
    # (contained.sh) and no capability; the daemon serving the guest is
    # its child
    dpid=$(only_child "$pid")
    [ -n "$dpid" ] || { daemon_report+="; not exactly one child"; return 0; }
    daemon_report+="; daemon pid $dpid"
    v=$(status_field "$pid" CapEff)
    [ "$v" = 0000000000000000 ] ||
        { daemon_report+="; the parent keeps capabilities $v"; return 0; }
    if [ "$mode" = namespace ]; then
        for ns in mnt pid net; do
            [ "$(readlink "/proc/$dpid/ns/$ns")" != "$(readlink "/proc/self/ns/$ns")" ] ||
                { daemon_report+="; not in its own $ns namespace"; return 0; }
        done
        # NSpid: its pid here, then in its own namespace
        v=$(status_field "$dpid" NSpid)
        [ "${v##*[[:space:]]}" = 1 ] ||
            { daemon_report+="; not pid 1 of its namespace (NSpid $v)"; return 0; }
        [ -e "/proc/$dpid/root/share-marker" ] && [ ! -e "/proc/$dpid/root$outside" ] ||
            { daemon_report+="; its root is not the share"; return 0; }
        ifaces=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' "/proc/$dpid/net/dev" | xargs)
        [ "$ifaces" = lo ] ||
            { daemon_report+="; network interfaces: $ifaces"; return 0; }
    else
        # none makes no namespace
        for ns in mnt pid net; do
            [ "$(readlink "/proc/$dpid/ns/$ns")" = "$(readlink "/proc/self/ns/$ns")" ] ||
                { daemon_report+="; --sandbox=none made a $ns namespace"; return 0; }
        done
    fi
    grep -q $'^Seccomp:\t2' "/proc/$dpid/status" ||
        { daemon_report+="; no seccomp filter"; return 0; }
    for v in CapEff CapPrm; do
        [ "$(status_field "$dpid" $v)" = "$want_caps" ] ||
            { daemon_report+="; $v $(status_field "$dpid" $v), not $want_caps"; return 0; }
    done
    # Nothing can come back either: no bounding set, nothing inheritable
    for v in CapBnd CapInh CapAmb; do
        [ "$(status_field "$dpid" $v)" = 0000000000000000 ] ||
            { daemon_report+="; $v $(status_field "$dpid" $v)"; return 0; }
    done
    daemon_ok=1
}

# A daemon waiting for its front-end, stopped through its parent by SIG.
# The daemon must be pid 1 of a new pid namespace and go with the parent;
# SIGTERM must end the parent as it would have ended without the fork.
check_stop() {
    local sig=$1 want=$2 p c rc=0 i
    rm -f "$aside/stop.sock"
    "$virtiofsd" --socket-path="$aside/stop.sock" --shared-dir="$share" \
        > "$aside/stop.log" 2>&1 &
    p=$!
    bg_pids+=("$p")
    for i in $(seq 1 100); do
        c=$(only_child "$p")
        [ -n "$c" ] && [ -S "$aside/stop.sock" ] && break
        sleep 0.05
    done
    if [ -z "$c" ] || [ "$(status_field "$c" NSpid | awk '{ print $NF }')" != 1 ]; then
        bad "SIG$sig: no daemon as pid 1 of a new pid namespace under $p"
        cat "$aside/stop.log"
        return
    fi
    kill -"$sig" "$p"
    # (bash's own "Killed" report of the job is not ours to show)
    { wait "$p"; } 2>/dev/null || rc=$?
    for i in $(seq 1 50); do
        [ -d "/proc/$c" ] || break
        sleep 0.1
    done
    if [ -d "/proc/$c" ]; then
        bad "SIG$sig to the parent left the daemon (pid $c) running"
    elif [ "$rc" != "$want" ]; then
        bad "SIG$sig: the parent ended with status $rc, not $want"
        cat "$aside/stop.log"
    else
        pass "SIG$sig to the parent ends the daemon in its pid namespace (status $rc)"
    fi
}

if [ "$mode" = namespace ]; then
    # 128 + the signal: the parent was killed by it, like the daemon
    check_stop TERM 143
    check_stop INT 130
    check_stop KILL 137

    chmod 755 "$aside"
    mkdir -m 777 "$aside/share"
    rc=0
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
          timeout 10 "$virtiofsd" --socket-path="$aside/share/sock" \
          --shared-dir="$aside/share" --sandbox=chroot 2>&1 < /dev/null) ||
        rc=$?
    if [ "$rc" = 1 ] && [ "$(wc -l <<< "$out")" = 1 ] &&
       grep -q -- '--sandbox=chroot: Operation not permitted' <<< "$out"; then
        pass "unprivileged, --sandbox=chroot fails in one line: $out"
    else
        bad "unprivileged --sandbox=chroot: status $rc, said:"
        echo "$out"
    fi
fi

dargs=--xattr
[ "$mode" = namespace ] || dargs="--xattr --sandbox=none"
rc=0
run_vm_with_host_step "$share" check_daemon --daemon ours --cache-mode auto \
    --daemon-args="$dargs" --daemon-must-live --state-dir "$work/state" \
    --env OUTSIDE="$outside" --env SECRET="$secret" --env TOKEN="$token" \
    --env DISK="$disk" "${vm_args[@]}" "$work/guest.sh" || rc=$?
touch "$work/helper.stop"
wait "$helper_pid" || true
helper_pid=
[ "$rc" = 0 ] || bad "the guest run failed (status $rc)"

if [ "$mode" = namespace ]; then
    help=$("$top/build/qemu/tools/virtiofsd/virtiofsd" --help 2>&1 || true)
    if grep -Eq -- '--sandbox=.*\(namespace\)' <<< "$help" &&
       grep -Eq -- '--seccomp=.*\(kill\)' <<< "$help"; then
        pass "virtiofsd's defaults are --sandbox=namespace --seccomp=kill"
    else
        bad "virtiofsd --help does not give namespace and kill as defaults"
    fi
fi
if [ "$daemon_ok" = 1 ]; then
    if [ "$mode" = namespace ]; then
        pass "the daemon ran as pid 1 of new pid, mount and net namespaces (lo only), with the share as root, under a capability-less parent"
    fi
    pass "the daemon ran with --sandbox=$mode, a seccomp filter and capabilities $want_caps only: $daemon_report"
else
    bad "the daemon: $daemon_report"
fi
snapshot > "$work/snap.after"
if diff "$work/snap.before" "$work/snap.after"; then
    pass "nothing outside the share changed"
else
    bad "the host's files outside the share changed (< before, > after)"
fi
strays=$(find / /tmp -maxdepth 1 -name "*$token*" 2>/dev/null || true)
if [ -n "$strays" ]; then
    bad "the guest made files on the host: $strays"
else
    pass "no file of the guest's in / or /tmp"
fi
if grep -qx "fifo host-fifo-data" "$work/helper.out" &&
   grep -qx "connections 0" "$work/helper.out"; then
    pass "the host's FIFO kept its data and got none, its socket no connection"
else
    bad "the host's FIFO or socket was reached:"; cat "$work/helper.out"
fi
finish
