/*
 * virtiofsd: DAX mappings that follow their files' sizes
 *
 * Why they must (never past the end of a file, nor short of what the
 * guest may write through) is in dax.c; here is how: each mapping of a
 * file is cut or grown to the file's size, at the points dax-resize.h
 * names.
 *
 * Every such resize acts on the size the file has when the window's lock
 * is held, read then (or set by our own truncate, which holds off the
 * others until it is done), never on one read earlier: concurrent
 * requests read sizes in no particular order, and a stale smaller size
 * would cut a mapping the guest is writing through (its writes would be
 * lost in the window's zero pages), a stale larger one map past the end.
 * One host file can be several of our inodes (one per mount it is reached
 * through): a resize covers the mappings made through any of them.
 *
 * A truncate done on the host behind the guest's back is another matter,
 * and not something the daemon can prevent.  With --watch-truncate it
 * can at least limit the damage: inotify tells it when a mapped file
 * changed, and the ranges the file no longer backs are cut the same way
 * before the guest (most likely) touches them, so that it reads zeros
 * from the window instead of making QEMU catch a SIGBUS.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "dax-resize.h"
#include "dax-table.h"
#include "fd.h"
#include "inode.h"
#include "log.h"

/*
 * Resizing mappings.
 *
 * The front-end maps a file range with one mmap(); once the file is
 * shorter, the pages past its new end raise SIGBUS when touched.  We
 * replace them with the window's own zero pages: the front-end unmaps
 * only whole mappings, so a mapping the new end cuts through is unmapped
 * and its head mapped again.  For that short moment the head reads zeros
 * too; without it, the guest could fault on the tail.  The record keeps
 * the guest's range and how much of it is mapped, so that the guest's
 * later REMOVEMAPPING or SETUPMAPPING of the range works.
 *
 * When the file grows, a mapping that stops short is extended in one
 * replacing map (the head keeps reading the file throughout).  The
 * guest writes through it once its i_size covers it, and what it wrote
 * into the window's zero pages would be lost.  Hence the checks before
 * the guest can learn a larger size: the attributes we reply with, and
 * its own writes that extend the file.
 *
 * A guest-initiated shrink is cut before the truncate; the guest holds
 * its own locks meanwhile, so none of its threads reads the head of a
 * cut mapping while it is mapped again.
 */

/* A fresh fd for a mapping's file, or a negative errno */
static int dax_reopen(VfsdFs *fs, VfsdDaxMap *m)
{
    return vfsd_fd_open(fs, m->inode, m->writable ? O_RDWR : O_RDONLY);
}

static void dax_close(VfsdFs *fs, int fd)
{
    if (fd >= 0) {
        vfsd_fd_close(fs, fd);
    }
}

/* Keeps only the first @keep bytes of @m mapped.  Lock held. */
static void dax_cut_map(VfsdFs *fs, VfsdDaxMap *m, uint64_t keep)
{
    VfsdDax *dax = fs->dax;
    uint64_t flags = m->writable ? VFSD_DAX_MAP_RW : 0;
    int fd = -1;

    if (keep) {
        fd = dax_reopen(fs, m);
        if (fd < 0) {
            /* Zeros for the whole range still beat a fault */
            vfsd_warn("DAX: cannot reopen a truncated file (%s), unmapping "
                      "all of window range 0x%" PRIx64 "+0x%" PRIx64,
                      strerror(-fd), m->moffset, m->len);
            keep = 0;
        }
    }
    if (!dax->be.unmap(dax->be.opaque, m->moffset, m->mapped)) {
        vfsd_err("DAX: front-end failed to unmap window range 0x%" PRIx64
                 "+0x%" PRIx64 " past the end of a truncated file",
                 m->moffset, m->mapped);
        dax_close(fs, fd);
        return;
    }
    m->mapped = 0;
    if (keep) {
        if (dax->be.map(dax->be.opaque, m->foffset, m->moffset, keep, flags,
                        fd)) {
            m->mapped = keep;
        } else {
            vfsd_err("DAX: front-end failed to map back window range 0x%"
                     PRIx64 "+0x%" PRIx64, m->moffset, keep);
        }
    }
    vfsd_debug("DAX: file shrank: window range 0x%" PRIx64 "+0x%" PRIx64
               " keeps 0x%" PRIx64 " bytes mapped",
               m->moffset, m->len, m->mapped);
    dax_close(fs, fd);
}

