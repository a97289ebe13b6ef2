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
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "broker.h"
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
    g_mutex_init(&st->idle_lock);
    g_queue_init(&st->idle);
    st->idle_max = 0;
    st->mount_handles = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                              g_free, NULL);
}

/* The handle of @fd, or NULL with errno set */
static struct file_handle *handle_of(int fd, int *mnt_id)
{
    g_autofree struct file_handle *fh = g_malloc(sizeof(*fh) +
                                                 MAX_HANDLE_SZ);
    size_t size;

    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fd, "", fh, mnt_id, AT_EMPTY_PATH) < 0) {
        return NULL;
    }
    size = sizeof(*fh) + fh->handle_bytes;
    return g_realloc(g_steal_pointer(&fh), size);
}

/*
 * Inodes held by file handle: the O_PATH fd is opened from the handle by
 * the first user, through the broker, and kept after the last one on the
 * idle list, so that an inode only the guest's cache remembers costs no
 * fd once the list has moved on.  A user is whoever took the inode with
 * vfsd_inode_get() or vfsd_inode_ref(); the table's own reference is not
 * one.  fds_open counts the fds of inodes with users, not idle ones:
 * those are the daemon's cache, bounded by idle_max on its own.
 */
/*
 * Called with @inode's fd_lock held: takes it off the idle list, where it
 * was; whether it was.  The list's reference then passes to the caller.
 */
static bool inode_idle_take(VfsdInodeStore *st, VfsdInode *inode)
{
    bool was_idle;

    g_mutex_lock(&st->idle_lock);
    was_idle = inode->idle;
    if (was_idle) {
        g_queue_unlink(&st->idle, &inode->idle_link);
        inode->idle = false;
    }
    g_mutex_unlock(&st->idle_lock);
    return was_idle;
}

static int inode_fd_hold(VfsdInode *inode)
{
    VfsdFs *fs = inode->fs;
    VfsdInodeStore *st = &fs->inodes;
    bool was_idle = false;
    int fd, ret = 0;

    if (!inode->by_handle) {
        return 0;
    }
    g_mutex_lock(&inode->fd_lock);
    if (inode->fd_users == 0) {
        if (!vfsd_fd_reserve(fs)) {
            ret = -ENFILE;
        } else if (inode->fd >= 0) {
            /* Idle, or taken off the list by an eviction not yet done */
            was_idle = inode_idle_take(st, inode);
        } else {
            fd = vfsd_broker_open(fs->broker, inode->broker_id);
            if (fd < 0) {
                /* ESTALE for a file deleted meanwhile: the guest's answer */
                ret = fd;
                vfsd_fd_release(fs);
            } else {
                inode->fd = fd;
                g_atomic_int_inc(&fs->handles_opened);
            }
        }
    }
    if (ret == 0) {
        inode->fd_users++;
    }
    g_mutex_unlock(&inode->fd_lock);
    if (was_idle) {
        /* The list's reference; the caller holds another */
        g_atomic_int_add(&inode->refcount, -1);
    }
    return ret;
}

static void inode_drop(VfsdInode *inode);

/*
 * Called with @inode's fd_lock held: closes the fd of a handle inode
 * nobody uses.  The broker learns of the inode only now, from the fd
 * about to go (the last the daemon holds of it), so that an inode whose
 * fd never goes costs no message to another process; and our own copy
 * of its handle, which tells it from a later file with its number once
 * nothing keeps it open, is made now too.  @known: the guest still
 * knows it (else there is nothing to open again).  Where the broker
 * cannot take it (a mount whose root is no directory), or the file has
 * no handle after all, the inode keeps its fd, off the idle list, for as
 * long as the guest knows it.
 */
