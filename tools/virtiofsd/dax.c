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
 * The window's files.  This one has the guest's requests on the window
 * (SETUPMAPPING and its map path, REMOVEMAPPING, the lazy unmaps, the
 * end of a session).  Below it, each with its header: dax-resize.c
 * (mappings cut and grown with their files' sizes, --watch-truncate),
 * dax-migrate.c (the table in a live migration's state) and dax-policy.c
 * (--dax-policy: which files the guest maps); below them dax-table.c,
 * which they all use: the table, its lock, what the window knows of an
 * inode (dax-table.h, with the lock order).  The rest of the daemon
 * includes only dax.h, which brings in the other files' headers.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "dax.h"
#include "dax-table.h"
#include "fd.h"
#include "inode.h"
#include "log.h"
#include "stats.h"

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

void vfsd_dax_free(VfsdDax *dax)
{
    g_autoptr(GPtrArray) all = NULL;
    unsigned int i;

    if (!dax) {
        return;
    }
    all = vfsd_dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        vfsd_dax_map_free(dax, g_ptr_array_index(all, i));
    }
    g_tree_destroy(dax->maps);
    g_hash_table_destroy(dax->wds);
    g_array_free(dax->truncating, true);
    /* Every request is done: nothing is pending */
    g_ptr_array_free(dax->pending, true);
    vfsd_dax_restoring_free(dax);
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
    vfsd_dax_lock(fs->dax);
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

    vfsd_dax_lock(dax);
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
        vfsd_dax_unmap_maps(dax, due, false);
    }
    g_mutex_unlock(&dax->lock);
}

