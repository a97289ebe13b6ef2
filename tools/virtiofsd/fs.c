/*
 * virtiofsd: file system state shared by the operations
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
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "broker.h"
#include "dax.h"
#include "fd.h"
#include "inode.h"
#include "intr.h"
#include "log.h"

bool vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                  int proc_self_fd, char **err)
{
    memset(fs, 0, sizeof(*fs));
    fs->opts = opts;
    fs->stats = opts->stats ? vfsd_stats_new() : NULL;
    fs->proc_self_fd = proc_self_fd;
    vfsd_inodes_init(&fs->inodes);
    g_mutex_init(&fs->handles_lock);
    g_mutex_init(&fs->umask_lock);
    fs->handles = g_hash_table_new(g_int64_hash, g_int64_equal);
    fs->next_fh = 1;
    if (!vfsd_intr_init(fs, err)) {
        return false;
    }

    if (!vfsd_fd_limit_init(fs, err)) {
        return false;
    }

    switch (opts->cache) {
    case VFSD_CACHE_NEVER:
        fs->entry_timeout = fs->attr_timeout = 0;
        break;
    case VFSD_CACHE_AUTO:
        fs->entry_timeout = fs->attr_timeout = 1;
        break;
    case VFSD_CACHE_METADATA:
    case VFSD_CACHE_ALWAYS:
        fs->entry_timeout = fs->attr_timeout = 86400;
        break;
    case VFSD_CACHE_ADAPTIVE:
        /* Not used: each reply's comes from vfsd_fs_timeout() */
        fs->entry_timeout = fs->attr_timeout = opts->adaptive_min;
        break;
    }

    if (!vfsd_inodes_set_root(fs, root_fd)) {
        *err = g_strdup("the shared directory is not a directory");
        return false;
    }
    if (vfsd_options_open_by_handle(opts)) {
        g_autofree char *why = NULL;

        fs->broker = vfsd_broker_spawn(root_fd, proc_self_fd, opts->seccomp,
                                       &why);
        if (!fs->broker) {
            vfsd_info("no process to open file handles: %s", why);
        }
    }
    return vfsd_inodes_handles_init(fs, root_fd, err);
}

/*
 * How long the guest may trust what it learns now of an inode the host
 * last changed at @ctime.  With --cache=adaptive this is, as an NFS
 * client's attribute cache does it, a fraction of the time the inode has
 * gone unchanged: a file nobody touched for an hour is unlikely to
 * change in the next minute, one written a second ago may be written
 * again at once.  ctime, not mtime: tar and cp -p set mtime to the past,
 * and a chmod or rename is a change too.  A ctime in the future (the
 * host's clock stepped back) gets the shortest timeout.  The longest,
 * --adaptive-timeouts' MAX, bounds how late the guest sees any change.
 */
