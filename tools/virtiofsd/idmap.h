/*
 * virtiofsd: translation between the guest's and the host's uids and gids
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_IDMAP_H
#define VIRTIOFSD_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* As many ranges as one map may have; a kernel user namespace has 340 */
#define VFSD_IDMAP_MAX 64

/* What the guest sees for a host id that no range covers */
#define VFSD_OVERFLOW_ID 65534

/* No id: chown's "leave it alone", never mapped */
#define VFSD_NO_ID UINT32_MAX

typedef struct VfsdIdRange {
    uint32_t guest;             /* first id as the guest sees it */
    uint32_t host;              /* the same id on the host */
    uint32_t count;
} VfsdIdRange;

/*
 * --translate-uid/--translate-gid: rules applied inside the daemon, as the
 * Rust virtiofsd's.  Unlike a VfsdIdMap, an id no rule covers passes
 * unchanged, a rule may work in one direction only, and a range may be
 * squashed onto one id or forbidden.
 */
typedef enum VfsdIdRuleKind {
    VFSD_IDRULE_GUEST,          /* guest:G:H:N, guest -> host only */
    VFSD_IDRULE_HOST,           /* host:H:G:N, host -> guest only */
    VFSD_IDRULE_MAP,            /* map:G:H:N, both ways */
    VFSD_IDRULE_SQUASH_GUEST,   /* squash-guest:G:H:N, G..G+N-1 -> H */
    VFSD_IDRULE_SQUASH_HOST,    /* squash-host:H:G:N, H..H+N-1 -> G */
    VFSD_IDRULE_FORBID_GUEST,   /* forbid-guest:G:N, EPERM */
} VfsdIdRuleKind;

typedef struct VfsdIdRule {
    VfsdIdRuleKind kind;
    uint32_t guest;             /* first guest id (squash-host: the target) */
    uint32_t host;              /* first host id (squash-guest: the target) */
    uint32_t count;
} VfsdIdRule;

typedef struct VfsdIdTranslate {
    unsigned int n;
    VfsdIdRule r[VFSD_IDMAP_MAX];
} VfsdIdTranslate;

/*
 * One class of ids (uids or gids) between the guest and the host: first
 * the --translate-* rules, then the --uid-map/--gid-map ranges, which give
 * the view of a daemon in a user namespace with that map (an id outside
 * them has no counterpart).  Neither: ids pass unchanged.
 */
typedef struct VfsdIdMap {
    unsigned int n;
    VfsdIdRange r[VFSD_IDMAP_MAX];
    VfsdIdTranslate xlate;
} VfsdIdMap;

static inline bool vfsd_idmap_active(const VfsdIdMap *m)
{
    return m->n > 0 || m->xlate.n > 0;
}

/*
 * Adds the range @spec, ":guest_id:host_id:count:", to @m.  Returns false
 * with a one-line reason in @err (to be g_free'd).
 */
bool vfsd_idmap_add(VfsdIdMap *m, const char *spec, char **err);
/* The host id for guest id @id, or VFSD_NO_ID when it has none */
uint32_t vfsd_idmap_to_host(const VfsdIdMap *m, uint32_t id);
/* Whether a forbid-guest: rule covers guest id @id (EPERM) */
bool vfsd_idmap_forbidden(const VfsdIdMap *m, uint32_t id);
/* The guest id for host id @id, VFSD_OVERFLOW_ID when it has none */
uint32_t vfsd_idmap_to_guest(const VfsdIdMap *m, uint32_t id);

/*
 * The ids inside a system.posix_acl_access/default value, translated in
 * place: to the host (@to_host; an entry naming an unmapped id makes it
 * fail) or to the guest (unmapped ids become VFSD_OVERFLOW_ID).  Returns
 * 0 or -EINVAL for a value that is not a well-formed ACL.
 */
int vfsd_idmap_acl(const VfsdIdMap *uids, const VfsdIdMap *gids,
                   void *value, size_t size, bool to_host);

/*
 * Adds the rule @spec (Rust's TYPE:...:COUNT syntax, see above) to @t.
 * Returns false with a one-line reason in @err (to be g_free'd).
 */
bool vfsd_idxlate_add(VfsdIdTranslate *t, const char *spec, char **err);
/*
 * The host id for guest id @id in *@out; @id itself when no rule covers
 * it.  Returns -EPERM for a forbidden id, else 0.
 */
int vfsd_idxlate_to_host(const VfsdIdTranslate *t, uint32_t id,
                         uint32_t *out);
/* The guest id for host id @id; @id itself when no rule covers it */
uint32_t vfsd_idxlate_to_guest(const VfsdIdTranslate *t, uint32_t id);

#endif /* VIRTIOFSD_IDMAP_H */
