/*
 * virtiofsd: operations on open files
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-file.h"
#include "creds.h"
#include "dax.h"
#include "fd.h"
#include "fs.h"
#include "inode.h"
#include "intr.h"
#include "log.h"

#define VFSD_MAX_IOV 256

/* Open flags a guest may pass on; the rest are ours to choose */
#define VFSD_OPEN_FLAGS (O_ACCMODE | O_APPEND | O_TRUNC | O_NONBLOCK | \
                         O_DSYNC | O_SYNC | O_DIRECT | O_NOATIME |     \
                         O_LARGEFILE | O_DIRECTORY)

static int open_flags(VfsdFs *fs, uint32_t flags)
{
    int f = flags & VFSD_OPEN_FLAGS;

    /*
     * O_DIRECT from the guest is about its own page cache; on the host
     * it only adds alignment rules the guest's requests need not meet.
     */
    if (!fs->opts->allow_direct_io) {
        f &= ~O_DIRECT;
    }

    /*
     * O_NOATIME fails with EPERM unless the caller owns the file (or the
     * daemon has CAP_FOWNER, which the caller's credentials may not give):
     * a guest that sets it everywhere would see opens fail that plain ones
     * pass.  The Rust daemon drops it for that reason unless asked not to.
     */
    if (!fs->opts->preserve_noatime) {
        f &= ~O_NOATIME;
    }

    /*
     * With a writeback cache the guest reads pages it writes partially,
     * and it does O_APPEND positioning itself.
     */
    if (fs->conn.flags & FUSE_WRITEBACK_CACHE) {
        if ((f & O_ACCMODE) == O_WRONLY) {
            f = (f & ~O_ACCMODE) | O_RDWR;
        }
        f &= ~O_APPEND;
    }
    return f;
}

/* What the cache mode lets the guest keep of an open file (see fs-dir.c) */
static void fill_opened(VfsdFs *fs, uint64_t fh, VfsdOpened *out)
{
    memset(out, 0, sizeof(*out));
    out->fh = fh;
    switch (fs->opts->cache) {
    case VFSD_CACHE_NEVER:
    case VFSD_CACHE_METADATA:
        /* No file data in the guest's page cache (DAX is not affected) */
        out->keep |= VFSD_OPEN_DIRECT_IO;
        /*
         * Direct writes that do not extend the file need not exclude
         * each other in the guest: ours are plain pwrite()s.  The guest
         * ignores the flag without VFSD_OPEN_DIRECT_IO.
         */
        out->keep |= VFSD_OPEN_PARALLEL_DIRECT_WRITES;
        break;
    case VFSD_CACHE_AUTO:
        break;
    case VFSD_CACHE_ALWAYS:
        out->keep |= VFSD_OPEN_KEEP_CACHE;
        break;
    case VFSD_CACHE_ADAPTIVE:
        /*
         * Kept across opens; the guest drops it when a file's size or
         * mtime changes (FUSE_AUTO_INVAL_DATA), which it learns when the
         * attributes time out
         */
        out->keep |= VFSD_OPEN_KEEP_CACHE;
        break;
    }
    /*
     * FLUSH (the guest's close()) has one use here: dropping the
     * closer's POSIX locks when the guest keeps them on the host.
     * Without that it is a round trip per close() that does nothing, and
     * its answer can only be 0, so the guest loses no error by not
     * asking.  A guest with a writeback cache flushes anyway.
     */
    if (!(fs->conn.flags & FUSE_POSIX_LOCKS)) {
        out->keep |= VFSD_OPEN_NOFLUSH;
    }
}

/*
 * Around an open with O_TRUNC in @flags of the host file (@dev, @ino),
 * which @fd can fstat: no DAX mapping may cover what the truncate cuts,
 * whichever of our inodes of the file it was made through, and with
 * @kill_priv the setuid/setgid bits go as for @ctx's caller, as the
 * guest's FUSE_OPEN_KILL_SUIDGID asks.  Returns 0 or -errno; after a success,
 * open_trunc_end() follows the open, whatever its result.
 */
