/*
 * virtiofsd tests: decoding of malformed and hostile requests
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vfsd-test.h"

static void setup(TestFs *t, gconstpointer data)
{
    test_fs_setup(t, NULL);
    test_fs_init_session(t, FUSE_POSIX_LOCKS | FUSE_DO_READDIRPLUS);
}

static void teardown(TestFs *t, gconstpointer data)
{
    test_fs_teardown(t);
}

static void test_before_init(void)
{
    TestFs t;
    TestReq *r;

    test_fs_setup(&t, NULL);
    r = test_req_new(FUSE_GETATTR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EIO);
    test_fs_teardown(&t);
}

static void test_init(void)
{
    TestFs t;
    TestReq *r;
    struct fuse_init_in in = {
        .major = 7, .minor = 41, .max_readahead = 131072,
        .flags = FUSE_INIT_EXT | FUSE_MAP_ALIGNMENT | FUSE_ASYNC_READ |
                 FUSE_WRITEBACK_CACHE | FUSE_POSIX_ACL,
        .flags2 = FUSE_HAS_INODE_DAX >> 32,
    };
    struct fuse_init_out out;
    struct fuse_getattr_in ga = { 0 };
    uint64_t flags, ino, fh;

    test_fs_setup(&t, NULL);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    flags = out.flags | (uint64_t)out.flags2 << 32;
    g_assert_cmpuint(out.major, ==, 7);
    g_assert_cmpuint(out.map_alignment, ==, 12);
    g_assert_cmpuint(out.max_write, >=, 4096);
    g_assert_true(flags & FUSE_MAP_ALIGNMENT);
    g_assert_true(flags & FUSE_HAS_INODE_DAX);
    /* Not asked for on the command line, nor supported */
    g_assert_false(flags & FUSE_WRITEBACK_CACHE);
    g_assert_false(flags & FUSE_POSIX_ACL);
    /* We say our version; both speak the older one */
    g_assert_cmpuint(out.minor, ==, 45);
    g_assert_cmpuint(t.fs.conn.proto_minor, ==, 41);

    /*
     * A second INIT is a guest that rebooted without unmounting: a new
     * session, in which what the old one knew (here a file and its open
     * handle) is gone.
     */
    fh = UINT64_MAX;
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    g_assert_cmpuint(ino, !=, 0);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.major, ==, 7);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &ga, sizeof(ga));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), <, 0);
    g_assert_cmpint(test_write(&t, ino, fh, 0, "x", 1), <, 0);
    g_assert_cmpuint(test_lookup(&t, FUSE_ROOT_ID, "f", NULL), !=, 0);
    test_fs_teardown(&t);

    /* A 7.45 guest: request timeouts (7.43) are not agreed to */
    test_fs_setup(&t, NULL);
    in.minor = 45;
    in.flags2 |= FUSE_REQUEST_TIMEOUT >> 32;
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    flags = out.flags | (uint64_t)out.flags2 << 32;
    g_assert_cmpuint(out.minor, ==, 45);
    g_assert_cmpuint(t.fs.conn.proto_minor, ==, 45);
    g_assert_false(flags & FUSE_REQUEST_TIMEOUT);
    g_assert_true(flags & FUSE_HAS_INODE_DAX);
    test_fs_teardown(&t);

    /* Too old */
    test_fs_setup(&t, NULL);
    in.minor = 26;
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EPROTO);
    /* A truncated INIT */
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, 8);
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    test_fs_teardown(&t);
}

static void test_truncated_header(TestFs *t, gconstpointer data)
{
    struct fuse_in_header h = {
        .len = sizeof(h), .opcode = FUSE_GETATTR, .nodeid = 1,
    };
    struct fuse_out_header oh;

    /* Not even a header: still an answer, if it fits */
    g_assert_cmpint(test_send_raw(t, &h, 10, 4096, NULL, 0, NULL), ==,
                    -EINVAL);
    g_assert_cmpint(test_send_raw(t, &h, 0, 4096, NULL, 0, NULL), ==,
                    -EINVAL);
    /* No room for a reply: nothing written, nothing overrun */
    g_assert_cmpint(test_send_raw(t, &h, 10, sizeof(oh) - 1, NULL, 0, NULL),
                    ==, 1);
    g_assert_cmpint(test_send_raw(t, &h, 10, 0, NULL, 0, NULL), ==, 1);
}

