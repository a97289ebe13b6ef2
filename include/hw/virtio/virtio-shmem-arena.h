/*
 * Virtio shared memory window: a fixed guest-visible RAM range into which
 * a vhost-user back-end maps ranges of its files.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_SHMEM_ARENA_H
#define HW_VIRTIO_SHMEM_ARENA_H

#include "qemu/units.h"
#include "hw/virtio/virtiofs-dax-compat.h"
#include "qemu/interval-tree.h"

/* Limits on the size of a window, checked by virtio_shmem_arena_init(). */
#define VIRTIO_SHMEM_ARENA_MIN_SIZE (2 * MiB)
#define VIRTIO_SHMEM_ARENA_MAX_SIZE (1 * TiB)

/*
 * Each live mapping costs the QEMU process one or two VMAs, and Linux
 * limits a process to vm.max_map_count (65530 by default) of them; when
 * that runs out, every mmap() and large malloc() in QEMU fails.  So a
 * window accepts one mapping per 2 MiB (what guests map at), at least
 * VIRTIO_SHMEM_ARENA_MIN_MAPPINGS, but never more than leaves room in
 * vm.max_map_count for the rest of QEMU (virtio-shmem-arena.c,
 * shmem_arena_budget()): a back-end mapping small pieces cannot starve
 * QEMU.
 */
#define VIRTIO_SHMEM_ARENA_GRANULE (2 * MiB)
#define VIRTIO_SHMEM_ARENA_MIN_MAPPINGS 16384

typedef struct VirtioSharedMemoryArenaSlot VirtioSharedMemoryArenaSlot;

typedef struct VirtioSharedMemoryArena {
    /* The guest-visible region; its RAM is @host */
    MemoryRegion mr;
    /* Host range reserved at init; NULL while the window does not exist */
    uint8_t *host;
    uint64_t size;
    /* The memfd every hole shows, and its size (a power of two) */
    int scratch_fd;
    uint64_t scratch_size;
    /* VirtioSharedMemoryArenaMapping nodes, keyed by window offset */
    IntervalTreeRoot mappings;
    unsigned int nr_mappings;
    unsigned int max_mappings;
    /* Index of the window's host range for the SIGBUS fixup, -1: none */
    int range;
    /*
     * The live mappings for the SIGBUS fixup, max_mappings + 1 slots, and
     * the stack of the free ones (virtio-shmem-arena.c)
     */
    VirtioSharedMemoryArenaSlot *slots;
    unsigned int *free_slots;
    unsigned int nr_free_slots;
} VirtioSharedMemoryArena;

/**
 * virtio_shmem_arena_check_size: validate a window size property
 * @prop: the property name, for error messages
 * @size: the requested size in bytes
 * @errp: error object
 *
 * Returns: true if @size is a power of two between
 * %VIRTIO_SHMEM_ARENA_MIN_SIZE and %VIRTIO_SHMEM_ARENA_MAX_SIZE.
 */
bool virtio_shmem_arena_check_size(const char *prop, uint64_t size,
                                   Error **errp);

/**
 * virtio_shmem_arena_init: reserve host address space and create the region
 * @win: the window, zero-initialised
 * @owner: the device that owns the memory region
 * @name: the memory region's name
 * @size: the window size, already checked by virtio_shmem_arena_check_size()
 * @errp: error object
 *
 * The whole window reads as zeros until something is mapped into it or
 * the guest writes there; its holes all show one small scratch buffer,
 * so what the guest writes into one shows in the others too.
 * Warns if vm.max_map_count is too low for the guest to use all of it.
 *
 * Returns: true on success.
 */
bool virtio_shmem_arena_init(VirtioSharedMemoryArena *win, Object *owner,
                             const char *name, uint64_t size, Error **errp);

/**
 * virtio_shmem_arena_map: map part of a file into the window
 * @win: the window
 * @offset: page-aligned start in the window
 * @len: page-aligned, non-zero length
 * @fd: the file; the caller keeps ownership of the descriptor
 * @fd_offset: page-aligned offset in the file
 * @writable: whether guest writes reach the file
 * @replace: whether the new mapping may replace existing mappings that
 *           lie wholly inside [@offset, @offset + @len)
 *
 * The range switches from its old content to the new one in a single
 * mmap() call, so a guest access never sees anything in between.
 *
 * Returns: 0 or a negative errno.  On error the window is unchanged,
 * except if the host ran out of memory half-way through the mmap(): then
 * the range is a hole and the mappings that were in it are gone.
 */
int virtio_shmem_arena_map(VirtioSharedMemoryArena *win, uint64_t offset,
                           uint64_t len, int fd, uint64_t fd_offset,
                           bool writable, bool replace);

/**
 * virtio_shmem_arena_unmap: remove mappings from the window
 * @win: the window
 * @offset: start of the range in the window
 * @len: length of the range
 *
 * The range must be covered exactly by one mapping or by several
 * adjacent ones; afterwards it is a hole (see virtio_shmem_arena_init()).
 *
 * Returns: 0 or a negative errno; on error the window is unchanged (but
 * see virtio_shmem_arena_map() about a host out of memory).
 */
int virtio_shmem_arena_unmap(VirtioSharedMemoryArena *win, uint64_t offset,
                             uint64_t len);

/**
 * virtio_shmem_arena_reset: drop every mapping
 * @win: the window; may be one that was never initialised
 */
void virtio_shmem_arena_reset(VirtioSharedMemoryArena *win);

/**
 * virtio_shmem_arena_finalize: release the host address space
 * @win: the window; may be one that was never initialised
 *
 * Call this only when nothing can access the memory region any more,
 * i.e. from the owner's instance_finalize, after virtio_shmem_arena_reset()
 * at unrealize.
 */
void virtio_shmem_arena_finalize(VirtioSharedMemoryArena *win);

static inline bool virtio_shmem_arena_exists(const VirtioSharedMemoryArena *win)
{
    return win->host != NULL;
}

#endif /* HW_VIRTIO_SHMEM_ARENA_H */
