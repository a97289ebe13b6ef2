/*
 * virtiofsd: directories
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs-dir.h"
#include "fd.h"
#include "fs.h"
#include "inode.h"
#include "log.h"

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int vfsd_op_opendir(VfsdFs *fs, uint64_t nodeid, uint32_t flags,
                    VfsdOpened *out)
{
    int fd;
    g_autoptr(VfsdInode) inode = vfsd_dir_get(fs, nodeid, &fd);

    if (!inode) {
        return fd;
    }
    fd = vfsd_fd_open(fs, inode, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return fd;
    }
    memset(out, 0, sizeof(*out));
    out->fh = vfsd_handle_new(fs, fd, O_RDONLY, inode, true);
    /*
     * As the Rust virtiofsd: directory listings are metadata, cached with
     * it, and kept across opens.
     */
    if (fs->opts->cache == VFSD_CACHE_ALWAYS ||
        fs->opts->cache == VFSD_CACHE_METADATA) {
        out->keep |= VFSD_OPEN_CACHE_DIR | VFSD_OPEN_KEEP_CACHE;
    }
    /*
     * With adaptive timeouts, a kept listing is worth having only while
     * the names it linked are valid: past that, each name in it would
     * cost the guest a LOOKUP where a new READDIRPLUS renews a page of
     * them at once.  So the guest keeps it only until the shortest
     * timeout of the last whole listing runs out (and drops it sooner
     * if it sees the directory's mtime change).
     */
    if (fs->opts->cache == VFSD_CACHE_ADAPTIVE) {
        out->keep |= VFSD_OPEN_CACHE_DIR;
        if (g_get_monotonic_time() <
            __atomic_load_n(&inode->listed_until, __ATOMIC_RELAXED)) {
            out->keep |= VFSD_OPEN_KEEP_CACHE;
        }
    }
    return 0;
}

/*
 * A READDIRPLUS pass over the whole directory, for --cache=adaptive
 * (see vfsd_op_opendir()): from offset 0, under the handle's lock.  The
 * listing's own validity counts too: the guest checks the directory's
 * mtime only when its attributes time out.
 */
static void list_begin(VfsdFs *fs, VfsdHandle *h, uint64_t offset)
{
    VfsdAttr attr;

    if (offset) {
        return;
    }
    h->list_start = 0;
    if (vfsd_fill_attr(fs, h->inode, &attr) == 0) {
        h->list_start = g_get_monotonic_time();
        h->list_min = vfsd_fs_timeout(fs, &attr.ctime);
    }
}

/* The pass reached the end: the guest holds every name of it */
static void list_end(VfsdHandle *h)
{
    if (h->list_start) {
        __atomic_store_n(&h->inode->listed_until,
                         h->list_start + (gint64)(h->list_min * 1e6),
                         __ATOMIC_RELAXED);
        h->list_start = 0;
    }
}

/*
 * Hands one entry to @sink if it has room.  For READDIRPLUS the entry
 * carries a lookup (the guest will FORGET it), except "." and "..",
 * which the guest does not link.
 */
static bool add_entry(VfsdFs *fs, VfsdHandle *h, const VfsdDirSink *sink,
                      const struct linux_dirent64 *d, bool plus)
{
    VfsdInode *dir = h->inode;
    VfsdDirent de = {
        .ino = d->d_ino,
        .off = d->d_off,
        .type = d->d_type,
        .name = d->d_name,
        .namelen = strlen(d->d_name),
    };
    VfsdEntry e;
    bool looked_up = false;

    if (!sink->fits(sink->opaque, de.namelen)) {
        return false;
    }
    if (plus && strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) {
        /* A failure (e.g. a racing unlink) gives the entry no lookup */
        looked_up = vfsd_entry_lookup_listed(fs, dir, d->d_name, d->d_ino,
                                             &e) == 0;
        if (looked_up && h->list_start) {
            /*
             * Not its attribute timeout: a setuid file's is 0 (see
             * vfsd_fs_attr_timeout()), and its name is as stable as
             * any other
             */
            h->list_min = MIN(h->list_min, e.entry_timeout);
        }
    }
    sink->add(sink->opaque, &de, looked_up ? &e : NULL);
    return true;
}

/*
 * What one getdents64() reads: a whole reply's worth of entries of a
 * 4 KiB READDIR (an entry is never larger in getdents64() than in a
 * reply), several of a READDIRPLUS, and room for a name of NAME_MAX.
 */
#define VFSD_DENTS_SIZE 8192

/*
 * The next entry of @h's directory, read ahead by getdents64() into
 * @h->dents; NULL at the end, or with *@err on an error.  @h's lock held.
 */
static struct linux_dirent64 *next_dirent(VfsdHandle *h, int *err)
{
    long n;

    *err = 0;
    if (h->dents_pos >= h->dents_len) {
        if (!h->dents) {
            h->dents = g_malloc(VFSD_DENTS_SIZE);
        }
        n = syscall(SYS_getdents64, h->fd, h->dents, VFSD_DENTS_SIZE);
        if (n <= 0) {
            *err = n < 0 ? -errno : 0;
            h->dents_pos = h->dents_len = 0;
            /*
             * Where the fd stands now is anyone's guess; at the end, a
             * file system may move it past the last entry's offset
             */
            h->dir_known = false;
            return NULL;
        }
        h->dents_pos = 0;
        h->dents_len = n;
    }
    return (struct linux_dirent64 *)(h->dents + h->dents_pos);
}

/*
 * Entries are read ahead, and kept in the handle for the READDIR that
 * asks for the offset they continue from, the one a guest reading on
 * sends (after getdents64() the fd stands at its last entry's d_off):
 * a READDIRPLUS reply holds a fifth of what one getdents64() reads, and
 * the directory is neither seeked nor read twice.  Another offset drops
 * them and seeks.  Entries kept may have changed since they were read,
 * as with any read-ahead of a directory (readdir(3)'s): an entry removed
 * meanwhile gets no lookup.
 */
int vfsd_op_readdir(VfsdFs *fs, uint64_t fh, uint64_t offset, size_t max,
                    bool plus, const VfsdDirSink *sink)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, true);
    struct linux_dirent64 *d;
    bool added = false;
    int err;

    if (!h) {
        return -EBADF;
    }
    if (offset > INT64_MAX) {
        return -EINVAL;
    }

    g_mutex_lock(&h->lock);
    if (!h->dir_known || offset != h->dir_next) {
        h->dents_pos = h->dents_len = 0;
        g_atomic_int_inc(&fs->dir_seeks);
        /* The offset is a cookie from a previous d_off, or 0 */
        if (lseek(h->fd, offset, SEEK_SET) < 0) {
            h->dir_known = false;
            g_mutex_unlock(&h->lock);
            return -errno;
        }
        h->dir_next = offset;
        h->dir_known = true;
    }
    if (plus && fs->opts->cache == VFSD_CACHE_ADAPTIVE) {
        list_begin(fs, h, offset);
    }
    for (;;) {
        d = next_dirent(h, &err);
        if (!d) {
            if (err && !added) {
                g_mutex_unlock(&h->lock);
                return err;
            }
            if (!err) {
                list_end(h);
            }
            break;
        }
        if (!add_entry(fs, h, sink, d, plus)) {
            break;
        }
        added = true;
        h->dents_pos += d->d_reclen;
        h->dir_next = d->d_off;
    }
    /* Kept only while it holds entries */
    if (h->dents_pos >= h->dents_len) {
        g_clear_pointer(&h->dents, g_free);
    }
    g_mutex_unlock(&h->lock);
    return 0;
}
