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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"
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
    g_test_add_data_func("/virtiofsd/sandbox/landlock-namespace",
                         GINT_TO_POINTER(VFSD_SANDBOX_NAMESPACE),
                         test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-chroot",
                         GINT_TO_POINTER(VFSD_SANDBOX_CHROOT), test_landlock);
    g_test_add_data_func("/virtiofsd/sandbox/landlock-none",
                         GINT_TO_POINTER(VFSD_SANDBOX_NONE), test_landlock);
    return g_test_run();
}
