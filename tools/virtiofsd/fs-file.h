/*
 * virtiofsd: operations on open files
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_FILE_H
#define VIRTIOFSD_FS_FILE_H

#include "fs-types.h"
#include "buf.h"

struct fsxattr;

/*
 * They return 0 or a byte count on success, a negative errno on failure.
 * @kill_suidgid: the guest asks that the setuid and setgid bits go, as
 * they would for a local writer without CAP_FSETID (it only does once
 * FUSE_HANDLE_KILLPRIV_V2 is agreed).
 */
int vfsd_op_open(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                 uint32_t flags, bool kill_suidgid, VfsdOpened *out);
int vfsd_op_create(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                   const char *name, uint32_t flags, bool kill_suidgid,
                   mode_t mode, mode_t umask, bool tmpfile, VfsdEntry *e,
                   VfsdOpened *out);
ssize_t vfsd_op_read(VfsdFs *fs, uint64_t fh, uint64_t offset,
                     uint32_t size, VfsdBuf *out);
ssize_t vfsd_op_write(VfsdFs *fs, const VfsdCtx *ctx, uint64_t fh,
                      uint64_t offset, uint32_t size, bool kill_suidgid,
                      VfsdBuf *in);
int vfsd_op_flush(VfsdFs *fs, uint64_t fh, uint64_t lock_owner);
/* @flock_unlock: the file's flock() lock goes with it */
int vfsd_op_release(VfsdFs *fs, uint64_t fh, bool flock_unlock,
                    bool is_dir);
int vfsd_op_fsync(VfsdFs *fs, uint64_t nodeid, uint64_t fh, bool datasync,
                  bool is_dir);
int vfsd_op_fallocate(VfsdFs *fs, uint64_t nodeid, uint64_t fh,
                      uint64_t offset, uint64_t length, uint32_t mode);
int vfsd_op_lseek(VfsdFs *fs, uint64_t fh, uint64_t offset, uint32_t whence,
                  uint64_t *result);
ssize_t vfsd_op_copy_file_range(VfsdFs *fs, uint64_t fh_in, uint64_t off_in,
                                uint64_t fh_out, uint64_t off_out,
                                uint64_t len, uint64_t flags);
/*
 * The attributes lsattr shows (FS_IOC_GETFLAGS) and those xfs_io's stat
 * shows (FS_IOC_FSGETXATTR) of an open file or directory, as the host's
 * file system has them
 */
int vfsd_op_get_flags(VfsdFs *fs, uint64_t fh, bool is_dir, uint32_t *flags);
int vfsd_op_get_fsxattr(VfsdFs *fs, uint64_t fh, bool is_dir,
                        struct fsxattr *fsx);
/* GETLK answers with the lock in the way, type F_UNLCK if none */
int vfsd_op_getlk(VfsdFs *fs, uint64_t fh, const VfsdLock *lk,
                  VfsdLock *out);
int vfsd_op_setlk(VfsdFs *fs, uint64_t fh, const VfsdLock *lk,
                  VfsdWaiter *waiter);

#endif /* VIRTIOFSD_FS_FILE_H */