static void inode_fd_give_up_locked(VfsdInode *inode, bool known)
{
    VfsdFs *fs = inode->fs;
    int ret, mnt_id;

    if (known && !inode->handle) {
        /* Made only now that it is needed: see vfsd_inode_intern() */
        inode->handle = handle_of(inode->fd, &mnt_id);
        if (!inode->handle) {
            vfsd_debug("inode %" PRIu64 " keeps its fd: no handle: %s",
                       inode->nodeid, strerror(errno));
            return;
        }
    }
    if (known && !inode->broker_id) {
        ret = vfsd_broker_hand_over(fs->broker, fs->proc_self_fd, inode->fd,
                                    inode->mnt_id, &inode->broker_id);
        if (ret < 0) {
            vfsd_debug("inode %" PRIu64 " keeps its fd: %s", inode->nodeid,
                       strerror(-ret));
            return;
        }
    } else {
        close(inode->fd);
    }
    inode->fd = -1;
}

/* Closes the fd of @inode, taken off the idle list, unless used again */
static void inode_idle_close(VfsdInode *inode, bool known)
{
    g_mutex_lock(&inode->fd_lock);
    if (inode->by_handle && inode->fd_users == 0 && !inode->idle &&
        inode->fd >= 0) {
        inode_fd_give_up_locked(inode, known);
    }
    g_mutex_unlock(&inode->fd_lock);
    inode_drop(inode);
}

static void inode_fd_let_go(VfsdInode *inode)
{
    VfsdInodeStore *st = &inode->fs->inodes;
    VfsdInode *victim = NULL;
    bool queued;
    GList *head;

    if (!inode->by_handle) {
        return;
    }
    g_mutex_lock(&inode->fd_lock);
    g_assert(inode->fd_users > 0);
    if (--inode->fd_users == 0) {
        vfsd_fd_release(inode->fs);
        g_mutex_lock(&st->idle_lock);
        queued = st->idle_max != 0;
        if (queued) {
            g_atomic_int_inc(&inode->refcount);
            g_queue_push_tail_link(&st->idle, &inode->idle_link);
            inode->idle = true;
            if (st->idle.length > st->idle_max) {
                head = g_queue_pop_head_link(&st->idle);
                victim = head->data;
                victim->idle = false;
            }
        }
        g_mutex_unlock(&st->idle_lock);
        /* Not under idle_lock, a leaf: it may talk to the broker */
        if (!queued) {
            inode_fd_give_up_locked(inode, true);
        }
    }
    g_mutex_unlock(&inode->fd_lock);
    /* Not under our fd_lock: it takes the victim's */
    if (victim) {
        inode_idle_close(victim, true);
    }
}

/*
 * The guest forgot @inode: its fd goes now rather than when the idle
 * list gets to it.  The caller holds a reference, so this never drops
 * the last one.
 */
static void inode_idle_cancel(VfsdInode *inode)
{
    VfsdInodeStore *st = &inode->fs->inodes;
    bool was_idle;

    if (!inode->by_handle) {
        return;
    }
    g_mutex_lock(&inode->fd_lock);
    was_idle = inode_idle_take(st, inode);
    g_mutex_unlock(&inode->fd_lock);
    if (was_idle) {
        inode_idle_close(inode, false);
    }
}

/* Another user of an inode the caller uses, so its fd is open already */
void vfsd_inode_ref(VfsdInode *inode)
{
    g_atomic_int_inc(&inode->refcount);
    if (inode->by_handle) {
        g_mutex_lock(&inode->fd_lock);
        g_assert(inode->fd_users > 0);
        inode->fd_users++;
        g_mutex_unlock(&inode->fd_lock);
    }
}

/* Drops a reference that is not a user's: the table's */
static void inode_drop(VfsdInode *inode)
{
    if (!g_atomic_int_dec_and_test(&inode->refcount)) {
        return;
    }
    vfsd_inode_plocks_drop(inode, 0);
    if (inode->plocks) {
        g_hash_table_destroy(inode->plocks);
    }
    g_mutex_clear(&inode->plock_lock);
    g_mutex_clear(&inode->fd_lock);
    /* Plain data, and nothing of dax.c holds the inode any more */
    g_free(inode->dax);
    /* A lost inode has no fd; an idle handle inode's is not accounted */
    if (!inode->by_handle && inode->fd >= 0) {
        vfsd_fd_close(inode->fs, inode->fd);
    } else if (inode->fd >= 0) {
        close(inode->fd);
    }
    if (inode->broker_id) {
        vfsd_broker_forget(inode->fs->broker, inode->broker_id);
    }
    g_free(inode->handle);
    g_free(inode);
}

