/*
 * virtiofsd: confinement to the shared directory, capabilities
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <glib.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

static bool enter_namespace(const char *dir, char **err)
{
    const char *step;

    step = "unshare(CLONE_NEWNS)";
    if (unshare(CLONE_NEWNS) < 0) {
        goto fail;
    }
    /* Nothing we do here may propagate back to the host */
    step = "making the mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
        goto fail;
    }
    /* pivot_root needs a mount point */
    step = "bind-mounting the shared directory";
    if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL) < 0) {
        goto fail;
    }
    step = "chdir to the shared directory";
    if (chdir(dir) < 0) {
        goto fail;
    }
    /* Stack the old root under the new one, then detach it */
    step = "pivot_root";
    if (syscall(SYS_pivot_root, ".", ".") < 0) {
        goto fail;
    }
    step = "detaching the old root";
    if (umount2(".", MNT_DETACH) < 0) {
        goto fail;
    }
    step = "chdir /";
    if (chdir("/") < 0) {
        goto fail;
    }
    return true;

fail:
    *err = g_strdup_printf("namespace sandbox: %s failed: %s (try "
                           "--sandbox=chroot or none when not root)",
                           step, strerror(errno));
    return false;
}

bool vfsd_sandbox_enter(VfsdSandbox mode, const char *shared_dir,
                        char **err)
{
    switch (mode) {
    case VFSD_SANDBOX_NAMESPACE:
        return enter_namespace(shared_dir, err);
    case VFSD_SANDBOX_CHROOT:
        if (chroot(shared_dir) < 0 || chdir("/") < 0) {
            *err = g_strdup_printf("chroot sandbox: %s", strerror(errno));
            return false;
        }
        return true;
    case VFSD_SANDBOX_NONE:
        return true;
    }
    return false;
}

bool vfsd_drop_capabilities(char **err)
{
    int ret;

    if (geteuid() != 0) {
        /* Nothing to drop; creations simply keep the daemon's ids */
        return true;
    }
    capng_clear(CAPNG_SELECT_BOTH);
    ret = capng_updatev(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
                        CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
                        CAP_FOWNER, CAP_FSETID, CAP_SETGID, CAP_SETUID,
                        CAP_MKNOD, CAP_SETFCAP, CAP_LEASE, -1);
    if (ret == 0) {
        ret = capng_apply(CAPNG_SELECT_BOTH);
    }
    if (ret < 0) {
        *err = g_strdup("cannot drop capabilities");
        return false;
    }
    return true;
}
