/*
 * virtiofsd: FUSE opcode names
 *
 * On their own, below everything else: the request counters (stats.c)
 * and log lines of any layer name opcodes without depending on the
 * decoding layer (server.c) that serves them.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>

#include "fuse-proto.h"
#include "opnames.h"

static const char *const names[] = {
    [FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET",
    [FUSE_GETATTR] = "GETATTR", [FUSE_SETATTR] = "SETATTR",
    [FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
    [FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR",
    [FUSE_UNLINK] = "UNLINK", [FUSE_RMDIR] = "RMDIR",
    [FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK",
    [FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ", [FUSE_WRITE] = "WRITE",
    [FUSE_STATFS] = "STATFS", [FUSE_RELEASE] = "RELEASE",
    [FUSE_FSYNC] = "FSYNC", [FUSE_SETXATTR] = "SETXATTR",
    [FUSE_GETXATTR] = "GETXATTR", [FUSE_LISTXATTR] = "LISTXATTR",
    [FUSE_REMOVEXATTR] = "REMOVEXATTR", [FUSE_FLUSH] = "FLUSH",
    [FUSE_INIT] = "INIT", [FUSE_OPENDIR] = "OPENDIR",
    [FUSE_READDIR] = "READDIR", [FUSE_RELEASEDIR] = "RELEASEDIR",
    [FUSE_FSYNCDIR] = "FSYNCDIR", [FUSE_GETLK] = "GETLK",
    [FUSE_SETLK] = "SETLK", [FUSE_SETLKW] = "SETLKW",
    [FUSE_ACCESS] = "ACCESS", [FUSE_CREATE] = "CREATE",
    [FUSE_INTERRUPT] = "INTERRUPT", [FUSE_BMAP] = "BMAP",
    [FUSE_DESTROY] = "DESTROY", [FUSE_IOCTL] = "IOCTL",
    [FUSE_POLL] = "POLL", [FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
    [FUSE_BATCH_FORGET] = "BATCH_FORGET",
    [FUSE_FALLOCATE] = "FALLOCATE", [FUSE_READDIRPLUS] = "READDIRPLUS",
    [FUSE_RENAME2] = "RENAME2", [FUSE_LSEEK] = "LSEEK",
    [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
    [FUSE_SETUPMAPPING] = "SETUPMAPPING",
    [FUSE_REMOVEMAPPING] = "REMOVEMAPPING", [FUSE_SYNCFS] = "SYNCFS",
    [FUSE_TMPFILE] = "TMPFILE", [FUSE_STATX] = "STATX",
    [FUSE_COPY_FILE_RANGE_64] = "COPY_FILE_RANGE_64",
};

G_STATIC_ASSERT(G_N_ELEMENTS(names) <= VFSD_OPCODE_LIMIT);

const char *vfsd_opname(uint32_t opcode)
{
    return opcode < G_N_ELEMENTS(names) && names[opcode] ? names[opcode]
                                                         : "unknown";
}
