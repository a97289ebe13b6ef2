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
# every guest test: in its own mount namespace with the share as its root
# (--sandbox=namespace) and under a seccomp filter (--seccomp=kill), both by
# default, nothing on vm.py's command line changing them.
#
# --sandbox-off runs the same attempts against --sandbox=none: the daemon's
# own care (no symlink followed, names checked) must hold without the
# namespace behind it.  Other arguments go to harness/vm.py.
#
# SANDBOX_SELFTEST=leak (a hard link to the secret inside the share) or
# =change (the host touches the secret during the run) must make the test
# fail: that is how its checks were shown to work.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
mode=namespace
vm_args=()
for a in "$@"; do
    if [ "$a" = --sandbox-off ]; then
        mode=none
    else
        vm_args+=("$a")
    fi
done
work=$(mktemp -d /tmp/vfsdax-sandbox.XXXXXX)
share=$work/share
outside=$work/outside
helper_pid=
cleanup() {
    if [ -n "$helper_pid" ]; then
        kill "$helper_pid" 2>/dev/null || true
        wait "$helper_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
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
[ -e "$work/helper.ready" ] || { echo "FAIL: the host's FIFO and socket holder did not start"; exit 1; }

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

cat > "$work/guest.sh" <<'GUEST'
. /lib/vfsdax.sh
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

daemon_ok=0
daemon_report=
check_daemon() {
    # Never fail here: the guest waits for phase2 either way.
    local pid cmd
    pid=$(cat "$work/state/daemon.pid" 2>/dev/null) || { daemon_report="no daemon.pid"; return 0; }
    cmd=$(cat "$work/state/daemon.cmd")
    daemon_report="pid $pid: $cmd"
    if [ "${SANDBOX_SELFTEST:-}" = change ]; then
        touch "$outside/secret.txt"
    fi
    grep -q $'^Seccomp:\t2' "/proc/$pid/status" ||
        { daemon_report+="; no seccomp filter"; return 0; }
    if [ "$mode" = namespace ]; then
        case "$cmd" in
        *--sandbox*|*--seccomp*|*sandbox=*|*seccomp=*)
            daemon_report+="; vm.py overrides the sandbox"; return 0 ;;
        esac
        [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
            { daemon_report+="; not in its own mount namespace"; return 0; }
        [ -e "/proc/$pid/root/share-marker" ] && [ ! -e "/proc/$pid/root$outside" ] ||
            { daemon_report+="; its root is not the share"; return 0; }
    fi
    daemon_ok=1
}

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
fail=0
[ "$rc" = 0 ] || { echo "FAIL: the guest run failed (status $rc)"; fail=1; }

if [ "$mode" = namespace ]; then
    help=$("$top/build/qemu/tools/virtiofsd/virtiofsd" --help 2>&1 || true)
    if grep -Eq -- '--sandbox=.*\(namespace\)' <<< "$help" &&
       grep -Eq -- '--seccomp=.*\(kill\)' <<< "$help"; then
        echo "ok: virtiofsd's defaults are --sandbox=namespace --seccomp=kill"
    else
        echo "FAIL: virtiofsd --help does not give namespace and kill as defaults"
        fail=1
    fi
fi
if [ "$daemon_ok" = 1 ]; then
    echo "ok: the daemon ran with --sandbox=$mode and a seccomp filter: $daemon_report"
else
    echo "FAIL: the daemon: $daemon_report"
    fail=1
fi
snapshot > "$work/snap.after"
if diff "$work/snap.before" "$work/snap.after"; then
    echo "ok: nothing outside the share changed"
else
    echo "FAIL: the host's files outside the share changed (< before, > after)"
    fail=1
fi
strays=$(find / /tmp -maxdepth 1 -name "*$token*" 2>/dev/null || true)
if [ -n "$strays" ]; then
    echo "FAIL: the guest made files on the host: $strays"
    fail=1
else
    echo "ok: no file of the guest's in / or /tmp"
fi
if grep -qx "fifo host-fifo-data" "$work/helper.out" &&
   grep -qx "connections 0" "$work/helper.out"; then
    echo "ok: the host's FIFO kept its data and got none, its socket no connection"
else
    echo "FAIL: the host's FIFO or socket was reached:"; cat "$work/helper.out"
    fail=1
fi
exit $fail
