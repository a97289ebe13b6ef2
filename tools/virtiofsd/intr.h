/*
 * virtiofsd: FUSE_INTERRUPT of requests that wait
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_INTR_H
#define VIRTIOFSD_INTR_H

#include "fs-types.h"

/*
 * A request that may wait calls vfsd_waiter_begin() first,
 * checks vfsd_waiter_interrupted() before each blocking call and after
 * each EINTR, and calls vfsd_waiter_end() when done.
 */
bool vfsd_intr_init(VfsdFs *fs, char **err);
void vfsd_intr_cleanup(VfsdFs *fs);
void vfsd_waiter_begin(VfsdFs *fs, VfsdWaiter *w, uint64_t unique);
bool vfsd_waiter_interrupted(VfsdFs *fs, VfsdWaiter *w);
void vfsd_waiter_end(VfsdFs *fs, VfsdWaiter *w);
void vfsd_interrupt(VfsdFs *fs, uint64_t unique);
/* Every wait, and every later one, ends with EINTR */
void vfsd_interrupt_all(VfsdFs *fs);
/*
 * With @pause, the same until called again without: the transport parks
 * the requests that wait while the device is stopped.
 */
void vfsd_interrupt_pause(VfsdFs *fs, bool pause);


#endif /* VIRTIOFSD_INTR_H */
