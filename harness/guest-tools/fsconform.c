/*
 * A differential conformance run of a file system: a fixed sequence of
 * system calls made in a directory, each printed as one canonical line
 * (number, call, arguments, result and errno name), then a canonical dump
 * of the tree they left.  The same binary is run on a host directory and,
 * in a guest, on a virtio-fs mount of the same kind of directory: the
 * host's output is the oracle, any line that differs is a difference of
 * the file system under test.
 *
 *   fsconform DIR       (as root; DIR must be empty)
 *
 * Every call is made whatever the earlier ones gave, so that a call keeps
 * its number.  Nothing printed depends on where DIR is or on what cannot
 * match: paths are relative, inode numbers and fds are not shown, a time
 * within a day of the run shows as "recent".  The first part runs as
 * root, the second as uid 1000 with groups 1000 and 2000 (the tool
 * switches itself).  Errno names come from strerrorname_np(): the point
 * is the name, and both sides run the same static binary.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define USER_UID 1000
#define USER_GID 1000
#define OTHER_GID 2000          /* a supplementary group of the user */
#define STRANGER_GID 3000       /* a group the user is not in */

static int step;
static time_t t_start;

/* What a call's result means, for printing it */
enum kind {
    K_ZERO,                     /* 0 or -1 */
    K_FD,                       /* an fd, shown as "fd" */
    K_VAL,                      /* a count or an offset, shown */
};

