/*
 * vhost-user shared memory windows: the back-end's SHMEM_MAP and
 * SHMEM_UNMAP requests.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "chardev/char-fe.h"
#include "hw/virtio/vhost-user-shmem.h"
#include "hw/virtio/virtio.h"
#include "trace.h"

void vhost_user_add_shmem_arena(VhostUserState *user, uint8_t shmid,
                                VirtioSharedMemoryArena *win)
{
    if (!user->shmem_arenas) {
        user->shmem_arenas = g_ptr_array_new();
    }
    if (shmid >= user->shmem_arenas->len) {
        g_ptr_array_set_size(user->shmem_arenas, shmid + 1);
    }
    g_ptr_array_index(user->shmem_arenas, shmid) = win;
}

static VirtioSharedMemoryArena *vhost_user_shmem_arena(VhostUserState *user,
                                                       uint8_t shmid)
{
    if (!user->shmem_arenas || shmid >= user->shmem_arenas->len) {
        return NULL;
    }
    return g_ptr_array_index(user->shmem_arenas, shmid);
}

void vhost_user_shmem_drop_mappings(VhostUserState *user)
{
    unsigned int i;

    for (i = 0; user->shmem_arenas && i < user->shmem_arenas->len; i++) {
        VirtioSharedMemoryArena *win = g_ptr_array_index(user->shmem_arenas, i);

        if (win) {
            virtio_shmem_arena_reset(win);
        }
    }
}

/*
 * The back-end is not trusted: every field of a SHMEM request is checked
 * here or by the window, and a bad one only fails the request.
 */
static int vhost_user_shmem_check(struct vhost_dev *dev, const char *name,
                                  uint32_t size)
{
    if (!virtio_has_feature(dev->protocol_features,
                            VHOST_USER_PROTOCOL_F_SHMEM)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s without "
                      "VHOST_USER_PROTOCOL_F_SHMEM\n", name);
        return -EINVAL;
    }
    if (size != sizeof(VhostUserMMap)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s with a %u byte "
                      "payload\n", name, size);
        return -EINVAL;
    }
    return 0;
}

int vhost_user_shmem_map(struct vhost_dev *dev, VhostUserState *user,
                         uint32_t size, const VhostUserMMap *m,
                         int *fd, size_t fdsize)
{
    uint64_t known_flags = VHOST_USER_FLAG_MAP_RW;
    VirtioSharedMemoryArena *win;
    int ret;

    trace_vhost_user_backend_shmem_map(m->shmid, m->fd_offset, m->shm_offset,
                                       m->len, m->flags);
    ret = vhost_user_shmem_check(dev, "SHMEM_MAP", size);
    if (ret) {
        return ret;
    }
    if (virtio_has_feature(dev->protocol_features,
                           VHOST_USER_PROTOCOL_F_SHMEM_REPLACE)) {
        known_flags |= VHOST_USER_FLAG_MAP_REPLACE;
    }
    if (m->flags & ~known_flags) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_MAP with unknown "
                      "flags 0x%" PRIx64 "\n", m->flags & ~known_flags);
        return -EINVAL;
    }
    if (fdsize != 1) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_MAP carries %zu "
                      "file descriptors instead of 1\n", fdsize);
        return -EINVAL;
    }
    win = vhost_user_shmem_arena(user, m->shmid);
    if (!win) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_MAP for unknown "
                      "shmid %u\n", m->shmid);
        return -EINVAL;
    }

    ret = virtio_shmem_arena_map(win, m->shm_offset, m->len, fd[0],
                                 m->fd_offset,
                                 m->flags & VHOST_USER_FLAG_MAP_RW,
                                 m->flags & VHOST_USER_FLAG_MAP_REPLACE);
    if (ret < 0) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_MAP of fd offset "
                      "0x%" PRIx64 " at shmid %u offset 0x%" PRIx64
                      " length 0x%" PRIx64 " failed: %s\n",
                      m->fd_offset, m->shmid, m->shm_offset, m->len,
                      strerror(-ret));
    }
    return ret;
}

