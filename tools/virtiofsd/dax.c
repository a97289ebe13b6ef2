/*
 * virtiofsd: the DAX cache window
 *
 * The guest maps file ranges into the device's shared memory window with
 * FUSE_SETUPMAPPING and drops them with FUSE_REMOVEMAPPING.  We forward
 * both to the front-end and keep our own record of what is mapped,
 * because the front-end's rules are strict (no map over a map, unmaps
 * cover whole mappings) and everything goes on FUSE_DESTROY.
 *
 * A guest-initiated shrink (SETATTR size, O_TRUNC, punch hole) leaves the
 * mappings alone, on purpose: the guest keeps using its ranges after the
 * file grows again, so removing them behind its back loses its writes
 * (they land in the window, not in the file).  The guest never touches
 * pages past its own i_size, which it updates with the truncate, so those
 * mappings are harmless.  A truncate done on the host behind the guest's
 * back is another matter, and not something the daemon can prevent.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "dax.h"
#include "log.h"

/* Offsets and lengths must be page aligned: we announce 1 << 12 in INIT */
#define VFSD_DAX_ALIGN 4096ULL

struct VfsdDax {
    GMutex lock;
    GTree *maps;                /* &moffset -> VfsdDaxMap, disjoint */
    VfsdDaxBackend be;
};

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
    return dax;
}

static void dax_map_free(VfsdDax *dax, VfsdDaxMap *m)
{
    g_tree_remove(dax->maps, &m->moffset);
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

    g_mutex_lock(&fs->dax->lock);
    n = g_tree_nnodes(fs->dax->maps);
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
 * possible: the front-end accepts one unmap over adjacent mappings.
 * Called with the lock held.  Returns false if any unmap failed; the
 * records go anyway, as the front-end drops what it cannot keep.
 */
static bool dax_unmap_maps(VfsdDax *dax, GPtrArray *maps)
{
    bool ok = true;
    unsigned int i = 0, j;

    while (i < maps->len) {
        VfsdDaxMap *first = g_ptr_array_index(maps, i);
        uint64_t end = first->moffset + first->len;

        for (j = i + 1; j < maps->len; j++) {
            VfsdDaxMap *m = g_ptr_array_index(maps, j);

            if (m->moffset != end) {
                break;
            }
            end += m->len;
        }
        if (!dax->be.unmap(dax->be.opaque, first->moffset,
                           end - first->moffset)) {
            vfsd_err("DAX: front-end failed to unmap window range 0x%" PRIx64
                     "+0x%" PRIx64, first->moffset, end - first->moffset);
            ok = false;
        }
        for (; i < j; i++) {
            dax_map_free(dax, g_ptr_array_index(maps, i));
        }
    }
    return ok;
}

static bool dax_range_ok(uint64_t off, uint64_t len)
{
    return len && !(off % VFSD_DAX_ALIGN) && !(len % VFSD_DAX_ALIGN) &&
           off + len > off;
}

int vfsd_op_setupmapping(VfsdFs *fs, uint64_t nodeid,
                         const struct fuse_setupmapping_in *in)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(VfsdInode) inode = NULL;
    g_autoptr(GPtrArray) old = NULL;
    bool writable = in->flags & FUSE_SETUPMAPPING_FLAG_WRITE;
    uint64_t flags = writable ? VFSD_DAX_MAP_RW : 0;
    VfsdDaxMap *m;
    unsigned int i;
    int fd, ret = 0;

    if (!vfsd_dax_available(fs)) {
        return -EOPNOTSUPP;
    }
    if (in->flags & ~(FUSE_SETUPMAPPING_FLAG_WRITE |
                      FUSE_SETUPMAPPING_FLAG_READ)) {
        vfsd_guest_error("SETUPMAPPING: unknown flags 0x%" PRIx64, in->flags);
        return -EINVAL;
    }
    if (!dax_range_ok(in->moffset, in->len) ||
        !dax_range_ok(in->foffset, in->len) ||
        in->foffset + in->len > (uint64_t)INT64_MAX) {
        vfsd_guest_error("SETUPMAPPING: bad range foffset 0x%" PRIx64
                         " moffset 0x%" PRIx64 " len 0x%" PRIx64,
                         in->foffset, in->moffset, in->len);
        return -EINVAL;
    }
    inode = vfsd_inode_get(fs, nodeid);
    if (!inode) {
        return -ENOENT;
    }
    if (inode->type != S_IFREG) {
        return -EINVAL;
    }
    if (writable && fs->opts->readonly) {
        return -EROFS;
    }

    /*
     * The guest sends no file handle (fh is -1): open the inode ourselves,
     * writable only when the guest asks for a writable mapping.  The
     * front-end keeps its own reference to the file once mapped.
     */
    if (!vfsd_fd_reserve(fs)) {
        return -ENFILE;
    }
    fd = vfsd_reopen(fs, inode, writable ? O_RDWR : O_RDONLY);
    if (fd < 0) {
        vfsd_fd_release(fs);
        return fd;
    }

    g_mutex_lock(&dax->lock);
    old = dax_overlapping(dax, in->moffset, in->moffset + in->len);
    for (i = 0; i < old->len; i++) {
        m = g_ptr_array_index(old, i);
        if (m->moffset < in->moffset ||
            m->moffset + m->len > in->moffset + in->len) {
            vfsd_guest_error("SETUPMAPPING: window range 0x%" PRIx64 "+0x%"
                             PRIx64 " cuts through an existing mapping",
                             in->moffset, in->len);
            ret = -EINVAL;
            goto out;
        }
    }
    if (old->len) {
        if (dax->be.can_replace(dax->be.opaque)) {
            /*
             * e.g. a read-only range upgraded to writable while other
             * guest threads read through it: one atomic replacement, so
             * the range never reads anything but the file.
             */
            flags |= VFSD_DAX_MAP_REPLACE;
        } else if (!dax_unmap_maps(dax, old)) {
            ret = -EIO;
            goto out;
        }
    }
    if (!dax->be.map(dax->be.opaque, in->foffset, in->moffset, in->len,
                     flags, fd)) {
        vfsd_guest_error("SETUPMAPPING: front-end refused to map 0x%" PRIx64
                         "+0x%" PRIx64, in->moffset, in->len);
        ret = -EIO;
        goto out;
    }
    if (flags & VFSD_DAX_MAP_REPLACE) {
        for (i = 0; i < old->len; i++) {
            dax_map_free(dax, g_ptr_array_index(old, i));
        }
    }

    m = g_new0(VfsdDaxMap, 1);
    m->moffset = in->moffset;
    m->len = in->len;
    m->foffset = in->foffset;
    m->writable = writable;
    m->inode = inode;
    vfsd_inode_ref(inode);
    g_tree_insert(dax->maps, &m->moffset, m);
out:
    g_mutex_unlock(&dax->lock);
    close(fd);
    vfsd_fd_release(fs);
    return ret;
}