static void test_header_length_lies(TestFs *t, gconstpointer data)
{
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in in;
    } req = {
        .h = { .opcode = FUSE_GETATTR, .nodeid = 1 },
    };

    /* Longer than the buffer */
    req.h.len = sizeof(req) + 1;
    g_assert_cmpint(test_send_raw(t, &req, sizeof(req), 4096, NULL, 0, NULL),
                    ==, -EINVAL);
    req.h.len = UINT32_MAX;
    g_assert_cmpint(test_send_raw(t, &req, sizeof(req), 4096, NULL, 0, NULL),
                    ==, -EINVAL);
    /* Shorter than a header */
    req.h.len = 8;
    g_assert_cmpint(test_send_raw(t, &req, sizeof(req), 4096, NULL, 0, NULL),
                    ==, -EINVAL);
    /* Shorter than its arguments: they are not read past the length */
    req.h.len = sizeof(req.h) + 4;
    g_assert_cmpint(test_send_raw(t, &req, sizeof(req), 4096, NULL, 0, NULL),
                    ==, -EINVAL);
    /* Right */
    req.h.len = sizeof(req);
    g_assert_cmpint(test_send_raw(t, &req, sizeof(req), 4096, NULL, 0, NULL),
                    ==, 0);
}

static void test_unknown_opcodes(TestFs *t, gconstpointer data)
{
    static const uint32_t ops[] = {
        FUSE_BMAP, FUSE_POLL, 54, 0, 7, 19, 200,
        FUSE_INIT_BSWAP_RESERVED, UINT32_MAX,
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        TestReq *r = test_req_new(ops[i], 1);

        test_req_add(r, "\0\0\0\0\0\0\0\0", 8);
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOSYS);
    }
}

/*
 * Each opcode we do not serve is logged once, so that what newer guests
 * send shows up without flooding the log.  In a subprocess: the record of
 * what was logged is the process's.
 */
static void test_unserved_logged_once(void)
{
    TestFs t;
    unsigned int i;

    if (!g_test_subprocess()) {
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_passed();
        g_test_trap_assert_stderr("*sent BMAP (opcode 37)*");
        g_test_trap_assert_stderr_unmatched("*BMAP*BMAP*");
        g_test_trap_assert_stderr("*sent unknown (opcode 54)*");
        g_test_trap_assert_stderr_unmatched("*opcode 54*opcode 54*");
        g_test_trap_assert_stderr("*sent opcode 4000000*");
        /* The ones we serve are not in it */
        g_test_trap_assert_stderr_unmatched("*STATX*");
        g_test_trap_assert_stderr_unmatched("*COPY_FILE_RANGE_64*");
        return;
    }
    vfsd_log_init(false, VFSD_LOG_INFO);
    setup(&t, NULL);
    for (i = 0; i < 3; i++) {
        static const uint32_t ops[] = {
            FUSE_BMAP, 54, 4000000, FUSE_STATX, FUSE_COPY_FILE_RANGE_64,
        };
        unsigned int j;

        for (j = 0; j < G_N_ELEMENTS(ops); j++) {
            TestReq *r = test_req_new(ops[j], 1);

            test_req_add(r, &(struct fuse_copy_file_range_in){ 0 },
                         sizeof(struct fuse_copy_file_range_in));
            test_send(&t, r, 4096, NULL, 0, NULL);
        }
    }
    teardown(&t, NULL);
}

static int statx_flags(TestFs *t, uint32_t sx_flags, uint32_t sx_mask)
{
    TestReq *r = test_req_new(FUSE_STATX, FUSE_ROOT_ID);
    struct fuse_statx_out out;

    test_req_add(r, &(struct fuse_statx_in){ .sx_flags = sx_flags,
                                             .sx_mask = sx_mask },
                 sizeof(struct fuse_statx_in));
    return test_send(t, r, 4096, &out, sizeof(out), NULL);
}

/*
 * STATX's flags are statx(2)'s sync hints: the path flags mean nothing
 * without a path, and unknown ones get statx(2)'s EINVAL.  Arguments past
 * the structure are ignored, as for every request; a reply that does not
 * fit is an error.
 */
