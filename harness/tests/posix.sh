#!/usr/bin/env bash
# A scripted POSIX exercise (harness/guest-tools/posixops.c) run in the guest
# on virtio-fs with our virtiofsd and with the Rust virtiofsd 1.14: both must
# print the same results, except the differences listed in
# harness/tests/posix-expected-differences, and what the guest did must be
# what the host sees.  Each run must reach posixops' last step with
# status 0.  The --timeout given (mk/check.py's) is for the three runs.
# POSIX_LOCKS=0 leaves out the third, with the guest's locks on the host:
# the guest kernel matrix (mk/check.py) runs the first two on each kernel,
# the locks' host side being the daemon's alone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
locks=${POSIX_LOCKS:-1}
split_timeout $((locks ? 3 : 2)) "$@"

guest_script "$work/guest.sh" <<'GUEST'
mkdir -p /mnt
mount -t virtiofs "$VFS_TAG" /mnt || { echo "FAIL: mount"; exit 1; }
mkdir /mnt/t || { echo "FAIL: mkdir"; exit 1; }
rc=0
posixops /mnt/t || rc=$?
[ $rc = 0 ] || echo "FAIL: posixops exited with status $rc"
umount /mnt || { echo "FAIL: umount"; exit 1; }
exit $rc
GUEST

run() {  # name, vm.py arguments...
    local name=$1; shift
    mkdir -p "$work/$name"
    local rc=0
    vm --quiet --shared "$work/$name" --timeout 400 \
        "$@" "${vm_args[@]}" "$work/guest.sh" > "$work/$name.out" || rc=$?
    if [ $rc != 0 ]; then
        on_fail "cat '$work/$name.out'"
        fail "the $name run ended with status $rc:"
    fi
    # Its last step, and enough before it
    local steps
    steps=$(wc -l < "$work/$name.out")
    if [ "$steps" -lt 60 ] || ! tail -n 1 "$work/$name.out" |
            grep -q '^readdir many: '; then
        on_fail "cat '$work/$name.out'"
        fail "the $name run printed $steps lines, not ending with readdir:"
    fi
}
run ours --daemon ours --cache-mode auto --daemon-args=--xattr
run rust --daemon rust --cache-mode auto --daemon-args=--xattr
# Without --posix-lock/--flock the guest keeps locks to itself; with them
# its locks are the host's, and must behave the same.  --stats proves
# they reached the daemon.
[ "$locks" = 1 ] && run ours-locks --daemon ours --cache-mode auto --log-dir "$work/locks-log" \
    --daemon-args="--xattr --posix-lock --flock --stats"

steps=$(wc -l < "$work/ours.out")
expected=$top/harness/tests/posix-expected-differences
if ! diff <(grep -vxFf <(grep -v '^#' "$expected") "$work/rust.out") \
          <(grep -vxFf <(grep -v '^#' "$expected") "$work/ours.out") > "$work/diff"; then
    bad "our virtiofsd and the Rust virtiofsd differ (< Rust, > ours):"
    cat "$work/diff"
else
    pass "$steps steps, same results as the Rust virtiofsd"
fi

if [ "$locks" = 1 ]; then
    if ! diff "$work/ours.out" "$work/ours-locks.out" > "$work/diff-locks"; then
        bad "with --posix-lock --flock our results differ (< without, > with):"
        cat "$work/diff-locks"
    else
        pass "the same results with the guest's locks held on the host"
    fi
    for op in SETLK GETLK; do
        if grep -q "stats: $op: [1-9]" "$work/locks-log/virtiofsd.log"; then
            pass "$op reached the daemon"
        else
            bad "no $op reached the daemon with --posix-lock --flock"
        fi
    done
fi

# What the host sees after our run.
python3 - "$work/ours/t" <<'PY' || bad "the host does not see what our run did"
import os, stat, sys
t = sys.argv[1]
def check(what, ok):
    print(("ok: " if ok else "FAIL: ") + what)
    return ok
def read(name):
    with open(os.path.join(t, name), "rb") as f:
        return f.read()
ok = True
ok &= check("a truncated to 0 by O_TRUNC", os.path.getsize(os.path.join(t, "a")) == 0)
ok &= check("exchange: c holds bee, d holds sea",
            read("c") == b"bee" and read("d") == b"sea")
ok &= check("hard link e shares c's inode",
            os.stat(os.path.join(t, "e")).st_ino == os.stat(os.path.join(t, "c")).st_ino
            and os.stat(os.path.join(t, "c")).st_nlink == 2)
ok &= check("symlink s -> c", os.readlink(os.path.join(t, "s")) == "c")
ok &= check("fifo is a FIFO on the host",
            stat.S_ISFIFO(os.lstat(os.path.join(t, "fifo")).st_mode))
ok &= check("xattr user.t removed", "user.t" not in os.listxattr(os.path.join(t, "c")))
ok &= check("mode 0600 and mtime 1000000000 on c",
            stat.S_IMODE(os.stat(os.path.join(t, "c")).st_mode) == 0o600
            and int(os.stat(os.path.join(t, "c")).st_mtime) == 1000000000)
ok &= check("copy_file_range result", read("dst") == b"456789ab")
ok &= check("mmap write reached the file", read("m")[:7] == b"mapped!")
ok &= check("sparse file keeps its size", os.path.getsize(os.path.join(t, "sparse")) == 1 << 20)
ok &= check("10,000 entries", len(os.listdir(os.path.join(t, "many"))) == 10000)
sys.exit(0 if ok else 1)
PY
finish
