/*
 * virtiofsd: translation between the guest's and the host's uids and gids
 *
 * --uid-map/--gid-map give ranges the way a user namespace's uid_map does
 * (guest id, host id, count), in the Rust virtiofsd's spelling.  No two
 * ranges may share a guest id or a host id, so both directions are
 * functions and a host file never shows up under two guest ids.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "idmap.h"

/* One decimal field of a range: digits only, at most UINT32_MAX */
static bool parse_field(const char *s, uint32_t *v)
{
    uint64_t n = 0;

    if (!*s) {
        return false;
    }
    for (; *s; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
        n = n * 10 + (*s - '0');
        if (n > UINT32_MAX) {
            return false;
        }
    }
    *v = n;
    return true;
}

/* [a, a + na) and [b, b + nb) meet; counts are >= 1 and do not wrap */
static bool overlap(uint32_t a, uint32_t na, uint32_t b, uint32_t nb)
{
    return (uint64_t)a < (uint64_t)b + nb && (uint64_t)b < (uint64_t)a + na;
}

bool vfsd_idmap_add(VfsdIdMap *m, const char *spec, char **err)
{
    g_auto(GStrv) f = NULL;
    VfsdIdRange r;
    unsigned int i;

    if (!g_str_has_prefix(spec, ":") || !g_str_has_suffix(spec, ":")) {
        *err = g_strdup("expected :guest_id:host_id:count:");
        return false;
    }
    f = g_strsplit(spec, ":", -1);
    if (g_strv_length(f) != 5 || !parse_field(f[1], &r.guest) ||
        !parse_field(f[2], &r.host) || !parse_field(f[3], &r.count)) {
        *err = g_strdup("expected :guest_id:host_id:count: with three "
                        "numbers from 0 to 4294967295");
        return false;
    }
    if (r.count == 0) {
        *err = g_strdup("the count must not be 0");
        return false;
    }
    /* 4294967295 is chown's "no change" and no one's id */
    if ((uint64_t)r.guest + r.count > VFSD_NO_ID ||
        (uint64_t)r.host + r.count > VFSD_NO_ID) {
        *err = g_strdup("the range goes past id 4294967294");
        return false;
    }
    for (i = 0; i < m->n; i++) {
        const VfsdIdRange *o = &m->r[i];

        if (overlap(r.guest, r.count, o->guest, o->count)) {
            *err = g_strdup_printf("guest ids overlap :%u:%u:%u:", o->guest,
                                   o->host, o->count);
            return false;
        }
        if (overlap(r.host, r.count, o->host, o->count)) {
            *err = g_strdup_printf("host ids overlap :%u:%u:%u:", o->guest,
                                   o->host, o->count);
            return false;
        }
    }
    if (m->n == VFSD_IDMAP_MAX) {
        *err = g_strdup_printf("more than %d ranges", VFSD_IDMAP_MAX);
        return false;
    }
    m->r[m->n++] = r;
    return true;
}

uint32_t vfsd_idmap_to_host(const VfsdIdMap *m, uint32_t id)
{
    unsigned int i;

    if (!vfsd_idmap_active(m)) {
        return id;
    }
    for (i = 0; i < m->n; i++) {
        if (id >= m->r[i].guest && id - m->r[i].guest < m->r[i].count) {
            return m->r[i].host + (id - m->r[i].guest);
        }
    }
    return VFSD_NO_ID;
}

uint32_t vfsd_idmap_to_guest(const VfsdIdMap *m, uint32_t id)
{
    unsigned int i;

    if (!vfsd_idmap_active(m)) {
        return id;
    }
    for (i = 0; i < m->n; i++) {
        if (id >= m->r[i].host && id - m->r[i].host < m->r[i].count) {
            return m->r[i].guest + (id - m->r[i].host);
        }
    }
    return VFSD_OVERFLOW_ID;
}

/* The kernel's xattr form of an ACL (little-endian) */
#define ACL_XATTR_VERSION 2
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP 0x08
#define ACL_HEADER_SIZE 4
#define ACL_ENTRY_SIZE 8

int vfsd_idmap_acl(const VfsdIdMap *uids, const VfsdIdMap *gids,
                   void *value, size_t size, bool to_host)
{
    uint8_t *p = value;
    uint32_t le32;
    size_t off;

    if (size < ACL_HEADER_SIZE ||
        (size - ACL_HEADER_SIZE) % ACL_ENTRY_SIZE) {
        return -EINVAL;
    }
    memcpy(&le32, p, 4);
    if (GUINT32_FROM_LE(le32) != ACL_XATTR_VERSION) {
        return -EINVAL;
    }
    /* Check every entry before changing any: a failure leaves it whole */
    for (off = ACL_HEADER_SIZE; to_host && off < size;
         off += ACL_ENTRY_SIZE) {
        uint16_t tag;
        uint32_t id;

        memcpy(&tag, p + off, 2);
        memcpy(&le32, p + off + 4, 4);
        tag = GUINT16_FROM_LE(tag);
        id = GUINT32_FROM_LE(le32);
        if ((tag == ACL_TAG_USER &&
             vfsd_idmap_to_host(uids, id) == VFSD_NO_ID) ||
            (tag == ACL_TAG_GROUP &&
             vfsd_idmap_to_host(gids, id) == VFSD_NO_ID)) {
            return -EINVAL;
        }
    }
    for (off = ACL_HEADER_SIZE; off < size; off += ACL_ENTRY_SIZE) {
        const VfsdIdMap *m;
        uint16_t tag;
        uint32_t id;

        memcpy(&tag, p + off, 2);
        tag = GUINT16_FROM_LE(tag);
        if (tag == ACL_TAG_USER) {
            m = uids;
        } else if (tag == ACL_TAG_GROUP) {
            m = gids;
        } else {
            continue;
        }
        memcpy(&le32, p + off + 4, 4);
        id = GUINT32_FROM_LE(le32);
        id = to_host ? vfsd_idmap_to_host(m, id) : vfsd_idmap_to_guest(m, id);
        le32 = GUINT32_TO_LE(id);
        memcpy(p + off + 4, &le32, 4);
    }
    return 0;
}
