/*
 * virtiofsd: confinement
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_SANDBOX_H
#define VIRTIOFSD_SANDBOX_H

#include <stdbool.h>

#include "options.h"

/*
 * Makes @shared_dir the root of what the process can reach (namespace:
 * new mount, pid and net namespaces and pivot_root; chroot: chroot) and
 * opens in *@proc_fd the /proc/self/fd directory of the process that
 * returns.  With namespace, the caller forks and only the child returns:
 * the parent stays to wait for it, forward it stop signals and exit as
 * it does.  Returns false with a message in @err.
 */
bool vfsd_sandbox_enter(VfsdSandbox mode, const char *shared_dir,
                        int *proc_fd, char **err);
/* Keeps the capabilities a passthrough server needs, drops the rest */
bool vfsd_drop_capabilities(char **err);

#endif /* VIRTIOFSD_SANDBOX_H */
