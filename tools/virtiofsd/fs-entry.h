/*
 * virtiofsd: operations on names and attributes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_ENTRY_H
#define VIRTIOFSD_FS_ENTRY_H

#include <sys/statfs.h>

#include "fs-types.h"

/* They return 0 or a byte count on success, a negative errno on failure */
int vfsd_op_lookup(VfsdFs *fs, uint64_t parent, const char *name,
                   VfsdEntry *e);
/* @timeout: how long the guest may cache the attributes, in seconds */
int vfsd_op_getattr(VfsdFs *fs, uint64_t nodeid, VfsdAttr *attr,
                    double *timeout);
/*
 * STATX: @sync_flags are statx(2)'s AT_STATX_* flags, @mask its STATX_*
 * fields the caller wants (the basic ones come whether asked for or not)
 */
int vfsd_op_statx(VfsdFs *fs, uint64_t nodeid, int sync_flags,
                  uint32_t mask, VfsdStatx *sx, double *timeout);
int vfsd_op_setattr(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                    const VfsdSetattr *in, VfsdAttr *attr, double *timeout);
int vfsd_op_readlink(VfsdFs *fs, uint64_t nodeid, char *buf, size_t size);
int vfsd_op_mknod(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, dev_t rdev, mode_t umask,
                  const char *link_target, VfsdEntry *e);
int vfsd_op_mkdir(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, mode_t umask,
                  VfsdEntry *e);
int vfsd_op_unlink(VfsdFs *fs, uint64_t parent, const char *name,
                   bool is_dir);
int vfsd_op_rename(VfsdFs *fs, uint64_t parent, const char *name,
                   uint64_t newparent, const char *newname, uint32_t flags);
int vfsd_op_link(VfsdFs *fs, uint64_t nodeid, uint64_t newparent,
                 const char *newname, VfsdEntry *e);
int vfsd_op_statfs(VfsdFs *fs, uint64_t nodeid, struct statfs *st);
int vfsd_op_access(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                   int mask);
int vfsd_op_syncfs(VfsdFs *fs, uint64_t nodeid);

#endif /* VIRTIOFSD_FS_ENTRY_H */