/* Maps the first @keep bytes of @m, more than it maps now.  Lock held. */
static void dax_grow_map(VfsdFs *fs, VfsdDaxMap *m, uint64_t keep)
{
    VfsdDax *dax = fs->dax;
    uint64_t flags = m->writable ? VFSD_DAX_MAP_RW : 0;
    int fd;

    fd = dax_reopen(fs, m);
    if (fd < 0) {
        vfsd_warn("DAX: cannot reopen a file that grew (%s): window "
                  "range 0x%" PRIx64 "+0x%" PRIx64 " stays partly unmapped",
                  strerror(-fd), m->moffset, m->len);
        return;
    }
    if (m->mapped) {
        if (dax->be.can_replace(dax->be.opaque)) {
            /* The head never stops reading the file */
            flags |= VFSD_DAX_MAP_REPLACE;
        } else if (dax->be.unmap(dax->be.opaque, m->moffset, m->mapped)) {
            m->mapped = 0;
        } else {
            vfsd_err("DAX: front-end failed to unmap window range 0x%"
                     PRIx64 "+0x%" PRIx64, m->moffset, m->mapped);
            dax_close(fs, fd);
            return;
        }
    }
    if (dax->be.map(dax->be.opaque, m->foffset, m->moffset, keep, flags,
                    fd)) {
        m->mapped = keep;
        vfsd_debug("DAX: file grew: window range 0x%" PRIx64 "+0x%"
                   PRIx64 " maps 0x%" PRIx64 " bytes", m->moffset, m->len,
                   keep);
    } else {
        vfsd_err("DAX: front-end failed to map window range 0x%" PRIx64
                 "+0x%" PRIx64 " again", m->moffset, keep);
    }
    dax_close(fs, fd);
}

static bool dax_same_file(VfsdInode *a, dev_t dev, ino_t ino)
{
    return a->dev == dev && a->ino == ino;
}

/*
 * Whether a truncate of ours is under way on the file, and if so, into
 * @size (if not NULL) the smallest size one sets.  Lock held.
 */
static bool dax_truncating(VfsdDax *dax, dev_t dev, ino_t ino,
                           uint64_t *size)
{
    bool found = false;
    unsigned int i;

    for (i = 0; i < dax->truncating->len; i++) {
        VfsdDaxFileId *id = &g_array_index(dax->truncating, VfsdDaxFileId, i);

        if (id->dev == dev && id->ino == ino) {
            if (size && (!found || id->size < *size)) {
                *size = id->size;
            }
            found = true;
        }
    }
    return found;
}

/*
 * The host file (@dev, @ino) is now @size bytes long: every mapping of it,
 * through whichever of our inodes (one per mount the file is reached
 * through), maps exactly the part of its range the file backs.  Lock
 * held.  Returns whether the file has mappings at all.
 */
static bool dax_file_resize(VfsdFs *fs, dev_t dev, ino_t ino, uint64_t size)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = vfsd_dax_all_maps(dax);
    g_autoptr(GPtrArray) released = g_ptr_array_new();
    unsigned int i;
    bool any = false;

    for (i = 0; i < all->len; i++) {
        VfsdDaxMap *m = g_ptr_array_index(all, i);
        uint64_t keep;

        if (!dax_same_file(m->inode, dev, ino)) {
            continue;
        }
        any = true;
        if (m->busy) {
            /* Its SETUPMAPPING brings it in line (vfsd_dax_setup_settle()) */
            continue;
        }
        vfsd_dax_inode_set_size(m->inode, size);
        keep = vfsd_dax_keep(dax, m->foffset, m->len, size);
        if (m->released) {
            /* Nobody needs it to grow: dropped rather than cut */
            if (keep < m->mapped) {
                g_ptr_array_add(released, m);
            }
        } else if (keep < m->mapped) {
            dax_cut_map(fs, m, keep);
        } else if (keep > m->mapped) {
            dax_grow_map(fs, m, keep);
        }
    }
    if (released->len) {
        vfsd_dax_unmap_maps(dax, released, true);
    }
    return any;
}

