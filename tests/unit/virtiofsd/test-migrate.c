/*
 * virtiofsd tests: the migration state stream, saved by one file system
 * and loaded by another on the same directory
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vfsd-test.h"
#include "migrate.h"
#include "migstream.h"

/* A second daemon's file system on the source's directory */
static void dest_setup(TestFs *d, TestFs *src, VfsdMigOnError policy)
{
    VfsdOptions opts = src->opts;

    opts.migration_on_error = policy;
    test_fs_setup_peer(d, src, &opts);
}

static void dest_teardown(TestFs *d)
{
    vfsd_migrate_free(&d->fs);
    test_fs_teardown_peer(d);
}

static int getattr(TestFs *t, uint64_t nodeid)
{
    TestReq *r = test_req_new(FUSE_GETATTR, nodeid);
    struct fuse_getattr_in in = { 0 };
    struct fuse_attr_out out;

    test_req_add(r, &in, sizeof(in));
    return test_send(t, r, 4096, &out, sizeof(out), NULL);
}

static int read_fh(TestFs *t, uint64_t nodeid, uint64_t fh, char *buf,
                   size_t size, size_t *len)
{
    TestReq *r = test_req_new(FUSE_READ, nodeid);
    struct fuse_read_in in = { .fh = fh, .size = size };

    test_req_add(r, &in, sizeof(in));
    return test_send(t, r, 4096, buf, size, len);
}

static int setlk(TestFs *t, uint64_t nodeid, uint64_t fh, uint64_t owner,
                 uint32_t type)
{
    TestReq *r = test_req_new(FUSE_SETLK, nodeid);
    struct fuse_lk_in in = {
        .fh = fh, .owner = owner,
        .lk = { .start = 10, .end = 19, .type = type },
    };

    test_req_add(r, &in, sizeof(in));
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static uint64_t opendir_fh(TestFs *t, uint64_t nodeid)
{
    TestReq *r = test_req_new(FUSE_OPENDIR, nodeid);
    struct fuse_open_out o;

    test_req_add(r, &(struct fuse_open_in){ 0 }, sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &o, sizeof(o), NULL), ==, 0);
    return o.fh;
}

/* Names READDIR gives from @off on, one per call; the next offset */
static int readdir_one(TestFs *t, uint64_t nodeid, uint64_t fh,
                       uint64_t *off, char *name)
{
    TestReq *r = test_req_new(FUSE_READDIR, nodeid);
    struct fuse_read_in in = { .fh = fh, .offset = *off, .size = 64 };
    uint8_t buf[256];
    struct fuse_dirent *d = (void *)buf;
    size_t len;
    int ret;

    test_req_add(r, &in, sizeof(in));
    ret = test_send(t, r, 4096, buf, sizeof(buf), &len);
    if (ret < 0 || !len) {
        return ret < 0 ? ret : 0;
    }
    memcpy(name, d->name, d->namelen);
    name[d->namelen] = 0;
    *off = d->off;
    return 1;
}

/*
 * Whether another open file description could take a write lock on
 * @len bytes at @at
 */
static bool host_range_free(TestFs *t, const char *path, off_t at, off_t len)
{
    struct flock l = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = len,
    };
    int fd = openat(t->dir_fd, path, O_RDWR);
    bool free_;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &l), ==, 0);
    free_ = l.l_type == F_UNLCK;
    close(fd);
    return free_;
}

/* The same for the bytes setlk() locks */
static bool host_lock_free(TestFs *t, const char *path)
{
    return host_range_free(t, path, 10, 10);
}

/* Whether another open file description could take an exclusive flock */
static bool host_flock_free(TestFs *t, const char *path)
{
    int fd = openat(t->dir_fd, path, O_RDONLY);
    bool free_;

    g_assert_cmpint(fd, >=, 0);
    free_ = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return free_;
}

static int setflock(TestFs *t, uint64_t nodeid, uint64_t fh, uint32_t type)
{
    TestReq *r = test_req_new(FUSE_SETLK, nodeid);
    struct fuse_lk_in in = {
        .fh = fh, .owner = 9, .lk_flags = FUSE_LK_FLOCK,
        .lk = { .type = type },
    };

    test_req_add(r, &in, sizeof(in));
    return test_send(t, r, 4096, NULL, 0, NULL);
}

/* What the guest of the tests holds when the source saves */
typedef struct Held {
    uint64_t dir, file, file_fh, dir_fh, other, other_fh;
    uint64_t dir_off;
    char first[64];
} Held;

