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

static uint32_t ns_to_host(const VfsdIdMap *m, uint32_t id)
{
    unsigned int i;

    if (!m->n) {
        return id;
    }
    for (i = 0; i < m->n; i++) {
        if (id >= m->r[i].guest && id - m->r[i].guest < m->r[i].count) {
            return m->r[i].host + (id - m->r[i].guest);
        }
    }
    return VFSD_NO_ID;
}

static uint32_t ns_to_guest(const VfsdIdMap *m, uint32_t id)
{
    unsigned int i;

    if (!m->n) {
        return id;
    }
    for (i = 0; i < m->n; i++) {
        if (id >= m->r[i].host && id - m->r[i].host < m->r[i].count) {
            return m->r[i].guest + (id - m->r[i].host);
        }
    }
    return VFSD_OVERFLOW_ID;
}

/*
 * The translation rules act as the daemon itself would, seen from inside
 * its user namespace: the guest's id becomes the daemon's, which the
 * namespace's map turns into the host's.
 */
uint32_t vfsd_idmap_to_host(const VfsdIdMap *m, uint32_t id)
{
    uint32_t mid;

    if (id == VFSD_NO_ID || vfsd_idxlate_to_host(&m->xlate, id, &mid) < 0) {
        return VFSD_NO_ID;
    }
    return ns_to_host(m, mid);
}

uint32_t vfsd_idmap_to_guest(const VfsdIdMap *m, uint32_t id)
{
    return vfsd_idxlate_to_guest(&m->xlate, ns_to_guest(m, id));
}