/*
 * Brings the mappings of @inode's file in line with its size, read here,
 * under the lock: a size read before the lock was taken may be older
 * than a resize another thread did meanwhile, and acting on it could cut
 * what the guest is about to write through, or map past the end.  Not
 * while one of our truncates of the file is under way: its end does it.
 * Lock held.
 */
static void dax_inode_recheck(VfsdFs *fs, VfsdInode *inode)
{
    struct stat st;

    if (dax_truncating(fs->dax, inode->dev, inode->ino, NULL)) {
        return;
    }
    if (fstat(inode->fd, &st) == 0) {
        dax_file_resize(fs, inode->dev, inode->ino, st.st_size);
    }
}

/*
 * The mappings of @inode's file that the resizes left alone while a
 * SETUPMAPPING had them follow the size @size read before: brings the
 * file's mappings in line with its size now, if it changed.  While a
 * truncate of ours is under way, whose end does it anyway, they are only
 * kept short of the size it sets, as its beginning would have done.
 * Lock held.
 */
void vfsd_dax_setup_settle(VfsdFs *fs, VfsdInode *inode, int fd,
                           uint64_t size)
{
    struct stat st;
    uint64_t now, target = 0;

    if (fstat(fd, &st) < 0) {
        return;
    }
    now = st.st_size;
    if (dax_truncating(fs->dax, inode->dev, inode->ino, &target)) {
        now = MIN(now, target);
    } else if (now == size) {
        return;
    }
    vfsd_debug("DAX: node %" PRIu64 " changed size during SETUPMAPPING",
               inode->nodeid);
    dax_file_resize(fs, inode->dev, inode->ino, now);
}

bool vfsd_dax_watch_start(VfsdDax *dax, unsigned int max_files, char **err)
{
    dax->max_watches = max_files;
    dax->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (dax->watch_fd < 0) {
        *err = g_strdup_printf("cannot watch files for truncation: "
                               "inotify_init1: %s", strerror(errno));
        return false;
    }
    return true;
}

int vfsd_dax_watch_fd(VfsdDax *dax)
{
    return dax->watch_fd;
}

void vfsd_dax_watch_events(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GHashTable) changed = g_hash_table_new(NULL, NULL);
    g_autoptr(GHashTable) ignored = g_hash_table_new(NULL, NULL);
    g_autoptr(GHashTable) checked = g_hash_table_new(NULL, NULL);
    g_autoptr(GPtrArray) inodes = g_ptr_array_new();
    g_autoptr(GPtrArray) all = NULL;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    const struct inotify_event *ev;
    bool overflow = false;
    unsigned int i;
    ssize_t n;
    char *p;

    /* Drain first: one file written many times is checked once */
    for (;;) {
        n = read(dax->watch_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        for (p = buf; p < buf + n; p += sizeof(*ev) + ev->len) {
            ev = (const struct inotify_event *)p;
            if (ev->mask & IN_Q_OVERFLOW) {
                overflow = true;
            } else if (ev->mask & IN_IGNORED) {
                g_hash_table_add(ignored, GINT_TO_POINTER(ev->wd));
            } else {
                g_hash_table_add(changed, GINT_TO_POINTER(ev->wd));
            }
        }
    }
    if (!overflow && !g_hash_table_size(changed) &&
        !g_hash_table_size(ignored)) {
        return;
    }

    vfsd_dax_lock(dax);
    all = vfsd_dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        VfsdInode *inode = ((VfsdDaxMap *)g_ptr_array_index(all, i))->inode;
        VfsdDaxInode *d = vfsd_dax_of(inode);
        gpointer wd = GINT_TO_POINTER(d->wd);

        if (d->wd && g_hash_table_contains(ignored, wd)) {
            /* The kernel dropped the watch (file system unmounted) */
            g_hash_table_remove(dax->wds, wd);
            d->wd = 0;
        } else if (!overflow && !g_hash_table_contains(changed, wd)) {
            continue;
        }
        if (g_hash_table_add(checked, inode)) {
            g_ptr_array_add(inodes, inode);
            vfsd_inode_ref(inode);
        }
    }
    /* Apart: a resize may free mappings, @all would point at them */
    for (i = 0; i < inodes->len; i++) {
        VfsdInode *inode = g_ptr_array_index(inodes, i);

        if (vfsd_dax_inode_mapped(inode)) {
            dax_inode_recheck(fs, inode);
        }
        vfsd_inode_unref(inode);
    }
    g_mutex_unlock(&dax->lock);
}

