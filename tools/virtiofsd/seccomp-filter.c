/*
 * virtiofsd: system call allow-list
 *
 * Everything the daemon, glib and glibc need once serving, nothing more.
 * What any other call does is the --seccomp action: by default it kills
 * the process.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <glib.h>
#include <linux/fs.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "seccomp-filter.h"
#include "compat.h"

/*
 * The ioctl() commands in use: the two read-only attribute queries that
 * FUSE_IOCTL serves (server.c).  Any other number is a device's or a file
 * system's own command, never ours to run.
 */
static const unsigned long ioctl_allowed[] = {
    FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR,
};

/*
 * What clone() must share for a thread: anything less makes a process,
 * which the daemon never makes once serving (a process would be out of
 * reach of everything that bounds a thread: the pools, the fd accounting).
 */
#define VFSD_THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | \
                           CLONE_THREAD | CLONE_SYSVSEM)

/*
 * The prctl() options in use once serving: glib names its threads
 * (PR_SET_NAME); libcap-ng, which drops and restores CAP_FSETID per
 * operation, reads the bounding and ambient sets when /proc is out of its
 * reach.  The rest (dumpable, ptracer, securebits, mm, ambient raise...)
 * the daemon has no business with.
 */
static const int prctl_allowed[] = {
    PR_SET_NAME, PR_GET_NAME, PR_CAPBSET_READ, PR_GET_SECUREBITS,
};

static const int allowed[] = {
    /* File system operations */
    SCMP_SYS(openat), SCMP_SYS(openat2), SCMP_SYS(close),
    SCMP_SYS(statx), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
    SCMP_SYS(fstatfs), SCMP_SYS(getdents64), SCMP_SYS(lseek),
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
    SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(preadv),
    SCMP_SYS(pwritev), SCMP_SYS(preadv2), SCMP_SYS(pwritev2),
    SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(syncfs),
    SCMP_SYS(ftruncate), SCMP_SYS(fallocate), SCMP_SYS(copy_file_range),
    SCMP_SYS(mkdirat), SCMP_SYS(mknodat), SCMP_SYS(symlinkat),
    SCMP_SYS(linkat), SCMP_SYS(unlinkat), SCMP_SYS(renameat),
    SCMP_SYS(renameat2),
    SCMP_SYS(readlinkat), SCMP_SYS(fchmodat), SCMP_SYS(fchownat),
    SCMP_SYS(fchmod), SCMP_SYS(fchown), SCMP_SYS(utimensat),
    /* chmod of an O_PATH fd (fs-entry.c), where the kernel has it */
    SCMP_SYS(fchmodat2),
    /* The guest's umask for a creation, with --posix-acl */
    SCMP_SYS(umask),
    SCMP_SYS(faccessat), SCMP_SYS(faccessat2),
    SCMP_SYS(fgetxattr), SCMP_SYS(fsetxattr), SCMP_SYS(flistxattr),
    SCMP_SYS(fremovexattr), SCMP_SYS(getxattr), SCMP_SYS(setxattr),
    SCMP_SYS(listxattr), SCMP_SYS(removexattr),
    SCMP_SYS(fcntl), SCMP_SYS(flock),
    /* Credentials and capabilities, per thread */
    SCMP_SYS(setfsuid), SCMP_SYS(setfsgid), SCMP_SYS(setgroups),
    SCMP_SYS(capget),
    SCMP_SYS(capset), SCMP_SYS(getuid), SCMP_SYS(geteuid),
    SCMP_SYS(getgid), SCMP_SYS(getegid),
    /* vhost-user and queues */
    SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(poll), SCMP_SYS(ppoll),
    SCMP_SYS(eventfd2), SCMP_SYS(mmap), SCMP_SYS(munmap),
    /* The DAX unmap delay */
    SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime),
    SCMP_SYS(mprotect), SCMP_SYS(madvise), SCMP_SYS(mremap), SCMP_SYS(brk),
    SCMP_SYS(dup), SCMP_SYS(dup3),
    /* Threads (clone and clone3: see vfsd_seccomp_install()) */
    SCMP_SYS(futex),
    SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(exit),
    SCMP_SYS(exit_group), SCMP_SYS(gettid), SCMP_SYS(getpid),
    SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_getattr), SCMP_SYS(sched_setattr),
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigaction), SCMP_SYS(restart_syscall),
    SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
    SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday),
    SCMP_SYS(getrandom), SCMP_SYS(getrlimit),
    SCMP_SYS(prlimit64),
    /*
     * glibc's qsort() asks for the machine's memory size before sorting
     * more than a kilobyte, and that is sysinfo(): without it, sorting a
     * REMOVEMAPPING batch of more than 64 ranges kills the daemon.
     */
    SCMP_SYS(sysinfo),
    /* Reaping the broker (broker.c) once its socket is closed, at exit */
    SCMP_SYS(wait4),
};

