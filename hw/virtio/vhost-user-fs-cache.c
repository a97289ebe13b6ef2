/*
 * vhost-user-fs: the DAX cache window's checks at realize.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "hw/qdev-core.h"
#include "hw/virtio/virtio-pci.h"
#include "system/system.h"
#include "vhost-user-fs-cache.h"

bool vuf_cache_check(VHostUserFS *fs, Error **errp)
{
    DeviceState *dev = DEVICE(fs);

    if (!fs->conf.cache_size) {
        return true;
    }

    if (!virtio_shmem_arena_check_size("cache-size", fs->conf.cache_size,
                                       errp)) {
        return false;
    }

    /*
     * With mem-lock=on, every new mapping is populated and locked: the
     * window would pin cache-size bytes of zero pages right away.
     */
    if (should_mlock(mlock_state) && !is_mlock_on_fault(mlock_state)) {
        error_setg(errp, "cache-size cannot be used with -overcommit "
                   "mem-lock=on: use mem-lock=on-fault");
        return false;
    }

    /* Only virtio-pci exposes shared memory regions to the guest so far */
    if (!object_dynamic_cast(OBJECT(qdev_get_parent_bus(dev)),
                             TYPE_VIRTIO_PCI_BUS)) {
        error_setg(errp, "cache-size needs a PCI transport: use "
                   "vhost-user-fs-pci");
        return false;
    }

    return true;
}
