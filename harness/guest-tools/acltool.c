/*
 * POSIX ACLs and creation modes in the guest, without the acl package:
 * ACLs are read and written as the kernel's xattr form directly.
 *
 *   acltool setacl PATH access|default ENTRIES
 *   acltool getacl PATH access|default       prints ENTRIES or "none"
 *   acltool create UMASK MODE PATH           prints the new file's mode
 *   acltool mkdir UMASK MODE PATH            prints the new dir's mode
 *   acltool as UID GID r|w PATH              opens PATH as UID:GID (no
 *                                            supplementary groups), prints
 *                                            "ok" or the errno name
 *
 * ENTRIES is a comma-separated list of TAG:ID:PERM, TAG one of u g m o,
 * ID empty for the owner, owning group, mask and others, PERM one octal
 * digit: "u::7,u:1000:4,g::5,m::5,o::0".  UMASK and MODE are octal.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_ENTRIES 32

struct entry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
};

static const struct {
    char c;
    uint16_t tag;
    int named;                  /* the tag with an id */
} tags[] = {
    { 'u', 0x01, 0 }, { 'u', 0x02, 1 }, { 'g', 0x04, 0 }, { 'g', 0x08, 1 },
    { 'm', 0x10, 0 }, { 'o', 0x20, 0 },
};

/* The errno names the test script compares against */
static const char *errname(int e)
{
    static char buf[32];

    switch (e) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENODATA: return "ENODATA";
    default:
        snprintf(buf, sizeof(buf), "errno%d", e);
        return buf;
    }
}

/* A number in @base (8 or 10), all of @s, that fits 32 bits */
static uint32_t number(const char *s, unsigned int base)
{
    uint64_t v = 0;

    if (!*s) {
        goto bad;
    }
    for (; *s; s++) {
        if (*s < '0' || *s >= '0' + (int)base) {
            goto bad;
        }
        v = v * base + (*s - '0');
        if (v > UINT32_MAX) {
            goto bad;
        }
    }
    return v;

bad:
    fprintf(stderr, "acltool: bad number\n");
    exit(2);
}

static int usage(void)
{
    fprintf(stderr, "usage: acltool setacl|getacl|create|mkdir|as ...\n");
    return 2;
}

static const char *xattr_name(const char *kind)
{
    if (!strcmp(kind, "access")) {
        return "system.posix_acl_access";
    }
    if (!strcmp(kind, "default")) {
        return "system.posix_acl_default";
    }
    fprintf(stderr, "acltool: access or default, not %s\n", kind);
    exit(2);
}

static int setacl(const char *path, const char *kind, char *spec)
{
    uint8_t buf[4 + 8 * MAX_ENTRIES];
    uint32_t version = 2;
    size_t len = 4;
    char *item, *save = NULL;

    memcpy(buf, &version, 4);
    for (item = strtok_r(spec, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *id_s = strchr(item, ':'), *perm_s;
        struct entry e = { .id = UINT32_MAX };
        unsigned int i;
        int named;

        perm_s = id_s ? strchr(id_s + 1, ':') : NULL;
        if (!perm_s || len == sizeof(buf) || id_s != item + 1) {
            fprintf(stderr, "acltool: bad entry %s\n", item);
            return 2;
        }
        named = perm_s > id_s + 1;
        for (i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
            if (tags[i].c == item[0] && tags[i].named == named) {
                e.tag = tags[i].tag;
            }
        }
        if (!e.tag) {
            fprintf(stderr, "acltool: bad tag in %s\n", item);
            return 2;
        }
        *perm_s = '\0';
        if (named) {
            e.id = number(id_s + 1, 10);
        }
        e.perm = number(perm_s + 1, 8);
        memcpy(buf + len, &e, 8);
        len += 8;
    }
    if (setxattr(path, xattr_name(kind), buf, len, 0) < 0) {
        printf("%s\n", errname(errno));
        return 1;
    }
    printf("ok\n");
    return 0;
}

static int getacl(const char *path, const char *kind)
{
    uint8_t buf[4 + 8 * MAX_ENTRIES];
    ssize_t n = getxattr(path, xattr_name(kind), buf, sizeof(buf));
    size_t off;

    if (n < 0) {
        printf("%s\n", errno == ENODATA ? "none" : errname(errno));
        return errno == ENODATA ? 0 : 1;
    }
    for (off = 4; off + 8 <= (size_t)n; off += 8) {
        struct entry e;
        unsigned int i;
        char c = '?';

        memcpy(&e, buf + off, 8);
        for (i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
            if (tags[i].tag == e.tag) {
                c = tags[i].c;
            }
        }
        if (e.tag == 0x02 || e.tag == 0x08) {
            printf("%s%c:%u:%o", off > 4 ? "," : "", c, e.id, e.perm);
        } else {
            printf("%s%c::%o", off > 4 ? "," : "", c, e.perm);
        }
    }
    printf("\n");
    return 0;
}

static int create(const char *umask_s, const char *mode_s, const char *path,
                  int dir)
{
    mode_t mode = number(mode_s, 8);
    struct stat st;
    int rc;

    umask(number(umask_s, 8));
    if (dir) {
        rc = mkdir(path, mode);
    } else {
        rc = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode);
        if (rc >= 0) {
            close(rc);
        }
    }
    if (rc < 0 || stat(path, &st) < 0) {
        printf("%s\n", errname(errno));
        return 1;
    }
    printf("%o\n", st.st_mode & 07777);
    return 0;
}

static int as(const char *uid_s, const char *gid_s, const char *how,
              const char *path)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        int fd;

        if (setgroups(0, NULL) < 0 || setgid(number(gid_s, 10)) < 0 ||
            setuid(number(uid_s, 10)) < 0) {
            perror("acltool: switching ids");
            _exit(2);
        }
        /* r: read, w: write, c: create */
        fd = open(path, (how[0] == 'w' ? O_WRONLY :
                         how[0] == 'c' ? O_WRONLY | O_CREAT | O_EXCL :
                         O_RDONLY) | O_CLOEXEC, 0644);
        printf("%s\n", fd < 0 ? errname(errno) : "ok");
        fflush(stdout);
        _exit(fd < 0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        perror("acltool");
        return 2;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "setacl")) {
        return setacl(argv[2], argv[3], argv[4]);
    }
    if (argc == 4 && !strcmp(argv[1], "getacl")) {
        return getacl(argv[2], argv[3]);
    }
    if (argc == 5 && !strcmp(argv[1], "create")) {
        return create(argv[2], argv[3], argv[4], 0);
    }
    if (argc == 5 && !strcmp(argv[1], "mkdir")) {
        return create(argv[2], argv[3], argv[4], 1);
    }
    if (argc == 6 && !strcmp(argv[1], "as")) {
        return as(argv[2], argv[3], argv[4], argv[5]);
    }
    return usage();
}
