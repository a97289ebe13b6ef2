/*
 * virtiofsd: the inodes the guest knows
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "inode.h"
#include "fd.h"
#include "log.h"

static guint inode_key_hash(gconstpointer p)
{
    const VfsdInode *i = p;

    return g_int64_hash(&(gint64){ i->ino }) ^
           g_int64_hash(&(gint64){ i->dev }) ^
           g_int64_hash(&(gint64){ i->mnt_id });
}

static gboolean inode_key_equal(gconstpointer a, gconstpointer b)
{
    const VfsdInode *x = a, *y = b;

    return x->ino == y->ino && x->dev == y->dev && x->mnt_id == y->mnt_id;
}

void vfsd_inodes_init(VfsdInodeStore *st)
{
    g_mutex_init(&st->lock);
    st->by_nodeid = g_hash_table_new(g_int64_hash, g_int64_equal);
    st->by_key = g_hash_table_new(inode_key_hash, inode_key_equal);
    st->next_nodeid = FUSE_ROOT_ID + 1;
    st->root = NULL;
    st->lost = 0;
}

void vfsd_inode_ref(VfsdInode *inode)
{
    g_atomic_int_inc(&inode->refcount);
}

void vfsd_inode_unref(VfsdInode *inode)
{
    if (!inode || !g_atomic_int_dec_and_test(&inode->refcount)) {
        return;
    }
    vfsd_inode_plocks_drop(inode, 0);
    if (inode->plocks) {
        g_hash_table_destroy(inode->plocks);
    }
    g_mutex_clear(&inode->plock_lock);
    /* Plain data, and nothing of dax.c holds the inode any more */
    g_free(inode->dax);
    if (inode->fd >= 0) {
        vfsd_fd_close(inode->fs, inode->fd);
    }
    g_free(inode);
}

VfsdInode *vfsd_inode_get(VfsdFs *fs, uint64_t nodeid)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_nodeid, &nodeid);
    if (inode && inode->lost) {
        inode = NULL;
    } else if (inode) {
        vfsd_inode_ref(inode);
    }
    g_mutex_unlock(&st->lock);
    return inode;
}

/* Drops the table's reference once the guest forgot the inode */
static void inode_unhash(VfsdInodeStore *st, VfsdInode *inode)
{
    g_hash_table_remove(st->by_nodeid, &inode->nodeid);
    /* A lost inode may share its key with a later one, which stays */
    if (g_hash_table_lookup(st->by_key, inode) == inode) {
        g_hash_table_remove(st->by_key, inode);
    }
    if (inode->lost) {
        g_atomic_int_add(&st->lost, -1);
    }
}

/*
 * Drops the fd of one lock owner (0: all of them), which releases its
 * locks.
 */
void vfsd_inode_plocks_drop(VfsdInode *inode, uint64_t owner)
{
    GHashTableIter it;
    gpointer fd;

    g_mutex_lock(&inode->plock_lock);
    if (inode->plocks && owner) {
        fd = g_hash_table_lookup(inode->plocks, &owner);
        if (fd) {
            vfsd_fd_close(inode->fs, GPOINTER_TO_INT(fd) - 1);
            g_hash_table_remove(inode->plocks, &owner);
        }
    } else if (inode->plocks) {
        g_hash_table_iter_init(&it, inode->plocks);
        while (g_hash_table_iter_next(&it, NULL, &fd)) {
            vfsd_fd_close(inode->fs, GPOINTER_TO_INT(fd) - 1);
            g_hash_table_iter_remove(&it);
        }
    }
    g_mutex_unlock(&inode->plock_lock);
}

VfsdInode *vfsd_inode_intern(VfsdFs *fs, int fd, const struct statx *stx)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode key, *inode, *fresh;

    key.dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
    key.ino = stx->stx_ino;
    key.mnt_id = stx->stx_mnt_id;

    fresh = g_new0(VfsdInode, 1);
    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_key, &key);
    if (inode) {
        inode->nlookup++;
        vfsd_inode_ref(inode);
    } else {
        inode = fresh;
        fresh = NULL;
        inode->fs = fs;
        g_mutex_init(&inode->plock_lock);
        inode->nodeid = st->next_nodeid++;
        inode->fd = fd;
        fd = -1;
        inode->dev = key.dev;
        inode->ino = key.ino;
        inode->mnt_id = key.mnt_id;
        inode->type = stx->stx_mode & S_IFMT;
        /* One reference for the table, one for us */
        inode->refcount = 2;
        inode->nlookup = 1;
        g_hash_table_insert(st->by_nodeid, &inode->nodeid, inode);
        g_hash_table_insert(st->by_key, inode, inode);
    }
    g_mutex_unlock(&st->lock);

    if (fd >= 0) {
        vfsd_fd_close(fs, fd);
    }
    g_free(fresh);
    return inode;
}

int vfsd_statx(int fd, struct statx *stx)
{
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
              STATX_BASIC_STATS | STATX_MNT_ID, stx) < 0) {
        return -errno;
    }
    return 0;
}

void vfsd_inode_forget(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode;
    bool drop = false;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_nodeid, &nodeid);
    if (inode && inode != st->root) {
        if (nlookup > inode->nlookup) {
            vfsd_guest_error("FORGET of %" PRIu64 " lookups of inode %" PRIu64
                             " that has %" PRIu64, nlookup, nodeid,
                             inode->nlookup);
            nlookup = inode->nlookup;
        }
        inode->nlookup -= nlookup;
        if (inode->nlookup == 0) {
            inode_unhash(st, inode);
            drop = true;
        }
    } else if (!inode) {
        vfsd_guest_error("FORGET of unknown inode %" PRIu64, nodeid);
    }
    g_mutex_unlock(&st->lock);

    if (drop) {
        vfsd_inode_unref(inode);
    }
}

