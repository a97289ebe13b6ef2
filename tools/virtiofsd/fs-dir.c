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

/* Most we hand to the guest per READDIR */
#define VFSD_MAX_READDIR (128 * 1024)

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int vfsd_op_opendir(VfsdFs *fs, uint64_t nodeid, uint32_t flags,
                    struct fuse_open_out *out)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    int fd;

    if (!inode) {
        return -errno;
    }
    if (inode->type != S_IFDIR) {
        return -ENOTDIR;
    }
    fd = vfsd_fd_open(fs, inode, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return fd;
    }
    memset(out, 0, sizeof(*out));
    out->fh = vfsd_handle_new(fs, fd, O_RDONLY, inode, true);
    /*
     * As the Rust virtiofsd: directory listings are metadata, cached with
     * it; FOPEN_KEEP_CACHE keeps them across opens.
     */
    if (fs->opts->cache == VFSD_CACHE_ALWAYS ||
        fs->opts->cache == VFSD_CACHE_METADATA) {
        out->open_flags |= FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE;
    }
    return 0;
}

/*
 * Appends one entry to @reply if it fits.  For READDIRPLUS the entry
 * carries a lookup (the guest will FORGET it), except "." and "..",
 * which the guest does not link.
 */
static bool add_entry(VfsdFs *fs, VfsdInode *dir, GByteArray *reply,
                      size_t max, const struct linux_dirent64 *d, bool plus)
{
    size_t namelen = strlen(d->d_name);
    size_t base = plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
    size_t len = FUSE_DIRENT_ALIGN(base + namelen);
    size_t pos = reply->len;
    struct fuse_dirent *de;

    if (pos + len > max) {
        return false;
    }
    g_byte_array_set_size(reply, pos + len);
    memset(reply->data + pos, 0, len);

    if (plus) {
        struct fuse_direntplus *dp = (void *)(reply->data + pos);

        de = &dp->dirent;
        if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) {
            struct fuse_entry_out e;

            /* A failure (e.g. a racing unlink) leaves nodeid 0 */
            if (vfsd_entry_lookup(fs, dir, d->d_name, &e) == 0) {
                dp->entry_out = e;
            }
        }
    } else {
        de = (void *)(reply->data + pos);
    }
    de->ino = d->d_ino;
    de->off = d->d_off;
    de->namelen = namelen;
    de->type = d->d_type;
    memcpy(de->name, d->d_name, namelen);
    return true;
}

int vfsd_op_readdir(VfsdFs *fs, uint64_t fh, uint64_t offset,
                    uint32_t size, size_t room, bool plus, GByteArray *reply)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, true);
    g_autofree char *buf = NULL;
    size_t max = MIN(MIN((size_t)size, room), VFSD_MAX_READDIR);
    bool full = false;
    long n;

    if (!h) {
        return -EBADF;
    }
    if (offset > INT64_MAX) {
        return -EINVAL;
    }
    buf = g_malloc(max + sizeof(struct linux_dirent64) + NAME_MAX + 1);

    g_mutex_lock(&h->lock);
    /* The offset is a cookie from a previous d_off, or 0 */
    if (lseek(h->fd, offset, SEEK_SET) < 0) {
        g_mutex_unlock(&h->lock);
        return -errno;
    }
    while (!full) {
        long pos = 0;

        n = syscall(SYS_getdents64, h->fd, buf,
                    max + sizeof(struct linux_dirent64) + NAME_MAX + 1);
        if (n < 0) {
            if (reply->len) {
                break;
            }
            g_mutex_unlock(&h->lock);
            return -errno;
        }
        if (n == 0) {
            break;
        }
        while (pos < n) {
            struct linux_dirent64 *d = (void *)(buf + pos);

            if (!add_entry(fs, h->inode, reply, max, d, plus)) {
                full = true;
                break;
            }
            pos += d->d_reclen;
        }
    }
    g_mutex_unlock(&h->lock);
    return 0;
}

void vfsd_readdirplus_unlookup(VfsdFs *fs, const GByteArray *reply)
{
    size_t pos = 0;

    while (pos + FUSE_NAME_OFFSET_DIRENTPLUS <= reply->len) {
        const struct fuse_direntplus *dp = (void *)(reply->data + pos);

        if (dp->entry_out.nodeid) {
            vfsd_inode_forget(fs, dp->entry_out.nodeid, 1);
        }
        pos += FUSE_DIRENTPLUS_SIZE(dp);
    }
}
