/*
 * virtiofsd: the passthrough file system served to the guest
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FS_H
#define VIRTIOFSD_FS_H

#include "fs-types.h"

/* fs.c: setup and helpers shared by the operation files */
bool vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                  int proc_self_fd, char **err);
void vfsd_fs_cleanup(VfsdFs *fs);
int vfsd_fill_attr(VfsdFs *fs, VfsdInode *inode, VfsdAttr *attr);
/*
 * The same and more, from statx(2) with @sync_flags (AT_STATX_*) and the
 * STATX_* fields of @mask the guest asks for, on top of the basic ones
 */
int vfsd_fill_statx(VfsdFs *fs, VfsdInode *inode, int sync_flags,
                    uint32_t mask, VfsdStatx *sx);
bool vfsd_valid_name(const char *name);
VfsdInode *vfsd_dir_get(VfsdFs *fs, uint64_t nodeid, int *err);

/*
 * The guest's entry for @name in @parent, adding one lookup, and the same
 * for @fd (taken over; an O_PATH fd accounted with vfsd_fd_reserve())
 */
int vfsd_entry_lookup(VfsdFs *fs, VfsdInode *parent, const char *name,
                      VfsdEntry *e);
int vfsd_entry_from_fd(VfsdFs *fs, VfsdInode *parent, int fd, VfsdEntry *e);
/* The same for @name, which a listing of @parent gave with number @ino */
int vfsd_entry_lookup_listed(VfsdFs *fs, VfsdInode *parent, const char *name,
                             ino_t ino, VfsdEntry *e);
/* The same for a LOOKUP of @name */
int vfsd_entry_lookup_name(VfsdFs *fs, VfsdInode *parent, const char *name,
                           VfsdEntry *e);

/* Handles (fs.c) */
uint64_t vfsd_handle_new(VfsdFs *fs, int fd, int flags, VfsdInode *inode,
                         bool is_dir);
VfsdHandle *vfsd_handle_get(VfsdFs *fs, uint64_t fh, bool is_dir);
void vfsd_handle_put(VfsdHandle *h);
void vfsd_handle_close(VfsdFs *fs, uint64_t fh, bool is_dir);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VfsdHandle, vfsd_handle_put)
/*
 * For migration: a reference to every open handle (free with
 * g_ptr_array_unref()), and a handle put back under the guest's @fh;
 * false (nothing taken over) if @fh is taken.
 */
GPtrArray *vfsd_handles_snapshot(VfsdFs *fs);
bool vfsd_handle_restore(VfsdFs *fs, uint64_t fh, int fd, int flags,
                         VfsdInode *inode, bool is_dir);

/* fs.c: FUSE_DESTROY and disconnect */
void vfsd_fs_reset(VfsdFs *fs);
double vfsd_fs_timeout(VfsdFs *fs, const struct timespec *ctime);
double vfsd_fs_attr_timeout(VfsdFs *fs, const VfsdAttr *attr);
double vfsd_fs_entry_timeout(VfsdFs *fs, VfsdInode *parent,
                             const struct timespec *child_ctime);

#endif /* VIRTIOFSD_FS_H */
