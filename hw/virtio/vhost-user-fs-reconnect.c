/*
 * vhost-user-fs: losing the back-end and taking a new one.
 *
 * When virtiofsd dies the device stops its vhost half, drops the DAX
 * window's mappings and waits; a back-end that connects again on the
 * same chardev (reconnect-ms, or a server socket) gets the device as the
 * guest left it, requests still queued included.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "hw/virtio/virtio-bus.h"
#include "hw/virtio/vhost-user-fs.h"
#include "vhost-user-fs-reconnect.h"
#include "vhost-user-fs-migration.h"

/* How messages name the device: its id, as libvirt and users know it */
static char *vuf_name(VHostUserFS *fs)
{
    DeviceState *proxy = qdev_get_parent_bus(DEVICE(fs))->parent;

    if (DEVICE(fs)->id) {
        return g_strdup(DEVICE(fs)->id);
    }
    if (proxy && proxy->id) {
        return g_strdup(proxy->id);
    }
    return object_get_canonical_path(OBJECT(proxy ?: DEVICE(fs)));
}

int vuf_connect(DeviceState *dev, Error **errp)
{
    ERRP_GUARD();
    VirtIODevice *vdev = VIRTIO_DEVICE(dev);
    VHostUserFS *fs = VHOST_USER_FS(dev);
    int ret;

    if (fs->connected) {
        return 0;
    }

    /* vhost_dev_cleanup() zeroed these on the last disconnect */
    fs->vhost_dev.nvqs = 1 + fs->conf.num_request_queues;
    fs->vhost_dev.vqs = fs->vhost_vqs;
    ret = vhost_dev_init(&fs->vhost_dev, &fs->vhost_user,
                         VHOST_BACKEND_TYPE_USER, 0, errp);
    if (ret < 0) {
        return ret;
    }
    if (!vhost_user_shmem_check_config(&fs->vhost_dev, &fs->vhost_user,
                                       errp)) {
        error_append_hint(errp, "Region 0 is the DAX cache window: give the "
                          "device and its back-end the same cache size.\n");
        vhost_dev_cleanup(&fs->vhost_dev);
        return -EINVAL;
    }
    fs->connected = true;

    /* A back-end that cannot carry the DAX window must not be migrated */
    if (!vuf_migration_update_blocker(fs, errp)) {
        fs->connected = false;
        vhost_dev_cleanup(&fs->vhost_dev);
        return -EBUSY;
    }

    /* A guest that started the device before the back-end went away */
    if (virtio_device_started(vdev, vdev->status)) {
        vuf_start(vdev);
        if (!vhost_dev_is_started(&fs->vhost_dev)) {
            error_setg(errp, "cannot start the new back-end");
            return -EIO;
        }
    }
    return 0;
}

/*
 * The back-end has gone: stop the device's vhost half and forget the
 * connection.  The guest is not told; its requests stay in the virtqueues
 * and are handed to the next back-end that connects.
 */
static void vuf_disconnect(DeviceState *dev)
{
    VirtIODevice *vdev = VIRTIO_DEVICE(dev);
    VHostUserFS *fs = VHOST_USER_FS(dev);
    Error *local_err = NULL;

    if (fs->connected) {
        g_autofree char *name = vuf_name(fs);

        fs->connected = false;
        /* While a migration runs, vuf_migration_check() stops it instead */
        if (!vuf_migration_update_blocker(fs, &local_err)) {
            error_free(local_err);
        }
        error_report("vhost-user-fs: back-end of device %s (tag \"%s\") "
                     "disconnected%s; file system requests wait until a "
                     "back-end is connected again (chardev option "
                     "reconnect-ms, or server=on)", name, fs->conf.tag,
                     virtio_shmem_arena_exists(&fs->cache) ?
                     " and its DAX window was cleared" : "");
        /*
         * vhost_user_async_close() cleared vhost_dev.started: started_vu
         * tells whether there is anything to stop.
         */
        vuf_stop(vdev);
        vhost_dev_cleanup(&fs->vhost_dev);
        /*
         * Closing the back-end channel dropped the mappings already,
         * unless the back-end never had one.
         */
        virtio_shmem_arena_reset(&fs->cache);
    }

    qemu_chr_fe_set_handlers(&fs->conf.chardev, NULL, NULL, vuf_event, NULL,
                             dev, NULL, true);
}

void vuf_event(void *opaque, QEMUChrEvent event)
{
    DeviceState *dev = opaque;
    VHostUserFS *fs = VHOST_USER_FS(dev);
    Error *local_err = NULL;
    g_autofree char *name = NULL;

    switch (event) {
    case CHR_EVENT_OPENED:
        if (fs->connected) {
            break;
        }
        name = vuf_name(fs);
        if (vuf_connect(dev, &local_err) < 0) {
            error_reportf_err(local_err, "vhost-user-fs: device %s (tag "
                              "\"%s\"): ", name, fs->conf.tag);
            qemu_chr_fe_disconnect(&fs->conf.chardev);
            break;
        }
        /*
         * The FUSE session (node ids, file handles) died with the old
         * back-end process.
         */
        info_report("vhost-user-fs: device %s (tag \"%s\") has a back-end "
                    "again; unless it kept the old one's state, the guest "
                    "must mount the file system again", name,
                    fs->conf.tag);
        break;
    case CHR_EVENT_CLOSED:
        /* Not from inside a vhost-user call that is failing right now */
        vhost_user_async_close(dev, &fs->conf.chardev, &fs->vhost_dev,
                               vuf_disconnect);
        break;
    case CHR_EVENT_BREAK:
    case CHR_EVENT_MUX_IN:
    case CHR_EVENT_MUX_OUT:
        break;
    }
}
