/*
 * vhost-user-fs: migrating a device whose DAX window is in use.
 *
 * The window holds files of the back-end's host, mapped at its request:
 * not guest RAM, and nothing QEMU could copy.  What the destination needs
 * is the back-end's table of those mappings, so that the destination
 * back-end maps the same file ranges at the same offsets.  A back-end
 * that negotiates VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE promises exactly
 * that: the table travels in its device state, and the destination
 * back-end maps every range again before it answers
 * VHOST_USER_CHECK_DEVICE_STATE, while vhost_user_read() serves its
 * SHMEM_MAP requests.  The vCPUs run only after the device state is
 * loaded, so the guest never sees the window without its mappings.
 *
 * With any other back-end the device keeps a migration blocker, as it
 * had before there was a way to carry the window.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "migration/blocker.h"
#include "hw/virtio/vhost-user-fs.h"
#include "vhost-user-fs-migration.h"
#include "trace.h"

static bool vuf_has_window(VHostUserFS *fs)
{
    return virtio_shmem_arena_exists(&fs->cache);
}

/* Whether the connected back-end carries the window's mappings */
static bool vuf_backend_migrates_window(VHostUserFS *fs)
{
    uint64_t features = fs->vhost_dev.protocol_features;

    return fs->connected &&
           virtio_has_feature(features, VHOST_USER_PROTOCOL_F_DEVICE_STATE) &&
           virtio_has_feature(features, VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE);
}

static void vuf_set_blocker_reason(VHostUserFS *fs, Error **reason)
{
    error_setg(reason, "vhost-user-fs device with tag \"%s\" has a DAX "
               "cache window (cache-size) and cannot be migrated: its "
               "back-end does not carry the window's mappings "
               "(VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE)", fs->conf.tag);
}

bool vuf_migration_update_blocker(VHostUserFS *fs, Error **errp)
{
    bool can = vuf_backend_migrates_window(fs);

    if (!vuf_has_window(fs)) {
        return true;
    }
    trace_vuf_migration_blocker(fs->conf.tag, fs->connected, !can);
    if (can) {
        migrate_del_blocker(&fs->migration_blocker);
        return true;
    }
    if (fs->migration_blocker) {
        return true;
    }
    vuf_set_blocker_reason(fs, &fs->migration_blocker);
    /* On failure the reason is freed and the pointer cleared */
    return migrate_add_blocker(&fs->migration_blocker, errp) >= 0;
}

bool vuf_migration_check(VHostUserFS *fs, Error **errp)
{
    if (!fs->connected) {
        error_setg(errp, "vhost-user-fs device with tag \"%s\" has no "
                   "back-end connected", fs->conf.tag);
        return false;
    }
    if (vuf_has_window(fs) && !vuf_backend_migrates_window(fs)) {
        vuf_set_blocker_reason(fs, errp);
        return false;
    }
    return true;
}

void vuf_migration_saved(VHostUserFS *fs)
{
    if (vuf_has_window(fs)) {
        trace_vuf_migration_saved(fs->conf.tag, fs->cache.nr_mappings);
    }
}

void vuf_migration_loaded(VHostUserFS *fs)
{
    if (vuf_has_window(fs)) {
        trace_vuf_migration_loaded(fs->conf.tag, fs->cache.nr_mappings);
    }
}
