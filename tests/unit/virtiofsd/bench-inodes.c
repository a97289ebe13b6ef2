/*
 * virtiofsd: what holding inodes by file handle costs, per request
 *
 * LOOKUP of names the daemon has not seen (a new inode each), LOOKUP of
 * names it knows, and GETATTR, through the whole request path but with
 * no guest: with --inode-file-handles=never (an O_PATH fd per inode),
 * mandatory with --inode-fd-cache=0 (a handle per inode, opened through
 * the broker for each request: "handles-broker"), and mandatory with an
 * fd cache that holds them all (idle fds, "handles-cached": the default
 * while the guest uses fewer inodes than the cache).  Each figure
 * is the median, min and max of the per-request time over ROUNDS rounds
 * of N requests, each round in a fresh scratch directory (TMPDIR).
 *
 *   bench-inodes [N [ROUNDS]]    (default 10000 and 5)
 *
 * Prints "bench-inodes: MODE OP: median X ns, min Y, max Z (R x N)".
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vfsd-test.h"
#include "log.h"

enum { OP_LOOKUP_NEW, OP_LOOKUP_KNOWN, OP_GETATTR, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
    "lookup-new", "lookup-known", "getattr",
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* One round: ns per request of each operation */
static void round_once(VfsdInodeFh mode, unsigned int cache, unsigned int n,
                       double *ns)
{
    g_autofree uint64_t *ino = g_new(uint64_t, n);
    struct fuse_attr_out out;
    VfsdOptions o;
    char name[32];
    TestFs t;
    unsigned int i;
    double t0;

    test_fs_setup(&t, NULL);
    o = t.opts;
    test_fs_teardown(&t);
    o.inode_file_handles = mode;
    test_fs_setup(&t, &o);
    if (mode != VFSD_INODE_FH_NEVER && !t.fs.use_handles) {
        fprintf(stderr, "bench-inodes: no file handles here\n");
        exit(1);
    }
    t.fs.inodes.idle_max = cache;
    test_fs_init_session(&t, 0);
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "f%u", i);
        if (mknodat(t.dir_fd, name, S_IFREG | 0600, 0) < 0) {
            perror("mknodat");
            exit(1);
        }
    }

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "f%u", i);
        ino[i] = test_lookup(&t, FUSE_ROOT_ID, name, NULL);
    }
    ns[OP_LOOKUP_NEW] = (now_ns() - t0) / n;

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "f%u", i);
        test_lookup(&t, FUSE_ROOT_ID, name, NULL);
    }
    ns[OP_LOOKUP_KNOWN] = (now_ns() - t0) / n;

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        TestReq *r = test_req_new(FUSE_GETATTR, ino[i]);

        test_req_add(r, &(struct fuse_getattr_in){ 0 },
                     sizeof(struct fuse_getattr_in));
        if (test_send(&t, r, 4096, &out, sizeof(out), NULL) != 0) {
            fprintf(stderr, "bench-inodes: GETATTR failed\n");
            exit(1);
        }
    }
    ns[OP_GETATTR] = (now_ns() - t0) / n;
    test_fs_teardown(&t);
}

int main(int argc, char **argv)
{
    static const struct {
        VfsdInodeFh mode;
        bool cached;
        const char *name;
    } modes[] = {
        { VFSD_INODE_FH_NEVER, false, "fds" },
        { VFSD_INODE_FH_MANDATORY, false, "handles-broker" },
        { VFSD_INODE_FH_MANDATORY, true, "handles-cached" },
    };
    unsigned int n = argc > 1 ? atoi(argv[1]) : 10000;
    unsigned int rounds = argc > 2 ? atoi(argv[2]) : 5;
    struct rlimit rl;
    unsigned int m, r, op;

    if (!n || !rounds) {
        fprintf(stderr, "usage: %s [N [ROUNDS]]\n", argv[0]);
        return 2;
    }
    vfsd_log_init(false, VFSD_LOG_ERROR);
    /*
     * The fd mode holds one fd per inode, the cached one an idle fd each
     * (never both at once): N must fit in the fd limit
     */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n + 1024) {
        rl.rlim_cur = MIN(rl.rlim_max, n + 1024);
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < n + 1024) {
            fprintf(stderr, "bench-inodes: %u inodes need a higher fd "
                    "limit\n", n);
            return 1;
        }
    }
    for (m = 0; m < G_N_ELEMENTS(modes); m++) {
        g_autofree double *ns = g_new(double, rounds * OP_COUNT);

        for (r = 0; r < rounds; r++) {
            round_once(modes[m].mode, modes[m].cached ? n : 0, n,
                       ns + r * OP_COUNT);
        }
        for (op = 0; op < OP_COUNT; op++) {
            g_autofree double *v = g_new(double, rounds);

            for (r = 0; r < rounds; r++) {
                v[r] = ns[r * OP_COUNT + op];
            }
            qsort(v, rounds, sizeof(*v), cmp_double);
            printf("bench-inodes: %s %s: median %.0f ns, min %.0f, max %.0f "
                   "(%u x %u)\n", modes[m].name, op_names[op],
                   v[rounds / 2], v[0], v[rounds - 1], rounds, n);
        }
    }
    return 0;
}
