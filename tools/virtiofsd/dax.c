/*
 * virtiofsd: the DAX cache window
 *
 * The guest maps file ranges into the device's shared memory window with
 * FUSE_SETUPMAPPING and drops them with FUSE_REMOVEMAPPING.  We forward
 * both to the front-end and keep our own record of what is mapped,
 * because the front-end's rules are strict (no map over a map, unmaps
 * cover whole mappings) and everything goes on FUSE_DESTROY.
 *
 * Never past the end of file.  The guest maps whole 2 MiB ranges, past
 * the end of a file too (an 8 KiB file gets a 2 MiB range).  A page of a
 * file mapping past the file's end raises SIGBUS in whatever touches it,
 * and in QEMU that is not always survivable: under KVM the vCPU stops
 * with an internal error, and the main loop and iothreads block the
 * signal (docs/system/devices/virtio-fs.rst).  So we have the front-end
 * map each range only up to the page that holds the file's end; the rest
 * stays the window's own zero pages.  The guest does not read or write
 * past its i_size, so it never sees the difference, as long as the
 * mapping grows with the file before the guest can learn a larger size:
 *
 * - after the requests of ours that can grow a file (WRITE, FALLOCATE,
 *   COPY_FILE_RANGE, SETATTR of the size, open with O_TRUNC), before
 *   their reply;
 * - before a reply that carries the file's attributes (LOOKUP and the
 *   other entry replies, GETATTR, SETATTR): the file may have grown on
 *   the host meanwhile.
 *
 * Shrinking works the other way round: before we shorten a file for the
 * guest (SETATTR size, open with O_TRUNC), the part of each mapping past
 * the new end is unmapped, so that no window page is ever left over a
 * part of the file that no longer exists.  A hole punched in the file is
 * not cut: it is still part of the file, reads as zeros and takes writes
 * through the mapping.
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
 * Lazy unmaps.  Once its window is full, the guest frees one 2 MiB range
 * per REMOVEMAPPING and soon maps another file range into the same slot.
 * Each unmap is a pass of the front-end's main loop, and the next map,
 * the one a guest thread is waiting for, queues behind it.  When the
 * front-end can replace a mapping in one step, a removed range is left
 * mapped instead, and the map that reuses the slot replaces it.  This
 * changes nothing the guest may rely on: it must not touch a range it
 * removed, and if it does, it finds the file it had mapped there anyway,
 * as it could have by not removing it.  Ranges no map took over within
 * the delay are unmapped then, so that no file stays held by the window
 * for long after the guest is done with it.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dax.h"
#include "fd.h"
#include "inode.h"
#include "log.h"
#include "stats.h"

/* Offsets and lengths must be page aligned, as INIT announces */
#define VFSD_DAX_ALIGN ((uint64_t)VFSD_PAGE_SIZE)

/*
 * The window.  lock (see the lock order in fs-types.h) guards what is
 * marked so; the rest is set up before the first request and not
 * changed after.
 */
struct VfsdDax {
    GMutex lock;
    GTree *maps;                /* under lock: &moffset -> VfsdDaxMap */
    VfsdDaxBackend be;
    /* --watch-truncate: inotify fd, -1 when off */
    int watch_fd;
    /*
     * Under lock: wd -> number of inodes sharing it: inotify has one
     * watch per host inode, and a file reached through two mounts is two
     * of our inodes.
     */
    GHashTable *wds;
    /*
     * inotify watches count against a limit of the user we run as, which
     * the host's other programs need too: the guest decides how many
     * files it maps, so it must not decide how many watches we take.
     */
    unsigned int max_watches;
    bool watch_full_warned;     /* under lock */
    /* Lazy unmaps: a timerfd (-1 when off), and the ranges kept */
    int flush_fd;
    int64_t unmap_delay_ns;
    GQueue released;            /* under lock: VfsdDaxMap, by released_at */
    /* Under lock: host files our truncates are under way on */
    GArray *truncating;         /* VfsdDaxFileId */
    /*
     * Under lock: the ranges SETUPMAPPINGs reserved and are mapping now,
     * outside the lock (VfsdDaxMap, pending).  Not in @maps: one may
     * replace a mapping there at the same window offset.
     */
    GPtrArray *pending;
    /* Under lock: a migrated table, not mapped yet (VfsdDaxSaved) */
    GArray *restoring;
};

typedef struct VfsdDaxFileId {
    dev_t dev;
    ino_t ino;
    uint64_t size;              /* what the truncate makes it */
} VfsdDaxFileId;

/*
 * Every request path takes the window's lock, and an inode's setup_lock,
 * this way: the back-end may have to let locks of its own go while it
 * waits for a holder that is in a front-end round trip (see dax_lock()
 * in vhost-dax.c).
 */
static void dax_lock_mutex(VfsdDax *dax, GMutex *lock)
{
    if (dax->be.lock) {
        dax->be.lock(dax->be.opaque, lock);
    } else {
        g_mutex_lock(lock);
    }
}

static void dax_lock(VfsdDax *dax)
{
    dax_lock_mutex(dax, &dax->lock);
}

static gint cmp_u64(gconstpointer a, gconstpointer b, gpointer opaque)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

