/*
 * virtiofsd: every FUSE opcode we know, one row each
 *
 * One list, expanded twice: into opnames.c's names, which the layers
 * below the decoding one use for their counters and log lines, and into
 * server.c's ops[], which serves each opcode.  Kept apart, the two
 * drifted (a name without a row, a row under another name); here a new
 * opcode is one line.
 *
 * VFSD_FUSE_OPS(OP) expands OP(opcode, handler, variant, flags) per
 * opcode:
 *   opcode   the name after FUSE_ (FUSE_##opcode is the number, #opcode
 *            the name log lines and --stats print)
 *   handler  server.c's do_*() that decodes and answers it, NULL where
 *            we do not serve it (the guest gets ENOSYS and has fallbacks)
 *   variant  the bool the handler is called with: one handler serves
 *            both opcodes of a pair that differ in one respect (a
 *            directory or not, a wider reply), and this says which
 *   flags    VFSD_OP_* below
 *
 * A file that expands it names no function of server.c unless it uses
 * the handler argument: opnames.c drops it.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FUSE_OPS_H
#define VIRTIOFSD_FUSE_OPS_H

/*
 * What the hiprio queue carries.  Its requests are run as they arrive, in
 * the queue's thread: anything else there (a SETLKW, a slow FSYNC) would
 * hold up that thread and the forgets behind it.
 */
#define VFSD_OP_HIPRIO          (1u << 0)
/*
 * May block indefinitely (SETLKW): the transport runs it where it cannot
 * hold up its queue (see vfsd_request_may_block()).
 */
#define VFSD_OP_MAY_BLOCK       (1u << 1)
/* Gets no reply, and is not counted by --stats */
#define VFSD_OP_NO_REPLY        (1u << 2)
/* Served before INIT */
#define VFSD_OP_BEFORE_INIT     (1u << 3)
/*
 * Its payload is not copied out of the request with the arguments: WRITE's
 * data is read once, by pwritev() straight from guest memory.
 */
#define VFSD_OP_DATA_IN_PLACE   (1u << 4)
/*
 * Makes a file, which carries the guest's security label if it sent one
 * (FUSE_SECURITY_CTX): a malformed label fails it with EINVAL before the
 * handler runs, so that nothing is made without the label asked for.
 */
#define VFSD_OP_LABELLED        (1u << 5)

#define VFSD_FUSE_OPS(OP) \
    OP(INIT, do_init, false, VFSD_OP_BEFORE_INIT) \
    OP(DESTROY, do_destroy, false, 0) \
    OP(LOOKUP, do_lookup, false, 0) \
    OP(FORGET, do_forget, false, VFSD_OP_HIPRIO | VFSD_OP_NO_REPLY) \
    OP(BATCH_FORGET, do_batch_forget, false, \
       VFSD_OP_HIPRIO | VFSD_OP_NO_REPLY) \
    OP(INTERRUPT, do_interrupt, false, VFSD_OP_HIPRIO | VFSD_OP_NO_REPLY) \
    OP(GETATTR, do_getattr, false, 0) \
    OP(STATX, do_statx, false, 0) \
    OP(SETATTR, do_setattr, false, 0) \
    OP(READLINK, do_readlink, false, 0) \
    OP(SYMLINK, do_symlink, false, VFSD_OP_LABELLED) \
    OP(MKNOD, do_mknod, false, VFSD_OP_LABELLED) \
    OP(MKDIR, do_mkdir, false, VFSD_OP_LABELLED) \
    OP(UNLINK, do_unlink, false, 0)                 /* is_dir */ \
    OP(RMDIR, do_unlink, true, 0) \
    OP(RENAME, do_rename, false, 0)                 /* v2 */ \
    OP(RENAME2, do_rename, true, 0) \
    OP(LINK, do_link, false, 0) \
    OP(OPEN, do_open, false, 0)                     /* is_dir */ \
    OP(OPENDIR, do_open, true, 0) \
    OP(CREATE, do_create, false, VFSD_OP_LABELLED) /* tmpfile */ \
    OP(TMPFILE, do_create, true, VFSD_OP_LABELLED) \
    OP(READ, do_read, false, 0) \
    OP(WRITE, do_write, false, VFSD_OP_DATA_IN_PLACE) \
    OP(STATFS, do_statfs, false, 0) \
    OP(RELEASE, do_release, false, 0)               /* is_dir */ \
    OP(RELEASEDIR, do_release, true, 0) \
    OP(FSYNC, do_fsync, false, 0)                   /* is_dir */ \
    OP(FSYNCDIR, do_fsync, true, 0) \
    OP(FLUSH, do_flush, false, 0) \
    OP(SETXATTR, do_setxattr, false, 0) \
    OP(GETXATTR, do_getxattr, false, 0)             /* list */ \
    OP(LISTXATTR, do_getxattr, true, 0) \
    OP(REMOVEXATTR, do_removexattr, false, 0) \
    OP(READDIR, do_readdir, false, 0)               /* plus */ \
    OP(READDIRPLUS, do_readdir, true, 0) \
    OP(GETLK, do_getlk, false, 0) \
    OP(SETLK, do_setlk, false, 0)                   /* sleep */ \
    OP(SETLKW, do_setlk, true, VFSD_OP_MAY_BLOCK) \
    OP(ACCESS, do_access, false, 0) \
    OP(FALLOCATE, do_fallocate, false, 0) \
    OP(LSEEK, do_lseek, false, 0) \
    OP(IOCTL, do_ioctl, false, 0) \
    OP(COPY_FILE_RANGE, do_copy_file_range, false, 0) /* wide */ \
    OP(COPY_FILE_RANGE_64, do_copy_file_range, true, 0) \
    OP(SYNCFS, do_syncfs, false, 0) \
    OP(SETUPMAPPING, do_setupmapping, false, 0) \
    OP(REMOVEMAPPING, do_removemapping, false, 0) \
    OP(BMAP, NULL, false, 0) \
    OP(POLL, NULL, false, 0) \
    OP(NOTIFY_REPLY, NULL, false, 0)

#endif /* VIRTIOFSD_FUSE_OPS_H */
