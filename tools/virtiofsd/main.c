/*
 * virtiofsd: a vhost-user virtio-fs back-end that passes a host directory
 * through to the guest, with DAX cache window support
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "creds.h"
#include "fs.h"
#include "log.h"
#include "options.h"
#include "sandbox.h"
#include "seccomp-filter.h"
#include "userns.h"
#include "vhost.h"

#define VFSD_VERSION "1.0 (virtiofs-dax)"

static G_NORETURN void die(const char *msg)
{
    vfsd_err("%s", msg);
    exit(1);
}

/* fs.nr_open: how far RLIMIT_NOFILE can be raised at all */
static uint64_t nr_open(void)
{
    g_autofree char *text = NULL;

    if (!g_file_get_contents("/proc/sys/fs/nr_open", &text, NULL, NULL)) {
        return 1048576;         /* the kernel's default */
    }
    return g_ascii_strtoull(text, NULL, 10);
}

static void set_rlimit(uint64_t want)
{
    struct rlimit rl, up;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        die("getrlimit(RLIMIT_NOFILE) failed");
    }
    /*
     * By default, as the Rust virtiofsd: up to a million where we may
     * raise the hard limit (CAP_SYS_RESOURCE), since every inode the
     * guest knows may hold an fd (inodes by fd); else the hard limit.
     */
    up.rlim_cur = up.rlim_max = MIN(1000000, nr_open());
    if (!want && up.rlim_max > rl.rlim_max &&
        setrlimit(RLIMIT_NOFILE, &up) == 0) {
        return;
    }
    rl.rlim_cur = want ? want : rl.rlim_max;
    if (want > rl.rlim_max) {
        rl.rlim_max = want;
    }
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        g_autofree char *msg = g_strdup_printf(
            "cannot set RLIMIT_NOFILE to %" G_GUINT64_FORMAT ": %s",
            (uint64_t)rl.rlim_cur, strerror(errno));

        if (want) {
            die(msg);
        }
        vfsd_warn("%s", msg);
    }
}

/*
 * Inodes held by fd: each inode the guest knows takes one, and a bound
 * far below the Rust daemon's million (a hard limit we could not raise)
 * makes a large tree fail with ENFILE.
 */
static void warn_fd_bound(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1000000) {
        vfsd_warn("inodes are held by fds and RLIMIT_NOFILE is %llu: a "
                  "guest that knows more inodes than that gets ENFILE "
                  "(raise the hard limit, or run as root with "
                  "--sandbox=namespace, where inodes are held by handle)",
                  (unsigned long long)rl.rlim_cur);
    }
}

static void check_shared_dir(const char *dir)
{
    g_autofree char *msg = NULL;
    struct stat st;

    if (stat(dir, &st) < 0) {
        msg = g_strdup_printf("shared directory %s: %s", dir,
                              strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        msg = g_strdup_printf("shared directory %s: not a directory", dir);
    }
    if (msg) {
        die(msg);
    }
}

/*
 * The socket gets the mode the caller's umask gives, as with the Rust
 * virtiofsd: the daemon's own umask of 0 would let any local user connect
 * as the front-end.
 */
static int listen_socket(const char *path, int gid, mode_t caller_umask)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, ret;

    if (strlen(path) >= sizeof(sun.sun_path)) {
        die("socket path too long");
    }
    strcpy(sun.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("cannot create a socket");
    }
    /* A stale socket from an earlier run, not anything else */
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        unlink(path);
    }
    umask(caller_umask);
    ret = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    umask(0);
    if (ret < 0 || listen(fd, 1) < 0) {
        g_autofree char *msg = g_strdup_printf("cannot listen on %s: %s",
                                               path, strerror(errno));
        die(msg);
    }
    /* What the group may do is what the umask left it */
    if (gid >= 0 && chown(path, -1, gid) < 0) {
        g_autofree char *msg = g_strdup_printf("cannot give %s to group %d: "
                                               "%s", path, gid,
                                               strerror(errno));
        die(msg);
    }
    return fd;
}