VfsdDax *vfsd_dax_new(const VfsdDaxBackend *be)
{
    VfsdDax *dax = g_new0(VfsdDax, 1);

    g_mutex_init(&dax->lock);
    dax->maps = g_tree_new_full(cmp_u64, NULL, NULL, NULL);
    dax->be = *be;
    dax->watch_fd = -1;
    dax->wds = g_hash_table_new(NULL, NULL);
    dax->flush_fd = -1;
    g_queue_init(&dax->released);
    dax->truncating = g_array_new(false, false, sizeof(VfsdDaxFileId));
    dax->pending = g_ptr_array_new();
    return dax;
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
static bool dax_upstream(VfsdDax *dax)
{
    return !dax->be.can_replace(dax->be.opaque);
}

bool vfsd_dax_size_mappable(VfsdFs *fs, uint64_t size)
{
    return !fs->dax || !dax_upstream(fs->dax) ||
           (size && !(size % VFSD_DAX_ALIGN));
}

/*
 * How much of a mapping of @len bytes at @foffset a file of @size bytes
 * backs: up to the page that holds its end, or with upstream QEMU up to
 * the last whole page.
 */
static uint64_t dax_keep(VfsdDax *dax, uint64_t foffset, uint64_t len,
                         uint64_t size)
{
    /* Sizes come from stat: at most INT64_MAX, this cannot wrap */
    uint64_t end = (size + VFSD_DAX_ALIGN - 1) & ~(VFSD_DAX_ALIGN - 1);

    if (dax_upstream(dax)) {
        end = size & ~(VFSD_DAX_ALIGN - 1);
    }
    return end > foffset ? MIN(end - foffset, len) : 0;
}

/*
 * What the window knows of an inode: its mappings, the size they follow
 * and the watch on its file.  Made the first time the inode is mapped,
 * and freed with the inode (plain data).  VfsdDax.lock guards what is
 * marked so; maps and size are also read without it, atomically.
 */
struct VfsdDaxInode {
    gint maps;                  /* atomic, changed under lock: mappings */
    int wd;                     /* under lock: inotify watch, 0: none */
    /* Under lock, read atomically: the size the mappings follow */
    uint64_t size;
    /*
     * Held by a SETUPMAPPING of the inode from before it reserves its
     * range until it is recorded or rolled back, front-end round trip
     * included: one file's ranges are set up one at a time, in the
     * order their requests take it.  Zeroed, as a static GMutex is: on
     * Linux it holds nothing to free, so that the struct stays plain data.
     */
    GMutex setup_lock;
};

/* NULL for an inode never mapped */
static VfsdDaxInode *dax_of(VfsdInode *inode)
{
    return g_atomic_pointer_get(&inode->dax);
}

/* The same, made if need be; with or without the lock */
static VfsdDaxInode *dax_of_new(VfsdInode *inode)
{
    VfsdDaxInode *d = dax_of(inode), *fresh;

    if (d) {
        return d;
    }
    fresh = g_new0(VfsdDaxInode, 1);
    if (g_atomic_pointer_compare_and_exchange(&inode->dax, NULL, fresh)) {
        return fresh;
    }
    g_free(fresh);
    return dax_of(inode);
}

/* Whether @inode has live mappings */
static bool dax_inode_mapped(VfsdInode *inode)
{
    VfsdDaxInode *d = dax_of(inode);

    return d && g_atomic_int_get(&d->maps);
}

/*
 * Watches the file of @inode for host-side truncation, if that is on and
 * it is not watched yet.  Before the size the mappings are made from is
 * read, so that a truncate in between is heard of.  Lock held.
 */
static void dax_inode_watch(VfsdDax *dax, VfsdInode *inode)
{
    VfsdDaxInode *d = dax_of_new(inode);
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
static void dax_inode_unwatch(VfsdDax *dax, VfsdInode *inode)
{
    VfsdDaxInode *d = dax_of(inode);
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

static uint64_t dax_inode_size(VfsdInode *inode)
{
    VfsdDaxInode *d = dax_of(inode);

    return d ? __atomic_load_n(&d->size, __ATOMIC_RELAXED) : 0;
}

/* Lock held */
static void dax_inode_set_size(VfsdInode *inode, uint64_t size)
{
    __atomic_store_n(&dax_of_new(inode)->size, size, __ATOMIC_RELAXED);
}

/* A new mapping of @inode, whose file is @size bytes.  Lock held. */
static void dax_inode_attach(VfsdDax *dax, VfsdInode *inode, uint64_t size)
{
    /* Again: the maps this one replaced may have taken the watch along */
    dax_inode_watch(dax, inode);
    dax_inode_set_size(inode, size);
    g_atomic_int_inc(&dax_of_new(inode)->maps);
}

/* The last mapping of an inode gone, so is its watch.  Lock held. */
static void dax_inode_detach(VfsdDax *dax, VfsdInode *inode)
{
    g_atomic_int_add(&dax_of(inode)->maps, -1);
    dax_inode_unwatch(dax, inode);
}

static void dax_map_free(VfsdDax *dax, VfsdDaxMap *m)
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
static GPtrArray *dax_all_maps(VfsdDax *dax)
{
    GPtrArray *all = g_ptr_array_new();

    g_tree_foreach(dax->maps, collect_map, all);
    return all;
}

/*
 * The exec policy.  What many guests share on a root file system or a
 * package store, and keep in memory as long as they run, is what they map:
 * programs, shared libraries, interpreters' extension modules.  Through
 * the window those pages are the host's page cache, one copy for all the
 * guests; outside it, each guest holds a copy in its own RAM.  A program
 * has an execute bit, but Debian installs shared libraries and Python's
 * extension modules 0644, so the file's first bytes are looked at too:
 * an open, a 4-byte read and a close, here, for each regular file with
 * no execute bit and a size between an ELF header's and the large files'
 * threshold, in the entry replies (LOOKUP, READDIRPLUS, CREATE...): the
 * guest decides once per inode, when it makes it, whether it maps it.
 * The verdict is kept in the inode with a stamp of the file's mtime and
 * size, and made again at the next entry reply only if one of them
 * changed (not the ctime, which every chmod of an unpack moves); the
 * other replies (GETATTR, SETATTR) repeat it, stale or not, as the guest
 * keeps its inode's choice anyway.  So an unpack, whose files are
 * created empty and then written and SETATTR'ed, looks at none of them:
 * by the ctime at every reply, a source tree's unpack and copy looked at
 * each file seven times (docs/benchmarks/density.md).  A file that turns
 * into an ELF object (a linker's output) goes into the window once the
 * guest drops its inode and looks it up again.  An empty file stays out
 * whatever its mode: that is one being created, whose data the guest
 * writes rather than maps.
 */
#define ELF_MIN_SIZE 52         /* the smallest ELF header, ELFCLASS32 */
#define ELF_CHECKED 2ULL
#define ELF_YES 1ULL
#define ELF_STAMP_MASK (~3ULL)

static uint64_t elf_stamp(const struct statx *stx)
{
    uint64_t mtime = (uint64_t)stx->stx_mtime.tv_sec * 1000000000ULL +
                     stx->stx_mtime.tv_nsec;

    /*
     * A collision, or content rewritten with its size and mtime kept,
     * costs a stale verdict: a file in or out of the window, never data
     */
    return (mtime ^ (stx->stx_size * 0x9e3779b97f4a7c15ULL)) & ELF_STAMP_MASK;
}

static bool dax_is_elf(VfsdFs *fs, VfsdInode *inode,
                       const struct statx *stx, bool entry)
{
    static const char magic[4] = { 0x7f, 'E', 'L', 'F' };
    uint64_t stamp = elf_stamp(stx);
    uint64_t verdict = __atomic_load_n(&inode->elf_verdict, __ATOMIC_RELAXED);
    int64_t start;
    char head[4];
    bool elf;
    int fd;

    if (!entry ||
        ((verdict & ELF_CHECKED) && (verdict & ELF_STAMP_MASK) == stamp)) {
        return verdict & ELF_YES;
    }
    start = fs->stats ? vfsd_stats_now() : 0;
    /* Atime is not ours to change: the guest did not read the file */
    fd = vfsd_fd_open(fs, inode, O_RDONLY | O_NOATIME);
    if (fd == -EPERM) {
        /* O_NOATIME needs the file's owner or CAP_FOWNER */
        fd = vfsd_fd_open(fs, inode, O_RDONLY);
    }
    if (fd < 0) {
        /*
         * Unreadable to us, or out of fds: no verdict to keep, the guest
         * reads such a file through the queue if it can at all.
         */
        return false;
    }
    elf = pread(fd, head, sizeof(head), 0) == sizeof(head) &&
          !memcmp(head, magic, sizeof(magic));
    vfsd_fd_close(fs, fd);
    if (fs->stats) {
        vfsd_stats_record(fs->stats, VFSD_STATS_DAX_ELF_CHECK, start);
    }
    __atomic_store_n(&inode->elf_verdict,
                     stamp | ELF_CHECKED | (elf ? ELF_YES : 0),
                     __ATOMIC_RELAXED);
    return elf;
}

static bool dax_exec_wanted(VfsdFs *fs, VfsdInode *inode,
                            const struct statx *stx, bool entry)
{
    if (stx->stx_size == 0) {
        return false;
    }
    if (stx->stx_size >= fs->opts->dax_min_size ||
        (stx->stx_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
        return true;
    }
    return stx->stx_size >= ELF_MIN_SIZE && dax_is_elf(fs, inode, stx, entry);
}

bool vfsd_dax_wanted(VfsdFs *fs, VfsdInode *inode, const struct statx *stx,
                     bool entry)
{
    char procname[32];

    if (!(fs->conn.flags & FUSE_HAS_INODE_DAX) || !S_ISREG(stx->stx_mode)) {
        return false;
    }
    if (!vfsd_dax_size_mappable(fs, stx->stx_size)) {
        return false;
    }
    switch (fs->opts->dax_policy) {
    case VFSD_DAX_NEVER:
        return false;
    case VFSD_DAX_ALWAYS:
        return true;
    case VFSD_DAX_SIZE:
        return stx->stx_size >= fs->opts->dax_min_size;
    case VFSD_DAX_XATTR:
        /*
         * By the inode's /proc/self/fd name, relative to the working
         * directory (see fs-xattr.c), rather than through an fd opened
         * for it: this runs for every attribute reply, and such an fd
         * would be one more the fd accounting does not bound.
         */
        snprintf(procname, sizeof(procname), "%d", inode->fd);
        return getxattr(procname, VFSD_DAX_XATTR_NAME, NULL, 0) >= 0;
    case VFSD_DAX_EXEC:
        return dax_exec_wanted(fs, inode, stx, entry);
    }
    return false;
}

static void dax_restoring_free(VfsdDax *dax);

void vfsd_dax_free(VfsdDax *dax)
{
    g_autoptr(GPtrArray) all = NULL;
    unsigned int i;

    if (!dax) {
        return;
    }
    all = dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        dax_map_free(dax, g_ptr_array_index(all, i));
    }
    g_tree_destroy(dax->maps);
    g_hash_table_destroy(dax->wds);
    g_array_free(dax->truncating, true);
    /* Every request is done: nothing is pending */
    g_ptr_array_free(dax->pending, true);
    dax_restoring_free(dax);
    if (dax->watch_fd >= 0) {
        close(dax->watch_fd);
    }
    if (dax->flush_fd >= 0) {
        close(dax->flush_fd);
    }
    g_mutex_clear(&dax->lock);
    g_free(dax);
}

bool vfsd_dax_available(VfsdFs *fs)
{
    return fs->dax && fs->dax->be.available(fs->dax->be.opaque);
}

unsigned int vfsd_dax_count(VfsdFs *fs)
{
    unsigned int n;

    /* What the guest has mapped: the ranges it removed do not count */
    dax_lock(fs->dax);
    n = g_tree_nnodes(fs->dax->maps) - fs->dax->released.length;
    g_mutex_unlock(&fs->dax->lock);
    return n;
}

/*
 * The mappings that overlap [start, end), in window order.
 * Called with the lock held.
 */
static GPtrArray *dax_overlapping(VfsdDax *dax, uint64_t start, uint64_t end)
{
    GPtrArray *found = g_ptr_array_new();
    GTreeNode *node = g_tree_lower_bound(dax->maps, &start);
    GTreeNode *prev;
    VfsdDaxMap *m;

    /* The mapping just before start may reach into the range */
    prev = node ? g_tree_node_previous(node) : g_tree_node_last(dax->maps);
    if (prev) {
        m = g_tree_node_value(prev);
        if (m->moffset + m->len > start) {
            g_ptr_array_add(found, m);
        }
    }
    for (; node; node = g_tree_node_next(node)) {
        m = g_tree_node_value(node);
        if (m->moffset >= end) {
            break;
        }
        g_ptr_array_add(found, m);
    }
    return found;
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
static bool dax_send_unmaps(VfsdDax *dax, GPtrArray *maps, bool wait)
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

static void dax_free_maps(VfsdDax *dax, GPtrArray *maps)
{
    unsigned int i;

    for (i = 0; i < maps->len; i++) {
        dax_map_free(dax, g_ptr_array_index(maps, i));
    }
}

/*
 * The same, and the records go.  Lock held.  They go whatever the
 * front-end answered, as it drops what it cannot keep.
 */
static bool dax_unmap_maps(VfsdDax *dax, GPtrArray *maps, bool wait)
{
    bool ok = dax_send_unmaps(dax, maps, wait);

    dax_free_maps(dax, maps);
    return ok;
}

static bool dax_lazy(VfsdDax *dax)
{
    return dax->flush_fd >= 0 && dax->be.can_replace(dax->be.opaque);
}

/* Fires the flush timer @ns from now (at least 1 ns: 0 disarms it) */
static void dax_arm_flush(VfsdDax *dax, int64_t ns)
{
    struct itimerspec its = { };

    ns = MAX(ns, 1);
    its.it_value.tv_sec = ns / 1000000000;
    its.it_value.tv_nsec = ns % 1000000000;
    if (timerfd_settime(dax->flush_fd, 0, &its, NULL) < 0) {
        vfsd_err("DAX: cannot arm the unmap timer: %s", strerror(errno));
    }
}

/* The guest removed @maps: keep them mapped for now.  Lock held. */
static void dax_release_maps(VfsdDax *dax, GPtrArray *maps)
{
    int64_t now = vfsd_stats_now();
    bool was_empty = g_queue_is_empty(&dax->released);
    unsigned int i;

    for (i = 0; i < maps->len; i++) {
        VfsdDaxMap *m = g_ptr_array_index(maps, i);

        m->released = true;
        m->released_at = now;
        m->released_link.data = m;
        g_queue_push_tail_link(&dax->released, &m->released_link);
    }
    if (was_empty && maps->len) {
        dax_arm_flush(dax, dax->unmap_delay_ns);
    }
}

static gint cmp_map_moffset(gconstpointer a, gconstpointer b)
{
    const VfsdDaxMap *x = *(VfsdDaxMap * const *)a;
    const VfsdDaxMap *y = *(VfsdDaxMap * const *)b;

    return x->moffset < y->moffset ? -1 : x->moffset > y->moffset;
}

bool vfsd_dax_lazy_start(VfsdDax *dax, unsigned int delay_ms, char **err)
{
    dax->flush_fd = timerfd_create(CLOCK_MONOTONIC,
                                   TFD_NONBLOCK | TFD_CLOEXEC);
    if (dax->flush_fd < 0) {
        *err = g_strdup_printf("cannot delay DAX unmaps: timerfd_create: %s",
                               strerror(errno));
        return false;
    }
    dax->unmap_delay_ns = delay_ms * 1000000LL;
    return true;
}

int vfsd_dax_flush_fd(VfsdDax *dax)
{
    return dax->flush_fd;
}

void vfsd_dax_flush(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) due = g_ptr_array_new();
    uint64_t expirations;
    int64_t now;
    GList *l;

    /* Only clears the readable state; the queue says what is due */
    if (read(dax->flush_fd, &expirations, sizeof(expirations)) < 0 &&
        errno != EAGAIN) {
        vfsd_err("DAX: unmap timer: %s", strerror(errno));
    }

    dax_lock(dax);
    now = vfsd_stats_now();
    for (l = dax->released.head; l; l = l->next) {
        VfsdDaxMap *m = l->data;

        if (m->busy) {
            /* A map is taking it over; re-armed if that fails */
            continue;
        }
        if (now - m->released_at < dax->unmap_delay_ns) {
            dax_arm_flush(dax, m->released_at + dax->unmap_delay_ns - now);
            break;
        }
        g_ptr_array_add(due, m);
        if (fs->stats) {
            vfsd_stats_record(fs->stats, VFSD_STATS_DAX_UNMAPPED_LATE,
                              m->released_at);
        }
    }
    if (due->len) {
        /* In window order, so that neighbours go in one unmap */
        g_ptr_array_sort(due, cmp_map_moffset);
        dax_unmap_maps(dax, due, false);
    }
    g_mutex_unlock(&dax->lock);
}

static bool dax_range_ok(uint64_t off, uint64_t len)
{
    return len && !(off % VFSD_DAX_ALIGN) && !(len % VFSD_DAX_ALIGN) &&
           off + len > off;
}

/* What a SETUPMAPPING asks: @len bytes of the file at @foffset */
typedef struct VfsdDaxSetup {
    uint64_t foffset;
    uint64_t len;
    uint64_t moffset;
} VfsdDaxSetup;

/* The request's own checks, before any inode or fd is taken */
static int setup_check(VfsdFs *fs, const VfsdDaxSetup *in)
{
    if (!vfsd_dax_available(fs)) {
        return -EOPNOTSUPP;
    }
    if (!dax_range_ok(in->moffset, in->len) ||
        !dax_range_ok(in->foffset, in->len) ||
        in->foffset + in->len > (uint64_t)INT64_MAX ||
        (fs->opts->cache_size &&
         in->moffset + in->len > fs->opts->cache_size)) {
        vfsd_guest_error("SETUPMAPPING: bad range foffset 0x%" PRIx64
                         " moffset 0x%" PRIx64 " len 0x%" PRIx64,
                         in->foffset, in->moffset, in->len);
        return -EINVAL;
    }
    return 0;
}

/*
 * The guest sends no file handle (fh is -1): open the inode ourselves,
 * writable only when the guest asks for a writable mapping.  The
 * front-end keeps its own reference to the file once mapped.
 *
 * A front-end that cannot replace a mapping atomically (upstream QEMU)
 * would leave a read-only range unmapped for a moment when the guest
 * upgrades it to writable, and a guest thread reading it then would
 * see zeros.  There, a range is mapped writable from the start when
 * the file opens for writing, and the upgrade finds nothing to do:
 * *@writable and *@flags then say so.  Returns an accounted fd.
 */
static int setup_open(VfsdFs *fs, VfsdInode *inode, bool *writable,
                      uint64_t *flags)
{
    VfsdDax *dax = fs->dax;
    bool eager_rw = !*writable && !fs->opts->readonly &&
                    !dax->be.can_replace(dax->be.opaque);
    int fd;

    fd = vfsd_fd_open(fs, inode, *writable || eager_rw ? O_RDWR : O_RDONLY);
    if (fd < 0 && eager_rw) {
        fd = vfsd_fd_open(fs, inode, O_RDONLY);
    } else if (fd >= 0 && eager_rw) {
        *writable = true;
        *flags |= VFSD_DAX_MAP_RW;
    }
    return fd;
}

static bool dax_truncating(VfsdDax *dax, dev_t dev, ino_t ino,
                           uint64_t *size);
static bool dax_file_resize(VfsdFs *fs, dev_t dev, ino_t ino, uint64_t size);

/*
 * The map path.  The front-end round trip of a SETUPMAPPING is made
 * without the window's lock, so that the requests that need the lock
 * meanwhile (attribute replies that check sizes, REMOVEMAPPING, the maps
 * of other inodes) are not held up behind it:
 *
 * - under the lock, the range is checked and reserved: a pending entry in
 *   VfsdDax.pending, and the mappings it replaces or unmaps first (@old)
 *   marked busy;
 * - without it, those are unmapped if need be and the range is mapped;
 * - under the lock again, the new mapping is recorded and @old forgotten,
 *   or, if the front-end refused, the reservation is undone.
 *
 * A SETUPMAPPING holds its inode's setup_lock throughout: one file's
 * ranges are set up in order, one at a time.  Nothing else touches a
 * reserved range meanwhile: a request that would is a guest's that races
 * with its own SETUPMAPPING of the range (the guest does not use a range
 * before the reply), and gets -EINVAL, as requests that cut through a
 * mapping do; resizes leave pending and busy mappings alone, and the
 * SETUPMAPPING brings them in line with the file's size when it records
 * (setup_settle()); FUSE_DESTROY waits for it (dax_wait_setups()).
 */

/*
 * Whether [start, end) meets a range a SETUPMAPPING reserved.  Lock
 * held.  A handful at most, one per request being served.
 */
static bool dax_pending_overlap(VfsdDax *dax, uint64_t start, uint64_t end)
{
    unsigned int i;

    for (i = 0; i < dax->pending->len; i++) {
        VfsdDaxMap *p = g_ptr_array_index(dax->pending, i);

        if (p->moffset < end && start < p->moffset + p->len) {
            return true;
        }
    }
    return false;
}

/*
 * Sorts the mappings in the way of the new one into @old (it covers all
 * they map: replaced) and @stale (unmapped first).  Returns 1 when the
 * range is already mapped as asked, -EINVAL when it cuts through a live
 * mapping or meets a range another request is setting up, else 0.  Lock
 * held.
 */
static int setup_sort_overlap(VfsdDax *dax, VfsdInode *inode,
                              const VfsdDaxSetup *in,
                              uint64_t keep, bool writable, GPtrArray *old,
                              GPtrArray *stale)
{
    g_autoptr(GPtrArray) overlap = NULL;
    VfsdDaxMap *m;
    unsigned int i;

    overlap = dax_overlapping(dax, in->moffset, in->moffset + in->len);
    for (i = 0; i < overlap->len; i++) {
        if (((VfsdDaxMap *)g_ptr_array_index(overlap, i))->busy) {
            break;
        }
    }
    if (i < overlap->len ||
        dax_pending_overlap(dax, in->moffset, in->moffset + in->len)) {
        vfsd_guest_error("SETUPMAPPING: window range 0x%" PRIx64 "+0x%"
                         PRIx64 " meets a range another request is "
                         "setting up", in->moffset, in->len);
        return -EINVAL;
    }
    if (overlap->len == 1) {
        m = g_ptr_array_index(overlap, 0);
        if (m->inode == inode && m->moffset == in->moffset &&
            m->len == in->len && m->mapped == keep &&
            m->foffset == in->foffset && !m->released &&
            (m->writable || !writable)) {
            /* Already mapped as asked, e.g. an upgrade of an eager map */
            return 1;
        }
    }
    for (i = 0; i < overlap->len; i++) {
        m = g_ptr_array_index(overlap, i);
        if (m->moffset >= in->moffset &&
            m->moffset + m->len <= in->moffset + in->len) {
            /*
             * Replaced in one step only if the new mapping covers all
             * the old one maps: not when the file is shorter than the
             * range the old one keeps (another file's, or this one's
             * before a truncate).
             */
            if (m->moffset + m->mapped <= in->moffset + keep) {
                g_ptr_array_add(old, m);
            } else {
                g_ptr_array_add(stale, m);
            }
        } else if (m->released) {
            /* Gone for the guest: in our way only */
            g_ptr_array_add(stale, m);
        } else {
            vfsd_guest_error("SETUPMAPPING: window range 0x%" PRIx64 "+0x%"
                             PRIx64 " cuts through an existing mapping",
                             in->moffset, in->len);
            return -EINVAL;
        }
    }
    return 0;
}

/* A SETUPMAPPING from its reservation to its record or roll back */
typedef struct VfsdDaxClaim {
    VfsdDaxMap *m;              /* pending: the new mapping */
    GPtrArray *old;             /* busy: replaced by it, or unmapped first */
    uint64_t flags;
    uint64_t size;              /* the file's, read at the reservation */
} VfsdDaxClaim;

/*
 * Checks the request against the window and reserves its range.  The
 * size the new mapping follows is read here, under the lock, as any
 * resize reads it; setup_settle() catches up with a resize that comes
 * before the record.  Returns 1 when there is nothing to map, 0 when
 * reserved, or a negative errno.  Lock held.
 */
static int setup_reserve(VfsdFs *fs, VfsdInode *inode,
                         const VfsdDaxSetup *in, int fd, bool writable,
                         uint64_t flags, VfsdDaxClaim *claim)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) stale = g_ptr_array_new();
    struct stat st;
    VfsdDaxMap *m;
    unsigned int i;
    uint64_t keep;
    int ret;

    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    keep = dax_keep(dax, in->foffset, in->len, st.st_size);
    if (dax_upstream(dax) && in->foffset + keep < (uint64_t)st.st_size &&
        keep < in->len) {
        /* The guest would read zeros for the file's last bytes */
        vfsd_guest_error("SETUPMAPPING: the front-end cannot map file "
                         "offset 0x%" PRIx64 "+0x%" PRIx64 " of a file of "
                         "%" PRIu64 " bytes: it maps no partial page at the "
                         "end of a file (mount with -o dax=inode: only "
                         "files of whole pages then use DAX)", in->foffset,
                         in->len, (uint64_t)st.st_size);
        return -EIO;
    }
    ret = setup_sort_overlap(dax, inode, in, keep, writable, claim->old,
                             stale);
    if (ret) {
        return ret;
    }
    /* Queued before our map, which the front-end handles after them */
    if (stale->len && !dax_unmap_maps(dax, stale, false)) {
        return -EIO;
    }
    if (claim->old->len && keep && dax->be.can_replace(dax->be.opaque)) {
        /*
         * e.g. a read-only range upgraded to writable while other guest
         * threads read through it: one atomic replacement, so the range
         * never reads anything but the file.
         */
        flags |= VFSD_DAX_MAP_REPLACE;
    }
    for (i = 0; i < claim->old->len; i++) {
        ((VfsdDaxMap *)g_ptr_array_index(claim->old, i))->busy = true;
    }
    m = g_new0(VfsdDaxMap, 1);
    m->moffset = in->moffset;
    m->len = in->len;
    m->foffset = in->foffset;
    m->mapped = keep;
    m->writable = writable;
    m->inode = inode;
    m->pending = true;
    vfsd_inode_ref(inode);
    g_ptr_array_add(dax->pending, m);
    claim->m = m;
    claim->flags = flags;
    claim->size = st.st_size;
    return 0;
}

/*
 * Maps the first @keep bytes of the range.  Only the part of the range
 * the file backs is mapped: a page past the end of a file faults when
 * touched, and a fault in QEMU is not always one it survives (see "Never
 * past the end of file" above).  The rest keeps the window's zeros until
 * the file grows.  Without the lock, but for a migration's restore.
 */
static int setup_map(VfsdFs *fs, const VfsdDaxSetup *in,
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
 * The front-end round trips of a reserved range, without the lock: @old
 * unmapped unless the map replaces them in one step, then the map.
 */
static int setup_send(VfsdFs *fs, const VfsdDaxSetup *in,
                      const VfsdDaxClaim *claim, int fd)
{
    if (claim->old->len && !(claim->flags & VFSD_DAX_MAP_REPLACE) &&
        !dax_send_unmaps(fs->dax, claim->old, true)) {
        return -EIO;
    }
    return setup_map(fs, in, claim->m->mapped, claim->flags, fd);
}

/*
 * The mappings of @inode's file that the resizes left alone while a
 * SETUPMAPPING had them follow the size @size read before: brings the
 * file's mappings in line with its size now, if it changed.  While a
 * truncate of ours is under way, whose end does it anyway, they are only
 * kept short of the size it sets, as its beginning would have done.
 * Lock held.
 */
static void setup_settle(VfsdFs *fs, VfsdInode *inode, int fd,
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

/*
 * Records @m, a new mapping of @inode, in place of @old.  Lock held.
 */
static void setup_record(VfsdFs *fs, VfsdInode *inode, VfsdDaxMap *m,
                         GPtrArray *old, uint64_t size)
{
    /* First, so that upgrading a range keeps the file's watch */
    dax_inode_attach(fs->dax, inode, size);
    /* Then, as one of them may sit at the same window offset */
    dax_free_maps(fs->dax, old);
    m->pending = false;
    g_tree_insert(fs->dax->maps, &m->moffset, m);
}

/*
 * Records the new mapping and forgets those it replaced, or after @ret,
 * an error, forgets the reservation.  Lock held.
 */
static void setup_finish(VfsdFs *fs, VfsdInode *inode, int fd,
                         VfsdDaxClaim *claim, int ret)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) files = NULL;
    bool replace = claim->flags & VFSD_DAX_MAP_REPLACE;
    VfsdDaxMap *m;
    unsigned int i;

    g_ptr_array_remove_fast(dax->pending, claim->m);
    for (i = 0; i < claim->old->len; i++) {
        m = g_ptr_array_index(claim->old, i);
        m->busy = false;
        if (!ret && replace && m->released && fs->stats) {
            vfsd_stats_record(fs->stats, VFSD_STATS_DAX_TAKEN_OVER,
                              m->released_at);
        }
    }
    if (!ret) {
        setup_record(fs, inode, claim->m, claim->old, claim->size);
        setup_settle(fs, inode, fd, claim->size);
        return;
    }
    vfsd_inode_unref(claim->m->inode);
    g_free(claim->m);
    if (!replace) {
        /* Unmapped, or the front-end dropped them */
        dax_free_maps(dax, claim->old);
        return;
    }
    /* Still mapped: each file's may have changed size meanwhile */
    files = g_ptr_array_new_with_free_func((GDestroyNotify)vfsd_inode_unref);
    for (i = 0; i < claim->old->len; i++) {
        m = g_ptr_array_index(claim->old, i);
        if (m->released && dax_lazy(dax)) {
            /* The flush left it alone: on time, or late now */
            dax_arm_flush(dax, 1);
        }
        if (!g_ptr_array_find(files, m->inode, NULL)) {
            vfsd_inode_ref(m->inode);
            g_ptr_array_add(files, m->inode);
        }
    }
    /* Apart: a resize may free mappings of @old */
    for (i = 0; i < files->len; i++) {
        VfsdInode *other = g_ptr_array_index(files, i);

        if (dax_inode_mapped(other)) {
            setup_settle(fs, other, other->fd, dax_inode_size(other));
        }
    }
}

int vfsd_op_setupmapping(VfsdFs *fs, uint64_t nodeid, uint64_t foffset,
                         uint64_t len, uint64_t moffset, bool writable)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(VfsdInode) inode = NULL;
    g_autoptr(GPtrArray) old = g_ptr_array_new();
    const VfsdDaxSetup req = {
        .foffset = foffset, .len = len, .moffset = moffset,
    };
    const VfsdDaxSetup *in = &req;
    VfsdDaxClaim claim = { .old = old };
    uint64_t flags = writable ? VFSD_DAX_MAP_RW : 0;
    VfsdDaxInode *d;
    int fd, ret;

    ret = setup_check(fs, in);
    if (ret) {
        return ret;
    }
    inode = vfsd_inode_get(fs, nodeid);
    if (!inode) {
        return -errno;
    }
    if (inode->type != S_IFREG) {
        return -EINVAL;
    }
    if (writable && fs->opts->readonly) {
        return -EROFS;
    }
    fd = setup_open(fs, inode, &writable, &flags);
    if (fd < 0) {
        return fd;
    }
    d = dax_of_new(inode);
    dax_lock_mutex(dax, &d->setup_lock);
    dax_lock(dax);
    dax_inode_watch(dax, inode);
    ret = setup_reserve(fs, inode, in, fd, writable, flags, &claim);
    if (!ret) {
        g_mutex_unlock(&dax->lock);
        ret = setup_send(fs, in, &claim, fd);
        dax_lock(dax);
        setup_finish(fs, inode, fd, &claim, ret);
    }
    /* A failed request leaves no watch behind */
    dax_inode_unwatch(dax, inode);
    g_mutex_unlock(&dax->lock);
    g_mutex_unlock(&d->setup_lock);
    vfsd_fd_close(fs, fd);
    return ret < 0 ? ret : 0;
}

