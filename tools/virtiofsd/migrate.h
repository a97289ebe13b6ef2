/*
 * virtiofsd: the state a live migration carries to the destination
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_MIGRATE_H
#define VIRTIOFSD_MIGRATE_H

#include "fs-types.h"
#include "migstream.h"

/*
 * The stream (docs/tools/virtiofsd.rst, "Live migration"): a header
 * (VFSD_MIG_MAGIC, a u32 version, a u32 of flags), then sections of
 * { u32 type, u32 flags, u64 length, payload }, ending with a section of
 * type VFSD_MIG_SEC_END.  Little-endian throughout.
 */
#define VFSD_MIG_MAGIC "VFSDMIG\n"
#define VFSD_MIG_MAGIC_LEN 8
#define VFSD_MIG_VERSION 1

enum {
    VFSD_MIG_SEC_END = 0,
    VFSD_MIG_SEC_SESSION = 1,   /* what FUSE_INIT negotiated */
    VFSD_MIG_SEC_INODES = 2,    /* nodeid, lookups, how to find it */
    VFSD_MIG_SEC_HANDLES = 3,   /* fh, nodeid, open flags */
    VFSD_MIG_SEC_LOCKS = 4,     /* POSIX locks by owner */
    VFSD_MIG_SEC_DAX = 5,       /* the DAX window's mappings (dax-migrate.c) */
    VFSD_MIG_SEC_REQUESTS = 6,  /* requests in flight (the transport's) */
};

/* A section a reader that does not know its type may skip */
#define VFSD_MIG_SEC_OPTIONAL (1u << 0)

/* Largest stream the destination takes */
#define VFSD_MIG_MAX_STATE (1ULL << 30)

/* Direction of a transfer, as VHOST_USER_SET_DEVICE_STATE_FD has it */
typedef enum VfsdMigDir {
    VFSD_MIG_SAVE = 0,
    VFSD_MIG_LOAD = 1,
} VfsdMigDir;

/*
 * The whole state of @fs, serialised (the device is stopped); NULL with
 * @err on failure.  The guest's POSIX locks are released on the host:
 * they travel with the state (vfsd_migrate_resume() takes them back).
 */
GByteArray *vfsd_migrate_save(VfsdFs *fs, char **err);
/*
 * Restores a fresh session (no FUSE_INIT yet) from @len bytes at @p;
 * false with @err if the stream is bad or, under
 * --migration-on-error=abort, something in it cannot be restored.
 */
bool vfsd_migrate_load(VfsdFs *fs, const uint8_t *p, size_t len, char **err);
/*
 * The source runs on after a failed migration: takes back the locks
 * vfsd_migrate_save() let go.  Nothing to do otherwise.
 */
void vfsd_migrate_resume(VfsdFs *fs);

/*
 * The section the transport keeps, in the layer above: the requests it
 * holds that the guest still waits for (lock waits parked while the
 * device is stopped).  It is written last; a stream that has it needs a
 * hook to load it.
 */
typedef struct VfsdMigHook {
    bool (*save)(void *opaque, VfsdMigWriter *w, char **err);
    bool (*load)(void *opaque, VfsdMigReader *r, char **err);
    void *opaque;
} VfsdMigHook;
void vfsd_migrate_set_hook(VfsdFs *fs, const VfsdMigHook *hook);

/*
 * A transfer over @fd (taken over), running in a thread of its own since
 * the front-end reads or writes the other end only after our reply.
 * SAVE serialises now and writes; LOAD reads until end of file.
 */
typedef struct VfsdMigXfer VfsdMigXfer;
VfsdMigXfer *vfsd_migrate_begin(VfsdFs *fs, VfsdMigDir dir, int fd,
                                char **err);
/*
 * Waits for the transfer's end and, for LOAD, restores the state; false
 * with @err if any of it failed.  Frees @x.
 */
bool vfsd_migrate_end(VfsdMigXfer *x, char **err);
/* Frees the session's migration state (vfsd_fs_cleanup()) */
void vfsd_migrate_free(VfsdFs *fs);

#endif /* VIRTIOFSD_MIGRATE_H */