/*
 * Whether the mappings of @inode might not follow a file of @size bytes,
 * looked at without the lock.  No mapping recorded, or one recorded for
 * that size, means none needs a change.  A SETUPMAPPING under way may
 * have read the size before a growth we were told about, but reads it
 * again under the lock when it records its mapping (vfsd_dax_setup_settle()),
 * after the growth.
 */
static bool dax_inode_may_need_resize(VfsdInode *inode, uint64_t size)
{
    VfsdDaxInode *d = vfsd_dax_of(inode);

    return d && g_atomic_int_get(&d->maps) &&
           size != vfsd_dax_inode_size(inode);
}

void vfsd_dax_size_seen(VfsdFs *fs, VfsdInode *inode, uint64_t size)
{
    /*
     * Only a size other than the one the mappings follow needs a look;
     * the lock is not taken otherwise, as resizes hold it across
     * front-end round trips and attribute replies should not wait for
     * those.
     */
    if (!fs->dax || inode->type != S_IFREG ||
        !dax_inode_may_need_resize(inode, size)) {
        return;
    }
    vfsd_dax_lock(fs->dax);
    if (vfsd_dax_inode_mapped(inode)) {
        dax_inode_recheck(fs, inode);
    }
    g_mutex_unlock(&fs->dax->lock);
}

void vfsd_dax_truncate_begin(VfsdFs *fs, dev_t dev, ino_t ino, int fd,
                             uint64_t size)
{
    VfsdDaxFileId id = { .dev = dev, .ino = ino, .size = size };
    struct stat st;

    if (!fs->dax) {
        return;
    }
    /*
     * Before the truncate, so that no mapping covers the cut range when
     * it goes.  Until the end, nothing else resizes the mappings from a
     * size it read: between here and the truncate that size would still
     * be the old one, and the cut would be undone.
     */
    vfsd_dax_lock(fs->dax);
    g_array_append_val(fs->dax->truncating, id);
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        size < (uint64_t)st.st_size) {
        dax_file_resize(fs, dev, ino, size);
    }
    g_mutex_unlock(&fs->dax->lock);
}

void vfsd_dax_truncate_end(VfsdFs *fs, dev_t dev, ino_t ino, int fd)
{
    GArray *t;
    struct stat st;
    unsigned int i;

    if (!fs->dax) {
        return;
    }
    vfsd_dax_lock(fs->dax);
    t = fs->dax->truncating;
    for (i = 0; i < t->len; i++) {
        VfsdDaxFileId *id = &g_array_index(t, VfsdDaxFileId, i);

        if (id->dev == dev && id->ino == ino) {
            g_array_remove_index_fast(t, i);
            break;
        }
    }
    /*
     * The size now, whatever happened: the truncate failed, grew the
     * file, or another writer grew it meanwhile.  Unless another
     * truncate of the file began since, which will do the same.
     */
    if (!dax_truncating(fs->dax, dev, ino, NULL) && fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        dax_file_resize(fs, dev, ino, st.st_size);
    }
    g_mutex_unlock(&fs->dax->lock);
}

void vfsd_dax_guest_grew(VfsdFs *fs, VfsdInode *inode)
{
    struct stat st;

    /*
     * Most writes do not change the size, and most files were never
     * mapped: neither needs the lock, nor the second the size.  A
     * mapping set up once this write is done reads a size that has it.
     */
    if (!fs->dax || !vfsd_dax_of(inode) || fstat(inode->fd, &st) < 0 ||
        !dax_inode_may_need_resize(inode, st.st_size)) {
        return;
    }
    vfsd_dax_lock(fs->dax);
    dax_inode_recheck(fs, inode);
    g_mutex_unlock(&fs->dax->lock);
}
