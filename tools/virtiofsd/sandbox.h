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
#include <stdint.h>

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
/*
 * Closes every fd the daemon was started with but its stdin, stdout,
 * stderr, @keep (-1: none) and the capture files (capture.h): a
 * descriptor of the host's (a log file, a directory, /dev) reaches beyond
 * the shared directory, and open_by_handle_at(), fchmod() or fchown()
 * through it would too.
 */
void vfsd_close_inherited(int keep);

/*
 * Keeps the capabilities a passthrough server needs, with @add added and
 * @drop taken away (--modcaps; bit N is capability N), and drops the
 * rest.  CAP_DAC_READ_SEARCH is among those kept only if @open_by_handle
 * (the daemon never asks: its broker opens handles).  An added capability
 * the process does not hold is an error.
 */
bool vfsd_drop_capabilities(uint64_t add, uint64_t drop, bool open_by_handle,
                            char **err);

/*
 * Landlock, for the calling thread and the threads it makes after: the
 * file system is reachable beneath @root_fd (the shared directory) with
 * every right, and /proc/self/fdinfo (beside @proc_fd, /proc/self/fd) for
 * reading, and nowhere else.  Called once the daemon has opened what it
 * needs and before any thread.  Without Landlock, with an ABI it cannot
 * use, or where it would refuse the daemon files opened by handle
 * (@open_by_handle outside --sandbox=namespace), it says so in one info
 * line and returns true.  Returns false with a message in @err.
 */
bool vfsd_landlock_restrict(VfsdSandbox mode, bool open_by_handle,
                            int root_fd, int proc_fd, char **err);

#endif /* VIRTIOFSD_SANDBOX_H */
