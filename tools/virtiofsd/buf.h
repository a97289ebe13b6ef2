/*
 * virtiofsd: bounded access to a request's guest buffers
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_BUF_H
#define VIRTIOFSD_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * Reaches guest memory the daemon has not mapped (a buffer inside the DAX
 * window) through the front-end.  Returns false on failure.
 */
typedef bool (*VfsdMemAccess)(void *opaque, uint64_t addr, void *buf,
                              size_t len, bool is_write);

/* One piece of a descriptor chain */
typedef struct VfsdSeg {
    void *base;         /* NULL: not mapped, use VfsdMemAccess at @addr */
    uint64_t addr;
    size_t len;
} VfsdSeg;

/*
 * A cursor over the segments of one direction of a request.  Every access
 * is checked against the real segment lengths: a guest that lies about
 * sizes in the FUSE headers only ever gets a short read or write.
 * Copying the struct saves a position.
 */
typedef struct VfsdBuf {
    const VfsdSeg *segs;
    unsigned int nsegs;
    unsigned int seg;
    size_t seg_off;
    size_t remaining;
    VfsdMemAccess mem;
    void *mem_opaque;
} VfsdBuf;

void vfsd_buf_init(VfsdBuf *b, const VfsdSeg *segs, unsigned int nsegs,
                   VfsdMemAccess mem, void *mem_opaque);

static inline size_t vfsd_buf_remaining(const VfsdBuf *b)
{
    return b->remaining;
}

/* All or nothing: false (and no progress) if fewer than @len bytes remain */
bool vfsd_buf_read(VfsdBuf *b, void *dst, size_t len);
bool vfsd_buf_write(VfsdBuf *b, const void *src, size_t len);
bool vfsd_buf_skip(VfsdBuf *b, size_t len);

/*
 * Fills @iov with the next @len bytes if they are all directly mapped, for
 * zero-copy preadv()/pwritev().  Returns the number of iovecs, or -1 if
 * the range is not mapped, too short, or needs more than @max iovecs.
 */
int vfsd_buf_peek_iov(const VfsdBuf *b, size_t len, struct iovec *iov,
                      int max);

#endif /* VIRTIOFSD_BUF_H */
