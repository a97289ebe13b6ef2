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
/*
 * @kill_sgid: the guest asks that setting an access ACL clear the
 * setgid bit (see acl_kill_sgid())
 */
int vfsd_op_setxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                     const void *value, size_t size, uint32_t flags,
                     bool kill_sgid);
ssize_t vfsd_op_getxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                         void *value, size_t size);
ssize_t vfsd_op_listxattr(VfsdFs *fs, uint64_t nodeid, char *list,
                          size_t size);
int vfsd_op_removexattr(VfsdFs *fs, uint64_t nodeid, const char *name);

#endif /* VIRTIOFSD_FS_XATTR_H */
