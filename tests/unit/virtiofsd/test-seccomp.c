/*
 * virtiofsd tests: the system call filter really stops what it must
 *
 * Each case forks a child that installs the daemon's own filter
 * (vfsd_seccomp_install() from seccomp-filter.c) with one --seccomp action,
 * then makes one call.  For the actions, getppid(): a call the daemon never
 * needs once serving, harmless whatever happens, and its result shows
 * whether it ran.  Under the default action (kill), the calls the filter
 * allows only with some arguments or only with --syslog.  The parent judges
 * the child by how it ended and what it wrote.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "creds.h"
#include "fs.h"
#include "sandbox.h"
#include "seccomp-filter.h"

/* What the child reports on its pipe, one line each */
#define MSG_INSTALLED "installed\n"
#define MSG_PROCEEDED "proceeded\n"

typedef struct Outcome {
    int status;                 /* waitpid() status */
    char *out;                  /* the child's stdout and stderr */
} Outcome;

/* Only calls the filter allows, and no stdio: the child is filtered */
static void child_say(const char *s)
{
    if (write(STDOUT_FILENO, s, strlen(s)) < 0) {
        _exit(90);
    }
}

/* /proc/self/status has "Seccomp:\t2" once a filter is in force */
static int seccomp_mode(void)
{
    char buf[4096];
    const char *p;
    ssize_t n;
    int fd;

    fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    p = strstr(buf, "\nSeccomp:");
    if (!p) {
        return -1;
    }
    p += strlen("\nSeccomp:");
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    return *p - '0';
}

/*
 * The call a case makes under the filter, through syscall() so that no
 * library caches the answer and skips the call.  Returns whether it
 * behaved as it does unfiltered.
 */
typedef bool (*Call)(pid_t parent);

typedef struct Case {
    VfsdSeccomp action;
    bool syslog;                /* --syslog */
    Call call;
    bool pid1;                  /* as pid 1 of a new pid namespace */
    const char *root;           /* chroot there first: no /proc */
    const char *opts;           /* the filter these options make, if set */
} Case;

static bool call_getppid(pid_t parent)
{
    return syscall(SYS_getppid) == parent;
}

static bool call_socket(int family)
{
    int fd = syscall(SYS_socket, family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return false;
    }
    close(fd);
    return true;
}

static bool call_socket_unix(pid_t parent)
{
    return call_socket(AF_UNIX);
}

static bool call_socket_inet(pid_t parent)
{
    return call_socket(AF_INET);
}

/* On no socket at all: only the filter can stop it before EBADF */
static bool call_connect(pid_t parent)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };

    return syscall(SYS_connect, -1, &sun, sizeof(sun)) < 0 &&
           errno == EBADF;
}

static bool call_sendto(pid_t parent)
{
    return syscall(SYS_sendto, -1, "x", 1, 0, NULL, 0) < 0 &&
           errno == EBADF;
}

/* Signal 0: only whether the target exists and may be signalled */
static bool call_tgkill_self(pid_t parent)
{
    return syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), 0) == 0;
}

static bool call_tgkill_parent(pid_t parent)
{
    return syscall(SYS_tgkill, parent, parent, 0) == 0;
}

static gpointer thread_fn(gpointer opaque)
{
    return opaque;
}

/* What glib does for each pool thread: clone3() first, then a name */
static bool call_thread(pid_t parent)
{
    static int token;

    return g_thread_join(g_thread_new("filtered", thread_fn, &token)) ==
           &token;
}

/* Its flags are out of the filter's reach: the answer is ENOSYS */
static bool call_clone3_enosys(pid_t parent)
{
    return syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS;
}

/* A new process, as fork() makes */
static bool call_clone_process(pid_t parent)
{
    long pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);

    if (pid == 0) {
        _exit(0);
    }
    return pid > 0 && waitpid(pid, NULL, 0) == pid;
}

/*
 * What a write with FUSE_WRITE_KILL_SUIDGID does around it: the caller's
 * fsgid, and libcap-ng reads the capability sets with prctl() where /proc
 * is out of reach
 */
static bool call_drop_fsetid(pid_t parent)
{
    VfsdCtx ctx = { .uid = 1000, .gid = 1000 };
    VfsdKillPriv kp;

    if (vfsd_kill_priv_begin(&ctx, &kp) < 0) {
        return false;
    }
    vfsd_kill_priv_end(&kp);
    return true;
}

/* On the child's stdout, a pipe: the kernel's ENOTTY once it ran */
static bool call_ioctl(unsigned long cmd)
{
    int v;

    return syscall(SYS_ioctl, STDOUT_FILENO, cmd, &v) < 0 && errno == ENOTTY;
}

static bool call_ioctl_getflags(pid_t parent)
{
    return call_ioctl(FS_IOC_GETFLAGS);
}