void vfsd_inode_unref(VfsdInode *inode)
{
    if (!inode) {
        return;
    }
    inode_fd_let_go(inode);
    inode_drop(inode);
}

VfsdInode *vfsd_inode_get(VfsdFs *fs, uint64_t nodeid)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *inode;

    int ret;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_nodeid, &nodeid);
    if (inode && inode->lost) {
        inode = NULL;
    } else if (inode) {
        g_atomic_int_inc(&inode->refcount);
    }
    g_mutex_unlock(&st->lock);
    if (!inode) {
        errno = ENOENT;
        return NULL;
    }
    /* Outside the table's lock: it may open the inode from its handle */
    ret = inode_fd_hold(inode);
    if (ret < 0) {
        inode_drop(inode);
        errno = -ret;
        return NULL;
    }
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

int vfsd_inode_plock_fd(VfsdInode *inode, uint64_t owner, int fallback,
                        bool dup)
{
    gpointer p;
    int fd, ret;

    g_mutex_lock(&inode->plock_lock);
    if (!inode->plocks) {
        inode->plocks = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                              g_free, NULL);
    }
    p = g_hash_table_lookup(inode->plocks, &owner);
    if (p) {
        fd = GPOINTER_TO_INT(p) - 1;
    } else {
        /*
         * Read-write, so that the owner can take both kinds of lock
         * whichever of its handles asks.  Where that is refused (a file
         * the daemon may not read, or append-only), @fallback gives what
         * the guest's open gave it: a write lock through a writable
         * handle must not fail with EBADF.
         */
        fd = vfsd_fd_open(inode->fs, inode, O_RDWR);
        if (fd < 0 && fd != -ENFILE && fd != -EMFILE) {
            fd = vfsd_fd_open(inode->fs, inode, fallback);
        }
        if (fd >= 0) {
            g_hash_table_insert(inode->plocks, g_memdup2(&owner, sizeof(owner)),
                                GINT_TO_POINTER(fd + 1));
        }
    }
    ret = fd;
    if (fd >= 0 && dup) {
        ret = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (ret < 0) {
            ret = -errno;
        }
    }
    g_mutex_unlock(&inode->plock_lock);
    return ret;
}

/*
 * With --inode-file-handles, the handle of @fd: NULL to hold it by fd
 * (prefer, on a file system without handles), or an error.
 */
static int inode_make_handle(VfsdFs *fs, int fd, struct file_handle **fh,
                             int *mnt_id, int *err)
{
    *fh = handle_of(fd, mnt_id);
    if (*fh) {
        return 0;
    }
    *err = -errno;
    if (fs->opts->inode_file_handles == VFSD_INODE_FH_MANDATORY) {
        vfsd_guest_error("no file handle for an inode (%s), and "
                         "--inode-file-handles=mandatory", strerror(errno));
        return -errno;
    }
    return 0;
}

/*
 * Called with the table's lock held: whether the mount @mnt_id has file
 * handles (1), has not (-errno: name_to_handle_at()'s), or is not known
 * yet (0).  A file system has handles for all its files or none.
 */
static int mount_handles(VfsdInodeStore *st, uint64_t mnt_id)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(st->mount_handles, &mnt_id));
}

/*
 * Called with the table's lock held: what making a handle on @mnt_id
 * gave (0 or -errno).  Only the file system's own refusal is its
 * answer for good; another error (ENOMEM...) is asked again.
 */
static void mount_handles_learn(VfsdInodeStore *st, uint64_t mnt_id,
                                int err)
{
    if ((err == 0 || err == -EOPNOTSUPP || err == -ENOTSUP) &&
        !mount_handles(st, mnt_id)) {
        g_hash_table_insert(st->mount_handles,
                            g_memdup2(&mnt_id, sizeof(mnt_id)),
                            GINT_TO_POINTER(err ? err : 1));
    }
}

