/*
 * virtiofsd: bounded access to a request's guest buffers
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <string.h>

#include "buf.h"

void vfsd_buf_init(VfsdBuf *b, const VfsdSeg *segs, unsigned int nsegs,
                   VfsdMemAccess mem, void *mem_opaque)
{
    unsigned int i;

    b->segs = segs;
    b->nsegs = nsegs;
    b->seg = 0;
    b->seg_off = 0;
    b->remaining = 0;
    b->mem = mem;
    b->mem_opaque = mem_opaque;
    for (i = 0; i < nsegs; i++) {
        b->remaining += segs[i].len;
    }
}

/*
 * Moves @len bytes between @p and the buffer; @p NULL just skips.
 * The caller has checked that @len bytes remain.
 */
static bool vfsd_buf_xfer(VfsdBuf *b, void *p, size_t len, bool is_write)
{
    VfsdBuf pos = *b;
    uint8_t *q = p;

    while (len) {
        const VfsdSeg *s = &pos.segs[pos.seg];
        size_t n = s->len - pos.seg_off;

        if (n == 0) {
            pos.seg++;
            pos.seg_off = 0;
            continue;
        }
        if (n > len) {
            n = len;
        }
        if (q && s->base) {
            if (is_write) {
                memcpy((uint8_t *)s->base + pos.seg_off, q, n);
            } else {
                memcpy(q, (uint8_t *)s->base + pos.seg_off, n);
            }
        } else if (q) {
            if (!pos.mem || !pos.mem(pos.mem_opaque, s->addr + pos.seg_off,
                                     q, n, is_write)) {
                return false;
            }
        }
        if (q) {
            q += n;
        }
        pos.seg_off += n;
        pos.remaining -= n;
        len -= n;
    }
    *b = pos;
    return true;
}

bool vfsd_buf_read(VfsdBuf *b, void *dst, size_t len)
{
    if (len > b->remaining) {
        return false;
    }
    return vfsd_buf_xfer(b, dst, len, false);
}

bool vfsd_buf_write(VfsdBuf *b, const void *src, size_t len)
{
    if (len > b->remaining) {
        return false;
    }
    return vfsd_buf_xfer(b, (void *)src, len, true);
}

bool vfsd_buf_skip(VfsdBuf *b, size_t len)
{
    if (len > b->remaining) {
        return false;
    }
    return vfsd_buf_xfer(b, NULL, len, false);
}

int vfsd_buf_peek_iov(const VfsdBuf *b, size_t len, struct iovec *iov,
                      int max)
{
    unsigned int seg = b->seg;
    size_t off = b->seg_off;
    int n = 0;

    if (len > b->remaining) {
        return -1;
    }
    while (len) {
        const VfsdSeg *s = &b->segs[seg];
        size_t chunk = s->len - off;

        if (chunk == 0) {
            seg++;
            off = 0;
            continue;
        }
        if (!s->base || n == max) {
            return -1;
        }
        if (chunk > len) {
            chunk = len;
        }
        iov[n].iov_base = (uint8_t *)s->base + off;
        iov[n].iov_len = chunk;
        n++;
        off += chunk;
        len -= chunk;
    }
    return n;
}
