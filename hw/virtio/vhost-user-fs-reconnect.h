/*
 * vhost-user-fs: what vhost-user-fs.c and vhost-user-fs-reconnect.c share.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_RECONNECT_H
#define HW_VIRTIO_VHOST_USER_FS_RECONNECT_H

#include "chardev/char-fe.h"
#include "hw/virtio/virtio.h"

/* vhost-user-fs.c: start and stop the vhost half of the device */
void vuf_start(VirtIODevice *vdev);
void vuf_stop(VirtIODevice *vdev);

/*
 * vhost-user-fs-reconnect.c: set up the vhost half for a back-end that
 * just connected, starting it if the guest had started the device.
 */
int vuf_connect(DeviceState *dev, Error **errp);
/* The chardev's event handler once realize has a back-end */
void vuf_event(void *opaque, QEMUChrEvent event);

#endif
