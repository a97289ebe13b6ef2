/*
 * virtiofsd: translation of extended attribute names (--xattrmap)
 *
 * The rule language and its meaning are those of the Rust virtiofsd, so
 * that a command line written for one daemon means the same to the other;
 * docs/tools/virtiofsd.rst describes it.  Everything here works on
 * buffers only: no system calls, no logging.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_XATTRMAP_H
#define VIRTIOFSD_XATTRMAP_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The longest name the host kernel takes, terminator not counted */
#define VFSD_XATTR_NAME_MAX 255

typedef struct VfsdXattrMap VfsdXattrMap;

/* The operation a guest name is mapped for: getxattr hides refusals */
typedef enum VfsdXattrOp {
    VFSD_XATTR_OP_GET,
    VFSD_XATTR_OP_SET,
    VFSD_XATTR_OP_REMOVE,
} VfsdXattrOp;

/*
 * Parses a rule string.  On error returns NULL and sets *err to one line
 * naming the rule (by number and text) and what is wrong with it.
 */
VfsdXattrMap *vfsd_xattrmap_parse(const char *rules, char **err);
void vfsd_xattrmap_free(VfsdXattrMap *map);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VfsdXattrMap, vfsd_xattrmap_free)

/* Rules after the "map" shorthand has been expanded */
unsigned int vfsd_xattrmap_rule_count(const VfsdXattrMap *map);

/*
 * The host name of the guest's name @name (NUL-terminated), written to
 * @host, which has room for VFSD_XATTR_NAME_MAX + 1 bytes.  Returns 0, or
 * the negative errno the guest gets: -EPERM (a "bad" rule; -ENODATA for
 * getxattr), -ENOTSUP (an "unsupported" rule) or -ERANGE (the host name
 * would be longer than the kernel takes, which is what the kernel itself
 * answers).  A name no rule matches is refused like a "bad" one and
 * counted (vfsd_xattrmap_unmatched()).
 */
int vfsd_xattrmap_to_host(VfsdXattrMap *map, VfsdXattrOp op,
                          const char *name, char *host);

/*
 * Whether the host's name @name (@len bytes, no terminator needed) is shown
 * to the guest; if so *skip is how many of its leading bytes the guest does
 * not see.
 */
bool vfsd_xattrmap_to_guest(VfsdXattrMap *map, const char *name, size_t len,
                            size_t *skip);

/*
 * Translates the host's listxattr() answer (@in, @in_len bytes) into the
 * guest's in @out (@out_size bytes; @out may be @in).  Empty names are
 * dropped and a last name without its terminator gets one.  Returns the
 * length written, or -ERANGE if @out is too small.
 */
ssize_t vfsd_xattrmap_list(VfsdXattrMap *map, const char *in, size_t in_len,
                           char *out, size_t out_size);

/*
 * The host name the guest's "security.capability" is stored under when the
 * rules move it elsewhere, or NULL.  The host kernel drops
 * security.capability on write, truncate and chown; it cannot know that
 * another name plays that part, so the daemon has to drop it instead.
 */
const char *vfsd_xattrmap_capability_name(const VfsdXattrMap *map);

/* Names that no rule matched so far, in either direction */
unsigned int vfsd_xattrmap_unmatched(const VfsdXattrMap *map);

#endif /* VIRTIOFSD_XATTRMAP_H */