bool vfsd_idmap_forbidden(const VfsdIdMap *m, uint32_t id)
{
    uint32_t mid;

    return vfsd_idxlate_to_host(&m->xlate, id, &mid) < 0;
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

static bool rule_to_host(const VfsdIdRule *r)
{
    return r->kind != VFSD_IDRULE_HOST && r->kind != VFSD_IDRULE_SQUASH_HOST;
}

static bool rule_to_guest(const VfsdIdRule *r)
{
    return r->kind == VFSD_IDRULE_HOST || r->kind == VFSD_IDRULE_MAP ||
           r->kind == VFSD_IDRULE_SQUASH_HOST;
}

/* The ids a rule's direction reads: guest ids to host, host ids back */
static uint32_t rule_from(const VfsdIdRule *r, bool to_host)
{
    return to_host ? r->guest : r->host;
}

/*
 * A rule's text: its kind, then its numbers in the order that kind names
 * them.  What the numbers mean together is vfsd_idxlate_add()'s to check.
 */
static bool parse_id_rule(const char *spec, VfsdIdRule *r, char **err)
{
    static const struct {
        const char *prefix;
        VfsdIdRuleKind kind;
        bool host_first;        /* the fields are host id, guest id */
        unsigned int fields;
    } kinds[] = {
        { "guest", VFSD_IDRULE_GUEST, false, 3 },
        { "host", VFSD_IDRULE_HOST, true, 3 },
        { "map", VFSD_IDRULE_MAP, false, 3 },
        { "squash-guest", VFSD_IDRULE_SQUASH_GUEST, false, 3 },
        { "squash-host", VFSD_IDRULE_SQUASH_HOST, true, 3 },
        { "forbid-guest", VFSD_IDRULE_FORBID_GUEST, false, 2 },
    };
    g_auto(GStrv) f = g_strsplit(spec, ":", -1);
    uint32_t v[3] = { 0, 0, 0 };
    unsigned int i, k, nf = g_strv_length(f);

    for (k = 0; k < G_N_ELEMENTS(kinds); k++) {
        if (!strcmp(f[0] ? f[0] : "", kinds[k].prefix)) {
            break;
        }
    }
    if (k == G_N_ELEMENTS(kinds)) {
        *err = g_strdup("expected guest:, host:, map:, squash-guest:, "
                        "squash-host: or forbid-guest: first");
        return false;
    }
    if (nf != kinds[k].fields + 1) {
        *err = g_strdup_printf("expected %s:%s", kinds[k].prefix,
                               kinds[k].fields == 2 ? "GUEST:COUNT" :
                               kinds[k].host_first ? "HOST:GUEST:COUNT" :
                               "GUEST:HOST:COUNT");
        return false;
    }
    for (i = 0; i < kinds[k].fields; i++) {
        if (!parse_field(f[i + 1], &v[i])) {
            *err = g_strdup_printf("'%s' is not a number from 0 to "
                                   "4294967295", f[i + 1]);
            return false;
        }
    }
    r->kind = kinds[k].kind;
    if (kinds[k].fields == 2) {
        r->guest = v[0];
        r->host = 0;
        r->count = v[1];
    } else {
        r->guest = kinds[k].host_first ? v[1] : v[0];
        r->host = kinds[k].host_first ? v[0] : v[1];
        r->count = v[2];
    }
    return true;
}

bool vfsd_idxlate_add(VfsdIdTranslate *t, const char *spec, char **err)
{
    VfsdIdRule r;
    unsigned int i;

    if (!parse_id_rule(spec, &r, err)) {
        return false;
    }
    if (r.count == 0) {
        *err = g_strdup("the count must not be 0");
        return false;
    }
    /* A squash target is one id; the other side is a range */
    if ((uint64_t)r.guest + (r.kind == VFSD_IDRULE_SQUASH_HOST ? 1 :
                             r.count) > VFSD_NO_ID ||
        (uint64_t)r.host + (r.kind == VFSD_IDRULE_SQUASH_GUEST ||
                            r.kind == VFSD_IDRULE_FORBID_GUEST ? 1 :
                            r.count) > VFSD_NO_ID) {
        *err = g_strdup("the range goes past id 4294967294");
        return false;
    }
    /* Two rules for one id in one direction: which one wins is a guess */
    for (i = 0; i < t->n; i++) {
        const VfsdIdRule *o = &t->r[i];

        if (rule_to_host(&r) && rule_to_host(o) &&
            overlap(r.guest, r.count, o->guest, o->count)) {
            *err = g_strdup("its guest ids overlap an earlier rule's");
            return false;
        }
        if (rule_to_guest(&r) && rule_to_guest(o) &&
            overlap(r.host, r.count, o->host, o->count)) {
            *err = g_strdup("its host ids overlap an earlier rule's");
            return false;
        }
    }
    if (t->n == VFSD_IDMAP_MAX) {
        *err = g_strdup_printf("more than %d rules", VFSD_IDMAP_MAX);
        return false;
    }
    t->r[t->n++] = r;
    return true;
}

int vfsd_idxlate_to_host(const VfsdIdTranslate *t, uint32_t id,
                         uint32_t *out)
{
    unsigned int i;

    *out = id;
    for (i = 0; i < t->n; i++) {
        const VfsdIdRule *r = &t->r[i];
        uint32_t from = rule_from(r, true);

        if (!rule_to_host(r) || id < from || id - from >= r->count) {
            continue;
        }
        switch (r->kind) {
        case VFSD_IDRULE_FORBID_GUEST:
            return -EPERM;
        case VFSD_IDRULE_SQUASH_GUEST:
            *out = r->host;
            return 0;
        default:
            *out = r->host + (id - from);
            return 0;
        }
    }
    return 0;
}

uint32_t vfsd_idxlate_to_guest(const VfsdIdTranslate *t, uint32_t id)
{
    unsigned int i;

    for (i = 0; i < t->n; i++) {
        const VfsdIdRule *r = &t->r[i];
        uint32_t from = rule_from(r, false);

        if (!rule_to_guest(r) || id < from || id - from >= r->count) {
            continue;
        }
        return r->kind == VFSD_IDRULE_SQUASH_HOST ? r->guest :
               r->guest + (id - from);
    }
    return id;
}
