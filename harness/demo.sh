#!/usr/bin/env bash
# The main job, end to end: boot a guest that mounts a host directory through
# vhost-user-fs-pci, with our virtiofsd and the DAX cache window when both are
# there, and show a file written on each side read on the other.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/mk/common.sh"

shared=$BUILD/demo-share
mkdir -p "$shared"
rm -f "$shared/from-guest.txt"
echo "hello from the host, written $(date -u +%FT%TZ)" > "$shared/from-host.txt"

qemu=$BUILD/qemu/qemu-system-x86_64
vm_args=(--shared "$shared")
if [ -x "$BUILD/qemu/tools/virtiofsd/virtiofsd" ]; then
    vm_args+=(--daemon ours)
    ours=1
    daemon="our virtiofsd"
else
    vm_args+=(--daemon rust --cache-mode never)
    ours=0
    daemon="the Rust virtiofsd 1.14 (ours is not built yet)"
fi
if "$qemu" -device vhost-user-fs-pci,help 2>/dev/null | grep -q 'cache-size=' &&
   [ "$ours" = 1 ]; then
    vm_args+=(--cache-size 1G)
    mode="DAX, 1 GiB cache window, mounted -o dax=always"
else
    mode="no DAX (the device or daemon does not support it yet)"
fi

echo "== shared directory: $shared"
echo "== back-end: $daemon; $mode"
script=$(mktemp)
trap 'rm -f "$script"' EXIT
cat > "$script" <<'GUEST'
. /lib/vfsdax.sh
opts=
[ "$VFS_DAX" = 1 ] && opts=dax=always
mount_virtiofs "$VFS_TAG" /mnt $opts
echo "guest: $(grep ' /mnt ' /proc/self/mountinfo | cut -d' ' -f5-)"
echo "guest: reading /mnt/from-host.txt: $(cat /mnt/from-host.txt)"
echo "hello from the guest, kernel $(uname -r)" > /mnt/from-guest.txt
if [ "$VFS_DAX" = 1 ]; then
    dax_active /mnt && echo "guest: DAX is active on /mnt" || fail "DAX is not active"
fi
umount /mnt
GUEST
python3 "$top/harness/vm.py" "${vm_args[@]}" "$script"
echo "host: reading $shared/from-guest.txt: $(cat "$shared/from-guest.txt")"