/*
 * Calls allowed only when the options need them (@need: VFSD_SECCOMP_*
 * bits, any of which will do).  Without its bit a call gets @refuse:
 * 0 for the --seccomp action, or an errno.
 */
static const struct {
    int nr;
    unsigned int need;
    int refuse;
} conditional[] = {
    /*
     * Naming an inode by handle opens nothing and needs no privilege, but
     * only handle users do it: --inode-file-handles, and a migration
     * source attaching handles or a destination checking those the
     * source attached.
     */
    { SCMP_SYS(name_to_handle_at), VFSD_SECCOMP_NAME_HANDLES, 0 },
    /*
     * With CAP_DAC_READ_SEARCH this opens any inode of the file system,
     * outside the shared directory too: only the broker calls it
     * (broker.c), never the daemon.  Refused with EPERM, the kernel's
     * own answer without the capability, rather than killed.
     */
    { SCMP_SYS(open_by_handle_at), VFSD_SECCOMP_OPEN_HANDLES, EPERM },
    /*
     * --syslog: glibc's syslog() sends on its /dev/log connection with
     * send(), which is sendto(); after an error it reconnects with
     * socket() (see add_rules()) and connect().
     */
    { SCMP_SYS(connect), VFSD_SECCOMP_SYSLOG, 0 },
    { SCMP_SYS(sendto), VFSD_SECCOMP_SYSLOG, 0 },
};

unsigned int vfsd_seccomp_needs(const VfsdOptions *opts)
{
    unsigned int needs = 0;

    if (opts->syslog) {
        needs |= VFSD_SECCOMP_SYSLOG;
    }
    if (vfsd_options_open_by_handle(opts)) {
        needs |= VFSD_SECCOMP_NAME_HANDLES;
    }
    if (opts->migration_verify_handles || !opts->no_migration) {
        needs |= VFSD_SECCOMP_NAME_HANDLES;
    }
    return needs;
}

/*
 * SIGSYS from the filter (--seccomp=trap).  The point of trapping rather
 * than letting the kernel kill us is saying which call it was, on
 * standard error since nothing else is async-signal-safe here.  Then the
 * process dies of SIGSYS all the same (the handler was reset on entry and
 * SIGSYS is not blocked in it): carrying on after a call we never expected
 * would leave the daemon in a state nobody has reasoned about.
 */
static void sigsys_handler(int sig, siginfo_t *info, void *ucontext)
{
    static const char prefix[] = "virtiofsd: seccomp: system call ";
    static const char suffix[] = " is not allowed\n";
    char msg[sizeof(prefix) + 12 + sizeof(suffix)];
    char digits[12];
    unsigned int nr = info->si_syscall, n = 0, len;

    do {
        digits[n++] = '0' + nr % 10;
        nr /= 10;
    } while (nr && n < sizeof(digits));
    memcpy(msg, prefix, sizeof(prefix) - 1);
    len = sizeof(prefix) - 1;
    while (n) {
        msg[len++] = digits[--n];
    }
    memcpy(msg + len, suffix, sizeof(suffix) - 1);
    len += sizeof(suffix) - 1;
    if (write(STDERR_FILENO, msg, len) < 0) {
        /* Nowhere else to say it */
    }
    raise(SIGSYS);
    /*
     * Still here: we are pid 1 of our pid namespace (--sandbox=namespace),
     * where the kernel ignores a signal we send ourselves at its default
     * action.  End as a shell reports a death by SIGSYS.
     */
    _exit(128 + SIGSYS);
}

static bool install_sigsys_handler(char **err)
{
    struct sigaction sa = {
        .sa_sigaction = sigsys_handler,
        .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER,
    };

    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0) {
        *err = g_strdup_printf("seccomp: cannot handle SIGSYS: %s",
                               strerror(errno));
        return false;
    }
    return true;
}

/* The allow-list's rules; 0 or a negative errno from libseccomp */
/* The calls of allowed[] and conditional[], whatever their arguments */
static int add_listed_rules(scmp_filter_ctx ctx, unsigned int needs)
{
    unsigned int i;
    int ret = 0;

    for (i = 0; i < G_N_ELEMENTS(allowed) && ret == 0; i++) {
        /* A call this kernel and libseccomp do not know is skipped */
        if (allowed[i] < 0) {
            continue;
        }
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
    }
    for (i = 0; i < G_N_ELEMENTS(conditional) && ret == 0; i++) {
        if (conditional[i].nr < 0) {
            continue;
        }
        if (needs & conditional[i].need) {
            ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, conditional[i].nr, 0);
        } else if (conditional[i].refuse) {
            ret = seccomp_rule_add(ctx,
                                   SCMP_ACT_ERRNO(conditional[i].refuse),
                                   conditional[i].nr, 0);
        }
    }
    return ret;
}

