/*
 * virtiofsd: operations on names and attributes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs-entry.h"
#include "compat.h"
#include "creds.h"
#include "dax.h"
#include "fd.h"
#include "fs.h"
#include "inode.h"
#include "log.h"

int vfsd_op_lookup(VfsdFs *fs, uint64_t parent, const char *name,
                   VfsdEntry *e)
{
    int ret;
    g_autoptr(VfsdInode) dir = vfsd_dir_get(fs, parent, &ret);

    if (!dir) {
        return ret;
    }
    ret = vfsd_entry_lookup_name(fs, dir, name, e);
    if (ret == -ENOENT) {
        double t = vfsd_fs_entry_timeout(fs, dir, NULL);

        if (t > 0) {
            /* nodeid 0 with a timeout: the guest caches the negative entry */
            memset(e, 0, sizeof(*e));
            e->entry_timeout = t;
            return 0;
        }
    }
    return ret;
}

int vfsd_op_getattr(VfsdFs *fs, uint64_t nodeid, VfsdAttr *attr,
                    double *timeout)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    int ret;

    if (!inode) {
        return -errno;
    }
    ret = vfsd_fill_attr(fs, inode, attr);
    if (ret < 0) {
        return ret;
    }
    /* The guest may touch what the size it learns covers */
    vfsd_dax_size_seen(fs, inode, attr->size);
    *timeout = vfsd_fs_attr_timeout(fs, attr);
    return 0;
}

int vfsd_op_statx(VfsdFs *fs, uint64_t nodeid, int sync_flags,
                  uint32_t mask, VfsdStatx *sx, double *timeout)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    int ret;

    if (!inode) {
        return -errno;
    }
    ret = vfsd_fill_statx(fs, inode, sync_flags, mask, sx);
    if (ret < 0) {
        return ret;
    }
    /* As for GETATTR: the guest may touch what the size it learns covers */
    if (sx->mask & STATX_SIZE) {
        vfsd_dax_size_seen(fs, inode, sx->attr.size);
    }
    *timeout = vfsd_fs_attr_timeout(fs, &sx->attr);
    return 0;
}

static int proc_name(const VfsdInode *inode, char *buf, size_t len)
{
    snprintf(buf, len, "%d", inode->fd);
    return 0;
}

/*
 * chmod of the inode behind @inode's O_PATH fd.  fchmod() refuses O_PATH
 * fds; fchmodat2() (Linux 6.6) takes one with AT_EMPTY_PATH, which saves
 * the walk through /proc/self/fd's magic link that older kernels need.
 * Both reach the same inode through the same mount, with the same
 * checks: the host's errno either way.
 */
static int chmod_inode(VfsdFs *fs, const VfsdInode *inode, mode_t mode)
{
    static gint no_fchmodat2;
    char name[32];
    int err;

    if (!g_atomic_int_get(&no_fchmodat2)) {
        if (syscall(__NR_fchmodat2, inode->fd, "", mode,
                    AT_EMPTY_PATH) == 0) {
            return 0;
        }
        err = errno;
        /*
         * ENOSYS: an older kernel.  EPERM may be a container's seccomp
         * refusing a call it does not know, or the host's answer:
         * the magic link tells, and if it allows what fchmodat2() did
         * not, the latter is never tried again.
         */
        if (err != ENOSYS && err != EPERM) {
            return -err;
        }
        if (err == ENOSYS) {
            g_atomic_int_set(&no_fchmodat2, true);
        }
    }
    proc_name(inode, name, sizeof(name));
    if (fchmodat(fs->proc_self_fd, name, mode, 0) < 0) {
        return -errno;
    }
    g_atomic_int_set(&no_fchmodat2, true);
    return 0;
}