static GByteArray *source_state(TestFs *s, Held *h)
{
    g_autofree char *err = NULL;
    GByteArray *buf;
    int dfd;

    test_fs_init_session(s, FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS);
    g_assert_cmpint(mkdirat(s->dir_fd, "d", 0755), ==, 0);
    dfd = openat(s->dir_fd, "d", O_RDONLY | O_DIRECTORY);
    g_assert_cmpint(dfd, >=, 0);
    g_assert_cmpint(close(openat(dfd, "a", O_CREAT | O_WRONLY, 0644)), ==, 0);
    g_assert_cmpint(close(openat(dfd, "b", O_CREAT | O_WRONLY, 0644)), ==, 0);
    g_assert_cmpint(close(openat(s->dir_fd, "other", O_CREAT | O_WRONLY,
                                 0644)), ==, 0);
    close(dfd);

    h->dir = test_lookup(s, FUSE_ROOT_ID, "d", NULL);
    h->file = test_create(s, h->dir, "f", O_RDWR, &h->file_fh);
    g_assert_cmpint(test_write(s, h->file, h->file_fh, 0, "hello", 5), ==, 5);
    h->other = test_lookup(s, FUSE_ROOT_ID, "other", NULL);
    /* A BSD lock on a handle of its own */
    h->other_fh = test_open(s, h->other, O_RDONLY);
    g_assert_cmpint(setflock(s, h->other, h->other_fh, F_WRLCK), ==, 0);
    g_assert_false(host_flock_free(s, "other"));
    g_assert_cmpint(setlk(s, h->file, h->file_fh, 42, F_WRLCK), ==, 0);
    g_assert_false(host_lock_free(s, "d/f"));
    h->dir_fh = opendir_fh(s, h->dir);
    /* A listing begun: the guest resumes it from the offset it has */
    h->dir_off = 0;
    g_assert_cmpint(readdir_one(s, h->dir, h->dir_fh, &h->dir_off, h->first),
                    ==, 1);

    buf = vfsd_migrate_save(&s->fs, &err);
    g_assert_nonnull(buf);
    g_assert_null(err);
    return buf;
}

static void test_round_trip(void)
{
    g_autoptr(GByteArray) buf = NULL;
    g_autoptr(GHashTable) names = g_hash_table_new_full(g_str_hash,
                                                        g_str_equal,
                                                        g_free, NULL);
    g_autofree char *err = NULL;
    TestFs s, d;
    Held h;
    char data[16], name[64];
    size_t len;
    uint64_t off, again;

    test_fs_setup(&s, NULL);
    buf = source_state(&s, &h);
    /* The source let the locks go for the destination to take */
    g_assert_true(host_lock_free(&s, "d/f"));
    g_assert_true(host_flock_free(&s, "other"));

    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_null(err);
    g_assert_true(d.fs.conn.initialized);
    g_assert_true(d.fs.conn.flags & FUSE_POSIX_LOCKS);

    /* The same nodeids and handles reach the same files */
    g_assert_cmpint(getattr(&d, h.dir), ==, 0);
    g_assert_cmpint(getattr(&d, h.other), ==, 0);
    g_assert_cmpint(read_fh(&d, h.file, h.file_fh, data, sizeof(data), &len),
                    ==, 0);
    g_assert_cmpmem(data, len, "hello", 5);
    g_assert_cmpint(test_write(&d, h.file, h.file_fh, 5, " world", 6), ==, 6);
    g_assert_cmpint(read_fh(&d, h.file, h.file_fh, data, sizeof(data), &len),
                    ==, 0);
    g_assert_cmpmem(data, len, "hello world", 11);
    /* The lock moved: held on the host again, by the destination */
    g_assert_false(host_lock_free(&s, "d/f"));
    g_assert_cmpint(setlk(&d, h.file, h.file_fh, 43, F_WRLCK), ==, -EAGAIN);
    g_assert_cmpint(setlk(&d, h.file, h.file_fh, 42, F_UNLCK), ==, 0);
    g_assert_true(host_lock_free(&s, "d/f"));
    g_assert_false(host_flock_free(&s, "other"));
    g_assert_cmpint(setflock(&d, h.other, h.other_fh, F_UNLCK), ==, 0);
    g_assert_true(host_flock_free(&s, "other"));

    /* The listing goes on where it was: each name once */
    g_hash_table_add(names, g_strdup(h.first));
    off = h.dir_off;
    while (readdir_one(&d, h.dir, h.dir_fh, &off, name) == 1) {
        g_assert_false(g_hash_table_contains(names, name));
        g_hash_table_add(names, g_strdup(name));
    }
    g_assert_true(g_hash_table_contains(names, "a"));
    g_assert_true(g_hash_table_contains(names, "b"));
    g_assert_true(g_hash_table_contains(names, "f"));

    /* New nodeids and handles never collide with the guest's */
    again = test_lookup(&d, h.dir, "a", NULL);
    g_assert_cmpuint(again, >, MAX(h.file, MAX(h.dir, h.other)));
    g_assert_cmpuint(test_open(&d, again, O_RDONLY), >,
                     MAX(h.file_fh, h.dir_fh));

    dest_teardown(&d);
    test_fs_teardown(&s);
}

/* FUSE_SETLK of @owner's @type lock on [start, end] (end inclusive) */
static int setlk_range(TestFs *t, uint64_t nodeid, uint64_t fh,
                       uint64_t owner, uint32_t type, uint64_t start,
                       uint64_t end)
{
    TestReq *r = test_req_new(FUSE_SETLK, nodeid);
    struct fuse_lk_in in = {
        .fh = fh, .owner = owner,
        .lk = { .start = start, .end = end, .type = type },
    };

    test_req_add(r, &in, sizeof(in));
    return test_send(t, r, 4096, NULL, 0, NULL);
}


/*
 * One owner with many lock ranges: the kernel lists them all in the
 * fdinfo of the owner's open file description, a line each, far more
 * than a page; every one must reach the destination.
 */
#define MANY_LOCKS 500
/* Every other byte, far apart: the kernel cannot merge two ranges */
#define MANY_AT(i) (1000000 + 2 * (uint64_t)(i))