static void test_statx_decode(TestFs *t, gconstpointer data)
{
    static const uint32_t bad[] = {
        AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, AT_NO_AUTOMOUNT, 1, 0x80000000,
    };
    struct fuse_statx_out out;
    unsigned int i;
    TestReq *r;

    g_assert_cmpint(statx_flags(t, 0, STATX_BASIC_STATS), ==, 0);
    g_assert_cmpint(statx_flags(t, AT_STATX_FORCE_SYNC, 0), ==, 0);
    g_assert_cmpint(statx_flags(t, AT_STATX_DONT_SYNC, UINT32_MAX &
                                ~STATX__RESERVED), ==, 0);
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(statx_flags(t, bad[i], STATX_BASIC_STATS), ==,
                        -EINVAL);
    }
    /* One byte short */
    r = test_req_new(FUSE_STATX, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_statx_in){ 0 },
                 sizeof(struct fuse_statx_in) - 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    /* Trailing bytes */
    r = test_req_new(FUSE_STATX, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_statx_in){ .sx_mask = STATX_BASIC_STATS },
                 sizeof(struct fuse_statx_in));
    test_req_add(r, "junkjunk", 8);
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmphex(out.stat.mask & STATX_BASIC_STATS, ==, STATX_BASIC_STATS);
    /* No room for the reply: an error that fits */
    r = test_req_new(FUSE_STATX, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_statx_in){ 0 },
                 sizeof(struct fuse_statx_in));
    g_assert_cmpint(test_send(t, r, sizeof(struct fuse_out_header) +
                              sizeof(out) - 1, NULL, 0, NULL), ==, -EIO);
}

/*
 * COPY_FILE_RANGE_64 takes any 64-bit length, and COPY_FILE_RANGE lengths
 * past what its 32-bit reply can say: neither copies more than it says.
 */
