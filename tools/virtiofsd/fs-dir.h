/*
 * virtiofsd: operations on directories
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_DIR_H
#define VIRTIOFSD_FS_DIR_H

#include "fs-types.h"

/* They return 0 or a byte count on success, a negative errno on failure */
int vfsd_op_opendir(VfsdFs *fs, uint64_t nodeid, uint32_t flags,
                    struct fuse_open_out *out);
/*
 * Appends the entries from @offset to @reply, at most @size and @room
 * bytes.  READDIRPLUS entries carry lookups, which the guest owns once it
 * has the reply: if the reply cannot reach it, they go back with
 * vfsd_readdirplus_unlookup().
 */
int vfsd_op_readdir(VfsdFs *fs, uint64_t fh, uint64_t offset,
                    uint32_t size, size_t room, bool plus, GByteArray *reply);
void vfsd_readdirplus_unlookup(VfsdFs *fs, const GByteArray *reply);

#endif /* VIRTIOFSD_FS_DIR_H */