static int cmp_removemapping(const void *a, const void *b)
{
    const VfsdDaxRange *x = a, *y = b;

    return x->moffset < y->moffset ? -1 : x->moffset > y->moffset;
}

int vfsd_op_removemapping(VfsdFs *fs, const VfsdDaxRange *ranges,
                          uint32_t count)
{
    VfsdDax *dax = fs->dax;
    g_autofree VfsdDaxRange *r = NULL;
    g_autoptr(GPtrArray) doomed = g_ptr_array_new();
    uint32_t i, n = 0;
    int64_t start;
    int ret = 0;

    if (!vfsd_dax_available(fs)) {
        return -EOPNOTSUPP;
    }
    r = g_memdup2(ranges, count * sizeof(*ranges));
    for (i = 0; i < count; i++) {
        if (!dax_range_ok(r[i].moffset, r[i].len)) {
            vfsd_guest_error("REMOVEMAPPING: bad range 0x%" PRIx64 "+0x%"
                             PRIx64, r[i].moffset, r[i].len);
            return -EINVAL;
        }
    }

    /* Sorted and merged, adjacent guest ranges become one unmap */
    qsort(r, count, sizeof(*r), cmp_removemapping);
    for (i = 0; i < count; i++) {
        if (n && r[n - 1].moffset + r[n - 1].len > r[i].moffset) {
            vfsd_guest_error("REMOVEMAPPING: overlapping ranges");
            return -EINVAL;
        }
        if (n && r[n - 1].moffset + r[n - 1].len == r[i].moffset) {
            r[n - 1].len += r[i].len;
        } else {
            r[n++] = r[i];
        }
    }

    dax_lock(dax);
    for (i = 0; i < n; i++) {
        g_autoptr(GPtrArray) in = dax_overlapping(dax, r[i].moffset,
                                                  r[i].moffset + r[i].len);
        unsigned int j;

        if (dax_pending_overlap(dax, r[i].moffset, r[i].moffset + r[i].len)) {
            goto busy;
        }
        for (j = 0; j < in->len; j++) {
            VfsdDaxMap *m = g_ptr_array_index(in, j);

            if (m->busy) {
                goto busy;
            }
            if (m->released) {
                /* Removed already; a retry, or a range around it */
                continue;
            }
            if (m->moffset < r[i].moffset ||
                m->moffset + m->len > r[i].moffset + r[i].len) {
                vfsd_guest_error("REMOVEMAPPING: range 0x%" PRIx64 "+0x%"
                                 PRIx64 " cuts through a mapping",
                                 r[i].moffset, r[i].len);
                ret = -EINVAL;
                goto out;
            }
            g_ptr_array_add(doomed, m);
        }
    }
    /*
     * Ranges with nothing mapped are accepted: the guest may retry a
     * removal whose reply it lost, and there is nothing left to undo.
     */
    if (dax_lazy(dax)) {
        dax_release_maps(dax, doomed);
        goto out;
    }
    start = fs->stats ? vfsd_stats_now() : 0;
    if (!dax_unmap_maps(dax, doomed, false)) {
        ret = -EIO;
    }
    if (fs->stats) {
        vfsd_stats_record(fs->stats, VFSD_STATS_FE_UNMAP, start);
    }
    goto out;
busy:
    /* The guest does not wait for its own SETUPMAPPING of the range */
    vfsd_guest_error("REMOVEMAPPING: range 0x%" PRIx64 "+0x%" PRIx64
                     " meets a range a SETUPMAPPING is setting up",
                     r[i].moffset, r[i].len);
    ret = -EINVAL;
out:
    g_mutex_unlock(&dax->lock);
    return ret;
}

