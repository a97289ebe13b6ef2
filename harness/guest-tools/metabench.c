/*
 * Metadata micro-benchmarks run inside the test guest.
 *
 *   metabench negstat DIR N     stat() of a name that does not exist, N times
 *   metabench create DIR N      create then unlink N files
 *   metabench readdir DIR N     make N entries (untimed), then list them
 *   metabench smallread DIR N   make N 4 KiB files (untimed), drop caches,
 *                               then open/read/close each
 *
 * Prints one line: "<test> <n> <seconds> <ops/s>".  Static, no libc beyond
 * what busybox's world offers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *path)
{
    fprintf(stderr, "metabench: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void drop_caches(void)
{
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

    sync();
    if (fd >= 0) {
        if (write(fd, "3\n", 2) != 2) {
            fprintf(stderr, "metabench: drop_caches failed\n");
        }
        close(fd);
    }
}

static void make_files(const char *dir, long n, size_t size)
{
    static char buf[4096];
    char path[4096];

    memset(buf, 'x', sizeof(buf));
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/f%ld", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            die("create", path);
        }
        if (size && write(fd, buf, size) != (ssize_t)size) {
            die("write", path);
        }
        close(fd);
    }
}

int main(int argc, char **argv)
{
    char path[4096];
    struct stat st;
    double t0, t;
    long n, done = 0;

    if (argc != 4 || (n = atol(argv[3])) <= 0) {
        fprintf(stderr, "usage: metabench negstat|create|readdir|smallread DIR N\n");
        return 2;
    }
    const char *test = argv[1], *dir = argv[2];

    if (!strcmp(test, "negstat")) {
        snprintf(path, sizeof(path), "%s/does-not-exist", dir);
        t0 = now();
        for (long i = 0; i < n; i++) {
            if (stat(path, &st) == 0 || errno != ENOENT) {
                die("negative stat", path);
            }
        }
        done = n;
    } else if (!strcmp(test, "create")) {
        t0 = now();
        for (long i = 0; i < n; i++) {
            snprintf(path, sizeof(path), "%s/c%ld", dir, i);
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd < 0) {
                die("create", path);
            }
            close(fd);
            if (unlink(path) < 0) {
                die("unlink", path);
            }
        }
        done = n;
    } else if (!strcmp(test, "readdir")) {
        make_files(dir, n, 0);
        drop_caches();
        t0 = now();
        DIR *d = opendir(dir);
        if (!d) {
            die("opendir", dir);
        }
        while (readdir(d)) {
            done++;
        }
        closedir(d);
        done -= 2; /* . and .. */
        if (done != n) {
            fprintf(stderr, "metabench: listed %ld entries, want %ld\n", done, n);
            return 1;
        }
    } else if (!strcmp(test, "smallread")) {
        static char buf[4096];

        make_files(dir, n, sizeof(buf));
        drop_caches();
        t0 = now();
        for (long i = 0; i < n; i++) {
            snprintf(path, sizeof(path), "%s/f%ld", dir, i);
            int fd = open(path, O_RDONLY);
            if (fd < 0) {
                die("open", path);
            }
            if (read(fd, buf, sizeof(buf)) != sizeof(buf)) {
                die("read", path);
            }
            close(fd);
        }
        done = n;
    } else {
        fprintf(stderr, "metabench: unknown test %s\n", test);
        return 2;
    }
    t = now() - t0;
    printf("%s %ld %.6f %.1f\n", test, done, t, t > 0 ? done / t : 0.0);
    return 0;
}
