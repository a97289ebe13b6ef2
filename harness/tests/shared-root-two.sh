#!/usr/bin/env bash
# A library's pages shared by two guests through their DAX windows, as
# many VMs running from one root share its libraries.  Two guests
# (harness/two-vms.py: each its own QEMU and its own virtiofsd, on one
# directory, --dax-policy=exec) chroot into the root of
# harness/tests/shared-root-lib.sh and run the program that reads every
# byte of its library's 1 MiB table, then wait.  Meanwhile the host looks:
#
#   - each QEMU maps the library's file (its window mapping, found in
#     /proc/PID/smaps by the file's device and inode) with at least the
#     table's pages resident, and its Pss is about half its Rss: the
#     other QEMU maps the very same pages;
#   - the host's page cache holds the library once (mincore), the table's
#     pages and not twice as many;
#   - neither guest's page cache grew by the table (each says).
#
# SHARED_ROOT_POLICY (default exec) is the --dax-policy: with size:2M, the
# default, the test must fail (the library is 1 MiB: no window mapping).
# Extra arguments go to harness/vm.py for both guests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$top/harness/tests/shared-root-lib.sh"
policy=${SHARED_ROOT_POLICY:-exec}
vms=
on_exit '[ -z "$vms" ] || { kill -INT "$vms" 2>/dev/null; wait "$vms" 2>/dev/null; } || true'
root=$work/root
root_make "$root"
mkdir "$root/ctl-A" "$root/ctl-B"

guest_script "$work/guest.sh" <<'GUEST'
R=/mnt
cached() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }
mount_virtiofs "$VFS_TAG" $R dax=inode
dax_active $R || fail "dax=inode requested, DAX not active"
mount -t proc proc $R/proc || fail "proc in the root"
sync; echo 3 > /proc/sys/vm/drop_caches
c0=$(cached)
: > /tmp/prog.out
chroot $R /bin/prog serve > /tmp/prog.out 2>&1 &
pid=$!
i=0
until [ -s /tmp/prog.out ]; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "the program never ran"
    sleep 0.1
done
c1=$(cached)
[ "$(cat /tmp/prog.out)" = "prog v1 lib v1 sum 1048576" ] ||
    fail "the program said: $(cat /tmp/prog.out)"
grep -q " $R/lib/libdensity.so\$" /proc/$pid/maps ||
    fail "the library is not mapped: $(cat /proc/$pid/maps)"
# A table's worth (1024 kB) would be a copy of the guest's own
[ $((c1 - c0)) -lt 512 ] ||
    fail "guest $VFS_GUEST's page cache grew by $((c1 - c0)) kB"
pass "guest $VFS_GUEST: the table read through the window, page cache +$((c1 - c0)) kB"
host_step $R/ctl-$VFS_GUEST
kill $pid; wait $pid 2>/dev/null
umount $R/proc
umount $R || fail umount
echo "guest $VFS_GUEST done"
GUEST

# Nothing of the library in the host's page cache before the guests
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$root/lib/libdensity.so"

two_vms --quiet --shared "$root" --daemon ours \
    --smp 1 --mem 512M --cache-size 64M --cache-mode auto \
    --state-dir "$work/state" --log-dir "$work/logs" \
    --daemon-args "--stats --dax-policy=$policy" "$@" \
    "$work/guest.sh" "$work/guest.sh" > "$work/out" 2>&1 &
vms=$!
while kill -0 $vms 2>/dev/null; do
    [ -e "$root/ctl-A/phase1" ] && [ -e "$root/ctl-B/phase1" ] && break
    sleep 0.1
done
rc=0
if [ -e "$root/ctl-A/phase1" ] && [ -e "$root/ctl-B/phase1" ]; then
    python3 - "$root/lib/libdensity.so" "$work/state/A/qemu.pid" \
        "$work/state/B/qemu.pid" > "$work/host" 2>&1 <<'PY' || rc=$?
import ctypes, os, sys

lib, pidfiles = sys.argv[1], sys.argv[2:]
st = os.stat(lib)
key = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
TABLE_KB = 1024


def mapped(pid):
    """Rss and Pss, kB, of PID's mappings of the library's file"""
    rss = pss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            p = line.split()
            if "-" in p[0] and not p[0].endswith(":"):
                ma, mi = (int(x, 16) for x in p[3].split(":"))
                inside = (ma, mi, int(p[4])) == key
            elif inside and p[0] == "Rss:":
                rss += int(p[1])
            elif inside and p[0] == "Pss:":
                pss += int(p[1])
    return rss, pss


def cached_kb(path, size):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_ubyte)]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, size, 1, 1, fd, 0)
    os.close(fd)
    page = os.sysconf("SC_PAGE_SIZE")
    vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
    assert libc.mincore(addr, size, vec) == 0
    libc.munmap(addr, size)
    return sum(b & 1 for b in bytes(vec)) * page // 1024


fails = 0
for name, pf in zip("AB", pidfiles):
    rss, pss = mapped(int(open(pf).read()))
    if rss < TABLE_KB:
        print(f"FAIL: guest {name}'s QEMU maps {rss} kB of the library "
              f"(its window mapping), less than the table's {TABLE_KB}")
        fails += 1
    elif pss > 0.6 * rss:
        print(f"FAIL: guest {name}'s QEMU: Pss {pss} kB of Rss {rss} kB: "
              "its pages are not the other guest's")
        fails += 1
    else:
        print(f"ok: guest {name}'s QEMU maps the library: Rss {rss} kB, "
              f"Pss {pss} kB (the pages are shared)")
cache = cached_kb(lib, st.st_size)
page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
file_kb = -(-st.st_size // os.sysconf("SC_PAGE_SIZE")) * page_kb
if cache < TABLE_KB or cache > file_kb:
    print(f"FAIL: the host's page cache holds {cache} kB of the "
          f"{file_kb} kB library")
    fails += 1
else:
    print(f"ok: the host's page cache holds the library once: {cache} kB "
          f"of {file_kb} kB, for both guests")
sys.exit(1 if fails else 0)
PY
    touch "$root/ctl-A/phase2" "$root/ctl-B/phase2"
fi
vmrc=0
wait $vms || vmrc=$?
vms=
grep -h '^[AB]: \(ok\|FAIL\)' "$work/out" || true
cat "$work/host" 2>/dev/null || true
if [ $vmrc != 0 ] || [ "$(grep -c '^[AB]: guest [AB] done' "$work/out")" != 2 ]; then
    on_fail "grep -v '^[AB]: \\(ok\\|FAIL\\)' '$work/out' | tail -n 20"
    fail "the two guests did not finish (status $vmrc)"
fi
[ $rc = 0 ] || exit 1
for g in A B; do
    maps=$(stat_count "$work/logs/$g/virtiofsd.log" SETUPMAPPING)
    [ "${maps:-0}" -ge 4 ] || fail "guest $g's daemon counted ${maps:-no} SETUPMAPPING"
done
pass "both daemons served the guests' maps (--stats)"
