/*
 * virtiofsd: extended attributes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs.h"
#include "log.h"

enum {
    XATTR_GET,
    XATTR_SET,
    XATTR_LIST,
    XATTR_REMOVE,
};

/*
 * O_PATH fds do not take f*xattr().  Regular files and directories are
 * reopened; other inodes (symlinks, devices, FIFOs, which must not be
 * opened) are reached by their /proc/self/fd name relative to the
 * daemon's working directory, which is /proc/self/fd (see main.c).
 */
static ssize_t xattr_call(VfsdFs *fs, uint64_t nodeid, int op,
                          const char *name, void *value, size_t size,
                          int flags)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    char procname[32];
    ssize_t ret;
    int fd = -1;

    if (!inode) {
        return -ENOENT;
    }
    if (!fs->opts->xattr) {
        return -ENOSYS;
    }
    if (fs->opts->readonly && (op == XATTR_SET || op == XATTR_REMOVE)) {
        return -EROFS;
    }
    if (inode->type == S_IFREG || inode->type == S_IFDIR) {
        if (!vfsd_fd_reserve(fs)) {
            return -ENFILE;
        }
        fd = vfsd_reopen(fs, inode, O_RDONLY | O_NONBLOCK);
        if (fd < 0) {
            vfsd_fd_release(fs);
            return fd;
        }
    }
    snprintf(procname, sizeof(procname), "%d", inode->fd);

    switch (op) {
    case XATTR_GET:
        ret = fd >= 0 ? fgetxattr(fd, name, value, size) :
                        getxattr(procname, name, value, size);
        break;
    case XATTR_SET:
        ret = fd >= 0 ? fsetxattr(fd, name, value, size, flags) :
                        setxattr(procname, name, value, size, flags);
        break;
    case XATTR_LIST:
        ret = fd >= 0 ? flistxattr(fd, value, size) :
                        listxattr(procname, value, size);
        break;
    default:
        ret = fd >= 0 ? fremovexattr(fd, name) :
                        removexattr(procname, name);
        break;
    }
    if (ret < 0) {
        ret = -errno;
    }
    if (fd >= 0) {
        close(fd);
        vfsd_fd_release(fs);
    }
    return ret;
}

int vfsd_op_setxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                     const void *value, size_t size, uint32_t flags)
{
    if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
        return -EINVAL;
    }
    return xattr_call(fs, nodeid, XATTR_SET, name, (void *)value, size,
                      flags);
}

ssize_t vfsd_op_getxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                         void *value, size_t size)
{
    return xattr_call(fs, nodeid, XATTR_GET, name, value, size, 0);
}

ssize_t vfsd_op_listxattr(VfsdFs *fs, uint64_t nodeid, char *list,
                          size_t size)
{
    return xattr_call(fs, nodeid, XATTR_LIST, NULL, list, size, 0);
}

int vfsd_op_removexattr(VfsdFs *fs, uint64_t nodeid, const char *name)
{
    return xattr_call(fs, nodeid, XATTR_REMOVE, name, NULL, 0, 0);
}