static int open_trunc_begin(VfsdFs *fs, const VfsdCtx *ctx, dev_t dev,
                            ino_t ino, int fd, int flags, bool kill_priv,
                            VfsdKillPriv *kp)
{
    int ret;

    *kp = (VfsdKillPriv) { 0 };
    if (!(flags & O_TRUNC)) {
        return 0;
    }
    if (kill_priv) {
        ret = vfsd_kill_priv_begin(ctx, kp);
        if (ret < 0) {
            return ret;
        }
    }
    vfsd_dax_truncate_begin(fs, dev, ino, fd, 0);
    return 0;
}

static void open_trunc_end(VfsdFs *fs, dev_t dev, ino_t ino, int fd,
                           int flags, const VfsdKillPriv *kp)
{
    vfsd_kill_priv_end(kp);
    if (flags & O_TRUNC) {
        /* Refused, or another writer already grew it: map cut ranges back */
        vfsd_dax_truncate_end(fs, dev, ino, fd);
    }
}

/* Only regular files are opened on the guest's behalf (CVE-2020-35517) */
static int check_regular(int fd)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    if (S_ISDIR(st.st_mode)) {
        return -EISDIR;
    }
    return S_ISREG(st.st_mode) ? 0 : -ENXIO;
}

int vfsd_op_open(VfsdFs *fs, const VfsdCtx *ctx, uint64_t nodeid,
                 uint32_t flags, bool kill_suidgid, VfsdOpened *out)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    int f = open_flags(fs, flags);
    VfsdKillPriv kp;
    int fd, ret;

    if (!inode) {
        return -errno;
    }
    if (inode->type != S_IFREG) {
        return inode->type == S_IFDIR ? -EISDIR : -ENXIO;
    }
    if (!vfsd_fd_reserve(fs)) {
        vfsd_guest_error("too many open files, open refused");
        return -ENFILE;
    }
    ret = open_trunc_begin(fs, ctx, inode->dev, inode->ino, inode->fd, f,
                           (fs->conn.flags & FUSE_HANDLE_KILLPRIV_V2) &&
                           kill_suidgid, &kp);
    if (ret < 0) {
        vfsd_fd_release(fs);
        return ret;
    }
    fd = vfsd_reopen(fs, inode, f);
    open_trunc_end(fs, inode->dev, inode->ino, inode->fd, f, &kp);
    if (fd < 0) {
        vfsd_fd_release(fs);
        return fd;
    }
    ret = (f & O_TRUNC) ? vfsd_drop_mapped_capability(fs, inode, fd) : 0;
    if (ret < 0) {
        vfsd_fd_close(fs, fd);
        return ret;
    }
    fill_opened(fs, vfsd_handle_new(fs, fd, f, inode, false), out);
    return 0;
}

/*
 * CREATE of a name that exists: open it only if it is a regular file.
 * Opening first and checking after would already have opened a device
 * node or FIFO the guest made there (CVE-2020-35517); the O_PATH fd pins
 * the inode we checked.  Sets errno on failure, like openat().
 *
 * The guest counts on O_TRUNC here (FUSE_ATOMIC_O_TRUNC: it does not
 * truncate a file CREATE opened), so the file is truncated as an OPEN
 * with O_TRUNC would: no DAX mapping may cover the cut range meanwhile.
 */