static void report(enum kind k, long ret, int err, const char *fmt, ...)
{
    char desc[600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(desc, sizeof(desc), fmt, ap);
    va_end(ap);
    printf("%03d %s = ", ++step, desc);
    if (ret < 0) {
        const char *n = strerrorname_np(err);

        printf("-1 %s\n", n ? n : "E?");
    } else if (k == K_FD) {
        printf("fd\n");
    } else {
        printf("%ld\n", ret);
    }
    fflush(stdout);
}

#define CALL(k, expr, ...)                              \
    ({                                                  \
        long r_;                                        \
        int e_;                                         \
        errno = 0;                                      \
        r_ = (long)(expr);                              \
        e_ = errno;                                     \
        report(k, r_, e_, __VA_ARGS__);                 \
        errno = e_;                                     \
        r_;                                             \
    })

/* A long name: @len bytes of @c, recognisable by its length */
static char *longname(size_t len, char c)
{
    static char bufs[4][8200];
    static int i;
    char *p = bufs[i++ % 4];

    memset(p, c, len);
    p[len] = '\0';
    return p;
}

static void put(const char *path, const char *data, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

    if (fd < 0 || write(fd, data, strlen(data)) < 0) {
        printf("setup: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    close(fd);
}

static void xclose(int fd)
{
    if (fd >= 0) {
        close(fd);
    }
}

static const char *tstr(const struct timespec *ts)
{
    static char bufs[2][48];
    static int i;
    char *p = bufs[i++ % 2];

    if (ts->tv_sec > t_start - 86400 && ts->tv_sec < t_start + 86400) {
        return "recent";
    }
    snprintf(p, 48, "%lld.%09ld", (long long)ts->tv_sec, ts->tv_nsec);
    return p;
}

/* A stat: its result and what it found, on one line */
static void show_stat(const char *what, const char *path, int flags)
{
    struct stat st;
    int err;

    errno = 0;
    if (fstatat(AT_FDCWD, path, &st, flags) < 0) {
        err = errno;
        report(K_ZERO, -1, err, "stat%s %s", what, path);
        return;
    }
    printf("%03d stat%s %s = 0 mode %06o uid %u gid %u size %lld nlink %lu "
           "atime %s mtime %s\n", ++step, what, path, st.st_mode, st.st_uid,
           st.st_gid, S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size,
           (unsigned long)st.st_nlink, tstr(&st.st_atim), tstr(&st.st_mtim));
}

/* ---- the root part ------------------------------------------------------ */

static void open_cases(void)
{
    int fd;

    put("file", "0123456789", 0644);
    mkdir("dir", 0755);
    symlink("file", "lnk");
    symlink("dir", "dlnk");
    symlink("nowhere", "dangling");

    fd = CALL(K_FD, open("new", O_CREAT | O_EXCL | O_RDWR, 0640),
              "open new O_CREAT|O_EXCL|O_RDWR 0640");
    xclose(fd);
    CALL(K_FD, open("new", O_CREAT | O_EXCL | O_RDWR, 0640),
         "open new O_CREAT|O_EXCL again");
    fd = CALL(K_FD, open("new", O_CREAT | O_WRONLY, 0600),
              "open new O_CREAT existing");
    xclose(fd);
    CALL(K_FD, open("absent", O_RDONLY), "open absent O_RDONLY");
    CALL(K_FD, open("file", O_RDONLY | O_DIRECTORY), "open file O_DIRECTORY");
    CALL(K_FD, open("dir", O_WRONLY), "open dir O_WRONLY");
    CALL(K_FD, open("dir", O_RDWR | O_CREAT, 0644), "open dir O_RDWR|O_CREAT");
    CALL(K_FD, open("dir2", O_CREAT | O_DIRECTORY | O_RDONLY, 0755),
         "open dir2 O_CREAT|O_DIRECTORY");
    CALL(K_FD, open("lnk", O_RDONLY | O_NOFOLLOW), "open lnk O_NOFOLLOW");
    fd = CALL(K_FD, open("lnk", O_RDONLY | O_NOFOLLOW | O_PATH),
              "open lnk O_NOFOLLOW|O_PATH");
    xclose(fd);
    CALL(K_FD, open("dangling", O_RDONLY), "open dangling");
    fd = CALL(K_FD, open("dangling", O_CREAT | O_WRONLY, 0644),
              "open dangling O_CREAT (creates the target)");
    xclose(fd);
    CALL(K_FD, open("dangling2", O_CREAT | O_EXCL | O_WRONLY, 0644),
         "open dangling2 O_CREAT|O_EXCL") >= 0 ? unlink("dangling2") : 0;
    symlink("nowhere2", "dangling3");
    CALL(K_FD, open("dangling3", O_CREAT | O_EXCL | O_WRONLY, 0644),
         "open dangling3 O_CREAT|O_EXCL");
    CALL(K_FD, open("newdir/", O_CREAT | O_WRONLY, 0644),
         "open newdir/ O_CREAT");
    CALL(K_FD, open("file/x", O_RDONLY), "open file/x");
    CALL(K_FD, open("file/", O_RDONLY), "open file/");
    fd = CALL(K_FD, open("dlnk/", O_RDONLY), "open dlnk/");
    xclose(fd);
    fd = CALL(K_FD, open("file", O_RDONLY | O_TRUNC),
              "open file O_RDONLY|O_TRUNC");
    xclose(fd);
    show_stat("", "file", 0);
    put("file", "0123456789", 0644);
    fd = CALL(K_FD, open("file", O_WRONLY | O_APPEND), "open file O_APPEND");
    CALL(K_VAL, write(fd, "ab", 2), "write O_APPEND 2");
    CALL(K_VAL, pwrite(fd, "cd", 2, 0), "pwrite O_APPEND at 0");
    xclose(fd);
    show_stat("", "file", 0);
    fd = CALL(K_FD, open("dir", O_TMPFILE | O_RDWR, 0600),
              "open dir O_TMPFILE|O_RDWR");
    {
        char path[64];

        CALL(K_VAL, write(fd, "tmp", 3), "write tmpfile");
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        CALL(K_ZERO, linkat(AT_FDCWD, path, AT_FDCWD, "dir/fromtmp",
                            AT_SYMLINK_FOLLOW), "linkat tmpfile dir/fromtmp");
        xclose(fd);
    }
    CALL(K_FD, open("dir", O_TMPFILE | O_RDONLY, 0600),
         "open dir O_TMPFILE|O_RDONLY");
    fd = CALL(K_FD, creat("suid", 06755), "creat suid 06755");
    xclose(fd);
    show_stat("", "suid", 0);

    /* openat2 */
    {
        struct open_how how = { .flags = O_RDONLY,
                                .resolve = RESOLVE_NO_SYMLINKS };

        CALL(K_FD, syscall(SYS_openat2, AT_FDCWD, "lnk", &how, sizeof(how)),
             "openat2 lnk RESOLVE_NO_SYMLINKS");
        how.resolve = RESOLVE_BENEATH;
        CALL(K_FD, syscall(SYS_openat2, AT_FDCWD, "../x", &how, sizeof(how)),
             "openat2 ../x RESOLVE_BENEATH");
        how.flags = O_RDONLY | O_CREAT;
        how.mode = 0644;
        how.resolve = 0;
        fd = CALL(K_FD, syscall(SYS_openat2, AT_FDCWD, "how", &how,
                                sizeof(how)), "openat2 how O_CREAT 0644");
        xclose(fd);
        how.mode = 010644;
        CALL(K_FD, syscall(SYS_openat2, AT_FDCWD, "how", &how, sizeof(how)),
             "openat2 how O_CREAT bad mode");
        how.flags = O_RDONLY;
        how.mode = 0;
        how.resolve = RESOLVE_NO_XDEV;
        fd = CALL(K_FD, syscall(SYS_openat2, AT_FDCWD, "dir", &how,
                                sizeof(how)), "openat2 dir RESOLVE_NO_XDEV");
        xclose(fd);
    }
}

static void node_cases(void)
{
    static const struct {
        const char *name;
        mode_t mode;
        dev_t dev;
    } nodes[] = {
        { "n-fifo", S_IFIFO | 0644, 0 },
        { "n-sock", S_IFSOCK | 0644, 0 },
        { "n-chr", S_IFCHR | 0644, 0x0103 },
        { "n-blk", S_IFBLK | 0644, 0x0700 },
        { "n-reg", S_IFREG | 0644, 0 },
        { "n-zero", 0644, 0 },
        { "n-dir", S_IFDIR | 0755, 0 },
        { "n-lnk", S_IFLNK | 0777, 0 },
        { "n-bad", 0030000 | 0644, 0 },
        { "n-fifo", S_IFIFO | 0644, 0 },
    };
    unsigned int i;

    for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        CALL(K_ZERO, mknod(nodes[i].name, nodes[i].mode,
                           makedev(nodes[i].dev >> 8, nodes[i].dev & 0xff)),
             "mknod %s 0%o", nodes[i].name, nodes[i].mode);
    }
    CALL(K_ZERO, mkfifo("fifo", 0600), "mkfifo fifo");
    CALL(K_ZERO, mknod("absent/x", S_IFIFO | 0600, 0), "mknod absent/x");

    CALL(K_ZERO, mkdir("d", 0755), "mkdir d");
    CALL(K_ZERO, mkdir("d", 0755), "mkdir d again");
    CALL(K_ZERO, mkdir("d/e/", 0700), "mkdir d/e/");
    CALL(K_ZERO, mkdir("absent/x", 0755), "mkdir absent/x");
    CALL(K_ZERO, mkdir("file/x", 0755), "mkdir file/x");
    CALL(K_ZERO, mkdir("dangling", 0755), "mkdir over dangling symlink");
    CALL(K_ZERO, mkdir("sdir", 07777), "mkdir sdir 07777");
    put("d/e/f", "x", 0644);
    CALL(K_ZERO, rmdir("d"), "rmdir d (not empty)");
    CALL(K_ZERO, rmdir("file"), "rmdir file");
    CALL(K_ZERO, rmdir("absent"), "rmdir absent");
    CALL(K_ZERO, rmdir("d/."), "rmdir d/.");
    CALL(K_ZERO, rmdir("d/e/.."), "rmdir d/e/..");
    CALL(K_ZERO, rmdir("dlnk"), "rmdir dlnk (symlink to dir)");
    CALL(K_ZERO, unlink("d"), "unlink d (dir)");
    CALL(K_ZERO, unlink("absent"), "unlink absent");
    CALL(K_ZERO, unlink("file/"), "unlink file/");
    CALL(K_ZERO, unlinkat(AT_FDCWD, "file", AT_REMOVEDIR),
         "unlinkat file AT_REMOVEDIR");
    CALL(K_ZERO, mkdir("empty", 0755), "mkdir empty");
    CALL(K_ZERO, unlinkat(AT_FDCWD, "empty", AT_REMOVEDIR),
         "unlinkat empty AT_REMOVEDIR");

    /* link */
    CALL(K_ZERO, link("file", "hard"), "link file hard");
    CALL(K_ZERO, link("file", "hard"), "link file hard again");
    CALL(K_ZERO, link("dir", "dirhard"), "link dir dirhard");
    CALL(K_ZERO, link("absent", "x"), "link absent x");
    CALL(K_ZERO, link("lnk", "lnkhard"), "link lnk lnkhard (the symlink)");
    CALL(K_ZERO, linkat(AT_FDCWD, "lnk", AT_FDCWD, "lnkfollow",
                        AT_SYMLINK_FOLLOW), "linkat lnk AT_SYMLINK_FOLLOW");
    CALL(K_ZERO, link("file", "absent/x"), "link file absent/x");
    CALL(K_ZERO, link("file", "/proc/xdev"), "link file /proc/xdev");
    CALL(K_ZERO, link("n-fifo", "fifohard"), "link n-fifo fifohard");
    show_stat("", "file", 0);

    /* symlink */
    CALL(K_ZERO, symlink("", "empty-target"), "symlink '' empty-target");
    CALL(K_ZERO, symlink("x", "file"), "symlink x file (exists)");
    CALL(K_ZERO, symlink(longname(4095, 't'), "longtarget"),
         "symlink <4095 bytes> longtarget");
    CALL(K_ZERO, symlink(longname(4096, 't'), "longtarget2"),
         "symlink <4096 bytes> longtarget2");
    CALL(K_ZERO, symlink("loop2", "loop1"), "symlink loop2 loop1");
    CALL(K_ZERO, symlink("loop1", "loop2"), "symlink loop1 loop2");
    CALL(K_FD, open("loop1", O_RDONLY), "open loop1");
    CALL(K_ZERO, stat("loop1", &(struct stat){ 0 }), "stat loop1");
    {
        char a[16], b[16];
        int i;

        /* Linux follows 40 links in a path, not 41 */
        for (i = 1; i <= 41; i++) {
            snprintf(a, sizeof(a), "c%d", i);
            snprintf(b, sizeof(b), "c%d", i - 1);
            symlink(i == 1 ? "file" : b, a);
        }
        CALL(K_ZERO, access("c40", F_OK), "access c40 (40 links)");
        CALL(K_ZERO, access("c41", F_OK), "access c41 (41 links)");
    }
    {
        char buf[64];
        ssize_t n = readlink("dangling3", buf, sizeof(buf));

        if (n < 0) {
            report(K_VAL, n, errno, "readlink dangling3");
        } else {
            printf("%03d readlink dangling3 = %zd \"%.*s\"\n", ++step, n,
                   (int)n, buf);
        }
        CALL(K_VAL, readlink("dangling3", buf, 3), "readlink dangling3 3");
        CALL(K_VAL, readlink("file", buf, sizeof(buf)), "readlink file");
        CALL(K_VAL, readlink("longtarget", longname(8000, 'b'), 8000),
             "readlink longtarget");
    }
    show_stat(" nofollow", "dangling3", AT_SYMLINK_NOFOLLOW);
    show_stat("", "dangling3", 0);
}

static void rename_cases(void)
{
    mkdir("r", 0755);
    put("r/a", "a", 0644);
    put("r/b", "b", 0644);
    mkdir("r/d1", 0755);
    mkdir("r/d2", 0755);
    mkdir("r/full", 0755);
    put("r/full/x", "x", 0644);
    mkdir("r/d1/sub", 0755);

    CALL(K_ZERO, rename("r/a", "r/a2"), "rename r/a r/a2");
    CALL(K_ZERO, rename("r/a2", "r/b"), "rename r/a2 r/b (replaces)");
    CALL(K_ZERO, rename("r/absent", "r/c"), "rename r/absent r/c");
    CALL(K_ZERO, rename("r/d2", "r/full"), "rename r/d2 r/full (not empty)");
    CALL(K_ZERO, rename("r/b", "r/d2"), "rename file over dir");
    CALL(K_ZERO, rename("r/d2", "r/b"), "rename dir over file");
    CALL(K_ZERO, rename("r/d1", "r/d1/sub/in"), "rename dir into itself");
    CALL(K_ZERO, rename("r/d1", "r/d2"), "rename dir over empty dir");
    CALL(K_ZERO, rename("r/b", "r/b"), "rename r/b r/b");
    CALL(K_ZERO, rename("r/.", "r/x"), "rename r/. r/x");
    CALL(K_ZERO, rename("r/d2", "r/d2/."), "rename r/d2 r/d2/.");
    CALL(K_ZERO, rename("r/b/", "r/c"), "rename r/b/ r/c");
    CALL(K_ZERO, rename("r/b", "/proc/xdev"), "rename r/b /proc/xdev");
    put("r/c", "c", 0644);
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/b", AT_FDCWD, "r/c",
                           RENAME_NOREPLACE), "renameat2 r/b r/c NOREPLACE");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/b", AT_FDCWD, "r/nc",
                           RENAME_NOREPLACE), "renameat2 r/b r/nc NOREPLACE");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/nc", AT_FDCWD, "r/d2",
                           RENAME_EXCHANGE), "renameat2 file<->dir EXCHANGE");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/nc", AT_FDCWD, "r/absent",
                           RENAME_EXCHANGE), "renameat2 EXCHANGE absent");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/nc", AT_FDCWD, "r/c",
                           RENAME_EXCHANGE | RENAME_NOREPLACE),
         "renameat2 EXCHANGE|NOREPLACE");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/c", AT_FDCWD, "r/w",
                           RENAME_WHITEOUT), "renameat2 r/c r/w WHITEOUT");
    CALL(K_ZERO, renameat2(AT_FDCWD, "r/w", AT_FDCWD, "r/v", 1 << 7),
         "renameat2 unknown flag");
    link("r/w", "r/w2");
    CALL(K_ZERO, rename("r/w", "r/w2"), "rename onto a hard link of itself");
}

