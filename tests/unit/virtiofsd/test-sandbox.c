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
#include <grp.h>
#include <linux/landlock.h>
#include <sched.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "fs.h"
#include "log.h"
#include "sandbox.h"
#include "seccomp-filter.h"
#include "userns.h"

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
 * Becomes user @uid (group @gid, no other group), as an unprivileged
 * daemon would be started.  Changing ids makes the process undumpable,
 * which leaves its /proc files root's; the daemon, started as the user,
 * is dumpable.
 */
static bool become(uid_t uid, gid_t gid)
{
    return setgroups(0, NULL) == 0 && setresgid(gid, gid, gid) == 0 &&
           setresuid(uid, uid, uid) == 0 && prctl(PR_SET_DUMPABLE, 1) == 0;
}

/* The first line of /proc/self/@file, its fields one space apart */
static char *proc_line(const char *file)
{
    g_autofree char *path = g_strdup_printf("/proc/self/%s", file);
    g_autofree char *text = NULL;
    g_auto(GStrv) words = NULL;
    GString *line = g_string_new(NULL);
    char **w;

    if (g_file_get_contents(path, &text, NULL, NULL)) {
        *strchrnul(text, '\n') = '\0';
        words = g_strsplit_set(text, " \t", -1);
        for (w = words; *w; w++) {
            if (**w) {
                g_string_append_printf(line, "%s%s", line->len ? " " : "",
                                       *w);
            }
        }
    }
    return g_string_free(line, false);
}

static void run_as_child(void (*fn)(void))
{
    int status;
    pid_t pid;

    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        fn();
        _exit(CAPS_OK);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != CAPS_OK) {
        g_error("child: status 0x%x", status);
    }
}

/*
 * Unprivileged --uid-map/--gid-map of the user's own ids: user 4000 maps
 * itself, once, with no helper, and is root in the namespace.
 */
static void userns_own_child(void)
{
    g_autofree char *err = NULL;
    VfsdIdMap u = { 0 }, g = { 0 };

    g_assert_true(become(4000, 4000));
    g_assert_true(vfsd_idmap_add(&u, ":0:4000:1:", &err));
    g_assert_true(vfsd_idmap_add(&g, ":0:4000:1:", &err));
    if (!vfsd_userns_enter(&u, &g, &err)) {
        g_error("%s", err);
    }
    g_assert_cmpuint(geteuid(), ==, 0);
    g_assert_cmpuint(getegid(), ==, 0);
    g_assert_cmpstr(proc_line("uid_map"), ==, "0 4000 1");
}

static void test_userns(void)
{
    if (geteuid() != 0) {
        g_test_skip("needs root to become user 4000");
        return;
    }
    run_as_child(userns_own_child);
}

/*
 * The default, with no map: as the Rust daemon, user 4000 is itself in
 * a namespace of its own, where it holds what the namespace sandbox
 * needs, and that sandbox is then built as for root.
 */
static void userns_default_child(void)
{
    g_autofree char *dir = g_dir_make_tmp("vfsd-userns-XXXXXX", NULL);
    g_autofree char *err = NULL;
    VfsdIdMap none = { 0 };
    struct statvfs sv;
    int proc_fd, status;
    pid_t pid;

    g_assert_nonnull(dir);
    g_assert_cmpint(chown(dir, 4000, 4000), ==, 0);
    g_assert_true(become(4000, 4000));
    if (!vfsd_userns_enter(&none, &none, &err)) {
        g_error("%s", err);
    }
    g_assert_cmpuint(geteuid(), ==, 4000);
    g_assert_cmpuint(getegid(), ==, 4000);
    g_assert_cmpstr(proc_line("uid_map"), ==, "4000 4000 1");
    g_assert_cmpstr(proc_line("gid_map"), ==, "4000 4000 1");
    g_assert_cmpstr(proc_line("setgroups"), ==, "deny");
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        if (!vfsd_sandbox_enter(VFSD_SANDBOX_NAMESPACE, dir, &proc_fd,
                                &err)) {
            g_printerr("%s\n", err);
            _exit(SANDBOX_NOT_ENTERED);
        }
        /* pid 1 of its own namespace, its procfs, on the share, nodev */
        if (getpid() != 1 || faccessat(proc_fd, "../status", R_OK, 0) < 0 ||
            statvfs("/", &sv) < 0 || !(sv.f_flag & ST_NODEV)) {
            _exit(SANDBOX_NO_NODEV);
        }
        _exit(SANDBOX_OK);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_rmdir(dir);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != SANDBOX_OK) {
        g_error("the namespace sandbox in the user namespace: status 0x%x",
                status);
    }
}

