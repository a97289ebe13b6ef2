/*
 * virtiofsd: what the DAX window asks of the front-end
 *
 * The back-end that carries dax.c's map and unmap requests to the
 * front-end: vhost-dax.c in the daemon, a fake in the tests and fuzzers.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_BACKEND_H
#define VIRTIOFSD_DAX_BACKEND_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* The window is shared memory region 0 of the device */
#define VFSD_DAX_SHMID 0

/* Mapping flags, as in VhostUserMMap */
#define VFSD_DAX_MAP_RW         (1ULL << 0)
#define VFSD_DAX_MAP_REPLACE    (1ULL << 1)

/*
 * Where mapping requests go: the vhost-user back-end channel in the
 * daemon, a fake in the tests.  The calls wait for the front-end's answer.
 */
typedef struct VfsdDaxBackend {
    bool (*available)(void *opaque);
    bool (*can_replace)(void *opaque);
    bool (*map)(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                uint64_t len, uint64_t flags, int fd);
    bool (*unmap)(void *opaque, uint64_t shm_offset, uint64_t len);
    /*
     * Optional: queue an unmap without waiting for the front-end, which
     * handles it before any map sent after it
     */
    bool (*unmap_nowait)(void *opaque, uint64_t shm_offset, uint64_t len);
    /*
     * Optional: whether the front-end restores a migrated window (it
     * agreed to VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE, so it serves our map
     * requests while it waits for CHECK_DEVICE_STATE); NULL: it does not
     */
    bool (*can_migrate)(void *opaque);
    /*
     * Optional: takes @lock, the window's or an inode's setup lock,
     * whose holder may be waiting for the front-end; without it,
     * g_mutex_lock()
     */
    void (*lock)(void *opaque, GMutex *lock);
    void *opaque;
} VfsdDaxBackend;

#endif /* VIRTIOFSD_DAX_BACKEND_H */