/* FUSE_DESTROY or a disconnect: the guest forgot everything but the root */
void vfsd_inodes_forget_all(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    GHashTableIter it;
    GPtrArray *dead = g_ptr_array_new();
    VfsdInode *inode;
    unsigned int i;

    g_mutex_lock(&st->lock);
    g_hash_table_iter_init(&it, st->by_nodeid);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&inode)) {
        if (inode != st->root) {
            g_ptr_array_add(dead, inode);
        }
    }
    for (i = 0; i < dead->len; i++) {
        inode_unhash(st, g_ptr_array_index(dead, i));
    }
    g_mutex_unlock(&st->lock);

    for (i = 0; i < dead->len; i++) {
        vfsd_inode_unref(g_ptr_array_index(dead, i));
    }
    g_ptr_array_free(dead, true);
}

void vfsd_inodes_destroy(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *root = st->root;

    vfsd_inodes_forget_all(fs);
    if (root) {
        g_mutex_lock(&st->lock);
        inode_unhash(st, root);
        st->root = NULL;
        g_mutex_unlock(&st->lock);
        vfsd_inode_unref(root);
    }
    g_hash_table_destroy(st->by_nodeid);
    g_hash_table_destroy(st->by_key);
    g_mutex_clear(&st->lock);
}

/* The root is never forgotten: the guest cannot send FORGET for it */
bool vfsd_inodes_set_root(VfsdFs *fs, int fd)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *root;
    struct statx stx;

    if (vfsd_statx(fd, &stx) < 0 || !S_ISDIR(stx.stx_mode)) {
        return false;
    }
    root = g_new0(VfsdInode, 1);
    root->fs = fs;
    g_mutex_init(&root->plock_lock);
    root->nodeid = FUSE_ROOT_ID;
    root->fd = fd;
    root->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    root->ino = stx.stx_ino;
    root->mnt_id = stx.stx_mnt_id;
    root->type = S_IFDIR;
    root->refcount = 1;
    root->nlookup = 1;
    g_atomic_int_inc(&fs->fds_open);
    g_mutex_lock(&st->lock);
    st->root = root;
    g_hash_table_insert(st->by_nodeid, &root->nodeid, root);
    g_hash_table_insert(st->by_key, root, root);
    g_mutex_unlock(&st->lock);
    return true;
}

GPtrArray *vfsd_inodes_snapshot(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    GPtrArray *all = g_ptr_array_new_with_free_func(
        (GDestroyNotify)vfsd_inode_unref);
    GHashTableIter it;
    VfsdInode *inode;

    g_mutex_lock(&st->lock);
    g_hash_table_iter_init(&it, st->by_nodeid);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&inode)) {
        if (inode != st->root) {
            vfsd_inode_ref(inode);
            g_ptr_array_add(all, inode);
        }
    }
    g_mutex_unlock(&st->lock);
    return all;
}

bool vfsd_inode_restore(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup,
                        int fd, const struct statx *stx, mode_t type)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode = g_new0(VfsdInode, 1);
    bool ok;

    inode->fs = fs;
    inode->nodeid = nodeid;
    inode->fd = fd;
    inode->nlookup = nlookup;
    inode->refcount = 1;
    inode->type = type;
    inode->lost = fd < 0;
    if (fd >= 0) {
        inode->dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
        inode->ino = stx->stx_ino;
        inode->mnt_id = stx->stx_mnt_id;
        inode->type = stx->stx_mode & S_IFMT;
    }

    g_mutex_lock(&st->lock);
    ok = nodeid != FUSE_ROOT_ID &&
         !g_hash_table_contains(st->by_nodeid, &nodeid) &&
         (fd < 0 || !g_hash_table_contains(st->by_key, inode));
    if (ok) {
        g_mutex_init(&inode->plock_lock);
        g_hash_table_insert(st->by_nodeid, &inode->nodeid, inode);
        if (fd >= 0) {
            g_hash_table_insert(st->by_key, inode, inode);
        } else {
            g_atomic_int_inc(&st->lost);
        }
        /* Nodeids the guest holds are never handed out again */
        st->next_nodeid = MAX(st->next_nodeid, nodeid + 1);
    }
    g_mutex_unlock(&st->lock);
    if (!ok) {
        g_free(inode);
    }
    return ok;
}

bool vfsd_inode_lost(VfsdFs *fs, uint64_t nodeid)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode;
    bool lost;

    /* No lookup per request unless a migration lost some */
    if (!g_atomic_int_get(&st->lost)) {
        return false;
    }
    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_nodeid, &nodeid);
    lost = inode && inode->lost;
    g_mutex_unlock(&st->lock);
    return lost;
}

void vfsd_inode_set_lost(VfsdFs *fs, uint64_t nodeid)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_nodeid, &nodeid);
    if (inode && !inode->lost && inode != st->root) {
        inode->lost = true;
        /* The file may be found again by a later lookup, as a new inode */
        g_hash_table_remove(st->by_key, inode);
        g_atomic_int_inc(&st->lost);
    }
    g_mutex_unlock(&st->lock);
}
