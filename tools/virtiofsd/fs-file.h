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

/* They return 0 or a byte count on success, a negative errno on failure */
int vfsd_op_open(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                 uint32_t flags, uint32_t open_flags,
                 struct fuse_open_out *out);
int vfsd_op_create(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                   const char *name, uint32_t flags, uint32_t fuse_open_flags,
                   mode_t mode, mode_t umask, bool tmpfile,
                   struct fuse_entry_out *e, struct fuse_open_out *out);
ssize_t vfsd_op_read(VfsdFs *fs, uint64_t fh, uint64_t offset,
                     uint32_t size, VfsdBuf *out);
ssize_t vfsd_op_write(VfsdFs *fs, uint64_t fh, uint64_t offset,
                      uint32_t size, uint32_t write_flags, VfsdBuf *in);
int vfsd_op_flush(VfsdFs *fs, uint64_t fh, uint64_t lock_owner);
int vfsd_op_release(VfsdFs *fs, uint64_t fh, uint32_t release_flags,
                    uint64_t lock_owner, bool is_dir);
int vfsd_op_fsync(VfsdFs *fs, uint64_t nodeid, uint64_t fh, bool datasync,
                  bool is_dir);
int vfsd_op_fallocate(VfsdFs *fs, uint64_t nodeid, uint64_t fh,
                      uint64_t offset, uint64_t length, uint32_t mode);
int vfsd_op_lseek(VfsdFs *fs, uint64_t fh, uint64_t offset, uint32_t whence,
                  uint64_t *result);
ssize_t vfsd_op_copy_file_range(VfsdFs *fs,
                                const struct fuse_copy_file_range_in *in);
int vfsd_op_getlk(VfsdFs *fs, uint64_t fh, const struct fuse_lk_in *in,
                  struct fuse_file_lock *out);
int vfsd_op_setlk(VfsdFs *fs, uint64_t fh, const struct fuse_lk_in *in,
                  VfsdWaiter *waiter);

#endif /* VIRTIOFSD_FS_FILE_H */
