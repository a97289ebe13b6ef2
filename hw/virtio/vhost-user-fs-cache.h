/*
 * vhost-user-fs: the DAX cache window's life with the device
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_CACHE_H
#define HW_VIRTIO_VHOST_USER_FS_CACHE_H

#include "hw/virtio/vhost-user-fs.h"

/**
 * vuf_cache_realize: set up the window cache-size asks for
 * @fs: the device being realized, its vhost-user state initialized
 * @errp: error object
 *
 * Refuses a cache-size that cannot work with this machine, then makes
 * the window and offers it to the back-end.  Nothing to do without
 * cache-size.
 *
 * Returns: true on success.
 */
bool vuf_cache_realize(VHostUserFS *fs, Error **errp);

/**
 * vuf_cache_reset: the VirtioDeviceClass reset of vhost-user-fs
 * @vdev: the device
 *
 * A reset guest has forgotten its mappings: the window forgets them too.
 */
void vuf_cache_reset(VirtIODevice *vdev);

/**
 * vuf_cache_finalize: the instance_finalize of vhost-user-fs
 * @obj: the device
 *
 * Unrealize only empties the window: a vCPU may still be inside it
 * until the device is finalized, and only then does its memory go.
 */
void vuf_cache_finalize(Object *obj);

#endif