/*
 * The socket given with --fd: libvirt hands over the socket it listens
 * on, returned; a connected socket (e.g. one end of a socketpair) is
 * used as it is: it becomes *@conn, and -1 is returned.
 */
static int inherited_socket(int fd, int *conn)
{
    int listening = 0;
    socklen_t len = sizeof(listening);

    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        g_autofree char *msg = g_strdup_printf("--fd=%d is not open", fd);
        die(msg);
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0) {
        g_autofree char *msg = g_strdup_printf("--fd=%d is not a socket",
                                               fd);
        die(msg);
    }
    if (!listening) {
        *conn = fd;
        return -1;
    }
    return fd;
}

/* Waits for the front-end on @lfd, which it closes */
static int accept_front_end(int lfd)
{
    int conn;

    do {
        conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    } while (conn < 0 && errno == EINTR);
    if (conn < 0) {
        die("accept failed");
    }
    close(lfd);
    return conn;
}

/*
 * --help, --version and --print-capabilities answer and exit before
 * anything is set up: libvirt probes the binary with the last one.
 */
static bool answer_and_exit(const VfsdOptions *opts, const char *prog)
{
    if (opts->help) {
        vfsd_options_usage(prog);
    } else if (opts->version) {
        printf("virtiofsd %s\n", VFSD_VERSION);
    } else if (opts->print_capabilities) {
        fputs(vfsd_options_capabilities(), stdout);
    } else {
        return false;
    }
    return true;
}

/*
 * Unprivileged, the namespace sandbox is made in a user namespace of the
 * daemon's own, as in the Rust daemon; --uid-map/--gid-map are its maps:
 * the kernel translates, so the daemon must not as well.  As root the
 * daemon gives the guest the same view by translating itself (see
 * idmap.c).  Returns whether the daemon now runs in a user namespace of
 * its own.
 */
static bool setup_id_mapping(VfsdOptions *opts)
{
    g_autofree char *err = NULL;

    if (geteuid() != 0 && opts->sandbox == VFSD_SANDBOX_NAMESPACE) {
        if (!vfsd_userns_enter(&opts->uid_map, &opts->gid_map, &err)) {
            die(err);
        }
        opts->uid_map.n = opts->gid_map.n = 0;
        return true;
    }
    if ((opts->uid_map.n || opts->gid_map.n) && geteuid() != 0) {
        die("--uid-map/--gid-map without root need --sandbox=namespace");
    }
    if ((vfsd_idmap_active(&opts->uid_map) ||
         vfsd_idmap_active(&opts->gid_map)) && geteuid() != 0) {
        /* Acting as the translated ids needs CAP_SETUID/CAP_SETGID */
        vfsd_warn("--translate-uid/--translate-gid without root: "
                  "requests from users other than ours will fail");
    }
    return false;
}

/*
 * The root of what is served: the shared directory, or "/" once a
 * sandbox has made it the root.  The daemon then works from
 * /proc/self/fd, through which the xattr calls on inodes it must not
 * open go.
 */