int vhost_user_shmem_unmap(struct vhost_dev *dev, VhostUserState *user,
                           uint32_t size, const VhostUserMMap *m,
                           size_t fdsize)
{
    VirtioSharedMemoryArena *win;
    int ret;

    trace_vhost_user_backend_shmem_unmap(m->shmid, m->shm_offset, m->len);
    ret = vhost_user_shmem_check(dev, "SHMEM_UNMAP", size);
    if (ret) {
        return ret;
    }
    if (fdsize) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_UNMAP carries "
                      "file descriptors\n");
        return -EINVAL;
    }
    win = vhost_user_shmem_arena(user, m->shmid);
    if (!win) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_UNMAP for unknown "
                      "shmid %u\n", m->shmid);
        return -EINVAL;
    }

    ret = virtio_shmem_arena_unmap(win, m->shm_offset, m->len);
    if (ret < 0) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: SHMEM_UNMAP at shmid %u "
                      "offset 0x%" PRIx64 " length 0x%" PRIx64
                      " failed: %s\n", m->shmid, m->shm_offset, m->len,
                      strerror(-ret));
    }
    return ret;
}

/* What vhost-user.c keeps to itself: the header's flags */
#define VHOST_USER_SHMEM_VERSION 0x1
#define VHOST_USER_SHMEM_VERSION_MASK 0x3
#define VHOST_USER_SHMEM_REPLY_MASK (0x1 << 2)

typedef struct QEMU_PACKED VhostUserShmemHdr {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
} VhostUserShmemHdr;

/*
 * A back-end written for front-ends that size the regions after its
 * answer (QEMU 11.1's vhost-user-device) says here how large it expects
 * each region to be.  Here the device's properties size them, so the
 * answer is only checked: a back-end that expects a larger region would
 * have its maps past the end refused, one that expects a smaller one
 * would refuse the guest's, and either is better said at once.
 */
bool vhost_user_shmem_check_config(struct vhost_dev *dev,
                                   VhostUserState *user, Error **errp)
{
    VhostUserShmemHdr hdr = {
        .request = VHOST_USER_GET_SHMEM_CONFIG,
        .flags = VHOST_USER_SHMEM_VERSION,
    };
    VhostUserShmemConfig cfg = { 0 };
    unsigned int i;

    if (!virtio_has_feature(dev->protocol_features,
                            VHOST_USER_PROTOCOL_F_SHMEM)) {
        return true;
    }
    if (qemu_chr_fe_write_all(user->chr, (const uint8_t *)&hdr,
                              sizeof(hdr)) != sizeof(hdr)) {
        error_setg(errp, "vhost-user: cannot send GET_SHMEM_CONFIG");
        return false;
    }
    if (qemu_chr_fe_read_all(user->chr, (uint8_t *)&hdr,
                             sizeof(hdr)) != sizeof(hdr)) {
        error_setg(errp, "vhost-user: no reply to GET_SHMEM_CONFIG");
        return false;
    }
    if (hdr.request != VHOST_USER_GET_SHMEM_CONFIG ||
        (hdr.flags & VHOST_USER_SHMEM_VERSION_MASK) !=
        VHOST_USER_SHMEM_VERSION ||
        !(hdr.flags & VHOST_USER_SHMEM_REPLY_MASK) ||
        hdr.size < offsetof(VhostUserShmemConfig, memory_sizes) ||
        hdr.size > sizeof(cfg) || hdr.size % sizeof(uint64_t)) {
        error_setg(errp, "vhost-user: bad reply to GET_SHMEM_CONFIG "
                   "(request %u, flags 0x%x, size %u)", hdr.request,
                   hdr.flags, hdr.size);
        return false;
    }
    if (qemu_chr_fe_read_all(user->chr, (uint8_t *)&cfg,
                             hdr.size) != hdr.size) {
        error_setg(errp, "vhost-user: short reply to GET_SHMEM_CONFIG");
        return false;
    }
    for (i = 0; i < ARRAY_SIZE(cfg.memory_sizes); i++) {
        VirtioSharedMemoryArena *win = vhost_user_shmem_arena(user, i);
        uint64_t want = cfg.memory_sizes[i];

        if (!want || (win && win->size == want)) {
            continue;
        }
        if (!win) {
            error_setg(errp, "vhost-user: the back-end expects shared memory "
                       "region %u (%" PRIu64 " bytes), which the device does "
                       "not have", i, want);
        } else {
            error_setg(errp, "vhost-user: the back-end expects shared memory "
                       "region %u to be %" PRIu64 " bytes, the device's is "
                       "%" PRIu64, i, want, win->size);
        }
        return false;
    }
    return true;
}
