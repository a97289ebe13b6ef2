/*
 * virtiofsd: extended attributes
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs-xattr.h"
#include "creds.h"
#include "fd.h"
#include "inode.h"
#include "log.h"
#include "xattrmap.h"

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
        return -errno;
    }
    if (!fs->opts->xattr) {
        return -ENOSYS;
    }
    if (fs->opts->readonly && (op == XATTR_SET || op == XATTR_REMOVE)) {
        return -EROFS;
    }
    if (inode->type == S_IFREG || inode->type == S_IFDIR) {
        fd = vfsd_fd_open(fs, inode, O_RDONLY | O_NONBLOCK);
        if (fd < 0) {
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
        vfsd_fd_close(fs, fd);
    }
    return ret;
}

/*
 * With FUSE_POSIX_ACL the guest decides whether setting an access ACL
 * clears the setgid bit, as its kernel would for a local file: when the
 * caller is neither in the file's group nor has CAP_FSETID there.  Our
 * host kernel cannot know that (the daemon sets the ACL as root, which
 * keeps the bit), so we clear it after the ACL is set.
 */
static int acl_kill_sgid(VfsdFs *fs, uint64_t nodeid)
{
    g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);
    char procname[32];
    struct stat st;

    if (!inode) {
        return -errno;
    }
    if (fstat(inode->fd, &st) < 0) {
        return -errno;
    }
    if (!(st.st_mode & S_ISGID) || S_ISLNK(st.st_mode)) {
        return 0;
    }
    snprintf(procname, sizeof(procname), "%d", inode->fd);
    if (fchmodat(fs->proc_self_fd, procname, st.st_mode & 07777 & ~S_ISGID,
                 0) < 0) {
        return -errno;
    }
    return 0;
}

/*
 * ACLs name users and groups: with --uid-map/--gid-map those are the
 * guest's ids in the guest's view and the host's on disk.  Without a map
 * nothing needs translating.
 */
static bool acl_needs_map(VfsdFs *fs, const char *name)
{
    return fs->opts->xattr &&
           (vfsd_idmap_active(&fs->opts->uid_map) ||
            vfsd_idmap_active(&fs->opts->gid_map)) &&
           (!strcmp(name, "system.posix_acl_access") ||
            !strcmp(name, "system.posix_acl_default"));
}

/*
 * The host name of the guest's @name under --xattrmap, in @host; @name
 * itself without a map.  Returns the name to use or NULL with *err set.
 */
static const char *map_name(VfsdFs *fs, VfsdXattrOp op, const char *name,
                            char *host, int *err)
{
    VfsdXattrMap *map = fs->opts->xattrmap;
    unsigned int unmatched;

    if (!map) {
        return name;
    }
    unmatched = vfsd_xattrmap_unmatched(map);
    *err = vfsd_xattrmap_to_host(map, op, name, host);
    if (vfsd_xattrmap_unmatched(map) != unmatched) {
        vfsd_guest_error("--xattrmap: no rule matches the guest's name "
                         "'%s': refused as by a 'bad' rule", name);
    }
    return *err ? NULL : host;
}

int vfsd_op_setxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                     const void *value, size_t size, uint32_t flags,
                     bool kill_sgid)
{
    g_autofree void *mapped = NULL;
    char host[VFSD_XATTR_NAME_MAX + 1];
    const char *host_name;
    int ret;

    if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
        return -EINVAL;
    }
    host_name = map_name(fs, VFSD_XATTR_OP_SET, name, host, &ret);
    if (!host_name) {
        return ret;
    }
    if (acl_needs_map(fs, name)) {
        /* An entry for an id the guest has no right to name is refused */
        mapped = g_memdup2(value, size);
        ret = vfsd_idmap_acl(&fs->opts->uid_map, &fs->opts->gid_map,
                             mapped, size, true);
        if (ret < 0) {
            return ret;
        }
        value = mapped;
    }
    if (fs->opts->xattrmap && !fs->opts->readonly) {
        g_autoptr(VfsdInode) inode = vfsd_inode_get(fs, nodeid);

        ret = inode ? vfsd_drop_mapped_capability(fs, inode, -1) : 0;
        if (ret < 0) {
            return ret;
        }
    }
    ret = xattr_call(fs, nodeid, XATTR_SET, host_name, (void *)value, size,
                     flags);
    if (ret == 0 && kill_sgid &&
        (fs->conn.flags & FUSE_POSIX_ACL) &&
        !strcmp(name, "system.posix_acl_access")) {
        ret = acl_kill_sgid(fs, nodeid);
    }
    return ret;
}

ssize_t vfsd_op_getxattr(VfsdFs *fs, uint64_t nodeid, const char *name,
                         void *value, size_t size)
{
    char host[VFSD_XATTR_NAME_MAX + 1];
    const char *host_name;
    int err;
    ssize_t ret;

    host_name = map_name(fs, VFSD_XATTR_OP_GET, name, host, &err);
    if (!host_name) {
        return err;
    }
    ret = xattr_call(fs, nodeid, XATTR_GET, host_name, value, size, 0);

    /* Size 0 asks only for the length, which translation does not change */
    if (ret > 0 && size > 0 && acl_needs_map(fs, name) &&
        vfsd_idmap_acl(&fs->opts->uid_map, &fs->opts->gid_map, value, ret,
                       false) < 0) {
        /* Never show the guest host ids we could not translate */
        vfsd_err("getxattr %s: the host's ACL is not well-formed", name);
        return -EIO;
    }
    return ret;
}

ssize_t vfsd_op_listxattr(VfsdFs *fs, uint64_t nodeid, char *list,
                          size_t size)
{
    VfsdXattrMap *map = fs->opts->xattrmap;
    ssize_t ret = xattr_call(fs, nodeid, XATTR_LIST, NULL, list, size, 0);
    unsigned int unmatched;

    /*
     * Asked only for the length, the guest gets the host's, as from the
     * Rust daemon: translation only ever shortens the list, so a buffer
     * of that size holds the translated one.
     */
    if (!map || ret <= 0 || !size) {
        return ret;
    }
    unmatched = vfsd_xattrmap_unmatched(map);
    ret = vfsd_xattrmap_list(map, list, ret, list, size);
    if (vfsd_xattrmap_unmatched(map) != unmatched) {
        vfsd_guest_error("--xattrmap: no rule matches a host name of inode "
                         "%" PRIu64 ": hidden as by a 'bad' rule", nodeid);
    }
    return ret;
}

int vfsd_op_removexattr(VfsdFs *fs, uint64_t nodeid, const char *name)
{
    char host[VFSD_XATTR_NAME_MAX + 1];
    const char *host_name;
    int ret;

    host_name = map_name(fs, VFSD_XATTR_OP_REMOVE, name, host, &ret);
    if (!host_name) {
        return ret;
    }
    return xattr_call(fs, nodeid, XATTR_REMOVE, host_name, NULL, 0, 0);
}