static void truncate_cases(void)
{
    int fd;

    put("t", "0123456789", 0644);
    CALL(K_ZERO, truncate("t", -1), "truncate t -1");
    CALL(K_ZERO, truncate("t", 1LL << 62), "truncate t 2^62");
    CALL(K_ZERO, truncate("t", (1LL << 44) - 4096), "truncate t 16T-4K");
    CALL(K_ZERO, truncate("t", 100000), "truncate t 100000");
    CALL(K_ZERO, truncate("t", 5), "truncate t 5");
    CALL(K_ZERO, truncate("dir", 0), "truncate dir");
    CALL(K_ZERO, truncate("n-fifo", 0), "truncate n-fifo");
    CALL(K_ZERO, truncate("lnk", 3), "truncate lnk (follows)");
    CALL(K_ZERO, truncate("absent", 0), "truncate absent");
    fd = open("t", O_RDONLY);
    CALL(K_ZERO, ftruncate(fd, 0), "ftruncate O_RDONLY");
    close(fd);
    fd = open("dir", O_RDONLY);
    CALL(K_ZERO, ftruncate(fd, 0), "ftruncate dir");
    close(fd);
    fd = open("t", O_RDWR);
    CALL(K_ZERO, ftruncate(fd, -5), "ftruncate -5");
    CALL(K_ZERO, ftruncate(fd, 7), "ftruncate 7");
    CALL(K_VAL, pwrite(fd, "x", 1, (1LL << 44)), "pwrite at 16T");
    CALL(K_VAL, pwrite(fd, "x", 1, INT64_MAX - 1), "pwrite at INT64_MAX-1");
    CALL(K_VAL, pwrite(fd, "xy", 2, INT64_MAX - 1), "pwrite 2 at INT64_MAX-1");
    CALL(K_VAL, pwrite(fd, "x", 1, -1), "pwrite at -1");
    CALL(K_VAL, pread(fd, longname(16, 'r'), 16, INT64_MAX - 1),
         "pread at INT64_MAX-1");
    close(fd);
    show_stat("", "t", 0);
}

