/*
 * Attempts, from the guest, to reach host files outside the virtio-fs share.
 *
 *   escape MNT OUTSIDE SECRET TOKEN DISK_DEV
 *
 * MNT is the mounted share.  The host prepared in it (harness/tests/
 * sandbox.sh): symlinks to /, to the directory OUTSIDE next to the share
 * and to OUTSIDE/secret.txt (absolute and relative), a FIFO "hostfifo"
 * with data in it, a listening socket "hostsock" and a block device node
 * "hostdisk" (the host's disk DISK_DEV, as major:minor).  SECRET is the
 * content of the files outside: no read done here may ever return it.
 * TOKEN names what this program tries to create elsewhere, so the host can
 * look for it afterwards.
 *
 * Each attempt prints "ok: ..." when it stayed inside (failed, or acted on
 * the guest's own files) and "ESCAPE: ..." otherwise; the exit status is
 * 1 when anything escaped.  Whatever is done on the host's side is
 * checked there, after the run.  Every call runs under an alarm: one that
 * blocks (a FIFO open the daemon passed on to the host, say) fails.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *mnt, *outside, *secret, *token;
static int escapes;
static char path_buf[4][4096];

static void ok(const char *fmt, ...)
{
    va_list ap;

    printf("ok: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void escape(const char *fmt, ...)
{
    va_list ap;

    printf("ESCAPE: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    escapes++;
}

/* MNT/NAME, in one of a few rotating buffers */
static const char *in_mnt(const char *name)
{
    static int next;
    char *p = path_buf[next++ % 4];

    snprintf(p, sizeof(path_buf[0]), "%s/%s", mnt, name);
    return p;
}

static void on_alarm(int sig)
{
    (void)sig;                  /* only there to interrupt a blocked call */
}

static void arm(void)
{
    alarm(5);
}

/* Whether the call returned in time: nothing left means the alarm rang */
static int disarm(void)
{
    return alarm(0) != 0;
}

/* Whether FD's content (first 64 KiB) holds the secret */
static int leaks(int fd)
{
    static char buf[65536 + 1];
    ssize_t n;

    arm();
    n = read(fd, buf, sizeof(buf) - 1);
    disarm();
    if (n <= 0) {
        return 0;
    }
    buf[n] = 0;
    return memmem(buf, n, secret, strlen(secret)) != NULL;
}

/* Open PATH with FLAGS; it may fail or open something of the guest's own */
static void try_open(const char *what, const char *path, int flags)
{
    int fd, timely;

    arm();
    fd = open(path, flags);
    timely = disarm();
    if (!timely) {
        escape("%s: open blocked (the host side of %s?)", what, path);
    } else if (fd < 0) {
        ok("%s: %s", what, strerror(errno));
    } else if (leaks(fd)) {
        escape("%s: read the host's secret", what);
    } else {
        ok("%s: opened, but not the host's file", what);
    }
    if (fd >= 0) {
        close(fd);
    }
}

static void dotdot(void)
{
    struct stat root, up, share;
    struct dirent *d;
    DIR *dir;
    int mfd;

    if (stat("/", &root) < 0 || stat(in_mnt(".."), &up) < 0 ||
        stat(mnt, &share) < 0) {
        escape("stat of / or the share's parent failed: %s", strerror(errno));
        return;
    }
    /* The guest's own VFS answers "..": it is the guest's directory */
    if (up.st_dev == share.st_dev) {
        escape("MNT/.. is on the share's file system");
    } else {
        ok("MNT/.. is the guest's own directory");
    }
    dir = opendir(in_mnt(".."));
    while (dir && (d = readdir(dir))) {
        if (!strcmp(d->d_name, "outside") ||
            !strcmp(d->d_name, "parent-secret.txt")) {
            escape("MNT/.. lists the host's %s", d->d_name);
        }
    }
    if (dir) {
        closedir(dir);
    }
    try_open("MNT/../parent-secret.txt", in_mnt("../parent-secret.txt"),
             O_RDONLY);
    try_open("MNT/../outside/secret.txt", in_mnt("../outside/secret.txt"),
             O_RDONLY);
    try_open("MNT/sub/../../outside/secret.txt",
             in_mnt("sub/../../outside/secret.txt"), O_RDONLY);
    mfd = open(mnt, O_PATH | O_DIRECTORY);
    if (mfd >= 0) {
        int fd = openat(mfd, "../outside/secret.txt", O_RDONLY);

        if (fd >= 0 && leaks(fd)) {
            escape("openat(share fd, ../outside/secret.txt) read the secret");
        } else {
            ok("openat(share fd, ../outside/secret.txt): %s",
               fd < 0 ? strerror(errno) : "not the host's file");
        }
        if (fd >= 0) {
            close(fd);
        }
        close(mfd);
    }
    (void)root;
}

