/*
 * virtiofsd: the migration stream's encoding
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <string.h>

#include "migstream.h"

void vfsd_mig_put_bytes(VfsdMigWriter *w, const void *p, size_t len)
{
    g_byte_array_append(w->buf, p, len);
}

void vfsd_mig_put_u8(VfsdMigWriter *w, uint8_t v)
{
    vfsd_mig_put_bytes(w, &v, 1);
}

void vfsd_mig_put_u16(VfsdMigWriter *w, uint16_t v)
{
    v = GUINT16_TO_LE(v);
    vfsd_mig_put_bytes(w, &v, sizeof(v));
}

void vfsd_mig_put_u32(VfsdMigWriter *w, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    vfsd_mig_put_bytes(w, &v, sizeof(v));
}

void vfsd_mig_put_u64(VfsdMigWriter *w, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    vfsd_mig_put_bytes(w, &v, sizeof(v));
}

void vfsd_mig_put_blob(VfsdMigWriter *w, const void *p, uint32_t len)
{
    vfsd_mig_put_u32(w, len);
    vfsd_mig_put_bytes(w, p, len);
}

size_t vfsd_mig_tell(VfsdMigWriter *w)
{
    return w->buf->len;
}

void vfsd_mig_patch_u64(VfsdMigWriter *w, size_t at, uint64_t v)
{
    g_assert(at + sizeof(v) <= w->buf->len);
    v = GUINT64_TO_LE(v);
    memcpy(w->buf->data + at, &v, sizeof(v));
}

void vfsd_mig_reader_init(VfsdMigReader *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->pos = 0;
    r->bad = false;
}

size_t vfsd_mig_remaining(const VfsdMigReader *r)
{
    return r->len - r->pos;
}

bool vfsd_mig_get_bytes(VfsdMigReader *r, void *p, size_t len)
{
    if (r->bad || len > vfsd_mig_remaining(r)) {
        r->bad = true;
        memset(p, 0, len);
        return false;
    }
    memcpy(p, r->p + r->pos, len);
    r->pos += len;
    return true;
}

uint8_t vfsd_mig_get_u8(VfsdMigReader *r)
{
    uint8_t v;

    vfsd_mig_get_bytes(r, &v, sizeof(v));
    return v;
}

uint16_t vfsd_mig_get_u16(VfsdMigReader *r)
{
    uint16_t v;

    vfsd_mig_get_bytes(r, &v, sizeof(v));
    return GUINT16_FROM_LE(v);
}

uint32_t vfsd_mig_get_u32(VfsdMigReader *r)
{
    uint32_t v;

    vfsd_mig_get_bytes(r, &v, sizeof(v));
    return GUINT32_FROM_LE(v);
}

uint64_t vfsd_mig_get_u64(VfsdMigReader *r)
{
    uint64_t v;

    vfsd_mig_get_bytes(r, &v, sizeof(v));
    return GUINT64_FROM_LE(v);
}

const uint8_t *vfsd_mig_get_blob(VfsdMigReader *r, uint32_t max,
                                 uint32_t *len)
{
    const uint8_t *p;

    *len = vfsd_mig_get_u32(r);
    if (r->bad || *len > max || *len > vfsd_mig_remaining(r)) {
        r->bad = true;
        *len = 0;
        return NULL;
    }
    p = r->p + r->pos;
    r->pos += *len;
    return p;
}

bool vfsd_mig_get_count(VfsdMigReader *r, size_t min_size, uint64_t *count)
{
    *count = vfsd_mig_get_u64(r);
    if (r->bad || (min_size && *count > vfsd_mig_remaining(r) / min_size)) {
        r->bad = true;
        *count = 0;
        return false;
    }
    return true;
}
