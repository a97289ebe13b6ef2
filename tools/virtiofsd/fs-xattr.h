/*
 * virtiofsd: extended attributes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_XATTR_H
#define VIRTIOFSD_FS_XATTR_H

#include "fs-types.h"

/* They return 0 or a byte count on success, a negative errno on failure */
int vfsd_op_setxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                     const void *value, size_t size, uint32_t flags,
                     uint32_t setxattr_flags);
ssize_t vfsd_op_getxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                         void *value, size_t size);
ssize_t vfsd_op_listxattr(VfsdFs *fs, uint64_t nodeid, char *list,
                          size_t size);
int vfsd_op_removexattr(VfsdFs *fs, uint64_t nodeid, const char *name);

/*
 * Where the host kernel would drop security.capability (a write, a
 * truncation, a change of owner), drop the name --xattrmap stores the
 * guest's under instead; nothing without such a map.  @fd is open on the
 * file, or -1 for @inode's O_PATH fd; with no @inode, @fd is a regular
 * file.  Returns 0 or -errno.
 */
int vfsd_xattr_drop_capability(VfsdFs *fs, VfsdInode *inode, int fd);

/*
 * Sets the creation's security label (@ctx->label_name, through
 * --xattrmap) on @fd, a new file not yet under its name.  0 or -errno.
 */
int vfsd_xattr_set_label(VfsdFs *fs, const VfsdCtx *ctx, int fd);

/*
 * A name to make a labelled file under before it gets its own: unique
 * in the daemon, @attempt makes another one.  To be g_free'd.
 */
char *vfsd_xattr_label_tmp_name(unsigned int attempt);

#endif /* VIRTIOFSD_FS_XATTR_H */