static void test_copy_range_lengths(TestFs *t, gconstpointer data)
{
    uint64_t fh, fh2;
    uint64_t ino = test_create(t, FUSE_ROOT_ID, "src", O_RDWR, &fh);
    uint64_t ino2 = test_create(t, FUSE_ROOT_ID, "dst", O_RDWR, &fh2);
    struct fuse_copy_file_range_in in = {
        .fh_in = fh, .nodeid_out = ino2, .fh_out = fh2,
    };
    static const uint64_t lens[] = {
        UINT64_MAX, (uint64_t)SSIZE_MAX + 1, 1ULL << 32, UINT32_MAX, 0,
    };
    struct fuse_copy_file_range_out out;
    struct fuse_write_out wout;
    unsigned int i;
    size_t len;
    TestReq *r;

    g_assert_cmpint(test_write(t, ino, fh, 0, "0123456789", 10), ==, 10);
    for (i = 0; i < G_N_ELEMENTS(lens); i++) {
        in.len = lens[i];
        r = test_req_new(FUSE_COPY_FILE_RANGE_64, ino);
        test_req_add(r, &in, sizeof(in));
        g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), &len), ==,
                        0);
        g_assert_cmpuint(len, ==, sizeof(out));
        g_assert_cmpuint(out.bytes_copied, ==, MIN(lens[i], 10));
        r = test_req_new(FUSE_COPY_FILE_RANGE, ino);
        test_req_add(r, &in, sizeof(in));
        g_assert_cmpint(test_send(t, r, 4096, &wout, sizeof(wout), &len), ==,
                        0);
        g_assert_cmpuint(len, ==, sizeof(wout));
        g_assert_cmpuint(wout.size, ==, MIN(lens[i], 10));
    }
    /* One byte short */
    r = test_req_new(FUSE_COPY_FILE_RANGE_64, ino);
    test_req_add(r, &in, sizeof(in) - 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    /* Flags past copy_file_range(2)'s unsigned int */
    in.len = 1;
    in.flags = 1ULL << 32;
    r = test_req_new(FUSE_COPY_FILE_RANGE_64, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
}

static void test_truncated_args(TestFs *t, gconstpointer data)
{
    static const uint32_t ops[] = {
        FUSE_GETATTR, FUSE_SETATTR, FUSE_MKNOD, FUSE_MKDIR, FUSE_RENAME,
        FUSE_RENAME2, FUSE_LINK, FUSE_OPEN, FUSE_READ, FUSE_WRITE,
        FUSE_RELEASE, FUSE_FSYNC, FUSE_SETXATTR, FUSE_GETXATTR,
        FUSE_LISTXATTR, FUSE_FLUSH, FUSE_OPENDIR, FUSE_READDIR,
        FUSE_RELEASEDIR, FUSE_FSYNCDIR, FUSE_GETLK, FUSE_SETLK, FUSE_SETLKW,
        FUSE_ACCESS, FUSE_CREATE, FUSE_FALLOCATE, FUSE_READDIRPLUS,
        FUSE_LSEEK, FUSE_COPY_FILE_RANGE, FUSE_SETUPMAPPING,
        FUSE_REMOVEMAPPING, FUSE_SYNCFS, FUSE_TMPFILE, FUSE_LOOKUP,
        FUSE_UNLINK, FUSE_RMDIR, FUSE_SYMLINK, FUSE_REMOVEXATTR,
        FUSE_STATX, FUSE_COPY_FILE_RANGE_64,
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        /* Three bytes of arguments: never enough */
        TestReq *r = test_req_new(ops[i], 1);

        test_req_add(r, "ab", 2);
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    }
}

static void test_no_reply_ops(TestFs *t, gconstpointer data)
{
    TestReq *r;
    struct fuse_batch_forget_in b = { .count = 1000 };
    struct fuse_forget_one one = { .nodeid = 12345, .nlookup = 1 };

    /* Truncated or bogus FORGETs: no reply and no harm */
    r = test_req_new(FUSE_FORGET, 999);
    test_req_add(r, "x", 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_BATCH_FORGET, 0);
    test_req_add(r, &b, sizeof(b));
    test_req_add(r, &one, sizeof(one));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_INTERRUPT, 0);
    test_req_add(r, &(uint64_t){ 1 }, 8);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    /* The root cannot be forgotten */
    r = test_req_new(FUSE_FORGET, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_forget_in){ .nlookup = 100 },
                 sizeof(struct fuse_forget_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    test_lookup_err(t, FUSE_ROOT_ID, "nothing");
}

static void test_bad_names(TestFs *t, gconstpointer data)
{
    static const char *const names[] = {
        "..", ".", "", "a/b", "/", "../etc", "a/../../b",
    };
    char longname[PATH_MAX + 2];
    unsigned int i;
    TestReq *r;

    for (i = 0; i < G_N_ELEMENTS(names); i++) {
        g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, names[i]), ==,
                        -EINVAL);
    }
    /* Well-formed but too long: the host's answer, not a decoding error */
    memset(longname, 'a', sizeof(longname) - 1);
    longname[NAME_MAX + 1] = '\0';
    g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, longname), ==,
                    -ENAMETOOLONG);
    longname[NAME_MAX + 1] = 'a';
    longname[sizeof(longname) - 1] = '\0';
    g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, longname), ==,
                    -ENAMETOOLONG);

    /* A name without its NUL, short or long */
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add(r, "passwd", 6);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add(r, longname, sizeof(longname) - 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add(r, longname, 1000);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    /* A NUL past the announced length does not count */
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    for (i = 0; i < 5; i++) {
        test_req_add(r, longname, 1000);
    }
    test_req_add(r, "", 1);
    ((struct fuse_in_header *)r->data->data)->len = r->data->len - 1;
    g_assert_cmpint(test_send_raw(t, r->data->data, r->data->len, 4096,
                                  NULL, 0, NULL), ==, -EINVAL);
    g_byte_array_free(r->data, true);
    g_free(r);

    /* Creating names that climb out */
    r = test_req_new(FUSE_MKDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, "../escaped");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    g_assert_cmpint(access("../escaped", F_OK), !=, 0);

    /* A rename whose second name is missing */
    r = test_req_new(FUSE_RENAME, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_rename_in){ .newdir = 1 },
                 sizeof(struct fuse_rename_in));
    test_req_add_str(r, "a");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
}

