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
                    VfsdOpened *out);
/*
 * Hands @sink the entries from @offset on, until it has no room; @max is
 * about what it takes, and sizes what is read from the host at a time.
 * READDIRPLUS entries carry lookups, which the guest owns once it has
 * the reply: if the reply cannot reach it, the caller gives them back
 * (vfsd_inode_forget()).
 */
int vfsd_op_readdir(VfsdFs *fs, uint64_t fh, uint64_t offset, size_t max,
                    bool plus, const VfsdDirSink *sink);

#endif /* VIRTIOFSD_FS_DIR_H */
