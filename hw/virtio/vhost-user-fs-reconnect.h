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
#include "hw/virtio/virtiofs-dax-compat.h"

/*
 * vhost-user-fs.c: start and stop the vhost half of the device.  From
 * 10.2 on upstream's vuf_stop() returns vhost_dev_stop()'s result.
 */
void vuf_start(VirtIODevice *vdev);
#if VIRTIOFS_DAX_QEMU_AT_LEAST(10, 2)
int vuf_stop(VirtIODevice *vdev);
#else
void vuf_stop(VirtIODevice *vdev);
#endif

/*
 * vhost-user-fs-reconnect.c: set up the vhost half for a back-end that
 * just connected, starting it if the guest had started the device.
 */
int vuf_connect(DeviceState *dev, Error **errp);
/* The chardev's event handler once realize has a back-end */
void vuf_event(void *opaque, QEMUChrEvent event);

#endif