static bool call_ioctl_fsgetxattr(pid_t parent)
{
    return call_ioctl(FS_IOC_FSGETXATTR);
}

static bool call_ioctl_setflags(pid_t parent)
{
    return call_ioctl(FS_IOC_SETFLAGS);
}

static bool call_ioctl_tcgets(pid_t parent)
{
    return call_ioctl(TCGETS);
}

static bool call_prctl_set_name(pid_t parent)
{
    return prctl(PR_SET_NAME, "filtered", 0, 0, 0) == 0;
}

static bool call_prctl_dumpable(pid_t parent)
{
    return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0;
}

static bool call_prctl_ambient_raise(pid_t parent)
{
    const unsigned long cap_chown = 0;

    /* Unfiltered: EPERM, CAP_CHOWN is not in our inheritable set */
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap_chown, 0, 0) < 0 &&
           errno == EPERM;
}

/* What the filter allows beyond the common list, as the daemon decides */
static unsigned int case_needs(const Case *c)
{
    g_autofree char *line = NULL;
    g_autofree char *err = NULL;
    g_auto(GStrv) argv = NULL;
    VfsdOptions opts;
    unsigned int needs;

    if (!c->opts) {
        return c->syslog ? VFSD_SECCOMP_SYSLOG : 0;
    }
    line = g_strdup_printf("virtiofsd --shared-dir=/ --socket-path=/s%s%s",
                           *c->opts ? " " : "", c->opts);
    argv = g_strsplit(line, " ", -1);
    if (!vfsd_options_parse(&opts, g_strv_length(argv), argv, &err)) {
        fprintf(stderr, "%s\n", err);
        _exit(88);
    }
    needs = vfsd_seccomp_needs(&opts);
    vfsd_options_free(&opts);
    return needs;
}

/*
 * Made before the filter: the handle of a file, and its file system's
 * root, opened for open_by_handle_at()
 */
static struct file_handle *test_fh;
static int test_mount_fd = -1;

/* Unfiltered, as root, the file opens */
static bool call_open_by_handle(pid_t parent)
{
    int fd = syscall(SYS_open_by_handle_at, test_mount_fd, test_fh,
                     O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return false;
    }
    close(fd);
    return true;
}

/* The filter's answer, rather than the file */
static bool call_open_by_handle_eperm(pid_t parent)
{
    return syscall(SYS_open_by_handle_at, test_mount_fd, test_fh,
                   O_RDONLY | O_CLOEXEC) < 0 && errno == EPERM;
}

static bool call_name_to_handle(pid_t parent)
{
    g_autofree struct file_handle *fh = g_malloc(sizeof(*fh) +
                                                 MAX_HANDLE_SZ);
    int mnt_id;

    fh->handle_bytes = MAX_HANDLE_SZ;
    return syscall(SYS_name_to_handle_at, test_mount_fd, "", fh, &mnt_id,
                   AT_EMPTY_PATH) == 0;
}

static G_NORETURN void child(const Case *c, pid_t parent)
{
    g_autofree char *err = NULL;
    int want_mode = c->action == VFSD_SECCOMP_NONE ? 0 : 2;

    if (c->root && (chroot(c->root) < 0 || chdir("/") < 0)) {
        _exit(89);
    }
    if (!vfsd_seccomp_install(c->action, case_needs(c), &err)) {
        fprintf(stderr, "%s\n", err);
        _exit(91);
    }
    /* Calls on the allow-list still work under the filter */
    if (!c->root && seccomp_mode() != want_mode) {
        _exit(92);
    }
    child_say(MSG_INSTALLED);
    if (!c->call(parent)) {
        _exit(93);
    }
    child_say(MSG_PROCEEDED);
    _exit(0);
}

/*
 * The daemon under --sandbox=namespace: the child forks again into a new
 * pid namespace and ends as the filtered process does.  Pid 1 ignores
 * the signals it sends itself, so it cannot die the way other processes
 * do; a death by signal is passed on as the signal.
 */