/*
 * Returns, lock held, once no SETUPMAPPING is under way: each holds its
 * inode's setup_lock, waited for without the window's lock, which the
 * SETUPMAPPING needs to finish.  Lock held.
 */
static void dax_wait_setups(VfsdDax *dax)
{
    while (dax->pending->len) {
        VfsdDaxMap *p = g_ptr_array_index(dax->pending, 0);
        g_autoptr(VfsdInode) inode = p->inode;
        VfsdDaxInode *d = dax_of(inode);

        vfsd_inode_ref(inode);
        g_mutex_unlock(&dax->lock);
        dax_lock_mutex(dax, &d->setup_lock);
        g_mutex_unlock(&d->setup_lock);
        dax_lock(dax);
    }
}

void vfsd_dax_reset(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;

    dax_lock(dax);
    /* A map the front-end made after ours would outlive the session */
    dax_wait_setups(dax);
    all = dax_all_maps(dax);
    if (all->len && dax->be.available(dax->be.opaque)) {
        dax_unmap_maps(dax, all, true);
    } else {
        unsigned int i;

        for (i = 0; i < all->len; i++) {
            dax_map_free(dax, g_ptr_array_index(all, i));
        }
    }
    g_mutex_unlock(&dax->lock);
}

void vfsd_dax_forget_all(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;
    unsigned int i;

    dax_lock(dax);
    all = dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        dax_map_free(dax, g_ptr_array_index(all, i));
    }
    g_mutex_unlock(&dax->lock);
}

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
    g_autoptr(GPtrArray) all = dax_all_maps(dax);
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
            /* Its SETUPMAPPING brings it in line (setup_settle()) */
            continue;
        }
        dax_inode_set_size(m->inode, size);
        keep = dax_keep(dax, m->foffset, m->len, size);
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
        dax_unmap_maps(dax, released, true);
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

    dax_lock(dax);
    all = dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        VfsdInode *inode = ((VfsdDaxMap *)g_ptr_array_index(all, i))->inode;
        VfsdDaxInode *d = dax_of(inode);
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

        if (dax_inode_mapped(inode)) {
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
 * again under the lock when it records its mapping (setup_settle()),
 * after the growth.
 */
static bool dax_inode_may_need_resize(VfsdInode *inode, uint64_t size)
{
    VfsdDaxInode *d = dax_of(inode);

    return d && g_atomic_int_get(&d->maps) && size != dax_inode_size(inode);
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
    dax_lock(fs->dax);
    if (dax_inode_mapped(inode)) {
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
    dax_lock(fs->dax);
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
    dax_lock(fs->dax);
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
    if (!fs->dax || !dax_of(inode) || fstat(inode->fd, &st) < 0 ||
        !dax_inode_may_need_resize(inode, st.st_size)) {
        return;
    }
    dax_lock(fs->dax);
    dax_inode_recheck(fs, inode);
    g_mutex_unlock(&fs->dax->lock);
}

/*
 * Migration.  The table is the guest's view of the window: each range it
 * mapped and has not removed, by window offset, with the node id, file
 * offset and length it asked for and whether it is writable.  How much
 * of each range the file backs is not carried: the destination reads the
 * file's size again, as a SETUPMAPPING would.  Ranges the guest removed
 * but we keep mapped (lazy unmaps) are left out: nothing may touch them.
 *
 *   u32 version (VFSD_DAX_STATE_VERSION), u64 count, then count times
 *   u64 moffset, u64 len, u64 foffset, u64 nodeid, u32 flags
 *   (VFSD_DAX_STATE_RW), u32 zero
 */
#define VFSD_DAX_STATE_VERSION 1
#define VFSD_DAX_STATE_RW 1u
#define VFSD_DAX_STATE_RECORD (4 * 8 + 2 * 4)

typedef struct VfsdDaxSaved {
    uint64_t moffset;
    uint64_t len;
    uint64_t foffset;
    bool writable;
    VfsdInode *inode;           /* holds a reference */
} VfsdDaxSaved;

static void dax_restoring_free(VfsdDax *dax)
{
    unsigned int i;

    if (!dax->restoring) {
        return;
    }
    for (i = 0; i < dax->restoring->len; i++) {
        vfsd_inode_unref(g_array_index(dax->restoring, VfsdDaxSaved,
                                       i).inode);
    }
    g_array_free(dax->restoring, true);
    dax->restoring = NULL;
}

/*
 * What the guest wrote through writable mappings is in the host's page
 * cache of each file.  A destination on another host reaches the files
 * through shared storage and must find it there: write it back now,
 * while the guest is stopped.  On one host this costs only the writeback
 * the kernel would do anyway.
 */
static bool dax_write_back(VfsdFs *fs, GPtrArray *inodes, char **err)
{
    unsigned int i;

    for (i = 0; i < inodes->len; i++) {
        VfsdInode *inode = g_ptr_array_index(inodes, i);
        int fd = vfsd_fd_open(fs, inode, O_RDONLY);
        int ret = fd < 0 ? fd : fdatasync(fd) < 0 ? -errno : 0;

        if (fd >= 0) {
            vfsd_fd_close(fs, fd);
        }
        if (ret) {
            *err = g_strdup_printf("DAX: cannot write back node %" PRIu64
                                   ", mapped writable: %s", inode->nodeid,
                                   strerror(-ret));
            return false;
        }
    }
    return true;
}

bool vfsd_dax_save(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;
    g_autoptr(GPtrArray) written = NULL;
    uint64_t count = 0;
    size_t count_at = 0;
    unsigned int i;

    if (!dax) {
        return true;
    }
    written = g_ptr_array_new_with_free_func((GDestroyNotify)vfsd_inode_unref);
    dax_lock(dax);
    all = dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        VfsdDaxMap *m = g_ptr_array_index(all, i);

        if (m->released) {
            continue;
        }
        if (!count) {
            vfsd_mig_put_u32(w, VFSD_DAX_STATE_VERSION);
            count_at = vfsd_mig_tell(w);
            vfsd_mig_put_u64(w, 0);
        }
        vfsd_mig_put_u64(w, m->moffset);
        vfsd_mig_put_u64(w, m->len);
        vfsd_mig_put_u64(w, m->foffset);
        vfsd_mig_put_u64(w, m->inode->nodeid);
        vfsd_mig_put_u32(w, m->writable ? VFSD_DAX_STATE_RW : 0);
        vfsd_mig_put_u32(w, 0);
        count++;
        if (m->writable && !g_ptr_array_find(written, m->inode, NULL)) {
            vfsd_inode_ref(m->inode);
            g_ptr_array_add(written, m->inode);
        }
    }
    g_mutex_unlock(&dax->lock);
    /* Nothing mapped, no section: the stream of a guest without DAX */
    if (!count) {
        return true;
    }
    vfsd_mig_patch_u64(w, count_at, count);
    if (!dax_write_back(fs, written, err)) {
        return false;
    }
    vfsd_info("migration: %" PRIu64 " DAX mappings saved; files mapped "
              "writable, written back: %u", count, written->len);
    return true;
}

/*
 * One record of the table, checked as a guest's SETUPMAPPING is, and
 * against the records before it (in window order, none overlapping).
 * False with *@err set if bad.
 */
static bool dax_load_record(VfsdFs *fs, VfsdMigReader *r, uint64_t prev_end,
                            VfsdDaxSaved *out, char **err)
{
    uint64_t nodeid;
    uint32_t flags, zero;

    out->moffset = vfsd_mig_get_u64(r);
    out->len = vfsd_mig_get_u64(r);
    out->foffset = vfsd_mig_get_u64(r);
    nodeid = vfsd_mig_get_u64(r);
    flags = vfsd_mig_get_u32(r);
    zero = vfsd_mig_get_u32(r);
    out->writable = flags & VFSD_DAX_STATE_RW;
    out->inode = NULL;
    if (r->bad) {
        *err = g_strdup("DAX mapping table: truncated");
        return false;
    }
    if ((flags & ~VFSD_DAX_STATE_RW) || zero ||
        !dax_range_ok(out->moffset, out->len) ||
        !dax_range_ok(out->foffset, out->len) ||
        out->foffset + out->len > (uint64_t)INT64_MAX ||
        out->moffset < prev_end) {
        *err = g_strdup_printf("DAX mapping table: bad mapping 0x%" PRIx64
                               "+0x%" PRIx64 " (file offset 0x%" PRIx64
                               ", flags 0x%x)", out->moffset, out->len,
                               out->foffset, flags);
        return false;
    }
    /* Said apart: a smaller window is a configuration, not a bad stream */
    if (fs->opts->cache_size &&
        out->moffset + out->len > fs->opts->cache_size) {
        *err = g_strdup_printf("DAX mapping table: bad mapping 0x%" PRIx64
                               "+0x%" PRIx64 " ends past this daemon's "
                               "window of 0x%" PRIx64 " bytes",
                               out->moffset, out->len,
                               fs->opts->cache_size);
        return false;
    }
    if (out->writable && fs->opts->readonly) {
        *err = g_strdup_printf("DAX mapping table: writable mapping at 0x%"
                               PRIx64 " on a read-only share",
                               out->moffset);
        return false;
    }
    out->inode = vfsd_inode_get(fs, nodeid);
    if (!out->inode || out->inode->type != S_IFREG) {
        *err = g_strdup_printf("DAX mapping table: mapping at 0x%" PRIx64
                               " names node %" PRIu64 ", which is %s",
                               out->moffset, nodeid,
                               out->inode ? "not a regular file" :
                               "not known here");
        g_clear_pointer(&out->inode, vfsd_inode_unref);
        return false;
    }
    return true;
}

bool vfsd_dax_load(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GArray) table = NULL;
    uint64_t count, i, prev_end = 0;
    uint32_t version;

    version = vfsd_mig_get_u32(r);
    if (!r->bad && version != VFSD_DAX_STATE_VERSION) {
        *err = g_strdup_printf("DAX mapping table: version %u, this "
                               "daemon reads version %u", version,
                               VFSD_DAX_STATE_VERSION);
        return false;
    }
    if (!vfsd_mig_get_count(r, VFSD_DAX_STATE_RECORD, &count)) {
        *err = g_strdup("DAX mapping table: truncated or bad count");
        return false;
    }
    if (!count) {
        *err = g_strdup("DAX mapping table: empty");
        return false;
    }
    if (!dax || !vfsd_dax_available(fs)) {
        *err = g_strdup_printf("DAX mapping table of %" PRIu64 " mappings, "
                               "but this front-end gives the daemon no DAX "
                               "window", count);
        return false;
    }
    /*
     * Such a front-end would not answer the map requests of
     * vfsd_dax_restore() while it waits for CHECK_DEVICE_STATE: the
     * restore would wait for ever.
     */
    if (!dax->be.can_migrate || !dax->be.can_migrate(dax->be.opaque)) {
        *err = g_strdup_printf("DAX mapping table of %" PRIu64 " mappings, "
                               "but this front-end does not restore a "
                               "window (no SHMEM_MIGRATE)", count);
        return false;
    }
    table = g_array_sized_new(false, false, sizeof(VfsdDaxSaved), count);
    for (i = 0; i < count; i++) {
        VfsdDaxSaved m;

        if (!dax_load_record(fs, r, prev_end, &m, err)) {
            break;
        }
        g_array_append_val(table, m);
        prev_end = m.moffset + m.len;
    }
    if (i < count) {
        for (i = 0; i < table->len; i++) {
            vfsd_inode_unref(g_array_index(table, VfsdDaxSaved, i).inode);
        }
        return false;
    }

    dax_lock(dax);
    if (g_tree_nnodes(dax->maps) || dax->pending->len || dax->restoring) {
        g_mutex_unlock(&dax->lock);
        for (i = 0; i < table->len; i++) {
            vfsd_inode_unref(g_array_index(table, VfsdDaxSaved, i).inode);
        }
        *err = g_strdup("DAX mapping table: the window is in use already");
        return false;
    }
    dax->restoring = g_steal_pointer(&table);
    g_mutex_unlock(&dax->lock);
    return true;
}