static int open_existing(VfsdFs *fs, const VfsdCtx *ctx, VfsdInode *dir,
                         const char *name, int flags, bool kill_priv)
{
    char procname[32];
    struct stat st;
    VfsdKillPriv kp;
    int pfd, fd, err;

    pfd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) {
        return -1;
    }
    if (fstat(pfd, &st) < 0) {
        err = errno;
    } else if (!S_ISREG(st.st_mode)) {
        err = S_ISDIR(st.st_mode) ? EISDIR :
              S_ISLNK(st.st_mode) ? ELOOP : ENXIO;
    } else {
        err = -open_trunc_begin(fs, ctx, st.st_dev, st.st_ino, pfd, flags,
                                kill_priv, &kp);
        if (err) {
            close(pfd);
            errno = err;
            return -1;
        }
        snprintf(procname, sizeof(procname), "%d", pfd);
        fd = openat(fs->proc_self_fd, procname, flags | O_CLOEXEC);
        err = errno;
        open_trunc_end(fs, st.st_dev, st.st_ino, pfd, flags, &kp);
        close(pfd);
        errno = err;
        return fd;
    }
    close(pfd);
    errno = err;
    return -1;
}

/*
 * A new regular file with the creation's security label: made and
 * labelled under a name of ours, then renamed to @name if nothing is
 * there, so that it never has its name without its label; on any error
 * it is removed.  EEXIST when @name exists.  Sets errno, like openat().
 */
static int create_labelled(VfsdFs *fs, const VfsdCtx *ctx, VfsdInode *dir,
                           const char *name, int f, mode_t mode)
{
    g_autofree char *tmp = NULL;
    unsigned int attempt = 0;
    int fd, ret;

    do {
        g_free(tmp);
        tmp = vfsd_creds_label_tmp_name(attempt);
        fd = openat(dir->fd, tmp, f | O_EXCL | O_CREAT | O_NOFOLLOW |
                    O_CLOEXEC, mode);
    } while (fd < 0 && errno == EEXIST && ++attempt < 8);
    if (fd < 0) {
        return -1;
    }
    ret = vfsd_creds_set_label(fs, ctx, fd);
    if (ret == 0 && renameat2(dir->fd, tmp, dir->fd, name,
                              RENAME_NOREPLACE) < 0) {
        ret = -errno;
    }
    if (ret < 0) {
        unlinkat(dir->fd, tmp, 0);
        close(fd);
        errno = -ret;
        return -1;
    }
    return fd;
}

/*
 * Creates (or, without O_EXCL, opens) @name in @dir, or an unnamed file
 * in it (@tmpfile), as the guest's caller: an fd of a regular file with
 * @f's status flags, or a negative errno.  The fds are accounted by the
 * caller.
 */