static int setattr_size(VfsdFs *fs, const VfsdCtx *ctx, VfsdInode *inode,
                        const VfsdSetattr *in)
{
    g_autoptr(VfsdHandle) h = NULL;
    VfsdKillPriv kp = { 0 };
    bool kill = false;
    int fd = -1, ret;

    if (inode->type != S_IFREG) {
        return inode->type == S_IFDIR ? -EISDIR : -EINVAL;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (in->valid & VFSD_SET_FH) {
        h = vfsd_handle_get(fs, in->fh, false);
        if (h && h->inode == inode && (h->flags & O_ACCMODE) != O_RDONLY) {
            fd = h->fd;
        }
    }
    if (fd < 0) {
        fd = vfsd_fd_open(fs, inode, O_WRONLY);
        if (fd < 0) {
            return fd;
        }
    }

    if ((fs->conn.flags & FUSE_HANDLE_KILLPRIV_V2) &&
        (in->valid & VFSD_SET_KILL_SUIDGID)) {
        kill = true;
    }
    ret = kill ? vfsd_kill_priv_begin(ctx, &kp) : 0;
    if (ret == 0) {
        ret = vfsd_drop_mapped_capability(fs, inode, fd);
    }
    if (ret == 0) {
        vfsd_dax_truncate_begin(fs, inode->dev, inode->ino, inode->fd,
                                in->size);
        if (ftruncate(fd, in->size) < 0) {
            ret = -errno;
        }
        vfsd_dax_truncate_end(fs, inode->dev, inode->ino, inode->fd);
    }
    vfsd_kill_priv_end(&kp);

    if (!h || fd != h->fd) {
        vfsd_fd_close(fs, fd);
    }
    return ret;
}

static int setattr_owner(VfsdFs *fs, VfsdInode *inode, const VfsdSetattr *in)
{
    unsigned int valid = in->valid;
    uid_t uid = (valid & VFSD_SET_UID) ?
                vfsd_idmap_to_host(&fs->opts->uid_map, in->uid) : -1;
    gid_t gid = (valid & VFSD_SET_GID) ?
                vfsd_idmap_to_host(&fs->opts->gid_map, in->gid) : -1;
    int ret;

    /* As if the guest were a caller of chown(2) not allowed the id */
    if (((valid & VFSD_SET_UID) &&
         vfsd_idmap_forbidden(&fs->opts->uid_map, in->uid)) ||
        ((valid & VFSD_SET_GID) &&
         vfsd_idmap_forbidden(&fs->opts->gid_map, in->gid))) {
        return -EPERM;
    }
    /*
     * An id the map does not cover has no host counterpart, like an
     * id outside a user namespace's map (chown(2) says EINVAL).
     * Without a map -1 passes, and means "no change" as it always
     * did.
     */
    if (((valid & VFSD_SET_UID) && uid == (uid_t)-1 &&
         vfsd_idmap_active(&fs->opts->uid_map)) ||
        ((valid & VFSD_SET_GID) && gid == (gid_t)-1 &&
         vfsd_idmap_active(&fs->opts->gid_map))) {
        return -EINVAL;
    }
    ret = vfsd_drop_mapped_capability(fs, inode, -1);
    if (ret < 0) {
        return ret;
    }
    if (fchownat(inode->fd, "", uid, gid,
                 AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        return -errno;
    }
    return 0;
}

static int setattr_times(VfsdInode *inode, const VfsdSetattr *in)
{
    unsigned int valid = in->valid;
    struct timespec ts[2] = {
        { .tv_nsec = UTIME_OMIT },
        { .tv_nsec = UTIME_OMIT },
    };

    if (valid & VFSD_SET_ATIME_NOW) {
        ts[0].tv_nsec = UTIME_NOW;
    } else if (valid & VFSD_SET_ATIME) {
        ts[0] = in->atime;
    }
    if (valid & VFSD_SET_MTIME_NOW) {
        ts[1].tv_nsec = UTIME_NOW;
    } else if (valid & VFSD_SET_MTIME) {
        ts[1] = in->mtime;
    }
    /*
     * On the inode itself, whatever its type: a symlink's own times
     * are set as lutimes() sets them.  Out-of-range nanoseconds get
     * the host's EINVAL.
     */
    if (utimensat(inode->fd, "", ts,
                  AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        return -errno;
    }
    return 0;
}

int vfsd_op_setattr(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                    const VfsdSetattr *in, VfsdAttr *attr, double *timeout)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    unsigned int valid = in->valid;
    int ret;

    if (!inode) {
        return -errno;
    }
    if (fs->opts->readonly &&
        (valid & (VFSD_SET_MODE | VFSD_SET_UID | VFSD_SET_GID |
                  VFSD_SET_SIZE | VFSD_SET_ATIME | VFSD_SET_MTIME))) {
        return -EROFS;
    }

    if (valid & VFSD_SET_MODE) {
        if (inode->type == S_IFLNK) {
            return -EOPNOTSUPP;
        }
        ret = chmod_inode(fs, inode, in->mode & 07777);
        if (ret < 0) {
            return ret;
        }
    }
    if (valid & (VFSD_SET_UID | VFSD_SET_GID)) {
        ret = setattr_owner(fs, inode, in);
        if (ret < 0) {
            return ret;
        }
    }
    if (valid & VFSD_SET_SIZE) {
        ret = setattr_size(fs, ctx, inode, in);
        if (ret < 0) {
            return ret;
        }
    }
    if (valid & (VFSD_SET_ATIME | VFSD_SET_MTIME)) {
        ret = setattr_times(inode, in);
        if (ret < 0) {
            return ret;
        }
    }
    (void)ctx;
    return vfsd_op_getattr(fs, nodeid, attr, timeout);
}

int vfsd_op_readlink(VfsdFs *fs, uint64_t nodeid, char *buf, size_t size)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    ssize_t n;

    if (!inode) {
        return -errno;
    }
    if (inode->type != S_IFLNK) {
        return -EINVAL;
    }
    n = readlinkat(inode->fd, "", buf, size);
    return n < 0 ? -errno : n;
}

typedef enum VfsdNodeKind {
    VFSD_NODE_MKNOD,
    VFSD_NODE_MKDIR,
    VFSD_NODE_SYMLINK,
} VfsdNodeKind;

static int make_one(VfsdInode *dir, const char *name, VfsdNodeKind kind,
                    mode_t mode, dev_t rdev, const char *link_target)
{
    switch (kind) {
    case VFSD_NODE_SYMLINK:
        return symlinkat(link_target, dir->fd, name);
    case VFSD_NODE_MKDIR:
        return mkdirat(dir->fd, name, mode & 07777);
    default:
        return mknodat(dir->fd, name, mode, rdev);
    }
}

/*
 * With a security label, the node is made under a name of ours, labelled,
 * then renamed to its own name without replacing what may be there: no
 * one sees it unlabelled under its name, and on any error it is removed.
 * Sets errno like the calls it makes.
 */
static int make_labelled(VfsdFs *fs, const VfsdCtx *ctx, VfsdInode *dir,
                         const char *name, VfsdNodeKind kind, mode_t mode,
                         dev_t rdev, const char *link_target)
{
    g_autofree char *tmp = NULL;
    unsigned int attempt = 0;
    int fd, ret, err;

    do {
        g_free(tmp);
        tmp = vfsd_creds_label_tmp_name(attempt);
        ret = make_one(dir, tmp, kind, mode, rdev, link_target);
    } while (ret < 0 && errno == EEXIST && ++attempt < 8);
    if (ret < 0) {
        return -1;
    }
    fd = openat(dir->fd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    ret = fd < 0 ? -errno : vfsd_creds_set_label(fs, ctx, fd);
    if (fd >= 0) {
        close(fd);
    }
    if (ret == 0 && renameat2(dir->fd, tmp, dir->fd, name,
                              RENAME_NOREPLACE) < 0) {
        ret = -errno;
    }
    if (ret < 0) {
        err = -ret;
        unlinkat(dir->fd, tmp, kind == VFSD_NODE_MKDIR ? AT_REMOVEDIR : 0);
        errno = err;
        return -1;
    }
    return 0;
}

static int make_node(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                     const char *name, VfsdNodeKind kind, mode_t mode,
                     dev_t rdev, mode_t umask, const char *link_target,
                     VfsdEntry *e)
{
    int ret;
    g_autoptr(VfsdInode) dir = vfsd_dir_get(fs, parent, &ret);
    VfsdSavedCreds old;
    bool masked = false;

    if (!dir) {
        return ret;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    ret = vfsd_creds_switch(ctx, &old);
    if (ret < 0) {
        return ret;
    }
    if (kind != VFSD_NODE_SYMLINK) {
        masked = vfsd_umask_enter(fs, &mode, umask);
    }
    if (ctx->label_name) {
        ret = make_labelled(fs, ctx, dir, name, kind, mode, rdev,
                            link_target);
    } else {
        ret = make_one(dir, name, kind, mode, rdev, link_target);
    }
    ret = ret < 0 ? -errno : 0;
    vfsd_umask_leave(fs, masked);
    vfsd_creds_restore(&old);
    if (ret < 0) {
        return ret;
    }
    return vfsd_entry_lookup(fs, dir, name, e);
}

/*
 * A symlink when @link_target is set; otherwise whatever mknodat() makes
 * of @mode, so that a file type the host refuses gets the host's errno.
 */
int vfsd_op_mknod(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, dev_t rdev, mode_t umask,
                  const char *link_target, VfsdEntry *e)
{
    return make_node(fs, ctx, parent, name,
                     link_target ? VFSD_NODE_SYMLINK : VFSD_NODE_MKNOD,
                     mode, rdev, umask, link_target, e);
}

int vfsd_op_mkdir(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                  const char *name, mode_t mode, mode_t umask,
                  VfsdEntry *e)
{
    return make_node(fs, ctx, parent, name, VFSD_NODE_MKDIR, mode, 0, umask,
                     NULL, e);
}

int vfsd_op_unlink(VfsdFs *fs, uint64_t parent, const char *name,
                   bool is_dir)
{
    g_autoptr(VfsdInode) dir = vfsd_inode_get(fs, parent);

    if (!dir) {
        return -errno;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (unlinkat(dir->fd, name, is_dir ? AT_REMOVEDIR : 0) < 0) {
        return -errno;
    }
    return 0;
}

int vfsd_op_rename(VfsdFs *fs, uint64_t parent, const char *name,
                   uint64_t newparent, const char *newname, uint32_t flags)
{
    g_autoptr(VfsdInode) dir = vfsd_inode_get(fs, parent);
    g_autoptr(VfsdInode) newdir = NULL;

    if (!dir) {
        return -errno;
    }
    newdir = vfsd_inode_get(fs, newparent);
    if (!newdir) {
        return -errno;
    }
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
        return -EINVAL;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (renameat2(dir->fd, name, newdir->fd, newname, flags) < 0) {
        return -errno;
    }
    return 0;
}

int vfsd_op_link(VfsdFs *fs, uint64_t nodeid, uint64_t newparent,
                 const char *newname, VfsdEntry *e)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    g_autoptr(VfsdInode) dir = NULL;
    char name[32];

    if (!inode) {
        return -errno;
    }
    dir = vfsd_inode_get(fs, newparent);
    if (!dir) {
        return -errno;
    }
    if (inode->type == S_IFDIR) {
        return -EPERM;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (linkat(inode->fd, "", dir->fd, newname, AT_EMPTY_PATH) < 0) {
        if (errno != ENOENT && errno != EPERM) {
            return -errno;
        }
        /* Without CAP_DAC_READ_SEARCH, go through the magic link */
        proc_name(inode, name, sizeof(name));
        if (linkat(fs->proc_self_fd, name, dir->fd, newname,
                   AT_SYMLINK_FOLLOW) < 0) {
            return -errno;
        }
    }
    return vfsd_entry_lookup(fs, dir, newname, e);
}

int vfsd_op_statfs(VfsdFs *fs, uint64_t nodeid, struct statfs *st)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);

    if (!inode) {
        return -errno;
    }
    return fstatfs(inode->fd, st) < 0 ? -errno : 0;
}

int vfsd_op_access(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid, int mask)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    VfsdSavedCreds old;
    char name[32];
    int ret;

    if (!inode) {
        return -errno;
    }
    if (mask & ~(R_OK | W_OK | X_OK)) {
        return -EINVAL;
    }
    if ((mask & W_OK) && fs->opts->readonly) {
        return -EROFS;
    }
    proc_name(inode, name, sizeof(name));
    ret = vfsd_creds_switch(ctx, &old);
    if (ret < 0) {
        return ret;
    }
    ret = faccessat(fs->proc_self_fd, name, mask, AT_EACCESS) < 0 ? -errno : 0;
    vfsd_creds_restore(&old);
    return ret;
}

/*
 * syncfs() needs an fd that is not O_PATH, and only regular files and
 * directories are ever opened: a special inode borrows one the guest
 * knows on the same file system (its parent, at least, while the guest
 * holds the inode).
 */
static VfsdInode *syncfs_stand_in(VfsdFs *fs, VfsdInode *inode)
{
    VfsdInodeStore *st = &fs->inodes;
    GHashTableIter it;
    VfsdInode *other;
    uint64_t found = 0;

    g_mutex_lock(&st->lock);
    g_hash_table_iter_init(&it, st->by_nodeid);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&other)) {
        if ((other->type == S_IFDIR || other->type == S_IFREG) &&
            other->dev == inode->dev && other->mnt_id == inode->mnt_id) {
            found = other->nodeid;
            break;
        }
    }
    g_mutex_unlock(&st->lock);
    /* Not under the table's lock: a handle inode is opened to be used */
    return found ? vfsd_inode_get(fs, found) : NULL;
}

int vfsd_op_syncfs(VfsdFs *fs, uint64_t nodeid)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    int fd, ret = 0;

    if (!inode) {
        return -errno;
    }
    if (inode->type != S_IFREG && inode->type != S_IFDIR) {
        VfsdInode *stand_in = syncfs_stand_in(fs, inode);

        if (!stand_in) {
            return -ENXIO;
        }
        vfsd_inode_unref(inode);
        inode = stand_in;
    }
    fd = vfsd_fd_open(fs, inode, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        return fd;
    }
    if (syncfs(fd) < 0) {
        ret = -errno;
    }
    vfsd_fd_close(fs, fd);
    return ret;
}