static void test_many_locks(void)
{
    g_autoptr(GByteArray) buf = NULL;
    g_autofree char *err = NULL;
    TestFs s, d;
    uint64_t file, fh;
    unsigned int i, held = 0;

    test_fs_setup(&s, NULL);
    test_fs_init_session(&s, FUSE_POSIX_LOCKS);
    file = test_create(&s, FUSE_ROOT_ID, "many", O_RDWR, &fh);
    for (i = 0; i < MANY_LOCKS; i++) {
        g_assert_cmpint(setlk_range(&s, file, fh, 42, F_WRLCK, MANY_AT(i),
                                    MANY_AT(i)), ==, 0);
    }
    g_assert_false(host_range_free(&s, "many", MANY_AT(MANY_LOCKS - 1), 1));
    buf = vfsd_migrate_save(&s.fs, &err);
    g_assert_nonnull(buf);
    /* The source let them all go */
    g_assert_true(host_range_free(&s, "many", MANY_AT(0), 1));
    g_assert_true(host_range_free(&s, "many", MANY_AT(MANY_LOCKS - 1), 1));

    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_null(err);
    for (i = 0; i < MANY_LOCKS; i++) {
        held += !host_range_free(&s, "many", MANY_AT(i), 1);
        /* The gaps stay free: the ranges came back as they were */
        g_assert_true(host_range_free(&s, "many", MANY_AT(i) + 1, 1));
    }
    g_assert_cmpuint(held, ==, MANY_LOCKS);
    /* Held for the guest's owner, by the destination */
    g_assert_cmpint(setlk_range(&d, file, fh, 43, F_WRLCK,
                                MANY_AT(MANY_LOCKS - 1),
                                MANY_AT(MANY_LOCKS - 1)), ==, -EAGAIN);
    dest_teardown(&d);
    test_fs_teardown(&s);
}

/*
 * The file the guest holds is gone on the destination: abort fails the
 * load; guest-error finishes it, and only that file gives EIO.
 */
