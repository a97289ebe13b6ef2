/*
 * vhost-user-fs: the DAX cache window's checks, kept out of
 * vhost-user-fs.c so that the device file only calls them.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_CACHE_H
#define HW_VIRTIO_VHOST_USER_FS_CACHE_H

#include "hw/virtio/vhost-user-fs.h"

/**
 * vuf_cache_check: refuse a cache-size that cannot work
 * @fs: the device being realized
 * @errp: error object
 *
 * Returns: true if cache-size is 0 (no window) or a window of that size
 * can be set up with this machine's configuration.
 */
bool vuf_cache_check(VHostUserFS *fs, Error **errp);

#endif
