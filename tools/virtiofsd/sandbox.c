/*
 * virtiofsd: confinement to the shared directory, capabilities
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/landlock.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "log.h"
#include "sandbox.h"

/*
 * How a supervisor (libvirt, systemd, a shell) asks the daemon to stop.
 * Not SIGQUIT: re-raising it in the parent would dump a core of a
 * process that did nothing wrong.
 */
static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP };

static pid_t daemon_pid;
static volatile sig_atomic_t forwarded;

static void block_stop_signals(sigset_t *old)
{
    sigset_t set;
    unsigned int i;

    sigemptyset(&set);
    for (i = 0; i < G_N_ELEMENTS(stop_signals); i++) {
        sigaddset(&set, stop_signals[i]);
    }
    sigprocmask(SIG_BLOCK, &set, old);
}

static void handle_stop_signals(void (*handler)(int))
{
    struct sigaction sa = { .sa_handler = handler };
    unsigned int i;

    sigfillset(&sa.sa_mask);
    for (i = 0; i < G_N_ELEMENTS(stop_signals); i++) {
        sigaction(stop_signals[i], &sa, NULL);
    }
}

static void forward_stop(int sig)
{
    int saved = errno;

    forwarded = sig;
    kill(daemon_pid, sig);
    errno = saved;
}

/*
 * The daemon is pid 1 of its pid namespace, where the kernel ignores any
 * signal left at its default action: without a handler, SIGTERM would
 * not stop it.  128 + signal is how the parent recognises the signal it
 * forwarded.
 */
static void stop_daemon(int sig)
{
    _exit(128 + sig);
}

/*
 * Copies what the daemon writes to its stderr (@log) to ours until every
 * writer has closed it.
 */
static void relay_log(int log)
{
    char buf[4096];
    ssize_t n, w, off;

    for (;;) {
        n = read(log, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        for (off = 0; off < n; off += w) {
            w = write(STDERR_FILENO, buf + off, n - off);
            if (w < 0 && errno == EINTR) {
                w = 0;
            } else if (w < 0) {
                break;          /* nowhere to log: drain and drop */
            }
        }
    }
    close(log);
}

/*
 * The parent of the sandbox: the process libvirt started and watches,
 * holding no privilege, living exactly as long as the daemon and ending
 * the way it does.  It keeps the daemon's stderr, and relays to it what
 * the daemon writes to the pipe it has instead (@log): a log file is a
 * descriptor outside the shared directory, which the process that
 * parses guest requests must not hold.
 */
static G_NORETURN void supervise(pid_t child, int log,
                                 const sigset_t *old_mask)
{
    sigset_t set;
    int status, sig = 0;

    daemon_pid = child;
    handle_stop_signals(forward_stop);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    capng_clear(CAPNG_SELECT_BOTH);
    if (capng_apply(CAPNG_SELECT_BOTH) < 0) {
        /* The daemon is confined either way; we only wait */
        vfsd_warn("the sandbox's parent keeps its capabilities");
    }
    relay_log(log);
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            _exit(1);
        }
    }
    if (WIFSIGNALED(status)) {
        sig = WTERMSIG(status);
    } else if (forwarded && WEXITSTATUS(status) == 128 + forwarded) {
        sig = forwarded;
    }
    if (sig && sig == forwarded) {
        /* Stopped as the supervisor asked: as if there were no fork */
        signal(sig, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
    }
    _exit(sig ? 128 + sig : WEXITSTATUS(status));
}

/*
 * Called in the child right after the fork: once the parent is gone,
 * nothing would stop the daemon or report its end, so it goes too.
 * @alive is a pipe whose write end only the parent holds; it is hung up
 * already if the parent died before the request took effect.
 */
static bool die_with_parent(int alive)
{
    struct pollfd pfd = { .fd = alive, .events = POLLIN };

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
        return false;
    }
    while (poll(&pfd, 1, 0) < 0) {
        if (errno != EINTR) {
            return false;
        }
    }
    if (pfd.revents) {
        _exit(1);
    }
    return true;
}

/*
 * The guest may make device nodes in the shared directory (mknod is a
 * file operation like any other, and CAP_MKNOD stays so that it works),
 * but nothing may open one here: the daemon never does (vfsd_reopen()),
 * and with nodev a daemon taken over cannot either, even one it made
 * itself for a host disk.
 */