static void test_missing_file(void)
{
    g_autoptr(GByteArray) buf = NULL;
    TestFs s, d;
    Held h;
    char data[16];
    size_t len;

    test_fs_setup(&s, NULL);
    buf = source_state(&s, &h);
    /* Still open on the source: the file goes from the directory only */
    g_assert_cmpint(unlinkat(s.dir_fd, "other", 0), ==, 0);

    {
        g_autofree char *err = NULL;

        dest_setup(&d, &s, VFSD_MIG_ABORT);
        g_assert_false(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
        g_assert_nonnull(strstr(err, "other"));
        dest_teardown(&d);
    }
    {
        g_autofree char *err = NULL;

        dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
        g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
        g_assert_cmpint(getattr(&d, h.other), ==, -EIO);
        g_assert_cmpint(getattr(&d, h.dir), ==, 0);
        g_assert_cmpint(read_fh(&d, h.file, h.file_fh, data, sizeof(data),
                                &len), ==, 0);
        g_assert_cmpmem(data, len, "hello", 5);
        dest_teardown(&d);
    }
    test_fs_teardown(&s);
}

/*
 * A file renamed behind the source's back keeps its nodeid: its path is
 * found again.  Unlinked under its first name but linked elsewhere, /proc
 * has no path for it and the directory is searched.
 */
static void test_find_paths(void)
{
    g_autoptr(GByteArray) buf = NULL;
    g_autofree char *err = NULL;
    TestFs s, d;
    uint64_t moved, linked, x, y;

    test_fs_setup(&s, NULL);
    test_fs_init_session(&s, 0);
    g_assert_cmpint(mkdirat(s.dir_fd, "x", 0755), ==, 0);
    g_assert_cmpint(mkdirat(s.dir_fd, "x/y", 0755), ==, 0);
    g_assert_cmpint(close(openat(s.dir_fd, "m", O_CREAT | O_WRONLY, 0644)),
                    ==, 0);
    g_assert_cmpint(close(openat(s.dir_fd, "l", O_CREAT | O_WRONLY, 0644)),
                    ==, 0);
    moved = test_lookup(&s, FUSE_ROOT_ID, "m", NULL);
    linked = test_lookup(&s, FUSE_ROOT_ID, "l", NULL);
    g_assert_cmpint(renameat(s.dir_fd, "m", s.dir_fd, "x/m2"), ==, 0);
    g_assert_cmpint(linkat(s.dir_fd, "l", s.dir_fd, "x/y/l2", 0), ==, 0);
    g_assert_cmpint(unlinkat(s.dir_fd, "l", 0), ==, 0);

    buf = vfsd_migrate_save(&s.fs, &err);
    g_assert_nonnull(buf);
    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_cmpint(getattr(&d, moved), ==, 0);
    g_assert_cmpint(getattr(&d, linked), ==, 0);
    /* The very files: a lookup of their new names gives the same nodeid */
    x = test_lookup(&d, FUSE_ROOT_ID, "x", NULL);
    g_assert_cmpuint(test_lookup(&d, x, "m2", NULL), ==, moved);
    y = test_lookup(&d, x, "y", NULL);
    g_assert_cmpuint(test_lookup(&d, y, "l2", NULL), ==, linked);
    dest_teardown(&d);
    test_fs_teardown(&s);
}

/*
 * --migration-mode=file-handles: inodes go by file handle alone.  Where
 * no path leads to the file any more (an open file unlinked on the
 * host), nothing shows the handle is one of the shared directory's: it
 * is not restored (see test_forged_handles()).
 * --migration-verify-handles: a file replaced under its path is found out.
 */
static void test_file_handles(void)
{
    g_autoptr(GByteArray) buf = NULL;
    g_autofree char *err = NULL;
    TestFs s, d;
    Held h;
    char data[16];
    size_t len;

    test_fs_setup(&s, NULL);
    s.opts.migration_mode = VFSD_MIG_FILE_HANDLES;
    buf = source_state(&s, &h);
    /* Renamed on the host: the handle still names it */
    g_assert_cmpint(renameat(s.dir_fd, "d/f", s.dir_fd, "moved"), ==, 0);
    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_cmpint(read_fh(&d, h.file, h.file_fh, data, sizeof(data), &len),
                    ==, 0);
    g_assert_cmpmem(data, len, "hello", 5);
    g_assert_cmpint(getattr(&d, h.other), ==, 0);
    dest_teardown(&d);
    /* Still open on the source, so its handle still opens, but unlinked */
    g_assert_cmpint(unlinkat(s.dir_fd, "moved", 0), ==, 0);
    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_false(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_nonnull(strstr(err, "names no file under the shared"));
    g_clear_pointer(&err, g_free);
    dest_teardown(&d);
    test_fs_teardown(&s);

    test_fs_setup(&s, NULL);
    s.opts.migration_verify_handles = true;
    g_clear_pointer(&buf, g_byte_array_unref);
    buf = source_state(&s, &h);
    /* "other" is replaced by a new file of the same name */
    g_assert_cmpint(unlinkat(s.dir_fd, "other", 0), ==, 0);
    g_assert_cmpint(close(openat(s.dir_fd, "other", O_CREAT | O_WRONLY,
                                 0644)), ==, 0);
    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_false(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_nonnull(strstr(err, "another file"));
    dest_teardown(&d);
    test_fs_teardown(&s);
}

/* Every truncation of a good stream is refused, none crashes */
static void test_truncated(void)
{
    g_autoptr(GByteArray) buf = NULL;
    TestFs s, d;
    Held h;
    guint len;

    test_fs_setup(&s, NULL);
    buf = source_state(&s, &h);
    for (len = 0; len < buf->len; len++) {
        g_autofree char *err = NULL;
        /* Exactly @len bytes: a read past them is one valgrind sees */
        g_autofree uint8_t *cut = g_memdup2(buf->data, len);

        dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
        g_assert_false(vfsd_migrate_load(&d.fs, cut, len, &err));
        g_assert_nonnull(err);
        dest_teardown(&d);
    }
    test_fs_teardown(&s);
}

/*
 * Each byte of a good stream flipped: loads fail or succeed, but never
 * crash, hang or leak (run under ASan/valgrind to see the last).  The
 * header, section framing and counts must fail.
 */
static void test_corrupt(void)
{
    g_autoptr(GByteArray) buf = NULL;
    TestFs s, d;
    Held h;
    guint i, failed = 0;

    test_fs_setup(&s, NULL);
    buf = source_state(&s, &h);
    for (i = 0; i < buf->len; i++) {
        g_autofree char *err = NULL;
        g_autofree uint8_t *bad = g_memdup2(buf->data, buf->len);
        bool ok;

        bad[i] ^= 0xff;
        dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
        ok = vfsd_migrate_load(&d.fs, bad, buf->len, &err);
        g_assert_true(ok == !err);
        /* Magic, version, first section's type and length */
        if (i < 32) {
            g_assert_false(ok);
        }
        failed += !ok;
        dest_teardown(&d);
    }
    g_assert_cmpuint(failed, >, 32);
    test_fs_teardown(&s);
}

/* A stream of one inode section with the record the caller writes */
typedef void (*InodeRec)(VfsdMigWriter *w);

static bool load_crafted(TestFs *s, InodeRec rec, uint32_t extra_type,
                         uint32_t extra_flags, char **err)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    VfsdMigWriter w = { .buf = buf };
    size_t len_at;
    TestFs d;
    bool ok;

    vfsd_mig_put_bytes(&w, VFSD_MIG_MAGIC, VFSD_MIG_MAGIC_LEN);
    vfsd_mig_put_u32(&w, VFSD_MIG_VERSION);
    vfsd_mig_put_u32(&w, 0);
    vfsd_mig_put_u32(&w, VFSD_MIG_SEC_INODES);
    vfsd_mig_put_u32(&w, 0);
    len_at = vfsd_mig_tell(&w);
    vfsd_mig_put_u64(&w, 0);
    rec(&w);
    vfsd_mig_patch_u64(&w, len_at, vfsd_mig_tell(&w) - len_at - 8);
    if (extra_type) {
        vfsd_mig_put_u32(&w, extra_type);
        vfsd_mig_put_u32(&w, extra_flags);
        vfsd_mig_put_u64(&w, 4);
        vfsd_mig_put_u32(&w, 0);
    }
    vfsd_mig_put_u32(&w, VFSD_MIG_SEC_END);
    vfsd_mig_put_u32(&w, 0);
    vfsd_mig_put_u64(&w, 0);

    dest_setup(&d, s, VFSD_MIG_ABORT);
    ok = vfsd_migrate_load(&d.fs, buf->data, buf->len, err);
    dest_teardown(&d);
    return ok;
}

static void inode_rec(VfsdMigWriter *w, const char *path, uint32_t type)
{
    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u64(w, 5);
    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u32(w, type);
    vfsd_mig_put_u32(w, 1);
    vfsd_mig_put_blob(w, path, strlen(path));
}

static void rec_good(VfsdMigWriter *w)
{
    inode_rec(w, "sub/file", S_IFREG);
}

static void rec_dotdot(VfsdMigWriter *w)
{
    inode_rec(w, "sub/../../etc/passwd", S_IFREG);
}

static void rec_absolute(VfsdMigWriter *w)
{
    inode_rec(w, "/etc/passwd", S_IFREG);
}

static void rec_through_symlink(VfsdMigWriter *w)
{
    inode_rec(w, "up/etc/passwd", S_IFREG);
}

static void rec_wrong_type(VfsdMigWriter *w)
{
    inode_rec(w, "sub", S_IFREG);
}

static void rec_huge_count(VfsdMigWriter *w)
{
    vfsd_mig_put_u64(w, 1ULL << 60);
}

static void rec_root(VfsdMigWriter *w)
{
    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u64(w, FUSE_ROOT_ID);
    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u32(w, S_IFDIR);
    vfsd_mig_put_u32(w, 1);
    vfsd_mig_put_blob(w, "sub", 3);
}

/* Paths and records a hostile stream could carry */
static void test_hostile(void)
{
    TestFs s;
    static const struct {
        const char *name;
        InodeRec rec;
        uint32_t extra_type, extra_flags;
        bool ok;
        const char *why;        /* in the error, when not NULL */
    } cases[] = {
        { "good", rec_good, 0, 0, true },
        { "dotdot", rec_dotdot, 0, 0, false, "bad inode record" },
        { "absolute", rec_absolute, 0, 0, false, "bad inode record" },
        { "symlink", rec_through_symlink, 0, 0, false, "cannot open" },
        { "wrong type", rec_wrong_type, 0, 0, false },
        { "huge count", rec_huge_count, 0, 0, false, "bad inode count" },
        { "root", rec_root, 0, 0, false },
        { "optional unknown section", rec_good, 77,
          VFSD_MIG_SEC_OPTIONAL, true },
        { "mandatory unknown section", rec_good, 77, 0, false },
        { "dax section unsupported", rec_good, VFSD_MIG_SEC_DAX, 0, false },
        { "section out of order", rec_good, VFSD_MIG_SEC_SESSION, 0, false },
        /*
         * A path is checked as the bytes it has: the stream after it (here
         * "/..", then a NUL) is not part of it
         */
        { "bytes after a path", rec_good, 0x002e2e2f,
          VFSD_MIG_SEC_OPTIONAL, true },
    };
    unsigned int i;

    test_fs_setup(&s, NULL);
    g_assert_cmpint(mkdirat(s.dir_fd, "sub", 0755), ==, 0);
    g_assert_cmpint(close(openat(s.dir_fd, "sub/file", O_CREAT | O_WRONLY,
                                 0644)), ==, 0);
    g_assert_cmpint(symlinkat("/", s.dir_fd, "up"), ==, 0);
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *err = NULL;
        bool ok = load_crafted(&s, cases[i].rec, cases[i].extra_type,
                               cases[i].extra_flags, &err);

        if (g_test_verbose()) {
            g_test_message("%s: %s", cases[i].name, err ?: "loaded");
        }
        g_assert_cmpint(ok, ==, cases[i].ok);
        if (cases[i].why) {
            g_assert_nonnull(strstr(err, cases[i].why));
        }
    }
    test_fs_teardown(&s);
}

/*
 * Forged streams: what a source daemon that a guest took over could
 * write.  Each is a session (initialized, with @flags), then the inode
 * and handle sections the callbacks write (NULL: none).
 */
typedef void (*Section)(VfsdMigWriter *w, gconstpointer data);

static size_t section_begin(VfsdMigWriter *w, uint32_t type)
{
    size_t len_at;

    vfsd_mig_put_u32(w, type);
    vfsd_mig_put_u32(w, 0);
    len_at = vfsd_mig_tell(w);
    vfsd_mig_put_u64(w, 0);
    return len_at;
}

static void section_end(VfsdMigWriter *w, size_t len_at)
{
    vfsd_mig_patch_u64(w, len_at, vfsd_mig_tell(w) - len_at - 8);
}

static GByteArray *forge(uint32_t minor, uint64_t flags, Section inodes,
                         Section handles, gconstpointer data)
{
    GByteArray *buf = g_byte_array_new();
    VfsdMigWriter w = { .buf = buf };
    size_t at;

    vfsd_mig_put_bytes(&w, VFSD_MIG_MAGIC, VFSD_MIG_MAGIC_LEN);
    vfsd_mig_put_u32(&w, VFSD_MIG_VERSION);
    vfsd_mig_put_u32(&w, 0);
    at = section_begin(&w, VFSD_MIG_SEC_SESSION);
    vfsd_mig_put_u32(&w, minor);
    vfsd_mig_put_u32(&w, 0);
    vfsd_mig_put_u64(&w, flags);
    vfsd_mig_put_u8(&w, 1);
    section_end(&w, at);
    if (inodes) {
        at = section_begin(&w, VFSD_MIG_SEC_INODES);
        inodes(&w, data);
        section_end(&w, at);
    }
    if (handles) {
        at = section_begin(&w, VFSD_MIG_SEC_HANDLES);
        handles(&w, data);
        section_end(&w, at);
    }
    vfsd_mig_put_u32(&w, VFSD_MIG_SEC_END);
    vfsd_mig_put_u32(&w, 0);
    vfsd_mig_put_u64(&w, 0);
    return buf;
}

#define FORGED_NODEID 7
#define FORGED_FH 3

/* The file handle of @path (relative to @dirfd) */
static struct file_handle *handle_at(int dirfd, const char *path)
{
    struct file_handle *fh = g_malloc0(sizeof(*fh) + MAX_HANDLE_SZ);
    int mnt;

    fh->handle_bytes = MAX_HANDLE_SZ;
    g_assert_cmpint(name_to_handle_at(dirfd, path, fh, &mnt, 0), ==, 0);
    return fh;
}

typedef struct Forged {
    const struct file_handle *handle;
    uint32_t type;
    uint64_t nodeid;            /* 0: FORGED_NODEID */
    uint64_t guest_fh;          /* 0: FORGED_FH */
} Forged;

/* One inode, named by its file handle alone (MIG_INODE_HANDLE) */
static void inode_by_handle(VfsdMigWriter *w, gconstpointer data)
{
    const Forged *f = data;

    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u64(w, f->nodeid ?: FORGED_NODEID);
    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u32(w, f->type);
    vfsd_mig_put_u32(w, 2);
    vfsd_mig_put_u32(w, f->handle->handle_type);
    vfsd_mig_put_blob(w, f->handle->f_handle, f->handle->handle_bytes);
}

/* The guest's open file on it, read-write */
static void handle_of_forged(VfsdMigWriter *w, gconstpointer data)
{
    const Forged *f = data;

    vfsd_mig_put_u64(w, 1);
    vfsd_mig_put_u64(w, f->guest_fh ?: FORGED_FH);
    vfsd_mig_put_u64(w, f->nodeid ?: FORGED_NODEID);
    vfsd_mig_put_u32(w, O_RDWR);
    vfsd_mig_put_u8(w, f->type == S_IFDIR);
    vfsd_mig_put_u8(w, 0);
}

/*
 * Loads @f's stream into a destination on @s's directory, under
 * @policy; on success the guest's requests on the forged inode are tried
 * and their result returned in @getattr_ret.  False (with @err) if the
 * load failed.
 */
static bool load_forged(TestFs *s, const Forged *f, VfsdMigOnError policy,
                        int *getattr_ret, char **err)
{
    g_autoptr(GByteArray) buf = forge(VFSD_PROTO_MINOR, 0,
                                      inode_by_handle,
                                      f->type == S_IFREG ? handle_of_forged :
                                                           NULL, f);
    TestFs d;
    bool ok;

    dest_setup(&d, s, policy);
    ok = vfsd_migrate_load(&d.fs, buf->data, buf->len, err);
    if (g_test_verbose()) {
        g_test_message("forged handle, policy %d: %s", policy,
                       ok ? "loaded" : *err);
    }
    if (ok && getattr_ret) {
        *getattr_ret = getattr(&d, FORGED_NODEID);
        if (f->type == S_IFREG) {
            /* The guest's write through the restored handle */
            int w = test_write(&d, FORGED_NODEID, FORGED_FH, 0, "owned", 5);

            g_assert_cmpint(*getattr_ret, ==, w < 0 ? w : 0);
        }
    }
    dest_teardown(&d);
    return ok;
}

static char *slurp(const char *path)
{
    char *data = NULL;

    g_assert_true(g_file_get_contents(path, &data, NULL, NULL));
    return data;
}

/*
 * The file a handle alone names is restored only where a path beneath
 * the shared directory leads to it: a handle of a file outside it, of a
 * file no path leads to, or of a file reached through another mount is
 * refused like a file that cannot be found, and nothing outside is
 * touched (--migration-on-error=guest-error: the guest gets EIO on it).
 */
static void test_forged_handles(void)
{
    g_autofree char *outside = g_dir_make_tmp("virtiofsd-outside-XXXXXX",
                                              NULL);
    g_autofree char *secret = g_build_filename(outside, "secret", NULL);
    g_autofree char *mnt = NULL;
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", outside);
    g_autofree struct file_handle *in_fh = NULL, *out_fh = NULL;
    g_autofree struct file_handle *dir_fh = NULL, *gone_fh = NULL;
    g_autofree struct file_handle *sub_fh = NULL;
    g_autofree char *after = NULL;
    TestFs s;
    int gone_fd, ret;

    g_assert_nonnull(outside);
    g_assert_true(g_file_set_contents(secret, "top secret", -1, NULL));
    /*
     * A mount namespace of our own for the bind mount below, entered
     * first: fds opened before would still see the old one's mounts
     */
    g_assert_cmpint(unshare(CLONE_NEWNS), ==, 0);
    g_assert_cmpint(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), ==, 0);
    test_fs_setup(&s, NULL);
    g_assert_cmpint(mkdirat(s.dir_fd, "sub", 0755), ==, 0);
    g_assert_cmpint(close(openat(s.dir_fd, "sub/file", O_CREAT | O_WRONLY,
                                 0644)), ==, 0);
    in_fh = handle_at(s.dir_fd, "sub/file");
    out_fh = handle_at(AT_FDCWD, secret);
    dir_fh = handle_at(AT_FDCWD, outside);
    /* Open still, so that the handle opens; but no path leads to it */
    gone_fd = openat(s.dir_fd, "gone", O_CREAT | O_RDWR, 0644);
    g_assert_cmpint(gone_fd, >=, 0);
    gone_fh = handle_at(s.dir_fd, "gone");
    g_assert_cmpint(unlinkat(s.dir_fd, "gone", 0), ==, 0);

    /*
     * A destination that opens no handles (no CAP_DAC_READ_SEARCH, and
     * its seccomp filter refuses the call) refuses even the share's own
     * file by handle, and says what to start it with
     */
    {
        g_autofree char *err = NULL;
        Forged f = { in_fh, S_IFREG };

        g_assert_false(vfsd_options_open_by_handle(&s.opts));
        g_assert_false(load_forged(&s, &f, VFSD_MIG_ABORT, NULL, &err));
        g_assert_nonnull(strstr(err, "as this daemon opens none (start it "
                                     "with --migration-mode=file-handles"));
    }
    /* The rest as a destination that opens handles */
    s.opts.migration_mode = VFSD_MIG_FILE_HANDLES;

    /* A file of the shared directory: restored, by handle alone */
    {
        g_autofree char *err = NULL;
        Forged f = { in_fh, S_IFREG };

        g_assert_true(load_forged(&s, &f, VFSD_MIG_ABORT, &ret, &err));
        g_assert_cmpint(ret, ==, 0);
    }
    /* Outside: refused, and under guest-error lost */
    {
        g_autofree char *err = NULL;
        Forged f = { out_fh, S_IFREG };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_ABORT, NULL, &err));
        g_assert_nonnull(strstr(err, "names no file under the shared "
                                     "directory"));
        g_clear_pointer(&err, g_free);
        g_assert_true(load_forged(&s, &f, VFSD_MIG_GUEST_ERROR, &ret, &err));
        g_assert_cmpint(ret, ==, -EIO);
    }
    {
        g_autofree char *err = NULL;
        Forged f = { dir_fh, S_IFDIR };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_ABORT, NULL, &err));
        g_assert_nonnull(strstr(err, "names no file under the shared "
                                     "directory"));
    }
    /* No path leads to it: nothing shows it is the shared directory's */
    {
        g_autofree char *err = NULL;
        Forged f = { gone_fh, S_IFREG };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_ABORT, NULL, &err));
        g_assert_nonnull(strstr(err, "names no file under the shared "
                                     "directory"));
    }
    close(gone_fd);

    /*
     * On another mount: a directory from outside, bound into the shared
     * directory.  A handle alone is decoded on the shared directory's
     * own mount, where that file is not reachable.
     */
    g_assert_cmpint(mkdirat(s.dir_fd, "mnt", 0755), ==, 0);
    mnt = g_build_filename(s.dir, "mnt", NULL);
    g_assert_cmpint(mount(outside, mnt, NULL, MS_BIND, NULL), ==, 0);
    sub_fh = handle_at(s.dir_fd, "mnt/secret");
    {
        g_autofree char *err = NULL;
        Forged f = { sub_fh, S_IFREG };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_ABORT, NULL, &err));
        g_assert_nonnull(strstr(err, "names no file under the shared "
                                     "directory"));
    }
    /*
     * And the source sends such a file by path: a guest's file on the
     * submount migrates with --migration-mode=file-handles
     */
    {
        g_autoptr(GByteArray) buf = NULL;
        g_autofree char *err = NULL;
        uint64_t dir, file, fh;
        char data[16];
        size_t len;
        TestFs d;

        s.opts.migration_mode = VFSD_MIG_FILE_HANDLES;
        test_fs_init_session(&s, 0);
        dir = test_lookup(&s, FUSE_ROOT_ID, "mnt", NULL);
        file = test_lookup(&s, dir, "secret", NULL);
        fh = test_open(&s, file, O_RDONLY);
        buf = vfsd_migrate_save(&s.fs, &err);
        g_assert_nonnull(buf);
        dest_setup(&d, &s, VFSD_MIG_ABORT);
        g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
        g_assert_cmpint(read_fh(&d, file, fh, data, sizeof(data), &len), ==,
                        0);
        g_assert_cmpmem(data, len, "top secret", 10);
        dest_teardown(&d);
    }
    /* Still in use by the source's inodes; gone from the tree, for rm -rf */
    g_assert_cmpint(umount2(mnt, MNT_DETACH), ==, 0);

    /* Nothing outside was written */
    after = slurp(secret);
    g_assert_cmpstr(after, ==, "top secret");
    test_fs_teardown(&s);
    g_assert_cmpint(system(cmd), ==, 0);
}

