/*
 * vhost-user-fs: the DAX cache window's life with the device: the
 * checks and set-up at realize, reset, finalize.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "hw/qdev-core.h"
#include "hw/virtio/vhost-user-shmem.h"
#include "hw/virtio/virtio-pci.h"
#include "system/system.h"
#include "vhost-user-fs-cache.h"

static bool vuf_cache_check(VHostUserFS *fs, Error **errp)
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

bool vuf_cache_realize(VHostUserFS *fs, Error **errp)
{
    if (!vuf_cache_check(fs, errp)) {
        return false;
    }
    if (!fs->conf.cache_size) {
        return true;
    }
    if (!virtio_shmem_arena_init(&fs->cache, OBJECT(fs), "vhost-user-fs-cache",
                                 fs->conf.cache_size, errp)) {
        return false;
    }
    vhost_user_add_shmem_arena(&fs->vhost_user, VHOST_USER_FS_SHMID_CACHE,
                               &fs->cache);
    return true;
}

void vuf_cache_reset(VirtIODevice *vdev)
{
    virtio_shmem_arena_reset(&VHOST_USER_FS(vdev)->cache);
}

void vuf_cache_finalize(Object *obj)
{
    virtio_shmem_arena_finalize(&VHOST_USER_FS(obj)->cache);
}