static void test_userns_default(void)
{
    if (geteuid() != 0) {
        g_test_skip("needs root to become user 4000");
        return;
    }
    run_as_child(userns_default_child);
}

/* Without newuidmap(1), a map it would write is refused, naming it */
static void userns_no_helper_child(void)
{
    g_autofree char *dir = g_dir_make_tmp("vfsd-nohelper-XXXXXX", NULL);
    g_autofree char *err = NULL;
    VfsdIdMap u = { 0 }, none = { 0 };

    g_assert_true(vfsd_idmap_add(&u, ":0:4000:1:", &err));
    g_assert_true(vfsd_idmap_add(&u, ":1:200000:10:", &err));
    g_setenv("PATH", dir, true);
    g_assert_true(become(4000, 4000));
    g_assert_false(vfsd_userns_enter(&u, &none, &err));
    g_rmdir(dir);
    g_assert_nonnull(strstr(err, "--uid-map"));
    g_assert_nonnull(strstr(err, "newuidmap(1)"));
    g_assert_nonnull(strstr(err, "not installed"));
}

static void test_userns_no_helper(void)
{
    if (geteuid() != 0) {
        g_test_skip("needs root to become user 4000");
        return;
    }
    run_as_child(userns_no_helper_child);
}

static char *subid_file(const char *text)
{
    g_autoptr(GError) gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("vfsd-subid-XXXXXX", &path, &gerr);

    g_assert_no_error(gerr);
    close(fd);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

static bool cover(const char *file, const char *spec, char **err)
{
    VfsdIdMap m = { 0 };

    g_clear_pointer(err, g_free);
    g_assert_true(vfsd_idmap_add(&m, spec, err));
    return vfsd_userns_subids_cover(file, "alice", 1000, &m, "--uid-map",
                                    err);
}

/*
 * What newuidmap(1) will allow, told before it runs: the user's own id
 * once, or ids within its /etc/subuid lines (by name or by uid, adjoining
 * lines joined).  The refusals name the user and what it has.
 */
static void test_userns_subids(void)
{
    g_autofree char *none = subid_file("bob:100000:65536\n");
    g_autofree char *mine = subid_file("# comment\nbob:100000:65536\n"
                                       "alice:200000:1000\n"
                                       "1000:201000:1000\nbad line\n");
    g_autofree char *err = NULL;

    g_assert_true(cover(none, ":0:1000:1:", &err));
    g_assert_false(cover(none, ":0:200000:10:", &err));
    g_assert_nonnull(strstr(err, "user alice has no subordinate uids in"));
    g_assert_nonnull(strstr(err, none));
    g_assert_nonnull(strstr(err, "usermod --add-subuids"));
    g_assert_false(cover("/nonexistent/subuid", ":0:200000:10:", &err));
    g_assert_nonnull(strstr(err, "cannot be read"));

    g_assert_true(cover(mine, ":0:200000:1000:", &err));
    g_assert_true(cover(mine, ":0:201999:1:", &err));
    /* Across the line by name and the line by uid */
    g_assert_true(cover(mine, ":0:200500:1000:", &err));
    g_assert_false(cover(mine, ":0:201500:1000:", &err));
    g_assert_nonnull(strstr(err, "host uids 201500-202499 are not all "
                                 "subordinate uids of user alice"));
    g_assert_nonnull(strstr(err, "200000-200999, 201000-201999"));
    g_assert_false(cover(mine, ":0:100000:1:", &err));
    g_unlink(none);
    g_unlink(mine);
}

/*
 * newuidmap(1) and newgidmap(1) themselves, as libvirt's session mode
 * uses them (the user's id for root, then its subordinate ids): user
 * nobody, given subordinate ids in a mount namespace of the test's own
 * (so the host's /etc is left alone), becomes root of a namespace with
 * both ranges; without a line there, it is refused naming the user.
 */
static void userns_helper_child(void)
{
    g_autofree char *dir = g_dir_make_tmp("vfsd-subids-XXXXXX", NULL);
    g_autofree char *sub = g_build_filename(dir, "sub", NULL);
    g_autofree char *empty = g_build_filename(dir, "empty", NULL);
    g_autofree char *err = NULL;
    VfsdIdMap u = { 0 }, g = { 0 };
    int status;
    pid_t pid;

    g_assert_nonnull(dir);
    g_assert_true(g_file_set_contents(sub, "nobody:200000:65536\n", -1,
                                      NULL));
    g_assert_true(g_file_set_contents(empty, "", -1, NULL));
    g_assert_cmpint(chmod(dir, 0755), ==, 0);
    g_assert_true(vfsd_idmap_add(&u, ":0:65534:1:", &err));
    g_assert_true(vfsd_idmap_add(&u, ":1:200000:65536:", &err));
    g_assert_true(vfsd_idmap_add(&g, ":0:65534:1:", &err));
    g_assert_true(vfsd_idmap_add(&g, ":1:200000:65536:", &err));
    g_assert_cmpint(unshare(CLONE_NEWNS), ==, 0);
    g_assert_cmpint(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), ==,
                    0);

    /* No line for nobody: refused before newuidmap runs */
    g_assert_cmpint(mount(empty, "/etc/subuid", NULL, MS_BIND, NULL), ==,
                    0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        g_assert_true(become(65534, 65534));
        g_assert_false(vfsd_userns_enter(&u, &g, &err));
        g_assert_nonnull(strstr(err, "--uid-map=:1:200000:65536:: user "
                                     "nobody has no subordinate uids"));
        _exit(CAPS_OK);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_cmpint(status, ==, 0);
    g_assert_cmpint(umount("/etc/subuid"), ==, 0);

    g_assert_cmpint(mount(sub, "/etc/subuid", NULL, MS_BIND, NULL), ==, 0);
    g_assert_cmpint(mount(sub, "/etc/subgid", NULL, MS_BIND, NULL), ==, 0);
    g_assert_true(become(65534, 65534));
    if (!vfsd_userns_enter(&u, &g, &err)) {
        g_error("%s", err);
    }
    g_assert_cmpuint(geteuid(), ==, 0);
    g_assert_cmpstr(proc_line("uid_map"), ==, "0 65534 1");
    g_assert_cmpstr(proc_line("gid_map"), ==, "0 65534 1");
    /* The second range: 1-65536 are ids here, 65537 is none */
    g_assert_cmpint(setresuid(65537, 65537, 65537), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(setresgid(65536, 65536, 65536), ==, 0);
    g_assert_cmpint(setresuid(1, 1, 1), ==, 0);
}

static void test_userns_helper(void)
{
    g_autofree char *newuidmap = g_find_program_in_path("newuidmap");
    g_autofree char *newgidmap = g_find_program_in_path("newgidmap");

    if (geteuid() != 0) {
        g_test_skip("needs root to bind-mount /etc/subuid privately");
        return;
    }
    if (!newuidmap || !newgidmap) {
        g_test_fail_printf("newuidmap/newgidmap are not installed "
                           "(apt-get install uidmap)");
        return;
    }
    run_as_child(userns_helper_child);
}

/*
 * A daemon its guest has taken over: whatever code runs in the serving
 * process, it holds only what main.c leaves it (the same calls, in the
 * same order: inherited fds closed, the namespace sandbox, the broker,
 * the capabilities, Landlock and seccomp), and tries what a security
 * review found open before the broker existed:
 *
 *   A  open_by_handle_at() through an fd the daemon was started with
 *      (libvirt's log on stderr, fd 10 here), or through the share
 *   B  the same through a mount made inside the share after start
 *   C  the same through overlayfs with nfs_export=on inside the share
 *
 * and asks the broker for what it never registered.  Needs root, and
 * overlayfs with nfs_export for C (a failure, naming it, if missing).
 * The "host" side runs in a mount namespace of its own, so that its
 * mounts never reach the machine's.
 */
typedef struct Takeover {
    char *dir, *share, *outside;
    struct file_handle *fh_secret;      /* a host file outside the share */
    struct file_handle *fh_ovl;         /* a file of the overlay */
} Takeover;

static struct file_handle *handle_at(const char *path)
{
    struct file_handle *fh = g_malloc(sizeof(*fh) + MAX_HANDLE_SZ);
    int mnt_id;

    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(AT_FDCWD, path, fh, &mnt_id, 0) < 0) {
        g_free(fh);
        return NULL;
    }
    return fh;
}

static bool wait_file(const char *dir_or_null, int dir_fd, const char *name)
{
    int i;

    for (i = 0; i < 1000; i++) {
        if (dir_or_null ? g_file_test(dir_or_null, G_FILE_TEST_EXISTS) :
            faccessat(dir_fd, name, F_OK, 0) == 0) {
            return true;
        }
        g_usleep(10000);
    }
    return false;
}

static void note(GString *out, const char *what, bool ok, const char *why)
{
    g_string_append_printf(out, "%s %s%s%s\n", what, ok ? "ok" : "FAIL",
                           why ? ": " : "", why ? why : "");
}

/* open_by_handle_at() of @fh through @fd: refused with EPERM? */
static void try_handle(GString *out, const char *what, int fd,
                       struct file_handle *fh)
{
    int got = open_by_handle_at(fd, fh, O_PATH | O_CLOEXEC);
    g_autofree char *why = NULL;

    if (got >= 0) {
        close(got);
        note(out, what, false, "the file outside the share opened");
    } else {
        why = g_strdup_printf("%s", strerror(errno));
        note(out, what, errno == EPERM, why);
    }
}

/* The serving process, as main.c leaves it, then the attacks */
static G_NORETURN void takeover_daemon(const Takeover *tk)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *err = NULL;
    char *argv[] = { (char *)"virtiofsd", (char *)"--socket-path=/none",
                     NULL, NULL };
    VfsdOptions opts;
    VfsdFs fs;
    struct stat st;
    struct statx a, b;
    uint64_t id, vol_mnt;
    int proc_fd, root_fd, real, vol, ovl, fd, i, ok;

    argv[2] = g_strdup_printf("--shared-dir=%s", tk->share);
    vfsd_close_inherited(-1);
    if (!vfsd_options_parse(&opts, 3, argv, &err) ||
        !vfsd_sandbox_enter(opts.sandbox, opts.shared_dir, &proc_fd, &err)) {
        g_printerr("%s\n", err);
        _exit(1);
    }
    root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0 || fchdir(proc_fd) < 0 ||
        !vfsd_fs_init(&fs, &opts, root_fd, proc_fd, &err) ||
        !vfsd_drop_capabilities(opts.caps_add, opts.caps_drop, false,
                                &err) ||
        !vfsd_landlock_restrict(opts.sandbox, fs.use_handles, root_fd,
                                proc_fd, &err) ||
        !vfsd_seccomp_install(opts.seccomp, vfsd_seccomp_needs(&opts),
                              &err)) {
        g_printerr("%s\n", err ? err : strerror(errno));
        _exit(1);
    }
    /* Tell the host we are in, and wait for its mounts */
    fd = openat(root_fd, "ready", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || !wait_file(NULL, root_fd, "go")) {
        _exit(2);
    }
    close(fd);

    note(out, "handles-held", fs.use_handles, "inodes by handle, broker up");
    /* A: what the daemon was started with is gone, stderr is a pipe */
    note(out, "A-inherited-fd10", fcntl(10, F_GETFD) < 0 && errno == EBADF,
         NULL);
    ok = fstat(2, &st) == 0 && S_ISFIFO(st.st_mode);
    note(out, "A-stderr-pipe", ok, NULL);
    capng_get_caps_process();
    note(out, "A-no-dac-read-search",
         !capng_have_capability(CAPNG_EFFECTIVE, CAP_DAC_READ_SEARCH) &&
         !capng_have_capability(CAPNG_PERMITTED, CAP_DAC_READ_SEARCH), NULL);
    real = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    try_handle(out, "A-handle-through-share", real, tk->fh_secret);

    /* B: the mount made after start is there, and opens nothing */
    vol = openat(root_fd, "vol", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok = vol >= 0 && statx(vol, "", AT_EMPTY_PATH, STATX_MNT_ID, &a) == 0 &&
         statx(root_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &b) == 0 &&
         a.stx_mnt_id != b.stx_mnt_id;
    note(out, "B-mount-propagated", ok, NULL);
    vol_mnt = ok ? a.stx_mnt_id : 0;
    try_handle(out, "B-handle-through-new-mount", vol, tk->fh_secret);
    /* The broker: what the daemon holds, yes; anything else, no */
    ok = vfsd_broker_register(fs.broker, proc_fd, vol, vol_mnt, &id) == 0;
    fd = ok ? vfsd_broker_open(fs.broker, id) : -1;
    ok = fd >= 0 && statx(fd, "", AT_EMPTY_PATH, STATX_INO, &b) == 0 &&
         b.stx_ino == a.stx_ino;
    note(out, "B-broker-opens-what-was-held", ok, NULL);
    /* A handle decoded on another mount would name another file */
    ok = vfsd_broker_register(fs.broker, proc_fd, vol, vol_mnt + 1, &id) ==
         0 && vfsd_broker_open(fs.broker, id) == -EINVAL;
    note(out, "B-broker-refuses-wrong-mount", ok, NULL);
    for (i = 0, ok = 1; i < 1000 && ok; i++) {
        fd = vfsd_broker_open(fs.broker, (1ULL << 40) + i);
        ok = fd == -ENOENT;
    }
    note(out, "B-broker-refuses-unknown-ids", ok, NULL);

    /* C: overlayfs that exports handles; the host wrote one of its */
    ovl = openat(root_fd, "ovl", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    fd = openat(root_fd, "ovlhandle", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct file_handle *fh = g_malloc0(sizeof(*fh) + MAX_HANDLE_SZ);
        ssize_t n = read(fd, fh, sizeof(*fh) + MAX_HANDLE_SZ);

        if (n >= (ssize_t)sizeof(*fh) &&
            fh->handle_bytes <= MAX_HANDLE_SZ &&
            n == (ssize_t)(sizeof(*fh) + fh->handle_bytes)) {
            ((Takeover *)tk)->fh_ovl = fh;
        }
        close(fd);
    }
    note(out, "C-overlay-there", ovl >= 0 && tk->fh_ovl, NULL);
    if (ovl >= 0 && tk->fh_ovl) {
        try_handle(out, "C-handle-through-overlay", ovl, tk->fh_ovl);
        try_handle(out, "C-forged-through-overlay", ovl, tk->fh_secret);
    }

    fd = openat(root_fd, "result", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, out->str, out->len) != (ssize_t)out->len) {
        _exit(3);
    }
    _exit(0);
}

