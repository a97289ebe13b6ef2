#!/usr/bin/env bash
# The cache window as users size it: cache-size=16G on -machine pc and on
# q35.  In each, the guest must see the device's 16 GiB BAR, mount with
# dax=always, and move data through the window both ways (mmap and
# write(2), checked on the host).
# Extra arguments go to harness/vm.py (the daemon is ours); the
# --timeout among them is for the two guests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 2 "$@"
pattern="python3 $top/harness/tests/pattern.py"

guest_script "$work/window.sh" <<'GUEST'
# vhost-user-fs-pci: virtio 1.0 device 26 (0x1040 + 26)
bars=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x105a ]; then
        bars=$(while read -r start end flags; do
                   [ $((end)) -gt 0 ] && printf '0x%x ' $((end - start + 1))
               done < $d/resource)
    fi
done
echo "vhost-user-fs BARs: $bars"
case " $bars " in
*0x400000000\ *) pass "a 16 GiB BAR" ;;
*) fail "no 16 GiB BAR among the device's: $bars" ;;
esac
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio fill /mnt/m.bin $((40 << 20)) 4 || fail "mmap writes"
mmapio write /mnt/w.bin $((40 << 20)) 5 || fail "write()"
echo 3 > /proc/sys/vm/drop_caches
mmapio check /mnt/m.bin 4 && mmapio check /mnt/w.bin 5 || fail "reading back"
pass "80 MiB through the window both ways"
umount /mnt || fail umount
GUEST

# run NAME MACHINE SCRIPT [VM-ARGS...]
run() {
    local name=$1 machine=$2 script=$3 rc=0
    shift 3
    mkdir -p "$work/$name.share"
    vm --shared "$work/$name.share" --quiet \
        --machine "$machine" --cache-size 16G "${vm_args[@]}" "$@" \
        --daemon ours "$script" > "$work/$name.out" 2>&1 || rc=$?
    sed "s/^/  $name| /" "$work/$name.out"
    if [ $rc != 0 ]; then
        bad "$name: the guest run failed (status $rc)"
        return 1
    fi
}
for m in pc q35; do
    if run "$m" "$m" "$work/window.sh"; then
        if $pattern check "$work/$m.share/m.bin" 4 $((40 << 20)) &&
           $pattern check "$work/$m.share/w.bin" 5 $((40 << 20)); then
            pass "$m: cache-size=16G, the guest's data is right on the host"
        else
            bad "$m: the guest's data differs on the host"
        fi
    fi
done
finish