/* Symlinks the host made, pointing out of the share */
static void host_symlinks(void)
{
    static const char *const links[] = {
        "to_root", "to_outside_abs", "to_outside_rel",
    };
    char target[4096], name[256];
    unsigned i;

    try_open("open through to_secret_abs", in_mnt("to_secret_abs"), O_RDONLY);
    try_open("open through to_secret_rel", in_mnt("to_secret_rel"), O_RDONLY);
    try_open("open O_RDWR through to_secret_abs", in_mnt("to_secret_abs"),
             O_RDWR);
    for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        ssize_t n = readlink(in_mnt(links[i]), target, sizeof(target) - 1);

        target[n < 0 ? 0 : n] = 0;
        printf("readlink %s: %s\n", links[i], n < 0 ? strerror(errno) : target);
        snprintf(name, sizeof(name), "%s/secret.txt", links[i]);
        try_open(name, in_mnt(name), O_RDONLY);
        /* Anything made here must not appear on the host: it checks */
        snprintf(name, sizeof(name), "%s/%s-dir", links[i], token);
        printf("mkdir %s: %s\n", name,
               mkdir(in_mnt(name), 0755) < 0 ? strerror(errno) : "made");
        snprintf(name, sizeof(name), "%s/%s-file", links[i], token);
        try_open(name, in_mnt(name), O_WRONLY | O_CREAT);
    }
}

/*
 * Symlinks the guest makes: the daemon stores them on the host as they
 * are.  Operations on the link itself reach the daemon with the link's
 * inode; a daemon that followed it would change the host's file outside.
 */
static void guest_symlinks(void)
{
    char abs[4096], val[64];
    struct timespec ts[2] = { { 12345, 0 }, { 12345, 0 } };
    const char *l;
    int fd;

    snprintf(abs, sizeof(abs), "%s/secret.txt", outside);
    if (symlink(abs, in_mnt("g_abs")) < 0 ||
        symlink("../outside/secret.txt", in_mnt("g_rel")) < 0 ||
        symlink("/", in_mnt("g_root")) < 0) {
        escape("guest symlinks could not be made: %s", strerror(errno));
        return;
    }
    for (int i = 0; i < 2; i++) {
        l = in_mnt(i ? "g_rel" : "g_abs");
        try_open(l, l, O_RDONLY);
        printf("lchown %s: %s\n", l,
               lchown(l, 4321, 4321) < 0 ? strerror(errno) : "done");
        printf("utimensat nofollow %s: %s\n", l,
               utimensat(AT_FDCWD, l, ts, AT_SYMLINK_NOFOLLOW) < 0 ?
               strerror(errno) : "done");
        printf("lsetxattr trusted %s: %s\n", l,
               lsetxattr(l, "trusted.vfsdax", "x", 1, 0) < 0 ?
               strerror(errno) : "done");
        printf("lsetxattr user %s: %s\n", l,
               lsetxattr(l, "user.vfsdax", "x", 1, 0) < 0 ?
               strerror(errno) : "done");
        /* The link's own xattr must not be the outside file's */
        memset(val, 0, sizeof(val));
        if (lgetxattr(l, "user.host", val, sizeof(val) - 1) > 0) {
            escape("lgetxattr %s read the outside file's user.host", l);
        }
        fd = open(l, O_PATH | O_NOFOLLOW);
        if (fd >= 0) {
            printf("fchownat empty path %s: %s\n", l,
                   fchownat(fd, "", 4321, 4321, AT_EMPTY_PATH) < 0 ?
                   strerror(errno) : "done");
            close(fd);
        }
        /* These follow the link in the guest: nothing there (or decoys) */
        printf("truncate %s: %s\n", l,
               truncate(l, 0) < 0 ? strerror(errno) : "done");
        printf("chmod %s: %s\n", l,
               chmod(l, 0777) < 0 ? strerror(errno) : "done");
    }
}

