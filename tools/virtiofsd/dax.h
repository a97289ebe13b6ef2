/*
 * virtiofsd: the DAX cache window
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_DAX_H
#define VIRTIOFSD_DAX_H

#include "dax-backend.h"
#include "dax-migrate.h"
#include "dax-policy.h"
#include "dax-resize.h"
#include "fs-types.h"

VfsdDax *vfsd_dax_new(const VfsdDaxBackend *be);
void vfsd_dax_free(VfsdDax *dax);
bool vfsd_dax_available(VfsdFs *fs);

/*
 * SETUPMAPPING: @len bytes of @nodeid's file from @foffset at @moffset
 * of the window, writable or not; the guest sends no file handle that
 * could be used (see setup_open()).  REMOVEMAPPING: @count ranges.
 */
int vfsd_op_setupmapping(VfsdFs *fs, uint64_t nodeid, uint64_t foffset,
                         uint64_t len, uint64_t moffset, bool writable);
int vfsd_op_removemapping(VfsdFs *fs, const VfsdDaxRange *ranges,
                          uint32_t count);

/*
 * Lazy unmaps: ranges the guest removes stay mapped for up to @delay_ms,
 * and vfsd_dax_flush() is to run whenever vfsd_dax_flush_fd() (a timerfd)
 * is readable.  Off (fd -1) unless started.
 */
bool vfsd_dax_lazy_start(VfsdDax *dax, unsigned int delay_ms, char **err);
int vfsd_dax_flush_fd(VfsdDax *dax);
void vfsd_dax_flush(VfsdFs *fs);

/* FUSE_DESTROY: unmaps everything */
void vfsd_dax_reset(VfsdFs *fs);
/* Disconnect: the front-end dropped the mappings itself */
void vfsd_dax_forget_all(VfsdFs *fs);
/* Number of live mappings, for tests */
unsigned int vfsd_dax_count(VfsdFs *fs);

#endif /* VIRTIOFSD_DAX_H */
