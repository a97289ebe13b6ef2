/*
 * vhost-user shared memory: the back-end requests that map files into a
 * device's shared memory windows (SHMEM_MAP/UNMAP) and that reach guest
 * memory outside the memory table (MEM_READ/WRITE), and serving them
 * while the front-end waits for a reply.
 *
 * vhost-user.c reads the messages and calls these; everything that
 * decides what a request may do lives here.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_SHMEM_H
#define HW_VIRTIO_VHOST_USER_SHMEM_H

#include "hw/virtio/vhost.h"
#include "hw/virtio/vhost-user.h"
#include "hw/virtio/virtio-shmem-arena.h"
#include "io/channel.h"

/* Payload of VHOST_USER_BACKEND_SHMEM_MAP and _UNMAP */
typedef struct VhostUserMMap {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
#define VHOST_USER_FLAG_MAP_RW (1ULL << 0)
#define VHOST_USER_FLAG_MAP_REPLACE (1ULL << 1)
    uint64_t flags;
} VhostUserMMap;

/*
 * Header of VHOST_USER_BACKEND_MEM_READ and _WRITE; the data follows it
 * in MEM_WRITE requests and in MEM_READ replies.
 */
typedef struct VhostUserMemRW {
    uint64_t guest_address;
    uint32_t size;
    uint32_t status;
} VhostUserMemRW;

#define VHOST_USER_MEM_RW_MAX 65536

/* Front-end request: the sizes a back-end expects of the regions */
#define VHOST_USER_GET_SHMEM_CONFIG 44
#define VHOST_USER_MAX_SHMEM_REGIONS 256

typedef struct VhostUserShmemConfig {
    uint32_t nregions;
    uint32_t padding;
    uint64_t memory_sizes[VHOST_USER_MAX_SHMEM_REGIONS];
} VhostUserShmemConfig;

/* Negotiated only by a device that registered a window */
#define VHOST_USER_PROTOCOL_SHM_FEATURES \
    ((1ULL << VHOST_USER_PROTOCOL_F_SHMEM) | \
     (1ULL << VHOST_USER_PROTOCOL_F_SHMEM_REPLACE) | \
     (1ULL << VHOST_USER_PROTOCOL_F_MEM_RW) | \
     (1ULL << VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE))

/**
 * vhost_user_add_shmem_arena() - let the back-end map into a window
 * @user: the vhost-user state, after vhost_user_init()
 * @shmid: the shared memory region id the back-end names the window by
 * @win: the window, which must outlive @user
 *
 * Call this before vhost_dev_init(): the shared memory protocol features
 * are only negotiated for a device that has a window.  The window's
 * mappings are dropped whenever the back-end channel goes away.
 */
void vhost_user_add_shmem_arena(VhostUserState *user, uint8_t shmid,
                                VirtioSharedMemoryArena *win);

/**
 * vhost_user_shmem_check_config() - check the back-end against the windows
 * @dev: the vhost device, after vhost_dev_init()
 * @user: its vhost-user state
 * @errp: pointer to a NULL-initialized error object
 *
 * When VHOST_USER_PROTOCOL_F_SHMEM was negotiated, ask the back-end with
 * VHOST_USER_GET_SHMEM_CONFIG which regions it expects, and of what
 * size.  A region it leaves at 0 is the device's to size.
 *
 * Returns: false if the back-end expects a region the device does not
 * have, or of another size, or did not answer properly.
 */
bool vhost_user_shmem_check_config(struct vhost_dev *dev,
                                   VhostUserState *user, Error **errp);

/**
 * vhost_user_shmem_drop_mappings() - drop every back-end mapping
 * @user: the vhost-user state
 *
 * For when the back-end channel closes: the mappings hold the back-end's
 * files open and show its data to the guest.
 */
void vhost_user_shmem_drop_mappings(VhostUserState *user);

/*
 * Handlers of the back-end requests.  @size is the payload size the
 * request header announced and @fd/@fdsize the descriptors that came
 * with it (the caller closes them).  They return 0 or a negative errno
 * for the REPLY_ACK reply, and log what the back-end got wrong.
 */
int vhost_user_shmem_map(struct vhost_dev *dev, VhostUserState *user,
                         uint32_t size, const VhostUserMMap *m,
                         int *fd, size_t fdsize);
int vhost_user_shmem_unmap(struct vhost_dev *dev, VhostUserState *user,
                           uint32_t size, const VhostUserMMap *m,
                           size_t fdsize);

