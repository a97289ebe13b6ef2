#!/usr/bin/env bash
# Smoke test of the whole chain: a host file is read in the guest through
# virtio-fs, a guest file is read back on the host, a directory listing and a
# rename agree on both sides.  Extra arguments go to harness/vm.py
# (e.g. --daemon rust --cache-mode never, or --cache-size 1G with DAX).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared smoke

head -c 1048576 /dev/urandom > "$shared/from-host.bin"
host_sum=$(sha256sum "$shared/from-host.bin" | cut -d' ' -f1)
mkdir "$shared/dir" && touch "$shared/dir/a" "$shared/dir/b"

guest_script "$work/guest.sh" <<GUEST
opts=
[ "\$VFS_DAX" = 1 ] && opts=dax=always
mount_virtiofs "\$VFS_TAG" /mnt \$opts
grep " /mnt " /proc/self/mountinfo
sum=\$(sha256sum /mnt/from-host.bin | cut -d' ' -f1)
[ "\$sum" = "$host_sum" ] || fail "host file reads wrong in the guest: \$sum"
pass "host file read in the guest"
head -c 1048576 /dev/urandom > /mnt/from-guest.bin || fail "write from the guest"
sha256sum /mnt/from-guest.bin | cut -d' ' -f1 > /mnt/from-guest.sum
[ "\$(ls /mnt/dir | tr '\n' ' ')" = "a b " ] || fail "listing: \$(ls /mnt/dir)"
mv /mnt/dir/a /mnt/dir/c || fail "rename"
if [ "\$VFS_REQUEST_QUEUES" -gt 1 ]; then
    # One interrupt vector per request queue the guest set up; each CPU
    # reads the whole file, so requests come in on more than one of them.
    for c in \$(seq 0 \$((\$(nproc) - 1))); do
        taskset -c \$c cat /mnt/from-host.bin > /dev/null || fail "read on CPU \$c"
    done
    # Linux uses at most one request queue per CPU
    want=\$VFS_REQUEST_QUEUES
    [ "\$want" -le "\$(nproc)" ] || want=\$(nproc)
    nq=\$(grep -c 'requests\.' /proc/interrupts)
    [ "\$nq" = "\$want" ] || fail "guest set up \$nq request queues, not \$want"
    used=\$(grep 'requests\.' /proc/interrupts | awk '{s=0; for (i=2; i<=NF && \$i ~ /^[0-9]+\$/; i++) s+=\$i; if (s) n++} END {print n+0}')
    [ "\$used" -ge 2 ] || fail "only \$used request queue(s) carried requests"
    pass "\$nq request queues, \$used of them used"
fi
if [ "\$VFS_DAX" = 1 ]; then
    dax_active /mnt || fail "DAX requested but not active on /mnt"
    pass "DAX active"
fi
sync
umount /mnt || fail "umount"
pass "guest side done"
GUEST

vm --shared "$shared" "$@" "$work/guest.sh"
want=$(cat "$shared/from-guest.sum" 2>/dev/null) || fail "guest wrote no checksum"
got=$(sha256sum "$shared/from-guest.bin" | cut -d' ' -f1)
[ "$want" = "$got" ] || fail "guest file reads wrong on the host"
[ -e "$shared/dir/c" ] && [ ! -e "$shared/dir/a" ] || fail "rename not seen on the host"
pass "guest file read on the host, rename seen"
