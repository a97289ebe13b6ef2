/*
 * virtiofsd: the DAX window's mappings in a live migration's state
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_MIGRATE_H
#define VIRTIOFSD_DAX_MIGRATE_H

#include "fs-types.h"
#include "migstream.h"

/*
 * Migration with a live window (VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE).
 * The source writes its mapping table into its state with
 * vfsd_dax_save().  The destination checks a table with vfsd_dax_load(),
 * which maps nothing: the front-end may be busy writing the rest of the
 * state and serve no map request meanwhile.  vfsd_dax_restore() then maps
 * every range through the front-end, once the whole state is read and
 * before the front-end is told it was taken (CHECK_DEVICE_STATE).  The
 * table names inodes by the guest's node ids, so the inodes must have
 * been restored before vfsd_dax_load().  With nothing mapped,
 * vfsd_dax_save() writes nothing at all.  Any range that cannot be mapped
 * again fails the migration, whatever --migration-on-error says: the
 * guest would read zeros where its file was.
 */
bool vfsd_dax_save(VfsdFs *fs, VfsdMigWriter *w, char **err);
bool vfsd_dax_load(VfsdFs *fs, VfsdMigReader *r, char **err);
bool vfsd_dax_restore(VfsdFs *fs, char **err);
/* Drops a table loaded but not restored (a migration that failed) */
void vfsd_dax_load_cancel(VfsdFs *fs);

/* vfsd_dax_free(): drops a table loaded but not restored.  Lock held. */
void vfsd_dax_restoring_free(VfsdDax *dax);

#endif /* VIRTIOFSD_DAX_MIGRATE_H */
