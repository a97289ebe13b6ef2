/*
 * libvhost-user: shared memory mapping (SHMEM_MAP/UNMAP) and guest
 * memory access (MEM_READ/WRITE) requests of a back-end.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "libvhost-user-internal.h"

static bool
vu_has_proto(VuDev *dev, unsigned int fbit)
{
    return dev->protocol_features & (1ULL << fbit);
}

/* How much of @len one MEM_READ/MEM_WRITE message carries */
static size_t
vu_mem_rw_chunk(size_t len)
{
    return len < VHOST_USER_MEM_RW_MAX ? len : VHOST_USER_MEM_RW_MAX;
}

void
vu_set_unmapped_buffers_allowed(VuDev *dev, bool allowed)
{
    dev->shmem.unmapped_buffers_allowed = allowed;
}

void
vu_set_backend_cancel_fd(VuDev *dev, int fd)
{
    dev->shmem.backend_cancel_fd = fd;
    dev->shmem.backend_cancel_on = fd >= 0;
}

static bool
vu_read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    ssize_t rc;

    while (len) {
        rc = read(fd, p, len);
        if (rc < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (rc <= 0) {
            return false;
        }
        p += rc;
        len -= rc;
    }
    return true;
}

/*
 * Reads and drops the reply to a request whose wait was given up.  Only
 * SHMEM_MAP and SHMEM_UNMAP waits are given up, whose replies carry a
 * u64 and no file descriptor.
 */
static bool
vu_backend_drop_reply(VuDev *dev)
{
    VhostUserMsg msg;

    if (!vu_read_all(dev->backend_fd, &msg, VHOST_USER_HDR_SIZE) ||
        msg.size > sizeof(msg.payload) ||
        !vu_read_all(dev->backend_fd, &msg.payload, msg.size)) {
        vu_panic(dev, "Error while reading a late back-end reply");
        return false;
    }
    if (!(msg.flags & VHOST_USER_REPLY_MASK) ||
        (msg.request != VHOST_USER_BACKEND_SHMEM_MAP &&
         msg.request != VHOST_USER_BACKEND_SHMEM_UNMAP)) {
        vu_panic(dev, "Unexpected late back-end reply: request %d",
                 msg.request);
        return false;
    }
    return true;
}

/*
 * Entered with backend_mutex held, a request that wants a reply just
 * sent.  The front-end answers in order, so the replies still owed to
 * requests whose wait was given up come first: they are dropped.  Then
 * waits until the reply to ours can be read; with @cancellable, gives up
 * as soon as the cancel fd (vu_set_backend_cancel_fd()) is readable, and
 * the reply to ours is owed from then on.  Returns whether it can be
 * read; *@cancelled says whether the wait was given up.
 */
static bool
vu_backend_await(VuDev *dev, bool cancellable, bool *cancelled)
{
    *cancelled = false;
    for (;;) {
        struct pollfd pfd[2] = {
            { .fd = dev->backend_fd, .events = POLLIN },
            { .fd = dev->shmem.backend_cancel_fd, .events = POLLIN },
        };
        nfds_t n = cancellable && dev->shmem.backend_cancel_on ? 2 : 1;

        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            vu_panic(dev, "Error while waiting for a back-end reply: %s",
                     strerror(errno));
            return false;
        }
        /* An answer that came is taken, even once the cancel came too */
        if (pfd[0].revents & POLLIN) {
            if (!dev->shmem.backend_replies_owed) {
                return true;
            }
            if (!vu_backend_drop_reply(dev)) {
                return false;
            }
            dev->shmem.backend_replies_owed--;
            continue;
        }
        if (pfd[0].revents) {
            /* The channel is gone: so is the front-end */
            return false;
        }
        if (n == 2 && pfd[1].revents) {
            dev->shmem.backend_replies_owed++;
            *cancelled = true;
            return false;
        }
    }
}