/*
 * The session's flags change how the guest's requests are read, and
 * what they may do (FUSE_SECURITY_CTX sets labels on new files): a
 * stream may not turn on what the destination's options do not offer.
 */
static void test_forged_session(void)
{
    static const struct {
        uint32_t minor;
        uint64_t flags;
        const char *why;
    } cases[] = {
        { VFSD_PROTO_MINOR, FUSE_SECURITY_CTX, "do not offer" },
        { VFSD_PROTO_MINOR, FUSE_POSIX_ACL, "do not offer" },
        { VFSD_PROTO_MINOR, 1ULL << 63, "do not offer" },
        { VFSD_MIN_MINOR - 1, 0, "bad session" },
        { VFSD_PROTO_MINOR + 1, 0, "bad session" },
        { VFSD_PROTO_MINOR, FUSE_POSIX_LOCKS, NULL },
    };
    TestFs s;
    unsigned int i;

    test_fs_setup(&s, NULL);
    g_assert_cmpint(s.opts.security_label, ==, VFSD_NEGOTIATE_NEVER);
    g_assert_false(s.opts.posix_acl);
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GByteArray) buf = forge(cases[i].minor, cases[i].flags,
                                          NULL, NULL, NULL);
        g_autofree char *err = NULL;
        TestFs d;
        bool ok;

        dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
        ok = vfsd_migrate_load(&d.fs, buf->data, buf->len, &err);
        if (g_test_verbose()) {
            const char *what = ok ? "loaded" : err;

            g_test_message("session 7.%u flags 0x%" G_GINT64_MODIFIER "x, %s",
                           cases[i].minor, cases[i].flags, what);
        }
        g_assert_cmpint(ok, ==, !cases[i].why);
        if (cases[i].why) {
            g_assert_nonnull(strstr(err, cases[i].why));
        } else {
            g_assert_cmphex(d.fs.conn.flags, ==, cases[i].flags);
        }
        dest_teardown(&d);
    }
    test_fs_teardown(&s);
}