static bool mount_nodev(const char *dir)
{
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_NODEV };
    struct statvfs sv;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NODEV;

    if (syscall(SYS_mount_setattr, AT_FDCWD, dir, AT_RECURSIVE, &attr,
                sizeof(attr)) == 0) {
        return true;
    }
    if (errno != ENOSYS) {
        return false;
    }
    /*
     * Before Linux 5.12 only the top mount gets it: mounts below the
     * shared directory keep theirs.  A remount must restate the flags it
     * keeps.
     */
    vfsd_warn("no mount_setattr(): mounts inside %s keep their device "
              "nodes usable", dir);
    if (statvfs(dir, &sv) < 0) {
        return false;
    }
    flags |= (sv.f_flag & ST_RDONLY ? MS_RDONLY : 0) |
             (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) |
             (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) |
             (sv.f_flag & ST_NOATIME ? MS_NOATIME : 0) |
             (sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0) |
             (sv.f_flag & ST_RELATIME ? MS_RELATIME : 0);
    return mount(NULL, dir, NULL, flags, NULL) == 0;
}

/*
 * Forks; only the child returns, as the daemon, and the parent
 * supervises it.  The child's stdin reads nothing and its stdout and
 * stderr go to the parent, so that it holds none of the descriptors it
 * was started with there.  @what names the sandbox, for errors.
 */
static bool fork_supervised(const char *what, char **err)
{
    const char *step = "creating pipes";
    sigset_t old_mask;
    int alive[2] = { -1, -1 }, logp[2] = { -1, -1 }, none[2] = { -1, -1 };
    pid_t pid;

    if (pipe2(alive, O_CLOEXEC) < 0 || pipe2(logp, O_CLOEXEC) < 0 ||
        pipe2(none, O_CLOEXEC) < 0) {
        goto fail;
    }
    /* A stop signal waits until each side has its handler */
    block_stop_signals(&old_mask);
    pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        step = "fork";
        goto fail;
    }
    if (pid > 0) {
        close(alive[0]);
        close(logp[1]);
        close(none[0]);
        close(none[1]);
        supervise(pid, logp[0], &old_mask);
    }
    close(alive[1]);
    close(logp[0]);
    step = "asking to die with the parent";
    if (!die_with_parent(alive[0])) {
        goto fail;
    }
    close(alive[0]);
    alive[0] = -1;
    step = "replacing stdin, stdout and stderr";
    close(none[1]);
    none[1] = -1;
    if (dup2(none[0], STDIN_FILENO) < 0 || dup2(logp[1], STDOUT_FILENO) < 0 ||
        dup2(logp[1], STDERR_FILENO) < 0) {
        goto fail;
    }
    close(none[0]);
    close(logp[1]);
    handle_stop_signals(stop_daemon);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return true;

fail:
    *err = g_strdup_printf("%s: %s failed: %s", what, step, strerror(errno));
    return false;
}

/*
 * New mount, pid and net namespaces.  The calling process forks: the
 * child is the daemon, pid 1 of the new pid namespace (it sees no other
 * process, and nothing of the host's survives it), in a net namespace
 * with nothing but a loopback interface (it never needs a network: the
 * vhost-user socket was opened or inherited before, and connections to
 * it arrive whatever namespace the acceptor is in).  Only the child
 * returns; the parent waits and mirrors it (supervise()).
 */
static bool enter_namespace(const char *dir, int *proc_fd, char **err)
{
    const char *step;

    if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) < 0) {
        *err = g_strdup_printf("--sandbox=namespace: cannot create mount, "
                               "pid and net namespaces: %s (they need "
                               "CAP_SYS_ADMIN: use --sandbox=chroot as "
                               "root, --sandbox=none otherwise)",
                               strerror(errno));
        return false;
    }
    if (!fork_supervised("--sandbox=namespace", err)) {
        return false;
    }

    /* Nothing we do here may propagate back to the host */
    step = "making the mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
        goto fail;
    }
    /*
     * The host's /proc shows the host's processes, and its /proc/self
     * would be the parent's: the daemon's own procfs, which the fd below
     * keeps alive once the old root is gone.
     */
    /*
     * Read-only, and with only the processes' directories where the
     * kernel can (subset=pid, Linux 5.8): no /proc/sys, whose files root
     * may write (core_pattern runs a program as the host's root).
     */
    step = "mounting /proc for the new pid namespace";
    if (mount("proc", "/proc", "proc",
              MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
              "subset=pid") < 0 &&
        (errno != EINVAL ||
         mount("proc", "/proc", "proc",
               MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)) {
        goto fail;
    }
    step = "opening /proc/self/fd";
    *proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*proc_fd < 0) {
        goto fail;
    }
    /* pivot_root needs a mount point */
    step = "bind-mounting the shared directory";
    if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL) < 0) {
        goto fail;
    }
    step = "making device nodes in the shared directory unusable (nodev)";
    if (!mount_nodev(dir)) {
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
    *err = g_strdup_printf("--sandbox=namespace: %s failed: %s", step,
                           strerror(errno));
    return false;
}