/* Maps one range of the table again, as its SETUPMAPPING did.  Lock held. */
static int dax_restore_one(VfsdFs *fs, const VfsdDaxSaved *m, int fd)
{
    VfsdDax *dax = fs->dax;
    VfsdDaxSetup in = {
        .foffset = m->foffset, .len = m->len, .moffset = m->moffset,
    };
    g_autoptr(GPtrArray) none = g_ptr_array_new();
    uint64_t flags = m->writable ? VFSD_DAX_MAP_RW : 0;
    struct stat st;
    uint64_t keep;
    int ret;

    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    keep = dax_keep(dax, m->foffset, m->len, st.st_size);
    ret = setup_map(fs, &in, keep, flags, fd);
    if (!ret) {
        VfsdDaxMap *r = g_new0(VfsdDaxMap, 1);

        r->moffset = m->moffset;
        r->len = m->len;
        r->foffset = m->foffset;
        r->mapped = keep;
        r->writable = m->writable;
        r->inode = m->inode;
        vfsd_inode_ref(m->inode);
        setup_record(fs, m->inode, r, none, st.st_size);
    }
    return ret;
}

bool vfsd_dax_restore(VfsdFs *fs, char **err)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GArray) table = NULL;
    unsigned int i;
    int ret = 0;

    if (!dax) {
        return true;
    }
    dax_lock(dax);
    table = g_steal_pointer(&dax->restoring);
    g_mutex_unlock(&dax->lock);
    for (i = 0; table && i < table->len; i++) {
        VfsdDaxSaved *m = &g_array_index(table, VfsdDaxSaved, i);
        int fd = vfsd_fd_open(fs, m->inode, m->writable ? O_RDWR : O_RDONLY);

        if (fd < 0) {
            ret = fd;
        } else {
            dax_lock(dax);
            dax_inode_watch(dax, m->inode);
            ret = dax_restore_one(fs, m, fd);
            dax_inode_unwatch(dax, m->inode);
            g_mutex_unlock(&dax->lock);
            vfsd_fd_close(fs, fd);
        }
        if (ret) {
            *err = g_strdup_printf("DAX: cannot map node %" PRIu64 " at "
                                   "window offset 0x%" PRIx64 " again: %s",
                                   m->inode->nodeid, m->moffset,
                                   strerror(-ret));
            break;
        }
    }
    for (i = 0; table && i < table->len; i++) {
        vfsd_inode_unref(g_array_index(table, VfsdDaxSaved, i).inode);
    }
    return !ret;
}

void vfsd_dax_load_cancel(VfsdFs *fs)
{
    if (fs->dax) {
        dax_lock(fs->dax);
        dax_restoring_free(fs->dax);
        g_mutex_unlock(&fs->dax->lock);
    }
}
