/*
 * virtiofsd: FUSE opcode names, for log lines and --stats
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_OPNAMES_H
#define VIRTIOFSD_OPNAMES_H

#include <stdint.h>

/*
 * Opcodes below this have names (and --stats slots of their own); FUSE
 * numbers its opcodes densely from 1 and is at 52.  opnames.c fails to
 * build when an opcode it names reaches it, so the limit moves with the
 * protocol and nothing numbered after it (the stats slots of our own)
 * can ever be mistaken for an opcode.
 */
#define VFSD_OPCODE_LIMIT 64

/* The opcode's name without FUSE_, "unknown" for one we do not know */
const char *vfsd_opname(uint32_t opcode);

#endif /* VIRTIOFSD_OPNAMES_H */
