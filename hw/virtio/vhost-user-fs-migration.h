/*
 * vhost-user-fs: migrating a device whose DAX window is in use.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_MIGRATION_H
#define HW_VIRTIO_VHOST_USER_FS_MIGRATION_H

#include "hw/virtio/vhost-user-fs.h"

/**
 * vuf_migration_update_blocker() - block migration unless it can work
 * @fs: the device
 * @errp: pointer to a NULL-initialized error object
 *
 * A device with a DAX window can migrate only with a connected back-end
 * that negotiated VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE (and
 * F_DEVICE_STATE).  Call this whenever a back-end connects or goes away:
 * it adds or removes the device's migration blocker accordingly.
 *
 * Returns: false if the blocker was needed but could not be added
 * (-only-migratable, or a migration is running).
 */
bool vuf_migration_update_blocker(VHostUserFS *fs, Error **errp);

/**
 * vuf_migration_check() - whether the back-end state can be saved or
 * loaded now
 * @fs: the device
 * @errp: pointer to a NULL-initialized error object
 *
 * The last word before the back-end's state is saved (source) or loaded
 * (destination): a blocker cannot be added while a migration runs, so a
 * back-end that changed under it is caught here.
 *
 * Returns: true if it can.
 */
bool vuf_migration_check(VHostUserFS *fs, Error **errp);

/* After the back-end's state was saved or loaded, for the trace */
void vuf_migration_saved(VHostUserFS *fs);
void vuf_migration_loaded(VHostUserFS *fs);

#endif
