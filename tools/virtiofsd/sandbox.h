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
 * a private mount namespace and pivot_root; chroot: chroot).  Returns
 * false with a message in @err.
 */
bool vfsd_sandbox_enter(VfsdSandbox mode, const char *shared_dir,
                        char **err);
/* Keeps the capabilities a passthrough server needs, drops the rest */
bool vfsd_drop_capabilities(char **err);
/*
 * seccomp.c: the system call allow-list, for every thread of the process;
 * @action says what a call outside it does (VFSD_SECCOMP_NONE: nothing is
 * installed).
 */
bool vfsd_seccomp_install(VfsdSeccomp action, char **err);

#endif /* VIRTIOFSD_SANDBOX_H */
