/*
 * virtiofsd: recording the guest's requests for the fuzzer, and the
 * requests with their replies for the load generator
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_CAPTURE_H
#define VIRTIOFSD_CAPTURE_H

#include "fuse-proto.h"
#include "buf.h"
#include "record-format.h"

/* -1 unless VIRTIOFSD_CAPTURE named a file when the process started */
extern int vfsd_capture_fd;
/* -1 unless VIRTIOFSD_RECORD named a file when the process started */
extern int vfsd_record_fd;

/*
 * Appends the request: its header @h (NULL: it had none), then what
 * follows it in @in (not consumed); @out: its reply room.  A debugging
 * aid: the arguments are read from the guest a second time, so a guest
 * rewriting them meanwhile gets a record of other arguments than the
 * ones that ran.
 */
void vfsd_capture_request(const struct fuse_in_header *h, const VfsdBuf *in,
                          const VfsdBuf *out);

/*
 * Writes the request with header @h, then what follows it in @in (not
 * consumed), before it runs; @out: its reply room; @hiprio: it came on
 * the hiprio queue.  The same caveat as above: what the guest rewrites
 * meanwhile may be recorded instead.
 */
void vfsd_record_request(const struct fuse_in_header *h, const VfsdBuf *in,
                         const VfsdBuf *out, bool hiprio);

/*
 * Writes the reply to request @unique once it ran: the first @len bytes
 * of @out (the reply room from its start, not consumed); nothing for
 * @len 0 (no reply).
 */
void vfsd_record_reply(uint64_t unique, const VfsdBuf *out, size_t len);

#endif /* VIRTIOFSD_CAPTURE_H */