static void attr_cases(void)
{
    put("m", "m", 0644);
    CALL(K_ZERO, chmod("m", 06755), "chmod m 06755");
    show_stat("", "m", 0);
    CALL(K_ZERO, chown("m", USER_UID, USER_GID), "chown m 1000:1000");
    show_stat("", "m", 0);
    CALL(K_ZERO, chmod("m", 02745), "chmod m 02745 (no group x)");
    CALL(K_ZERO, chown("m", -1, OTHER_GID), "chown m -1:2000");
    show_stat("", "m", 0);
    CALL(K_ZERO, chown("m", -1, -1), "chown m -1:-1");
    CALL(K_ZERO, chmod("dir", 01777), "chmod dir 01777");
    CALL(K_ZERO, chmod("lnk", 0600), "chmod lnk (follows to file)");
    CALL(K_ZERO, fchmodat(AT_FDCWD, "lnk", 0600, AT_SYMLINK_NOFOLLOW),
         "fchmodat lnk AT_SYMLINK_NOFOLLOW");
    CALL(K_ZERO, lchown("lnk", USER_UID, OTHER_GID), "lchown lnk");
    CALL(K_ZERO, chmod("absent", 0600), "chmod absent");
    CALL(K_ZERO, chmod("n-fifo", 0666), "chmod n-fifo");
    CALL(K_ZERO, chown("n-chr", 5, 6), "chown n-chr");
    show_stat(" nofollow", "lnk", AT_SYMLINK_NOFOLLOW);

    /* utimensat */
    {
        struct timespec ts[2] = { { 1000000000, 123456789 },
                                  { 1100000000, 987654321 } };

        put("u", "u", 0644);
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", ts, 0), "utimensat u exact");
        show_stat("", "u", 0);
        ts[0].tv_nsec = UTIME_OMIT;
        ts[1] = (struct timespec){ 1LL << 40, 5 };
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", ts, 0),
             "utimensat u OMIT, far future");
        show_stat("", "u", 0);
        ts[0] = (struct timespec){ -1, 0 };
        ts[1].tv_nsec = UTIME_OMIT;
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", ts, 0),
             "utimensat u before 1970, OMIT");
        show_stat("", "u", 0);
        ts[0].tv_nsec = UTIME_NOW;
        ts[1].tv_nsec = UTIME_NOW;
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", ts, 0), "utimensat u NOW NOW");
        show_stat("", "u", 0);
        ts[0] = (struct timespec){ 5, 1000000000 };
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", ts, 0),
             "utimensat u nsec 1e9");
        ts[0] = (struct timespec){ 1200000000, 1 };
        ts[1] = (struct timespec){ 1200000001, 2 };
        CALL(K_ZERO, utimensat(AT_FDCWD, "lnk", ts, AT_SYMLINK_NOFOLLOW),
             "utimensat lnk AT_SYMLINK_NOFOLLOW");
        show_stat(" nofollow", "lnk", AT_SYMLINK_NOFOLLOW);
        /*
         * Following a link sets its atime on the host, which a guest that
         * caches the link's text cannot see: no link is followed after
         * its times were set.
         */
        CALL(K_ZERO, utimensat(AT_FDCWD, "dangling3", ts, 0),
             "utimensat dangling3 (follows)");
        CALL(K_ZERO, utimensat(AT_FDCWD, "dangling3", ts,
                               AT_SYMLINK_NOFOLLOW),
             "utimensat dangling3 AT_SYMLINK_NOFOLLOW");
        show_stat(" nofollow", "dangling3", AT_SYMLINK_NOFOLLOW);
        CALL(K_ZERO, utimensat(AT_FDCWD, "n-fifo", ts, 0),
             "utimensat n-fifo");
        show_stat("", "n-fifo", 0);
        CALL(K_ZERO, utimensat(AT_FDCWD, "dir", ts, 0), "utimensat dir");
        show_stat("", "dir", 0);
        CALL(K_ZERO, utimensat(AT_FDCWD, "u", NULL, 0), "utimensat u NULL");
        show_stat("", "u", 0);
    }
}