static bool
vu_shmem_send(VuDev *dev, VhostUserMsg *vmsg, bool wait)
{
    bool cancelled;

    errno = 0;
    if (!vu_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM)) {
        return false;
    }

    if (wait && vu_has_proto(dev, VHOST_USER_PROTOCOL_F_REPLY_ACK)) {
        vmsg->flags |= VHOST_USER_NEED_REPLY_MASK;
    }

    pthread_mutex_lock(&dev->backend_mutex);
    if (!vu_message_write(dev, dev->backend_fd, vmsg)) {
        pthread_mutex_unlock(&dev->backend_mutex);
        return false;
    }
    if (!(vmsg->flags & VHOST_USER_NEED_REPLY_MASK)) {
        pthread_mutex_unlock(&dev->backend_mutex);
        return true;
    }
    if (!vu_backend_await(dev, true, &cancelled)) {
        pthread_mutex_unlock(&dev->backend_mutex);
        errno = cancelled ? ECANCELED : 0;
        return false;
    }

    /* Also unlocks the backend_mutex */
    return vu_process_message_reply(dev, vmsg);
}

bool
vu_shmem_map(VuDev *dev, uint8_t shmid, uint64_t fd_offset,
             uint64_t shm_offset, uint64_t len, uint64_t flags, int fd)
{
    uint64_t known = VHOST_USER_FLAG_MAP_RW;
    VhostUserMsg vmsg = {
        .request = VHOST_USER_BACKEND_SHMEM_MAP,
        .flags = VHOST_USER_VERSION,
        .size = sizeof(vmsg.payload.mmap),
        .payload.mmap = {
            .shmid = shmid,
            .fd_offset = fd_offset,
            .shm_offset = shm_offset,
            .len = len,
            .flags = flags,
        },
        .fds[0] = fd,
        .fd_num = 1,
    };

    if (vu_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM_REPLACE)) {
        known |= VHOST_USER_FLAG_MAP_REPLACE;
    }
    if ((flags & ~known) || fd < 0 || !len) {
        return false;
    }

    return vu_shmem_send(dev, &vmsg, true);
}

static bool
vu_shmem_do_unmap(VuDev *dev, uint8_t shmid, uint64_t shm_offset,
                  uint64_t len, bool wait)
{
    VhostUserMsg vmsg = {
        .request = VHOST_USER_BACKEND_SHMEM_UNMAP,
        .flags = VHOST_USER_VERSION,
        .size = sizeof(vmsg.payload.mmap),
        .payload.mmap = {
            .shmid = shmid,
            .shm_offset = shm_offset,
            .len = len,
        },
    };

    if (!len) {
        return false;
    }

    return vu_shmem_send(dev, &vmsg, wait);
}

bool
vu_shmem_unmap(VuDev *dev, uint8_t shmid, uint64_t shm_offset, uint64_t len)
{
    return vu_shmem_do_unmap(dev, shmid, shm_offset, len, true);
}

bool
vu_shmem_unmap_nowait(VuDev *dev, uint8_t shmid, uint64_t shm_offset,
                      uint64_t len)
{
    return vu_shmem_do_unmap(dev, shmid, shm_offset, len, false);
}

/*
 * The MEM_READ reply carries up to VHOST_USER_MEM_RW_MAX bytes of data,
 * more than VhostUserMsg holds: read it straight into the caller's buffer.
 * Entered with backend_mutex held.
 */
