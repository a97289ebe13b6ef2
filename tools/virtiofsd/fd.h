/*
 * virtiofsd: the fds held for the guest, and how they are opened
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FD_H
#define VIRTIOFSD_FD_H

#include "fs-types.h"

/* Sets the bound from RLIMIT_NOFILE; false if too low to serve a guest */
bool vfsd_fd_limit_init(VfsdFs *fs, char **err);

/* Accounts for one more fd; false when the guest holds all it may */
bool vfsd_fd_reserve(VfsdFs *fs);
void vfsd_fd_release(VfsdFs *fs);

/*
 * Opens the inode for I/O, with @flags, through its O_PATH fd.  The
 * caller accounts for the fd; vfsd_fd_open() is that and the accounting.
 */
int vfsd_reopen(VfsdFs *fs, VfsdInode *inode, int flags);

/*
 * An accounted fd of the inode opened with @flags, or a negative errno:
 * -ENFILE when the guest holds all the fds it may.  vfsd_fd_close() gives
 * it back.
 */
int vfsd_fd_open(VfsdFs *fs, VfsdInode *inode, int flags);
void vfsd_fd_close(VfsdFs *fs, int fd);

#endif /* VIRTIOFSD_FD_H */