static int create_open(VfsdFs *fs, const VfsdCtx *ctx, VfsdInode *dir,
                       const char *name, int f, uint32_t flags, mode_t mode,
                       mode_t umask, bool tmpfile, bool kill_priv)
{
    VfsdSavedCreds old;
    bool masked, made = false;
    int fd, ret;

    ret = vfsd_creds_switch(ctx, &old);
    if (ret < 0) {
        return ret;
    }
    mode &= 07777;
    masked = vfsd_umask_enter(fs, &mode, umask);
    if (tmpfile) {
        fd = openat(dir->fd, ".", (f & ~O_CREAT) | O_TMPFILE | O_CLOEXEC,
                    mode);
        /* Nameless until linked: labelled before anyone can see it */
        if (fd >= 0 && ctx->label_name) {
            ret = vfsd_creds_set_label(fs, ctx, fd);
            if (ret < 0) {
                close(fd);
                fd = -1;
                errno = -ret;
            }
        }
    } else {
        /*
         * Made here, with O_EXCL: a new regular file, which no O_NONBLOCK
         * or check need guard.  What exists already is opened by
         * open_existing(), which checks it first.
         */
        if (ctx->label_name) {
            fd = create_labelled(fs, ctx, dir, name, f, mode);
        } else {
            fd = openat(dir->fd, name,
                        f | O_EXCL | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
        }
        made = fd >= 0;
        if (fd < 0 && errno == EEXIST && !(flags & O_EXCL)) {
            /*
             * Its transient O_PATH fd is accounted: the caller's second
             * reservation is not used before its lookup.
             */
            fd = open_existing(fs, ctx, dir, name,
                               f | (flags & O_TRUNC) | O_NONBLOCK,
                               kill_priv);
        }
    }
    ret = fd < 0 ? -errno : 0;
    vfsd_umask_leave(fs, masked);
    vfsd_creds_restore(&old);
    if (ret < 0 || made) {
        return ret < 0 ? ret : fd;
    }
    ret = check_regular(fd);
    if (ret == 0 && !(f & O_NONBLOCK) && fcntl(fd, F_SETFL, f & ~O_ACCMODE &
                                              ~O_LARGEFILE) < 0) {
        ret = -errno;
    }
    if (ret == 0 && (flags & O_TRUNC)) {
        /* An existing file was truncated; a new one has nothing to drop */
        ret = vfsd_drop_mapped_capability(fs, NULL, fd);
    }
    if (ret < 0) {
        close(fd);
        return ret;
    }
    return fd;
}

int vfsd_op_create(VfsdFs *fs, const VfsdCtx *ctx, uint64_t parent,
                   const char *name, uint32_t flags, bool kill_suidgid,
                   mode_t mode, mode_t umask, bool tmpfile, VfsdEntry *e,
                   VfsdOpened *out)
{
    int fd, pfd = -1, ret;
    g_autoptr(VfsdInode) dir = vfsd_dir_get(fs, parent, &ret);
    /* A file we create is empty: O_TRUNC only matters for one that exists */
    int f = open_flags(fs, flags) & ~(O_DIRECTORY | O_TRUNC);
    bool kill_priv = (fs->conn.flags & FUSE_HANDLE_KILLPRIV_V2) &&
                     kill_suidgid;
    char procname[32];

    if (!dir) {
        return ret;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (!vfsd_fd_reserve(fs)) {
        return -ENFILE;
    }
    if (!vfsd_fd_reserve(fs)) {
        vfsd_fd_release(fs);
        return -ENFILE;
    }
    fd = create_open(fs, ctx, dir, name, f, flags, mode, umask, tmpfile,
                     kill_priv);
    if (fd < 0) {
        ret = fd;
        goto fail;
    }

    if (tmpfile) {
        snprintf(procname, sizeof(procname), "%d", fd);
        pfd = openat(fs->proc_self_fd, procname, O_PATH | O_CLOEXEC);
        ret = pfd < 0 ? -errno : vfsd_entry_from_fd(fs, dir, pfd, e);
    } else {
        ret = vfsd_entry_lookup(fs, dir, name, e);
        /* do_lookup accounted for its own fd */
        vfsd_fd_release(fs);
    }
    if (ret < 0) {
        close(fd);
        if (tmpfile && pfd < 0) {
            vfsd_fd_release(fs);
        }
        vfsd_fd_release(fs);
        return ret;
    }
    {
        g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, e->nodeid);

        if (!inode) {
            /* Forgotten already: impossible, we hold a lookup */
            close(fd);
            vfsd_fd_release(fs);
            return -EIO;
        }
        fill_opened(fs, vfsd_handle_new(fs, fd, f, inode, false), out);
    }
    return 0;

fail:
    vfsd_fd_release(fs);
    vfsd_fd_release(fs);
    return ret;
}

ssize_t vfsd_op_read(VfsdFs *fs, uint64_t fh, uint64_t offset,
                     uint32_t size, VfsdBuf *out)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);
    struct iovec iov[VFSD_MAX_IOV];
    g_autofree void *bounce = NULL;
    ssize_t n;
    int niov;

    if (!h) {
        return -EBADF;
    }
    if (offset > INT64_MAX) {
        return -EINVAL;
    }
    size = MIN(size, VFSD_MAX_IO);
    size = MIN(size, vfsd_buf_remaining(out));
    if (!size) {
        return 0;
    }

    niov = vfsd_buf_peek_iov(out, size, iov, VFSD_MAX_IOV);
    if (niov > 0) {
        n = preadv(h->fd, iov, niov, offset);
        if (n < 0) {
            return -errno;
        }
        vfsd_buf_skip(out, n);
        return n;
    }
    /* Part of the buffer is not mapped, e.g. it is in the DAX window */
    bounce = g_malloc(size);
    n = pread(h->fd, bounce, size, offset);
    if (n < 0) {
        return -errno;
    }
    if (!vfsd_buf_write(out, bounce, n)) {
        return -EIO;
    }
    return n;
}

