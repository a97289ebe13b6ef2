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
 * Whether file handles reach nothing beyond the shared directory
 * (@root_fd): it is the root of a whole file system, and so is every
 * mount below it (/proc/self/mountinfo, beside @proc_fd).  Otherwise a
 * daemon taken over could open any inode of a file system the share
 * shows only part of, by handle, whatever its sandbox; @why says which
 * mount.  Not a bound on a mount made later below the share.
 */
bool vfsd_share_whole_fs(int root_fd, int proc_fd, char **why);

/*
 * Keeps the capabilities a passthrough server needs, with @add added and
 * @drop taken away (--modcaps; bit N is capability N), and drops the
 * rest.  CAP_DAC_READ_SEARCH is among those needed only if
 * @open_by_handle (vfsd_options_open_by_handle()).  An added capability
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
