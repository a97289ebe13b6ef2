/*
 * vhost-user: serve back-end requests while the front-end waits for the
 * reply to one of its own messages.
 *
 * The back-end may be unable to answer before it has the answer to a
 * request of its own: a virtio-fs daemon stops a queue (GET_VRING_BASE)
 * only once the request in flight there is done, and that may need a
 * SHMEM_MAP first to set up the DAX mapping the guest asked for.  The
 * main loop cannot run while the front-end waits, so the back-end
 * channel is served here, in a GMainContext of our own that watches
 * just the two channels.  Nothing else runs meanwhile.
 *
 * The caller serves only requests whose handlers never send front-end
 * messages, and never while it is itself handling a back-end request: a
 * handler that sends a front-end message (an IOTLB miss does) would
 * otherwise run in the middle of another front-end exchange and take
 * its reply.  That is why upstream reverted its first attempt at this
 * (QEMU 6.0 served every back-end request from vhost_user_read(); QEMU
 * 8.0 dropped it after it broke DPDK back-ends).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "chardev/char-fe.h"
#include "hw/virtio/vhost-user-shmem.h"
#include "hw/virtio/virtio.h"

static gboolean vhost_user_reply_readable(void *do_not_use,
                                          GIOCondition condition,
                                          void *opaque)
{
    bool *readable = opaque;

    *readable = true;
    return G_SOURCE_REMOVE;
}

void vhost_user_serve_while_waiting(struct vhost_dev *dev, CharBackend *chr,
                                    QIOChannel *backend_ioc,
                                    QIOChannelFunc serve)
{
    bool readable = false;
    GMainContext *ctx;
    GSource *src;

    /*
     * The handlers run under the BQL, as they do from the main loop;
     * a caller without it keeps the plain blocking read.
     */
    if (!bql_locked() ||
        !(virtio_has_feature(dev->protocol_features,
                             VHOST_USER_PROTOCOL_F_SHMEM) ||
          virtio_has_feature(dev->protocol_features,
                             VHOST_USER_PROTOCOL_F_MEM_RW))) {
        return;
    }

    src = qemu_chr_fe_create_watch(chr, G_IO_IN | G_IO_HUP | G_IO_ERR);
    if (!src) {
        return;
    }
    ctx = g_main_context_new();
    g_source_set_callback(src, (GSourceFunc)vhost_user_reply_readable,
                          &readable, NULL);
    g_source_attach(src, ctx);
    g_source_unref(src);

    src = qio_channel_create_watch(backend_ioc, G_IO_IN | G_IO_HUP);
    g_source_set_callback(src, (GSourceFunc)serve, dev, NULL);
    g_source_attach(src, ctx);
    g_source_unref(src);

    while (!readable) {
        g_main_context_iteration(ctx, true);
    }
    /* Destroys what is left of both sources */
    g_main_context_unref(ctx);
}
