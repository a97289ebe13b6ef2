/*
 * virtiofsd tests: what --sandbox=namespace leaves the daemon
 *
 * Each case forks a child that enters the daemon's own sandbox
 * (vfsd_sandbox_enter() from sandbox.c) on a scratch directory; the
 * sandbox forks again, and what runs inside reports by its exit status,
 * which the sandbox's parent passes on.  Needs root, for the namespaces.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"

enum {
    SANDBOX_OK,
    SANDBOX_NOT_ENTERED = 10,
    SANDBOX_NO_NODEV,
    SANDBOX_MKNOD_FAILED,
    SANDBOX_DEVICE_OPENED,
    SANDBOX_OPEN_WRONG_ERROR,
};

static G_NORETURN void inside(const char *dir)
{
    g_autofree char *err = NULL;
    struct statvfs sv;
    int proc_fd, fd;

    if (!vfsd_sandbox_enter(VFSD_SANDBOX_NAMESPACE, dir, &proc_fd, &err)) {
        g_printerr("%s\n", err);
        _exit(SANDBOX_NOT_ENTERED);
    }
    if (statvfs("/", &sv) < 0 || !(sv.f_flag & ST_NODEV)) {
        _exit(SANDBOX_NO_NODEV);
    }
    /* The guest may still make a device node: /dev/null's numbers */
    if (mknod("/null", S_IFCHR | 0600, makedev(1, 3)) < 0) {
        _exit(SANDBOX_MKNOD_FAILED);
    }
    fd = open("/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        _exit(SANDBOX_DEVICE_OPENED);
    }
    _exit(errno == EACCES ? SANDBOX_OK : SANDBOX_OPEN_WRONG_ERROR);
}

/*
 * Device nodes in the shared directory can be made but not opened, not
 * even by the daemon itself once it runs code it should not.
 */
static void test_nodev(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *node = NULL;
    int status;
    pid_t pid;

    if (geteuid() != 0) {
        g_test_skip("the namespaces need root");
        return;
    }
    dir = g_dir_make_tmp("vfsd-sandbox-XXXXXX", NULL);
    g_assert_nonnull(dir);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        inside(dir);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    node = g_build_filename(dir, "null", NULL);
    g_unlink(node);
    g_rmdir(dir);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != SANDBOX_OK) {
        g_error("inside the sandbox: status 0x%x", status);
    }
}

enum {
    CAPS_OK,
    CAPS_REFUSED = 20,
    CAPS_WRONG_SET,
    CAPS_ACCEPTED,
};

/*
 * --modcaps=+sys_admin:-chown: the daemon keeps CAP_SYS_ADMIN, which the
 * default set lacks, and loses CAP_CHOWN, which it has.  Then, with
 * CAP_SYS_PTRACE out of the process's reach, +sys_ptrace is refused.
 */
static G_NORETURN void modcaps_child(void)
{
    g_autofree char *err = NULL;

    if (!vfsd_drop_capabilities(1ULL << CAP_SYS_ADMIN, 1ULL << CAP_CHOWN,
                                &err)) {
        _exit(CAPS_REFUSED);
    }
    capng_get_caps_process();
    if (!capng_have_capability(CAPNG_EFFECTIVE, CAP_SYS_ADMIN) ||
        capng_have_capability(CAPNG_EFFECTIVE, CAP_CHOWN) ||
        !capng_have_capability(CAPNG_EFFECTIVE, CAP_FOWNER) ||
        capng_have_capability(CAPNG_EFFECTIVE, CAP_SYS_PTRACE)) {
        _exit(CAPS_WRONG_SET);
    }
    if (vfsd_drop_capabilities(1ULL << CAP_SYS_PTRACE, 0, &err)) {
        _exit(CAPS_ACCEPTED);
    }
    if (!strstr(err, "sys_ptrace")) {
        _exit(CAPS_REFUSED);
    }
    _exit(CAPS_OK);
}

static void test_modcaps(void)
{
    int status;
    pid_t pid;

    if (geteuid() != 0) {
        g_test_skip("needs root's capabilities");
        return;
    }
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        modcaps_child();
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, CAPS_OK);
}

/*
 * Unprivileged --uid-map/--gid-map: user 4000 may map itself, once, and
 * is root in the namespace; any other range is refused with the reason.
 */
static G_NORETURN void userns_child(void)
{
    g_autofree char *err = NULL;
    VfsdIdMap u = { 0 }, g = { 0 };

    /*
     * Changing ids makes the process undumpable, which leaves its /proc
     * files root's; the daemon, started as the user, is dumpable.
     */
    if (setresgid(4000, 4000, 4000) < 0 || setresuid(4000, 4000, 4000) < 0 ||
        prctl(PR_SET_DUMPABLE, 1) < 0) {
        _exit(CAPS_REFUSED);
    }
    g_assert_true(vfsd_idmap_add(&u, ":0:4000:1:", &err));
    g_assert_true(vfsd_idmap_add(&g, ":0:4001:1:", &err));
    if (vfsd_userns_enter(&u, &g, &err) || !strstr(err, "--gid-map")) {
        _exit(CAPS_ACCEPTED);
    }
    g = u;
    g_clear_pointer(&err, g_free);
    if (!vfsd_userns_enter(&u, &g, &err)) {
        g_printerr("%s\n", err);
        _exit(CAPS_REFUSED);
    }
    _exit(geteuid() == 0 && getegid() == 0 ? CAPS_OK : CAPS_WRONG_SET);
}

static void test_userns(void)
{
    int status;
    pid_t pid;

    if (geteuid() != 0) {
        g_test_skip("needs root to become user 4000");
        return;
    }
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        userns_child();
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, CAPS_OK);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);
    g_test_add_func("/virtiofsd/sandbox/nodev", test_nodev);
    g_test_add_func("/virtiofsd/sandbox/modcaps", test_modcaps);
    g_test_add_func("/virtiofsd/sandbox/userns", test_userns);
    return g_test_run();
}