/* listxattr: the names in the order the file system keeps them */
static void show_list(const char *path)
{
    char buf[512], names[512] = "";
    ssize_t n = listxattr(path, buf, sizeof(buf)), i;
    int err = errno;

    for (i = 0; i < n; i += strlen(buf + i) + 1) {
        strncat(names, " ", sizeof(names) - strlen(names) - 1);
        strncat(names, buf + i, sizeof(names) - strlen(names) - 1);
    }
    if (n < 0) {
        report(K_VAL, n, err, "listxattr %s", path);
    } else {
        printf("%03d listxattr %s = %zd%s\n", ++step, path, n, names);
    }
}

static void xattr_cases(void)
{
    char buf[256];
    char *big = malloc(65537);

    memset(big, 'v', 65537);

    put("x", "x", 0644);
    CALL(K_ZERO, setxattr("x", "user.a", "value", 5, 0), "setxattr user.a");
    CALL(K_VAL, getxattr("x", "user.a", buf, sizeof(buf)), "getxattr user.a");
    CALL(K_VAL, getxattr("x", "user.a", NULL, 0), "getxattr user.a size 0");
    CALL(K_VAL, getxattr("x", "user.a", buf, 2), "getxattr user.a size 2");
    CALL(K_VAL, getxattr("x", "user.none", buf, sizeof(buf)),
         "getxattr user.none");
    CALL(K_ZERO, setxattr("x", "user.a", "v", 1, XATTR_CREATE),
         "setxattr user.a XATTR_CREATE");
    CALL(K_ZERO, setxattr("x", "user.b", "v", 1, XATTR_REPLACE),
         "setxattr user.b XATTR_REPLACE");
    CALL(K_ZERO, setxattr("x", "user.b", "", 0, 0), "setxattr user.b empty");
    CALL(K_ZERO, setxattr("x", "user.c", "v", 1, 4), "setxattr flags 4");
    CALL(K_ZERO, setxattr("x", longname(256, 'n'), "v", 1, 0),
         "setxattr name of 256 bytes");
    CALL(K_ZERO, setxattr("x", "", "v", 1, 0), "setxattr empty name");
    CALL(K_ZERO, setxattr("x", "user.big", big, 65537, 0),
         "setxattr 65537 bytes");
    CALL(K_ZERO, setxattr("x", "user.big", big, 65536, 0),
         "setxattr 65536 bytes");
    CALL(K_ZERO, setxattr("x", "user.mid", big, 4000, 0),
         "setxattr 4000 bytes");
    CALL(K_ZERO, setxattr("x", "foo.bar", "v", 1, 0),
         "setxattr unknown namespace");
    CALL(K_ZERO, setxattr("x", "trusted.t", "v", 1, 0), "setxattr trusted.t");
    CALL(K_ZERO, setxattr("x", "security.s", "v", 1, 0),
         "setxattr security.s");
    CALL(K_ZERO, setxattr("x", "system.nothing", "v", 1, 0),
         "setxattr system.nothing");
    CALL(K_VAL, listxattr("x", buf, 3), "listxattr size 3");
    CALL(K_VAL, listxattr("x", NULL, 0), "listxattr size 0");
    show_list("x");
    CALL(K_ZERO, removexattr("x", "user.none"), "removexattr user.none");
    CALL(K_ZERO, removexattr("x", "user.b"), "removexattr user.b");
    CALL(K_ZERO, lsetxattr("lnk", "user.l", "v", 1, 0), "lsetxattr lnk user.l");
    CALL(K_ZERO, lsetxattr("lnk", "trusted.l", "v", 1, 0),
         "lsetxattr lnk trusted.l");
    CALL(K_VAL, lgetxattr("lnk", "trusted.l", buf, sizeof(buf)),
         "lgetxattr lnk trusted.l");
    CALL(K_ZERO, setxattr("n-fifo", "user.f", "v", 1, 0),
         "setxattr n-fifo user.f");
    CALL(K_ZERO, setxattr("dir", "user.d", "v", 1, 0), "setxattr dir user.d");
    CALL(K_VAL, getxattr("absent", "user.a", buf, sizeof(buf)),
         "getxattr absent");
    free(big);
}

