/*
 * virtiofsd: blocking requests, and parking them across stops
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_VHOST_PARK_H
#define VIRTIOFSD_VHOST_PARK_H

#include "vhost-dev.h"
#include "migstream.h"

/*
 * @el, a blocking request whose arguments were copied, runs in
 * dev->blocking_pool; called with park_lock held
 */
void vfsd_park_submit(VfsdDev *dev, VfsdElem *el);
/* dev->blocking_pool's function: runs one blocking request */
void vfsd_park_worker(gpointer data, gpointer user_data);

/*
 * Whether @el, which this thread just ran, is to run again because a
 * stop gave up its front-end round trip; clears that
 */
bool vfsd_park_rerun_wanted(VfsdElem *el);
/*
 * @el runs again as a blocking request, from a copy of its arguments
 * taken from @out_segs; called with dispatch_lock held for reading
 */
void vfsd_park_rerun(VfsdElem *el, VfsdSeg *out_segs);
/*
 * Once a stop no longer gives up round trips: what waits to run again on
 * live queues runs; dispatch_lock held for writing
 */
void vfsd_park_rerun_live(VfsdDev *dev);

/*
 * Queue @qidx stops: its blocking requests' waits end and they are
 * parked; called without dispatch_lock
 */
void vfsd_park(VfsdDev *dev, int qidx);
/* Remembers where @qidx's ring stopped; dispatch_lock held for writing */
void vfsd_park_ring_mark(VfsdDev *dev, int qidx);
/*
 * Queue @qidx started: its parked requests run again or get their
 * replies, or are dropped on a new ring; dispatch_lock held for writing
 */
void vfsd_park_restart(VfsdDev *dev, int qidx);
/*
 * Drops the parked requests of @qidx (all queues' if negative) that came
 * with a migration (@carried) or not; park_lock held
 */
void vfsd_park_drop(VfsdDev *dev, int qidx, bool carried);

/* The parked requests in a migration's stream (VfsdMigHook's save, load) */
bool vfsd_park_save(void *opaque, VfsdMigWriter *w, char **err);
bool vfsd_park_load(void *opaque, VfsdMigReader *r, char **err);

#endif /* VIRTIOFSD_VHOST_PARK_H */
