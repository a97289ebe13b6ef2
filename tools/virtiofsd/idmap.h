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

/* No ranges: ids pass unchanged, as without --uid-map/--gid-map */
typedef struct VfsdIdMap {
    unsigned int n;
    VfsdIdRange r[VFSD_IDMAP_MAX];
} VfsdIdMap;

static inline bool vfsd_idmap_active(const VfsdIdMap *m)
{
    return m->n > 0;
}

/*
 * Adds the range @spec, ":guest_id:host_id:count:", to @m.  Returns false
 * with a one-line reason in @err (to be g_free'd).
 */
bool vfsd_idmap_add(VfsdIdMap *m, const char *spec, char **err);
/* The host id for guest id @id, or VFSD_NO_ID when it has none */
uint32_t vfsd_idmap_to_host(const VfsdIdMap *m, uint32_t id);
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

#endif /* VIRTIOFSD_IDMAP_H */
