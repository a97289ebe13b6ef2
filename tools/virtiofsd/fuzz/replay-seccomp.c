/*
 * virtiofsd: the fuzz corpus replayed under the daemon's own seccomp filter
 *
 *   replay-seccomp FILE...
 *
 * The fuzzer (fuzz-request.c) runs the daemon's request path without its
 * system call filter, so a call the filter forbids, made only on an error
 * path a guest can reach, would go unnoticed until it killed a user's
 * daemon.  Here every input runs as the fuzzer runs it, in a child
 * process that installs the real filter (seccomp-filter.c, --seccomp=trap: the
 * kill mode's verdict, with the call's number on stderr) at the point
 * main.c does, right after vfsd_fs_init(), before the first request.
 * A child that dies, or exits with anything but 0, fails the replay and
 * names its input; a child that never installed the filter fails it too.
 *
 * The harness is fuzz-request.c itself, included below, so that its
 * checks (fd accounting, confinement, reply rules) run here as well.  Two
 * of its own calls are not the daemon's and the filter rightly refuses
 * them: readlink(2), which it uses to see what an fd is (readlinkat(2)
 * does the same and is allowed), and the fchdir(2) back to its working
 * directory after a session, which a child that exits next does not need.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"
#include "seccomp-filter.h"

static bool filter_armed;

static ssize_t replay_readlink(const char *path, char *buf, size_t size)
{
    return readlinkat(AT_FDCWD, path, buf, size);
}

static int replay_fchdir(int fd)
{
    return filter_armed ? 0 : fchdir(fd);
}

#define readlink replay_readlink
#define fchdir replay_fchdir
#include "fuzz-request.c"
#undef readlink
#undef fchdir

#include "replay-seccomp.h"

bool __wrap_vfsd_fs_init(VfsdFs *fs, const VfsdOptions *opts, int root_fd,
                         int proc_fd, char **err)
{
    if (!__real_vfsd_fs_init(fs, opts, root_fd, proc_fd, err)) {
        return false;
    }
    /* The filter the daemon would install with the input's options */
    if (!vfsd_seccomp_install(VFSD_SECCOMP_TRAP, vfsd_seccomp_needs(opts),
                              err)) {
        return false;
    }
    filter_armed = true;
    return true;
}

/* Exit statuses of a child that did not get to its verdict */
#define REPLAY_NOT_ARMED 3

static bool replay_one(const char *path)
{
    g_autofree char *data = NULL;
    g_autoptr(GError) gerr = NULL;
    gsize size;
    pid_t pid;
    int status;

    if (!g_file_get_contents(path, &data, &size, &gerr)) {
        fprintf(stderr, "replay-seccomp: %s\n", gerr->message);
        return false;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fuzz_fail("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        LLVMFuzzerTestOneInput((const uint8_t *)data, size);
        _exit(filter_armed ? 0 : REPLAY_NOT_ARMED);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fuzz_fail("waitpid: %s", strerror(errno));
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return true;
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "replay-seccomp: %s: killed by signal %d\n", path,
                WTERMSIG(status));
    } else if (WEXITSTATUS(status) == 128 + SIGSYS) {
        fprintf(stderr, "replay-seccomp: %s: a system call outside the "
                "filter (above)\n", path);
    } else if (WEXITSTATUS(status) == REPLAY_NOT_ARMED) {
        fprintf(stderr, "replay-seccomp: %s: the session ended without the "
                "filter installed\n", path);
    } else {
        fprintf(stderr, "replay-seccomp: %s: exit status %d\n", path,
                WEXITSTATUS(status));
    }
    /* What the child left in the shared scratch tmpfs */
    empty_dir(__real_openat(scratch_fd, ".", O_RDONLY | O_DIRECTORY |
                            O_CLOEXEC));
    return false;
}

int main(int argc, char **argv)
{
    int i, failed = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    for (i = 1; i < argc; i++) {
        if (!replay_one(argv[i])) {
            failed++;
        }
    }
    printf("replay-seccomp: %d inputs under the seccomp filter, %d failed\n",
           argc - 1, failed);
    return failed ? 1 : 0;
}
