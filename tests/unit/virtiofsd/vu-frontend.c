/*
 * virtiofsd tests: the front-end's end of a vhost-user socket
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

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
    n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n >= 0 && n != (ssize_t)(sizeof(hdr) + size)) {
        errno = EIO;
        return false;
    }
    return n >= 0;
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

    return vu_fe_send(sock, VHOST_USER_SET_MEM_TABLE, &m, sizeof(m), memfd);
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
