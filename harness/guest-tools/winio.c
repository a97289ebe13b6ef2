/*
 * I/O whose user buffer lies in the virtio-fs DAX window, for the guest
 * tests: the guest hands the device buffers the back-end cannot map, and
 * the back-end must reach them through VHOST_USER_BACKEND_MEM_READ/WRITE.
 *
 *   winio read SRC DST LEN [direct]   read(SRC) into an mmap of DST (DAX)
 *   winio write SRC DST LEN [direct]  write(DST) from an mmap of SRC (DAX)
 *
 * With "direct" the file that is not mapped is opened O_DIRECT, so that
 * its I/O hands the device the mapping's pages in any cache mode;
 * without, only --cache=never does.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fail(const char *what, const char *file)
{
    fprintf(stderr, "winio: %s %s: %s\n", what, file, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5 && !(argc == 6 && !strcmp(argv[5], "direct"))) {
        fprintf(stderr, "usage: winio read|write SRC DST LEN [direct]\n");
        return 2;
    }
    const char *op = argv[1], *src = argv[2], *dst = argv[3];
    size_t len = 0;
    int is_read = !strcmp(op, "read");
    int direct = argc == 6 ? O_DIRECT : 0;
    const char *mapped = is_read ? dst : src;
    int mfd = open(mapped, is_read ? O_RDWR : O_RDONLY);
    int fd = is_read ? open(src, O_RDONLY | direct) :
                       open(dst, O_WRONLY | O_CREAT | O_TRUNC | direct, 0644);
    uint8_t *map;
    ssize_t n;

    if (sscanf(argv[4], "%zu", &len) != 1 || !len) {
        fprintf(stderr, "winio: bad length %s\n", argv[4]);
        return 2;
    }
    if (mfd < 0) {
        return fail("open", mapped);
    }
    if (fd < 0) {
        return fail("open", is_read ? src : dst);
    }
    map = mmap(NULL, len, is_read ? PROT_READ | PROT_WRITE : PROT_READ,
               MAP_SHARED, mfd, 0);
    if (map == MAP_FAILED) {
        return fail("mmap", mapped);
    }
    n = is_read ? read(fd, map, len) : write(fd, map, len);
    if (n != (ssize_t)len) {
        fprintf(stderr, "winio: %s of %zu bytes gave %zd: %s\n", op, len, n,
                n < 0 ? strerror(errno) : "short");
        return 1;
    }
    if (is_read && msync(map, len, MS_SYNC) < 0) {
        return fail("msync", dst);
    }
    printf("winio %s: %zu bytes through the window\n", op, len);
    return 0;
}
