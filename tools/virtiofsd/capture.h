/*
 * virtiofsd: recording the guest's requests for the fuzzer
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_CAPTURE_H
#define VIRTIOFSD_CAPTURE_H

#include "buf.h"

/* -1 unless VIRTIOFSD_CAPTURE named a file when the process started */
extern int vfsd_capture_fd;

/* Appends the request in @in, not consuming it; @out: its reply room */
void vfsd_capture_request(const VfsdBuf *in, const VfsdBuf *out);

#endif /* VIRTIOFSD_CAPTURE_H */