/* The host: mounts, starts the daemon, adds mounts under it, judges */
static G_NORETURN void takeover_host(Takeover *tk)
{
    g_autofree char *ready = g_build_filename(tk->share, "ready", NULL);
    g_autofree char *go = g_build_filename(tk->share, "go", NULL);
    g_autofree char *result = g_build_filename(tk->share, "result", NULL);
    g_autofree char *vol = g_build_filename(tk->share, "vol", NULL);
    g_autofree char *ovl = g_build_filename(tk->share, "ovl", NULL);
    g_autofree char *ovl_file = g_build_filename(ovl, "lowerfile", NULL);
    g_autofree char *secret = g_build_filename(tk->outside, "secret", NULL);
    g_autofree char *ovl_handle = g_build_filename(tk->share, "ovlhandle",
                                                   NULL);
    g_autofree char *opts = NULL, *text = NULL;
    g_auto(GStrv) lines = NULL;
    int status, fd, i, bad = 0;
    pid_t pid;

    if (unshare(CLONE_NEWNS) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        /* Shared, so that mounts below it reach the sandbox's slave */
        mount(tk->share, tk->share, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, tk->share, NULL, MS_SHARED, NULL) < 0) {
        g_printerr("host mounts: %s\n", strerror(errno));
        _exit(20);
    }
    tk->fh_secret = handle_at(secret);
    /* libvirt's log on stderr is one such fd; this is another */
    fd = open(secret, O_RDONLY);
    if (!tk->fh_secret || fd < 0 || dup2(fd, 10) < 0) {
        _exit(21);
    }
    pid = fork();
    if (pid == 0) {
        takeover_daemon(tk);
    }
    if (!wait_file(ready, -1, NULL)) {
        g_printerr("the daemon never got ready\n");
        kill(pid, SIGKILL);
        _exit(22);
    }
    /* B */
    if (mount(g_build_filename(tk->outside, "vol", NULL), vol, NULL,
              MS_BIND, NULL) < 0) {
        g_printerr("bind mount: %s\n", strerror(errno));
    }
    /* C */
    opts = g_strdup_printf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/"
                           "work,index=on,nfs_export=on", tk->outside,
                           tk->outside, tk->outside);
    if (mount("overlay", ovl, "overlay", 0, opts) < 0) {
        g_printerr("overlayfs with nfs_export=on: %s: case C cannot "
                   "run here\n", strerror(errno));
    } else {
        tk->fh_ovl = handle_at(ovl_file);
    }
    /* The daemon forked before this handle existed: it goes by file */
    if ((tk->fh_ovl &&
         !g_file_set_contents(ovl_handle, (const char *)tk->fh_ovl,
                              sizeof(*tk->fh_ovl) + tk->fh_ovl->handle_bytes,
                              NULL)) ||
        !g_file_set_contents(go, "", 0, NULL)) {
        _exit(23);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0 ||
        !g_file_get_contents(result, &text, NULL, NULL)) {
        g_printerr("the daemon's side ended with status 0x%x\n", status);
        _exit(24);
    }
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i] && *lines[i]; i++) {
        g_printerr("  %s\n", lines[i]);
        bad += strstr(lines[i], " ok") == NULL;
    }
    _exit(bad || i < 13 ? 25 : 0);
}

