/*
 * lockwait FILE posix|flock [TIMEOUT_S]: waits for an exclusive lock on
 * FILE (fcntl F_SETLKW on the whole file, or flock LOCK_EX) that the host
 * holds, for TIMEOUT_S seconds at most (default 120).  Once it has it,
 * prints "ok: FILE: locked after N ms", creates FILE.held, waits for the
 * host's FILE.release, unlocks and prints "ok: FILE: released".
 * A wait past TIMEOUT_S prints "FAIL: FILE: still waiting after N s";
 * that and every other failure exits 1.
 *
 * The lock is taken in a child.  virtiofs in the guest kernel does not
 * send FUSE_INTERRUPT, and a task whose request the daemon has taken
 * waits for the answer whatever signal comes, SIGKILL included: a request
 * the daemon never answers keeps its task forever.  So the parent keeps
 * the time (SIGALRM, no SA_RESTART, ends its wait for the child's word)
 * and leaves the child behind, killed, so that a late answer ends it
 * rather than letting it go on.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
    (void)sig;
    alarmed = 1;
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* The errors a lock request may plausibly give, by name for the log */
static const char *errno_name(int err)
{
#define NAME(e) case e: return #e
    switch (err) {
    NAME(EAGAIN); NAME(EACCES); NAME(EBADF); NAME(EDEADLK); NAME(EINTR);
    NAME(EINVAL); NAME(EIO); NAME(ENOENT); NAME(ENOLCK); NAME(ENOSYS);
    NAME(ENOTCONN); NAME(EOPNOTSUPP); NAME(EPERM); NAME(EROFS);
    }
#undef NAME
    return "errno";
}

static void fail_errno(const char *file, const char *what, int err)
{
    printf("FAIL: %s: %s: %s %d (%s)\n", file, what, errno_name(err), err,
           strerror(err));
    exit(1);
}

/* A marker file next to FILE, made through the same mount */
static void make_marker(const char *file, const char *suffix)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s%s", file, suffix);
    fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd < 0 || close(fd) < 0) {
        fail_errno(file, path, errno);
    }
}

/*
 * The child: takes the lock, tells the parent through @tell, then holds
 * it until FILE.release shows up (for @timeout_s at most) and unlocks.
 */
static int locker(const char *file, int posix, int timeout_s, int tell,
                  long t0)
{
    struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    char path[4096];
    struct stat st;
    int fd, ret, i;

    fd = open(file, O_RDWR);
    if (fd < 0) {
        fail_errno(file, "open", errno);
    }
    ret = posix ? fcntl(fd, F_SETLKW, &l) : flock(fd, LOCK_EX);
    if (ret < 0) {
        fail_errno(file, posix ? "fcntl F_SETLKW" : "flock LOCK_EX", errno);
    }
    if (write(tell, "L", 1) != 1) {
        fail_errno(file, "telling the parent", errno);
    }
    printf("ok: %s: locked after %ld ms\n", file, now_ms() - t0);
    make_marker(file, ".held");

    snprintf(path, sizeof(path), "%s.release", file);
    for (i = 0; stat(path, &st) < 0; i++) {
        if (errno != ENOENT) {
            fail_errno(file, path, errno);
        }
        if (i >= timeout_s * 10) {
            printf("FAIL: %s: no %s after %d s\n", file, path, timeout_s);
            return 1;
        }
        usleep(100000);
    }
    l.l_type = F_UNLCK;
    ret = posix ? fcntl(fd, F_SETLK, &l) : flock(fd, LOCK_UN);
    if (ret < 0) {
        fail_errno(file, "unlock", errno);
    }
    close(fd);
    printf("ok: %s: released\n", file);
    return 0;
}

int main(int argc, char **argv)
{
    struct sigaction sa = { .sa_handler = on_alarm };
    int timeout_s = 120, posix, pipefd[2], status;
    const char *file;
    long t0 = now_ms();
    ssize_t n;
    pid_t pid;
    char c;

    if (argc < 3 || argc > 4 ||
        (strcmp(argv[2], "posix") && strcmp(argv[2], "flock"))) {
        fprintf(stderr, "usage: lockwait FILE posix|flock [TIMEOUT_S]\n");
        return 2;
    }
    file = argv[1];
    posix = !strcmp(argv[2], "posix");
    if (argc == 4) {
        timeout_s = atoi(argv[3]);
        if (timeout_s <= 0) {
            fprintf(stderr, "lockwait: bad timeout %s\n", argv[3]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(pipefd) < 0) {
        fail_errno(file, "pipe", errno);
    }
    pid = fork();
    if (pid < 0) {
        fail_errno(file, "fork", errno);
    }
    if (pid == 0) {
        close(pipefd[0]);
        exit(locker(file, posix, timeout_s, pipefd[1], t0));
    }
    close(pipefd[1]);

    /* No SA_RESTART: the alarm must end the read below */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) < 0) {
        fail_errno(file, "sigaction", errno);
    }
    alarm(timeout_s);
    do {
        n = read(pipefd[0], &c, 1);
    } while (n < 0 && errno == EINTR && !alarmed);
    alarm(0);
    if (n < 0 && alarmed) {
        printf("FAIL: %s: still waiting after %d s\n", file, timeout_s);
        kill(pid, SIGKILL);
        alarmed = 0;
        alarm(2);
        if (waitpid(pid, NULL, 0) < 0 && alarmed) {
            printf("%s: the waiting process stays blocked in the kernel\n",
                   file);
        }
        return 1;
    }
    /* Locked (or failed, and said why): the child's status is ours */
    if (waitpid(pid, &status, 0) < 0) {
        fail_errno(file, "waitpid", errno);
    }
    if (!WIFEXITED(status)) {
        printf("FAIL: %s: the locking process ended by signal %d\n", file,
               WTERMSIG(status));
        return 1;
    }
    return WEXITSTATUS(status);
}
