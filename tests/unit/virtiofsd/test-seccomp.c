/*
 * virtiofsd tests: the system call filter really stops what it must
 *
 * Each case forks a child that installs the daemon's own filter
 * (vfsd_seccomp_install() from seccomp.c) with one --seccomp action, then
 * makes a call the daemon never needs once serving.  getppid() is that
 * call: harmless whatever happens, and its result shows whether it ran.
 * The parent judges the child by how it ended and what it wrote.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"

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

static G_NORETURN void child(VfsdSeccomp action, pid_t parent)
{
    g_autofree char *err = NULL;
    int want_mode = action == VFSD_SECCOMP_NONE ? 0 : 2;

    if (!vfsd_seccomp_install(action, &err)) {
        fprintf(stderr, "%s\n", err);
        _exit(91);
    }
    /* Calls on the allow-list still work under the filter */
    if (seccomp_mode() != want_mode) {
        _exit(92);
    }
    child_say(MSG_INSTALLED);
    /*
     * Not on the allow-list.  Through syscall() so that no library
     * caches the answer and skips the call.
     */
    if (syscall(SYS_getppid) != parent) {
        _exit(93);
    }
    child_say(MSG_PROCEEDED);
    _exit(0);
}

static void run(VfsdSeccomp action, Outcome *res)
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
        child(action, parent);
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

    run(VFSD_SECCOMP_KILL, &res);
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

    run(VFSD_SECCOMP_TRAP, &res);
    check_stopped(&res);
    /* The handler names the call before the process dies */
    g_assert_cmpstr(res.out + strlen(MSG_INSTALLED), ==, want);
    g_free(res.out);
}

static void test_log(void)
{
    Outcome res;

    /* The kernel writes the call to its audit log and lets it run */
    run(VFSD_SECCOMP_LOG, &res);
    check_exited_ok(&res);
    g_free(res.out);
}

static void test_none(void)
{
    Outcome res;

    run(VFSD_SECCOMP_NONE, &res);
    check_exited_ok(&res);
    g_free(res.out);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/seccomp/kill", test_kill);
    g_test_add_func("/virtiofsd/seccomp/trap", test_trap);
    g_test_add_func("/virtiofsd/seccomp/log", test_log);
    g_test_add_func("/virtiofsd/seccomp/none", test_none);
    return g_test_run();
}
