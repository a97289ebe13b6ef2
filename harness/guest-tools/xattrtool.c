/*
 * Extended attributes in the guest, which has no attr package:
 *
 *   xattrtool set PATH NAME VALUE     prints "ok" or the errno name
 *   xattrtool setcap PATH             a valid v2 security.capability
 *                                     (cap_net_raw, permitted+effective)
 *   xattrtool get PATH NAME           prints the value or the errno name
 *   xattrtool remove PATH NAME        prints "ok" or the errno name
 *   xattrtool list PATH               prints the names, sorted, one line,
 *                                     space-separated ("-" for none), or
 *                                     the errno name
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static const char *errname(int e)
{
    switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENODATA: return "ENODATA";
    case ENOTSUP: return "ENOTSUP";
    case ERANGE: return "ERANGE";
    case EINVAL: return "EINVAL";
    case E2BIG: return "E2BIG";
    case ENOSYS: return "ENOSYS";
    case ENOENT: return "ENOENT";
    default: return strerror(e);
    }
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char * const *)a, *(char * const *)b);
}

static int list(const char *path)
{
    char buf[65536];
    char *names[1024];
    ssize_t n = listxattr(path, buf, sizeof(buf));
    size_t off = 0, k = 0, i;

    if (n < 0) {
        puts(errname(errno));
        return 0;
    }
    while (off < (size_t)n && k < 1024) {
        names[k++] = buf + off;
        off += strlen(buf + off) + 1;
    }
    qsort(names, k, sizeof(names[0]), cmp);
    for (i = 0; i < k; i++) {
        printf("%s%s", i ? " " : "", names[i]);
    }
    puts(k ? "" : "-");
    return 0;
}

int main(int argc, char **argv)
{
    /* struct vfs_cap_data, revision 2: magic_etc, then permitted/inheritable */
    uint32_t cap[5] = { 0x02000001, 1u << 13, 0, 0, 0 };
    char val[65536];
    ssize_t n;

    if (argc == 3 && !strcmp(argv[1], "list")) {
        return list(argv[2]);
    }
    if (argc == 3 && !strcmp(argv[1], "setcap")) {
        puts(setxattr(argv[2], "security.capability", cap, sizeof(cap), 0) ?
             errname(errno) : "ok");
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "get")) {
        n = getxattr(argv[2], argv[3], val, sizeof(val) - 1);
        if (n < 0) {
            puts(errname(errno));
        } else {
            val[n] = '\0';
            puts(val);
        }
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "remove")) {
        puts(removexattr(argv[2], argv[3]) ? errname(errno) : "ok");
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "set")) {
        puts(setxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0) ?
             errname(errno) : "ok");
        return 0;
    }
    fprintf(stderr, "usage: xattrtool set|get|remove|list|setcap ...\n");
    return 2;
}
