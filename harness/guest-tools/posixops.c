/*
 * A scripted POSIX exercise of a mounted file system, for comparing
 * virtio-fs back-ends: every step prints one line "step: result" where the
 * result is "ok", a value that does not depend on the back-end, or the
 * errno name.  Two back-ends that behave the same print the same lines.
 *
 *   posixops DIR
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *dir;

static const char *errname(int e)
{
    switch (e) {
    case 0: return "ok";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case ENOTEMPTY: return "ENOTEMPTY";
    case EAGAIN: return "EAGAIN";
    case ENODATA: return "ENODATA";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENOSYS: return "ENOSYS";
    case ENXIO: return "ENXIO";
    case EXDEV: return "EXDEV";
    case EISDIR: return "EISDIR";
    case ENOTDIR: return "ENOTDIR";
    default: {
        static char buf[32];
        snprintf(buf, sizeof(buf), "errno%d", e);
        return buf;
    }
    }
}

static void res(const char *step, int rc)
{
    printf("%s: %s\n", step, rc < 0 ? errname(errno) : "ok");
}

static char *p(const char *name)
{
    static char bufs[4][4096];
    static int i;

    i = (i + 1) % 4;
    snprintf(bufs[i], sizeof(bufs[i]), "%s/%s", dir, name);
    return bufs[i];
}

static int put(const char *name, const char *data)
{
    int fd = open(p(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);

    if (fd < 0) {
        return -1;
    }
    int rc = write(fd, data, strlen(data)) == (ssize_t)strlen(data) ? 0 : -1;
    close(fd);
    return rc;
}

static void show(const char *step, const char *name)
{
    char buf[256] = "";
    int fd = open(p(name), O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

    if (n < 0) {
        printf("%s: %s\n", step, errname(errno));
    } else {
        buf[n] = 0;
        printf("%s: \"%s\"\n", step, buf);
    }
    if (fd >= 0) {
        close(fd);
    }
}

int main(int argc, char **argv)
{
    struct stat st;
    char buf[8192];
    int fd, fd2;

    if (argc != 2) {
        fprintf(stderr, "usage: posixops DIR\n");
        return 2;
    }
    dir = argv[1];

    /* create, write, read, truncate */
    res("create a", put("a", "hello world"));
    show("read a", "a");
    res("truncate a 5", truncate(p("a"), 5));
    show("read a after shrink", "a");
    res("truncate a 8", truncate(p("a"), 8));
    stat(p("a"), &st);
    printf("size a after grow: %lld\n", (long long)st.st_size);
    fd = open(p("a"), O_RDONLY);
    memset(buf, 'x', 8);
    printf("tail after grow is zero: %s\n",
           pread(fd, buf, 8, 0) == 8 && !memcmp(buf + 5, "\0\0\0", 3) ? "yes" : "no");
    close(fd);
    res("open O_TRUNC a", (fd = open(p("a"), O_WRONLY | O_TRUNC)));
    close(fd);
    stat(p("a"), &st);
    printf("size a after O_TRUNC: %lld\n", (long long)st.st_size);
    res("O_EXCL on existing", open(p("a"), O_WRONLY | O_CREAT | O_EXCL, 0644));

    /* rename and rename2 */
    put("b", "bee");
    put("c", "sea");
    res("rename b d", rename(p("b"), p("d")));
    res("rename2 NOREPLACE d c", renameat2(AT_FDCWD, p("d"), AT_FDCWD, p("c"),
                                           RENAME_NOREPLACE));
    res("rename2 EXCHANGE d c", renameat2(AT_FDCWD, p("d"), AT_FDCWD, p("c"),
                                          RENAME_EXCHANGE));
    show("read c after exchange", "c");
    show("read d after exchange", "d");
    res("rename missing", rename(p("nope"), p("nope2")));

    /* links */
    res("link c e", link(p("c"), p("e")));
    stat(p("c"), &st);
    printf("nlink c: %lu\n", (unsigned long)st.st_nlink);
    res("symlink s -> c", symlink("c", p("s")));
    ssize_t n = readlink(p("s"), buf, sizeof(buf) - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("readlink s: %s\n", n < 0 ? errname(errno) : buf);
    show("read through s", "s");
    res("symlink dangling", symlink("/nonexistent", p("dangling")));
    res("lstat dangling", lstat(p("dangling"), &st));
    res("stat dangling", stat(p("dangling"), &st));

    /* directories */
    res("mkdir sub", mkdir(p("sub"), 0755));
    res("mkdir sub again", mkdir(p("sub"), 0755));
    put("sub/f", "x");
    res("rmdir non-empty", rmdir(p("sub")));
    res("unlink sub/f", unlink(p("sub/f")));
    res("rmdir sub", rmdir(p("sub")));
    res("unlink a directory", (mkdir(p("d2"), 0755), unlink(p("d2"))));

    /* special files: a FIFO can be made; opening it for I/O stays in the guest */
    res("mkfifo", mkfifo(p("fifo"), 0644));
    stat(p("fifo"), &st);
    printf("fifo is a fifo: %s\n", S_ISFIFO(st.st_mode) ? "yes" : "no");
    res("open fifo nonblock write", open(p("fifo"), O_WRONLY | O_NONBLOCK));
    res("mknod char 1:3", mknod(p("null"), S_IFCHR | 0666, makedev(1, 3)));

    /* xattrs */
    res("setxattr user.t", setxattr(p("c"), "user.t", "v1", 2, 0));
    n = getxattr(p("c"), "user.t", buf, sizeof(buf));
    printf("getxattr user.t: %s\n", n < 0 ? errname(errno) : (buf[n] = 0, buf));
    res("setxattr CREATE existing", setxattr(p("c"), "user.t", "v2", 2, XATTR_CREATE));
    n = listxattr(p("c"), buf, sizeof(buf));
    printf("listxattr has user.t: %s\n",
           n < 0 ? errname(errno) : (memmem(buf, n, "user.t", 7) ? "yes" : "no"));
    res("removexattr user.t", removexattr(p("c"), "user.t"));
    res("getxattr removed", getxattr(p("c"), "user.t", buf, sizeof(buf)) < 0 ? -1 : 0);

    /* locks: a second open file description conflicts */
    fd = open(p("c"), O_RDWR);
    fd2 = open(p("c"), O_RDWR);
    res("flock EX", flock(fd, LOCK_EX | LOCK_NB));
    res("flock EX second fd", flock(fd2, LOCK_EX | LOCK_NB));
    flock(fd, LOCK_UN);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10 };
    res("fcntl SETLK", fcntl(fd, F_SETLK, &fl));
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10 };
        int f = open(p("c"), O_RDWR);
        fcntl(f, F_GETLK, &q);
        printf("child GETLK sees a writer: %s\n", q.l_type == F_WRLCK ? "yes" : "no");
        res("child SETLK conflicting", fcntl(f, F_SETLK, &q));
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    close(fd);
    close(fd2);

    /* fallocate, holes, lseek */
    fd = open(p("sparse"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    res("fallocate 1M", fallocate(fd, 0, 0, 1 << 20));
    fstat(fd, &st);
    printf("size after fallocate: %lld\n", (long long)st.st_size);
    memset(buf, 'd', 4096);
    pwrite(fd, buf, 4096, 0);
    res("punch hole", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                65536, 65536));
    pread(fd, buf, 16, 65536 + 100);
    printf("hole reads zero: %s\n", buf[0] == 0 && buf[15] == 0 ? "yes" : "no");
    fsync(fd);
    printf("SEEK_DATA 0: %lld\n", (long long)lseek(fd, 0, SEEK_DATA));
    close(fd);
    fd = open(p("holey"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    pwrite(fd, "end", 3, 1 << 20);
    fsync(fd);
    printf("SEEK_HOLE 0 of holey: %lld\n", (long long)lseek(fd, 0, SEEK_HOLE));
    printf("SEEK_DATA 0 of holey: %lld\n", (long long)lseek(fd, 0, SEEK_DATA));
    close(fd);

    /* copy_file_range */
    put("src", "0123456789abcdef");
    fd = open(p("src"), O_RDONLY);
    fd2 = open(p("dst"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    loff_t in = 4, out = 0;
    n = copy_file_range(fd, &in, fd2, &out, 8, 0);
    printf("copy_file_range: %s\n", n < 0 ? errname(errno) : (n == 8 ? "8" : "short"));
    close(fd);
    close(fd2);
    show("read dst", "dst");

    /* mmap shared write, seen by read() */
    fd = open(p("m"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ftruncate(fd, 4096);
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        printf("mmap shared: %s\n", errname(errno));
    } else {
        memcpy(m, "mapped!", 7);
        msync(m, 4096, MS_SYNC);
        munmap(m, 4096);
        printf("mmap shared: ok\n");
    }
    close(fd);
    fd = open(p("m"), O_RDONLY);
    n = read(fd, buf, 7);
    buf[n < 0 ? 0 : n] = 0;
    printf("read after mmap write: \"%s\"\n", buf);
    close(fd);

    /* statfs, chmod, utimens */
    struct statfs sf;
    res("statfs", statfs(dir, &sf));
    printf("statfs sane: %s\n", sf.f_bsize > 0 && sf.f_blocks > 0 ? "yes" : "no");
    res("chmod 600", chmod(p("c"), 0600));
    stat(p("c"), &st);
    printf("mode c: %o\n", st.st_mode & 07777);
    struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
    res("utimensat", utimensat(AT_FDCWD, p("c"), ts, 0));
    stat(p("c"), &st);
    printf("mtime c: %lld\n", (long long)st.st_mtime);

    /* readdir of 10,000 entries */
    res("mkdir many", mkdir(p("many"), 0755));
    for (int i = 0; i < 10000; i++) {
        char name[32];

        snprintf(name, sizeof(name), "many/%05d", i);
        fd = open(p(name), O_WRONLY | O_CREAT, 0644);
        if (fd < 0) {
            printf("create %s: %s\n", name, errname(errno));
            break;
        }
        close(fd);
    }
    DIR *d = opendir(p("many"));
    long count = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        count += de->d_name[0] != '.';
    }
    if (d) {
        closedir(d);
    }
    printf("readdir many: %ld entries\n", count);
    return 0;
}