/* The request's own checks, before any inode or fd is taken */
static int setup_check(VfsdFs *fs, const VfsdDaxSetup *in)
{
    if (!vfsd_dax_available(fs)) {
        return -EOPNOTSUPP;
    }
    if (!vfsd_dax_range_ok(in->moffset, in->len) ||
        !vfsd_dax_range_ok(in->foffset, in->len) ||
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
 * (vfsd_dax_setup_settle()); FUSE_DESTROY waits for it (dax_wait_setups()).
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
 * resize reads it; vfsd_dax_setup_settle() catches up with a resize that comes
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
    keep = vfsd_dax_keep(dax, in->foffset, in->len, st.st_size);
    if (vfsd_dax_upstream(dax) && in->foffset + keep < (uint64_t)st.st_size &&
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
    if (stale->len && !vfsd_dax_unmap_maps(dax, stale, false)) {
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
 * The front-end round trips of a reserved range, without the lock: @old
 * unmapped unless the map replaces them in one step, then the map.
 */
static int setup_send(VfsdFs *fs, const VfsdDaxSetup *in,
                      const VfsdDaxClaim *claim, int fd)
{
    if (claim->old->len && !(claim->flags & VFSD_DAX_MAP_REPLACE) &&
        !vfsd_dax_send_unmaps(fs->dax, claim->old, true)) {
        return -EIO;
    }
    return vfsd_dax_setup_map(fs, in, claim->m->mapped, claim->flags, fd);
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
        vfsd_dax_setup_record(fs, inode, claim->m, claim->old, claim->size);
        vfsd_dax_setup_settle(fs, inode, fd, claim->size);
        return;
    }
    vfsd_inode_unref(claim->m->inode);
    g_free(claim->m);
    if (!replace) {
        /* Unmapped, or the front-end dropped them */
        vfsd_dax_free_maps(dax, claim->old);
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

        if (vfsd_dax_inode_mapped(other)) {
            vfsd_dax_setup_settle(fs, other, other->fd,
                                  vfsd_dax_inode_size(other));
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
    d = vfsd_dax_of_new(inode);
    vfsd_dax_lock_mutex(dax, &d->setup_lock);
    vfsd_dax_lock(dax);
    vfsd_dax_inode_watch(dax, inode);
    ret = setup_reserve(fs, inode, in, fd, writable, flags, &claim);
    if (!ret) {
        g_mutex_unlock(&dax->lock);
        ret = setup_send(fs, in, &claim, fd);
        vfsd_dax_lock(dax);
        setup_finish(fs, inode, fd, &claim, ret);
    }
    /* A failed request leaves no watch behind */
    vfsd_dax_inode_unwatch(dax, inode);
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

/*
 * The guest's ranges, each checked, then sorted and merged so that
 * adjacent ones become one unmap: in *@out, their number in *@n.  False
 * (the guest's EINVAL) for a bad or overlapping range.
 */
static bool removal_ranges(const VfsdDaxRange *ranges, uint32_t count,
                           VfsdDaxRange **out, uint32_t *n)
{
    g_autofree VfsdDaxRange *r = g_memdup2(ranges, count * sizeof(*ranges));
    uint32_t i;

    for (i = 0; i < count; i++) {
        if (!vfsd_dax_range_ok(r[i].moffset, r[i].len)) {
            vfsd_guest_error("REMOVEMAPPING: bad range 0x%" PRIx64 "+0x%"
                             PRIx64, r[i].moffset, r[i].len);
            return false;
        }
    }
    qsort(r, count, sizeof(*r), cmp_removemapping);
    *n = 0;
    for (i = 0; i < count; i++) {
        VfsdDaxRange *last = *n ? &r[*n - 1] : NULL;

        if (last && last->moffset + last->len > r[i].moffset) {
            vfsd_guest_error("REMOVEMAPPING: overlapping ranges");
            return false;
        }
        if (last && last->moffset + last->len == r[i].moffset) {
            last->len += r[i].len;
        } else {
            r[(*n)++] = r[i];
        }
    }
    *out = g_steal_pointer(&r);
    return true;
}

/*
 * Called with the window's lock held: adds to @doomed the mappings that
 * @r covers.  -EINVAL where @r meets a range a SETUPMAPPING is setting
 * up, or cuts through a mapping.
 */
static int removal_collect_locked(VfsdDax *dax, const VfsdDaxRange *r,
                                  GPtrArray *doomed)
{
    g_autoptr(GPtrArray) in = dax_overlapping(dax, r->moffset,
                                              r->moffset + r->len);
    bool busy = dax_pending_overlap(dax, r->moffset, r->moffset + r->len);
    unsigned int j;

    for (j = 0; j < in->len && !busy; j++) {
        VfsdDaxMap *m = g_ptr_array_index(in, j);

        if (m->busy) {
            busy = true;
            break;
        }
        if (m->released) {
            /* Removed already; a retry, or a range around it */
            continue;
        }
        if (m->moffset < r->moffset ||
            m->moffset + m->len > r->moffset + r->len) {
            vfsd_guest_error("REMOVEMAPPING: range 0x%" PRIx64 "+0x%"
                             PRIx64 " cuts through a mapping",
                             r->moffset, r->len);
            return -EINVAL;
        }
        g_ptr_array_add(doomed, m);
    }
    if (busy) {
        /* The guest does not wait for its own SETUPMAPPING of the range */
        vfsd_guest_error("REMOVEMAPPING: range 0x%" PRIx64 "+0x%" PRIx64
                         " meets a range a SETUPMAPPING is setting up",
                         r->moffset, r->len);
        return -EINVAL;
    }
    return 0;
}

int vfsd_op_removemapping(VfsdFs *fs, const VfsdDaxRange *ranges,
                          uint32_t count)
{
    VfsdDax *dax = fs->dax;
    g_autofree VfsdDaxRange *r = NULL;
    g_autoptr(GPtrArray) doomed = g_ptr_array_new();
    uint32_t i, n;
    int64_t start;
    int ret = 0;

    if (!vfsd_dax_available(fs)) {
        return -EOPNOTSUPP;
    }
    if (!removal_ranges(ranges, count, &r, &n)) {
        return -EINVAL;
    }
    vfsd_dax_lock(dax);
    for (i = 0; i < n && ret == 0; i++) {
        ret = removal_collect_locked(dax, &r[i], doomed);
    }
    /*
     * Ranges with nothing mapped are accepted: the guest may retry a
     * removal whose reply it lost, and there is nothing left to undo.
     */
    if (ret == 0 && dax_lazy(dax)) {
        dax_release_maps(dax, doomed);
    } else if (ret == 0) {
        start = fs->stats ? vfsd_stats_now() : 0;
        if (!vfsd_dax_unmap_maps(dax, doomed, false)) {
            ret = -EIO;
        }
        if (fs->stats) {
            vfsd_stats_record(fs->stats, VFSD_STATS_FE_UNMAP, start);
        }
    }
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
        VfsdDaxInode *d = vfsd_dax_of(inode);

        vfsd_inode_ref(inode);
        g_mutex_unlock(&dax->lock);
        vfsd_dax_lock_mutex(dax, &d->setup_lock);
        g_mutex_unlock(&d->setup_lock);
        vfsd_dax_lock(dax);
    }
}

void vfsd_dax_reset(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;

    vfsd_dax_lock(dax);
    /* A map the front-end made after ours would outlive the session */
    dax_wait_setups(dax);
    all = vfsd_dax_all_maps(dax);
    if (all->len && dax->be.available(dax->be.opaque)) {
        vfsd_dax_unmap_maps(dax, all, true);
    } else {
        unsigned int i;

        for (i = 0; i < all->len; i++) {
            vfsd_dax_map_free(dax, g_ptr_array_index(all, i));
        }
    }
    g_mutex_unlock(&dax->lock);
}

void vfsd_dax_forget_all(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;
    unsigned int i;

    vfsd_dax_lock(dax);
    all = vfsd_dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        vfsd_dax_map_free(dax, g_ptr_array_index(all, i));
    }
    g_mutex_unlock(&dax->lock);
}