static G_NORETURN void as_pid1(const Case *c, pid_t parent)
{
    int status;
    pid_t pid;

    if (unshare(CLONE_NEWPID) < 0) {
        _exit(95);
    }
    pid = fork();
    if (pid < 0) {
        _exit(96);
    }
    if (pid == 0) {
        if (getpid() != 1) {
            _exit(97);
        }
        child(c, parent);
    }
    if (waitpid(pid, &status, 0) != pid) {
        _exit(98);
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    _exit(WEXITSTATUS(status));
}

static void run(const Case *c, Outcome *res)
{
    GString *out = g_string_new(NULL);
    int fds[2];
    char buf[256];
    ssize_t n;
    pid_t pid;

    g_assert_cmpint(pipe2(fds, O_CLOEXEC), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        pid_t parent = getppid();

        if (dup2(fds[1], STDOUT_FILENO) < 0 ||
            dup2(fds[1], STDERR_FILENO) < 0) {
            _exit(94);
        }
        if (c->pid1) {
            as_pid1(c, parent);
        }
        child(c, parent);
    }
    close(fds[1]);
    while ((n = read(fds[0], buf, sizeof(buf))) != 0) {
        if (n < 0 && errno == EINTR) {
            continue;
        }
        g_assert_cmpint(n, >, 0);
        g_string_append_len(out, buf, n);
    }
    close(fds[0]);
    g_assert_cmpint(waitpid(pid, &res->status, 0), ==, pid);
    res->out = g_string_free(out, false);
}

static void check_exited_ok(const Outcome *res)
{
    if (!WIFEXITED(res->status) || WEXITSTATUS(res->status) != 0) {
        g_error("child: status 0x%x, output '%s'", res->status, res->out);
    }
    g_assert_cmpstr(res->out, ==, MSG_INSTALLED MSG_PROCEEDED);
}

static void check_stopped(const Outcome *res)
{
    if (!WIFSIGNALED(res->status) || WTERMSIG(res->status) != SIGSYS) {
        g_error("child not killed by SIGSYS: status 0x%x, output '%s'",
                res->status, res->out);
    }
    /* It got as far as the forbidden call, and no further */
    g_assert_true(g_str_has_prefix(res->out, MSG_INSTALLED));
    g_assert_null(strstr(res->out, MSG_PROCEEDED));
}

static void test_kill(void)
{
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_KILL, false, call_getppid }, &res);
    check_stopped(&res);
    /* The kernel kills without a word */
    g_assert_cmpstr(res.out, ==, MSG_INSTALLED);
    g_free(res.out);
}

static void test_trap(void)
{
    g_autofree char *want = g_strdup_printf(
        "virtiofsd: seccomp: system call %d is not allowed\n", SYS_getppid);
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_TRAP, false, call_getppid }, &res);
    check_stopped(&res);
    /* The handler names the call before the process dies */
    g_assert_cmpstr(res.out + strlen(MSG_INSTALLED), ==, want);
    g_free(res.out);
}

/*
 * As pid 1 the trap handler's raise(SIGSYS) is ignored: the daemon must
 * not carry on after the call all the same.  Needs root, for the pid
 * namespace.
 */
static void test_trap_pid1(void)
{
    g_autofree char *want = g_strdup_printf(
        MSG_INSTALLED "virtiofsd: seccomp: system call %d is not allowed\n",
        SYS_getppid);
    Outcome res;

    if (geteuid() != 0) {
        g_test_skip("a pid namespace needs root");
        return;
    }
    run(&(Case){ VFSD_SECCOMP_TRAP, false, call_getppid, true }, &res);
    if (!WIFEXITED(res.status) ||
        WEXITSTATUS(res.status) != 128 + SIGSYS) {
        g_error("pid 1 did not exit with 128 + SIGSYS: status 0x%x, "
                "output '%s'", res.status, res.out);
    }
    g_assert_cmpstr(res.out, ==, want);
    g_free(res.out);
}

static void test_log(void)
{
    Outcome res;

    /* The kernel writes the call to its audit log and lets it run */
    run(&(Case){ VFSD_SECCOMP_LOG, false, call_getppid }, &res);
    check_exited_ok(&res);
    g_free(res.out);
}

static void test_none(void)
{
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_NONE, false, call_getppid }, &res);
    check_exited_ok(&res);
    g_free(res.out);
}

/* Under the default action, a call that must be stopped */
static void check_kill(bool syslog, Call call)
{
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_KILL, syslog, call }, &res);
    check_stopped(&res);
    g_free(res.out);
}

/* Under the default action, a call that must go through */
static void check_allow(bool syslog, Call call)
{
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_KILL, syslog, call }, &res);
    check_exited_ok(&res);
    g_free(res.out);
}

/* Without --syslog the daemon has no use for a new socket */
static void test_no_syslog_sockets(void)
{
    check_kill(false, call_socket_unix);
    check_kill(false, call_connect);
    check_kill(false, call_sendto);
}

/* --syslog reaches /dev/log, a Unix socket, and nothing else */
static void test_syslog_sockets(void)
{
    check_allow(true, call_socket_unix);
    check_allow(true, call_connect);
    check_allow(true, call_sendto);
    check_kill(true, call_socket_inet);
}

/* raise() and abort() work; signalling another process does not */
static void test_tgkill(void)
{
    check_allow(false, call_tgkill_self);
    check_kill(false, call_tgkill_parent);
}

/*
 * Threads, and nothing else clone() can make; clone3() hides its flags,
 * so it is refused in a way glibc falls back from.
 */
