/*
 * vhost-user-fs-pci: whether the guest can reach the DAX cache window.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/host-utils.h"
#include "hw/core/cpu.h"
#include "hw/pci/pci_bus.h"
#include "hw/virtio/virtio-shmem-arena.h"
#include "vhost-user-fs-pci-cache.h"

/*
 * PC firmware places a 64-bit BAR naturally aligned above the start of
 * the 64-bit PCI hole.  A window that cannot fit there below the CPU's
 * physical address width ends up where the guest cannot reach it, and
 * the guest driver gives up with nothing but a kernel message to show.
 * Refuse it here instead, saying what would make it fit.  Machines
 * without these properties (not a PC, or no phys-bits) are not checked.
 */
bool vhost_user_fs_pci_check_addressable(VirtIOPCIProxy *vpci_dev,
                                         uint64_t size, Error **errp)
{
    Object *host = OBJECT(pci_device_root_bus(&vpci_dev->pci_dev)->qbus.parent);
    g_autofree char *sz = NULL;
    uint64_t start, end;
    uint32_t phys_bits;

    /* A size that breaks the basic rules is the device's to report. */
    if (!virtio_shmem_arena_check_size("cache-size", size, NULL)) {
        return true;
    }
    if (!first_cpu || !object_property_find(OBJECT(first_cpu), "phys-bits") ||
        !object_property_find(host, "pci-hole64-start")) {
        return true;
    }
    phys_bits = object_property_get_uint(OBJECT(first_cpu), "phys-bits",
                                         &error_abort);
    start = object_property_get_uint(host, "pci-hole64-start", &error_abort);
    end = ROUND_UP(start, size) + size;
    if (phys_bits >= 64 || end <= 1ULL << phys_bits) {
        return true;
    }

    sz = size_to_str(size);
    error_setg(errp, "cache-size=%s does not fit in the guest physical "
               "address space: the window would end at 0x%" PRIx64
               " but the CPU has phys-bits=%u", sz, end, phys_bits);
    error_append_hint(errp, "Add phys-bits=%d to -cpu (or host-phys-bits=on "
                      "if the host has that many), or lower cache-size.\n",
                      64 - clz64(end - 1));
    return false;
}