/* Whether two file handles name the same file */
static bool handle_equal(const struct file_handle *a,
                         const struct file_handle *b)
{
    return a->handle_type == b->handle_type &&
           a->handle_bytes == b->handle_bytes &&
           !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

/*
 * Called with the table's lock held: whether @inode, found by the key of
 * the file at hand, is that file (1), is not (0), or needs the file's
 * handle to tell (-1, @fh NULL).  An inode held by fd, or by handle
 * while something holds its fd, keeps its host inode alive, so its number
 * cannot have gone to another file.  One held by handle alone does not:
 * once the host deletes the file, a new one may get its number, and only
 * the handles (@fh, the file's own, when known) tell them apart.
 */
static int inode_same_file(VfsdInode *inode, const struct file_handle *fh)
{
    bool pinned;

    if (!inode->by_handle) {
        return 1;
    }
    g_mutex_lock(&inode->fd_lock);
    pinned = inode->fd_users > 0 || inode->fd >= 0;     /* or idle */
    g_mutex_unlock(&inode->fd_lock);
    if (pinned) {
        return 1;
    }
    if (!fh) {
        return -1;              /* ask again with the handle */
    }
    /* Its handle was made before its fd went */
    return inode->handle && handle_equal(inode->handle, fh);
}

/*
 * Called with the table's lock held, for a file the table has no inode
 * of: whether that inode needs its handle made now (1), or not (0: its
 * mount is known to have handles, made when its fd goes, or it has none
 * and fds will do), or cannot be held (-errno: the mount has no handles,
 * and they are mandatory).  The first inode of a mount finds out whether
 * it has them.
 */
static int new_inode_needs_handle(VfsdFs *fs, uint64_t mnt_id)
{
    int handles = mount_handles(&fs->inodes, mnt_id);

    if (handles > 0 ||
        (handles < 0 && fs->opts->inode_file_handles !=
                        VFSD_INODE_FH_MANDATORY)) {
        return 0;
    }
    return handles < 0 ? handles : 1;
}

/*
 * Called with the table's lock held: the guest looks up @inode again,
 * which the caller opened @fd on.  Returns @fd, or -1 where the inode
 * took it over.
 */
static int inode_found_locked(VfsdInodeStore *st, VfsdInode *inode, int fd)
{
    inode->nlookup++;
    g_atomic_int_inc(&inode->refcount);
    if (!inode->by_handle) {
        return fd;
    }
    /*
     * A handle inode nobody uses takes over our fd, reserved, or keeps
     * its idle one, which our reservation then counts
     */
    g_mutex_lock(&inode->fd_lock);
    if (inode->fd_users++ == 0) {
        if (inode_idle_take(st, inode)) {
            /* The list's reference: the table holds another */
            g_atomic_int_add(&inode->refcount, -1);
        }
        if (inode->fd < 0) {
            inode->fd = fd;
        } else {
            close(fd);
        }
        fd = -1;
    }
    g_mutex_unlock(&inode->fd_lock);
    return fd;
}

/*
 * Called with the table's lock held: @inode, zeroed, becomes the table's
 * inode of @key, holding @fd and, where it is held by handle, *@fh.
 */
static void inode_add_locked(VfsdFs *fs, VfsdInode *inode,
                             const VfsdInode *key, mode_t mode, int fd,
                             struct file_handle **fh)
{
    VfsdInodeStore *st = &fs->inodes;

    inode->fs = fs;
    g_mutex_init(&inode->plock_lock);
    g_mutex_init(&inode->fd_lock);
    inode->nodeid = st->next_nodeid++;
    inode->fd = fd;
    if (*fh || (fs->use_handles && mount_handles(st, key->mnt_id) > 0)) {
        inode->handle = g_steal_pointer(fh);
        inode->by_handle = true;
        inode->idle_link.data = inode;
        inode->fd_users = 1;
        g_atomic_int_inc(&fs->handles_made);
    }
    inode->dev = key->dev;
    inode->ino = key->ino;
    inode->mnt_id = key->mnt_id;
    inode->type = mode & S_IFMT;
    /* One reference for the table, one for us */
    inode->refcount = 2;
    inode->nlookup = 1;
    g_hash_table_insert(st->by_nodeid, &inode->nodeid, inode);
    /* replace: the key is the inode, and the old one may go first */
    g_hash_table_replace(st->by_key, inode, inode);
}

VfsdInode *vfsd_inode_intern(VfsdFs *fs, int fd, const struct statx *stx)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode key, *inode;
    g_autofree VfsdInode *fresh = g_new0(VfsdInode, 1);
    g_autofree struct file_handle *fh = NULL;
    bool have_fh = false;
    int ret, same, mnt_id = 0, need, handle_err = 0;

    key.dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
    key.ino = stx->stx_ino;
    key.mnt_id = stx->stx_mnt_id;

    g_mutex_lock(&st->lock);
    for (;;) {
        inode = g_hash_table_lookup(st->by_key, &key);
        same = inode ? inode_same_file(inode, have_fh ? fh : NULL) : 0;
        if (have_fh || !fs->use_handles || same > 0) {
            break;
        }
        /*
         * A new inode on a mount known to have handles is held by handle
         * without one yet: while its fd is open nothing can take its
         * number, and the handle is made when the fd goes
         * (inode_fd_give_up_locked()), which most never do.
         */
        need = inode ? 1 : new_inode_needs_handle(fs, key.mnt_id);
        if (need == 0) {
            break;
        }
        if (need < 0) {
            g_mutex_unlock(&st->lock);
            vfsd_guest_error("no file handle for an inode (%s), and "
                             "--inode-file-handles=mandatory",
                             strerror(-need));
            vfsd_fd_close(fs, fd);
            errno = -need;
            return NULL;
        }
        /*
         * That first inode needs its handle, and so does a known one held
         * by handle alone: made without the table's lock (a system call
         * must not run under it).  Most lookups are of known inodes with
         * an fd, idle or in use.
         */
        g_mutex_unlock(&st->lock);
        ret = inode_make_handle(fs, fd, &fh, &mnt_id, &handle_err);
        have_fh = true;
        if (!inode) {
            g_mutex_lock(&st->lock);
            mount_handles_learn(st, key.mnt_id, fh ? 0 : handle_err);
            g_mutex_unlock(&st->lock);
        }
        if (ret < 0) {
            vfsd_fd_close(fs, fd);
            errno = -ret;
            return NULL;
        }
        g_mutex_lock(&st->lock);
    }
    /*
     * Else new, or another file with a deleted one's number, which takes
     * the key: the guest may still name the old one (the host's ESTALE).
     */
    if (inode && same > 0) {
        fd = inode_found_locked(st, inode, fd);
    } else {
        inode = g_steal_pointer(&fresh);
        inode_add_locked(fs, inode, &key, stx->stx_mode, fd, &fh);
        fd = -1;
    }
    g_mutex_unlock(&st->lock);

    if (fd >= 0) {
        vfsd_fd_close(fs, fd);
    }
    return inode;
}