static void renames_and_links(void)
{
    char dst[4096];
    int fd = open(in_mnt("victim"), O_WRONLY | O_CREAT, 0644);

    if (fd < 0 || write(fd, "victim", 6) != 6) {
        escape("cannot make MNT/victim: %s", strerror(errno));
        return;
    }
    close(fd);
    snprintf(dst, sizeof(dst), "/tmp/%s-renamed", token);
    printf("rename to the guest's /tmp: %s\n",
           rename(in_mnt("victim"), dst) < 0 ? strerror(errno) : "done");
    printf("rename into to_outside_abs: %s\n",
           rename(in_mnt("victim"), in_mnt("to_outside_abs/renamed")) < 0 ?
           strerror(errno) : "done");
    printf("rename into to_outside_rel: %s\n",
           rename(in_mnt("victim"), in_mnt("to_outside_rel/renamed")) < 0 ?
           strerror(errno) : "done");
    printf("rename of to_outside_abs's content: %s\n",
           rename(in_mnt("to_outside_abs/secret.txt"), in_mnt("stolen")) < 0 ?
           strerror(errno) : "done");
    /* Hard links: to the link itself (fine), and following it */
    printf("link to_secret_abs (the link): %s\n",
           link(in_mnt("to_secret_abs"), in_mnt("hl_link")) < 0 ?
           strerror(errno) : "done");
    printf("linkat follow to_secret_abs: %s\n",
           linkat(AT_FDCWD, in_mnt("to_secret_abs"), AT_FDCWD,
                  in_mnt("hl_follow"), AT_SYMLINK_FOLLOW) < 0 ?
           strerror(errno) : "done");
    printf("linkat follow to_secret_rel: %s\n",
           linkat(AT_FDCWD, in_mnt("to_secret_rel"), AT_FDCWD,
                  in_mnt("hl_follow_rel"), AT_SYMLINK_FOLLOW) < 0 ?
           strerror(errno) : "done");
    try_open("hl_link", in_mnt("hl_link"), O_RDONLY);
    try_open("hl_follow", in_mnt("hl_follow"), O_RDONLY);
    try_open("hl_follow_rel", in_mnt("hl_follow_rel"), O_RDONLY);
    try_open("stolen", in_mnt("stolen"), O_RDONLY);
}

/*
 * FUSE file handles carry the node id (two words) and the generation.
 * Forged ones must not open anything that is not on the share, and
 * never the secret.
 */
static void handles(void)
{
    struct {
        struct file_handle fh;
        uint32_t words[8];
    } h;
    static const uint64_t ids[] = {
        0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 64, 1000, 1ull << 32, ~0ull,
    };
    struct stat share, st;
    int mfd, mount_id, fd, opened = 0, tried = 0;
    unsigned i, gen, type;

    mfd = open(mnt, O_RDONLY);
    if (mfd < 0 || fstat(mfd, &share) < 0) {
        escape("cannot open the share: %s", strerror(errno));
        return;
    }
    h.fh.handle_bytes = sizeof(h.words);
    if (name_to_handle_at(AT_FDCWD, in_mnt("to_secret_abs"), &h.fh,
                          &mount_id, 0) < 0) {
        printf("name_to_handle_at: %s\n", strerror(errno));
    } else {
        printf("name_to_handle_at: type 0x%x, %u bytes\n", h.fh.handle_type,
               h.fh.handle_bytes);
        fd = open_by_handle_at(mfd, &h.fh, O_PATH);
        printf("open_by_handle_at of a real handle: %s\n",
               fd < 0 ? strerror(errno) : "opened");
        if (fd >= 0) {
            close(fd);
        }
    }
    for (type = 0x81; type <= 0x82; type++) {
        for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
            for (gen = 0; gen < 3; gen++) {
                memset(&h, 0, sizeof(h));
                h.fh.handle_type = type;
                h.fh.handle_bytes = (type == 0x81 ? 3 : 6) * 4;
                h.words[0] = ids[i] >> 32;
                h.words[1] = ids[i];
                h.words[2] = gen;
                /* a parent for type 0x82: the root */
                h.words[4] = 1;
                tried++;
                arm();
                fd = open_by_handle_at(mfd, &h.fh, O_RDONLY);
                if (!disarm()) {
                    escape("open_by_handle_at blocked");
                }
                if (fd < 0) {
                    continue;
                }
                opened++;
                if (fstat(fd, &st) < 0 || st.st_dev != share.st_dev) {
                    escape("forged handle %llx/%u opened a file off the share",
                           (unsigned long long)ids[i], gen);
                } else if (S_ISREG(st.st_mode) && leaks(fd)) {
                    escape("forged handle %llx/%u read the secret",
                           (unsigned long long)ids[i], gen);
                }
                close(fd);
            }
        }
    }
    ok("%d forged handles: %d opened something, all on the share", tried,
       opened);
    close(mfd);
}