/*
 * A nodeid or fh near the top would have the destination's counters
 * wrap round to 0 and to the root's nodeid: refused.
 */
static void test_forged_counters(void)
{
    g_autofree struct file_handle *fh = NULL;
    TestFs s;
    static const uint64_t nodeids[] = { UINT64_MAX - 1, 1ULL << 63 };
    unsigned int i;

    test_fs_setup(&s, NULL);
    g_assert_cmpint(close(openat(s.dir_fd, "file", O_CREAT | O_WRONLY,
                                 0644)), ==, 0);
    fh = handle_at(s.dir_fd, "file");
    for (i = 0; i < G_N_ELEMENTS(nodeids); i++) {
        g_autofree char *err = NULL;
        Forged f = { fh, S_IFREG, nodeids[i] };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_GUEST_ERROR, NULL,
                                   &err));
        g_assert_nonnull(strstr(err, "bad inode record"));
    }
    /* A good nodeid, and an fh near the top */
    {
        g_autofree char *err = NULL;
        Forged f = { fh, S_IFREG, 0, UINT64_MAX - 1 };

        g_assert_false(load_forged(&s, &f, VFSD_MIG_GUEST_ERROR, NULL,
                                   &err));
        g_assert_nonnull(strstr(err, "bad handle record"));
    }
    test_fs_teardown(&s);
}