double vfsd_fs_timeout(VfsdFs *fs, const struct timespec *ctime)
{
    const VfsdOptions *o = fs->opts;
    struct timespec now;
    double age, t;

    if (o->cache != VFSD_CACHE_ADAPTIVE) {
        return fs->attr_timeout;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    age = (double)(now.tv_sec - ctime->tv_sec) +
          (now.tv_nsec - ctime->tv_nsec) / 1e9;
    t = age * o->adaptive_fraction;
    return t < o->adaptive_min ? o->adaptive_min :
           t > o->adaptive_max ? o->adaptive_max : t;
}

/*
 * How long the guest may trust @attr.  With FUSE_HANDLE_KILLPRIV_V2 the
 * setuid and setgid bits of a regular file go on the host when a guest
 * user writes it, but the guest keeps its own copy of the mode across a
 * write (it only drops size and times; Linux 6.12 and 7.2 alike), and a
 * stat() would show the bits for as long as the attributes are trusted.
 * Such files are rare enough to have their attributes asked for each
 * time (fstests generic/355).
 */
double vfsd_fs_attr_timeout(VfsdFs *fs, const VfsdAttr *attr)
{
    if ((fs->conn.flags & FUSE_HANDLE_KILLPRIV_V2) &&
        S_ISREG(attr->mode) && (attr->mode & (S_ISUID | S_ISGID))) {
        return 0;
    }
    return vfsd_fs_timeout(fs, &attr->ctime);
}

/*
 * For a name in @parent: the name is as stable as the directory that
 * holds it (a name appears, goes or moves by changing the directory)
 * and the inode it names.  @parent's ctime comes from the host now; if
 * it cannot be read, the shortest timeout.
 */
double vfsd_fs_entry_timeout(VfsdFs *fs, VfsdInode *parent,
                             const struct timespec *child_ctime)
{
    struct statx stx;
    struct timespec ctime;
    double t;

    if (fs->opts->cache != VFSD_CACHE_ADAPTIVE) {
        return fs->entry_timeout;
    }
    if (vfsd_statx(parent->fd, &stx) < 0) {
        return fs->opts->adaptive_min;
    }
    ctime.tv_sec = stx.stx_ctime.tv_sec;
    ctime.tv_nsec = stx.stx_ctime.tv_nsec;
    t = vfsd_fs_timeout(fs, &ctime);
    if (child_ctime) {
        t = MIN(t, vfsd_fs_timeout(fs, child_ctime));
    }
    return t;
}

void vfsd_fs_reset(VfsdFs *fs)
{
    GHashTableIter it;
    VfsdHandle *h;
    GPtrArray *open = g_ptr_array_new();
    unsigned int i;

    if (fs->dax) {
        vfsd_dax_reset(fs);
    }

    g_mutex_lock(&fs->handles_lock);
    g_hash_table_iter_init(&it, fs->handles);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&h)) {
        g_ptr_array_add(open, h);
    }
    g_hash_table_remove_all(fs->handles);
    g_mutex_unlock(&fs->handles_lock);
    for (i = 0; i < open->len; i++) {
        vfsd_handle_put(g_ptr_array_index(open, i));
    }
    g_ptr_array_free(open, true);

    vfsd_inodes_forget_all(fs);
    fs->conn.initialized = false;
    fs->conn.flags = 0;
}

void vfsd_fs_cleanup(VfsdFs *fs)
{
    vfsd_fs_reset(fs);
    if (fs->stats) {
        vfsd_stats_report(fs->stats);
        vfsd_stats_free(fs->stats);
        fs->stats = NULL;
    }
    vfsd_inodes_destroy(fs);
    vfsd_inodes_handles_cleanup(fs);
    vfsd_broker_free(fs->broker);
    fs->broker = NULL;
    g_hash_table_destroy(fs->handles);
    g_mutex_clear(&fs->handles_lock);
    g_mutex_clear(&fs->umask_lock);
    vfsd_intr_cleanup(fs);
}

/*
 * The guest's attributes of @inode, whose host attributes are @stx, in an
 * entry reply (@entry) or another.  The DAX policy decides whether the
 * guest maps the file; it has no side effect on the window.
 */
static void attr_from_statx(VfsdFs *fs, VfsdInode *inode,
                            const struct statx *stx, VfsdAttr *attr,
                            bool entry)
{
    memset(attr, 0, sizeof(*attr));
    attr->ino = stx->stx_ino;
    attr->size = stx->stx_size;
    attr->blocks = stx->stx_blocks;
    attr->atime.tv_sec = stx->stx_atime.tv_sec;
    attr->atime.tv_nsec = stx->stx_atime.tv_nsec;
    attr->mtime.tv_sec = stx->stx_mtime.tv_sec;
    attr->mtime.tv_nsec = stx->stx_mtime.tv_nsec;
    attr->ctime.tv_sec = stx->stx_ctime.tv_sec;
    attr->ctime.tv_nsec = stx->stx_ctime.tv_nsec;
    attr->mode = stx->stx_mode;
    attr->nlink = stx->stx_nlink;
    attr->uid = vfsd_idmap_to_guest(&fs->opts->uid_map, stx->stx_uid);
    attr->gid = vfsd_idmap_to_guest(&fs->opts->gid_map, stx->stx_gid);
    attr->rdev = makedev(stx->stx_rdev_major, stx->stx_rdev_minor);
    attr->blksize = stx->stx_blksize;
    attr->dax = vfsd_dax_wanted(fs, inode, stx, entry);
}

