#!/usr/bin/env bash
# Exec and mmap from a shared root through the DAX window, as a guest
# running its programs from a container image or a package store does
# (harness/tests/shared-root-lib.sh makes the root).  One guest mounts
# the share with -o dax=inode, our virtiofsd serves it with
# --dax-policy=exec, and the guest chroots into it:
#
#   policy       programs, the loader, libc, the interpreter and a
#                script are in the window (statx: STATX_ATTR_DAX), the
#                0644 library too (by its ELF magic), a data file not
#   loader       a dynamically linked program runs; its /proc/PID/maps
#                show the loader, libc, the library and itself mapped
#                from the DAX mount; reading the library's 1 MiB table
#                leaves the guest's page cache as it was
#   interpreter  a "#!/bin/busybox sh" script runs, and finds busybox in
#                its own maps
#   replaced     while the program runs, the host replaces it and its
#                library by rename (as dpkg does): the running one keeps
#                its old text and table (v1), a new one runs the new (v2)
#
# A host writer that rewrites a running program in place is not refused
# with ETXTBSY as on a local file system: the host kernel does not know
# the guest executes it (docs/benchmarks/density-notes.md).  The daemon's
# --stats must show the SETUPMAPPINGs and the ELF checks.
#
# SHARED_ROOT_POLICY (default exec) is the --dax-policy: with size:2M, the
# default, the test must fail (the library and libc are under 2 MiB).
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$top/harness/tests/shared-root-lib.sh"
policy=${SHARED_ROOT_POLICY:-exec}
root=$work/root
root_make "$root"
# Version 2, built now: the host's step is two renames
root_build "$work/v2" 2

guest_script "$work/guest.sh" <<GUEST
DAX_FILES="$(echo $ROOT_DAX_FILES)"
NODAX_FILES="$ROOT_NODAX_FILES"
GUEST
cat >> "$work/guest.sh" <<'GUEST'
R=/mnt
cached() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }
# lines FILE N: waits (30 s at most) until FILE has N lines
lines() {
    i=0
    while [ "$(wc -l < $1)" -lt $2 ]; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "no line $2 in $1: $(cat $1)"
        sleep 0.1
    done
}
mount_virtiofs "$VFS_TAG" $R dax=inode
dax_active $R || fail "dax=inode requested, DAX not active"
mount -t proc proc $R/proc || fail "proc in the root"

for f in $DAX_FILES $NODAX_FILES; do set -- "$@" $R/$f; done
daxattr "$@" > /tmp/attrs || fail "statx: $(cat /tmp/attrs)"
for f in $DAX_FILES; do
    grep -qx "$R/$f dax" /tmp/attrs ||
        fail "policy: $f is not in the window: $(grep " *$R/$f " /tmp/attrs)"
done
for f in $NODAX_FILES; do
    grep -qx "$R/$f nodax" /tmp/attrs || fail "policy: the data file $f is in the window"
done
pass "policy: $(echo $DAX_FILES | wc -w) programs and libraries in the window, the data file not"

sync; echo 3 > /proc/sys/vm/drop_caches
c0=$(cached)
: > /tmp/prog.out
chroot $R /bin/prog serve > /tmp/prog.out 2>&1 &
pid=$!
lines /tmp/prog.out 1
c1=$(cached)
[ "$(sed -n 1p /tmp/prog.out)" = "prog v1 lib v1 sum 1048576" ] ||
    fail "loader: the program said: $(cat /tmp/prog.out)"
for f in /bin/prog /lib/libdensity.so /lib/x86_64-linux-gnu/libc.so.6 \
         /lib64/ld-linux-x86-64.so.2; do
    grep -q " $R$f\$" /proc/$pid/maps ||
        fail "loader: $f is not mapped by the program: $(cat /proc/$pid/maps)"
done
# The 1 MiB table it summed is the window's pages, not the guest's copy
[ $((c1 - c0)) -lt 512 ] ||
    fail "loader: the guest's page cache grew by $((c1 - c0)) kB while the program ran"
pass "loader: the program, its library, libc and the loader mapped from the DAX mount; guest page cache +$((c1 - c0)) kB"

out=$(chroot $R /bin/script) || fail "interpreter: the script failed: $out"
[ "$out" = "script: run by /bin/busybox, mapped" ] ||
    fail "interpreter: the script said: $out"
pass "interpreter: $out"

host_step $R
kill -USR1 $pid
lines /tmp/prog.out 2
[ "$(sed -n 2p /tmp/prog.out)" = "prog v1 lib v1 sum 1048576" ] ||
    fail "replaced: the running program changed: $(sed -n 2p /tmp/prog.out)"
# Past cache=auto's 1 s entry timeout the guest looks the name up again
sleep 1.5
new=$(chroot $R /bin/prog) || fail "replaced: the new program failed: $new"
[ "$new" = "prog v2 lib v2 sum 2097152" ] ||
    fail "replaced: a program started after the rename said: $new"
kill -USR1 $pid
lines /tmp/prog.out 3
[ "$(sed -n 3p /tmp/prog.out)" = "prog v1 lib v1 sum 1048576" ] ||
    fail "replaced: the running program changed: $(sed -n 3p /tmp/prog.out)"
kill $pid; wait $pid 2>/dev/null
pass "replaced by rename on the host: the running program keeps v1's text and table, a new one runs v2"
umount $R/proc
umount $R || fail umount
echo "guest done"
GUEST

replace() {
    # As a package manager does: a new file beside, then rename over
    cp "$work/v2/bin/prog" "$root/bin/.prog.new"
    cp "$work/v2/lib/libdensity.so" "$root/lib/.libdensity.so.new"
    mv -f "$root/bin/.prog.new" "$root/bin/prog"
    mv -f "$root/lib/.libdensity.so.new" "$root/lib/libdensity.so"
}

rc=0
run_vm_with_host_step "$root" replace --quiet \
    --daemon ours --cache-size 64M --cache-mode auto --log-dir "$work/logs" \
    --daemon-args "--stats --dax-policy=$policy" "$@" "$work/guest.sh" \
    > "$work/out" 2>&1 || rc=$?
sed -n '/^ok: \|^FAIL: /p' "$work/out"
if [ $rc != 0 ] || ! grep -q "^guest done" "$work/out"; then
    on_fail "grep -v '^ok: \\|^FAIL: ' '$work/out' | tail -n 20"
    fail "the guest run failed (status $rc)"
fi
# The daemon saw the guest map the files, and looked at their first bytes
maps=$(stat_count "$work/logs/virtiofsd.log" SETUPMAPPING)
elf=$(stat_count "$work/logs/virtiofsd.log" "ELF check (--dax-policy=exec)")
if [ "${maps:-0}" -lt 6 ] || [ "${elf:-0}" -lt 1 ]; then
    on_fail 'grep "stats:" "$work/logs/virtiofsd.log"'
    fail "the daemon counted ${maps:-no} SETUPMAPPING and ${elf:-no} ELF checks"
fi
pass "the daemon served $maps SETUPMAPPINGs and $elf ELF checks"