ssize_t vfsd_op_write(VfsdFs *fs, const VfsdCtx *ctx, uint64_t fh,
                      uint64_t offset, uint32_t size, bool kill_suidgid,
                      VfsdBuf *in)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);
    struct iovec iov[VFSD_MAX_IOV];
    g_autofree void *bounce = NULL;
    VfsdKillPriv kp = { 0 };
    ssize_t n;
    int niov, ret;

    if (!h) {
        return -EBADF;
    }
    /*
     * No check of the offset: pwritev() says EINVAL for one that is
     * negative or that @size would carry past INT64_MAX, EFBIG past the
     * file system's largest file, as it would to a local writer.
     */
    if (size > VFSD_MAX_IO) {
        vfsd_guest_error("WRITE of %u bytes, more than max_write", size);
        return -EINVAL;
    }
    if (vfsd_buf_remaining(in) < size) {
        vfsd_guest_error("WRITE of %u bytes with %zu bytes of data", size,
                         vfsd_buf_remaining(in));
        return -EINVAL;
    }
    ret = vfsd_drop_mapped_capability(fs, h->inode, h->fd);
    if (ret < 0) {
        return ret;
    }
    if ((fs->conn.flags & FUSE_HANDLE_KILLPRIV_V2) && kill_suidgid) {
        ret = vfsd_kill_priv_begin(ctx, &kp);
        if (ret < 0) {
            return ret;
        }
    }

    niov = size ? vfsd_buf_peek_iov(in, size, iov, VFSD_MAX_IOV) : 0;
    if (niov > 0 || !size) {
        n = pwritev(h->fd, iov, niov, offset);
    } else {
        bounce = g_malloc(size);
        if (!vfsd_buf_read(in, bounce, size)) {
            vfsd_kill_priv_end(&kp);
            return -EIO;
        }
        n = pwrite(h->fd, bounce, size, offset);
    }
    ret = n < 0 ? -errno : n;
    vfsd_kill_priv_end(&kp);
    if (n > 0) {
        vfsd_dax_guest_grew(fs, h->inode);
    }
    return ret;
}

int vfsd_op_flush(VfsdFs *fs, uint64_t fh, uint64_t lock_owner)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);

    if (!h) {
        return -EBADF;
    }
    /* A close() drops the closer's POSIX locks on the file */
    vfsd_inode_plocks_drop(h->inode, lock_owner);
    return 0;
}

int vfsd_op_release(VfsdFs *fs, uint64_t fh, bool flock_unlock,
                    bool is_dir)
{
    if (!is_dir && flock_unlock) {
        g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);

        if (h) {
            flock(h->fd, LOCK_UN);
        }
    }
    vfsd_handle_close(fs, fh, is_dir);
    return 0;
}

int vfsd_op_fsync(VfsdFs *fs, uint64_t nodeid, uint64_t fh, bool datasync,
                  bool is_dir)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, is_dir);
    int ret;

    if (!h) {
        return -EBADF;
    }
    ret = datasync ? fdatasync(h->fd) : fsync(h->fd);
    return ret < 0 ? -errno : 0;
}

int vfsd_op_fallocate(VfsdFs *fs, uint64_t nodeid, uint64_t fh,
                      uint64_t offset, uint64_t length, uint32_t mode)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);

    if (!h) {
        return -EBADF;
    }
    /*
     * Modes that move data between offsets (collapse, insert) would move
     * it under the guest's DAX mappings: refused with the EOPNOTSUPP of a
     * file system without them (Linux guests do not send them either).
     * Ranges are the host's to judge: EINVAL for a negative offset or
     * length, EFBIG for an end past INT64_MAX or the largest file.
     */
    if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
                 FALLOC_FL_ZERO_RANGE)) {
        return -EOPNOTSUPP;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    if (fallocate(h->fd, mode, offset, length) < 0) {
        return -errno;
    }
    vfsd_dax_guest_grew(fs, h->inode);
    return 0;
}

