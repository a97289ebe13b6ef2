/*
 * virtiofsd: the fds held for the guest, and how they are opened
 *
 * Every fd the guest makes us hold (an inode's O_PATH fd, an open file, a
 * lock owner's fd, a DAX mapping's fd while it is set up) is accounted
 * here, against a bound below RLIMIT_NOFILE, so that a guest that opens
 * without end gets ENFILE and the daemon keeps the fds it needs itself.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fd.h"

/* fds kept for the daemon itself (log, sockets, eventfds, reopens) */
#define VFSD_FD_RESERVE 64

bool vfsd_fd_limit_init(VfsdFs *fs, char **err)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 ||
        rl.rlim_cur <= 2 * VFSD_FD_RESERVE) {
        *err = g_strdup("RLIMIT_NOFILE is too low to serve a guest");
        return false;
    }
    fs->fds_max = MIN(rl.rlim_cur, INT_MAX) - VFSD_FD_RESERVE;
    return true;
}

bool vfsd_fd_reserve(VfsdFs *fs)
{
    if (g_atomic_int_add(&fs->fds_open, 1) >= fs->fds_max) {
        g_atomic_int_add(&fs->fds_open, -1);
        return false;
    }
    return true;
}

void vfsd_fd_release(VfsdFs *fs)
{
    g_atomic_int_add(&fs->fds_open, -1);
}

/*
 * Opens the inode for I/O through /proc/self/fd.  Only regular files and
 * directories: reopening a FIFO or a device node on the guest's behalf
 * would block the daemon or reach a host device (CVE-2020-35517).
 */
int vfsd_reopen(VfsdFs *fs, VfsdInode *inode, int flags)
{
    char name[32];
    int fd;

    if (inode->type != S_IFREG && inode->type != S_IFDIR) {
        return -ENXIO;
    }
    if (fs->opts->readonly &&
        ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))) {
        return -EROFS;
    }
    snprintf(name, sizeof(name), "%d", inode->fd);
    /*
     * The magic link resolves to exactly the inode behind our O_PATH fd,
     * whatever happened to its path meanwhile.
     */
    flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW);
    fd = openat(fs->proc_self_fd, name, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int vfsd_fd_open(VfsdFs *fs, VfsdInode *inode, int flags)
{
    int fd;

    if (!vfsd_fd_reserve(fs)) {
        return -ENFILE;
    }
    fd = vfsd_reopen(fs, inode, flags);
    if (fd < 0) {
        vfsd_fd_release(fs);
    }
    return fd;
}

void vfsd_fd_close(VfsdFs *fs, int fd)
{
    close(fd);
    vfsd_fd_release(fs);
}