static void test_clone(void)
{
    check_allow(false, call_thread);
    check_allow(false, call_clone3_enosys);
    check_kill(false, call_clone_process);
}

/* Only the prctl() options the daemon uses */
static void test_prctl(void)
{
    g_autofree char *empty = g_dir_make_tmp("vfsd-seccomp-XXXXXX", NULL);
    Outcome res;

    g_assert_nonnull(empty);
    if (geteuid() == 0) {
        run(&(Case){ VFSD_SECCOMP_KILL, false, call_drop_fsetid, false,
                     empty }, &res);
        g_rmdir(empty);
        check_exited_ok(&res);
        g_free(res.out);
    } else {
        g_rmdir(empty);
    }
    check_allow(false, call_drop_fsetid);
    check_allow(false, call_prctl_set_name);
    check_kill(false, call_prctl_dumpable);
    check_kill(false, call_prctl_ambient_raise);
}

/* The two attribute queries FUSE_IOCTL serves, and no other command */
static void test_ioctl(void)
{
    check_allow(false, call_ioctl_getflags);
    check_allow(false, call_ioctl_fsgetxattr);
    check_kill(false, call_ioctl_setflags);
    check_kill(false, call_ioctl_tcgets);
}

/* Under the default action, what options make of a call */
static void check_opts(const char *opts, Call call, bool allowed)
{
    Outcome res;

    run(&(Case){ VFSD_SECCOMP_KILL, false, call, false, NULL, opts }, &res);
    if (allowed) {
        check_exited_ok(&res);
    } else {
        check_stopped(&res);
    }
    g_free(res.out);
}

/*
 * open_by_handle_at() with CAP_DAC_READ_SEARCH opens any inode of the
 * file system: the daemon's filter never lets it through, whatever the
 * options (the broker opens handles, in a process of its own); it is
 * refused with EPERM, not the kill.  name_to_handle_at() goes with
 * handles and migration.
 */
static void test_handles(void)
{
    g_autofree char *dir = g_dir_make_tmp("vfsd-seccomp-XXXXXX", NULL);
    g_autofree char *file = NULL;
    int mnt_id;

    if (geteuid() != 0) {
        g_test_skip("open_by_handle_at() needs CAP_DAC_READ_SEARCH");
        return;
    }
    g_assert_nonnull(dir);
    file = g_build_filename(dir, "file", NULL);
    g_assert_true(g_file_set_contents(file, "x", -1, NULL));
    test_fh = g_malloc(sizeof(*test_fh) + MAX_HANDLE_SZ);
    test_fh->handle_bytes = MAX_HANDLE_SZ;
    g_assert_cmpint(name_to_handle_at(AT_FDCWD, file, test_fh, &mnt_id, 0),
                    ==, 0);
    test_mount_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    g_assert_cmpint(test_mount_fd, >=, 0);

    /* Unfiltered, as root, the file opens: the case is reached */
    g_assert_true(call_open_by_handle(getpid()));
    /* The default, --inode-file-handles=prefer */
    check_opts("", call_open_by_handle_eperm, true);
    check_opts("--inode-file-handles=mandatory", call_open_by_handle_eperm,
               true);
    check_opts("--inode-file-handles=never --migration-mode=file-handles",
               call_open_by_handle_eperm, true);
    check_opts("--inode-file-handles=never", call_open_by_handle_eperm,
               true);
    check_opts("--inode-file-handles=never --migration-verify-handles",
               call_open_by_handle_eperm, true);

    check_opts("--inode-file-handles=never", call_name_to_handle, true);
    check_opts("--inode-file-handles=never --no-migration",
               call_name_to_handle, false);
    check_opts("--no-migration", call_name_to_handle, true);

    close(test_mount_fd);
    g_unlink(file);
    g_rmdir(dir);
    g_free(test_fh);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/seccomp/kill", test_kill);
    g_test_add_func("/virtiofsd/seccomp/trap", test_trap);
    g_test_add_func("/virtiofsd/seccomp/trap-pid1", test_trap_pid1);
    g_test_add_func("/virtiofsd/seccomp/log", test_log);
    g_test_add_func("/virtiofsd/seccomp/none", test_none);
    g_test_add_func("/virtiofsd/seccomp/no-syslog-sockets",
                    test_no_syslog_sockets);
    g_test_add_func("/virtiofsd/seccomp/syslog-sockets", test_syslog_sockets);
    g_test_add_func("/virtiofsd/seccomp/tgkill", test_tgkill);
    g_test_add_func("/virtiofsd/seccomp/clone", test_clone);
    g_test_add_func("/virtiofsd/seccomp/prctl", test_prctl);
    g_test_add_func("/virtiofsd/seccomp/ioctl", test_ioctl);
    g_test_add_func("/virtiofsd/seccomp/handles", test_handles);
    return g_test_run();
}
