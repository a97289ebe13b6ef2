/*
 * virtiofsd: FUSE request decoding and dispatch
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_SERVER_H
#define VIRTIOFSD_SERVER_H

#include "buf.h"
#include "fs-types.h"

/* The FUSE protocol minor versions we serve; virtio-fs started at 7.31 */
#define VFSD_MIN_MINOR 31

/*
 * What the transport knows of a request before it runs it: its header,
 * read from guest memory once.  Where the request runs and what runs are
 * both decided from this copy: a guest rewriting its buffer meanwhile
 * cannot have one opcode routed and another one run.
 */
typedef struct VfsdReqHead {
    struct fuse_in_header h;
    size_t avail;               /* bytes of request, the header included */
    bool valid;                 /* false: shorter than a header */
} VfsdReqHead;

/* Reads the header off the front of @in (consuming it) into @head */
void vfsd_request_head(VfsdBuf *in, VfsdReqHead *head);

/*
 * Decodes the rest of the request from @in (what the guest wrote after
 * the header), runs it and writes the reply to @out (what the guest
 * reads).  Needs no transport: the tests and fuzzers call it with
 * buffers they built.  No byte of @in is read twice.
 *
 * Returns the number of bytes written to @out, 0 for requests that get no
 * reply (FORGET, BATCH_FORGET, INTERRUPT).
 */
size_t vfsd_process_request(VfsdFs *fs, const VfsdReqHead *head,
                            VfsdBuf *in, VfsdBuf *out);

/*
 * The same for a request from the hiprio queue (queue 0), which the
 * transport runs in its queue thread: anything but FORGET, BATCH_FORGET
 * and INTERRUPT gets EINVAL without being run.
 */
size_t vfsd_process_hiprio(VfsdFs *fs, const VfsdReqHead *head,
                           VfsdBuf *in, VfsdBuf *out);

/*
 * The same for a request that may block (see vfsd_request_may_block())
 * when the transport has no room left to let it wait: a SETLKW takes the
 * lock if it is free and fails with ENOLCK if not.
 */
size_t vfsd_process_no_wait(VfsdFs *fs, const VfsdReqHead *head,
                            VfsdBuf *in, VfsdBuf *out);

/*
 * Whether the request may block indefinitely (SETLKW), so the transport
 * runs it where it cannot hold up its queue.
 */
bool vfsd_request_may_block(const VfsdReqHead *head);

/*
 * The error (a negative errno, 0 for none) of the reply of @len bytes at
 * @rep: the transport tells a wait it interrupted from one that ended.
 */
int vfsd_reply_error(const void *rep, size_t len);

/*
 * Every FUSE_INIT flag this daemon's options let a session agree on: a
 * migrated session (whose flags come from another daemon) may use no
 * other.
 */
uint64_t vfsd_init_flags_offered(VfsdFs *fs);

#endif /* VIRTIOFSD_SERVER_H */