static void test_symlink_escape(TestFs *t, gconstpointer data)
{
    struct fuse_attr attr;
    uint64_t link, ino;
    TestReq *r;
    char buf[64];
    size_t len;

    g_assert_cmpint(symlinkat("/etc", t->dir_fd, "out"), ==, 0);
    g_assert_cmpint(symlinkat("../../../../etc/passwd", t->dir_fd, "pw"),
                    ==, 0);

    /* The link itself, never what it points to */
    link = test_lookup(t, FUSE_ROOT_ID, "out", &attr);
    g_assert_true(S_ISLNK(attr.mode));
    g_assert_cmpint(test_lookup_err(t, link, "passwd"), ==, -ENOTDIR);

    ino = test_lookup(t, FUSE_ROOT_ID, "pw", &attr);
    g_assert_true(S_ISLNK(attr.mode));
    /* Opening a symlink inode does not follow it */
    r = test_req_new(FUSE_OPEN, ino);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENXIO);
    r = test_req_new(FUSE_OPENDIR, link);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOTDIR);

    /* Reading it gives the text, for the guest to resolve in its tree */
    r = test_req_new(FUSE_READLINK, ino);
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "../../../../etc/passwd", 22);

    /* Creating through a symlinked directory name fails */
    r = test_req_new(FUSE_MKDIR, link);
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, "x");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOTDIR);
}

static void test_special_files_not_opened(TestFs *t, gconstpointer data)
{
    uint64_t fifo, fh;
    TestReq *r;

    /* CVE-2020-35517: a FIFO or device node must never be opened */
    g_assert_cmpint(mkfifoat(t->dir_fd, "fifo", 0666), ==, 0);
    fifo = test_lookup(t, FUSE_ROOT_ID, "fifo", NULL);
    r = test_req_new(FUSE_OPEN, fifo);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDWR },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENXIO);

    /* CREATE without O_EXCL on an existing FIFO must not block on it */
    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDONLY,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "fifo");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENXIO);

    /* Setting a size on it does not open it either */
    r = test_req_new(FUSE_SETATTR, fifo);
    test_req_add(r, &(struct fuse_setattr_in){ .valid = FATTR_SIZE },
                 sizeof(struct fuse_setattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* A regular file still works */
    test_create(t, FUSE_ROOT_ID, "reg", O_RDWR, &fh);
}

static void test_write_length_lies(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    struct fuse_write_in in = { .fh = fh, .size = 100 };
    struct stat st;
    TestReq *r;

    /* Claims 100 bytes of data, carries 10 */
    r = test_req_new(FUSE_WRITE, ino);
    test_req_add(r, &in, sizeof(in));
    test_req_add(r, "0123456789", 10);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    g_assert_cmpint(fstatat(t->dir_fd, "f", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);

    /* Offsets that overflow */
    in.size = 10;
    in.offset = UINT64_MAX - 5;
    r = test_req_new(FUSE_WRITE, ino);
    test_req_add(r, &in, sizeof(in));
    test_req_add(r, "0123456789", 10);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* Unknown handles */
    in.offset = 0;
    in.fh = fh + 1000;
    r = test_req_new(FUSE_WRITE, ino);
    test_req_add(r, &in, sizeof(in));
    test_req_add(r, "0123456789", 10);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EBADF);
}

static void test_read_small_buffer(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    struct fuse_read_in in = { .fh = fh, .size = 1 << 20 };
    char buf[64];
    size_t len;
    TestReq *r;

    g_assert_cmpint(test_write(t, ino, fh, 0, "abcdefghij", 10), ==, 10);
    /* The guest asks for 1 MiB but gives room for 4 bytes: 4 it gets */
    r = test_req_new(FUSE_READ, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, sizeof(struct fuse_out_header) + 4, buf,
                              sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "abcd", 4);

    /* A reply that does not fit becomes an error */
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, sizeof(struct fuse_out_header) + 8,
                              NULL, 0, NULL), ==, -EIO);
}

static void test_segmented(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino;
    struct fuse_read_in in;
    char buf[64];
    size_t len;
    TestReq *r;

    /* Every byte its own descriptor, half of them out of reach */
    t->seg_size = GPOINTER_TO_UINT(data);
    t->unmapped_odd = true;
    ino = test_create(t, FUSE_ROOT_ID, "seg", O_RDWR, &fh);
    g_assert_cmpint(test_write(t, ino, fh, 0, "segmented data", 14), ==, 14);
    in = (struct fuse_read_in) { .fh = fh, .size = 64 };
    r = test_req_new(FUSE_READ, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "segmented data", 14);
    g_assert_cmpuint(test_lookup(t, FUSE_ROOT_ID, "seg", NULL), ==, ino);
}

