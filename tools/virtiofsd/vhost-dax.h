/*
 * virtiofsd: the DAX window's back-end over vhost-user
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_VHOST_DAX_H
#define VIRTIOFSD_VHOST_DAX_H

#include "vhost-dev.h"

/*
 * An extension not yet in the upstream specification (vhost-user.rst,
 * "Migrating shared memory mappings"): the DAX window's
 * mappings travel in the state, and the destination maps them again
 * before it answers CHECK_DEVICE_STATE.
 */
#define VFSD_VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE 42

/* The DAX window of @dev, whose map and unmap requests go to its front-end */
VfsdDax *vfsd_vhost_dax_new(VfsdDev *dev);

/*
 * --watch-truncate: the thread that drops the mappings of files truncated
 * on the host; false (@err) if it cannot start
 */
bool vfsd_vhost_dax_watch_start(VfsdDev *dev, char **err);
/* Ends that thread, if it runs */
void vfsd_vhost_dax_watch_stop(VfsdDev *dev);

#endif /* VIRTIOFSD_VHOST_DAX_H */
