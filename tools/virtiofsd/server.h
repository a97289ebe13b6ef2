/*
 * virtiofsd: FUSE request decoding and dispatch
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_SERVER_H
#define VIRTIOFSD_SERVER_H

#include "fs.h"

/* The FUSE protocol minor versions we serve; virtio-fs started at 7.31 */
#define VFSD_MIN_MINOR 31

/*
 * Decodes one request from @in (what the guest wrote), runs it and writes
 * the reply to @out (what the guest reads).  Needs no transport: the
 * tests and fuzzers call it with buffers they built.
 *
 * Returns the number of bytes written to @out, 0 for requests that get no
 * reply (FORGET, BATCH_FORGET, INTERRUPT).
 */
size_t vfsd_process_request(VfsdFs *fs, VfsdBuf *in, VfsdBuf *out);

/*
 * The same for a request from the hiprio queue (queue 0), which the
 * transport runs in its queue thread: anything but FORGET, BATCH_FORGET
 * and INTERRUPT gets EINVAL without being run.
 */
size_t vfsd_process_hiprio(VfsdFs *fs, VfsdBuf *in, VfsdBuf *out);

/*
 * The same for a request that may block (see vfsd_request_may_block())
 * when the transport has no room left to let it wait: a SETLKW takes the
 * lock if it is free and fails with ENOLCK if not.
 */
size_t vfsd_process_no_wait(VfsdFs *fs, VfsdBuf *in, VfsdBuf *out);

/*
 * Whether the request may block indefinitely (SETLKW), so the transport
 * runs it where it cannot hold up its queue.
 */
bool vfsd_request_may_block(const VfsdBuf *in);

/* The opcode's name without FUSE_, for log lines */
const char *vfsd_opname(uint32_t opcode);

#endif /* VIRTIOFSD_SERVER_H */