/*
 * Device nodes, FIFOs and sockets on the share are the guest's own special
 * files: opening them must never reach the host's device, pipe or socket.
 */
static void special_files(const char *disk)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    unsigned maj = 0, mnr = 0;
    int fd, s;

    sscanf(disk, "%u:%u", &maj, &mnr);
    printf("mknod char 1:1 (mem): %s\n",
           mknod(in_mnt("g_mem"), S_IFCHR | 0600, makedev(1, 1)) < 0 ?
           strerror(errno) : "made");
    printf("mknod block %u:%u (the host's disk): %s\n", maj, mnr,
           mknod(in_mnt("g_disk"), S_IFBLK | 0600, makedev(maj, mnr)) < 0 ?
           strerror(errno) : "made");
    try_open("g_disk", in_mnt("g_disk"), O_RDONLY);
    try_open("hostdisk", in_mnt("hostdisk"), O_RDONLY);

    /* The host holds hostfifo open both ways, with data in it */
    arm();
    fd = open(in_mnt("hostfifo"), O_WRONLY | O_NONBLOCK);
    if (!disarm()) {
        escape("hostfifo: open for writing blocked");
    } else if (fd >= 0) {
        escape("hostfifo: opened for writing without a reader in the guest: "
               "the host's reader?");
        close(fd);
    } else {
        ok("hostfifo: no reader in the guest (%s), the host's does not count",
           strerror(errno));
    }
    arm();
    fd = open(in_mnt("hostfifo"), O_RDONLY | O_NONBLOCK);
    if (!disarm() || fd < 0) {
        escape("hostfifo: open for reading: %s", fd < 0 ? strerror(errno) :
               "blocked");
    } else {
        char buf[64];
        ssize_t n = read(fd, buf, sizeof(buf));

        if (n > 0) {
            escape("hostfifo: read the host's pipe content");
        } else {
            ok("hostfifo: empty on this side");
        }
        close(fd);
    }
    arm();
    fd = open(in_mnt("hostfifo"), O_RDWR);
    if (!disarm() || fd < 0) {
        escape("hostfifo: O_RDWR open: %s", fd < 0 ? strerror(errno) :
               "blocked");
    } else {
        /* Must stay in the guest's pipe; the host checks its own */
        if (write(fd, "guest-was-here", 14) != 14) {
            escape("hostfifo: write: %s", strerror(errno));
        }
        close(fd);
    }

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", in_mnt("hostsock"));
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    arm();
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        disarm();
        escape("hostsock: connected to the host's listener");
    } else if (!disarm()) {
        escape("hostsock: connect blocked");
    } else {
        ok("hostsock: %s", strerror(errno));
    }
    close(s);
}

int main(int argc, char **argv)
{
    struct sigaction sa = { .sa_handler = on_alarm };

    if (argc != 6) {
        fprintf(stderr, "usage: escape MNT OUTSIDE SECRET TOKEN DISK_DEV\n");
        return 2;
    }
    mnt = argv[1], outside = argv[2], secret = argv[3], token = argv[4];
    /* No SA_RESTART: the alarm interrupts a blocked call */
    sigaction(SIGALRM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    dotdot();
    host_symlinks();
    guest_symlinks();
    renames_and_links();
    handles();
    special_files(argv[5]);
    printf("%d escapes\n", escapes);
    return escapes ? 1 : 0;
}