static bool open_proc_self_fd(int *proc_fd, char **err)
{
    *proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*proc_fd < 0) {
        *err = g_strdup_printf("cannot open /proc/self/fd (is /proc "
                               "mounted?): %s", strerror(errno));
        return false;
    }
    return true;
}

bool vfsd_sandbox_enter(VfsdSandbox mode, const char *shared_dir,
                        int *proc_fd, char **err)
{
    switch (mode) {
    case VFSD_SANDBOX_NAMESPACE:
        return enter_namespace(shared_dir, proc_fd, err);
    case VFSD_SANDBOX_CHROOT:
        if (!fork_supervised("--sandbox=chroot", err) ||
            !open_proc_self_fd(proc_fd, err)) {
            return false;
        }
        if (chroot(shared_dir) < 0 || chdir("/") < 0) {
            *err = g_strdup_printf("--sandbox=chroot: %s", strerror(errno));
            return false;
        }
        return true;
    case VFSD_SANDBOX_NONE:
        return fork_supervised("--sandbox=none", err) &&
               open_proc_self_fd(proc_fd, err);
    }
    return false;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

void vfsd_close_inherited(int keep)
{
    /*
     * The capture files are the daemon's own (capture.c opens them before
     * main() runs), not inherited: asked for, they stay
     */
    int keeps[] = { keep, vfsd_capture_fd, vfsd_record_fd };
    int from = 3, fd;
    unsigned int i;

    /*
     * The ranges between them, one call each where the kernel has
     * close_range() (5.9); else each fd up to the limit, which is what
     * there is to close
     */
    qsort(keeps, G_N_ELEMENTS(keeps), sizeof(keeps[0]), cmp_int);
    for (i = 0; i < G_N_ELEMENTS(keeps); i++) {
        if (keeps[i] < from) {
            continue;
        }
        if (keeps[i] > from &&
            syscall(SYS_close_range, from, keeps[i] - 1, 0) < 0) {
            break;
        }
        from = keeps[i] + 1;
    }
    if (i == G_N_ELEMENTS(keeps) &&
        syscall(SYS_close_range, from, ~0U, 0) == 0) {
        return;
    }
    for (fd = 3; fd < sysconf(_SC_OPEN_MAX); fd++) {
        if (fd != keeps[0] && fd != keeps[1] && fd != keeps[2]) {
            close(fd);
        }
    }
}

/*
 * What a passthrough server needs, before --modcaps.  CAP_DAC_READ_SEARCH
 * is not among them: CAP_DAC_OVERRIDE covers the permission checks, and
 * what it adds is open_by_handle_at(), which opens any inode of the file
 * system (outside the shared directory too): only the broker keeps it
 * (broker.c).
 */
static const int default_caps[] = {
    CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_SETGID,
    CAP_SETUID, CAP_MKNOD, CAP_SETFCAP, CAP_LEASE,
};

bool vfsd_drop_capabilities(uint64_t add, uint64_t drop, bool open_by_handle,
                            char **err)
{
    uint64_t want = 0, held = 0;
    unsigned int i;
    int cap, ret;

    for (i = 0; i < G_N_ELEMENTS(default_caps); i++) {
        want |= 1ULL << default_caps[i];
    }
    if (open_by_handle) {
        want |= 1ULL << CAP_DAC_READ_SEARCH;
    }
    want = (want | add) & ~drop;

    /*
     * Refuse rather than start without what the user asked for: a
     * capability outside our permitted set cannot be gained back.
     */
    capng_get_caps_process();
    for (cap = 0; cap <= CAP_LAST_CAP && cap < 64; cap++) {
        if (capng_have_capability(CAPNG_PERMITTED, cap)) {
            held |= 1ULL << cap;
        }
    }
    for (cap = 0; cap < 64; cap++) {
        if ((add & ~held) & (1ULL << cap)) {
            const char *name = capng_capability_to_name(cap);

            *err = g_strdup_printf("--modcaps: the daemon does not hold "
                                   "capability %s, so it cannot keep it",
                                   name ? name : "?");
            return false;
        }
    }
    if (!held && !add && !drop) {
        /* Nothing to drop; creations simply keep the daemon's ids */
        return true;
    }
    /* Not root: what we were not given stays out, asked for or not */
    want &= held;
    capng_clear(CAPNG_SELECT_BOTH);
    ret = 0;
    for (cap = 0; cap < 64 && ret == 0; cap++) {
        if (want & (1ULL << cap)) {
            ret = capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
                               cap);
        }
    }
    if (ret == 0) {
        ret = capng_apply(CAPNG_SELECT_BOTH);
    }
    if (ret < 0) {
        *err = g_strdup("cannot drop capabilities");
        return false;
    }
    return true;
}