int vfsd_fill_attr(VfsdFs *fs, VfsdInode *inode, VfsdAttr *attr)
{
    struct statx stx;
    int ret = vfsd_statx(inode->fd, &stx);

    if (ret < 0) {
        return ret;
    }
    attr_from_statx(fs, inode, &stx, attr, false);
    return 0;
}

#ifndef STATX_ATTR_WRITE_ATOMIC
#define STATX_ATTR_WRITE_ATOMIC 0x00400000
#endif

/*
 * Attributes the host's VFS sets about the host's view, not the file's:
 * whether it is a mount point or an automount trigger there (the guest's
 * mounts are its own), whether the host accesses it through DAX (the
 * guest maps it through the window or not by FUSE_ATTR_DAX), whether the
 * host can write it atomically (we have no atomic write for the guest).
 * Telling the guest would make it believe what is true of the host only.
 */
#define VFSD_STATX_HOST_ATTRS (STATX_ATTR_MOUNT_ROOT | STATX_ATTR_AUTOMOUNT | \
                               STATX_ATTR_DAX | STATX_ATTR_WRITE_ATOMIC)

int vfsd_fill_statx(VfsdFs *fs, VfsdInode *inode, int sync_flags,
                    uint32_t mask, VfsdStatx *sx)
{
    struct statx stx;

    /*
     * The basic stats always, so that the guest can refresh all it caches
     * of the inode; of the rest, what it asked for and the reply can
     * carry.  A reserved bit goes to the host, whose EINVAL it gets.
     */
    mask = (mask & (STATX_BTIME | STATX__RESERVED)) | STATX_BASIC_STATS;
    if (statx(inode->fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | sync_flags,
              mask, &stx) < 0) {
        return -errno;
    }
    memset(sx, 0, sizeof(*sx));
    attr_from_statx(fs, inode, &stx, &sx->attr, false);
    sx->mask = stx.stx_mask & (STATX_BASIC_STATS | STATX_BTIME);
    if (sx->mask & STATX_BTIME) {
        sx->btime.tv_sec = stx.stx_btime.tv_sec;
        sx->btime.tv_nsec = stx.stx_btime.tv_nsec;
    }
    sx->attributes_mask = stx.stx_attributes_mask & ~VFSD_STATX_HOST_ATTRS;
    sx->attributes = stx.stx_attributes & sx->attributes_mask;
    sx->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    return 0;
}

int vfsd_entry_lookup(VfsdFs *fs, VfsdInode *parent, const char *name,
                      VfsdEntry *e)
{
    int fd, ret;

    if (!vfsd_fd_reserve(fs)) {
        vfsd_guest_error("too many open files, lookup refused");
        return -ENFILE;
    }
    fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        vfsd_fd_release(fs);
        return ret;
    }
    return vfsd_entry_from_fd(fs, parent, fd, e);
}

/* @name in @parent by name, as an O_PATH open of it would find it */
static int stat_name(VfsdInode *parent, const char *name, struct statx *stx)
{
    return statx(parent->fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
                 STATX_BASIC_STATS | STATX_MNT_ID, stx);
}

/* The entry of @inode, a lookup in @parent, whose attributes are @stx */
static void entry_fill(VfsdFs *fs, VfsdInode *parent, VfsdInode *inode,
                       const struct statx *stx, VfsdEntry *e)
{
    memset(e, 0, sizeof(*e));
    e->nodeid = inode->nodeid;
    attr_from_statx(fs, inode, stx, &e->attr, true);
    /* The guest may touch what the size it learns covers */
    vfsd_dax_size_seen(fs, inode, stx->stx_size);
    e->attr.submount = fs->opts->announce_submounts &&
                       inode->mnt_id != parent->mnt_id;
    e->attr_timeout = vfsd_fs_attr_timeout(fs, &e->attr);
    e->entry_timeout = vfsd_fs_entry_timeout(fs, parent, &e->attr.ctime);
}