uint64_t vfsd_inodes_epoch(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    uint64_t epoch;

    g_mutex_lock(&st->lock);
    epoch = st->next_nodeid;
    g_mutex_unlock(&st->lock);
    return epoch;
}

uint64_t vfsd_inode_find(VfsdFs *fs, dev_t dev, ino_t ino, uint64_t mnt_id)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode key = { .dev = dev, .ino = ino, .mnt_id = mnt_id }, *inode;
    uint64_t epoch;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_key, &key);
    epoch = inode && !inode->lost ? st->next_nodeid : 0;
    g_mutex_unlock(&st->lock);
    return epoch;
}

/*
 * The file the caller read by name had the inode's key at that moment.
 * Two live files never share a key, and the inode's file has lived
 * since the inode was made (before the caller's look: before @epoch)
 * for as long as something keeps it open: its own fd, or an fd opened
 * again from its handle, which only a live file gives.  So an inode
 * held open now is that file.  One held by handle alone may be a
 * deleted file whose number went to the new one: only
 * vfsd_inode_intern() and its handles tell.
 */
VfsdInode *vfsd_inode_intern_known(VfsdFs *fs, uint64_t epoch,
                                   const struct statx *stx)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode key, *inode;
    bool was_idle = false;

    key.dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
    key.ino = stx->stx_ino;
    key.mnt_id = stx->stx_mnt_id;

    g_mutex_lock(&st->lock);
    inode = g_hash_table_lookup(st->by_key, &key);
    if (!inode || inode->nodeid >= epoch || inode->lost) {
        g_mutex_unlock(&st->lock);
        return NULL;
    }
    if (inode->by_handle) {
        /* A user, as vfsd_inode_get() makes one, but only of an open fd */
        g_mutex_lock(&inode->fd_lock);
        if (inode->fd < 0 ||
            (inode->fd_users == 0 && !vfsd_fd_reserve(fs))) {
            g_mutex_unlock(&inode->fd_lock);
            g_mutex_unlock(&st->lock);
            return NULL;
        }
        if (inode->fd_users++ == 0) {
            was_idle = inode_idle_take(st, inode);
        }
        g_mutex_unlock(&inode->fd_lock);
    }
    inode->nlookup++;
    /* The list's reference becomes ours */
    if (!was_idle) {
        g_atomic_int_inc(&inode->refcount);
    }
    g_mutex_unlock(&st->lock);
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
        inode_idle_cancel(inode);
        inode_drop(inode);
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
        inode_idle_cancel(g_ptr_array_index(dead, i));
        inode_drop(g_ptr_array_index(dead, i));
    }
    g_ptr_array_free(dead, true);
}

