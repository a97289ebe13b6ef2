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
#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "chardev/char-fe.h"
#include "hw/virtio/vhost-user-shmem.h"
#include "hw/virtio/virtio.h"
#include "trace.h"

/* The fixed part of every vhost-user message (vhost-user.rst) */
typedef struct VhostUserWaitHeader {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
} QEMU_PACKED VhostUserWaitHeader;

typedef struct VhostUserWait {
    struct vhost_dev *dev;
    bool (*self_contained)(uint32_t request);
    QIOChannelFunc serve;
} VhostUserWait;

static gboolean vhost_user_reply_readable(void *do_not_use,
                                          GIOCondition condition,
                                          void *opaque)
{
    bool *readable = opaque;

    *readable = true;
    return G_SOURCE_REMOVE;
}

static gboolean vhost_user_backend_readable(QIOChannel *ioc,
                                            GIOCondition condition,
                                            void *opaque)
{
    VhostUserWait *w = opaque;
    VhostUserWaitHeader hdr;
    struct iovec iov = { .iov_base = &hdr, .iov_len = sizeof(hdr) };
    ssize_t n;

    /*
     * Look at the request without taking it off the channel: one that is
     * not self-contained, and everything behind it, must wait for the
     * main loop, so that requests are still handled in order.  So must a
     * header that is not all there yet, and a channel that hung up.
     */
    n = qio_channel_readv_full(ioc, &iov, 1, NULL, NULL,
                               QIO_CHANNEL_READ_FLAG_MSG_PEEK, NULL);
    if (n == QIO_CHANNEL_ERR_BLOCK) {
        return G_SOURCE_CONTINUE;
    }
    if (n != sizeof(hdr) || !w->self_contained(hdr.request)) {
        trace_vhost_user_backend_defer_while_waiting(n == sizeof(hdr) ?
                                                     hdr.request : 0);
        return G_SOURCE_REMOVE;
    }

    trace_vhost_user_backend_serve_while_waiting(hdr.request);
    return w->serve(ioc, condition, w->dev);
}

/* Only devices with the shared memory features wait this way */
static bool vhost_user_serves_while_waiting(struct vhost_dev *dev)
{
    return virtio_has_feature(dev->protocol_features,
                              VHOST_USER_PROTOCOL_F_SHMEM) ||
           virtio_has_feature(dev->protocol_features,
                              VHOST_USER_PROTOCOL_F_MEM_RW);
}

void vhost_user_serve_while_waiting(struct vhost_dev *dev, CharBackend *chr,
                                    QIOChannel *backend_ioc,
                                    bool (*self_contained)(uint32_t request),
                                    QIOChannelFunc serve)
{
    VhostUserWait w = {
        .dev = dev, .self_contained = self_contained, .serve = serve,
    };
    bool readable = false;
    GMainContext *ctx;
    GSource *src;

    /*
     * The handlers run under the BQL, as they do from the main loop;
     * a caller without it keeps the plain blocking read.
     */
    if (!bql_locked() || !vhost_user_serves_while_waiting(dev)) {
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
    g_source_set_callback(src, (GSourceFunc)vhost_user_backend_readable, &w,
                          NULL);
    g_source_attach(src, ctx);
    g_source_unref(src);

    while (!readable) {
        g_main_context_iteration(ctx, true);
    }
    /* Destroys what is left of both sources */
    g_main_context_unref(ctx);
}

int vhost_user_backend_read_header(QIOChannel *ioc, struct iovec *iov,
                                   int **fds, size_t *nfds, Error **errp)
{
    ssize_t len;

    len = qio_channel_readv_full(ioc, iov, 1, fds, nfds, 0, errp);
    if (len == QIO_CHANNEL_ERR_BLOCK) {
        return 0;
    }
    if (len == 0) {
        error_setg(errp, "vhost-user back-end channel closed");
        return -1;
    }
    /* The rest of a header that came in pieces is worth waiting for */
    if (len < 0 ||
        (len < iov->iov_len &&
         qio_channel_read_all(ioc, (char *)iov->iov_base + len,
                              iov->iov_len - len, errp))) {
        return -1;
    }
    return 1;
}

void vhost_user_backend_channel_init(struct vhost_dev *dev, QIOChannel *ioc)
{
    if (!vhost_user_serves_while_waiting(dev)) {
        return;
    }
    /*
     * Any socket can peek, but only channels that connect or accept say
     * so; vhost_user_serve_while_waiting() peeks at back-end requests.
     * It may also take a request the main loop has seen already:
     * backend_read() must then find the channel empty rather than block.
     */
    qio_channel_set_feature(ioc, QIO_CHANNEL_FEATURE_READ_MSG_PEEK);
    qio_channel_set_blocking(ioc, false, NULL);
}
