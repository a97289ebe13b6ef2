/*
 * virtiofsd: request counters and service times (--stats)
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_STATS_H
#define VIRTIOFSD_STATS_H

#include <stdint.h>

#include "opnames.h"

/*
 * Slots past the FUSE opcodes, for the waits on the front-end that DAX
 * requests include: they tell how much of a SETUPMAPPING is QEMU's.
 * Opcodes past VFSD_OPCODE_LIMIT count as "other" (slot 0), never here.
 */
enum {
    VFSD_STATS_FE_MAP = VFSD_OPCODE_LIMIT,
    VFSD_STATS_FE_UNMAP,
    /* Lazy unmaps: how long removed ranges stayed mapped, by fate */
    VFSD_STATS_DAX_TAKEN_OVER,
    VFSD_STATS_DAX_UNMAPPED_LATE,
    /* --dax-policy=exec reading a file's first bytes */
    VFSD_STATS_DAX_ELF_CHECK,
    VFSD_STATS_SLOTS,
};

typedef struct VfsdStats VfsdStats;

VfsdStats *vfsd_stats_new(void);
void vfsd_stats_free(VfsdStats *stats);
/* Monotonic nanoseconds, for vfsd_stats_record()'s @start */
int64_t vfsd_stats_now(void);
/* Counts one request of @opcode that began at @start */
void vfsd_stats_record_op(VfsdStats *stats, uint32_t opcode, int64_t start);
/* Counts one wait of ours, @slot (VFSD_STATS_FE_*, _DAX_*), from @start */
void vfsd_stats_record(VfsdStats *stats, uint32_t slot, int64_t start);
/* How many @slot counted (a test's look at what was done) */
uint64_t vfsd_stats_count(VfsdStats *stats, uint32_t slot);
/* One log line per slot that saw any request */
void vfsd_stats_report(VfsdStats *stats);

#endif /* VIRTIOFSD_STATS_H */
