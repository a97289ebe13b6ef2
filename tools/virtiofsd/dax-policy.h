/*
 * virtiofsd: which files the guest maps through the DAX window
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_POLICY_H
#define VIRTIOFSD_DAX_POLICY_H

#include "fs-types.h"

/*
 * Whether the front-end can map all of a file of @size bytes: upstream
 * QEMU maps only files of whole pages, so only those get per-inode DAX.
 */
bool vfsd_dax_size_mappable(VfsdFs *fs, uint64_t size);
/*
 * The policy (--dax-policy): whether the guest is to map @inode, whose
 * attributes are @stx, through the window (VfsdAttr.dax).  @entry: for a
 * new entry (LOOKUP, READDIRPLUS, CREATE...), where the guest decides how
 * it accesses the inode; only there may the policy read the file.
 */
bool vfsd_dax_wanted(VfsdFs *fs, VfsdInode *inode, const struct statx *stx,
                     bool entry);

#endif /* VIRTIOFSD_DAX_POLICY_H */
