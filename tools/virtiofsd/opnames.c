/*
 * virtiofsd: FUSE opcode names
 *
 * On their own, below everything else: the request counters (stats.c)
 * and log lines of any layer name opcodes without depending on the
 * decoding layer (server.c) that serves them.  The names come from the
 * list server.c's table is made of (fuse-ops.h).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>

#include "fuse-ops.h"
#include "fuse-proto.h"
#include "opnames.h"

/* The list names server.c's handlers: only the opcode is wanted here */
#define VFSD_OP_NAME(opcode, handler, variant, flags) \
    [FUSE_##opcode] = { .name = #opcode },

static const struct {
    const char *name;
} names[] = {
    VFSD_FUSE_OPS(VFSD_OP_NAME)
};

#undef VFSD_OP_NAME

G_STATIC_ASSERT(G_N_ELEMENTS(names) <= VFSD_OPCODE_LIMIT);

const char *vfsd_opname(uint32_t opcode)
{
    return opcode < G_N_ELEMENTS(names) && names[opcode].name ?
           names[opcode].name : "unknown";
}