/* What older <linux/landlock.h> lack: the kernel's numbers, fixed by ABI */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)        /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)       /* ABI 5 */
#endif

/* Every file system right of Landlock ABI @abi */
static uint64_t landlock_fs_rights(int abi)
{
    uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;   /* ABI 1 */

    if (abi >= 2) {
        rights |= LANDLOCK_ACCESS_FS_REFER;
    }
    if (abi >= 3) {
        rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
    }
    if (abi >= 5) {
        rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    }
    return rights;
}

static bool landlock_allow(int ruleset, int fd, uint64_t rights)
{
    struct landlock_path_beneath_attr rule = {
        .allowed_access = rights,
        .parent_fd = fd,
    };

    return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                   &rule, 0) == 0;
}

/*
 * What the daemon may still reach once restricted: the shared directory,
 * and /proc/self/fdinfo to read.  On failure @step says what failed and
 * errno why.
 */
static bool landlock_add_rules(int ruleset, uint64_t rights, int root_fd,
                               int proc_fd, const char **step)
{
    /*
     * Kept open for good: procfs makes a new inode for a dentry it let
     * go, and a rule is on the inode.  An fd holds the dentry.
     */
    static int fdinfo_fd = -1;

    /*
     * The shared directory by its fd: after pivot_root it is "/", and
     * with --sandbox=none its path may since lead elsewhere.
     */
    *step = "allowing the shared directory";
    if (!landlock_allow(ruleset, root_fd, rights)) {
        return false;
    }
    /* The locks a migration carries are read from /proc/self/fdinfo */
    *step = "opening /proc/self/fdinfo";
    if (fdinfo_fd < 0) {
        fdinfo_fd = openat(proc_fd, "../fdinfo",
                           O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (fdinfo_fd < 0) {
        return false;
    }
    *step = "allowing /proc/self/fdinfo";
    return landlock_allow(ruleset, fdinfo_fd, LANDLOCK_ACCESS_FS_READ_FILE);
}

bool vfsd_landlock_restrict(VfsdSandbox mode, bool open_by_handle,
                            int root_fd, int proc_fd, char **err)
{
    struct landlock_ruleset_attr attr = { 0 };
    const char *step;
    int abi, ruleset;

    if (open_by_handle && mode != VFSD_SANDBOX_NAMESPACE) {
        /*
         * A file opened by handle whose dentry the kernel has let go has
         * no path to the shared directory, only to its mount's root, and
         * Landlock judges it there: outside the namespace sandbox that
         * root is the host file system's, where nothing is allowed, and
         * the guest would get EACCES for its own files.
         */
        vfsd_info("Landlock not used: files opened by handle are out of "
                  "its reach without --sandbox=namespace");
        return true;
    }
    abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
                  LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0 && (errno == ENOSYS || errno == EOPNOTSUPP)) {
        vfsd_info("Landlock not used: the kernel %s it",
                  errno == ENOSYS ? "lacks" : "has disabled");
        return true;
    }
    if (abi < 0) {
        *err = g_strdup_printf("Landlock: cannot ask its ABI version: %s",
                               strerror(errno));
        return false;
    }
    if (abi < 2) {
        /* Without LANDLOCK_ACCESS_FS_REFER every rename across is EXDEV */
        vfsd_info("Landlock not used: ABI 1 forbids moving files between "
                  "directories");
        return true;
    }
    attr.handled_access_fs = landlock_fs_rights(abi);
    step = "creating a ruleset";
    ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
    if (ruleset < 0) {
        goto fail;
    }
    if (!landlock_add_rules(ruleset, attr.handled_access_fs, root_fd,
                            proc_fd, &step)) {
        goto fail_close;
    }
    /* Landlock wants it or CAP_SYS_ADMIN; the daemon never execs anyway */
    step = "setting no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        goto fail_close;
    }
    step = "restricting the daemon";
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) {
        goto fail_close;
    }
    close(ruleset);
    vfsd_info("Landlock (ABI %d): the file system is reachable beneath "
              "the shared directory only", abi);
    return true;

fail_close:
    close(ruleset);
fail:
    *err = g_strdup_printf("Landlock: %s failed: %s", step, strerror(errno));
    return false;
}