static void data_cases(void)
{
    int fd, fd2, rfd;

    fd = open("s", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CALL(K_ZERO, fallocate(fd, 0, 0, 8192), "fallocate 0 8192");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 8192),
         "fallocate KEEP_SIZE 8192+8192");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           0, 4096), "fallocate PUNCH_HOLE 0+4096");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096),
         "fallocate PUNCH_HOLE without KEEP_SIZE");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_ZERO_RANGE, 4096, 100),
         "fallocate ZERO_RANGE");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096),
         "fallocate COLLAPSE_RANGE");
    CALL(K_ZERO, fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, 4096),
         "fallocate INSERT_RANGE");
    CALL(K_ZERO, fallocate(fd, 0x1000, 0, 4096), "fallocate unknown mode");
    CALL(K_ZERO, fallocate(fd, 0, -1, 4096), "fallocate offset -1");
    CALL(K_ZERO, fallocate(fd, 0, 0, 0), "fallocate len 0");
    CALL(K_ZERO, fallocate(fd, 0, INT64_MAX - 10, 100),
         "fallocate past INT64_MAX");
    CALL(K_ZERO, fallocate(fd, 0, 1LL << 50, 4096), "fallocate at 2^50");
    CALL(K_VAL, pwrite(fd, "data", 4, 1 << 20), "pwrite 4 at 1M");
    CALL(K_VAL, lseek(fd, 0, SEEK_DATA), "lseek 0 SEEK_DATA");
    CALL(K_VAL, lseek(fd, 0, SEEK_HOLE), "lseek 0 SEEK_HOLE");
    CALL(K_VAL, lseek(fd, 20000, SEEK_DATA), "lseek 20000 SEEK_DATA");
    CALL(K_VAL, lseek(fd, (1 << 20) + 4, SEEK_DATA), "lseek EOF SEEK_DATA");
    CALL(K_VAL, lseek(fd, (1 << 20) + 4, SEEK_HOLE), "lseek EOF SEEK_HOLE");
    CALL(K_VAL, lseek(fd, 1 << 21, SEEK_HOLE), "lseek past EOF SEEK_HOLE");
    CALL(K_VAL, lseek(fd, -1, SEEK_DATA), "lseek -1 SEEK_DATA");
    CALL(K_VAL, lseek(fd, 0, 9), "lseek whence 9");
    close(fd);
    show_stat("", "s", 0);

    put("src", "0123456789abcdef", 0644);
    fd = open("src", O_RDWR);
    fd2 = open("dst", O_RDWR | O_CREAT | O_TRUNC, 0644);
    rfd = open("src", O_RDONLY);
    {
        loff_t in = 4, out = 0;

        CALL(K_VAL, copy_file_range(fd, &in, fd2, &out, 8, 0),
             "copy_file_range 8 from 4");
        in = 100;
        CALL(K_VAL, copy_file_range(fd, &in, fd2, &out, 8, 0),
             "copy_file_range past EOF");
        in = 0;
        out = 2;
        CALL(K_VAL, copy_file_range(fd, &in, fd, &out, 8, 0),
             "copy_file_range overlapping in one file");
        in = 0;
        out = 20;
        CALL(K_VAL, copy_file_range(fd, &in, fd, &out, 4, 0),
             "copy_file_range within one file");
        CALL(K_VAL, copy_file_range(fd, &in, fd2, &out, 8, 1),
             "copy_file_range flags 1");
        CALL(K_VAL, copy_file_range(fd, &in, rfd, &out, 8, 0),
             "copy_file_range to O_RDONLY");
        in = -1;
        CALL(K_VAL, copy_file_range(fd, &in, fd2, &out, 8, 0),
             "copy_file_range from -1");
    }
    close(fd);
    close(fd2);
    close(rfd);
    show_stat("", "src", 0);
    show_stat("", "dst", 0);
}

static void name_cases(void)
{
    static const size_t lens[] = { 255, 256, 1024, 1025, 4095, 4096 };
    unsigned int i;
    int fd;

    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char *n = longname(lens[i], 'a' + i);
        size_t l = lens[i];

        fd = CALL(K_FD, open(n, O_CREAT | O_RDWR, 0644), "open name%zu O_CREAT",
                  l);
        xclose(fd);
        CALL(K_ZERO, access(n, F_OK), "access name%zu", l);
        CALL(K_ZERO, chmod(n, 0600), "chmod name%zu", l);
        CALL(K_ZERO, chown(n, 1, 1), "chown name%zu", l);
        CALL(K_ZERO, lchown(n, 1, 1), "lchown name%zu", l);
        CALL(K_ZERO, truncate(n, 1), "truncate name%zu", l);
        CALL(K_ZERO, utimensat(AT_FDCWD, n, NULL, 0), "utimensat name%zu", l);
        CALL(K_ZERO, link(n, "nl"), "link name%zu nl", l);
        CALL(K_ZERO, link("file", n), "link file name%zu", l);
        CALL(K_ZERO, rename(n, "nr"), "rename name%zu nr", l);
        CALL(K_ZERO, rename("nr", n), "rename nr name%zu", l);
        CALL(K_ZERO, symlink("file", n), "symlink file name%zu", l);
        CALL(K_ZERO, mkfifo(n, 0644), "mkfifo name%zu", l);
        CALL(K_ZERO, mknod(n, S_IFREG | 0644, 0), "mknod name%zu", l);
        CALL(K_ZERO, setxattr(n, "user.n", "v", 1, 0), "setxattr name%zu", l);
        CALL(K_ZERO, unlink(n), "unlink name%zu", l);
        CALL(K_ZERO, mkdir(n, 0755), "mkdir name%zu", l);
        CALL(K_ZERO, rmdir(n), "rmdir name%zu", l);
        unlink("nl");
        unlink("nr");
    }

    /* Paths of 4095 and 4096 bytes: 16 directories of 250 bytes deep */
    {
        char path[PATH_MAX + 2];
        size_t len = 0;
        int depth;

        for (depth = 0; depth < 16; depth++) {
            memset(path + len, 'p', 250);
            len += 250;
            path[len] = '\0';
            if (mkdir(path, 0755) < 0) {
                printf("setup: mkdir at depth %d: %s\n", depth,
                       strerror(errno));
                exit(2);
            }
            path[len++] = '/';
        }
        memset(path + len, 'q', PATH_MAX - 1 - len);
        path[PATH_MAX - 1] = '\0';
        fd = CALL(K_FD, open(path, O_CREAT | O_RDWR, 0644),
                  "open path of 4095 bytes O_CREAT");
        xclose(fd);
        CALL(K_ZERO, mkdir(path, 0755), "mkdir path of 4095 bytes");
        CALL(K_ZERO, access(path, F_OK), "access path of 4095 bytes");
        path[PATH_MAX - 1] = 'q';
        path[PATH_MAX] = '\0';
        CALL(K_FD, open(path, O_CREAT | O_RDWR, 0644),
             "open path of 4096 bytes O_CREAT");
        CALL(K_ZERO, mkdir(path, 0755), "mkdir path of 4096 bytes");
        CALL(K_ZERO, access(path, F_OK), "access path of 4096 bytes");
    }
}

/* ---- the unprivileged part ---------------------------------------------- */