static void test_takeover(void)
{
    Takeover tk = { 0 };
    g_autofree char *cmd = NULL;
    const char *sub[] = { "share/vol", "share/ovl", "outside/vol",
                          "outside/lower", "outside/upper", "outside/work" };
    int status;
    unsigned int i;
    pid_t pid;

    if (geteuid() != 0) {
        g_test_fail_printf("needs root, for the sandbox and the mounts");
        return;
    }
    tk.dir = g_dir_make_tmp("vfsd-takeover-XXXXXX", NULL);
    g_assert_nonnull(tk.dir);
    tk.share = g_build_filename(tk.dir, "share", NULL);
    tk.outside = g_build_filename(tk.dir, "outside", NULL);
    for (i = 0; i < G_N_ELEMENTS(sub); i++) {
        g_autofree char *d = g_build_filename(tk.dir, sub[i], NULL);

        g_assert_cmpint(g_mkdir_with_parents(d, 0700), ==, 0);
    }
    {
        g_autofree char *f1 = g_build_filename(tk.outside, "secret", NULL);
        g_autofree char *f2 = g_build_filename(tk.outside, "lower",
                                               "lowerfile", NULL);

        g_assert_true(g_file_set_contents(f1, "secret", -1, NULL));
        g_assert_true(g_file_set_contents(f2, "lower", -1, NULL));
    }
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        takeover_host(&tk);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    cmd = g_strdup_printf("rm -rf '%s'", tk.dir);
    g_assert_cmpint(system(cmd), ==, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_test_fail_printf("a taken-over daemon reached beyond the share "
                           "(status 0x%x, see above)", status);
    }
    g_free(tk.dir);
    g_free(tk.share);
    g_free(tk.outside);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);
    g_test_add_func("/virtiofsd/sandbox/nodev", test_nodev);
    g_test_add_func("/virtiofsd/sandbox/modcaps", test_modcaps);
    g_test_add_func("/virtiofsd/sandbox/userns", test_userns);
    g_test_add_func("/virtiofsd/sandbox/userns-default", test_userns_default);
    g_test_add_func("/virtiofsd/sandbox/userns-no-helper",
                    test_userns_no_helper);
    g_test_add_func("/virtiofsd/sandbox/userns-subids", test_userns_subids);
    g_test_add_func("/virtiofsd/sandbox/userns-helper", test_userns_helper);
    g_test_add_func("/virtiofsd/sandbox/handle-caps", test_handle_caps);
    g_test_add_func("/virtiofsd/sandbox/takeover", test_takeover);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-namespace",
                         GINT_TO_POINTER(VFSD_SANDBOX_NAMESPACE),
                         test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-chroot",
                         GINT_TO_POINTER(VFSD_SANDBOX_CHROOT), test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-none",
                         GINT_TO_POINTER(VFSD_SANDBOX_NONE), test_landlock);
    return g_test_run();
}