/**
 * vhost_user_mem_read() - serve VHOST_USER_BACKEND_MEM_READ
 * @dev: the vhost device
 * @size: the payload size the request header announced
 * @rw: the request, updated into the reply's header: @rw->status is 0
 *  or a positive errno, and @rw->size the number of bytes that follow
 * @fdsize: number of descriptors that came with the request
 * @data: set to the data to send after @rw (g_free() it)
 */
void vhost_user_mem_read(struct vhost_dev *dev, uint32_t size,
                         VhostUserMemRW *rw, size_t fdsize, uint8_t **data);

/**
 * vhost_user_mem_read_reply() - send the reply vhost_user_mem_read() made
 * @ioc: the back-end channel
 * @hdr: the message header, already set up as the reply's
 * @hdr_size: its size
 * @rw: the reply's payload header
 * @data: @rw->size bytes of data
 * @errp: pointer to a NULL-initialized error object
 *
 * Returns: false if the channel failed.
 */
bool vhost_user_mem_read_reply(QIOChannel *ioc, void *hdr, size_t hdr_size,
                               VhostUserMemRW *rw, uint8_t *data,
                               Error **errp);

/**
 * vhost_user_mem_write_data() - read the data of a MEM_WRITE request
 * @ioc: the back-end channel
 * @size: how much data follows the request's VhostUserMemRW
 * @data: set to the data, or to NULL if there is more than a request
 *  may carry (the data is then read and dropped, to keep the channel in
 *  sync, and the request fails)
 * @errp: pointer to a NULL-initialized error object
 *
 * Returns: false if the channel failed.
 */
bool vhost_user_mem_write_data(QIOChannel *ioc, uint32_t size,
                               uint8_t **data, Error **errp);

/**
 * vhost_user_mem_write() - serve VHOST_USER_BACKEND_MEM_WRITE
 * @dev: the vhost device
 * @size: the payload size the request header announced
 * @rw: the request's header
 * @data: what vhost_user_mem_write_data() read
 * @data_size: the size it was asked to read
 * @fdsize: number of descriptors that came with the request
 *
 * Returns: 0 or a negative errno.
 */
int vhost_user_mem_write(struct vhost_dev *dev, uint32_t size,
                         const VhostUserMemRW *rw, const uint8_t *data,
                         uint32_t data_size, size_t fdsize);

/**
 * vhost_user_serve_while_waiting() - wait for a front-end reply
 * @dev: the vhost device
 * @chr: the front-end channel
 * @backend_ioc: the back-end channel
 * @self_contained: whether a request, by its number, may be served now:
 *  its handler never sends a front-end message, never changes the memory
 *  map and runs no device code
 * @serve: reads and serves one request from @backend_ioc, called with
 *  @dev as its opaque (vhost-user.c's backend_read())
 *
 * Returns once @chr has something to read, having served the back-end
 * requests that came first as long as they are self-contained; the
 * first one that is not, and all behind it, are left on @backend_ioc for
 * the main loop.  Does nothing unless the device negotiated the shared
 * memory features and the caller holds the BQL.
 */
void vhost_user_serve_while_waiting(struct vhost_dev *dev, CharBackend *chr,
                                    QIOChannel *backend_ioc,
                                    bool (*self_contained)(uint32_t request),
                                    QIOChannelFunc serve);

/**
 * vhost_user_backend_read_header() - read a back-end request's header
 * @ioc: the back-end channel, set up by vhost_user_backend_channel_init()
 * @iov: where the header goes
 * @fds: set to the descriptors that came with it
 * @nfds: set to their number
 * @errp: pointer to a NULL-initialized error object
 *
 * Returns: 1 when the header was read, 0 when there was none (a wait for
 * a front-end reply served the request the main loop saw), -1 when the
 * channel failed or closed.
 */
int vhost_user_backend_read_header(QIOChannel *ioc, struct iovec *iov,
                                   int **fds, size_t *nfds, Error **errp);

/**
 * vhost_user_backend_channel_init() - prepare a new back-end channel
 * @dev: the vhost device, its protocol features negotiated
 * @ioc: the channel
 *
 * For a device that waits with vhost_user_serve_while_waiting() (it
 * negotiated the shared memory features), the channel becomes
 * non-blocking and able to peek; any other device's stays as it was.
 */
void vhost_user_backend_channel_init(struct vhost_dev *dev, QIOChannel *ioc);

#endif