static void prepare_user_tree(void)
{
    mode_t old = umask(0);

    mkdir("usr", 0755);
    mkdir("usr/grp", 0775);
    chown("usr/grp", 0, OTHER_GID);
    mkdir("usr/sgid", 02775);
    chown("usr/sgid", 0, OTHER_GID);
    chmod("usr/sgid", 02775);
    mkdir("usr/sticky", 01777);
    chmod("usr/sticky", 01777);
    put("usr/sticky/roots", "r", 0666);
    mkdir("usr/noexec", 0766);
    mkdir("usr/nowrite", 0555);
    put("usr/nowrite/f", "f", 0666);
    mkdir("usr/mine", 0755);
    chown("usr/mine", USER_UID, USER_GID);
    put("usr/rootfile", "r", 0644);
    put("usr/rw", "rw", 0666);
    put("usr/suid", "s", 06777);
    chmod("usr/suid", 06777);
    put("usr/mysuid", "s", 06775);
    chown("usr/mysuid", USER_UID, USER_GID);
    chmod("usr/mysuid", 06775);
    put("usr/stranger", "s", 0644);
    chown("usr/stranger", USER_UID, STRANGER_GID);
    put("usr/grpfile", "g", 0664);
    chown("usr/grpfile", 0, OTHER_GID);
    put("usr/noperm", "n", 0000);
    put("usr/xattr", "x", 0644);
    setxattr("usr/xattr", "trusted.t", "v", 1, 0);
    setxattr("usr/xattr", "user.u", "v", 1, 0);
    umask(old);
}

static void user_cases(void)
{
    struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
    char buf[64];
    int fd;

    CALL(K_ZERO, mkdir("usr/x", 0755), "user: mkdir usr/x (root's dir)");
    fd = CALL(K_FD, open("usr/grp/f", O_CREAT | O_RDWR, 0664),
              "user: create in a dir of a supplementary group");
    xclose(fd);
    CALL(K_ZERO, mkdir("usr/grp/d", 0775),
         "user: mkdir in a dir of a supplementary group");
    CALL(K_ZERO, mknod("usr/grp/p", S_IFIFO | 0644, 0),
         "user: mknod in a dir of a supplementary group");
    CALL(K_ZERO, symlink("f", "usr/grp/l"),
         "user: symlink in a dir of a supplementary group");
    fd = CALL(K_FD, open("usr/sgid/f", O_CREAT | O_RDWR, 02775),
              "user: create 02775 in a setgid dir");
    xclose(fd);
    CALL(K_ZERO, mkdir("usr/sgid/d", 0775), "user: mkdir in a setgid dir");
    fd = CALL(K_FD, open("usr/mine/f", O_CREAT | O_RDWR, 02755),
              "user: create 02755 in own dir");
    xclose(fd);
    CALL(K_ZERO, mkdir("usr/mine/sg", 02755), "user: mkdir 02755 in own dir");
    CALL(K_ZERO, unlink("usr/sticky/roots"),
         "user: unlink root's file, sticky");
    CALL(K_ZERO, rename("usr/sticky/roots", "usr/sticky/x"),
         "user: rename root's file, sticky");
    fd = CALL(K_FD, open("usr/sticky/mine", O_CREAT | O_RDWR, 0644),
              "user: create in sticky dir");
    xclose(fd);
    CALL(K_ZERO, rename("usr/sticky/mine", "usr/sticky/mine2"),
         "user: rename own file, sticky");
    CALL(K_ZERO, rename("usr/sticky/mine2", "usr/sticky/roots"),
         "user: rename own file over root's, sticky");
    CALL(K_ZERO, unlink("usr/sticky/mine2"), "user: unlink own file, sticky");
    CALL(K_FD, open("usr/noexec/f", O_CREAT | O_RDWR, 0644),
         "user: create in a dir without x");
    CALL(K_ZERO, unlink("usr/nowrite/f"), "user: unlink in a dir without w");
    CALL(K_ZERO, rename("usr/nowrite/f", "usr/mine/f2"),
         "user: rename out of a dir without w");
    CALL(K_ZERO, link("usr/nowrite/f", "usr/mine/f3"),
         "user: link from a dir without w");
    CALL(K_FD, open("usr/noperm", O_RDONLY), "user: open a mode 0 file");
    CALL(K_FD, open("usr/rootfile", O_WRONLY),
         "user: open root's 0644 O_WRONLY");
    CALL(K_FD, open("usr/rootfile", O_RDONLY | O_NOATIME),
         "user: open root's file O_NOATIME");
    CALL(K_ZERO, access("usr/rootfile", W_OK), "user: access root's file W_OK");
    CALL(K_ZERO, access("usr/rw", W_OK), "user: access 0666 W_OK");
    CALL(K_ZERO, access("usr/rw", X_OK), "user: access 0666 X_OK");
    CALL(K_ZERO, access("usr/grpfile", W_OK), "user: access group file W_OK");

    /* setuid and setgid bits */
    fd = CALL(K_FD, open("usr/suid", O_WRONLY), "user: open root's 06777 file");
    CALL(K_VAL, write(fd, "w", 1), "user: write root's 06777 file");
    xclose(fd);
    show_stat("", "usr/suid", 0);
    fd = CALL(K_FD, open("usr/mysuid", O_WRONLY), "user: open own 06775 file");
    CALL(K_VAL, write(fd, "w", 1), "user: write own 06775 file");
    xclose(fd);
    show_stat("", "usr/mysuid", 0);
    chmod("usr/suid", 06777);
    CALL(K_ZERO, truncate("usr/suid", 0), "user: truncate root's 06777 file");
    show_stat("", "usr/suid", 0);
    CALL(K_ZERO, chmod("usr/stranger", 02755),
         "user: chmod g+s, file of a group not mine");
    show_stat("", "usr/stranger", 0);
    CALL(K_ZERO, chmod("usr/rootfile", 0666), "user: chmod root's file");
    CALL(K_ZERO, chown("usr/mysuid", 0, -1), "user: chown own file to root");
    CALL(K_ZERO, chown("usr/mysuid", -1, OTHER_GID),
         "user: chgrp own file to a supplementary group");
    show_stat("", "usr/mysuid", 0);
    CALL(K_ZERO, chown("usr/stranger", -1, STRANGER_GID),
         "user: chgrp to the group it has");
    CALL(K_ZERO, chown("usr/mine/f", -1, STRANGER_GID),
         "user: chgrp to a group not mine");

    /* times */
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/rootfile", ts, 0),
         "user: utimensat root's file, exact");
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/rootfile", NULL, 0),
         "user: utimensat root's 0644 file, now");
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/rw", NULL, 0),
         "user: utimensat root's 0666 file, now");
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/rw", ts, 0),
         "user: utimensat root's 0666 file, exact");
    ts[0].tv_nsec = UTIME_NOW;
    ts[1].tv_nsec = UTIME_OMIT;
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/rw", ts, 0),
         "user: utimensat root's 0666 file, NOW OMIT");
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/mine/f", ts, 0),
         "user: utimensat own file, NOW OMIT");
    ts[0] = (struct timespec){ 1300000000, 7 };
    ts[1] = (struct timespec){ 1300000000, 8 };
    CALL(K_ZERO, utimensat(AT_FDCWD, "usr/mine/f", ts, 0),
         "user: utimensat own file, exact");
    show_stat("", "usr/mine/f", 0);

    /* xattrs */
    CALL(K_ZERO, setxattr("usr/rootfile", "user.x", "v", 1, 0),
         "user: setxattr root's 0644 file");
    CALL(K_ZERO, setxattr("usr/rw", "user.x", "v", 1, 0),
         "user: setxattr root's 0666 file");
    CALL(K_VAL, getxattr("usr/xattr", "trusted.t", buf, sizeof(buf)),
         "user: getxattr trusted.t");
    CALL(K_VAL, getxattr("usr/xattr", "user.u", buf, sizeof(buf)),
         "user: getxattr user.u");
    CALL(K_ZERO, setxattr("usr/mine/f", "trusted.t", "v", 1, 0),
         "user: setxattr trusted.t on own file");
    CALL(K_ZERO, removexattr("usr/xattr", "user.u"),
         "user: removexattr on root's 0644 file");
    show_list("usr/xattr");
}

