/*
 * virtiofsd: request counters and service times (--stats)
 *
 * Where does the time of a guest's request go?  The guest sees a round
 * trip; these counters give the part spent in the daemon, per opcode,
 * and the part of DAX requests spent waiting for the front-end, so that
 * the rest can be put down to the transport and the guest.  Counting is
 * lock-free: requests of several queues and pool threads record at once.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>
#include <time.h>

#include "log.h"
#include "opnames.h"
#include "stats.h"

typedef struct {
    uint64_t count;
    uint64_t total_ns;
    uint64_t max_ns;
} VfsdStatsSlot;

struct VfsdStats {
    VfsdStatsSlot slot[VFSD_STATS_SLOTS];
};

VfsdStats *vfsd_stats_new(void)
{
    return g_new0(VfsdStats, 1);
}

void vfsd_stats_free(VfsdStats *stats)
{
    g_free(stats);
}

int64_t vfsd_stats_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void record(VfsdStats *stats, uint32_t slot, int64_t start)
{
    uint64_t ns = vfsd_stats_now() - start;
    VfsdStatsSlot *s = &stats->slot[slot];
    uint64_t max;

    __atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->total_ns, ns, __ATOMIC_RELAXED);
    max = __atomic_load_n(&s->max_ns, __ATOMIC_RELAXED);
    while (ns > max &&
           !__atomic_compare_exchange_n(&s->max_ns, &max, ns, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        /* max now holds the value another thread stored */
    }
}

void vfsd_stats_record_op(VfsdStats *stats, uint32_t opcode, int64_t start)
{
    /* Opcodes we do not know are not worth a slot of their own */
    record(stats, opcode < VFSD_OPCODE_LIMIT ? opcode : 0, start);
}

void vfsd_stats_record(VfsdStats *stats, uint32_t slot, int64_t start)
{
    g_assert(slot >= VFSD_OPCODE_LIMIT && slot < VFSD_STATS_SLOTS);
    record(stats, slot, start);
}

uint64_t vfsd_stats_count(VfsdStats *stats, uint32_t slot)
{
    g_assert(slot < VFSD_STATS_SLOTS);
    return __atomic_load_n(&stats->slot[slot].count, __ATOMIC_RELAXED);
}

static const char *slot_name(uint32_t slot)
{
    switch (slot) {
    case 0:
        return "other";
    case VFSD_STATS_FE_MAP:
        return "front-end map";
    case VFSD_STATS_FE_UNMAP:
        return "front-end unmap";
    case VFSD_STATS_DAX_TAKEN_OVER:
        return "removed range kept until mapped again";
    case VFSD_STATS_DAX_UNMAPPED_LATE:
        return "removed range kept until unmapped";
    case VFSD_STATS_DAX_ELF_CHECK:
        return "ELF check (--dax-policy=exec)";
    default:
        return vfsd_opname(slot);
    }
}

void vfsd_stats_report(VfsdStats *stats)
{
    uint32_t i;

    for (i = 0; i < VFSD_STATS_SLOTS; i++) {
        const VfsdStatsSlot *s = &stats->slot[i];

        if (!s->count) {
            continue;
        }
        vfsd_info("stats: %s: %" G_GUINT64_FORMAT " requests, mean %.1f us, "
                  "max %.1f us", slot_name(i), s->count,
                  s->total_ns / 1000.0 / s->count, s->max_ns / 1000.0);
    }
}
