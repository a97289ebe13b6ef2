/*
 * Raw access to the virtio-fs DAX window from the guest, past what any
 * file lets the guest reach: the pages of a range beyond the end of the
 * file it maps.
 *
 *   winpeek scan RESOURCE LEN        read every page of the first LEN
 *                                    bytes, and write a word into each
 *                                    one that read as all zeros; print
 *                                    "winpeek: P pages, Z zero pages,
 *                                    first word 0x..."
 *   winpeek dump RESOURCE OFF LEN    copy LEN bytes from OFF to stdout
 *   winpeek touch RESOURCE LEN       write one byte into every page of
 *                                    the first LEN bytes, unread; print
 *                                    "winpeek: touched P pages"
 *
 * RESOURCE is the window's BAR, /sys/bus/pci/devices/.../resource2; the
 * kernel lets a program map it while the virtio-fs driver owns it only
 * with iomem=relaxed.  A fault that QEMU cannot fix kills the VM, which
 * the host side sees.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

static int fail(const char *what, const char *file)
{
    fprintf(stderr, "winpeek: %s %s: %s\n", what, file, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    const char *res;
    unsigned long long off = 0, len;
    /* volatile: each load and store must reach the window, in order */
    volatile uint64_t *w;
    uint64_t first, pages, zero = 0, i, j;
    uint8_t *map;
    int fd;

    if (argc < 4 || (!strcmp(argv[1], "dump") && argc != 5) ||
        (strcmp(argv[1], "scan") && strcmp(argv[1], "dump") &&
         strcmp(argv[1], "touch"))) {
        fprintf(stderr, "usage: winpeek scan RESOURCE LEN | "
                "dump RESOURCE OFF LEN | touch RESOURCE LEN\n");
        return 2;
    }
    res = argv[2];
    if (!strcmp(argv[1], "dump")) {
        off = strtoull(argv[3], NULL, 0);
    }
    len = strtoull(argv[argc - 1], NULL, 0);
    fd = open(res, O_RDWR | O_SYNC);
    if (fd < 0) {
        return fail("open", res);
    }
    map = mmap(NULL, off + len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        return fail("mmap", res);
    }
    if (!strcmp(argv[1], "dump")) {
        size_t done = 0;

        while (done < len) {
            ssize_t n = write(1, map + off + done, len - done);

            if (n <= 0) {
                return fail("write", "stdout");
            }
            done += n;
        }
        return 0;
    }
    pages = len / PAGE;
    if (!strcmp(argv[1], "touch")) {
        /* volatile: each store must reach the window, none merged */
        volatile uint8_t *b = map;

        /* What the byte is does not matter: that it is written does */
        for (i = 0; i < pages; i++) {
            b[i * PAGE + (i % PAGE)] = (uint8_t)(i | 1);
        }
        printf("winpeek: touched %llu pages\n", (unsigned long long)pages);
        return 0;
    }
    /*
     * volatile: every load must reach the DAX window (device memory), as
     * the test is about what each page really holds; the compiler may not
     * merge, reorder or drop them.
     */
    w = (volatile uint64_t *)map;
    first = w[0];
    for (i = 0; i < pages; i++) {
        volatile uint64_t *p = w + i * (PAGE / 8);

        for (j = 0; j < PAGE / 8 && !p[j]; j++) {
            continue;
        }
        if (j == PAGE / 8) {
            /* Past the end of any file there: the write must go nowhere */
            zero++;
            p[PAGE / 8 - 1] = 0x5eadbeefULL + i;
        }
    }
    printf("winpeek: %llu pages, %llu zero pages, first word 0x%016llx\n",
           (unsigned long long)pages, (unsigned long long)zero,
           (unsigned long long)first);
    return 0;
}
