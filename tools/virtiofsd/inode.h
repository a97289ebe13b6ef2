/*
 * virtiofsd: the inodes the guest knows
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_INODE_H
#define VIRTIOFSD_INODE_H

#include "fs-types.h"

void vfsd_inodes_init(VfsdInodeStore *st);
bool vfsd_inodes_set_root(VfsdFs *fs, int fd);
void vfsd_inodes_destroy(VfsdFs *fs);
bool vfsd_inodes_handles_init(VfsdFs *fs, int root_fd, char **err);
void vfsd_inodes_handles_cleanup(VfsdFs *fs);
/* Logs how many inodes were held by file handle, and opened from one */
void vfsd_inodes_report(VfsdFs *fs);
/*
 * The inode with @nodeid, with a reference and its fd open for the
 * caller; NULL with errno set: ENOENT for an unknown nodeid, or why a
 * handle inode could not be opened (ESTALE: deleted on the host).
 */
VfsdInode *vfsd_inode_get(VfsdFs *fs, uint64_t nodeid);
void vfsd_inode_ref(VfsdInode *inode);
void vfsd_inode_unref(VfsdInode *inode);
/*
 * Takes over @fd, an O_PATH fd accounted with vfsd_fd_reserve(), whose
 * attributes are @stx: the inode behind it, with one more lookup and a
 * reference for the caller.  NULL with errno set when the inode cannot be
 * held (no file handle with --inode-file-handles=mandatory).
 */
VfsdInode *vfsd_inode_intern(VfsdFs *fs, int fd, const struct statx *stx);
/*
 * Without an fd.  The epoch: every inode made from now on has a nodeid
 * at or past it.  vfsd_inode_find(): the epoch if the guest knows an
 * inode as (@dev, @ino, @mnt_id), else 0.  Then, once the caller has
 * read @stx by name, the inode of @stx's key with one more lookup and a
 * reference for the caller, if it is that file for certain: made before
 * @epoch, taken before the caller's look at the name, and held open
 * since.  NULL otherwise: vfsd_inode_intern() tells.
 */
uint64_t vfsd_inodes_epoch(VfsdFs *fs);
uint64_t vfsd_inode_find(VfsdFs *fs, dev_t dev, ino_t ino, uint64_t mnt_id);
VfsdInode *vfsd_inode_intern_known(VfsdFs *fs, uint64_t epoch,
                                   const struct statx *stx);
void vfsd_inode_plocks_drop(VfsdInode *inode, uint64_t owner);
/*
 * The fd that carries @owner's POSIX locks on @inode, opened (read-write,
 * else with the open flags @fallback) if the owner has none yet; -errno
 * when it cannot be.  The inode keeps it.  With @dup the caller gets a
 * duplicate instead, made under the lock so that a FLUSH of the owner
 * closing the original meanwhile cannot invalidate it, and closes that.
 */
int vfsd_inode_plock_fd(VfsdInode *inode, uint64_t owner, int fallback,
                        bool dup);
void vfsd_inode_forget(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup);
void vfsd_inodes_forget_all(VfsdFs *fs);

/*
 * For migration (migrate.c).  A reference to every inode the guest
 * knows, root excluded; free with g_ptr_array_unref().
 */
GPtrArray *vfsd_inodes_snapshot(VfsdFs *fs);
/*
 * Puts back an inode the guest knew as @nodeid with @nlookup lookups,
 * taking over @fd (O_PATH, accounted) whose attributes are @stx; false
 * (fd left to the caller) if the nodeid or the file is known already.
 * With @fd -1 the inode is lost: the guest gets EIO on it.
 */
bool vfsd_inode_restore(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup,
                        int fd, const struct statx *stx, mode_t type);
/* Whether requests on @nodeid get EIO (see VfsdInode.lost) */
bool vfsd_inode_lost(VfsdFs *fs, uint64_t nodeid);
/* Makes a restored inode lost, when what depends on it could not be had */
void vfsd_inode_set_lost(VfsdFs *fs, uint64_t nodeid);

/* The attributes of @fd (an O_PATH fd will do), or a negative errno */
int vfsd_statx(int fd, struct statx *stx);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(VfsdInode, vfsd_inode_unref)

#endif /* VIRTIOFSD_INODE_H */