void vfsd_inodes_destroy(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    VfsdInode *root = st->root;

    vfsd_inodes_forget_all(fs);
    /* Those a request let go of after the guest forgot them */
    for (;;) {
        VfsdInode *inode = NULL;
        GList *head;

        g_mutex_lock(&st->idle_lock);
        head = g_queue_pop_head_link(&st->idle);
        if (head) {
            inode = head->data;
            inode->idle = false;
        }
        g_mutex_unlock(&st->idle_lock);
        if (!inode) {
            break;
        }
        inode_idle_close(inode, false);
    }
    if (root) {
        g_mutex_lock(&st->lock);
        inode_unhash(st, root);
        st->root = NULL;
        g_mutex_unlock(&st->lock);
        inode_drop(root);
    }
    g_hash_table_destroy(st->by_nodeid);
    g_hash_table_destroy(st->by_key);
    g_hash_table_destroy(st->mount_handles);
    g_mutex_clear(&st->lock);
    g_mutex_clear(&st->idle_lock);
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
    g_mutex_init(&root->fd_lock);
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

/* Whether the broker opens the shared directory (@root_fd) by handle */
static int handles_work(VfsdFs *fs, int root_fd)
{
    struct statx stx;
    uint64_t id;
    int ret, fd;

    ret = vfsd_statx(root_fd, &stx);
    if (ret == 0) {
        ret = vfsd_broker_register(fs->broker, fs->proc_self_fd, root_fd,
                                   stx.stx_mnt_id, &id);
    }
    if (ret < 0) {
        return ret;
    }
    fd = vfsd_broker_open(fs->broker, id);
    vfsd_broker_forget(fs->broker, id);
    if (fd < 0) {
        return fd;
    }
    close(fd);
    return 0;
}

/*
 * --inode-file-handles: whether the daemon can hold inodes by handle, as
 * tried on the shared directory (@root_fd) through the broker, which
 * exists only where the daemon had CAP_DAC_READ_SEARCH to give it:
 * without, prefer means fds, mandatory refuses.  A shared directory
 * whose file system has no handles refuses mandatory; prefer still
 * tries each inode, as the mounts below may have them.  Idle handle
 * inodes keep up to --inode-fd-cache fds (a quarter of the guest's by
 * default, at most half), taken from its share.
 */
bool vfsd_inodes_handles_init(VfsdFs *fs, int root_fd, char **err)
{
    VfsdInodeFh mode = fs->opts->inode_file_handles;
    int ret;

    if (mode == VFSD_INODE_FH_NEVER) {
        vfsd_info("inodes are held by fds (--inode-file-handles=never)");
        return true;
    }
    if (!fs->broker) {
        if (mode == VFSD_INODE_FH_MANDATORY) {
            *err = g_strdup("--inode-file-handles=mandatory: file handles "
                            "cannot be opened here (they need "
                            "CAP_DAC_READ_SEARCH)");
            return false;
        }
        vfsd_info("file handles cannot be opened here (they need "
                  "CAP_DAC_READ_SEARCH): inodes are held by fds");
        return true;
    }
    ret = handles_work(fs, root_fd);
    if (ret == -EOPNOTSUPP || ret == -ENOTSUP) {
        if (mode == VFSD_INODE_FH_MANDATORY) {
            *err = g_strdup_printf("--inode-file-handles=mandatory: the "
                                   "shared directory has no file handles "
                                   "(%s)", strerror(-ret));
            return false;
        }
        vfsd_info("the shared directory has no file handles (%s): its "
                  "inodes are held by fds", strerror(-ret));
    } else if (ret < 0) {
        if (mode == VFSD_INODE_FH_MANDATORY) {
            *err = g_strdup_printf("--inode-file-handles=mandatory: "
                                   "cannot open a file handle (%s)",
                                   strerror(-ret));
            return false;
        }
        vfsd_info("cannot open file handles (%s): inodes are held by fds",
                  strerror(-ret));
        /* In a user namespace, say: the capability there is not enough */
        vfsd_broker_free(fs->broker);
        fs->broker = NULL;
        return true;
    }
    fs->use_handles = true;
    fs->inodes.idle_max = fs->opts->inode_fd_cache < 0 ? fs->fds_max / 4 :
                          MIN(fs->opts->inode_fd_cache, fs->fds_max / 2);
    fs->fds_max -= fs->inodes.idle_max;
    vfsd_info("inodes are held by file handles where the file system "
              "has them, opened by a process of their own; up to %u "
              "unused ones keep their fd", fs->inodes.idle_max);
    return true;
}

void vfsd_inodes_report(VfsdFs *fs)
{
    if (fs->use_handles) {
        vfsd_info("file handles: %d inodes held by handle, %d opened from "
                  "one", g_atomic_int_get(&fs->handles_made),
                  g_atomic_int_get(&fs->handles_opened));
    }
}

void vfsd_inodes_handles_cleanup(VfsdFs *fs)
{
    vfsd_inodes_report(fs);
}

GPtrArray *vfsd_inodes_snapshot(VfsdFs *fs)
{
    VfsdInodeStore *st = &fs->inodes;
    GPtrArray *all = g_ptr_array_new_with_free_func(
        (GDestroyNotify)vfsd_inode_unref);
    GHashTableIter it;
    VfsdInode *inode;

    GPtrArray *known = g_ptr_array_new();
    unsigned int i;

    g_mutex_lock(&st->lock);
    g_hash_table_iter_init(&it, st->by_nodeid);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&inode)) {
        if (inode != st->root) {
            g_atomic_int_inc(&inode->refcount);
            g_ptr_array_add(known, inode);
        }
    }
    g_mutex_unlock(&st->lock);
    /*
     * Each a user, with its fd open: one held by file handle is opened
     * from it, outside the table's lock.  One that no longer opens (gone
     * on the host) is left out, as if the guest had forgotten it.
     */
    for (i = 0; i < known->len; i++) {
        inode = g_ptr_array_index(known, i);
        if (inode_fd_hold(inode) == 0) {
            g_ptr_array_add(all, inode);
        } else {
            inode_drop(inode);
        }
    }
    g_ptr_array_free(known, true);
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
    /* Restored inodes are held by fd, whatever --inode-file-handles says */
    g_mutex_init(&inode->fd_lock);
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
        g_mutex_clear(&inode->fd_lock);
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
