#!/usr/bin/env bash
# QEMU's memory map changing under a running vCPU (TCG): one vCPU reads a
# PCI device's MMIO BAR while the other turns the device's memory
# decoding off and on (harness/guest-tools/mapflip.c), and the guest must
# then still power off.  QEMU 10.0 without the TCG TLB section fix
# (patches/*-accel-tcg-keep-the-section-*) looks a TLB entry made from
# the map before a flip up in the map after it, so accesses go
# to the wrong device: instrumented, a 3-second run sent the testdev's
# reads to the IOAPIC and the local APIC's own writes to the HPET and the
# BIOS ROM.  The guest loses interrupts and hangs with both vCPUs idle
# (5 of 5 runs of 10 seconds, 7 of 10 of 3 seconds), or QEMU aborts in
# iotlb_to_section() when the stale number is past the new map's end.
# Guest boots change the map the same way, only less often.
#
# MAPFLIP_SECONDS (default 10) of flips.  Extra arguments go to
# harness/vm.py (e.g. --qemu to try another build); the accelerator is
# TCG whatever they say: under KVM the test cannot fail.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
seconds=${MAPFLIP_SECONDS:-10}

guest_script "$work/guest.sh" <<GUEST
[ "\$VFS_ACCEL" = tcg ] || fail "running under \$VFS_ACCEL, not TCG"
dev=
for d in /sys/bus/pci/devices/*; do
    # pci-testdev: Red Hat 1b36:0005
    if [ "\$(cat \$d/vendor)" = 0x1b36 ] && [ "\$(cat \$d/device)" = 0x0005 ]; then
        dev=\$d
    fi
done
[ -n "\$dev" ] || fail "no pci-testdev in the guest"
out=\$(mapflip "\$dev" $seconds) || fail "mapflip: \$out"
# The verdict is that this line arrives and the guest then powers off: a
# guest that lost its interrupts hangs here or in poweroff, and vm.py
# reports the timeout.
pass "\$out"
GUEST

vm --daemon none --smp 2 --qemu-args "-device pci-testdev" "$@" --accel tcg \
    "$work/guest.sh"
