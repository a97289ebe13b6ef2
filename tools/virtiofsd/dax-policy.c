/*
 * virtiofsd: which files the guest maps through the DAX window
 *
 * --dax-policy, read for each attribute reply (FUSE_ATTR_DAX): never,
 * always, by size, by an extended attribute, or what guests execute and
 * share (the exec policy, below).  Only files the front-end can map at
 * all are offered.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dax-policy.h"
#include "dax-table.h"
#include "fd.h"
#include "stats.h"

bool vfsd_dax_size_mappable(VfsdFs *fs, uint64_t size)
{
    return !fs->dax || !vfsd_dax_upstream(fs->dax) ||
           (size && !(size % VFSD_DAX_ALIGN));
}

/*
 * The exec policy.  What many guests share on a root file system or a
 * package store, and keep in memory as long as they run, is what they map:
 * programs, shared libraries, interpreters' extension modules.  Through
 * the window those pages are the host's page cache, one copy for all the
 * guests; outside it, each guest holds a copy in its own RAM.  A program
 * has an execute bit, but Debian installs shared libraries and Python's
 * extension modules 0644, so the file's first bytes are looked at too:
 * an open, a 4-byte read and a close, here, for each regular file with
 * no execute bit and a size between an ELF header's and the large files'
 * threshold, in the entry replies (LOOKUP, READDIRPLUS, CREATE...): the
 * guest decides once per inode, when it makes it, whether it maps it.
 * The verdict is kept in the inode with a stamp of the file's mtime and
 * size, and made again at the next entry reply only if one of them
 * changed (not the ctime, which every chmod of an unpack moves); the
 * other replies (GETATTR, SETATTR) repeat it, stale or not, as the guest
 * keeps its inode's choice anyway.  So an unpack, whose files are
 * created empty and then written and SETATTR'ed, looks at none of them:
 * by the ctime at every reply, a source tree's unpack and copy looked at
 * each file seven times (docs/benchmarks/density.md).  A file that turns
 * into an ELF object (a linker's output) goes into the window once the
 * guest drops its inode and looks it up again.  An empty file stays out
 * whatever its mode: that is one being created, whose data the guest
 * writes rather than maps.
 */
#define ELF_MIN_SIZE 52         /* the smallest ELF header, ELFCLASS32 */
#define ELF_CHECKED 2ULL
#define ELF_YES 1ULL
#define ELF_STAMP_MASK (~3ULL)

static uint64_t elf_stamp(const struct statx *stx)
{
    uint64_t mtime = (uint64_t)stx->stx_mtime.tv_sec * 1000000000ULL +
                     stx->stx_mtime.tv_nsec;

    /*
     * A collision, or content rewritten with its size and mtime kept,
     * costs a stale verdict: a file in or out of the window, never data
     */
    return (mtime ^ (stx->stx_size * 0x9e3779b97f4a7c15ULL)) & ELF_STAMP_MASK;
}

static bool dax_is_elf(VfsdFs *fs, VfsdInode *inode,
                       const struct statx *stx, bool entry)
{
    static const char magic[4] = { 0x7f, 'E', 'L', 'F' };
    uint64_t stamp = elf_stamp(stx);
    uint64_t verdict = __atomic_load_n(&inode->elf_verdict, __ATOMIC_RELAXED);
    int64_t start;
    char head[4];
    bool elf;
    int fd;

    if (!entry ||
        ((verdict & ELF_CHECKED) && (verdict & ELF_STAMP_MASK) == stamp)) {
        return verdict & ELF_YES;
    }
    start = fs->stats ? vfsd_stats_now() : 0;
    /* Atime is not ours to change: the guest did not read the file */
    fd = vfsd_fd_open(fs, inode, O_RDONLY | O_NOATIME);
    if (fd == -EPERM) {
        /* O_NOATIME needs the file's owner or CAP_FOWNER */
        fd = vfsd_fd_open(fs, inode, O_RDONLY);
    }
    if (fd < 0) {
        /*
         * Unreadable to us, or out of fds: no verdict to keep, the guest
         * reads such a file through the queue if it can at all.
         */
        return false;
    }
    elf = pread(fd, head, sizeof(head), 0) == sizeof(head) &&
          !memcmp(head, magic, sizeof(magic));
    vfsd_fd_close(fs, fd);
    if (fs->stats) {
        vfsd_stats_record(fs->stats, VFSD_STATS_DAX_ELF_CHECK, start);
    }
    __atomic_store_n(&inode->elf_verdict,
                     stamp | ELF_CHECKED | (elf ? ELF_YES : 0),
                     __ATOMIC_RELAXED);
    return elf;
}

static bool dax_exec_wanted(VfsdFs *fs, VfsdInode *inode,
                            const struct statx *stx, bool entry)
{
    if (stx->stx_size == 0) {
        return false;
    }
    if (stx->stx_size >= fs->opts->dax_min_size ||
        (stx->stx_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
        return true;
    }
    return stx->stx_size >= ELF_MIN_SIZE && dax_is_elf(fs, inode, stx, entry);
}

bool vfsd_dax_wanted(VfsdFs *fs, VfsdInode *inode, const struct statx *stx,
                     bool entry)
{
    char procname[32];

    if (!(fs->conn.flags & FUSE_HAS_INODE_DAX) || !S_ISREG(stx->stx_mode)) {
        return false;
    }
    if (!vfsd_dax_size_mappable(fs, stx->stx_size)) {
        return false;
    }
    switch (fs->opts->dax_policy) {
    case VFSD_DAX_NEVER:
        return false;
    case VFSD_DAX_ALWAYS:
        return true;
    case VFSD_DAX_SIZE:
        return stx->stx_size >= fs->opts->dax_min_size;
    case VFSD_DAX_XATTR:
        /*
         * By the inode's /proc/self/fd name, relative to the working
         * directory (see fs-xattr.c), rather than through an fd opened
         * for it: this runs for every attribute reply, and such an fd
         * would be one more the fd accounting does not bound.
         */
        snprintf(procname, sizeof(procname), "%d", inode->fd);
        return getxattr(procname, VFSD_DAX_XATTR_NAME, NULL, 0) >= 0;
    case VFSD_DAX_EXEC:
        return dax_exec_wanted(fs, inode, stx, entry);
    }
    return false;
}
