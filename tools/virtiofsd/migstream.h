/*
 * virtiofsd: the migration stream's encoding
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_MIGSTREAM_H
#define VIRTIOFSD_MIGSTREAM_H

/*
 * A leaf, so that every layer that has state to carry (migrate.c for the
 * file system, dax-migrate.c for the window) writes and reads its own section
 * with the same checked primitives.  Integers are little-endian.
 */

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct VfsdMigWriter {
    GByteArray *buf;
} VfsdMigWriter;

void vfsd_mig_put_u8(VfsdMigWriter *w, uint8_t v);
void vfsd_mig_put_u16(VfsdMigWriter *w, uint16_t v);
void vfsd_mig_put_u32(VfsdMigWriter *w, uint32_t v);
void vfsd_mig_put_u64(VfsdMigWriter *w, uint64_t v);
void vfsd_mig_put_bytes(VfsdMigWriter *w, const void *p, size_t len);
/* A u32 length, then the bytes */
void vfsd_mig_put_blob(VfsdMigWriter *w, const void *p, uint32_t len);
/* Where a later vfsd_mig_patch_u64() writes, e.g. a count found after */
size_t vfsd_mig_tell(VfsdMigWriter *w);
void vfsd_mig_patch_u64(VfsdMigWriter *w, size_t at, uint64_t v);

/*
 * Reads never go past the end: the first short read sets @bad, and every
 * read after it gives zeros, so a parser checks once per record.
 */
typedef struct VfsdMigReader {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool bad;
} VfsdMigReader;

void vfsd_mig_reader_init(VfsdMigReader *r, const void *p, size_t len);
uint8_t vfsd_mig_get_u8(VfsdMigReader *r);
uint16_t vfsd_mig_get_u16(VfsdMigReader *r);
uint32_t vfsd_mig_get_u32(VfsdMigReader *r);
uint64_t vfsd_mig_get_u64(VfsdMigReader *r);
bool vfsd_mig_get_bytes(VfsdMigReader *r, void *p, size_t len);
/*
 * A blob of at most @max bytes, pointing into the stream; NULL (and @bad)
 * if longer or truncated
 */
const uint8_t *vfsd_mig_get_blob(VfsdMigReader *r, uint32_t max,
                                 uint32_t *len);
size_t vfsd_mig_remaining(const VfsdMigReader *r);
/*
 * A count of records of at least @min_size bytes each: more than the rest
 * of the stream could hold is a corrupt count (@bad), not an allocation
 */
bool vfsd_mig_get_count(VfsdMigReader *r, size_t min_size, uint64_t *count);

#endif /* VIRTIOFSD_MIGSTREAM_H */
