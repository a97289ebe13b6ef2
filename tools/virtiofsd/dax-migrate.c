/*
 * virtiofsd: the DAX window's mappings in a live migration's state
 *
 * migrate.c's "dax mappings" section: the source saves its table, the
 * destination checks it when loaded and maps it all again once the
 * whole state is read (dax-migrate.h says when).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "dax-migrate.h"
#include "dax-table.h"
#include "fd.h"
#include "inode.h"
#include "log.h"

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

void vfsd_dax_restoring_free(VfsdDax *dax)
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
    vfsd_dax_lock(dax);
    all = vfsd_dax_all_maps(dax);
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
        !vfsd_dax_range_ok(out->moffset, out->len) ||
        !vfsd_dax_range_ok(out->foffset, out->len) ||
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
    if (!dax || !dax->be.available(dax->be.opaque)) {
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

    vfsd_dax_lock(dax);
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
    keep = vfsd_dax_keep(dax, m->foffset, m->len, st.st_size);
    ret = vfsd_dax_setup_map(fs, &in, keep, flags, fd);
    if (!ret) {
        VfsdDaxMap *r = g_new0(VfsdDaxMap, 1);

        r->moffset = m->moffset;
        r->len = m->len;
        r->foffset = m->foffset;
        r->mapped = keep;
        r->writable = m->writable;
        r->inode = m->inode;
        vfsd_inode_ref(m->inode);
        vfsd_dax_setup_record(fs, m->inode, r, none, st.st_size);
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
    vfsd_dax_lock(dax);
    table = g_steal_pointer(&dax->restoring);
    g_mutex_unlock(&dax->lock);
    for (i = 0; table && i < table->len; i++) {
        VfsdDaxSaved *m = &g_array_index(table, VfsdDaxSaved, i);
        int fd = vfsd_fd_open(fs, m->inode, m->writable ? O_RDWR : O_RDONLY);

        if (fd < 0) {
            ret = fd;
        } else {
            vfsd_dax_lock(dax);
            vfsd_dax_inode_watch(dax, m->inode);
            ret = dax_restore_one(fs, m, fd);
            vfsd_dax_inode_unwatch(dax, m->inode);
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
        vfsd_dax_lock(fs->dax);
        vfsd_dax_restoring_free(fs->dax);
        g_mutex_unlock(&fs->dax->lock);
    }
}
