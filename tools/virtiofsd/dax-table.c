/*
 * virtiofsd: the DAX window's table of mappings
 *
 * The window's lock, what it knows of each inode (its mappings, the size
 * they follow, the watch on its file), and the changes to the table that
 * the window's files make: a mapping recorded or freed, ranges mapped or
 * unmapped through the front-end.  dax-table.h has the types, and which
 * lock guards what.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>

#include "dax-table.h"
#include "inode.h"
#include "log.h"
#include "stats.h"

/*
 * Every request path takes the window's lock, and an inode's setup_lock,
 * this way: the back-end may have to let locks of its own go while it
 * waits for a holder that is in a front-end round trip (see dax_lock()
 * in vhost-dax.c).
 */
void vfsd_dax_lock_mutex(VfsdDax *dax, GMutex *lock)
{
    if (dax->be.lock) {
        dax->be.lock(dax->be.opaque, lock);
    } else {
        g_mutex_lock(lock);
    }
}

void vfsd_dax_lock(VfsdDax *dax)
{
    vfsd_dax_lock_mutex(dax, &dax->lock);
}

/*
 * Upstream QEMU's SHMEM_MAP (11.1) backs each mapping with a RAM block made
 * from the file: it refuses a range past the end of the file, and would
 * even extend an empty file to the range's length.  Only vhost-user-fs
 * with a cache window (cache-size) offers F_SHMEM_REPLACE, and only it
 * maps past the end.  Elsewhere a mapping stops at the end of the file,
 * which must then fall on a page boundary: the partial page at the end of
 * a file cannot be mapped at all.
 */
bool vfsd_dax_upstream(VfsdDax *dax)
{
    return !dax->be.can_replace(dax->be.opaque);
}

/*
 * How much of a mapping of @len bytes at @foffset a file of @size bytes
 * backs: up to the page that holds its end, or with upstream QEMU up to
 * the last whole page.
 */
uint64_t vfsd_dax_keep(VfsdDax *dax, uint64_t foffset, uint64_t len,
                       uint64_t size)
{
    /* Sizes come from stat: at most INT64_MAX, this cannot wrap */
    uint64_t end = (size + VFSD_DAX_ALIGN - 1) & ~(VFSD_DAX_ALIGN - 1);

    if (vfsd_dax_upstream(dax)) {
        end = size & ~(VFSD_DAX_ALIGN - 1);
    }
    return end > foffset ? MIN(end - foffset, len) : 0;
}

/* NULL for an inode never mapped */
VfsdDaxInode *vfsd_dax_of(VfsdInode *inode)
{
    return g_atomic_pointer_get(&inode->dax);
}

/* The same, made if need be; with or without the lock */
VfsdDaxInode *vfsd_dax_of_new(VfsdInode *inode)
{
    VfsdDaxInode *d = vfsd_dax_of(inode), *fresh;

    if (d) {
        return d;
    }
    fresh = g_new0(VfsdDaxInode, 1);
    if (g_atomic_pointer_compare_and_exchange(&inode->dax, NULL, fresh)) {
        return fresh;
    }
    g_free(fresh);
    return vfsd_dax_of(inode);
}

/* Whether @inode has live mappings */
bool vfsd_dax_inode_mapped(VfsdInode *inode)
{
    VfsdDaxInode *d = vfsd_dax_of(inode);

    return d && g_atomic_int_get(&d->maps);
}

/*
 * Watches the file of @inode for host-side truncation, if that is on and
 * it is not watched yet.  Before the size the mappings are made from is
 * read, so that a truncate in between is heard of.  Lock held.
 */