static void test_fd_limit(TestFs *t, gconstpointer data)
{
    char name[16];
    int i, fd;

    /* CVE-2020-10717: lookups stop at the limit, with an error */
    for (i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        fd = openat(t->dir_fd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        g_assert_cmpint(fd, >=, 0);
        close(fd);
    }
    t->fs.fds_max = g_atomic_int_get(&t->fs.fds_open) + 10;
    for (i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        test_lookup(t, FUSE_ROOT_ID, name, NULL);
    }
    g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, "f15"), ==, -ENFILE);
    /* The check comes before the open, even for an inode we hold */
    g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, "f3"), ==, -ENFILE);
}

/*
 * The hiprio queue is served in its queue thread: only the requests that
 * cannot block are run there, anything else is refused unrun.
 */
static void test_hiprio_queue(TestFs *t, gconstpointer data)
{
    struct fuse_getattr_in gin = { 0 };
    struct fuse_forget_in fin = { .nlookup = 1 };
    struct fuse_interrupt_in iin = { .unique = 12345 };
    struct fuse_lk_in lin = {
        .owner = 1,
        .lk = { .start = 0, .end = 99, .type = F_WRLCK },
    };
    struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    uint64_t ino, fh;
    TestReq *r;
    int fd;

    ino = test_create(t, FUSE_ROOT_ID, "locked", O_RDWR, &fh);
    t->hiprio = true;

    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* Neither run nor waited for: the range stays free on the host */
    lin.fh = fh;
    r = test_req_new(FUSE_SETLKW, ino);
    test_req_add(r, &lin, sizeof(lin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &lin, sizeof(lin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    fd = openat(t->dir_fd, "locked", O_RDWR | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &l), ==, 0);
    g_assert_cmpint(l.l_type, ==, F_UNLCK);
    close(fd);

    /* An INIT there is refused too, even as the first request */
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &(struct fuse_init_in){ .major = 7, .minor = 41 },
                 sizeof(struct fuse_init_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* What belongs there is served, without a reply */
    r = test_req_new(FUSE_INTERRUPT, 0);
    test_req_add(r, &iin, sizeof(iin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_FORGET, ino);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);

    /* The forget took: the create's lookup was the only one */
    t->hiprio = false;
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);
}

/*
 * The guest may rewrite a request while the daemon decodes it: no byte
 * may be read twice, or a check could pass on one value and the work be
 * done on another (test_mem() counts the reads).
 */
static void test_read_once(TestFs *t, gconstpointer data)
{
    struct fuse_mknod_in mk = { .mode = S_IFREG | 0644 };
    struct fuse_mkdir_in md = { .mode = 0755 };
    struct fuse_rename2_in rn = { .newdir = FUSE_ROOT_ID };
    struct fuse_link_in ln = { 0 };
    struct fuse_setxattr_in sx = { .size = 5 };
    struct fuse_getxattr_in gx = { .size = 64 };
    struct fuse_read_in rd = { .size = 64 };
    struct fuse_lk_in lk = {
        .owner = 7,
        .lk = { .start = 0, .end = 9, .type = F_WRLCK },
    };
    struct fuse_batch_forget_in bf = { .count = 2 };
    struct fuse_forget_one one[2];
    uint64_t ino, fh, sub;
    char buf[256];
    size_t len;
    TestReq *r;

    t->read_once = true;
    t->seg_size = GPOINTER_TO_UINT(data);
    ino = test_create(t, FUSE_ROOT_ID, "once", O_RDWR, &fh);
    g_assert_cmpint(test_write(t, ino, fh, 0, "read once", 9), ==, 9);
    rd.fh = fh;
    r = test_req_new(FUSE_READ, ino);
    test_req_add(r, &rd, sizeof(rd));
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "read once", 9);

    r = test_req_new(FUSE_SYMLINK, FUSE_ROOT_ID);
    test_req_add_str(r, "link");
    test_req_add_str(r, "once");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_MKNOD, FUSE_ROOT_ID);
    test_req_add(r, &mk, sizeof(mk));
    test_req_add_str(r, "node");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_MKDIR, FUSE_ROOT_ID);
    test_req_add(r, &md, sizeof(md));
    test_req_add_str(r, "dir");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    sub = test_lookup(t, FUSE_ROOT_ID, "dir", NULL);
    r = test_req_new(FUSE_RENAME2, FUSE_ROOT_ID);
    test_req_add(r, &rn, sizeof(rn));
    test_req_add_str(r, "node");
    test_req_add_str(r, "node2");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    ln.oldnodeid = ino;
    r = test_req_new(FUSE_LINK, sub);
    test_req_add(r, &ln, sizeof(ln));
    test_req_add_str(r, "hard");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);

    r = test_req_new(FUSE_SETXATTR, ino);
    /* No FUSE_SETXATTR_EXT in this session */
    test_req_add(r, &sx, FUSE_COMPAT_SETXATTR_IN_SIZE);
    test_req_add_str(r, "user.once");
    test_req_add(r, "value", 5);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &gx, sizeof(gx));
    test_req_add_str(r, "user.once");
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "value", 5);

    lk.fh = fh;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &lk, sizeof(lk));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);

    one[0] = (struct fuse_forget_one) { .nodeid = sub, .nlookup = 1 };
    one[1] = (struct fuse_forget_one) { .nodeid = ino, .nlookup = 1 };
    r = test_req_new(FUSE_BATCH_FORGET, 0);
    test_req_add(r, &bf, sizeof(bf));
    test_req_add(r, one, sizeof(one));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
}

