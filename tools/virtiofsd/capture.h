/*
 * virtiofsd: recording the guest's requests for the fuzzer
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_CAPTURE_H
#define VIRTIOFSD_CAPTURE_H

#include "fuse-proto.h"
#include "buf.h"

/* -1 unless VIRTIOFSD_CAPTURE named a file when the process started */
extern int vfsd_capture_fd;

/*
 * Appends the request: its header @h (NULL: it had none), then what
 * follows it in @in (not consumed); @out: its reply room.  A debugging
 * aid: the arguments are read from the guest a second time, so a guest
 * rewriting them meanwhile gets a record of other arguments than the
 * ones that ran.
 */
void vfsd_capture_request(const struct fuse_in_header *h, const VfsdBuf *in,
                          const VfsdBuf *out);

#endif /* VIRTIOFSD_CAPTURE_H */