int vfsd_op_lseek(VfsdFs *fs, uint64_t fh, uint64_t offset, uint32_t whence,
                  uint64_t *result)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);
    off_t r;

    if (!h) {
        return -EBADF;
    }
    /*
     * The guest does SEEK_SET/CUR/END itself and sends SEEK_DATA/HOLE.
     * Whatever comes is the host's to answer, a negative offset included
     * (ENXIO from SEEK_DATA, not EINVAL); the position of our fd is not
     * used by anything else.
     */
    r = lseek(h->fd, (off_t)offset, (int)whence);
    if (r < 0) {
        return -errno;
    }
    *result = r;
    return 0;
}

/*
 * One of the two read-only attribute queries on @fh's fd.  Only regular
 * files and directories are ever opened for the guest, but the command
 * is checked against the type all the same: on a device node the same
 * number would mean whatever its driver makes of it.
 */
static int get_fileattr(VfsdFs *fs, uint64_t fh, bool is_dir,
                        unsigned long cmd, void *out)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, is_dir);

    if (!h) {
        return -EBADF;
    }
    if (h->inode->type != S_IFREG && h->inode->type != S_IFDIR) {
        return -ENOTTY;
    }
    return ioctl(h->fd, cmd, out) < 0 ? -errno : 0;
}

int vfsd_op_get_flags(VfsdFs *fs, uint64_t fh, bool is_dir, uint32_t *flags)
{
    /* The kernel reads and writes an int, whatever the command's size */
    int v = 0;
    int ret = get_fileattr(fs, fh, is_dir, FS_IOC_GETFLAGS, &v);

    *flags = v;
    return ret;
}

int vfsd_op_get_fsxattr(VfsdFs *fs, uint64_t fh, bool is_dir,
                        struct fsxattr *fsx)
{
    memset(fsx, 0, sizeof(*fsx));
    return get_fileattr(fs, fh, is_dir, FS_IOC_FSGETXATTR, fsx);
}

ssize_t vfsd_op_copy_file_range(VfsdFs *fs, uint64_t fh_in, uint64_t off_in,
                                uint64_t fh_out, uint64_t off_out,
                                uint64_t len, uint64_t flags)
{
    g_autoptr(VfsdHandle) hin = vfsd_handle_get(fs, fh_in, false);
    g_autoptr(VfsdHandle) hout = vfsd_handle_get(fs, fh_out, false);
    loff_t pos_in = off_in, pos_out = off_out;
    ssize_t n;

    if (!hin || !hout) {
        return -EBADF;
    }
    if (fs->opts->readonly) {
        return -EROFS;
    }
    /* Flags and offsets are the host's to judge, as for a local caller */
    if (flags > UINT_MAX) {
        return -EINVAL;
    }
    n = copy_file_range(hin->fd, &pos_in, hout->fd, &pos_out,
                        MIN(len, (uint64_t)SSIZE_MAX), flags);
    if (n > 0) {
        vfsd_dax_guest_grew(fs, hout->inode);
    }
    return n < 0 ? -errno : n;
}

/*
 * A duplicate of the fd that carries @owner's POSIX locks on the inode:
 * the same open file description, so the same OFD locks, and it stays
 * valid if a FLUSH of that owner closes the original meanwhile.  The
 * caller closes it and releases its fd accounting.
 */
static int plock_fd(VfsdFs *fs, VfsdHandle *h, uint64_t owner)
{
    int fd;

    if (!vfsd_fd_reserve(fs)) {
        return -ENFILE;
    }
    fd = vfsd_inode_plock_fd(h->inode, owner,
                             h->flags & (O_ACCMODE | O_APPEND), true);
    if (fd < 0) {
        vfsd_fd_release(fs);
    }
    return fd;
}

