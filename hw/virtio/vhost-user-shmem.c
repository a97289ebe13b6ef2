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