/* Records of inodes the source found no path to, as many as @data says */
static void lost_inodes(VfsdMigWriter *w, gconstpointer data)
{
    uint64_t n = *(const uint64_t *)data, i;

    vfsd_mig_put_u64(w, n);
    for (i = 0; i < n; i++) {
        vfsd_mig_put_u64(w, FUSE_ROOT_ID + 1 + i);
        vfsd_mig_put_u64(w, 1);
        vfsd_mig_put_u32(w, S_IFREG);
        vfsd_mig_put_u32(w, 0);
    }
}

/*
 * Each lost inode costs the destination an inode, many times its record:
 * under guest-error, a stream of a million lost records fails rather
 * than have the destination allocate without bound.
 */
static void test_forged_lost(void)
{
    static const uint64_t few = 1000, many = (1u << 20) + 1;
    g_autoptr(GByteArray) ok_buf = forge(VFSD_PROTO_MINOR, 0,
                                         lost_inodes, NULL, &few);
    g_autoptr(GByteArray) bad_buf = forge(VFSD_PROTO_MINOR, 0,
                                          lost_inodes, NULL, &many);
    g_autofree char *err = NULL;
    TestFs s, d;

    test_fs_setup(&s, NULL);
    dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
    g_assert_true(vfsd_migrate_load(&d.fs, ok_buf->data, ok_buf->len, &err));
    g_assert_cmpint(getattr(&d, FUSE_ROOT_ID + few), ==, -EIO);
    dest_teardown(&d);

    dest_setup(&d, &s, VFSD_MIG_GUEST_ERROR);
    g_assert_false(vfsd_migrate_load(&d.fs, bad_buf->data, bad_buf->len,
                                     &err));
    g_assert_nonnull(strstr(err, "cannot be found"));
    dest_teardown(&d);
    test_fs_teardown(&s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/migrate/round-trip", test_round_trip);
    g_test_add_func("/virtiofsd/migrate/many-locks", test_many_locks);
    g_test_add_func("/virtiofsd/migrate/missing-file", test_missing_file);
    g_test_add_func("/virtiofsd/migrate/find-paths", test_find_paths);
    g_test_add_func("/virtiofsd/migrate/file-handles", test_file_handles);
    g_test_add_func("/virtiofsd/migrate/truncated", test_truncated);
    g_test_add_func("/virtiofsd/migrate/corrupt", test_corrupt);
    g_test_add_func("/virtiofsd/migrate/hostile", test_hostile);
    g_test_add_func("/virtiofsd/migrate/forged-handles", test_forged_handles);
    g_test_add_func("/virtiofsd/migrate/forged-session", test_forged_session);
    g_test_add_func("/virtiofsd/migrate/forged-counters",
                    test_forged_counters);
    g_test_add_func("/virtiofsd/migrate/forged-lost", test_forged_lost);
    return g_test_run();
}