void vfsd_dax_inode_watch(VfsdDax *dax, VfsdInode *inode)
{
    VfsdDaxInode *d = vfsd_dax_of_new(inode);
    char name[16];
    gpointer users;
    int wd;

    if (dax->watch_fd < 0 || d->wd) {
        return;
    }
    /*
     * inotify takes a path and has no *at() form: the daemon's working
     * directory is /proc/self/fd, where the inode's O_PATH fd names it.
     */
    snprintf(name, sizeof(name), "%d", inode->fd);
    if (g_hash_table_size(dax->wds) >= dax->max_watches) {
        wd = -1;
        errno = EMFILE;
    } else {
        wd = inotify_add_watch(dax->watch_fd, name, IN_MODIFY);
    }
    if (wd < 0) {
        /* Sizes we read for the guest are still checked */
        if (!dax->watch_full_warned) {
            vfsd_warn("DAX: cannot watch a mapped file for truncation: %s",
                      errno == EMFILE ? "too many files mapped" :
                      strerror(errno));
            dax->watch_full_warned = true;
        }
        return;
    }
    d->wd = wd;
    users = g_hash_table_lookup(dax->wds, GINT_TO_POINTER(wd));
    g_hash_table_insert(dax->wds, GINT_TO_POINTER(wd),
                        GUINT_TO_POINTER(GPOINTER_TO_UINT(users) + 1));
}

/* Drops the watch of an inode that has no mappings.  Lock held. */
void vfsd_dax_inode_unwatch(VfsdDax *dax, VfsdInode *inode)
{
    VfsdDaxInode *d = vfsd_dax_of(inode);
    gpointer key;
    unsigned int users;

    if (!d || d->maps || !d->wd) {
        return;
    }
    key = GINT_TO_POINTER(d->wd);
    users = GPOINTER_TO_UINT(g_hash_table_lookup(dax->wds, key));
    if (users > 1) {
        g_hash_table_insert(dax->wds, key, GUINT_TO_POINTER(users - 1));
    } else if (users) {
        g_hash_table_remove(dax->wds, key);
        inotify_rm_watch(dax->watch_fd, d->wd);
    }
    d->wd = 0;
}

uint64_t vfsd_dax_inode_size(VfsdInode *inode)
{
    VfsdDaxInode *d = vfsd_dax_of(inode);

    return d ? __atomic_load_n(&d->size, __ATOMIC_RELAXED) : 0;
}

/* Lock held */
void vfsd_dax_inode_set_size(VfsdInode *inode, uint64_t size)
{
    __atomic_store_n(&vfsd_dax_of_new(inode)->size, size, __ATOMIC_RELAXED);
}

/* A new mapping of @inode, whose file is @size bytes.  Lock held. */
static void dax_inode_attach(VfsdDax *dax, VfsdInode *inode, uint64_t size)
{
    /* Again: the maps this one replaced may have taken the watch along */
    vfsd_dax_inode_watch(dax, inode);
    vfsd_dax_inode_set_size(inode, size);
    g_atomic_int_inc(&vfsd_dax_of_new(inode)->maps);
}

/* The last mapping of an inode gone, so is its watch.  Lock held. */
static void dax_inode_detach(VfsdDax *dax, VfsdInode *inode)
{
    g_atomic_int_add(&vfsd_dax_of(inode)->maps, -1);
    vfsd_dax_inode_unwatch(dax, inode);
}

void vfsd_dax_map_free(VfsdDax *dax, VfsdDaxMap *m)
{
    if (m->released) {
        g_queue_unlink(&dax->released, &m->released_link);
    }
    g_tree_remove(dax->maps, &m->moffset);
    dax_inode_detach(dax, m->inode);
    vfsd_inode_unref(m->inode);
    g_free(m);
}

static gboolean collect_map(gpointer key, gpointer value, gpointer data)
{
    g_ptr_array_add(data, value);
    return FALSE;
}

/* All mappings in window order */
GPtrArray *vfsd_dax_all_maps(VfsdDax *dax)
{
    GPtrArray *all = g_ptr_array_new();

    g_tree_foreach(dax->maps, collect_map, all);
    return all;
}

/*
 * Unmaps @maps (window order, all to go) with as few requests as
 * possible: the front-end accepts one unmap over adjacent mappings, but
 * not over a range that is not mapped, such as the part of a mapping a
 * host-side truncate made us drop.  Returns false if any unmap failed.
 * Called with the lock held, or without it for busy mappings, which
 * nothing else touches (see "The map path").
 *
 * Without @wait, the unmaps are only queued when the front-end allows:
 * for ranges the guest gave up, which nothing can reach before a later
 * map of ours, and the front-end handles that one after the unmaps.
 */