static int open_root(const VfsdOptions *opts, int proc_fd)
{
    int root_fd = open(opts->sandbox == VFSD_SANDBOX_NONE ?
                       opts->shared_dir : "/",
                       O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (root_fd < 0) {
        die("cannot open the shared directory");
    }
    if (fchdir(proc_fd) < 0) {
        die("cannot change to /proc/self/fd");
    }
    return root_fd;
}

/*
 * Inodes held by handle need Landlock off outside the namespace
 * sandbox (see vfsd_landlock_restrict()), where it is what keeps the
 * host's /proc from the daemon: there prefer means fds.
 */
static void prefer_fds_without_namespace(VfsdOptions *opts)
{
    if (opts->inode_file_handles == VFSD_INODE_FH_PREFER &&
        opts->sandbox != VFSD_SANDBOX_NAMESPACE) {
        vfsd_info("--inode-file-handles=prefer: inodes are held by fds "
                  "outside --sandbox=namespace, so that Landlock can "
                  "confine the daemon; --inode-file-handles=mandatory "
                  "uses handles without it");
        opts->inode_file_handles = VFSD_INODE_FH_NEVER;
    }
}

/* Once the file system is set up: what the daemon will not need again */
static void confine(const VfsdOptions *opts, const VfsdFs *fs, int root_fd,
                    int proc_fd)
{
    g_autofree char *err = NULL;

    if (!vfsd_drop_capabilities(opts->caps_add, opts->caps_drop, false,
                                &err)) {
        die(err);
    }
    /*
     * Everything the daemon opens outside the shared directory it has
     * opened by now; nothing it serves may reach further.
     */
    if (!vfsd_landlock_restrict(opts->sandbox,
                                fs->use_handles ||
                                opts->migration_mode == VFSD_MIG_FILE_HANDLES,
                                root_fd, proc_fd, &err)) {
        die(err);
    }
    if (!vfsd_seccomp_install(opts->seccomp, vfsd_seccomp_needs(opts),
                              &err)) {
        die(err);
    }
}

int main(int argc, char **argv)
{
    VfsdOptions opts;
    VfsdFs fs;
    g_autofree char *err = NULL;
    int conn = -1, lfd, root_fd, proc_fd;
    mode_t caller_umask;
    bool ok, in_userns;

    if (!vfsd_options_parse(&opts, argc, argv, &err)) {
        fprintf(stderr, "virtiofsd: error: %s\n", err);
        /* A usage error, as the Rust virtiofsd reports it */
        return 2;
    }
    if (answer_and_exit(&opts, argv[0])) {
        return 0;
    }
    /* Before anything of ours is open: what is there was inherited */
    vfsd_close_inherited(opts.socket_path ? -1 : opts.fd);
    vfsd_log_init(opts.syslog, opts.log_level);
    in_userns = setup_id_mapping(&opts);

    /* Modes come from the guest, already masked by its umask */
    caller_umask = umask(0);
    if (!opts.rlimit_keep) {
        set_rlimit(opts.rlimit_nofile);
    }
    signal(SIGPIPE, SIG_IGN);
    /* setgroups is denied in our user namespace: we keep what we had */
    if (!in_userns && !vfsd_creds_init(&err)) {
        die(err);
    }

    check_shared_dir(opts.shared_dir);

    if (opts.socket_path) {
        lfd = listen_socket(opts.socket_path, opts.socket_gid, caller_umask);
    } else {
        lfd = inherited_socket(opts.fd, &conn);
    }

    /*
     * Before waiting for the front-end, so that a sandbox that cannot be
     * set up fails at startup rather than when QEMU connects.
     */
    if (!vfsd_sandbox_enter(opts.sandbox, opts.shared_dir, &proc_fd,
                            &err)) {
        die(err);
    }
    if (opts.socket_path) {
        vfsd_info("waiting for the front-end on %s", opts.socket_path);
    }
    if (lfd >= 0) {
        conn = accept_front_end(lfd);
    }
    root_fd = open_root(&opts, proc_fd);
    prefer_fds_without_namespace(&opts);
    /*
     * Before the capabilities go: the broker that opens file handles
     * takes CAP_DAC_READ_SEARCH with it, and this process keeps none.
     */
    if (!vfsd_fs_init(&fs, &opts, root_fd, proc_fd, &err)) {
        die(err);
    }
    if (!fs.use_handles) {
        warn_fd_bound();
    }
    confine(&opts, &fs, root_fd, proc_fd);

    vfsd_info("serving %s", opts.shared_dir);
    ok = vfsd_vhost_serve(&fs, conn);
    vfsd_fs_cleanup(&fs);
    vfsd_options_free(&opts);
    return ok ? 0 : 1;
}
