/*
 * virtiofsd: the FUSE protocol as we speak it
 *
 * QEMU's standard-headers pin the FUSE protocol at the version of the
 * kernel headers QEMU last imported (7.42 for QEMU 10.0), while guests
 * speak newer ones.  What we honour of the newer minors is defined here,
 * each under a guard so that a newer standard-headers/linux/fuse.h takes
 * over without a clash.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FUSE_PROTO_H
#define VIRTIOFSD_FUSE_PROTO_H

#include <stdint.h>

#include "standard-headers/linux/fuse.h"

/*
 * The minor version INIT announces: the newest whose every operation we
 * answer or refuse the way the protocol expects.
 *
 * 7.43 adds the INIT flag FUSE_REQUEST_TIMEOUT, which we do not offer:
 * with it the guest tears the whole session down when one request takes
 * longer than a limit, and a SETLKW may rightly wait without end, as may
 * any request while the device is stopped for a migration.
 * 7.44 and 7.45 add notifications (FUSE_NOTIFY_INC_EPOCH,
 * FUSE_NOTIFY_PRUNE), sent by the server only if it wants to: we send
 * none, as the guest's virtio-fs driver has no notification queue.
 * 7.45 adds FUSE_COPY_FILE_RANGE_64, which we serve.
 */
#define VFSD_PROTO_MINOR 45

#if FUSE_KERNEL_MINOR_VERSION < 43
#define FUSE_REQUEST_TIMEOUT (1ULL << 42)
#endif

#if FUSE_KERNEL_MINOR_VERSION < 45
/* COPY_FILE_RANGE with a 64-bit count in its reply */
#define FUSE_COPY_FILE_RANGE_64 53

struct fuse_copy_file_range_out {
    uint64_t bytes_copied;
};
#endif

#endif /* VIRTIOFSD_FUSE_PROTO_H */