static bool
vu_mem_read_reply(VuDev *dev, uint64_t guest_addr, void *buf, uint32_t len)
{
    VhostUserMsg hdr;
    VhostUserMemRW rw;
    struct iovec iov = {
        .iov_base = &hdr,
        .iov_len = VHOST_USER_HDR_SIZE,
    };
    char control[CMSG_SPACE(VHOST_MEMORY_BASELINE_NREGIONS * sizeof(int))];
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control,
        .msg_controllen = sizeof(control),
    };
    struct cmsghdr *cmsg;
    ssize_t rc;

    do {
        rc = recvmsg(dev->backend_fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    } while (rc < 0 && (errno == EINTR || errno == EAGAIN));

    for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
            int n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int fds[VHOST_MEMORY_BASELINE_NREGIONS];
            int i;

            /* Not expected here, and not to be leaked either */
            memcpy(fds, CMSG_DATA(cmsg), n * sizeof(int));
            for (i = 0; i < n; i++) {
                close(fds[i]);
            }
        }
    }

    if (rc != VHOST_USER_HDR_SIZE) {
        vu_panic(dev, "Error while reading MEM_READ reply: %s",
                 rc < 0 ? strerror(errno) : "short read");
        return false;
    }
    if (hdr.request != VHOST_USER_BACKEND_MEM_READ ||
        !(hdr.flags & VHOST_USER_REPLY_MASK) ||
        (hdr.size != sizeof(rw) && hdr.size != sizeof(rw) + len)) {
        vu_panic(dev, "Unexpected reply to MEM_READ: request %d size %u",
                 hdr.request, hdr.size);
        return false;
    }
    if (!vu_read_all(dev->backend_fd, &rw, sizeof(rw))) {
        vu_panic(dev, "Error while reading MEM_READ reply");
        return false;
    }
    if (hdr.size == sizeof(rw)) {
        /* A failure: the front-end sends no data */
        if (!rw.status) {
            vu_panic(dev, "MEM_READ reply without data nor status");
        }
        return false;
    }
    if (!vu_read_all(dev->backend_fd, buf, len)) {
        vu_panic(dev, "Error while reading MEM_READ data");
        return false;
    }
    return rw.status == 0 && rw.guest_address == guest_addr &&
           rw.size == len;
}

bool
vu_mem_read(VuDev *dev, uint64_t guest_addr, void *buf, size_t len)
{
    uint8_t *p = buf;

    if (!vu_has_proto(dev, VHOST_USER_PROTOCOL_F_MEM_RW)) {
        return false;
    }

    while (len) {
        uint32_t chunk = vu_mem_rw_chunk(len);
        VhostUserMsg vmsg = {
            .request = VHOST_USER_BACKEND_MEM_READ,
            .flags = VHOST_USER_VERSION,
            .size = sizeof(vmsg.payload.mem_rw),
            .payload.mem_rw = {
                .guest_address = guest_addr,
                .size = chunk,
            },
        };
        bool ok, cancelled;

        pthread_mutex_lock(&dev->backend_mutex);
        ok = vu_message_write(dev, dev->backend_fd, &vmsg) &&
             vu_backend_await(dev, false, &cancelled) &&
             vu_mem_read_reply(dev, guest_addr, p, chunk);
        pthread_mutex_unlock(&dev->backend_mutex);
        if (!ok) {
            return false;
        }
        guest_addr += chunk;
        p += chunk;
        len -= chunk;
    }
    return true;
}

bool
vu_mem_write(VuDev *dev, uint64_t guest_addr, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    size_t max_chunk = vu_mem_rw_chunk(len);
    uint8_t *data;

    if (!vu_has_proto(dev, VHOST_USER_PROTOCOL_F_MEM_RW) ||
        !vu_has_proto(dev, VHOST_USER_PROTOCOL_F_REPLY_ACK)) {
        return false;
    }

    data = malloc(sizeof(VhostUserMemRW) + max_chunk);
    if (!data) {
        return false;
    }

    while (len) {
        uint32_t chunk = vu_mem_rw_chunk(len);
        VhostUserMemRW rw = {
            .guest_address = guest_addr,
            .size = chunk,
        };
        bool cancelled;
        VhostUserMsg vmsg = {
            .request = VHOST_USER_BACKEND_MEM_WRITE,
            .flags = VHOST_USER_VERSION | VHOST_USER_NEED_REPLY_MASK,
            .size = sizeof(rw) + chunk,
            .data = data,
        };

        memcpy(data, &rw, sizeof(rw));
        memcpy(data + sizeof(rw), p, chunk);

        pthread_mutex_lock(&dev->backend_mutex);
        if (!vu_message_write(dev, dev->backend_fd, &vmsg) ||
            !vu_backend_await(dev, false, &cancelled)) {
            pthread_mutex_unlock(&dev->backend_mutex);
            free(data);
            return false;
        }
        /* Also unlocks the backend_mutex */
        if (!vu_process_message_reply(dev, &vmsg)) {
            free(data);
            return false;
        }
        guest_addr += chunk;
        p += chunk;
        len -= chunk;
    }
    free(data);
    return true;
}