bool vfsd_dax_send_unmaps(VfsdDax *dax, GPtrArray *maps, bool wait)
{
    bool (*unmap)(void *opaque, uint64_t shm_offset, uint64_t len) =
        !wait && dax->be.unmap_nowait ? dax->be.unmap_nowait : dax->be.unmap;
    bool ok = true;
    unsigned int i = 0, j;

    while (i < maps->len) {
        VfsdDaxMap *first = g_ptr_array_index(maps, i);
        uint64_t end = first->moffset + first->mapped;

        if (!first->mapped) {
            i++;
            continue;
        }
        /*
         * A run ends with a mapping cut short: the next is not at end.
         * Upstream QEMU (no F_SHMEM_REPLACE, our extension) takes an unmap
         * of exactly one mapping only: no runs there.
         */
        for (j = i + 1; j < maps->len; j++) {
            VfsdDaxMap *m = g_ptr_array_index(maps, j);

            if (m->moffset != end || !dax->be.can_replace(dax->be.opaque)) {
                break;
            }
            end += m->mapped;
        }
        if (!unmap(dax->be.opaque, first->moffset, end - first->moffset)) {
            vfsd_err("DAX: front-end failed to unmap window range 0x%" PRIx64
                     "+0x%" PRIx64, first->moffset, end - first->moffset);
            ok = false;
        }
        i = j;
    }
    return ok;
}

void vfsd_dax_free_maps(VfsdDax *dax, GPtrArray *maps)
{
    unsigned int i;

    for (i = 0; i < maps->len; i++) {
        vfsd_dax_map_free(dax, g_ptr_array_index(maps, i));
    }
}

/*
 * The same, and the records go.  Lock held.  They go whatever the
 * front-end answered, as it drops what it cannot keep.
 */
bool vfsd_dax_unmap_maps(VfsdDax *dax, GPtrArray *maps, bool wait)
{
    bool ok = vfsd_dax_send_unmaps(dax, maps, wait);

    vfsd_dax_free_maps(dax, maps);
    return ok;
}

bool vfsd_dax_range_ok(uint64_t off, uint64_t len)
{
    return len && !(off % VFSD_DAX_ALIGN) && !(len % VFSD_DAX_ALIGN) &&
           off + len > off;
}

/*
 * Maps the first @keep bytes of the range.  Only the part of the range
 * the file backs is mapped: a page past the end of a file faults when
 * touched, and a fault in QEMU is not always one it survives (see "Never
 * past the end of file" in dax.c).  The rest keeps the window's zeros until
 * the file grows.  Without the lock, but for a migration's restore.
 */
int vfsd_dax_setup_map(VfsdFs *fs, const VfsdDaxSetup *in,
                       uint64_t keep, uint64_t flags, int fd)
{
    VfsdDax *dax = fs->dax;
    int64_t start;
    bool mapped;

    if (!keep) {
        return 0;
    }
    start = fs->stats ? vfsd_stats_now() : 0;
    mapped = dax->be.map(dax->be.opaque, in->foffset, in->moffset, keep,
                         flags, fd);
    if (fs->stats) {
        vfsd_stats_record(fs->stats, VFSD_STATS_FE_MAP, start);
    }
    if (!mapped) {
        vfsd_guest_error("SETUPMAPPING: front-end refused to map 0x%"
                         PRIx64 "+0x%" PRIx64, in->moffset, keep);
        return -EIO;
    }
    return 0;
}

/*
 * Records @m, a new mapping of @inode, in place of @old.  Lock held.
 */
void vfsd_dax_setup_record(VfsdFs *fs, VfsdInode *inode, VfsdDaxMap *m,
                           GPtrArray *old, uint64_t size)
{
    /* First, so that upgrading a range keeps the file's watch */
    dax_inode_attach(fs->dax, inode, size);
    /* Then, as one of them may sit at the same window offset */
    vfsd_dax_free_maps(fs->dax, old);
    m->pending = false;
    g_tree_insert(fs->dax->maps, &m->moffset, m);
}