/* ioctl() and prctl(): the commands in use, and no other */
static int add_command_rules(scmp_filter_ctx ctx)
{
    unsigned int i;
    int ret = 0;

    /* The kernel reads the command as an int: compare its 32 bits only */
    for (i = 0; i < G_N_ELEMENTS(ioctl_allowed) && ret == 0; i++) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                               SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu,
                                       ioctl_allowed[i]));
    }
    for (i = 0; i < G_N_ELEMENTS(prctl_allowed) && ret == 0; i++) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
                               SCMP_A0(SCMP_CMP_EQ, prctl_allowed[i]));
    }
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 2,
                               SCMP_A0(SCMP_CMP_EQ, PR_CAP_AMBIENT),
                               SCMP_A1(SCMP_CMP_EQ, PR_CAP_AMBIENT_IS_SET));
    }
    return ret;
}

/*
 * The tables' rules, then those of calls allowed with some arguments
 * only, or refused with an errno of their own
 */
static int add_rules(scmp_filter_ctx ctx, unsigned int needs)
{
    bool syslog = needs & VFSD_SECCOMP_SYSLOG;
    int ret = add_listed_rules(ctx, needs);

    /*
     * --watch-truncate.  Allowed whether or not it is on, as the option
     * only decides whether we call them; a watch can only ask for the
     * modifications of a file, the one event the watch needs.
     */
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(inotify_init1),
                               0);
    }
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW,
                               SCMP_SYS(inotify_add_watch), 1,
                               SCMP_A2(SCMP_CMP_EQ, IN_MODIFY));
    }
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW,
                               SCMP_SYS(inotify_rm_watch), 0);
    }
    /*
     * raise() is tgkill() on ourselves: abort() needs it (glib's
     * assertions, glibc's heap checks), and so does the --seccomp=trap
     * handler.  No other process is the daemon's business.  getpid() is
     * what the kernel compares with: our pid in our own pid namespace.
     */
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                               SCMP_A0(SCMP_CMP_EQ, getpid()));
    }
    /*
     * --syslog's reconnection (see conditional[]): a Unix socket at most,
     * and none at all without --syslog: the daemon's only other socket,
     * the vhost-user one, exists before the filter.
     */
    if (ret == 0 && syslog) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                               SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    }
    /*
     * libvhost-user probes userfaultfd for postcopy migration, which we
     * do not offer: it just finds it missing.
     */
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
                               SCMP_SYS(userfaultfd), 0);
    }
    /*
     * clone3() passes its flags in memory, out of the filter's reach:
     * ENOSYS makes glibc fall back to clone(), whose flags it can see.
     */
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
                               0);
    }
    if (ret == 0) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, VFSD_THREAD_FLAGS,
                                       VFSD_THREAD_FLAGS));
    }
    if (ret == 0) {
        ret = add_command_rules(ctx);
    }
    return ret;
}

bool vfsd_seccomp_install(VfsdSeccomp action, unsigned int needs,
                          char **err)
{
    scmp_filter_ctx ctx;
    uint32_t def;
    int ret;

    switch (action) {
    case VFSD_SECCOMP_KILL:
        def = SCMP_ACT_KILL_PROCESS;
        break;
    case VFSD_SECCOMP_LOG:
        def = SCMP_ACT_LOG;
        break;
    case VFSD_SECCOMP_TRAP:
        def = SCMP_ACT_TRAP;
        if (!install_sigsys_handler(err)) {
            return false;
        }
        break;
    case VFSD_SECCOMP_NONE:
        return true;
    default:
        *err = g_strdup_printf("seccomp: unknown action %d", action);
        return false;
    }
    ctx = seccomp_init(def);
    if (!ctx) {
        *err = g_strdup("seccomp: cannot create a filter");
        return false;
    }
    ret = add_rules(ctx, needs);
    /* The filter applies to every thread, including glib's */
    if (ret == 0) {
        ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    }
    if (ret == 0) {
        ret = seccomp_load(ctx);
    }
    seccomp_release(ctx);
    if (ret < 0) {
        *err = g_strdup_printf("seccomp: cannot install the filter: %s",
                               strerror(-ret));
        return false;
    }
    return true;
}
