/*
 * virtiofsd: the queue workers of the vhost-user transport
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_VHOST_QUEUE_H
#define VIRTIOFSD_VHOST_QUEUE_H

#include "vhost-dev.h"

/* VuDevIface's queue_set_started: starts or stops queue @qidx's thread */
void vfsd_queue_set_started(VuDev *vu, int qidx, bool started);
/*
 * Stops queue @qidx, if started, once what it popped is done or parked;
 * called by the main thread with dispatch_lock held for writing
 */
void vfsd_queue_stop(VfsdDev *dev, int qidx);
/* dev->pool's function: runs one request handed over by a queue thread */
void vfsd_queue_pool_worker(gpointer data, gpointer user_data);

#endif /* VIRTIOFSD_VHOST_QUEUE_H */