int vfsd_entry_from_fd(VfsdFs *fs, VfsdInode *parent, int fd, VfsdEntry *e)
{
    g_autoptr(VfsdInode) inode = NULL;
    struct statx stx;
    int ret;

    ret = vfsd_statx(fd, &stx);
    if (ret < 0) {
        vfsd_fd_close(fs, fd);
        return ret;
    }
    inode = vfsd_inode_intern(fs, fd, &stx);
    if (!inode) {
        return -errno;
    }
    entry_fill(fs, parent, inode, &stx, e);
    return 0;
}

/*
 * A directory entry's name and number come from the listing: an inode
 * the guest knows already by that number is confirmed by one statx() of
 * the name (AT_NO_AUTOMOUNT: as an O_PATH open does not trigger one),
 * where a lookup opens the name, reads it and closes the fd again.
 * Whatever that does not settle goes the lookup's way.
 */
int vfsd_entry_lookup_listed(VfsdFs *fs, VfsdInode *parent, const char *name,
                             ino_t ino, VfsdEntry *e)
{
    g_autoptr(VfsdInode) inode = NULL;
    struct statx stx;
    uint64_t epoch;

    epoch = vfsd_inode_find(fs, parent->dev, ino, parent->mnt_id);
    if (epoch && stat_name(parent, name, &stx) == 0) {
        inode = vfsd_inode_intern_known(fs, epoch, &stx);
    }
    if (!inode) {
        return vfsd_entry_lookup(fs, parent, name, e);
    }
    g_atomic_int_inc(&fs->listed_known);
    entry_fill(fs, parent, inode, &stx, e);
    return 0;
}

/*
 * LOOKUP of a name: in a directory whose names lately led to inodes the
 * guest knows (a guest revalidating what it holds once its entries time
 * out), first as vfsd_entry_lookup_listed() confirms an entry, one
 * statx() of the name, which also answers for a name that is not there;
 * elsewhere (a guest walking a tree it never saw) opening it at once,
 * which a new inode needs anyway.  Each outcome moves the directory's
 * score (VfsdInode.lookups_known) towards one way or the other.
 */
int vfsd_entry_lookup_name(VfsdFs *fs, VfsdInode *parent, const char *name,
                           VfsdEntry *e)
{
    g_autoptr(VfsdInode) inode = NULL;
    uint64_t epoch = vfsd_inodes_epoch(fs);
    int score = g_atomic_int_get(&parent->lookups_known);
    struct statx stx;
    int ret;

    if (score >= VFSD_LOOKUPS_KNOWN_MIN) {
        if (stat_name(parent, name, &stx) < 0) {
            ret = -errno;
            /* Any other error is the open's to give */
            if (ret == -ENOENT) {
                return ret;
            }
        } else {
            inode = vfsd_inode_intern_known(fs, epoch, &stx);
        }
        if (inode) {
            g_atomic_int_inc(&fs->looked_up_known);
            if (score < VFSD_LOOKUPS_KNOWN_MAX) {
                g_atomic_int_set(&parent->lookups_known, score + 1);
            }
            entry_fill(fs, parent, inode, &stx, e);
            return 0;
        }
    }
    ret = vfsd_entry_lookup(fs, parent, name, e);
    if (ret == 0) {
        if (e->nodeid < epoch) {
            score = MIN(score + 1, VFSD_LOOKUPS_KNOWN_MAX);
        } else {
            score = MAX(score - 1, 0);
        }
        g_atomic_int_set(&parent->lookups_known, score);
    }
    return ret;
}

/*
 * The directory @nodeid names, with a reference, for a request that works
 * in it; NULL with the guest's error in *@err: the inode's, or ENOTDIR.
 */
VfsdInode *vfsd_dir_get(VfsdFs *fs, uint64_t nodeid, int *err)
{
    VfsdInode *dir = vfsd_inode_get(fs, nodeid);

    if (!dir) {
        *err = -errno;
        return NULL;
    }
    if (dir->type != S_IFDIR) {
        vfsd_inode_unref(dir);
        *err = -ENOTDIR;
        return NULL;
    }
    return dir;
}

/*
 * Names come from the guest: one path component, never "." or "..", so
 * that an *at() call on the parent's fd cannot leave the parent.  A
 * Linux guest never sends such names (its VFS resolves "." and ".."
 * itself); they are refused with EINVAL.  Length is not checked here:
 * the host's ENAMETOOLONG is the answer the guest must see.
 */