static int cmp_removemapping(const void *a, const void *b)
{
    const struct fuse_removemapping_one *x = a, *y = b;

    return x->moffset < y->moffset ? -1 : x->moffset > y->moffset;
}

int vfsd_op_removemapping(VfsdFs *fs,
                          const struct fuse_removemapping_one *ranges,
                          uint32_t count)
{
    VfsdDax *dax = fs->dax;
    g_autofree struct fuse_removemapping_one *r = NULL;
    g_autoptr(GPtrArray) doomed = g_ptr_array_new();
    uint32_t i, n = 0;
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

    g_mutex_lock(&dax->lock);
    for (i = 0; i < n; i++) {
        g_autoptr(GPtrArray) in = dax_overlapping(dax, r[i].moffset,
                                                  r[i].moffset + r[i].len);
        unsigned int j;

        for (j = 0; j < in->len; j++) {
            VfsdDaxMap *m = g_ptr_array_index(in, j);

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
    if (!dax_unmap_maps(dax, doomed)) {
        ret = -EIO;
    }
out:
    g_mutex_unlock(&dax->lock);
    return ret;
}

void vfsd_dax_reset(VfsdFs *fs)
{
    VfsdDax *dax = fs->dax;
    g_autoptr(GPtrArray) all = NULL;

    g_mutex_lock(&dax->lock);
    all = dax_all_maps(dax);
    if (all->len && dax->be.available(dax->be.opaque)) {
        dax_unmap_maps(dax, all);
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

    g_mutex_lock(&dax->lock);
    all = dax_all_maps(dax);
    for (i = 0; i < all->len; i++) {
        dax_map_free(dax, g_ptr_array_index(all, i));
    }
    g_mutex_unlock(&dax->lock);
}
