/*
 * vhost-user-fs: whether a Linux guest can afford the DAX cache window,
 * kept out of vhost-user-fs.c so that the device file only calls it.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_GUEST_RAM_H
#define HW_VIRTIO_VHOST_USER_FS_GUEST_RAM_H

#include "hw/virtio/vhost-user-fs.h"

/**
 * vuf_check_guest_ram: warn when the window would eat the guest's RAM
 * @fs: the device, being realized with a cache window
 */
void vuf_check_guest_ram(VHostUserFS *fs);

#endif