bool vfsd_valid_name(const char *name)
{
    return name[0] && strcmp(name, ".") && strcmp(name, "..") &&
           !strchr(name, '/');
}

/* A handle holding @fd and a reference to @inode; not in the table yet */
static VfsdHandle *handle_alloc(VfsdFs *fs, int fd, int flags,
                                VfsdInode *inode, bool is_dir)
{
    VfsdHandle *h = g_new0(VfsdHandle, 1);

    h->fs = fs;
    h->fd = fd;
    h->flags = flags;
    h->inode = inode;
    h->is_dir = is_dir;
    h->refcount = 1;
    g_mutex_init(&h->lock);
    vfsd_inode_ref(inode);
    return h;
}

uint64_t vfsd_handle_new(VfsdFs *fs, int fd, int flags, VfsdInode *inode,
                         bool is_dir)
{
    VfsdHandle *h = handle_alloc(fs, fd, flags, inode, is_dir);

    g_mutex_lock(&fs->handles_lock);
    h->fh = fs->next_fh++;
    g_hash_table_insert(fs->handles, &h->fh, h);
    g_mutex_unlock(&fs->handles_lock);
    return h->fh;
}

VfsdHandle *vfsd_handle_get(VfsdFs *fs, uint64_t fh, bool is_dir)
{
    VfsdHandle *h;

    g_mutex_lock(&fs->handles_lock);
    h = g_hash_table_lookup(fs->handles, &fh);
    if (h && h->is_dir == is_dir) {
        g_atomic_int_inc(&h->refcount);
    } else {
        h = NULL;
    }
    g_mutex_unlock(&fs->handles_lock);
    if (!h) {
        vfsd_guest_error("request for unknown %s handle %" G_GUINT64_FORMAT,
                         is_dir ? "directory" : "file", fh);
    }
    return h;
}

void vfsd_handle_put(VfsdHandle *h)
{
    if (!h || !g_atomic_int_dec_and_test(&h->refcount)) {
        return;
    }
    vfsd_fd_close(h->fs, h->fd);
    vfsd_inode_unref(h->inode);
    g_mutex_clear(&h->lock);
    g_free(h->dents);
    g_free(h);
}

void vfsd_handle_close(VfsdFs *fs, uint64_t fh, bool is_dir)
{
    VfsdHandle *h;

    g_mutex_lock(&fs->handles_lock);
    h = g_hash_table_lookup(fs->handles, &fh);
    if (h && h->is_dir == is_dir) {
        g_hash_table_remove(fs->handles, &fh);
    } else {
        h = NULL;
    }
    g_mutex_unlock(&fs->handles_lock);
    if (h) {
        vfsd_handle_put(h);
    } else {
        vfsd_guest_error("release of unknown handle %" G_GUINT64_FORMAT, fh);
    }
}

GPtrArray *vfsd_handles_snapshot(VfsdFs *fs)
{
    GPtrArray *all = g_ptr_array_new_with_free_func(
        (GDestroyNotify)vfsd_handle_put);
    GHashTableIter it;
    VfsdHandle *h;

    g_mutex_lock(&fs->handles_lock);
    g_hash_table_iter_init(&it, fs->handles);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&h)) {
        g_atomic_int_inc(&h->refcount);
        g_ptr_array_add(all, h);
    }
    g_mutex_unlock(&fs->handles_lock);
    return all;
}

bool vfsd_handle_restore(VfsdFs *fs, uint64_t fh, int fd, int flags,
                         VfsdInode *inode, bool is_dir)
{
    VfsdHandle *h;
    bool ok;

    g_mutex_lock(&fs->handles_lock);
    ok = fh && !g_hash_table_contains(fs->handles, &fh);
    if (ok) {
        h = handle_alloc(fs, fd, flags, inode, is_dir);
        h->fh = fh;
        g_hash_table_insert(fs->handles, &h->fh, h);
        /* The guest's handles are never handed out again */
        fs->next_fh = MAX(fs->next_fh, fh + 1);
    }
    g_mutex_unlock(&fs->handles_lock);
    return ok;
}
