/*
 * libvhost-user: shared memory mapping (SHMEM_MAP/UNMAP) and guest
 * memory access (MEM_READ/WRITE) requests of a back-end.
 *
 * Included by libvhost-user.h, whose VhostUserMsg carries these
 * payloads; include that one.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef LIBVHOST_USER_SHMEM_H
#define LIBVHOST_USER_SHMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct VuDev;

/* Flags of VhostUserMMap */
#define VHOST_USER_FLAG_MAP_RW          (1ULL << 0)
/* Needs VHOST_USER_PROTOCOL_F_SHMEM_REPLACE */
#define VHOST_USER_FLAG_MAP_REPLACE     (1ULL << 1)

/* Payload of VHOST_USER_BACKEND_SHMEM_MAP and VHOST_USER_BACKEND_SHMEM_UNMAP */
typedef struct VhostUserMMap {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
    uint64_t flags;
} VhostUserMMap;

/* The shared memory extension's state in a VuDev (its member shmem) */
typedef struct VuShmemState {
    /* See vu_set_unmapped_buffers_allowed() */
    bool unmapped_buffers_allowed;
    /* See vu_set_backend_cancel_fd() */
    bool backend_cancel_on;
    int backend_cancel_fd;
    /* Replies due on backend_fd to waits given up, under backend_mutex */
    unsigned int backend_replies_owed;
} VuShmemState;

/* Most data one VHOST_USER_BACKEND_MEM_READ/_WRITE message carries */
#define VHOST_USER_MEM_RW_MAX 65536

/*
 * Header of the VHOST_USER_BACKEND_MEM_READ/_WRITE payload; the data
 * follows it.  @status is 0 or a positive errno in the MEM_READ reply.
 */
typedef struct VhostUserMemRW {
    uint64_t guest_address;
    uint32_t size;
    uint32_t status;
} VhostUserMemRW;

/**
 * vu_set_unmapped_buffers_allowed:
 * @dev: a VuDev context
 * @allowed: whether vu_queue_pop() accepts buffers outside mapped memory
 *
 * A guest may hand the device buffers that do not lie in the memory
 * regions shared with the back-end, e.g. inside a shared memory region
 * (a virtio-fs DAX window).  By default such an element is a fatal error;
 * with @allowed, vu_queue_pop() returns it with a NULL iov_base for each
 * part it cannot map and fills in_addr/out_addr so that the back-end can
 * reach those parts with vu_mem_read() and vu_mem_write().
 */
void vu_set_unmapped_buffers_allowed(struct VuDev *dev, bool allowed);

/**
 * vu_set_backend_cancel_fd:
 * @dev: a VuDev context
 * @fd: an eventfd, or -1
 *
 * While @fd is readable, vu_shmem_map() and vu_shmem_unmap() give up
 * waiting for the front-end's answer: they return false with errno
 * ECANCELED, and the answer, when it comes, is dropped.  The request was
 * sent all the same, and the front-end may still carry it out.  For a
 * back-end whose front-end reads no back-end request while it waits for
 * an answer of its own (QEMU 11.1 on GET_VRING_BASE, say), which it then
 * may have to give before the back-end can answer.
 */
void vu_set_backend_cancel_fd(struct VuDev *dev, int fd);

/**
 * vu_shmem_map:
 * @dev: a VuDev context
 * @shmid: the shared memory region id
 * @fd_offset: offset in @fd of the start of the mapping
 * @shm_offset: offset in the shared memory region of the mapping
 * @len: length of the mapping
 * @flags: VHOST_USER_FLAG_MAP_RW, VHOST_USER_FLAG_MAP_REPLACE
 * @fd: the file to map
 *
 * Asks the front-end to map @fd into the shared memory region.  Waits for
 * the front-end's answer when VHOST_USER_PROTOCOL_F_REPLY_ACK is
 * negotiated.  Thread-safe.
 *
 * Returns: true on success, false if the feature is not negotiated, the
 * request is invalid or the front-end refused it.
 */
bool vu_shmem_map(struct VuDev *dev, uint8_t shmid, uint64_t fd_offset,
                  uint64_t shm_offset, uint64_t len, uint64_t flags, int fd);

/**
 * vu_shmem_unmap:
 * @dev: a VuDev context
 * @shmid: the shared memory region id
 * @shm_offset: offset in the shared memory region
 * @len: length of the range to unmap
 *
 * Asks the front-end to remove the mappings that exactly cover the range.
 * Thread-safe.
 *
 * Returns: true on success.
 */
bool vu_shmem_unmap(struct VuDev *dev, uint8_t shmid, uint64_t shm_offset,
                    uint64_t len);

/**
 * vu_shmem_unmap_nowait:
 * @dev: a VuDev context
 * @shmid: the shared memory region id
 * @shm_offset: offset in the shared memory region
 * @len: length of the range to unmap
 *
 * Like vu_shmem_unmap(), but only queues the request on the back-end
 * channel, without asking for a reply: the front-end handles requests in
 * order, so a later vu_shmem_map() of the range is handled after the
 * unmap, but a failure is only seen on the front-end's side.  For
 * back-ends that must not wait, such as a virtio-fs daemon answering
 * FUSE_REMOVEMAPPING while the guest is reclaiming window ranges.
 * Thread-safe.
 *
 * Returns: true if the request was sent.
 */
bool vu_shmem_unmap_nowait(struct VuDev *dev, uint8_t shmid,
                           uint64_t shm_offset, uint64_t len);

/**
 * vu_mem_read:
 * @dev: a VuDev context
 * @guest_addr: guest address to read from
 * @buf: where to store the data
 * @len: number of bytes
 *
 * Reads guest memory through the front-end, for memory the back-end has
 * not mapped (needs VHOST_USER_PROTOCOL_F_MEM_RW).  Thread-safe.
 *
 * Returns: true if all @len bytes were read.
 */
bool vu_mem_read(struct VuDev *dev, uint64_t guest_addr, void *buf,
                 size_t len);

/**
 * vu_mem_write:
 * @dev: a VuDev context
 * @guest_addr: guest address to write to
 * @buf: the data
 * @len: number of bytes
 *
 * Like vu_mem_read(), in the other direction.
 *
 * Returns: true if all @len bytes were written.
 */
bool vu_mem_write(struct VuDev *dev, uint64_t guest_addr, const void *buf,
                  size_t len);

#endif