/*
 * The transport decides where a request runs from the header it read;
 * what runs must be that request, whatever the guest wrote meanwhile.
 */
static void test_header_flip(TestFs *t, gconstpointer data)
{
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in in;
    } req = {
        .h = {
            .len = sizeof(req),
            .opcode = FUSE_GETATTR,
            .unique = 77,
            .nodeid = FUSE_ROOT_ID,
        },
    };
    struct {
        struct fuse_out_header h;
        struct fuse_attr_out a;
    } rep = { 0 };
    VfsdSeg in_seg = { .base = &req, .len = sizeof(req) };
    VfsdSeg out_seg = { .base = &rep, .len = sizeof(rep) };
    VfsdReqHead head;
    VfsdBuf ib, ob;

    vfsd_buf_init(&ib, &in_seg, 1, NULL, NULL);
    vfsd_buf_init(&ob, &out_seg, 1, NULL, NULL);
    vfsd_request_head(&ib, &head);
    g_assert_false(vfsd_request_may_block(&head));
    /* Now a SETLKW for an unknown handle, which would fail with EBADF */
    req.h.opcode = FUSE_SETLKW;
    req.h.len = 1000;
    req.h.unique = 78;
    g_assert_cmpuint(vfsd_process_request(&t->fs, &head, &ib, &ob), ==,
                     sizeof(rep));
    g_assert_cmpint(rep.h.error, ==, 0);
    g_assert_cmpuint(rep.h.unique, ==, 77);
    g_assert_true(S_ISDIR(rep.a.attr.mode));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);

#define ADD(path, fn) \
    g_test_add("/virtiofsd/decode/" path, TestFs, NULL, setup, fn, teardown)

    g_test_add_func("/virtiofsd/decode/before-init", test_before_init);
    g_test_add_func("/virtiofsd/decode/init", test_init);
    ADD("truncated-header", test_truncated_header);
    ADD("header-length-lies", test_header_length_lies);
    ADD("unknown-opcodes", test_unknown_opcodes);
    ADD("truncated-args", test_truncated_args);
    g_test_add_func("/virtiofsd/decode/unserved-logged-once",
                    test_unserved_logged_once);
    ADD("statx", test_statx_decode);
    ADD("copy-range-lengths", test_copy_range_lengths);
    ADD("no-reply-ops", test_no_reply_ops);
    ADD("bad-names", test_bad_names);
    ADD("symlink-escape", test_symlink_escape);
    ADD("special-files-not-opened", test_special_files_not_opened);
    ADD("write-length-lies", test_write_length_lies);
    ADD("read-small-buffer", test_read_small_buffer);
    ADD("fd-limit", test_fd_limit);
    ADD("hiprio-queue", test_hiprio_queue);
    g_test_add("/virtiofsd/decode/segmented/1", TestFs, GUINT_TO_POINTER(1),
               setup, test_segmented, teardown);
    g_test_add("/virtiofsd/decode/segmented/7", TestFs, GUINT_TO_POINTER(7),
               setup, test_segmented, teardown);
    g_test_add("/virtiofsd/decode/read-once/whole", TestFs,
               GUINT_TO_POINTER(0), setup, test_read_once, teardown);
    g_test_add("/virtiofsd/decode/read-once/3", TestFs, GUINT_TO_POINTER(3),
               setup, test_read_once, teardown);
    ADD("header-flip", test_header_flip);
    return g_test_run();
}