/* ---- the tree ----------------------------------------------------------- */

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dump(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, i;

    if (!d) {
        printf("tree: %s: %s\n", path, strerrorname_np(errno));
        return;
    }
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) {
            continue;
        }
        names = realloc(names, (n + 1) * sizeof(*names));
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp);
    for (i = 0; i < n; i++) {
        char *p;
        struct stat st;
        char shown[512];

        if (asprintf(&p, "%s/%s", path, names[i]) < 0) {
            exit(2);
        }
        if (strlen(names[i]) > 40) {
            snprintf(shown, sizeof(shown), "%s<%zu x '%c'>", prefix,
                     strlen(names[i]), names[i][0]);
        } else {
            snprintf(shown, sizeof(shown), "%s%s", prefix, names[i]);
        }
        if (lstat(p, &st) < 0) {
            printf("tree: %s: %s\n", shown, strerrorname_np(errno));
        } else {
            printf("tree: %s mode %06o uid %u gid %u nlink %lu", shown,
                   st.st_mode, st.st_uid, st.st_gid,
                   (unsigned long)st.st_nlink);
            if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
                printf(" size %lld", (long long)st.st_size);
            }
            if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
                printf(" rdev %u:%u", major(st.st_rdev), minor(st.st_rdev));
            }
            printf(" atime %s mtime %s\n", tstr(&st.st_atim),
                   tstr(&st.st_mtim));
            if (S_ISDIR(st.st_mode)) {
                char sub[600];

                snprintf(sub, sizeof(sub), "%s/", shown);
                dump(p, sub);
            }
        }
        free(p);
        free(names[i]);
    }
    free(names);
}

/*
 * The attribute queries of lsattr and xfs_io's stat (FS_IOC_GETFLAGS,
 * FS_IOC_FSGETXATTR) on a file and on a directory, then setting a flag
 * as chattr +d does.  After the user's part, so that the numbers of the
 * calls before stay what the lists of expected differences say.
 */
static void fileattr_cases(void)
{
    static const char *const paths[] = { "fa", "." };
    unsigned int i;

    put("fa", "attributes\n", 0644);
    for (i = 0; i < 2; i++) {
        int fd = open(paths[i], O_RDONLY);
        struct fsxattr fsx;
        int flags = 0;
        long r;

        if (fd < 0) {
            printf("setup: %s: %s\n", paths[i], strerror(errno));
            exit(2);
        }
        errno = 0;
        r = ioctl(fd, FS_IOC_GETFLAGS, &flags);
        report(K_VAL, r < 0 ? -1 : flags, errno, "ioctl %s FS_IOC_GETFLAGS",
               paths[i]);
        memset(&fsx, 0, sizeof(fsx));
        errno = 0;
        r = ioctl(fd, FS_IOC_FSGETXATTR, &fsx);
        report(K_VAL, r < 0 ? -1L : (long)fsx.fsx_xflags, errno,
               "ioctl %s FS_IOC_FSGETXATTR xflags", paths[i]);
        report(K_VAL, r < 0 ? -1L : (long)fsx.fsx_projid, errno,
               "ioctl %s FS_IOC_FSGETXATTR projid", paths[i]);
        if (i == 0) {
            flags |= FS_NODUMP_FL;
            CALL(K_ZERO, ioctl(fd, FS_IOC_SETFLAGS, &flags),
                 "ioctl %s FS_IOC_SETFLAGS +nodump", paths[i]);
        }
        close(fd);
    }
}

int main(int argc, char **argv)
{
    pid_t pid;
    int status;

    if (argc != 2 || chdir(argv[1]) < 0) {
        fprintf(stderr, "usage: fsconform DIR (an empty directory)\n");
        return 2;
    }
    t_start = time(NULL);
    umask(022);
    setvbuf(stdout, NULL, _IOLBF, 0);

    open_cases();
    node_cases();
    rename_cases();
    truncate_cases();
    attr_cases();
    xattr_cases();
    data_cases();
    name_cases();

    prepare_user_tree();
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        gid_t groups[] = { USER_GID, OTHER_GID };

        if (setgroups(2, groups) < 0 || setgid(USER_GID) < 0 ||
            setuid(USER_UID) < 0) {
            printf("setup: cannot become uid %d: %s\n", USER_UID,
                   strerror(errno));
            _exit(2);
        }
        user_cases();
        fflush(stdout);
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status)) {
        printf("setup: the unprivileged part failed\n");
        return 2;
    }
    fileattr_cases();

    dump(".", "");
    printf("end\n");
    return 0;
}
