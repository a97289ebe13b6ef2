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
#include <linux/landlock.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
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
                                true, &err)) {
        _exit(CAPS_REFUSED);
    }
    capng_get_caps_process();
    if (!capng_have_capability(CAPNG_EFFECTIVE, CAP_SYS_ADMIN) ||
        capng_have_capability(CAPNG_EFFECTIVE, CAP_CHOWN) ||
        !capng_have_capability(CAPNG_EFFECTIVE, CAP_FOWNER) ||
        capng_have_capability(CAPNG_EFFECTIVE, CAP_SYS_PTRACE)) {
        _exit(CAPS_WRONG_SET);
    }
    if (vfsd_drop_capabilities(1ULL << CAP_SYS_PTRACE, 0, true, &err)) {
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
 * CAP_DAC_READ_SEARCH opens any inode of the file system by handle: it
 * stays only with the options that open by handle.
 */
static G_NORETURN void handle_caps_child(bool open_by_handle)
{
    g_autofree char *err = NULL;

    if (!vfsd_drop_capabilities(0, 0, open_by_handle, &err)) {
        _exit(CAPS_REFUSED);
    }
    capng_get_caps_process();
    if (capng_have_capability(CAPNG_EFFECTIVE, CAP_DAC_READ_SEARCH) !=
        open_by_handle ||
        capng_have_capability(CAPNG_PERMITTED, CAP_DAC_READ_SEARCH) !=
        open_by_handle ||
        !capng_have_capability(CAPNG_EFFECTIVE, CAP_DAC_OVERRIDE)) {
        _exit(CAPS_WRONG_SET);
    }
    _exit(CAPS_OK);
}

static void test_handle_caps(void)
{
    int status, i;
    pid_t pid;

    if (geteuid() != 0) {
        g_test_skip("needs root's capabilities");
        return;
    }
    for (i = 0; i < 2; i++) {
        pid = fork();
        g_assert_cmpint(pid, >=, 0);
        if (pid == 0) {
            handle_caps_child(i);
        }
        g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
        g_assert_true(WIFEXITED(status));
        g_assert_cmpint(WEXITSTATUS(status), ==, CAPS_OK);
    }
}

enum {
    LL_OK,
    LL_SETUP = 30,
    LL_SHARE_DENIED,
    LL_OUTSIDE_READ,
    LL_OUTSIDE_WRITE,
    LL_WRONG_ERROR,
};

/* What a case of the Landlock test gets from before the sandbox */
typedef struct Outside {
    VfsdSandbox mode;
    const char *share;
    const char *path;           /* of the file outside, same file system */
    int path_fd;                /* O_PATH of it */
} Outside;

/*
 * The file outside, opened for @flags through the fd the daemon had of
 * it from before the sandbox, then (where it has a path there) by path:
 * 0 if each is refused with EACCES, else what to exit with.
 */
static int open_outside(const Outside *o, int proc_fd, int flags)
{
    char name[32];
    int fd, i;

    snprintf(name, sizeof(name), "%d", o->path_fd);
    for (i = 0; i < (o->mode == VFSD_SANDBOX_NONE ? 2 : 1); i++) {
        fd = i ? open(o->path, flags | O_CLOEXEC) :
                 openat(proc_fd, name, flags | O_CLOEXEC);
        if (fd >= 0) {
            return flags == O_RDONLY ? LL_OUTSIDE_READ : LL_OUTSIDE_WRITE;
        }
        if (errno != EACCES) {
            g_printerr("%s: %s\n", i ? "by path" : "by fd", strerror(errno));
            return LL_WRONG_ERROR;
        }
    }
    return 0;
}

/* The guest's everyday work in the share, which Landlock must allow */
static bool share_works(int root_fd)
{
    int fd = openat(root_fd, "inside", O_RDWR | O_TRUNC | O_CLOEXEC);

    if (fd < 0) {
        return false;
    }
    close(fd);
    return mkdirat(root_fd, "d", 0700) == 0 &&
           renameat(root_fd, "inside", root_fd, "d/inside") == 0 &&
           linkat(root_fd, "d/inside", root_fd, "link", 0) == 0 &&
           unlinkat(root_fd, "link", 0) == 0 &&
           renameat(root_fd, "d/inside", root_fd, "inside") == 0 &&
           unlinkat(root_fd, "d", AT_REMOVEDIR) == 0;
}

/*
 * Inside the daemon's sandbox (@o->mode) and under its Landlock domain:
 * the share works, and the file outside it does not open, for reading or
 * for writing, through the fd the daemon held of it from before (a magic
 * link of /proc/self/fd) nor, with --sandbox=none, by its path.
 */
static G_NORETURN void landlock_child(const Outside *o)
{
    g_autofree char *err = NULL;
    int proc_fd, root_fd, ret;

    if (!vfsd_sandbox_enter(o->mode, o->share, &proc_fd, &err)) {
        g_printerr("%s\n", err);
        _exit(LL_SETUP);
    }
    root_fd = open(o->mode == VFSD_SANDBOX_NONE ? o->share : "/",
                   O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0 ||
        !vfsd_drop_capabilities(0, 0, false, &err) ||
        !vfsd_landlock_restrict(o->mode, false, root_fd, proc_fd, &err)) {
        g_printerr("%s\n", err ? err : strerror(errno));
        _exit(LL_SETUP);
    }
    if (!share_works(root_fd)) {
        g_printerr("in the share: %s\n", strerror(errno));
        _exit(LL_SHARE_DENIED);
    }
    ret = open_outside(o, proc_fd, O_RDONLY);
    if (ret == 0) {
        ret = open_outside(o, proc_fd, O_WRONLY);
    }
    _exit(ret);
}

static void check_landlock(VfsdSandbox mode)
{
    g_autofree char *dir = g_dir_make_tmp("vfsd-landlock-XXXXXX", NULL);
    g_autofree char *share = NULL;
    g_autofree char *inside = NULL;
    g_autofree char *outside = NULL;
    Outside o = { .mode = mode };
    int status;
    pid_t pid;

    g_assert_nonnull(dir);
    share = g_build_filename(dir, "share", NULL);
    inside = g_build_filename(share, "inside", NULL);
    outside = g_build_filename(dir, "outside", NULL);
    g_assert_cmpint(g_mkdir(share, 0700), ==, 0);
    g_assert_true(g_file_set_contents(inside, "inside", -1, NULL));
    g_assert_true(g_file_set_contents(outside, "secret", -1, NULL));
    o.path_fd = open(outside, O_PATH | O_CLOEXEC);
    g_assert_cmpint(o.path_fd, >=, 0);
    o.share = share;
    o.path = outside;
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        landlock_child(&o);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    close(o.path_fd);
    g_unlink(inside);
    g_unlink(outside);
    g_rmdir(share);
    g_rmdir(dir);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != LL_OK) {
        g_error("inside the sandbox: status 0x%x", status);
    }
}

static bool have_landlock(void)
{
    return syscall(SYS_landlock_create_ruleset, NULL, 0,
                   LANDLOCK_CREATE_RULESET_VERSION) >= 2;
}

static void test_landlock(gconstpointer mode)
{
    if (geteuid() != 0 || !have_landlock()) {
        g_test_skip("needs root, for the sandbox, and Landlock ABI 2");
        return;
    }
    check_landlock(GPOINTER_TO_INT(mode));
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
    g_test_add_func("/virtiofsd/sandbox/handle-caps", test_handle_caps);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-namespace",
                         GINT_TO_POINTER(VFSD_SANDBOX_NAMESPACE),
                         test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-chroot",
                         GINT_TO_POINTER(VFSD_SANDBOX_CHROOT), test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-none",
                         GINT_TO_POINTER(VFSD_SANDBOX_NONE), test_landlock);
    return g_test_run();
}
