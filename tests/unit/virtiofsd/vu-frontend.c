/*
 * virtiofsd tests: the front-end's end of a vhost-user socket
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "libvhost-user.h"

#include "vu-frontend.h"

bool vu_fe_send(int sock, uint32_t request, const void *payload,
                uint32_t size, int fd)
{
    uint32_t hdr[3] = { request, 1 /* version */, size };
    struct iovec iov[2] = {
        { .iov_base = hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    char control[CMSG_SPACE(sizeof(int))] = { 0 };
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };
    ssize_t n;

    if (fd >= 0) {
        struct cmsghdr *c;

        mh.msg_control = control;
        mh.msg_controllen = sizeof(control);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do {
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n >= 0 && n != (ssize_t)(sizeof(hdr) + size)) {
        errno = EIO;
        return false;
    }
    return n >= 0;
}

static bool read_full(int sock, void *buf, size_t len)
{
    size_t done = 0;
    ssize_t n;

    while (done < len) {
        n = read(sock, (char *)buf + done, len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (!n) {
                errno = ECONNRESET;
            }
            return false;
        }
        done += n;
    }
    return true;
}

bool vu_fe_recv(int sock, uint32_t request, void *payload, uint32_t size)
{
    uint32_t hdr[3];

    if (!read_full(sock, hdr, sizeof(hdr))) {
        return false;
    }
    if (hdr[0] != request || !(hdr[1] & VHOST_USER_REPLY_MASK) ||
        hdr[2] != size) {
        errno = EPROTO;
        return false;
    }
    return read_full(sock, payload, size);
}

bool vu_fe_get_u64(int sock, uint32_t request, uint64_t *value)
{
    return vu_fe_send(sock, request, NULL, 0, -1) &&
           vu_fe_recv(sock, request, value, sizeof(*value));
}

bool vu_fe_set_mem_table(int sock, int memfd, uint64_t gpa, uint64_t size)
{
    VhostUserMemory m = {
        .nregions = 1,
        .regions[0] = {
            .guest_phys_addr = gpa,
            .memory_size = size,
            .userspace_addr = gpa,
        },
    };

    /* As QEMU sends it: the regions given, not the whole array */
    return vu_fe_send(sock, VHOST_USER_SET_MEM_TABLE, &m,
                      offsetof(VhostUserMemory, regions[1]), memfd);
}

bool vu_fe_set_vring(int sock, const VuFeVring *v)
{
    struct vhost_vring_state num = { .index = v->index, .num = v->num };
    struct vhost_vring_state base = { .index = v->index, .num = v->base };
    struct vhost_vring_addr addr = {
        .index = v->index,
        .desc_user_addr = v->desc,
        .avail_user_addr = v->avail,
        .used_user_addr = v->used,
    };
    uint64_t idx = v->index;

    return vu_fe_send(sock, VHOST_USER_SET_VRING_NUM, &num, sizeof(num),
                      -1) &&
           vu_fe_send(sock, VHOST_USER_SET_VRING_BASE, &base, sizeof(base),
                      -1) &&
           vu_fe_send(sock, VHOST_USER_SET_VRING_ADDR, &addr, sizeof(addr),
                      -1) &&
           vu_fe_send(sock, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx),
                      v->call) &&
           vu_fe_send(sock, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx),
                      v->kick);
}

bool vu_fe_enable_vring(int sock, unsigned int index, bool enable)
{
    struct vhost_vring_state st = { .index = index, .num = enable };

    return vu_fe_send(sock, VHOST_USER_SET_VRING_ENABLE, &st, sizeof(st), -1);
}
