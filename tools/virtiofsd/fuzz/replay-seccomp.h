/*
 * virtiofsd: the corpus under the seccomp filter, the linker's hook
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_REPLAY_SECCOMP_H
#define VIRTIOFSD_REPLAY_SECCOMP_H

#include "fs.h"

/* Linked with -Wl,--wrap=vfsd_fs_init: the harness's call ends here */
bool __real_vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                         int proc_fd, char **err);
bool __wrap_vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                         int proc_fd, char **err);

#endif /* VIRTIOFSD_REPLAY_SECCOMP_H */