static void plock_fd_done(VfsdFs *fs, int fd)
{
    vfsd_fd_close(fs, fd);
}

static int to_flock(const VfsdLock *fl, struct flock *l)
{
    memset(l, 0, sizeof(*l));
    if (fl->type != F_RDLCK && fl->type != F_WRLCK && fl->type != F_UNLCK) {
        return -EINVAL;
    }
    if (fl->start > INT64_MAX || (fl->end < fl->start)) {
        return -EINVAL;
    }
    l->l_type = fl->type;
    l->l_whence = SEEK_SET;
    l->l_start = fl->start;
    l->l_len = fl->end >= INT64_MAX ? 0 : fl->end - fl->start + 1;
    return 0;
}

/*
 * The common start of GETLK and SETLK(W) on POSIX locks: returns the fd
 * that carries the lock owner's locks, to be released with
 * plock_fd_done(), with the guest's lock in @l; or a negative errno.
 */
static int plock_begin(VfsdFs *fs, VfsdHandle *h, const VfsdLock *lk,
                       struct flock *l)
{
    int ret;

    if (!fs->opts->posix_lock) {
        return -ENOSYS;
    }
    ret = to_flock(lk, l);
    if (ret < 0) {
        return ret;
    }
    return plock_fd(fs, h, lk->owner);
}

int vfsd_op_getlk(VfsdFs *fs, uint64_t fh, const VfsdLock *lk,
                  VfsdLock *out)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);
    struct flock l;
    int fd, ret;

    if (!h) {
        return -EBADF;
    }
    fd = plock_begin(fs, h, lk, &l);
    if (fd < 0) {
        return fd;
    }
    ret = fcntl(fd, F_OFD_GETLK, &l) < 0 ? -errno : 0;
    plock_fd_done(fs, fd);
    if (ret < 0) {
        return ret;
    }
    memset(out, 0, sizeof(*out));
    out->type = l.l_type;
    if (l.l_type != F_UNLCK) {
        out->start = l.l_start;
        out->end = l.l_len ? l.l_start + l.l_len - 1 : INT64_MAX;
    }
    return 0;
}

/*
 * @waiter: NULL for SETLK, which does not wait; for SETLKW, what lets an
 * INTERRUPT end the wait with EINTR.
 */
int vfsd_op_setlk(VfsdFs *fs, uint64_t fh, const VfsdLock *lk,
                  VfsdWaiter *waiter)
{
    g_autoptr(VfsdHandle) h = vfsd_handle_get(fs, fh, false);
    struct flock l;
    int fd, ret, op;

    if (!h) {
        return -EBADF;
    }
    if (lk->flock) {
        if (!fs->opts->flock) {
            return -ENOSYS;
        }
        switch (lk->type) {
        case F_RDLCK:
            op = LOCK_SH;
            break;
        case F_WRLCK:
            op = LOCK_EX;
            break;
        case F_UNLCK:
            op = LOCK_UN;
            break;
        default:
            return -EINVAL;
        }
        if (!waiter) {
            op |= LOCK_NB;
        }
        do {
            if (waiter && vfsd_waiter_interrupted(fs, waiter)) {
                return -EINTR;
            }
            ret = flock(h->fd, op) < 0 ? -errno : 0;
        } while (ret == -EINTR);
        return ret;
    }

    fd = plock_begin(fs, h, lk, &l);
    if (fd < 0) {
        return fd;
    }
    do {
        if (waiter && vfsd_waiter_interrupted(fs, waiter)) {
            ret = -EINTR;
            break;
        }
        ret = fcntl(fd, waiter ? F_OFD_SETLKW : F_OFD_SETLK, &l) < 0 ?
              -errno : 0;
    } while (ret == -EINTR);
    plock_fd_done(fs, fd);
    return ret;
}
