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
#include <sys/file.h>
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

/* Whether another open file description could take a write lock at 10 */
static bool host_lock_free(TestFs *t, const char *path)
{
    struct flock l = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 10,
    };
    int fd = openat(t->dir_fd, path, O_RDWR);
    bool free_;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &l), ==, 0);
    free_ = l.l_type == F_UNLCK;
    close(fd);
    return free_;
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
 * --migration-mode=file-handles: inodes go by file handle alone, and are
 * found even where no path leads (an open file unlinked on the host).
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
    /* Still open on the source, so its handle still opens */
    g_assert_cmpint(unlinkat(s.dir_fd, "d/f", 0), ==, 0);
    dest_setup(&d, &s, VFSD_MIG_ABORT);
    g_assert_true(vfsd_migrate_load(&d.fs, buf->data, buf->len, &err));
    g_assert_cmpint(read_fh(&d, h.file, h.file_fh, data, sizeof(data), &len),
                    ==, 0);
    g_assert_cmpmem(data, len, "hello", 5);
    g_assert_cmpint(getattr(&d, h.other), ==, 0);
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/migrate/round-trip", test_round_trip);
    g_test_add_func("/virtiofsd/migrate/missing-file", test_missing_file);
    g_test_add_func("/virtiofsd/migrate/find-paths", test_find_paths);
    g_test_add_func("/virtiofsd/migrate/file-handles", test_file_handles);
    g_test_add_func("/virtiofsd/migrate/truncated", test_truncated);
    g_test_add_func("/virtiofsd/migrate/corrupt", test_corrupt);
    g_test_add_func("/virtiofsd/migrate/hostile", test_hostile);
    return g_test_run();
}
