/*
 * Whether the guest's kernel serves each file through DAX, as statx(2)
 * says (STATX_ATTR_DAX): the outcome of the daemon's per-file DAX policy
 * on a mount with -o dax=inode.
 *
 *   daxattr FILE...    one line per file: "FILE dax" or "FILE nodax"
 *
 * Fails (status 1) when statx fails or the kernel does not report the
 * attribute at all: "nodax" must mean the kernel said so.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

int main(int argc, char **argv)
{
    int i, rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: daxattr FILE...\n");
        return 2;
    }
    for (i = 1; i < argc; i++) {
        struct statx stx;

        if (statx(AT_FDCWD, argv[i], 0, STATX_BASIC_STATS, &stx) < 0) {
            printf("%s statx: %s\n", argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        if (!(stx.stx_attributes_mask & STATX_ATTR_DAX)) {
            printf("%s statx: no STATX_ATTR_DAX in the attributes mask\n",
                   argv[i]);
            rc = 1;
            continue;
        }
        printf("%s %s\n", argv[i],
               stx.stx_attributes & STATX_ATTR_DAX ? "dax" : "nodax");
    }
    return rc;
}
