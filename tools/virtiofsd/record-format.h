/*
 * virtiofsd: the file VIRTIOFSD_RECORD writes (capture.c), which the load
 * generator (tests/unit/virtiofsd/loadgen.c) replays
 *
 * VFSD_RECORD_MAGIC, then records: a VfsdRecord, then @len bytes, then
 * zeros up to a multiple of 8 (so that every record is aligned).  For a
 * request, the request as the daemon read it, its fuse_in_header first;
 * for a reply, the reply as the daemon wrote it, its fuse_out_header
 * first.  A request is written before it runs and its reply after, so
 * the requests stand in the order they started, and a reply names its
 * request by @unique.  Requests without a reply (FORGET) have no reply
 * record.  Host byte order: the file is read where it was written.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_RECORD_FORMAT_H
#define VIRTIOFSD_RECORD_FORMAT_H

#include <stdint.h>

#define VFSD_RECORD_MAGIC "VFSDREC1"    /* 8 bytes, no NUL */
#define VFSD_RECORD_ALIGN(len) (((len) + 7) & ~(size_t)7)

enum {
    VFSD_RECORD_REQUEST = 1,
    VFSD_RECORD_REPLY = 2,
};

/* VfsdRecord.flags of a request */
#define VFSD_RECORD_HIPRIO 1u           /* it came on the hiprio queue */

typedef struct VfsdRecord {
    uint32_t kind;
    uint32_t len;
    uint64_t unique;
    uint32_t room;          /* a request's: the bytes given for its reply */
    uint32_t flags;
} VfsdRecord;

#endif /* VIRTIOFSD_RECORD_FORMAT_H */
