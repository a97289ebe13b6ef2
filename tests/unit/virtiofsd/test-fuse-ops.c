/*
 * virtiofsd tests: each operation against a scratch directory
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <cap-ng.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <linux/falloc.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "broker.h"
#include "vfsd-test.h"

/* Non-NULL data: the same test with inodes held by file handle */
static const int by_handle = 1;

static void setup(TestFs *t, gconstpointer data)
{
    VfsdOptions o;

    test_fs_setup(t, NULL);
    if (data) {
        o = t->opts;
        test_fs_teardown(t);
        /* mandatory: a test that would quietly run with fds fails */
        o.inode_file_handles = VFSD_INODE_FH_MANDATORY;
        test_fs_setup(t, &o);
        g_assert_true(t->fs.use_handles);
    }
    test_fs_init_session(t, FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS |
                         FUSE_DO_READDIRPLUS | FUSE_HANDLE_KILLPRIV_V2 |
                         FUSE_SETXATTR_EXT);
}

static void teardown(TestFs *t, gconstpointer data)
{
    test_fs_teardown(t);
}

static void host_read(TestFs *t, const char *name, char *buf, size_t len)
{
    int fd = openat(t->dir_fd, name, O_RDONLY | O_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(read(fd, buf, len), ==, (ssize_t)len);
    close(fd);
}

static int mkdir_req(TestFs *t, uint64_t parent, const char *name,
                     uint32_t uid, uint64_t *nodeid)
{
    TestReq *r = test_req_new(FUSE_MKDIR, parent);
    struct fuse_in_header *h = (void *)r->data->data;
    struct fuse_entry_out e;
    int ret;

    h->uid = uid;
    h->gid = uid;
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0750, .umask = 0 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, name);
    ret = test_send(t, r, 4096, &e, sizeof(e), NULL);
    if (nodeid) {
        *nodeid = e.nodeid;
    }
    return ret;
}

static void test_create_write_read(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "file", O_RDWR, &fh);
    struct fuse_read_in in = { .fh = fh, .offset = 2, .size = 100 };
    char buf[128];
    size_t len;
    TestReq *r;

    g_assert_cmpint(test_write(t, ino, fh, 0, "hello world", 11), ==, 11);
    host_read(t, "file", buf, 11);
    g_assert_cmpmem(buf, 11, "hello world", 11);

    r = test_req_new(FUSE_READ, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "llo world", 9);

    /* Past the end: zero bytes */
    in.offset = 1000;
    r = test_req_new(FUSE_READ, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpuint(len, ==, 0);

    r = test_req_new(FUSE_FLUSH, ino);
    test_req_add(r, &(struct fuse_flush_in){ .fh = fh, .lock_owner = 7 },
                 sizeof(struct fuse_flush_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_FSYNC, ino);
    test_req_add(r, &(struct fuse_fsync_in){ .fh = fh },
                 sizeof(struct fuse_fsync_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_RELEASE, ino);
    test_req_add(r, &(struct fuse_release_in){ .fh = fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    /* The handle is gone */
    g_assert_cmpint(test_write(t, ino, fh, 0, "x", 1), ==, -EBADF);

    /* O_EXCL on an existing file */
    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR | O_EXCL,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "file");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EEXIST);

    /* Open again with O_TRUNC */
    fh = test_open(t, ino, O_RDWR | O_TRUNC);
    g_assert_cmpint(test_write(t, ino, fh, 0, "x", 1), ==, 1);
}

static int create_name(TestFs *t, const char *name, uint32_t flags,
                      struct fuse_entry_out *e)
{
    TestReq *r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } out;
    int ret;

    test_req_add(r, &(struct fuse_create_in){ .flags = flags,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, name);
    ret = test_send(t, r, 4096, &out, sizeof(out), NULL);
    if (e) {
        *e = out.e;
    }
    return ret;
}

/*
 * With FUSE_ATOMIC_O_TRUNC the guest leaves O_TRUNC of a CREATE to us,
 * also when the name turns out to exist (created on the host, or by
 * another guest, since the guest's lookup).
 */
static void test_create_trunc_existing(TestFs *t, gconstpointer data)
{
    struct fuse_entry_out e;
    struct stat st;
    int fd;

    fd = openat(t->dir_fd, "old", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, "old data", 8), ==, 8);
    close(fd);

    /* Without O_TRUNC the data stays */
    g_assert_cmpint(create_name(t, "old", O_RDWR, &e), ==, 0);
    g_assert_cmpuint(e.attr.size, ==, 8);
    g_assert_cmpint(fstatat(t->dir_fd, "old", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 8);

    g_assert_cmpint(create_name(t, "old", O_RDWR | O_TRUNC, &e), ==, 0);
    g_assert_cmpuint(e.attr.size, ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "old", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);

    /* O_EXCL still refuses it, and truncates nothing */
    fd = openat(t->dir_fd, "old", O_WRONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, "again", 5), ==, 5);
    close(fd);
    g_assert_cmpint(create_name(t, "old", O_RDWR | O_TRUNC | O_EXCL, NULL),
                    ==, -EEXIST);
    g_assert_cmpint(fstatat(t->dir_fd, "old", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 5);
}

static void test_guest_credentials(TestFs *t, gconstpointer data)
{
    g_autofree char *err = NULL;
    struct fuse_in_header *h;
    uint64_t dir;
    struct stat st;
    TestReq *r;

    if (geteuid() != 0) {
        g_test_skip("needs root");
        return;
    }
    /*
     * Made as the guest's user, not as the daemon, and so with that
     * user's rights on the host too
     */
    g_assert_cmpint(mkdir_req(t, FUSE_ROOT_ID, "owned", 1234, &dir), ==,
                    -EACCES);
    g_assert_cmpint(chmod(t->dir, 0777), ==, 0);
    g_assert_cmpint(mkdir_req(t, FUSE_ROOT_ID, "owned", 1234, &dir), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "owned", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_uid, ==, 1234);
    g_assert_cmpuint(st.st_gid, ==, 1234);
    g_assert_cmpuint(st.st_mode & 07777, ==, 0750);

    /*
     * CVE-2022-0358: in a setgid directory of a group the user is not in,
     * a new directory inherits the group but the daemon's own groups give
     * nothing more.
     */
    g_assert_cmpint(fchownat(t->dir_fd, "owned", 1234, 4321, 0), ==, 0);
    g_assert_cmpint(fchmodat(t->dir_fd, "owned", 02777, 0), ==, 0);
    g_assert_cmpint(mkdir_req(t, dir, "sub", 1234, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "owned/sub", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_gid, ==, 4321);
    /*
     * A setgid file for a group the user is not in loses the bit, even
     * when the daemon was started with that group (it drops them all).
     */
    g_assert_cmpint(setgroups(1, &(gid_t){ 4321 }), ==, 0);
    g_assert_true(vfsd_creds_init(&err));
    r = test_req_new(FUSE_CREATE, dir);
    h = (void *)r->data->data;
    h->uid = 1234;
    h->gid = 1234;
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                              .mode = S_IFREG | 02755 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "sgid");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "owned/sgid", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_gid, ==, 4321);
    g_assert_cmpuint(st.st_uid, ==, 1234);
    g_assert_false(st.st_mode & S_ISGID);
    /* The thread's ids are back to the daemon's */
    g_assert_cmpint(mkdir_req(t, FUSE_ROOT_ID, "mine", 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "mine", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_uid, ==, 0);
}

static void test_dirs_and_names(TestFs *t, gconstpointer data)
{
    uint64_t dir, fh, ino, ino2;
    struct fuse_attr attr;
    struct fuse_entry_out e;
    TestReq *r;
    char buf[64];
    size_t len;

    /*
     * No idle fds by handle: an unlinked child's would keep the removed
     * directory's inode alive, as an fd does, and ESTALE is the case
     */
    t->fs.inodes.idle_max = 0;
    g_assert_cmpint(mkdir_req(t, FUSE_ROOT_ID, "d", 0, &dir), ==, 0);
    ino = test_create(t, dir, "a", O_RDWR, &fh);
    g_assert_cmpuint(test_lookup(t, dir, "a", NULL), ==, ino);

    /* RENAME d/a -> b */
    r = test_req_new(FUSE_RENAME, dir);
    test_req_add(r, &(struct fuse_rename_in){ .newdir = FUSE_ROOT_ID },
                 sizeof(struct fuse_rename_in));
    test_req_add_str(r, "a");
    test_req_add_str(r, "b");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpuint(test_lookup(t, FUSE_ROOT_ID, "b", NULL), ==, ino);
    g_assert_cmpint(test_lookup_err(t, dir, "a"), ==, -ENOENT);

    /* RENAME2 NOREPLACE onto an existing name */
    test_create(t, FUSE_ROOT_ID, "c", O_RDWR, &fh);
    r = test_req_new(FUSE_RENAME2, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_rename2_in){ .newdir = FUSE_ROOT_ID,
                                               .flags = RENAME_NOREPLACE },
                 sizeof(struct fuse_rename2_in));
    test_req_add_str(r, "b");
    test_req_add_str(r, "c");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EEXIST);
    /* Unknown flags */
    r = test_req_new(FUSE_RENAME2, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_rename2_in){ .newdir = FUSE_ROOT_ID,
                                               .flags = 1 << 20 },
                 sizeof(struct fuse_rename2_in));
    test_req_add_str(r, "b");
    test_req_add_str(r, "c");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* LINK b -> d/l */
    r = test_req_new(FUSE_LINK, dir);
    test_req_add(r, &(struct fuse_link_in){ .oldnodeid = ino },
                 sizeof(struct fuse_link_in));
    test_req_add_str(r, "l");
    g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==, 0);
    g_assert_cmpuint(e.nodeid, ==, ino);
    g_assert_cmpuint(e.attr.nlink, ==, 2);

    /* SYMLINK d/s -> b */
    r = test_req_new(FUSE_SYMLINK, dir);
    test_req_add_str(r, "s");
    test_req_add_str(r, "../b");
    g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==, 0);
    g_assert_true(S_ISLNK(e.attr.mode));
    r = test_req_new(FUSE_READLINK, e.nodeid);
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "../b", 4);

    /* MKNOD a FIFO and a device node: made, never opened */
    r = test_req_new(FUSE_MKNOD, dir);
    test_req_add(r, &(struct fuse_mknod_in){ .mode = S_IFIFO | 0600 },
                 sizeof(struct fuse_mknod_in));
    test_req_add_str(r, "p");
    g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==, 0);
    g_assert_true(S_ISFIFO(e.attr.mode));
    r = test_req_new(FUSE_MKNOD, dir);
    test_req_add(r, &(struct fuse_mknod_in){ .mode = S_IFCHR | 0600,
                                             .rdev = makedev(1, 3) },
                 sizeof(struct fuse_mknod_in));
    test_req_add_str(r, "null");
    if (geteuid() == 0) {
        g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==, 0);
        g_assert_true(S_ISCHR(e.attr.mode));
        g_assert_cmpuint(e.attr.rdev, ==, makedev(1, 3));
    } else {
        test_send(t, r, 4096, NULL, 0, NULL);
    }

    /* UNLINK, RMDIR */
    r = test_req_new(FUSE_RMDIR, FUSE_ROOT_ID);
    test_req_add_str(r, "d");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOTEMPTY);
    ino2 = test_lookup(t, dir, "l", &attr);
    g_assert_cmpuint(ino2, ==, ino);
    const char *names[] = { "l", "s", "p", "null" };
    for (unsigned int i = 0; i < G_N_ELEMENTS(names); i++) {
        r = test_req_new(FUSE_UNLINK, dir);
        test_req_add_str(r, names[i]);
        test_send(t, r, 4096, NULL, 0, NULL);
    }
    r = test_req_new(FUSE_RMDIR, FUSE_ROOT_ID);
    test_req_add_str(r, "d");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(faccessat(t->dir_fd, "d", F_OK, 0), !=, 0);

    /*
     * The removed directory's inode is stale now: mkdirat() in it gives
     * ENOENT, and its handle no longer opens (ESTALE)
     */
    r = test_req_new(FUSE_MKDIR, dir);
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, "x");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==,
                    data ? -ESTALE : -ENOENT);
}

static void test_attrs(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    struct fuse_setattr_in in = {
        .valid = FATTR_MODE | FATTR_SIZE | FATTR_MTIME | FATTR_ATIME |
                 FATTR_FH,
        .fh = fh,
        .mode = 0600,
        .size = 12345,
        .mtime = 1000000000,
        .atime = 1000000001,
    };
    struct fuse_attr_out out;
    struct stat st;
    TestReq *r;

    r = test_req_new(FUSE_SETATTR, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.size, ==, 12345);
    g_assert_cmpuint(out.attr.mode & 07777, ==, 0600);
    g_assert_cmpuint(out.attr.mtime, ==, 1000000000);
    g_assert_cmpint(fstatat(t->dir_fd, "f", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 12345);
    g_assert_cmpint(st.st_atime, ==, 1000000001);

    /* Without a file handle */
    in.valid = FATTR_SIZE | FATTR_UID | FATTR_GID;
    in.size = 5;
    in.uid = 42;
    in.gid = 43;
    r = test_req_new(FUSE_SETATTR, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.size, ==, 5);
    if (geteuid() == 0) {
        g_assert_cmpuint(out.attr.uid, ==, 42);
        g_assert_cmpuint(out.attr.gid, ==, 43);
    }

    /* Bad nanoseconds */
    in.valid = FATTR_MTIME;
    in.mtimensec = 2000000000;
    r = test_req_new(FUSE_SETATTR, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.size, ==, 5);
    g_assert_true(S_ISREG(out.attr.mode));

    /* Unknown nodeid */
    r = test_req_new(FUSE_GETATTR, 987654);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);
}

static void test_killpriv(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "suid", O_RDWR, &fh);
    struct fuse_write_in in = {
        .fh = fh, .size = 1, .write_flags = FUSE_WRITE_KILL_SUIDGID,
    };
    struct stat st;
    TestReq *r;

    if (geteuid() != 0) {
        g_test_skip("needs root");
        return;
    }
    g_assert_cmpint(fchmodat(t->dir_fd, "suid", 06755, 0), ==, 0);
    r = test_req_new(FUSE_WRITE, ino);
    test_req_add(r, &in, sizeof(in));
    test_req_add(r, "x", 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "suid", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_mode & 07777, ==, 0755);

    /* Without the flag, the bits stay (the daemon has CAP_FSETID) */
    g_assert_cmpint(fchmodat(t->dir_fd, "suid", 06755, 0), ==, 0);
    g_assert_cmpint(test_write(t, ino, fh, 0, "y", 1), ==, 1);
    g_assert_cmpint(fstatat(t->dir_fd, "suid", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_mode & 07777, ==, 06755);
}

/*
 * A setgid bit without group-execute marks a file for mandatory locking,
 * and the host keeps it when a member of the file's group truncates or
 * writes (fstests generic/193); everyone else loses it, and setuid goes
 * whoever writes.  With KILLPRIV_V2 the guest leaves this to us, so the
 * caller's group must decide, not the daemon's.
 */
enum { BY_OPEN, BY_SETATTR, BY_WRITE, N_WAYS };

/*
 * An OPEN with O_TRUNC, a SETATTR of the size or a WRITE (@way) of @ino,
 * asking to clear setuid/setgid, by the caller @uid/@gid
 */
static TestReq *kill_suidgid_req(unsigned int way, uint64_t ino, uint64_t fh,
                                 uid_t uid, gid_t gid)
{
    struct fuse_in_header *h;
    TestReq *r;

    switch (way) {
    case BY_OPEN:
        r = test_req_new(FUSE_OPEN, ino);
        test_req_add(r, &(struct fuse_open_in){
                         .flags = O_WRONLY | O_TRUNC,
                         .open_flags = FUSE_OPEN_KILL_SUIDGID },
                     sizeof(struct fuse_open_in));
        break;
    case BY_SETATTR:
        r = test_req_new(FUSE_SETATTR, ino);
        test_req_add(r, &(struct fuse_setattr_in){
                         .valid = FATTR_SIZE | FATTR_KILL_SUIDGID },
                     sizeof(struct fuse_setattr_in));
        break;
    default:
        r = test_req_new(FUSE_WRITE, ino);
        test_req_add(r, &(struct fuse_write_in){
                         .fh = fh, .size = 1,
                         .write_flags = FUSE_WRITE_KILL_SUIDGID },
                     sizeof(struct fuse_write_in));
        test_req_add(r, "x", 1);
        break;
    }
    h = (void *)r->data->data;
    h->uid = uid;
    h->gid = gid;
    return r;
}

static void test_killpriv_group(TestFs *t, gconstpointer data)
{
    static const struct {
        mode_t mode;
        gid_t caller_gid;
        mode_t after;
    } cases[] = {
        { 02644, 1234, 02644 },
        { 02644, 4321, 0644 },
        { 06644, 1234, 02644 },
        { 02754, 1234, 0754 },
    };
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "mark", O_RDWR, &fh);
    struct stat st;
    unsigned int i, way;
    TestReq *r;

    if (geteuid() != 0) {
        g_test_skip("needs root");
        return;
    }
    g_assert_cmpint(fchownat(t->dir_fd, "mark", 1234, 1234, 0), ==, 0);
    for (way = 0; way < N_WAYS; way++) {
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            g_assert_cmpint(test_write(t, ino, fh, 0, "data", 4), ==, 4);
            g_assert_cmpint(fchmodat(t->dir_fd, "mark", cases[i].mode, 0),
                            ==, 0);
            r = kill_suidgid_req(way, ino, fh, 1234, cases[i].caller_gid);
            g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
            g_assert_cmpint(fstatat(t->dir_fd, "mark", &st, 0), ==, 0);
            if ((st.st_mode & 07777) != cases[i].after) {
                g_test_message("way %u: mode %04o by gid %u left %04o",
                               way, cases[i].mode, cases[i].caller_gid,
                               st.st_mode & 07777);
            }
            g_assert_cmpuint(st.st_mode & 07777, ==, cases[i].after);
        }
    }
    /* The thread acts in the daemon's group again */
    g_assert_cmpint(mkdir_req(t, FUSE_ROOT_ID, "mine", 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "mine", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_gid, ==, getegid());
}

/*
 * A daemon that may not take the caller's group (no CAP_SETGID: run
 * unprivileged, or with its capabilities cut) clears setuid/setgid all
 * the same, in its own group: the write, truncate or open succeeds as
 * the host would let it, rather than failing with EPERM.  Run in a
 * subprocess, which gives CAP_SETGID up.
 */
static void test_killpriv_no_setgid(void)
{
    static const struct {
        mode_t mode;
        mode_t after;
    } cases[] = {
        { 06755, 0755 },
        { 04644, 0644 },
    };
    const gid_t caller_gid = 4321;
    uint64_t fh, ino;
    unsigned int i, way;
    struct stat st;
    TestFs t;
    TestReq *r;

    if (geteuid() != 0) {
        g_test_skip("needs root to give CAP_SETGID up");
        return;
    }
    if (!g_test_subprocess()) {
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_passed();
        return;
    }
    g_assert_cmpint(capng_get_caps_process(), ==, 0);
    capng_update(CAPNG_DROP, CAPNG_EFFECTIVE | CAPNG_PERMITTED, CAP_SETGID);
    g_assert_cmpint(capng_apply(CAPNG_SELECT_CAPS), ==, 0);
    /* The case: the switch to the caller's group does not take */
    syscall(SYS_setfsgid, caller_gid);
    g_assert_cmpuint((gid_t)syscall(SYS_setfsgid, -1), ==, getegid());

    test_fs_setup(&t, NULL);
    test_fs_init_session(&t, FUSE_HANDLE_KILLPRIV_V2);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    g_assert_cmpint(fchownat(t.dir_fd, "f", 1234, 1234, 0), ==, 0);
    for (way = 0; way < N_WAYS; way++) {
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            g_assert_cmpint(test_write(&t, ino, fh, 0, "data", 4), ==, 4);
            g_assert_cmpint(fchmodat(t.dir_fd, "f", cases[i].mode, 0), ==,
                            0);
            r = kill_suidgid_req(way, ino, fh, 1234, caller_gid);
            g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, 0);
            g_assert_cmpint(fstatat(t.dir_fd, "f", &st, 0), ==, 0);
            if ((st.st_mode & 07777) != cases[i].after) {
                g_test_message("way %u: mode %04o left %04o", way,
                               cases[i].mode, st.st_mode & 07777);
            }
            g_assert_cmpuint(st.st_mode & 07777, ==, cases[i].after);
        }
    }
    /* The thread's group is ours again */
    g_assert_cmpuint((gid_t)syscall(SYS_setfsgid, -1), ==, getegid());
    test_fs_teardown(&t);
}

/*
 * With KILLPRIV_V2 a guest user's write clears setuid/setgid on the host
 * while the guest keeps the mode it cached (fstests generic/355): such a
 * file's attributes are never cached, anything else's as the mode says.
 */
static void test_killpriv_attr_timeout(void)
{
    static const struct {
        const char *name;
        mode_t mode;
        bool cached;
    } files[] = {
        { "plain", 0755, true },
        { "suid", 04755, false },
        { "sgid", 02644, false },
        { "sgid-dir", 02755 | S_IFDIR, true },
    };
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .cache = VFSD_CACHE_ALWAYS,
        .killpriv_v2 = true,
    };
    struct fuse_entry_out e;
    struct fuse_attr_out ao;
    unsigned int i, v2;
    uint64_t want;
    TestReq *r;
    TestFs t;

    for (v2 = 0; v2 < 2; v2++) {
        test_fs_setup(&t, &o);
        test_fs_init_session(&t, v2 ? FUSE_HANDLE_KILLPRIV_V2 : 0);
        g_assert_cmpint(!!(t.fs.conn.flags & FUSE_HANDLE_KILLPRIV_V2), ==,
                        v2);
        for (i = 0; i < G_N_ELEMENTS(files); i++) {
            if (S_ISDIR(files[i].mode)) {
                g_assert_cmpint(mkdirat(t.dir_fd, files[i].name, 0755), ==,
                                0);
            } else {
                close(openat(t.dir_fd, files[i].name, O_CREAT | O_WRONLY,
                             0600));
            }
            g_assert_cmpint(fchmodat(t.dir_fd, files[i].name,
                                     files[i].mode & 07777, 0), ==, 0);
            want = !v2 || files[i].cached ? 86400 : 0;

            r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
            test_req_add_str(r, files[i].name);
            g_assert_cmpint(test_send(&t, r, 4096, &e, sizeof(e), NULL), ==,
                            0);
            g_assert_cmpuint(e.attr.mode & 07777, ==, files[i].mode & 07777);
            g_assert_cmpuint(e.entry_valid, ==, 86400);
            g_assert_cmpuint(e.attr_valid, ==, want);
            g_assert_cmpuint(e.attr_valid_nsec, ==, 0);

            r = test_req_new(FUSE_GETATTR, e.nodeid);
            test_req_add(r, &(struct fuse_getattr_in){ 0 },
                         sizeof(struct fuse_getattr_in));
            g_assert_cmpint(test_send(&t, r, 4096, &ao, sizeof(ao), NULL),
                            ==, 0);
            g_assert_cmpuint(ao.attr_valid, ==, want);
        }
        test_fs_teardown(&t);
    }
}

static void test_readdir(TestFs *t, gconstpointer data)
{
    struct fuse_open_out o;
    struct fuse_read_in in = { .size = 4096 };
    g_autofree uint8_t *buf = g_malloc(8192);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal,
                                             g_free, NULL);
    uint64_t fh, off = 0;
    size_t len, pos;
    unsigned int i, calls = 0;
    TestReq *r;
    int plus;

    for (i = 0; i < 50; i++) {
        g_autofree char *n = g_strdup_printf("entry-%02u-with-a-long-name", i);

        test_create(t, FUSE_ROOT_ID, n, O_RDWR, &fh);
    }
    for (plus = 0; plus < 2; plus++) {
        g_hash_table_remove_all(seen);
        r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);
        test_req_add(r, &(struct fuse_open_in){ 0 },
                     sizeof(struct fuse_open_in));
        g_assert_cmpint(test_send(t, r, 4096, &o, sizeof(o), NULL), ==, 0);
        off = 0;
        /* Small buffers: several calls, each resuming at the last offset */
        for (;;) {
            in.fh = o.fh;
            in.offset = off;
            in.size = 512;
            r = test_req_new(plus ? FUSE_READDIRPLUS : FUSE_READDIR,
                             FUSE_ROOT_ID);
            test_req_add(r, &in, sizeof(in));
            g_assert_cmpint(test_send(t, r, 8192, buf, 8192, &len), ==, 0);
            g_assert_cmpuint(len, <=, 512);
            calls++;
            if (!len) {
                break;
            }
            for (pos = 0; pos < len;) {
                struct fuse_dirent *d;

                if (plus) {
                    struct fuse_direntplus *dp = (void *)(buf + pos);

                    d = &dp->dirent;
                    pos += FUSE_DIRENTPLUS_SIZE(dp);
                    if (strncmp(d->name, ".", d->namelen) &&
                        strncmp(d->name, "..", d->namelen)) {
                        g_assert_cmpuint(dp->entry_out.nodeid, !=, 0);
                    }
                } else {
                    d = (void *)(buf + pos);
                    pos += FUSE_DIRENT_SIZE(d);
                }
                g_assert_cmpuint(pos, <=, len);
                g_assert_true(g_hash_table_add(seen,
                                               g_strndup(d->name,
                                                         d->namelen)));
                off = d->off;
            }
        }
        g_assert_cmpuint(g_hash_table_size(seen), ==, 52);
        r = test_req_new(FUSE_RELEASEDIR, FUSE_ROOT_ID);
        test_req_add(r, &(struct fuse_release_in){ .fh = o.fh },
                     sizeof(struct fuse_release_in));
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    }
    g_assert_cmpuint(calls, >, 4);
    g_hash_table_destroy(seen);
}

/* One entry of a READDIRPLUS reply, as the tests below keep it */
typedef struct Listed {
    char name[NAME_MAX + 1];
    uint64_t nodeid;
    uint64_t ino;               /* the attributes' */
    uint64_t size;
    uint64_t next;              /* its offset: where the next one starts */
} Listed;

static uint64_t opendir_req(TestFs *t, uint64_t dir)
{
    struct fuse_open_out o;
    TestReq *r = test_req_new(FUSE_OPENDIR, dir);

    test_req_add(r, &(struct fuse_open_in){ 0 }, sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &o, sizeof(o), NULL), ==, 0);
    return o.fh;
}

static void releasedir_req(TestFs *t, uint64_t dir, uint64_t fh)
{
    TestReq *r = test_req_new(FUSE_RELEASEDIR, dir);

    test_req_add(r, &(struct fuse_release_in){ .fh = fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

/* One READDIRPLUS of 4 KiB from @offset, its entries but "." and ".." */
static GArray *readdirplus_req(TestFs *t, uint64_t dir, uint64_t fh,
                               uint64_t offset)
{
    struct fuse_read_in in = { .fh = fh, .offset = offset, .size = 4096 };
    g_autofree uint8_t *buf = g_malloc(4096);
    GArray *out = g_array_new(false, true, sizeof(Listed));
    size_t len, pos;
    TestReq *r = test_req_new(FUSE_READDIRPLUS, dir);

    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096 + 16, buf, 4096, &len), ==, 0);
    for (pos = 0; pos < len;) {
        struct fuse_direntplus *dp = (void *)(buf + pos);
        Listed l = {
            .nodeid = dp->entry_out.nodeid,
            .ino = dp->entry_out.attr.ino,
            .size = dp->entry_out.attr.size,
            .next = dp->dirent.off,
        };

        pos += FUSE_DIRENTPLUS_SIZE(dp);
        g_assert_cmpuint(pos, <=, len);
        memcpy(l.name, dp->dirent.name, dp->dirent.namelen);
        if (strcmp(l.name, ".") && strcmp(l.name, "..")) {
            g_array_append_val(out, l);
        } else {
            /* Still the offset the next request starts from */
            l.name[0] = '\0';
            g_array_append_val(out, l);
        }
    }
    return out;
}

/* The whole listing of @dir, opened for it: name -> Listed */
static GHashTable *list_dir_plus(TestFs *t, uint64_t dir)
{
    GHashTable *all = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                            g_free);
    uint64_t fh = opendir_req(t, dir), off = 0;
    unsigned int i;

    for (;;) {
        g_autoptr(GArray) part = readdirplus_req(t, dir, fh, off);

        if (!part->len) {
            break;
        }
        for (i = 0; i < part->len; i++) {
            Listed *l = &g_array_index(part, Listed, i);

            off = l->next;
            if (l->name[0]) {
                g_assert_false(g_hash_table_contains(all, l->name));
                l = g_memdup2(l, sizeof(*l));
                g_hash_table_insert(all, l->name, l);
            }
        }
    }
    releasedir_req(t, dir, fh);
    return all;
}

static int truncate_at(TestFs *t, const char *name, off_t size)
{
    int fd = openat(t->dir_fd, name, O_WRONLY | O_CLOEXEC), ret;

    if (fd < 0) {
        return -errno;
    }
    ret = ftruncate(fd, size) < 0 ? -errno : 0;
    close(fd);
    return ret;
}

/* A directory of @n empty files made on the host, looked up */
static uint64_t host_dir(TestFs *t, const char *dir, unsigned int n)
{
    char name[64];
    unsigned int i;

    g_assert_cmpint(mkdirat(t->dir_fd, dir, 0755), ==, 0);
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s/entry-%04u", dir, i);
        g_assert_cmpint(mknodat(t->dir_fd, name, S_IFREG | 0644, 0), ==, 0);
    }
    return test_lookup(t, FUSE_ROOT_ID, dir, NULL);
}

/*
 * A READDIR that goes on where the last one stopped reads on from the
 * entries that one read ahead: one seek per listing, not one per
 * request.  Any other offset seeks, and gets what it would have; an
 * entry read ahead and removed before a reply takes it comes without a
 * lookup.
 */
static void test_readdir_read_ahead(TestFs *t, gconstpointer data)
{
    uint64_t dir = host_dir(t, "ra", 300), fh, off = 0, again;
    g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_array_unref);
    GArray *part, *p2;
    unsigned int i, seen = 0;
    int seeks;
    g_autofree char *path = NULL;

    fh = opendir_req(t, dir);
    seeks = g_atomic_int_get(&t->fs.dir_seeks);
    do {
        part = readdirplus_req(t, dir, fh, off);
        g_ptr_array_add(parts, part);
        for (i = 0; i < part->len; i++) {
            off = g_array_index(part, Listed, i).next;
            seen += !!g_array_index(part, Listed, i).name[0];
        }
    } while (part->len);
    g_assert_cmpuint(seen, ==, 300);
    /*
     * Twelve requests or so, two seeks: to offset 0, and for the last,
     * empty, request: the end may leave the fd anywhere
     */
    g_assert_cmpuint(parts->len, >, 8);
    g_assert_cmpint(g_atomic_int_get(&t->fs.dir_seeks) - seeks, ==, 2);

    /* Back to where the second reply began: the same entries again */
    part = g_ptr_array_index(parts, 0);
    again = g_array_index(part, Listed, part->len - 1).next;
    p2 = readdirplus_req(t, dir, fh, again);
    part = g_ptr_array_index(parts, 1);
    g_assert_cmpuint(p2->len, ==, part->len);
    for (i = 0; i < p2->len; i++) {
        g_assert_cmpstr(g_array_index(p2, Listed, i).name, ==,
                        g_array_index(part, Listed, i).name);
        g_assert_cmpuint(g_array_index(p2, Listed, i).nodeid, ==,
                         g_array_index(part, Listed, i).nodeid);
    }
    g_assert_cmpint(g_atomic_int_get(&t->fs.dir_seeks) - seeks, ==, 3);

    /*
     * The third reply's entries are read ahead now; its first one goes
     * on the host before the request: listed, if at all, without lookup
     */
    part = g_ptr_array_index(parts, 2);
    path = g_strdup_printf("ra/%s", g_array_index(part, Listed, 0).name);
    g_assert_cmpint(unlinkat(t->dir_fd, path, 0), ==, 0);
    off = g_array_index(p2, Listed, p2->len - 1).next;
    g_array_unref(p2);
    p2 = readdirplus_req(t, dir, fh, off);
    g_assert_cmpuint(p2->len, >, 0);
    for (i = 0; i < p2->len; i++) {
        Listed *l = &g_array_index(p2, Listed, i);

        if (!strcmp(l->name, g_array_index(part, Listed, 0).name)) {
            g_assert_cmpuint(l->nodeid, ==, 0);
        } else {
            g_assert_cmpuint(l->nodeid, !=, 0);
        }
    }
    g_assert_cmpint(g_atomic_int_get(&t->fs.dir_seeks) - seeks, ==, 3);
    g_array_unref(p2);
    releasedir_req(t, dir, fh);
}

/*
 * READDIRPLUS of inodes the guest knows already confirms each by a stat
 * of its name: the same nodeid, the host's attributes now, one more
 * lookup to forget.  A name the host gave to another file meanwhile is
 * that file's, and an inode held by its handle alone (no fd keeps its
 * number from going to another file) is not confirmed that way.
 */
static void test_readdirplus_known(TestFs *t, gconstpointer data)
{
    uint64_t dir = host_dir(t, "kn", 40), old7;
    g_autoptr(GHashTable) first = NULL, second = NULL;
    struct fuse_forget_in fin = { .nlookup = 1 };
    struct stat st;
    GHashTableIter it;
    Listed *l, *m;
    int known, fd;
    TestReq *r;

    /* By handle: idle fds keep the inodes open between requests */
    t->fs.inodes.idle_max = 100;
    known = g_atomic_int_get(&t->fs.listed_known);
    first = list_dir_plus(t, dir);
    g_assert_cmpuint(g_hash_table_size(first), ==, 40);
    g_assert_cmpint(g_atomic_int_get(&t->fs.listed_known), ==, known);

    /* Changes on the host: a size, and a name given to a new file */
    fd = openat(t->dir_fd, "kn/entry-0003", O_WRONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 1234), ==, 0);
    close(fd);
    g_assert_cmpint(mknodat(t->dir_fd, "kn/new", S_IFREG | 0644, 0), ==, 0);
    g_assert_cmpint(renameat(t->dir_fd, "kn/new", t->dir_fd,
                             "kn/entry-0007"), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "kn/entry-0007", &st, 0), ==, 0);

    second = list_dir_plus(t, dir);
    g_assert_cmpuint(g_hash_table_size(second), ==, 40);
    g_assert_cmpint(g_atomic_int_get(&t->fs.listed_known) - known, ==, 39);
    g_hash_table_iter_init(&it, second);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&l)) {
        m = g_hash_table_lookup(first, l->name);
        g_assert_nonnull(m);
        if (!strcmp(l->name, "entry-0007")) {
            g_assert_cmpuint(l->nodeid, !=, m->nodeid);
            g_assert_cmpuint(l->ino, ==, st.st_ino);
        } else {
            g_assert_cmpuint(l->nodeid, ==, m->nodeid);
            g_assert_cmpuint(l->size, ==,
                             strcmp(l->name, "entry-0003") ? 0 : 1234);
        }
    }

    /* Two lookups of entry-0005 now: the second FORGET drops it */
    l = g_hash_table_lookup(second, "entry-0005");
    r = test_req_new(FUSE_FORGET, l->nodeid);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_GETATTR, l->nodeid);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_FORGET, l->nodeid);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_GETATTR, l->nodeid);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);

    if (!data) {
        return;
    }
    /*
     * By handle, with no idle fds: nothing holds the inodes open between
     * requests, so no listing confirms them by number; the handles do,
     * and the guest gets the same nodeids all the same.
     */
    old7 = ((Listed *)g_hash_table_lookup(second, "entry-0007"))->nodeid;
    g_hash_table_destroy(g_steal_pointer(&first));
    t->fs.inodes.idle_max = 0;
    dir = host_dir(t, "kh", 20);
    first = list_dir_plus(t, dir);
    known = g_atomic_int_get(&t->fs.listed_known);
    g_hash_table_destroy(g_steal_pointer(&second));
    second = list_dir_plus(t, dir);
    g_assert_cmpint(g_atomic_int_get(&t->fs.listed_known), ==, known);
    g_hash_table_iter_init(&it, second);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&l)) {
        m = g_hash_table_lookup(first, l->name);
        g_assert_nonnull(m);
        g_assert_cmpuint(l->nodeid, ==, m->nodeid);
        g_assert_cmpuint(l->nodeid, !=, old7);
    }
}

/*
 * LOOKUP in a directory whose names keep leading to inodes the guest
 * knows (a guest revalidating) stats the name first and answers from
 * that: the same nodeid, a lookup more to forget, ENOENT for a missing
 * name; a name the host gave to a new file gets that file.  In a
 * directory of new names, nothing is tried that way.
 */
static void test_lookup_known_first(TestFs *t, gconstpointer data)
{
    uint64_t dir = host_dir(t, "lk", 10), ino[10], again;
    struct fuse_forget_in fin = { .nlookup = 1 };
    struct fuse_attr attr;
    struct stat st;
    char name[32];
    int known, i, round;
    TestReq *r;

    if (data) {
        t->fs.inodes.idle_max = 100;
    }
    known = g_atomic_int_get(&t->fs.looked_up_known);
    for (i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "entry-%04u", i);
        ino[i] = test_lookup(t, dir, name, NULL);
    }
    /* New inodes: each opened, none stat first */
    g_assert_cmpint(g_atomic_int_get(&t->fs.looked_up_known), ==, known);
    for (round = 0; round < 3; round++) {
        for (i = 0; i < 10; i++) {
            snprintf(name, sizeof(name), "entry-%04u", i);
            g_assert_cmpuint(test_lookup(t, dir, name, &attr), ==, ino[i]);
        }
    }
    /* The first two known ones opened, raising the score, then stats */
    g_assert_cmpint(g_atomic_int_get(&t->fs.looked_up_known) - known, ==, 28);
    g_assert_cmpint(test_lookup_err(t, dir, "absent"), ==, -ENOENT);

    /* The host's own changes: a size, and a name given to a new file */
    g_assert_cmpint(truncate_at(t, "lk/entry-0001", 99), ==, 0);
    g_assert_cmpuint(test_lookup(t, dir, "entry-0001", &attr), ==, ino[1]);
    g_assert_cmpuint(attr.size, ==, 99);
    g_assert_cmpint(mknodat(t->dir_fd, "lk/new", S_IFREG | 0644, 0), ==, 0);
    g_assert_cmpint(renameat(t->dir_fd, "lk/new", t->dir_fd, "lk/entry-0002"),
                    ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "lk/entry-0002", &st, 0), ==, 0);
    again = test_lookup(t, dir, "entry-0002", &attr);
    g_assert_cmpuint(again, !=, ino[2]);
    g_assert_cmpuint(attr.ino, ==, st.st_ino);

    /* entry-0003 has 4 lookups: 3 FORGETs leave it, the 4th drops it */
    for (i = 0; i < 4; i++) {
        r = test_req_new(FUSE_FORGET, ino[3]);
        test_req_add(r, &fin, sizeof(fin));
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
        r = test_req_new(FUSE_GETATTR, ino[3]);
        test_req_add(r, &(struct fuse_getattr_in){ 0 },
                     sizeof(struct fuse_getattr_in));
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==,
                        i < 3 ? 0 : -ENOENT);
    }
}

/*
 * Inodes held by handle make their handle only when their fd goes:
 * none for one whose fd the idle list keeps, one once the list lets it
 * go (and the inode then opens through the broker as before).
 */
static void test_handles_lazy(TestFs *t, gconstpointer data)
{
    struct fuse_attr_out out;
    uint64_t ino[6];
    char name[16];
    int opened, i;
    VfsdInode *inode;
    TestReq *r;

    t->fs.inodes.idle_max = 3;
    for (i = 0; i < 6; i++) {
        snprintf(name, sizeof(name), "z%d", i);
        g_assert_cmpint(mknodat(t->dir_fd, name, S_IFREG | 0600, 0), ==, 0);
        ino[i] = test_lookup(t, FUSE_ROOT_ID, name, NULL);
    }
    /* The last three keep their fds, idle, and have no handle yet */
    for (i = 0; i < 6; i++) {
        inode = g_hash_table_lookup(t->fs.inodes.by_nodeid, &ino[i]);
        g_assert_nonnull(inode);
        g_assert_true(inode->by_handle);
        if (i < 3) {
            g_assert_cmpint(inode->fd, <, 0);
            g_assert_nonnull(inode->handle);
            g_assert_cmpuint(inode->broker_id, !=, 0);
        } else {
            g_assert_cmpint(inode->fd, >=, 0);
            g_assert_null(inode->handle);
        }
    }
    opened = g_atomic_int_get(&t->fs.handles_opened);
    r = test_req_new(FUSE_GETATTR, ino[1]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&t->fs.handles_opened), ==, opened + 1);
    g_assert_cmpuint(test_lookup(t, FUSE_ROOT_ID, "z1", NULL), ==, ino[1]);
}

/*
 * Inodes whose fds go (here: no idle fds at all) reach the broker
 * sixteen to a message, and so do those the guest forgets; whatever
 * waits for its batch goes before any other message, so an inode handed
 * over a moment ago opens all the same.
 */
static void test_handles_batched(TestFs *t, gconstpointer data)
{
    struct fuse_forget_in fin = { .nlookup = 1 };
    struct fuse_attr_out out;
    uint64_t ino[33];
    unsigned int sent;
    char name[16];
    int i;
    TestReq *r;

    t->fs.inodes.idle_max = 0;
    /* An open sends all that waits: nothing does after this one */
    g_assert_cmpint(mknodat(t->dir_fd, "b-first", S_IFREG | 0600, 0), ==, 0);
    ino[0] = test_lookup(t, FUSE_ROOT_ID, "b-first", NULL);
    r = test_req_new(FUSE_GETATTR, ino[0]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    sent = vfsd_broker_messages(t->fs.broker);
    for (i = 0; i < 33; i++) {
        snprintf(name, sizeof(name), "b%d", i);
        g_assert_cmpint(mknodat(t->dir_fd, name, S_IFREG | 0600, 0), ==, 0);
        ino[i] = test_lookup(t, FUSE_ROOT_ID, name, NULL);
    }
    g_assert_cmpuint(vfsd_broker_messages(t->fs.broker) - sent, ==, 2);
    /* The 33rd waits; opening it sends it first, then the open */
    r = test_req_new(FUSE_GETATTR, ino[32]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(vfsd_broker_messages(t->fs.broker) - sent, ==, 4);
    for (i = 0; i < 33; i++) {
        r = test_req_new(FUSE_FORGET, ino[i]);
        test_req_add(r, &fin, sizeof(fin));
        g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    }
    /* 33 forgotten: two batches sent, one waits */
    g_assert_cmpuint(vfsd_broker_messages(t->fs.broker) - sent, ==, 6);
    r = test_req_new(FUSE_GETATTR, ino[0]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);
}

static void test_statfs_access_syncfs(TestFs *t, gconstpointer data)
{
    struct fuse_statfs_out st;
    TestReq *r;

    r = test_req_new(FUSE_STATFS, FUSE_ROOT_ID);
    g_assert_cmpint(test_send(t, r, 4096, &st, sizeof(st), NULL), ==, 0);
    g_assert_cmpuint(st.st.bsize, >, 0);
    g_assert_cmpuint(st.st.namelen, >, 0);

    r = test_req_new(FUSE_ACCESS, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_access_in){ .mask = R_OK | X_OK },
                 sizeof(struct fuse_access_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_ACCESS, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_access_in){ .mask = 0x100 },
                 sizeof(struct fuse_access_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    r = test_req_new(FUSE_SYNCFS, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_syncfs_in){ 0 },
                 sizeof(struct fuse_syncfs_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

static void test_xattr(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "x", O_RDWR, &fh);
    struct fuse_setxattr_in sin = { .size = 5 };
    struct fuse_getxattr_in gin = { .size = 0 };
    struct fuse_getxattr_out gout;
    char buf[256];
    size_t len;
    TestReq *r;
    int ret;

    r = test_req_new(FUSE_SETXATTR, ino);
    test_req_add(r, &sin, sizeof(sin));
    test_req_add_str(r, "user.test");
    test_req_add(r, "value", 5);
    ret = test_send(t, r, 4096, NULL, 0, NULL);
    if (ret == -EOPNOTSUPP) {
        g_test_skip("no user xattrs on this file system");
        return;
    }
    g_assert_cmpint(ret, ==, 0);

    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    test_req_add_str(r, "user.test");
    g_assert_cmpint(test_send(t, r, 4096, &gout, sizeof(gout), NULL), ==, 0);
    g_assert_cmpuint(gout.size, ==, 5);

    gin.size = 64;
    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    test_req_add_str(r, "user.test");
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_cmpmem(buf, len, "value", 5);

    /* Too small a buffer */
    gin.size = 2;
    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    test_req_add_str(r, "user.test");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ERANGE);

    gin.size = 256;
    r = test_req_new(FUSE_LISTXATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    g_assert_cmpint(test_send(t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    g_assert_nonnull(memmem(buf, len, "user.test", 10));

    /* A value shorter than it claims */
    sin.size = 100;
    r = test_req_new(FUSE_SETXATTR, ino);
    test_req_add(r, &sin, sizeof(sin));
    test_req_add_str(r, "user.other");
    test_req_add(r, "abc", 3);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    r = test_req_new(FUSE_REMOVEXATTR, ino);
    test_req_add_str(r, "user.test");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fgetxattr(t->dir_fd, "user.test", NULL, 0), <, 0);
}

static void test_xattr_symlink(TestFs *t, gconstpointer data)
{
    struct fuse_setxattr_in sin = { .size = 1 };
    uint64_t link;
    int fd;
    TestReq *r;

    if (geteuid() != 0) {
        g_test_skip("needs root (trusted.* attributes)");
        return;
    }
    /* The xattr calls on a symlink act on the link, never its target */
    fd = openat(t->dir_fd, "target", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    g_assert_cmpint(symlinkat("target", t->dir_fd, "link"), ==, 0);
    link = test_lookup(t, FUSE_ROOT_ID, "link", NULL);
    r = test_req_new(FUSE_SETXATTR, link);
    test_req_add(r, &sin, sizeof(sin));
    test_req_add_str(r, "trusted.test");
    test_req_add(r, "v", 1);
    if (test_send(t, r, 4096, NULL, 0, NULL) == -EOPNOTSUPP) {
        g_test_skip("no trusted xattrs on this file system");
        return;
    }
    fd = openat(t->dir_fd, "target", O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fgetxattr(fd, "trusted.test", NULL, 0), <, 0);
    close(fd);
}

/* A handle of the shared directory itself, as OPENDIR gives the guest */
static uint64_t opendir_root(TestFs *t)
{
    TestReq *r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);
    struct fuse_open_out oo;

    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    return oo.fh;
}

/* FUSE_IOCTL with @cmd and @flags on @fh; the reply's data in @data */
static int ioctl_req(TestFs *t, uint64_t nodeid, uint64_t fh, uint32_t cmd,
                     uint32_t flags, uint32_t out_size, void *data,
                     size_t data_size, size_t *data_len)
{
    struct fuse_ioctl_in in = {
        .fh = fh, .cmd = cmd, .flags = flags, .out_size = out_size,
    };
    struct {
        struct fuse_ioctl_out out;
        uint8_t data[64];
    } rep;
    size_t len = 0;
    TestReq *r = test_req_new(FUSE_IOCTL, nodeid);
    int ret;

    test_req_add(r, &in, sizeof(in));
    ret = test_send(t, r, 4096, &rep, sizeof(rep), &len);
    if (ret == 0) {
        g_assert_cmpuint(len, >=, sizeof(rep.out));
        g_assert_cmpint(rep.out.result, ==, 0);
        g_assert_cmpuint(rep.out.flags, ==, 0);
        len -= sizeof(rep.out);
        g_assert_cmpuint(len, <=, data_size);
        memcpy(data, rep.data, len);
        *data_len = len;
    }
    return ret;
}

/*
 * The host's own answer to an attribute query on @name, errno included:
 * the guest must see exactly that
 */
static int host_fileattr(TestFs *t, const char *name, unsigned long cmd,
                         void *out)
{
    int fd = openat(t->dir_fd, name, O_RDONLY);
    int ret;

    g_assert_cmpint(fd, >=, 0);
    ret = ioctl(fd, cmd, out) < 0 ? -errno : 0;
    close(fd);
    return ret;
}

/*
 * IOCTL answers the two attribute queries Linux's fileattr code sends
 * (lsattr's flags, FS_IOC_FSGETXATTR) as the host has them, for a file
 * and a directory.  Compared with the host's own answer, which means
 * something only where the host's file system has these ioctls: on one
 * without (ramfs), the host says ENOTTY too and a daemon that never
 * answers would pass, so the test is skipped there, saying so
 * (mk/check.py puts TMPDIR on the build directory's file system, and
 * fails the test's skip where that one answers).
 */
static void test_ioctl_fileattr(TestFs *t, gconstpointer data)
{
    uint64_t fh, fhd, ino = test_create(t, FUSE_ROOT_ID, "a", O_RDWR, &fh);
    int host_flags = 0, want_flags;
    uint32_t flags;
    struct fsxattr fsx, host_fsx;
    size_t len;
    int ret, host_ret, fsx_ret;
    struct statfs sfs;

    host_ret = host_fileattr(t, "a", FS_IOC_GETFLAGS, &host_flags);
    fsx_ret = host_fileattr(t, "a", FS_IOC_FSGETXATTR, &host_fsx);
    if (host_ret < 0 || fsx_ret < 0) {
        g_autofree char *why = NULL;

        g_assert_cmpint(fstatfs(t->dir_fd, &sfs), ==, 0);
        why = g_strdup_printf("the host file system of %s (type 0x%lx) "
                              "cannot answer: FS_IOC_GETFLAGS %s, "
                              "FS_IOC_FSGETXATTR %s; nothing to compare "
                              "with (TMPDIR on one that has them)",
                              t->dir, (unsigned long)sfs.f_type,
                              g_strerror(-host_ret), g_strerror(-fsx_ret));
        g_test_skip(why);
        return;
    }
    /* A flag the test set, if the host's file system takes it */
    {
        int fd = openat(t->dir_fd, "a", O_RDONLY);

        host_flags |= FS_NODUMP_FL;
        if (ioctl(fd, FS_IOC_SETFLAGS, &host_flags) < 0) {
            g_test_message("the host cannot set nodump: %s", strerror(errno));
        }
        close(fd);
    }
    host_ret = host_fileattr(t, "a", FS_IOC_GETFLAGS, &want_flags);
    g_assert_cmpint(host_ret, ==, 0);
    g_test_message("host FS_IOC_GETFLAGS: flags 0x%x", want_flags);
    ret = ioctl_req(t, ino, fh, FS_IOC_GETFLAGS, 0, sizeof(flags), &flags,
                    sizeof(flags), &len);
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmpuint(len, ==, sizeof(flags));
    g_assert_cmphex(flags, ==, (uint32_t)want_flags);
    /* As a 32-bit guest kernel numbers it */
    ret = ioctl_req(t, ino, fh, FS_IOC32_GETFLAGS, FUSE_IOCTL_32BIT,
                    sizeof(flags), &flags, sizeof(flags), &len);
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmphex(flags, ==, (uint32_t)want_flags);

    memset(&host_fsx, 0, sizeof(host_fsx));
    g_assert_cmpint(host_fileattr(t, "a", FS_IOC_FSGETXATTR, &host_fsx), ==,
                    0);
    ret = ioctl_req(t, ino, fh, FS_IOC_FSGETXATTR, 0, sizeof(fsx), &fsx,
                    sizeof(fsx), &len);
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmpuint(len, ==, sizeof(fsx));
    g_assert_cmpmem(&fsx, sizeof(fsx), &host_fsx, sizeof(host_fsx));

    /* A directory, by its own kind of handle, errno included */
    fhd = opendir_root(t);
    host_ret = host_fileattr(t, ".", FS_IOC_GETFLAGS, &want_flags);
    ret = ioctl_req(t, FUSE_ROOT_ID, fhd, FS_IOC_GETFLAGS, FUSE_IOCTL_DIR,
                    sizeof(flags), &flags, sizeof(flags), &len);
    g_assert_cmpint(ret, ==, host_ret);
    if (!ret) {
        g_assert_cmphex(flags, ==, (uint32_t)want_flags);
    }
}

/*
 * What IOCTL refuses, whatever the host's file system: a handle of the
 * wrong kind or none, too little room for the answer, every other command
 * (setting among them), the unrestricted protocol, a truncated request.
 */
static void test_ioctl_refused(TestFs *t, gconstpointer data)
{
    uint64_t fh, fhd, ino = test_create(t, FUSE_ROOT_ID, "a", O_RDWR, &fh);
    struct fsxattr fsx;
    uint8_t buf[64];
    size_t len;
    TestReq *r;

    fhd = opendir_root(t);
    /* A handle of the other kind, or none */
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_GETFLAGS, FUSE_IOCTL_DIR,
                              4, buf, sizeof(buf), &len), ==, -EBADF);
    g_assert_cmpint(ioctl_req(t, FUSE_ROOT_ID, fhd, FS_IOC_GETFLAGS, 0,
                              4, buf, sizeof(buf), &len), ==, -EBADF);
    g_assert_cmpint(ioctl_req(t, ino, 12345, FS_IOC_FSGETXATTR, 0,
                              sizeof(fsx), buf, sizeof(buf), &len), ==,
                    -EBADF);
    /* Less room than the answer */
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_FSGETXATTR, 0,
                              sizeof(fsx) - 1, buf, sizeof(buf), &len), ==,
                    -EINVAL);
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_GETFLAGS, 0, 0, buf,
                              sizeof(buf), &len), ==, -EINVAL);

    /* Setting, a terminal's command, the unrestricted protocol: ENOTTY */
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_SETFLAGS, 0, 0, buf,
                              sizeof(buf), &len), ==, -ENOTTY);
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_FSSETXATTR, 0, 0, buf,
                              sizeof(buf), &len), ==, -ENOTTY);
    g_assert_cmpint(ioctl_req(t, ino, fh, TCGETS, 0, 60, buf, sizeof(buf),
                              &len), ==, -ENOTTY);
    g_assert_cmpint(ioctl_req(t, ino, fh, FS_IOC_GETFLAGS,
                              FUSE_IOCTL_UNRESTRICTED, 4, buf, sizeof(buf),
                              &len), ==, -ENOTTY);

    /* Truncated */
    r = test_req_new(FUSE_IOCTL, ino);
    test_req_add(r, &fh, sizeof(fh));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
}

static void test_fallocate_lseek_copy(TestFs *t, gconstpointer data)
{
    uint64_t fh, fh2, ino = test_create(t, FUSE_ROOT_ID, "a", O_RDWR, &fh);
    uint64_t ino2 = test_create(t, FUSE_ROOT_ID, "b", O_RDWR, &fh2);
    struct fuse_fallocate_in fin = { .fh = fh, .length = 65536 };
    struct fuse_lseek_in lin = { .fh = fh, .whence = SEEK_DATA };
    struct fuse_lseek_out lout;
    struct fuse_copy_file_range_in cin = {
        .fh_in = fh, .nodeid_out = ino2, .fh_out = fh2, .len = 5,
    };
    struct fuse_write_out wout;
    struct stat st;
    char buf[8];
    TestReq *r;

    r = test_req_new(FUSE_FALLOCATE, ino);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "a", &st, 0), ==, 0);
    g_assert_cmpint(st.st_size, ==, 65536);
    /* Modes the guest never sends */
    fin.mode = FALLOC_FL_COLLAPSE_RANGE;
    r = test_req_new(FUSE_FALLOCATE, ino);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EOPNOTSUPP);

    g_assert_cmpint(test_write(t, ino, fh, 0, "12345", 5), ==, 5);
    r = test_req_new(FUSE_LSEEK, ino);
    test_req_add(r, &lin, sizeof(lin));
    g_assert_cmpint(test_send(t, r, 4096, &lout, sizeof(lout), NULL), ==, 0);
    g_assert_cmpuint(lout.offset, ==, 0);
    lin.whence = SEEK_HOLE;
    r = test_req_new(FUSE_LSEEK, ino);
    test_req_add(r, &lin, sizeof(lin));
    g_assert_cmpint(test_send(t, r, 4096, &lout, sizeof(lout), NULL), ==, 0);
    g_assert_cmpuint(lout.offset, >=, 5);
    /* No such whence: the host's EINVAL */
    lin.whence = 77;
    r = test_req_new(FUSE_LSEEK, ino);
    test_req_add(r, &lin, sizeof(lin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    r = test_req_new(FUSE_COPY_FILE_RANGE, ino);
    test_req_add(r, &cin, sizeof(cin));
    g_assert_cmpint(test_send(t, r, 4096, &wout, sizeof(wout), NULL), ==, 0);
    g_assert_cmpuint(wout.size, ==, 5);
    host_read(t, "b", buf, 5);
    g_assert_cmpmem(buf, 5, "12345", 5);
}

static int statx_req(TestFs *t, uint64_t nodeid, uint32_t sx_flags,
                     uint32_t sx_mask, struct fuse_statx_out *out)
{
    TestReq *r = test_req_new(FUSE_STATX, nodeid);

    test_req_add(r, &(struct fuse_statx_in){ .sx_flags = sx_flags,
                                             .sx_mask = sx_mask },
                 sizeof(struct fuse_statx_in));
    return test_send(t, r, 4096, out, sizeof(*out), NULL);
}

/* What the guest may see of the host's attributes (see fs.c) */
#define HOST_VIEW_ATTRS (STATX_ATTR_MOUNT_ROOT | STATX_ATTR_AUTOMOUNT | \
                         STATX_ATTR_DAX | 0x00400000)

static void assert_sx_time(const struct fuse_sx_time *w,
                           const struct statx_timestamp *h)
{
    g_assert_cmpint(w->tv_sec, ==, h->tv_sec);
    g_assert_cmpuint(w->tv_nsec, ==, h->tv_nsec);
}

/*
 * STATX's answer for @nodeid against the host's own statx() of @name:
 * every field, the birth time included where the host has one.
 */
static void check_statx(TestFs *t, uint64_t nodeid, const char *name,
                        uint32_t sx_mask)
{
    struct fuse_statx_out out;
    struct statx h;
    const struct fuse_statx *w = &out.stat;
    unsigned int i;

    g_assert_cmpint(statx_req(t, nodeid, 0, sx_mask, &out), ==, 0);
    /* The basic fields whatever the guest asks for, the rest if asked */
    g_assert_cmpint(statx(t->dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH,
                          STATX_BASIC_STATS | (sx_mask & STATX_BTIME), &h),
                    ==, 0);
    g_assert_cmphex(w->mask, ==,
                    h.stx_mask & (STATX_BASIC_STATS | STATX_BTIME));
    g_assert_cmphex(w->mask & STATX_BASIC_STATS, ==, STATX_BASIC_STATS);
    g_assert_cmpuint(w->blksize, ==, h.stx_blksize);
    g_assert_cmphex(w->attributes_mask, ==,
                    h.stx_attributes_mask & ~(uint64_t)HOST_VIEW_ATTRS);
    g_assert_cmphex(w->attributes, ==,
                    h.stx_attributes & w->attributes_mask);
    g_assert_cmpuint(w->nlink, ==, h.stx_nlink);
    g_assert_cmpuint(w->uid, ==, h.stx_uid);
    g_assert_cmpuint(w->gid, ==, h.stx_gid);
    g_assert_cmphex(w->mode, ==, h.stx_mode);
    g_assert_cmpuint(w->ino, ==, h.stx_ino);
    g_assert_cmpuint(w->size, ==, h.stx_size);
    g_assert_cmpuint(w->blocks, ==, h.stx_blocks);
    assert_sx_time(&w->atime, &h.stx_atime);
    if (h.stx_mask & STATX_BTIME) {
        assert_sx_time(&w->btime, &h.stx_btime);
    } else {
        g_assert_cmpint(w->btime.tv_sec, ==, 0);
    }
    assert_sx_time(&w->ctime, &h.stx_ctime);
    assert_sx_time(&w->mtime, &h.stx_mtime);
    g_assert_cmpuint(w->rdev_major, ==, h.stx_rdev_major);
    g_assert_cmpuint(w->rdev_minor, ==, h.stx_rdev_minor);
    g_assert_cmpuint(w->dev_major, ==, h.stx_dev_major);
    g_assert_cmpuint(w->dev_minor, ==, h.stx_dev_minor);
    for (i = 0; i < G_N_ELEMENTS(w->__spare2); i++) {
        g_assert_cmpuint(w->__spare2[i], ==, 0);
    }
    g_assert_cmpuint(out.flags, ==, 0);
    g_assert_cmpuint(out.attr_valid, ==, (uint64_t)t->fs.attr_timeout);
}

/* What the host's statx() of @name gives with @flags and @mask */
static int host_statx_err(TestFs *t, const char *name, int flags,
                          uint32_t mask)
{
    struct statx h;

    return statx(t->dir_fd, name, AT_SYMLINK_NOFOLLOW | flags, mask, &h) < 0
           ? -errno : 0;
}

static void test_statx(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    uint64_t dir, link;
    struct fuse_statx_out out;
    struct fuse_attr_out aout;
    struct statx h;
    int fd, flags, ret;
    TestReq *r;

    g_assert_cmpint(test_write(t, ino, fh, 0, "birth", 5), ==, 5);
    g_assert_cmpint(statx(t->dir_fd, "f", 0, STATX_BTIME, &h), ==, 0);
    check_statx(t, ino, "f", STATX_BASIC_STATS | STATX_BTIME);
    if (h.stx_mask & STATX_BTIME) {
        g_assert_cmpint(statx_req(t, ino, 0, STATX_BTIME, &out), ==, 0);
        g_assert_cmphex(out.stat.mask & STATX_BTIME, ==, STATX_BTIME);
        g_assert_cmpint(out.stat.btime.tv_sec, ==, h.stx_btime.tv_sec);
        g_assert_cmpuint(out.stat.btime.tv_nsec, ==, h.stx_btime.tv_nsec);
    } else {
        g_test_message("no birth times on this file system: not compared");
    }
    /* The basic fields come even when only the birth time is asked for */
    check_statx(t, ino, "f", STATX_BTIME);
    check_statx(t, ino, "f", 0);
    check_statx(t, FUSE_ROOT_ID, "", STATX_BASIC_STATS | STATX_BTIME);
    g_assert_cmpint(mkdirat(t->dir_fd, "d", 0750), ==, 0);
    dir = test_lookup(t, FUSE_ROOT_ID, "d", NULL);
    check_statx(t, dir, "d", STATX_BASIC_STATS | STATX_BTIME);
    /* A symlink's own attributes, never its target's */
    g_assert_cmpint(symlinkat("f", t->dir_fd, "l"), ==, 0);
    link = test_lookup(t, FUSE_ROOT_ID, "l", NULL);
    check_statx(t, link, "l", STATX_BASIC_STATS | STATX_BTIME);

    /* An attribute the host keeps (nodump, which its owner may set) */
    fd = openat(t->dir_fd, "f", O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    flags = FS_NODUMP_FL;
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0) {
        g_assert_cmpint(statx_req(t, ino, 0, STATX_BASIC_STATS, &out), ==, 0);
        g_assert_cmphex(out.stat.attributes_mask & STATX_ATTR_NODUMP, ==,
                        STATX_ATTR_NODUMP);
        g_assert_cmphex(out.stat.attributes & STATX_ATTR_NODUMP, ==,
                        STATX_ATTR_NODUMP);
        check_statx(t, ino, "f", STATX_BASIC_STATS);
        flags = 0;
        g_assert_cmpint(ioctl(fd, FS_IOC_SETFLAGS, &flags), ==, 0);
    } else {
        g_test_message("no FS_IOC_SETFLAGS here (%s): nodump not compared",
                       g_strerror(errno));
    }
    close(fd);

    /* Sync hints go to the host */
    g_assert_cmpint(statx_req(t, ino, AT_STATX_FORCE_SYNC, STATX_BTIME,
                              &out), ==, 0);
    g_assert_cmpint(statx_req(t, ino, AT_STATX_DONT_SYNC, STATX_BTIME,
                              &out), ==, 0);
    /* ...and so do the ones statx(2) refuses: its errno, not ours */
    g_assert_cmpint(host_statx_err(t, "f", AT_STATX_SYNC_TYPE, 0), ==,
                    -EINVAL);
    g_assert_cmpint(statx_req(t, ino, AT_STATX_SYNC_TYPE, 0, &out), ==,
                    host_statx_err(t, "f", AT_STATX_SYNC_TYPE, 0));
    g_assert_cmpint(statx_req(t, ino, 0, STATX__RESERVED, &out), ==,
                    host_statx_err(t, "f", 0, STATX__RESERVED));
    /* No such inode */
    g_assert_cmpint(statx_req(t, 999999, 0, STATX_BASIC_STATS, &out), ==,
                    -ENOENT);
    /*
     * An unlinked file the guest still knows: what GETATTR gets (nlink 0,
     * or the host's error where a file handle cannot reopen it)
     */
    g_assert_cmpint(unlinkat(t->dir_fd, "f", 0), ==, 0);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    ret = test_send(t, r, 4096, &aout, sizeof(aout), NULL);
    g_assert_cmpint(statx_req(t, ino, 0, STATX_BASIC_STATS, &out), ==, ret);
    if (ret == 0) {
        g_assert_cmpuint(out.stat.nlink, ==, 0);
        g_assert_cmpuint(aout.attr.nlink, ==, 0);
    }
}

/*
 * COPY_FILE_RANGE_64: the host's copy_file_range() on the same files,
 * with a count that may be past 4 GiB, and the host's errors.
 */
static int copy64_req(TestFs *t, uint64_t nodeid,
                      const struct fuse_copy_file_range_in *in,
                      uint64_t *copied)
{
    TestReq *r = test_req_new(FUSE_COPY_FILE_RANGE_64, nodeid);
    struct fuse_copy_file_range_out out;
    size_t len;
    int ret;

    test_req_add(r, in, sizeof(*in));
    ret = test_send(t, r, 4096, &out, sizeof(out), &len);
    if (ret == 0) {
        g_assert_cmpuint(len, ==, sizeof(out));
        *copied = out.bytes_copied;
    }
    return ret;
}

static ssize_t host_copy(TestFs *t, const char *from, uint64_t off_in,
                         const char *to, uint64_t off_out, size_t len,
                         unsigned int flags)
{
    int in = openat(t->dir_fd, from, O_RDONLY | O_CLOEXEC);
    int out = openat(t->dir_fd, to, O_RDWR | O_CLOEXEC);
    loff_t pin = off_in, pout = off_out;
    ssize_t n;

    g_assert_cmpint(in, >=, 0);
    g_assert_cmpint(out, >=, 0);
    n = copy_file_range(in, &pin, out, &pout, len, flags);
    if (n < 0) {
        n = -errno;
    }
    close(in);
    close(out);
    return n;
}

static void test_copy_file_range_64(TestFs *t, gconstpointer data)
{
    static const char text[] = "the quick brown fox";
    uint64_t fh, fh2, fhd, copied;
    uint64_t ino = test_create(t, FUSE_ROOT_ID, "a", O_RDWR, &fh);
    uint64_t ino2 = test_create(t, FUSE_ROOT_ID, "b", O_RDWR, &fh2);
    struct fuse_copy_file_range_in in = {
        .fh_in = fh, .nodeid_out = ino2, .fh_out = fh2,
        .off_out = 3, .len = UINT64_MAX,
    };
    struct fuse_write_out wout;
    char buf[sizeof(text) + 3], hbuf[sizeof(text) + 3];
    TestReq *r;

    g_assert_cmpint(test_write(t, ino, fh, 0, text, sizeof(text) - 1), ==,
                    sizeof(text) - 1);
    g_assert_cmpint(mknodat(t->dir_fd, "c", S_IFREG | 0644, 0), ==, 0);

    /* The whole file, whatever the length asked for: as the host copies */
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, 0);
    g_assert_cmpint(host_copy(t, "a", 0, "c", 3, SSIZE_MAX, 0), ==,
                    (ssize_t)copied);
    g_assert_cmpuint(copied, ==, sizeof(text) - 1);
    host_read(t, "b", buf, sizeof(buf) - 1);
    host_read(t, "c", hbuf, sizeof(hbuf) - 1);
    g_assert_cmpmem(buf, sizeof(buf) - 1, hbuf, sizeof(hbuf) - 1);
    g_assert_cmpmem(buf + 3, sizeof(text) - 1, text, sizeof(text) - 1);

    /* A part, from an offset */
    in.off_in = 4;
    in.off_out = 0;
    in.len = 5;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, 0);
    g_assert_cmpuint(copied, ==, 5);
    host_read(t, "b", buf, 5);
    g_assert_cmpmem(buf, 5, "quick", 5);
    /* At the end of the file: nothing to copy */
    in.off_in = sizeof(text) - 1;
    in.len = UINT64_MAX;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, 0);
    g_assert_cmpuint(copied, ==, 0);

    /* The 32-bit one is the same operation, with its own reply */
    in.off_in = 0;
    in.len = 3;
    r = test_req_new(FUSE_COPY_FILE_RANGE, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &wout, sizeof(wout), NULL), ==, 0);
    g_assert_cmpuint(wout.size, ==, 3);

    /* Errors are the host's */
    in.off_in = 0;
    in.off_out = 2;
    in.len = 5;
    in.fh_out = fh;
    g_assert_cmpint(host_copy(t, "a", 0, "a", 2, 5, 0), ==, -EINVAL);
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EINVAL);
    in.fh_out = fh2;
    in.flags = 1;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==,
                    host_copy(t, "a", 0, "c", 0, 5, 1));
    in.flags = 1ULL << 40;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EINVAL);
    in.flags = 0;
    in.off_in = (uint64_t)INT64_MAX + 1;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EINVAL);
    in.off_in = 0;
    /* File handles the guest does not have, or that are directories' */
    in.fh_in = 12345;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EBADF);
    in.fh_in = fh;
    in.fh_out = 12345;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EBADF);
    fhd = opendir_root(t);
    in.fh_out = fhd;
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EBADF);
    /* Read-only destination: the host's EBADF */
    in.fh_out = test_open(t, ino2, O_RDONLY);
    g_assert_cmpint(copy64_req(t, ino, &in, &copied), ==, -EBADF);
}

static void test_locks(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "l", O_RDWR, &fh);
    struct fuse_lk_in in = {
        .fh = fh, .owner = 1,
        .lk = { .start = 0, .end = 99, .type = F_WRLCK },
    };
    struct fuse_lk_out out;
    TestReq *r;

    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);

    /* Another owner sees the lock and cannot take it */
    in.owner = 2;
    r = test_req_new(FUSE_GETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.lk.type, ==, F_WRLCK);
    g_assert_cmpuint(out.lk.end, ==, 99);
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EAGAIN);

    /* The first owner's FLUSH (its close) drops it */
    r = test_req_new(FUSE_FLUSH, ino);
    test_req_add(r, &(struct fuse_flush_in){ .fh = fh, .lock_owner = 1 },
                 sizeof(struct fuse_flush_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_SETLKW, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);

    /* Nonsense ranges and types */
    in.lk.start = 100;
    in.lk.end = 10;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);
    in.lk.end = 200;
    in.lk.type = 77;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -EINVAL);

    /* BSD locks */
    in.lk_flags = FUSE_LK_FLOCK;
    in.lk.type = F_WRLCK;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

static int setlk_req(TestFs *t, uint64_t ino, uint32_t opcode,
                     const struct fuse_lk_in *in)
{
    TestReq *r = test_req_new(opcode, ino);

    test_req_add(r, in, sizeof(*in));
    return test_send(t, r, 4096, NULL, 0, NULL);
}

/*
 * A SETLKW the transport has no thread left to wait in: the lock if it
 * is free, ENOLCK if it is taken (POSIX and BSD locks alike).
 */
static void test_setlkw_no_wait(TestFs *t, gconstpointer data)
{
    uint64_t fh2, fh, ino = test_create(t, FUSE_ROOT_ID, "l", O_RDWR, &fh);
    struct fuse_lk_in in = {
        .fh = fh, .owner = 1,
        .lk = { .start = 0, .end = 99, .type = F_WRLCK },
    };

    fh2 = test_open(t, ino, O_RDWR);
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLK, &in), ==, 0);
    t->no_wait = true;
    in.owner = 2;
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLKW, &in), ==, -ENOLCK);
    in.lk.start = 100;
    in.lk.end = 199;
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLKW, &in), ==, 0);

    in.lk_flags = FUSE_LK_FLOCK;
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLKW, &in), ==, 0);
    in.fh = fh2;
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLKW, &in), ==, -ENOLCK);
    /* Only SETLKW is affected: SETLK answers EAGAIN as always */
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLK, &in), ==, -EAGAIN);
}

typedef struct LockWaiter {
    TestFs *t;
    uint8_t req[sizeof(struct fuse_in_header) + sizeof(struct fuse_lk_in)];
    int ret;
} LockWaiter;

static gpointer lock_waiter_thread(gpointer opaque)
{
    LockWaiter *w = opaque;

    w->ret = test_send_raw(w->t, w->req, sizeof(w->req), 4096, NULL, 0,
                           NULL);
    return NULL;
}

/* A SETLKW from @owner with @unique, laid out for test_send_raw() */
static void lock_waiter_init(LockWaiter *w, TestFs *t, uint64_t ino,
                             uint64_t unique, const struct fuse_lk_in *in)
{
    struct fuse_in_header h = {
        .len = sizeof(w->req), .opcode = FUSE_SETLKW, .unique = unique,
        .nodeid = ino, .pid = 1,
    };

    w->t = t;
    memcpy(w->req, &h, sizeof(h));
    memcpy(w->req + sizeof(h), in, sizeof(*in));
}

static unsigned int count_waiters(TestFs *t)
{
    unsigned int n;

    g_mutex_lock(&t->fs.intr.lock);
    n = g_list_length(t->fs.intr.waiters);
    g_mutex_unlock(&t->fs.intr.lock);
    return n;
}

/*
 * Whether a lock request on host inode @ino waits in the kernel: the
 * proof that a waiter is inside fcntl() or flock(), which no registry of
 * the daemon's gives.  /proc/locks lists a blocked request as
 * "N: -> CLASS MODE TYPE PID MAJ:MIN:INODE START END".
 */
static bool lock_blocked_in_kernel(ino_t ino)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    unsigned int i, j;

    g_assert_true(g_file_get_contents("/proc/locks", &text, NULL, NULL));
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++) {
        g_auto(GStrv) tok = NULL;

        if (!strstr(lines[i], " -> ")) {
            continue;
        }
        tok = g_strsplit_set(lines[i], " ", -1);
        for (j = 0; tok[j]; j++) {
            unsigned int maj, min;
            unsigned long long n;
            char end;

            if (sscanf(tok[j], "%x:%x:%llu%c", &maj, &min, &n, &end) == 3 &&
                n == ino) {
                return true;
            }
        }
    }
    return false;
}

static void wait_lock_blocked_in_kernel(TestFs *t, const char *name)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
    struct stat st;

    g_assert_cmpint(fstatat(t->dir_fd, name, &st, 0), ==, 0);
    while (!lock_blocked_in_kernel(st.st_ino)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static void send_interrupt(TestFs *t, uint64_t unique)
{
    TestReq *r = test_req_new(FUSE_INTERRUPT, 0);

    test_req_add(r, &(struct fuse_interrupt_in){ .unique = unique },
                 sizeof(struct fuse_interrupt_in));
    t->hiprio = true;
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    t->hiprio = false;
}

/* FUSE_INTERRUPT ends a SETLKW's wait with EINTR, POSIX or BSD lock */
static void test_interrupt_setlkw(TestFs *t, gconstpointer data)
{
    uint64_t fh2, fh, ino = test_create(t, FUSE_ROOT_ID, "l", O_RDWR, &fh);
    struct fuse_lk_in in = {
        .fh = fh, .owner = 1,
        .lk = { .start = 0, .end = 99, .type = F_WRLCK },
    };
    VfsdWaiter *waiter;
    gint64 deadline;
    LockWaiter w;
    GThread *th;
    int pass;

    fh2 = test_open(t, ino, O_RDWR);
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLK, &in), ==, 0);
    in.lk_flags = FUSE_LK_FLOCK;
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLK, &in), ==, 0);

    for (pass = 0; pass < 2; pass++) {
        in.lk_flags = pass ? FUSE_LK_FLOCK : 0;
        in.owner = 2;
        in.fh = fh2;
        lock_waiter_init(&w, t, ino, 1000 + pass, &in);
        th = g_thread_new("waiter", lock_waiter_thread, &w);
        deadline = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
        while (count_waiters(t) == 0) {
            g_assert_cmpint(g_get_monotonic_time(), <, deadline);
            g_usleep(1000);
        }
        /* The interrupt must end a wait inside fcntl()/flock() */
        wait_lock_blocked_in_kernel(t, "l");
        /*
         * Not waiting: nothing happens.  Marking the waiter is what makes
         * it give up, and is done before the INTERRUPT is answered.
         */
        send_interrupt(t, 999);
        g_mutex_lock(&t->fs.intr.lock);
        g_assert_cmpuint(g_list_length(t->fs.intr.waiters), ==, 1);
        waiter = t->fs.intr.waiters->data;
        g_assert_cmpuint(waiter->unique, ==, 1000 + pass);
        g_assert_false(waiter->interrupted);
        g_mutex_unlock(&t->fs.intr.lock);
        g_assert_cmpuint(count_waiters(t), ==, 1);
        send_interrupt(t, 1000 + pass);
        g_thread_join(th);
        g_assert_cmpint(w.ret, ==, -EINTR);
        g_assert_cmpuint(count_waiters(t), ==, 0);
    }

    /* An INTERRUPT that overtook its request still counts */
    send_interrupt(t, 2000);
    in.lk_flags = 0;
    lock_waiter_init(&w, t, ino, 2000, &in);
    lock_waiter_thread(&w);
    g_assert_cmpint(w.ret, ==, -EINTR);

    /* Without an interrupt the wait ends with the lock */
    lock_waiter_init(&w, t, ino, 3000, &in);
    th = g_thread_new("waiter", lock_waiter_thread, &w);
    in.owner = 1;
    in.fh = fh;
    in.lk.type = F_UNLCK;
    /* Woken up by the unlock, not in time to find it gone */
    wait_lock_blocked_in_kernel(t, "l");
    g_assert_cmpint(setlk_req(t, ino, FUSE_SETLK, &in), ==, 0);
    g_thread_join(th);
    g_assert_cmpint(w.ret, ==, 0);
}

typedef struct Interrupter {
    TestFs *t;
    uint64_t unique;
    gint finished;
} Interrupter;

static gpointer interrupter_thread(gpointer opaque)
{
    Interrupter *it = opaque;

    vfsd_interrupt(&it->t->fs, it->unique);
    g_atomic_int_set(&it->finished, 1);
    return NULL;
}

static void wait_interrupted(TestFs *t, VfsdWaiter *w)
{
    gint64 deadline = g_get_monotonic_time() + 5 * G_TIME_SPAN_SECOND;

    while (!vfsd_waiter_interrupted(&t->fs, w)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

/*
 * Two waits with the same unique (a guest may reuse one): the first to
 * end must leave nothing of itself behind, and an INTERRUPT still reaches
 * the other.  The waiters live on the heap here, so that the test can
 * scribble over one that ended, as its stack frame would be reused.
 */
static void test_interrupt_duplicate_unique(TestFs *t, gconstpointer data)
{
    g_autofree VfsdWaiter *a = g_new0(VfsdWaiter, 1);
    g_autofree VfsdWaiter *b = g_new0(VfsdWaiter, 1);
    Interrupter it = { .t = t, .unique = 5000 };
    GThread *th;

    vfsd_waiter_begin(&t->fs, a, 5000);
    vfsd_waiter_begin(&t->fs, b, 5000);
    vfsd_waiter_end(&t->fs, a);
    memset(a, 0xa5, sizeof(*a));
    g_assert_cmpuint(count_waiters(t), ==, 1);

    th = g_thread_new("interrupter", interrupter_thread, &it);
    wait_interrupted(t, b);
    vfsd_waiter_end(&t->fs, b);
    g_thread_join(th);
    g_assert_cmpuint(count_waiters(t), ==, 0);
}

/*
 * An interrupter waits for its waiter to end: once vfsd_waiter_end() has
 * returned, the waiter's memory is its thread's again and the
 * interrupter must not look at it any more.
 */
static void test_interrupt_waiter_lifetime(TestFs *t, gconstpointer data)
{
    g_autofree VfsdWaiter *w = g_new0(VfsdWaiter, 1);
    Interrupter it = { .t = t, .unique = 6000 };
    GThread *th;

    vfsd_waiter_begin(&t->fs, w, 6000);
    th = g_thread_new("interrupter", interrupter_thread, &it);
    /* Set under intr_lock, which the interrupter keeps until it waits */
    wait_interrupted(t, w);
    vfsd_waiter_end(&t->fs, w);
    /* The frame is reused: it reads as a waiter that has not ended */
    w->done = false;
    g_usleep(100 * 1000);
    if (!g_atomic_int_get(&it.finished)) {
        g_test_message("the interrupter still looks at an ended waiter");
        g_test_fail();
        g_mutex_lock(&t->fs.intr.lock);
        w->done = true;
        g_mutex_unlock(&t->fs.intr.lock);
    }
    g_thread_join(th);
}

/* Whether the guest holds no lookup of @ino: one more, forgotten, ends it */
static void assert_no_lookups(TestFs *t, const char *name)
{
    struct fuse_forget_in fin = { .nlookup = 1 };
    uint64_t ino = test_lookup(t, FUSE_ROOT_ID, name, NULL);
    TestReq *r;

    r = test_req_new(FUSE_FORGET, ino);
    test_req_add(r, &fin, sizeof(fin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);
}

/*
 * A reply that never reaches the guest hands it nothing: the lookups and
 * handles it would have carried are dropped, not kept for a FORGET or
 * RELEASE that cannot come.
 */
static void test_lost_reply(TestFs *t, gconstpointer data)
{
    struct fuse_read_in rin = { .size = 4096 };
    struct fuse_open_out o;
    int fd, fds;
    TestReq *r;

    fd = openat(t->dir_fd, "a", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    g_assert_cmpint(mkdirat(t->dir_fd, "d", 0755), ==, 0);

    r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_open_in){ 0 }, sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &o, sizeof(o), NULL), ==, 0);
    rin.fh = o.fh;
    t->reply_fails = true;
    r = test_req_new(FUSE_READDIRPLUS, FUSE_ROOT_ID);
    test_req_add(r, &rin, sizeof(rin));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    t->reply_fails = false;
    assert_no_lookups(t, "a");
    assert_no_lookups(t, "d");

    /* Entry replies, lost or too big for the guest's buffer */
    t->reply_fails = true;
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add_str(r, "a");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    t->reply_fails = false;
    assert_no_lookups(t, "a");
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add_str(r, "a");
    g_assert_cmpint(test_send(t, r, sizeof(struct fuse_out_header) + 8,
                              NULL, 0, NULL), ==, -EIO);
    assert_no_lookups(t, "a");

    /* CREATE of an existing file: a lookup and an open file */
    fds = g_atomic_int_get(&t->fs.fds_open);
    t->reply_fails = true;
    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "a");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    t->reply_fails = false;
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, fds);
    assert_no_lookups(t, "a");
}

static void test_tmpfile(TestFs *t, gconstpointer data)
{
    TestReq *r = test_req_new(FUSE_TMPFILE, FUSE_ROOT_ID);
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } out;
    int ret;

    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                              .mode = S_IFREG | 0600 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "/");
    ret = test_send(t, r, 4096, &out, sizeof(out), NULL);
    if (ret == -EOPNOTSUPP) {
        g_test_skip("no O_TMPFILE here");
        return;
    }
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmpuint(out.e.nodeid, !=, 0);
    g_assert_cmpint(test_write(t, out.e.nodeid, out.o.fh, 0, "t", 1), ==, 1);
}

static void test_forget(TestFs *t, gconstpointer data)
{
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    struct fuse_batch_forget_in b = { .count = 1 };
    struct fuse_forget_one one = { .nodeid = ino, .nlookup = 2 };
    int before;
    TestReq *r;

    r = test_req_new(FUSE_RELEASE, ino);
    test_req_add(r, &(struct fuse_release_in){ .fh = fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpuint(test_lookup(t, FUSE_ROOT_ID, "f", NULL), ==, ino);
    before = g_atomic_int_get(&t->fs.fds_open);

    r = test_req_new(FUSE_BATCH_FORGET, 0);
    test_req_add(r, &b, sizeof(b));
    test_req_add(r, &one, sizeof(one));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    /* Both lookups forgotten: the inode and its fd are gone */
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before - 1);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, -ENOENT);
}

/*
 * --inode-file-handles: the inodes the guest knows hold no fd once their
 * requests are done, each request opens its inode from the handle, and a
 * file deleted on the host gives the guest the host's ESTALE.
 */
static void test_handles(TestFs *t, gconstpointer data)
{
    struct fuse_attr_out out;
    struct stat st;
    uint64_t ino[50], fh, again;
    char name[16];
    int before, opened, made, i;
    TestReq *r;

    /* No idle fds: every request opens its inode (see test_handles_idle) */
    t->fs.inodes.idle_max = 0;
    before = g_atomic_int_get(&t->fs.fds_open);
    made = g_atomic_int_get(&t->fs.handles_made);
    for (i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        g_assert_cmpint(mknodat(t->dir_fd, name, S_IFREG | 0600, 0), ==, 0);
        ino[i] = test_lookup(t, FUSE_ROOT_ID, name, NULL);
    }
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);
    g_assert_cmpint(g_atomic_int_get(&t->fs.handles_made), ==, made + 50);

    opened = g_atomic_int_get(&t->fs.handles_opened);
    r = test_req_new(FUSE_GETATTR, ino[7]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&t->fs.handles_opened), ==, opened + 1);
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);

    /* An open file keeps its inode's fd while it is open */
    fh = test_open(t, ino[8], O_RDWR);
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before + 2);
    g_assert_cmpint(test_write(t, ino[8], fh, 0, "x", 1), ==, 1);
    r = test_req_new(FUSE_RELEASE, ino[8]);
    test_req_add(r, &(struct fuse_release_in){ .fh = fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);

    g_assert_cmpint(fstatat(t->dir_fd, "f9", &st, 0), ==, 0);
    g_assert_cmpint(unlinkat(t->dir_fd, "f9", 0), ==, 0);
    r = test_req_new(FUSE_GETATTR, ino[9]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==,
                    -ESTALE);
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);

    /*
     * Nothing holds f9's host inode now, so its number may go to a new
     * file, which must be an inode of its own: the stale one's handle
     * cannot open it (created through the daemon, it failed with EIO).
     */
    for (i = 0; i < 100; i++) {
        struct stat nst;

        snprintf(name, sizeof(name), "n%d", i);
        again = test_create(t, FUSE_ROOT_ID, name, O_RDWR, &fh);
        g_assert_cmpint(fstatat(t->dir_fd, name, &nst, 0), ==, 0);
        if (nst.st_ino == st.st_ino) {
            g_test_message("new file %d got the number", i);
            break;
        }
    }
    if (i == 100) {
        g_test_message("the scratch file system gave none of 100 new "
                       "files the deleted file's number %ju: case not "
                       "reached", (uintmax_t)st.st_ino);
        g_test_fail();
        return;
    }
    g_assert_cmpuint(again, !=, ino[9]);
    g_assert_cmpint(test_write(t, again, fh, 0, "y", 1), ==, 1);
    r = test_req_new(FUSE_GETATTR, again);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.size, ==, 1);
    g_assert_cmpuint(test_lookup(t, FUSE_ROOT_ID, name, NULL), ==, again);
    r = test_req_new(FUSE_GETATTR, ino[9]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==,
                    -ESTALE);
}

/*
 * Handle inodes keep their fd a while after their last user (the idle
 * list, idle_max of them): a request on a recent one opens nothing, one
 * on an inode the list has let go opens it through the broker again,
 * and none of it counts against the guest's fds.
 */
static void test_handles_idle(TestFs *t, gconstpointer data)
{
    struct fuse_attr_out out;
    uint64_t ino[5];
    char name[16];
    int before, opened, i;
    TestReq *r;

    t->fs.inodes.idle_max = 2;
    before = g_atomic_int_get(&t->fs.fds_open);
    for (i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "i%d", i);
        g_assert_cmpint(mknodat(t->dir_fd, name, S_IFREG | 0600, 0), ==, 0);
        ino[i] = test_lookup(t, FUSE_ROOT_ID, name, NULL);
    }
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);
    g_assert_cmpuint(t->fs.inodes.idle.length, ==, 2);

    opened = g_atomic_int_get(&t->fs.handles_opened);
    r = test_req_new(FUSE_GETATTR, ino[4]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&t->fs.handles_opened), ==, opened);

    r = test_req_new(FUSE_GETATTR, ino[0]);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&t->fs.handles_opened), ==, opened + 1);
    g_assert_cmpuint(t->fs.inodes.idle.length, ==, 2);
    g_assert_cmpint(g_atomic_int_get(&t->fs.fds_open), ==, before);

    /* A forgotten inode's idle fd goes at once */
    r = test_req_new(FUSE_FORGET, ino[0]);
    test_req_add(r, &(struct fuse_forget_in){ .nlookup = 1 },
                 sizeof(struct fuse_forget_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 1);
    g_assert_cmpuint(t->fs.inodes.idle.length, ==, 1);
}

static void test_handles_startup(void)
{
    VfsdOptions o;
    TestFs t;

    /* prefer: handles as root, fds without CAP_DAC_READ_SEARCH */
    test_fs_setup(&t, NULL);
    o = t.opts;
    test_fs_teardown(&t);
    o.inode_file_handles = VFSD_INODE_FH_PREFER;
    test_fs_setup(&t, &o);
    g_assert_cmpint(t.fs.use_handles, ==, geteuid() == 0);
    test_fs_teardown(&t);
}

/*
 * FUSE_SECURITY_CTX: appends a security label extension to @r, as Linux
 * sends one: a header whose type is @count, a fuse_secctx, the name and
 * the value, padded to 8 bytes.
 */
static void add_label(TestReq *r, const char *name, const char *value,
                      uint32_t count)
{
    size_t len = sizeof(struct fuse_secctx_header) +
                 sizeof(struct fuse_secctx) + strlen(name) + 1 +
                 strlen(value);
    struct fuse_secctx_header sh = {
        .size = (len + 7) & ~(size_t)7, .nr_secctx = count,
    };
    struct fuse_secctx sc = { .size = strlen(value) };
    struct fuse_in_header *h;
    static const char zeros[8];

    test_req_add(r, &sh, sizeof(sh));
    test_req_add(r, &sc, sizeof(sc));
    test_req_add_str(r, name);
    test_req_add(r, value, strlen(value));
    test_req_add(r, zeros, sh.size - len);
    h = (void *)r->data->data;
    h->total_extlen = sh.size / 8;
}

/* What the host has under @attr on @name, or "" */
static char *host_label(TestFs *t, const char *name, const char *attr)
{
    g_autofree char *path = g_strdup_printf("%s/%s", t->dir, name);
    char buf[256];
    ssize_t n = lgetxattr(path, attr, buf, sizeof(buf) - 1);

    return g_strndup(buf, n < 0 ? 0 : n);
}

/* Nothing but @names in the share: no temporary name was left behind */
static void assert_only(TestFs *t, const char *const *names)
{
    g_autoptr(GDir) d = g_dir_open(t->dir, 0, NULL);
    const char *n;

    g_assert_nonnull(d);
    while ((n = g_dir_read_name(d))) {
        if (!g_strv_contains(names, n)) {
            g_error("'%s' left in the share", n);
        }
    }
}

static int label_req(TestFs *t, uint32_t opcode, const char *name,
                     const char *attr, const char *value, uint32_t count)
{
    TestReq *r = test_req_new(opcode, FUSE_ROOT_ID);
    uint8_t reply[sizeof(struct fuse_entry_out) +
                  sizeof(struct fuse_open_out)];

    switch (opcode) {
    case FUSE_MKDIR:
        test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                     sizeof(struct fuse_mkdir_in));
        test_req_add_str(r, name);
        break;
    case FUSE_MKNOD:
        test_req_add(r, &(struct fuse_mknod_in){ .mode = S_IFIFO | 0644 },
                     sizeof(struct fuse_mknod_in));
        test_req_add_str(r, name);
        break;
    case FUSE_SYMLINK:
        test_req_add_str(r, name);
        test_req_add_str(r, "target");
        break;
    default:
        test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                                  .mode = S_IFREG | 0644 },
                     sizeof(struct fuse_create_in));
        test_req_add_str(r, name);
        break;
    }
    if (attr) {
        add_label(r, attr, value, count);
    }
    return test_send(t, r, 4096, reply, sizeof(reply), &(size_t){ 0 });
}

/*
 * --security-label: the label the guest sends with a creation is on the
 * new file, and a creation whose label cannot be stored (or is malformed)
 * fails with the host's error and leaves nothing, under the name or under
 * the temporary one.
 */
static void test_security_label(void)
{
    static const uint32_t ops[] = {
        FUSE_MKDIR, FUSE_MKNOD, FUSE_SYMLINK, FUSE_CREATE,
    };
    static const char *const made[] = { "n0", "n1", "n2", "n3", NULL };
    const char *attr = "security.virtiofsd-test";
    struct fuse_init_out out;
    VfsdOptions o;
    TestFs t;
    TestReq *r;
    unsigned int i;
    char name[8];

    if (geteuid() != 0) {
        g_test_skip("security.* needs CAP_SYS_ADMIN");
        return;
    }
    test_fs_setup(&t, NULL);
    o = t.opts;
    test_fs_teardown(&t);
    o.security_label = VFSD_NEGOTIATE_ALWAYS;

    /* always: a guest without FUSE_SECURITY_CTX cannot mount */
    test_fs_setup(&t, &o);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &(struct fuse_init_in){ .major = 7, .minor = 41,
                                            .flags = FUSE_INIT_EXT },
                 sizeof(struct fuse_init_in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==,
                    -EPROTO);
    test_fs_teardown(&t);
    /* auto: it can, and gets no labels */
    o.security_label = VFSD_NEGOTIATE_AUTO;
    test_fs_setup(&t, &o);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &(struct fuse_init_in){ .major = 7, .minor = 41,
                                            .flags = FUSE_INIT_EXT },
                 sizeof(struct fuse_init_in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_false(out.flags2 & (FUSE_SECURITY_CTX >> 32));
    test_fs_teardown(&t);

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, FUSE_SECURITY_CTX);
    g_assert_true(t.fs.conn.flags & FUSE_SECURITY_CTX);
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        g_autofree char *got = NULL;

        snprintf(name, sizeof(name), "n%u", i);
        g_assert_cmpint(label_req(&t, ops[i], name, attr, "label-one", 1),
                        ==, 0);
        got = host_label(&t, name, attr);
        g_assert_cmpstr(got, ==, "label-one");
        /* An existing name: EEXIST, and the temporary node is gone */
        g_assert_cmpint(label_req(&t, ops[i], name, attr, "label-two", 1),
                        ==, ops[i] == FUSE_CREATE ? 0 : -EEXIST);
        g_free(got);
        got = host_label(&t, name, attr);
        g_assert_cmpstr(got, ==, "label-one");
        assert_only(&t, made);
    }
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        snprintf(name, sizeof(name), "x%u", i);
        /* A name the host has no namespace for: its EOPNOTSUPP */
        g_assert_cmpint(label_req(&t, ops[i], name, "bogus.label", "v", 1),
                        ==, -EOPNOTSUPP);
        /* Two labels (Linux sends one), or none with a count of one */
        g_assert_cmpint(label_req(&t, ops[i], name, attr, "v", 2), ==,
                        -EINVAL);
        g_assert_cmpint(faccessat(t.dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW),
                        !=, 0);
        assert_only(&t, made);
    }
    /* No label (nr_secctx 0): created as without --security-label */
    r = test_req_new(FUSE_MKDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, "plain");
    {
        struct fuse_secctx_header sh = { .size = 8, .nr_secctx = 0 };
        struct fuse_in_header *h;

        test_req_add(r, &sh, sizeof(sh));
        h = (void *)r->data->data;
        h->total_extlen = 1;
    }
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(faccessat(t.dir_fd, "plain", F_OK, 0), ==, 0);
    test_fs_teardown(&t);
}

static void test_readonly(void)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .readonly = true,
        .xattr = true,
    };
    TestFs t;
    TestReq *r;
    uint64_t ino;

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, 0);
    close(openat(t.dir_fd, "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ino = test_lookup(&t, FUSE_ROOT_ID, "f", NULL);
    g_assert_cmpint(mkdir_req(&t, FUSE_ROOT_ID, "d", 0, NULL), ==, -EROFS);
    r = test_req_new(FUSE_OPEN, ino);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDWR },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EROFS);
    r = test_req_new(FUSE_UNLINK, FUSE_ROOT_ID);
    test_req_add_str(r, "f");
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EROFS);
    test_open(&t, ino, O_RDONLY);
    test_fs_teardown(&t);
}

/* A minimal ACL in the kernel's xattr format: owner, group, others */
static size_t make_acl(uint8_t *buf, unsigned int user, unsigned int group,
                       unsigned int other)
{
    static const uint16_t tags[] = { 0x01, 0x04, 0x20 };
    const unsigned int perms[] = { user, group, other };
    uint32_t version = 2, id = UINT32_MAX;
    size_t len = 0;
    unsigned int i;

    memcpy(buf, &version, 4);
    len += 4;
    for (i = 0; i < 3; i++) {
        uint16_t perm = perms[i];

        memcpy(buf + len, &tags[i], 2);
        memcpy(buf + len + 2, &perm, 2);
        memcpy(buf + len + 4, &id, 4);
        len += 8;
    }
    return len;
}

static int create_req(TestFs *t, uint64_t parent, const char *name,
                      uint32_t mode, uint32_t umask_bits)
{
    TestReq *r = test_req_new(FUSE_CREATE, parent);

    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR | O_EXCL,
                                              .mode = S_IFREG | mode,
                                              .umask = umask_bits },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, name);
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static int mkdir_umask_req(TestFs *t, uint64_t parent, const char *name,
                           uint32_t mode, uint32_t umask_bits)
{
    TestReq *r = test_req_new(FUSE_MKDIR, parent);

    test_req_add(r, &(struct fuse_mkdir_in){ .mode = mode,
                                             .umask = umask_bits },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, name);
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static int setxattr_req(TestFs *t, uint64_t nodeid, const char *name,
                        const void *value, uint32_t size,
                        uint32_t setxattr_flags)
{
    TestReq *r = test_req_new(FUSE_SETXATTR, nodeid);

    test_req_add(r, &(struct fuse_setxattr_in){
                     .size = size, .setxattr_flags = setxattr_flags },
                 sizeof(struct fuse_setxattr_in));
    test_req_add_str(r, name);
    test_req_add(r, value, size);
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static mode_t host_mode(TestFs *t, const char *name)
{
    struct stat st;

    g_assert_cmpint(fstatat(t->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW), ==,
                    0);
    return st.st_mode & 07777;
}

/*
 * --posix-acl: FUSE_DONT_MASK makes the guest send modes unmasked with its
 * umask aside; a default ACL on the parent must win over that umask, and
 * the umask must apply where there is none.
 */
static void test_posix_acl(void)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .xattr = true,
        .posix_acl = true,
    };
    uint8_t acl[64];
    size_t len;
    uint64_t withacl, plain, f;
    TestFs t;

    /* The daemon's own umask, see main.c */
    umask(0);
    test_fs_setup(&t, &o);
    test_fs_init_session(&t, FUSE_POSIX_ACL | FUSE_DONT_MASK |
                         FUSE_SETXATTR_EXT | FUSE_DO_READDIRPLUS);
    g_assert_cmphex(t.fs.conn.flags & (FUSE_POSIX_ACL | FUSE_DONT_MASK), ==,
                    FUSE_POSIX_ACL | FUSE_DONT_MASK);

    g_assert_cmpint(mkdirat(t.dir_fd, "withacl", 0755), ==, 0);
    g_assert_cmpint(mkdirat(t.dir_fd, "plain", 0755), ==, 0);
    len = make_acl(acl, 7, 7, 5);
    {
        g_autofree char *path = g_strdup_printf("%s/withacl", t.dir);

        g_assert_cmpint(setxattr(path, "system.posix_acl_default", acl, len,
                                 0), ==, 0);
    }
    withacl = test_lookup(&t, FUSE_ROOT_ID, "withacl", NULL);
    plain = test_lookup(&t, FUSE_ROOT_ID, "plain", NULL);

    /* The default ACL decides, the guest's umask 077 does not */
    g_assert_cmpint(create_req(&t, withacl, "f", 0666, 077), ==, 0);
    g_assert_cmphex(host_mode(&t, "withacl/f"), ==, 0664);
    g_assert_cmpint(mkdir_umask_req(&t, withacl, "d", 0777, 077), ==, 0);
    g_assert_cmphex(host_mode(&t, "withacl/d"), ==, 0775);
    /* No default ACL: the umask applies */
    g_assert_cmpint(create_req(&t, plain, "f", 0666, 027), ==, 0);
    g_assert_cmphex(host_mode(&t, "plain/f"), ==, 0640);
    g_assert_cmpint(mkdir_umask_req(&t, plain, "d", 0777, 027), ==, 0);
    g_assert_cmphex(host_mode(&t, "plain/d"), ==, 0750);
    /* And the daemon is back to umask 0 for everything else */
    g_assert_cmphex(umask(0), ==, 0);

    /*
     * Setting an access ACL: the guest says when setgid must go (the
     * caller is not in the file's group), the daemon must not keep it
     * just because it runs as root.
     */
    if (geteuid() == 0) {
        g_assert_cmpint(fchownat(t.dir_fd, "plain/f", 0, 4321, 0), ==, 0);
        g_assert_cmpint(fchmodat(t.dir_fd, "plain/f", 02775, 0), ==, 0);
        f = test_lookup(&t, plain, "f", NULL);
        len = make_acl(acl, 7, 5, 4);
        g_assert_cmpint(setxattr_req(&t, f, "system.posix_acl_access", acl,
                                     len, 0), ==, 0);
        g_assert_cmphex(host_mode(&t, "plain/f"), ==, 02754);
        len = make_acl(acl, 7, 7, 5);
        g_assert_cmpint(setxattr_req(&t, f, "system.posix_acl_access", acl,
                                     len, FUSE_SETXATTR_ACL_KILL_SGID), ==,
                        0);
        g_assert_cmphex(host_mode(&t, "plain/f"), ==, 0775);
    }
    test_fs_teardown(&t);

    /* Without --posix-acl the guest masks, and gets no FUSE_POSIX_ACL */
    o.posix_acl = false;
    test_fs_setup(&t, &o);
    test_fs_init_session(&t, FUSE_POSIX_ACL | FUSE_DONT_MASK |
                         FUSE_SETXATTR_EXT);
    g_assert_cmphex(t.fs.conn.flags & (FUSE_POSIX_ACL | FUSE_DONT_MASK), ==,
                    0);
    g_assert_cmpint(mkdirat(t.dir_fd, "withacl", 0755), ==, 0);
    {
        g_autofree char *path = g_strdup_printf("%s/withacl", t.dir);

        len = make_acl(acl, 7, 7, 5);
        g_assert_cmpint(setxattr(path, "system.posix_acl_default", acl, len,
                                 0), ==, 0);
    }
    withacl = test_lookup(&t, FUSE_ROOT_ID, "withacl", NULL);
    /* The daemon applies the umask as it always did */
    g_assert_cmpint(create_req(&t, withacl, "f", 0666, 027), ==, 0);
    g_assert_cmphex(host_mode(&t, "withacl/f"), ==, 0640);
    test_fs_teardown(&t);
}

/* One request as guest @uid:@gid; returns the error, the entry in @e */
static int mkdir_as(TestFs *t, uint64_t parent, const char *name,
                    uint32_t uid, uint32_t gid, struct fuse_entry_out *e)
{
    TestReq *r = test_req_new(FUSE_MKDIR, parent);
    struct fuse_in_header *h = (void *)r->data->data;

    h->uid = uid;
    h->gid = gid;
    test_req_add(r, &(struct fuse_mkdir_in){ .mode = 0755 },
                 sizeof(struct fuse_mkdir_in));
    test_req_add_str(r, name);
    return test_send(t, r, 4096, e, sizeof(*e), NULL);
}

static int chown_req(TestFs *t, uint64_t nodeid, uint32_t valid,
                     uint32_t uid, uint32_t gid, struct fuse_attr_out *out)
{
    TestReq *r = test_req_new(FUSE_SETATTR, nodeid);

    test_req_add(r, &(struct fuse_setattr_in){ .valid = valid, .uid = uid,
                                               .gid = gid },
                 sizeof(struct fuse_setattr_in));
    return test_send(t, r, 4096, out, sizeof(*out), NULL);
}

static void host_owner(TestFs *t, const char *name, uid_t uid, gid_t gid)
{
    struct stat st;

    g_assert_cmpint(fstatat(t->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW), ==,
                    0);
    g_assert_cmpuint(st.st_uid, ==, uid);
    g_assert_cmpuint(st.st_gid, ==, gid);
}

/* An ACL naming user @uid and group @gid, in the kernel's xattr form */
static size_t make_named_acl(uint32_t *acl, uint32_t uid, uint32_t gid)
{
    const uint32_t ent[][2] = {
        { 0x01 | (7 << 16), UINT32_MAX }, { 0x02 | (6 << 16), uid },
        { 0x04 | (5 << 16), UINT32_MAX }, { 0x08 | (4 << 16), gid },
        { 0x10 | (7 << 16), UINT32_MAX }, { 0x20, UINT32_MAX },
    };
    unsigned int i;

    acl[0] = GUINT32_TO_LE(2);
    for (i = 0; i < G_N_ELEMENTS(ent); i++) {
        acl[1 + 2 * i] = GUINT32_TO_LE(ent[i][0]);
        acl[2 + 2 * i] = GUINT32_TO_LE(ent[i][1]);
    }
    return (1 + 2 * G_N_ELEMENTS(ent)) * 4;
}

/*
 * --uid-map/--gid-map: guest ids become host ids in everything done for
 * the guest, and host ids guest ids in everything shown to it.
 */
static void test_id_map(void)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .xattr = true,
    };
    g_autofree char *err = NULL;
    struct fuse_entry_out e;
    struct fuse_attr_out out;
    struct fuse_statx_out sxo;
    struct fuse_attr attr;
    uint32_t acl[16], got[16];
    uint64_t dir, ino;
    size_t len, got_len;
    TestReq *r;
    TestFs t;

    if (geteuid() != 0) {
        g_test_skip("needs root to act as the mapped ids");
        return;
    }
    g_assert_true(vfsd_idmap_add(&o.uid_map, ":0:100000:1000:", &err));
    g_assert_true(vfsd_idmap_add(&o.gid_map, ":0:200000:1000:", &err));
    g_assert_true(vfsd_idmap_add(&o.gid_map, ":5000:7:1:", &err));
    test_fs_setup(&t, &o);
    test_fs_init_session(&t, FUSE_DO_READDIRPLUS | FUSE_SETXATTR_EXT);
    /* Mapped guest root is nobody special on the host */
    g_assert_cmpint(chmod(t.dir, 0777), ==, 0);

    /* Guest root creates: host owner 100000:200000, guest sees 0:0 */
    g_assert_cmpint(mkdir_as(&t, FUSE_ROOT_ID, "d", 0, 0, &e), ==, 0);
    dir = e.nodeid;
    g_assert_cmpuint(e.attr.uid, ==, 0);
    g_assert_cmpuint(e.attr.gid, ==, 0);
    host_owner(&t, "d", 100000, 200000);
    g_assert_cmpint(mkdir_as(&t, dir, "sub", 0, 5000, &e), ==, 0);
    host_owner(&t, "d/sub", 100000, 7);
    g_assert_cmpuint(e.attr.gid, ==, 5000);

    /* A CREATE by another user (the directory is not theirs: 0755) */
    r = test_req_new(FUSE_CREATE, dir);
    ((struct fuse_in_header *)r->data->data)->uid = 5;
    ((struct fuse_in_header *)r->data->data)->gid = 6;
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "f");
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, -EACCES);
    g_assert_cmpint(fchmodat(t.dir_fd, "d", 0777, 0), ==, 0);
    /* Now it works, and LOOKUP/GETATTR show the guest's ids */
    r = test_req_new(FUSE_CREATE, dir);
    ((struct fuse_in_header *)r->data->data)->uid = 5;
    ((struct fuse_in_header *)r->data->data)->gid = 6;
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "f");
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, 0);
    host_owner(&t, "d/f", 100005, 200006);
    ino = test_lookup(&t, dir, "f", &attr);
    g_assert_cmpuint(attr.uid, ==, 5);
    g_assert_cmpuint(attr.gid, ==, 6);

    /* A caller outside the map has no host identity */
    g_assert_cmpint(mkdir_as(&t, dir, "x", 1000, 0, &e), ==, -EPERM);
    g_assert_cmpint(mkdir_as(&t, dir, "x", 0, 1000, &e), ==, -EPERM);
    g_assert_cmpint(mkdir_as(&t, dir, "x", UINT32_MAX, 0, &e), ==, -EPERM);
    g_assert_cmpint(faccessat(t.dir_fd, "d/x", F_OK, 0), ==, -1);

    /* chown: translated, and refused for ids outside the map */
    g_assert_cmpint(chown_req(&t, ino, FATTR_UID | FATTR_GID, 7, 5000, &out),
                    ==, 0);
    host_owner(&t, "d/f", 100007, 7);
    g_assert_cmpuint(out.attr.uid, ==, 7);
    g_assert_cmpuint(out.attr.gid, ==, 5000);
    g_assert_cmpint(chown_req(&t, ino, FATTR_UID, 1000, 0, &out), ==,
                    -EINVAL);
    g_assert_cmpint(chown_req(&t, ino, FATTR_GID, 0, 4999, &out), ==,
                    -EINVAL);
    g_assert_cmpint(chown_req(&t, ino, FATTR_UID, UINT32_MAX, 0, &out), ==,
                    -EINVAL);
    host_owner(&t, "d/f", 100007, 7);
    /* Only the gid: the uid stays */
    g_assert_cmpint(chown_req(&t, ino, FATTR_GID, 0, 0, &out), ==, 0);
    host_owner(&t, "d/f", 100007, 200000);

    /* Host ids outside the map show up as the overflow id */
    g_assert_cmpint(fchownat(t.dir_fd, "d/f", 0, 0, 0), ==, 0);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.uid, ==, VFSD_OVERFLOW_ID);
    g_assert_cmpuint(out.attr.gid, ==, VFSD_OVERFLOW_ID);
    /* STATX maps them as GETATTR does */
    g_assert_cmpint(statx_req(&t, ino, 0, STATX_BASIC_STATS | STATX_BTIME,
                              &sxo), ==, 0);
    g_assert_cmpuint(sxo.stat.uid, ==, VFSD_OVERFLOW_ID);
    g_assert_cmpuint(sxo.stat.gid, ==, VFSD_OVERFLOW_ID);
    g_assert_cmpint(fchownat(t.dir_fd, "d/f", 100007, 7, 0), ==, 0);
    g_assert_cmpint(statx_req(&t, ino, 0, STATX_BASIC_STATS, &sxo), ==, 0);
    g_assert_cmpuint(sxo.stat.uid, ==, 7);
    g_assert_cmpuint(sxo.stat.gid, ==, 5000);
    g_assert_cmpint(fchownat(t.dir_fd, "d/f", 0, 0, 0), ==, 0);

    /* ACL entries: guest ids in, host ids on disk, guest ids out */
    len = make_named_acl(acl, 5, 5000);
    g_assert_cmpint(setxattr_req(&t, ino, "system.posix_acl_access", acl,
                                 len, 0), ==, 0);
    {
        g_autofree char *path = g_strdup_printf("%s/d/f", t.dir);

        g_assert_cmpint(getxattr(path, "system.posix_acl_access", got,
                                 sizeof(got)), ==, (ssize_t)len);
    }
    g_assert_cmpuint(GUINT32_FROM_LE(got[4]), ==, 100005);
    g_assert_cmpuint(GUINT32_FROM_LE(got[8]), ==, 7);
    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &(struct fuse_getxattr_in){ .size = sizeof(got) },
                 sizeof(struct fuse_getxattr_in));
    test_req_add_str(r, "system.posix_acl_access");
    g_assert_cmpint(test_send(&t, r, 4096, got, sizeof(got), &got_len), ==,
                    0);
    g_assert_cmpmem(got, got_len, acl, len);
    /* Naming an unmapped user is refused, and changes nothing */
    len = make_named_acl(acl, 1000, 5000);
    g_assert_cmpint(setxattr_req(&t, ino, "system.posix_acl_access", acl,
                                 len, 0), ==, -EINVAL);
    g_assert_cmpint(setxattr_req(&t, dir, "system.posix_acl_default", acl,
                                 len, 0), ==, -EINVAL);
    /* A torn ACL is not passed on */
    len = make_named_acl(acl, 5, 5000);
    g_assert_cmpint(setxattr_req(&t, ino, "system.posix_acl_access", acl,
                                 len - 2, 0), ==, -EINVAL);

    test_fs_teardown(&t);
}

/*
 * What each --cache mode tells the guest, as the Rust virtiofsd 1.14
 * does: open flags of files and directories, entry and attribute
 * timeouts, and negative entries.
 */
typedef struct CacheCase {
    VfsdCache cache;
    uint32_t file_flags;
    uint32_t dir_flags;
    uint64_t timeout;           /* entry and attribute, in seconds */
} CacheCase;

/* Files never need a FLUSH without the guest's POSIX locks on the host */
static const CacheCase cache_cases[] = {
    { VFSD_CACHE_NEVER,
      FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES | FOPEN_NOFLUSH, 0, 0 },
    { VFSD_CACHE_METADATA,
      FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES | FOPEN_NOFLUSH,
      FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE, 86400 },
    { VFSD_CACHE_AUTO, FOPEN_NOFLUSH, 0, 1 },
    { VFSD_CACHE_ALWAYS, FOPEN_KEEP_CACHE | FOPEN_NOFLUSH,
      FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE, 86400 },
};

static void test_cache_mode(gconstpointer data)
{
    const CacheCase *c = data;
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .cache = c->cache,
    };
    struct fuse_open_out oo;
    struct fuse_entry_out e;
    struct fuse_attr_out ao;
    uint64_t fh, ino;
    TestReq *r;
    TestFs t;
    int ret;

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, 0);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);

    r = test_req_new(FUSE_OPEN, ino);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(&t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    g_assert_cmphex(oo.open_flags, ==, c->file_flags);

    r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(&t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    g_assert_cmphex(oo.open_flags, ==, c->dir_flags);

    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add_str(r, "f");
    g_assert_cmpint(test_send(&t, r, 4096, &e, sizeof(e), NULL), ==, 0);
    g_assert_cmpuint(e.nodeid, ==, ino);
    g_assert_cmpuint(e.entry_valid, ==, c->timeout);
    g_assert_cmpuint(e.attr_valid, ==, c->timeout);

    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, &ao, sizeof(ao), NULL), ==, 0);
    g_assert_cmpuint(ao.attr_valid, ==, c->timeout);

    /*
     * A missing name: with a timeout, a cacheable negative entry (nodeid
     * 0), which spares the guest a round trip per stat() of it.
     */
    r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    test_req_add_str(r, "missing");
    memset(&e, 0xff, sizeof(e));
    ret = test_send(&t, r, 4096, &e, sizeof(e), NULL);
    if (c->timeout) {
        g_assert_cmpint(ret, ==, 0);
        g_assert_cmpuint(e.nodeid, ==, 0);
        g_assert_cmpuint(e.entry_valid, ==, c->timeout);
    } else {
        g_assert_cmpint(ret, ==, -ENOENT);
    }
    test_fs_teardown(&t);
}

/* The open flags an OPENDIR of the root gets (the handle is released) */
static uint32_t opendir_flags(TestFs *t)
{
    struct fuse_open_out oo;
    TestReq *r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);

    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    r = test_req_new(FUSE_RELEASEDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_release_in){ .fh = oo.fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    return oo.open_flags;
}

/* READDIRPLUS of the root from offset 0 to its end, in small pieces */
static void list_root_plus(TestFs *t)
{
    g_autofree uint8_t *buf = g_malloc(4096);
    struct fuse_read_in in = { .size = 512 };
    struct fuse_open_out oo;
    size_t len, pos;
    TestReq *r;

    r = test_req_new(FUSE_OPENDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    in.fh = oo.fh;
    do {
        r = test_req_new(FUSE_READDIRPLUS, FUSE_ROOT_ID);
        test_req_add(r, &in, sizeof(in));
        g_assert_cmpint(test_send(t, r, 4096, buf, 4096, &len), ==, 0);
        for (pos = 0; pos < len;) {
            struct fuse_direntplus *dp = (void *)(buf + pos);

            in.offset = dp->dirent.off;
            pos += FUSE_DIRENTPLUS_SIZE(dp);
        }
    } while (len);
    r = test_req_new(FUSE_RELEASEDIR, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_release_in){ .fh = oo.fh },
                 sizeof(struct fuse_release_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

/* A LOOKUP of @name in the root: its entry and attribute timeouts */
static int lookup_timeouts(TestFs *t, const char *name, uint64_t *entry,
                           uint64_t *attr)
{
    struct fuse_entry_out e;
    TestReq *r = test_req_new(FUSE_LOOKUP, FUSE_ROOT_ID);
    int ret;

    test_req_add_str(r, name);
    memset(&e, 0xff, sizeof(e));
    ret = test_send(t, r, 4096, &e, sizeof(e), NULL);
    *entry = e.entry_valid;
    *attr = e.attr_valid;
    return ret ? ret : e.nodeid ? 1 : 0;
}

/*
 * --cache=adaptive: a timeout is a fraction of how long the host left
 * the inode (and for a name, its directory) unchanged, within MIN and
 * MAX.  With a fraction of 100, anything unchanged for 0.4 s reaches
 * MAX (30 s), anything changed a moment ago (well under the 20 ms that
 * would give more) gets MIN (2 s).
 */
static void test_cache_adaptive(void)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .cache = VFSD_CACHE_ADAPTIVE,
        .adaptive_min = 2, .adaptive_max = 30, .adaptive_fraction = 100,
    };
    struct fuse_open_out oo;
    struct fuse_attr_out ao;
    uint64_t fh, ino, entry, attr;
    TestReq *r;
    TestFs t;

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, 0);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    g_usleep(400 * 1000);

    /* Unchanged for 0.4 s, and so is the root: MAX for both */
    g_assert_cmpint(lookup_timeouts(&t, "f", &entry, &attr), ==, 1);
    g_assert_cmpuint(entry, ==, 30);
    g_assert_cmpuint(attr, ==, 30);
    g_assert_cmpint(lookup_timeouts(&t, "missing", &entry, &attr), ==, 0);
    g_assert_cmpuint(entry, ==, 30);

    /* The host changes the file: MIN for it, its name and GETATTR */
    g_assert_cmpint(fchmodat(t.dir_fd, "f", 0640, 0), ==, 0);
    g_assert_cmpint(lookup_timeouts(&t, "f", &entry, &attr), ==, 1);
    g_assert_cmpuint(entry, ==, 2);
    g_assert_cmpuint(attr, ==, 2);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, &ao, sizeof(ao), NULL), ==, 0);
    g_assert_cmpuint(ao.attr_valid, ==, 2);
    /* 50 ms later: 100 times that, give or take the test's own delays */
    g_usleep(50 * 1000);
    r = test_req_new(FUSE_GETATTR, ino);
    test_req_add(r, &(struct fuse_getattr_in){ 0 },
                 sizeof(struct fuse_getattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, &ao, sizeof(ao), NULL), ==, 0);
    g_assert_cmpuint(ao.attr_valid, >=, 5);
    g_assert_cmpuint(ao.attr_valid, <, 15);

    /* A name created beside it: a missing name is cached briefly too */
    g_assert_cmpint(mknodat(t.dir_fd, "g", S_IFREG | 0600, 0), ==, 0);
    g_assert_cmpint(lookup_timeouts(&t, "missing", &entry, &attr), ==, 0);
    g_assert_cmpuint(entry, ==, 2);

    /* Kept data, dropped when the host's mtime moves */
    r = test_req_new(FUSE_OPEN, ino);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(&t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    g_assert_cmphex(oo.open_flags, ==, FOPEN_KEEP_CACHE | FOPEN_NOFLUSH);

    /*
     * A listing is cached, but kept across opens only while the names
     * of the last whole READDIRPLUS are valid: none yet, then for the
     * shortest timeout it gave (2 s: f and g changed just now)
     */
    g_assert_cmphex(opendir_flags(&t), ==, FOPEN_CACHE_DIR);
    g_assert_cmphex(opendir_flags(&t), ==, FOPEN_CACHE_DIR);
    list_root_plus(&t);
    g_assert_cmphex(opendir_flags(&t), ==,
                    FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE);
    g_usleep(2100 * 1000);
    g_assert_cmphex(opendir_flags(&t), ==, FOPEN_CACHE_DIR);
    test_fs_teardown(&t);
}

/*
 * FLUSH's only work here is dropping the closer's POSIX locks: a file
 * opened or created in a session without the guest's POSIX locks on the
 * host tells the guest to skip it (FOPEN_NOFLUSH), one with them does not.
 */
static void test_noflush(gconstpointer data)
{
    bool locks = GPOINTER_TO_INT(data);
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .cache = VFSD_CACHE_AUTO,
        .posix_lock = locks,
    };
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } cr;
    struct fuse_open_out oo;
    uint32_t want = locks ? 0 : FOPEN_NOFLUSH;
    TestReq *r;
    TestFs t;

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, FUSE_POSIX_LOCKS);
    g_assert_cmpint(!!(t.fs.conn.flags & FUSE_POSIX_LOCKS), ==, locks);

    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR | O_CREAT,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "f");
    g_assert_cmpint(test_send(&t, r, 4096, &cr, sizeof(cr), NULL), ==, 0);
    g_assert_cmphex(cr.o.open_flags & FOPEN_NOFLUSH, ==, want);

    r = test_req_new(FUSE_OPEN, cr.e.nodeid);
    test_req_add(r, &(struct fuse_open_in){ .flags = O_RDONLY },
                 sizeof(struct fuse_open_in));
    g_assert_cmpint(test_send(&t, r, 4096, &oo, sizeof(oo), NULL), ==, 0);
    g_assert_cmphex(oo.open_flags & FOPEN_NOFLUSH, ==, want);
    test_fs_teardown(&t);
}

/* The guest's O_DIRECT reaches the host only with --allow-direct-io */
static void test_direct_io(gconstpointer data)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE, .cache = VFSD_CACHE_AUTO,
        .allow_direct_io = GPOINTER_TO_INT(data),
    };
    g_autoptr(VfsdHandle) h = NULL, hc = NULL;
    TestReq *r;
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } out;
    uint64_t fh, ino;
    int expect = o.allow_direct_io ? O_DIRECT : 0;
    TestFs t;

    test_fs_setup(&t, &o);
    test_fs_init_session(&t, 0);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    fh = test_open(&t, ino, O_RDWR | O_DIRECT);
    h = vfsd_handle_get(&t.fs, fh, false);
    g_assert_nonnull(h);
    g_assert_cmphex(fcntl(h->fd, F_GETFL) & O_DIRECT, ==, expect);

    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR | O_DIRECT,
                                              .mode = S_IFREG | 0644 },
                 sizeof(struct fuse_create_in));
    test_req_add_str(r, "g");
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    hc = vfsd_handle_get(&t.fs, out.o.fh, false);
    g_assert_nonnull(hc);
    g_assert_cmphex(fcntl(hc->fd, F_GETFL) & O_DIRECT, ==, expect);
    g_clear_pointer(&h, vfsd_handle_put);
    g_clear_pointer(&hc, vfsd_handle_put);
    test_fs_teardown(&t);
}

/*
 * Errno fidelity: each request below is also made as a system call on
 * the scratch directory, and the guest must get exactly what the host
 * said.  @host is the host's result (-1 with errno, or >= 0).
 */
#define HOST_RET(host) ((host) < 0 ? -errno : 0)

static int name_req(TestFs *t, uint32_t opcode, uint64_t parent,
                    const void *arg, size_t arglen, const char *name,
                    const char *name2)
{
    TestReq *r = test_req_new(opcode, parent);
    char reply[512];
    size_t len;

    if (arglen) {
        test_req_add(r, arg, arglen);
    }
    test_req_add_str(r, name);
    if (name2) {
        test_req_add_str(r, name2);
    }
    /* Entry and open replies differ in length: none is looked at */
    return test_send(t, r, 8192, reply, sizeof(reply), &len);
}

static void test_errno_long_names(TestFs *t, gconstpointer data)
{
    static const size_t lens[] = { 255, 256, 300, 1024, 1025, 4095, 4096,
                                   8000 };
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    struct fuse_mkdir_in min = { .mode = 0755 };
    struct fuse_mknod_in nin = { .mode = S_IFIFO | 0644 };
    struct fuse_create_in cin = { .flags = O_RDWR, .mode = S_IFREG | 0644 };
    struct fuse_rename_in rin = { .newdir = FUSE_ROOT_ID };
    struct fuse_link_in lin = { .oldnodeid = ino };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(lens); i++) {
        g_autofree char *name = g_malloc(lens[i] + 1);
        int host;

        memset(name, 'n', lens[i]);
        name[lens[i]] = '\0';
        name[0] = '0' + i;

        host = HOST_RET(mkdirat(t->dir_fd, name, 0755));
        if (lens[i] <= 255) {
            g_assert_cmpint(host, ==, 0);
            g_assert_cmpint(unlinkat(t->dir_fd, name, AT_REMOVEDIR), ==, 0);
        } else {
            g_assert_cmpint(host, ==, -ENAMETOOLONG);
        }
        g_test_message("name of %zu bytes: host %d", lens[i], host);

        g_assert_cmpint(test_lookup_err(t, FUSE_ROOT_ID, name), ==,
                        host ? host : -ENOENT);
        g_assert_cmpint(name_req(t, FUSE_MKDIR, FUSE_ROOT_ID, &min,
                                 sizeof(min), name, NULL), ==, host);
        if (!host) {
            continue;
        }
        /* Every operation that takes a name: the host's error */
        g_assert_cmpint(name_req(t, FUSE_MKNOD, FUSE_ROOT_ID, &nin,
                                 sizeof(nin), name, NULL), ==, host);
        g_assert_cmpint(name_req(t, FUSE_CREATE, FUSE_ROOT_ID, &cin,
                                 sizeof(cin), name, NULL), ==, host);
        g_assert_cmpint(name_req(t, FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0,
                                 name, "f"), ==, host);
        g_assert_cmpint(name_req(t, FUSE_LINK, FUSE_ROOT_ID, &lin,
                                 sizeof(lin), name, NULL), ==, host);
        g_assert_cmpint(name_req(t, FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0,
                                 name, NULL), ==, host);
        g_assert_cmpint(name_req(t, FUSE_RMDIR, FUSE_ROOT_ID, NULL, 0,
                                 name, NULL), ==, host);
        g_assert_cmpint(name_req(t, FUSE_RENAME, FUSE_ROOT_ID, &rin,
                                 sizeof(rin), "f", name), ==, host);
        g_assert_cmpint(name_req(t, FUSE_RENAME, FUSE_ROOT_ID, &rin,
                                 sizeof(rin), name, "g"), ==, host);
    }
    /* Nothing was made or moved by the refused requests */
    g_assert_cmpint(faccessat(t->dir_fd, "f", F_OK, 0), ==, 0);
}

/* A symlink target and an xattr name too long: the host's errno */
static void test_errno_long_strings(TestFs *t, gconstpointer data)
{
    g_autofree char *target = g_malloc(PATH_MAX + 1);
    char xname[XATTR_NAME_MAX + 2];
    struct fuse_setxattr_in sin = { .size = 1 };
    struct fuse_getxattr_in gin = { .size = 64 };
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    TestReq *r;
    int host, fd;

    memset(target, 't', PATH_MAX);
    target[PATH_MAX] = '\0';
    host = HOST_RET(symlinkat(target, t->dir_fd, "hs"));
    g_assert_cmpint(host, ==, -ENAMETOOLONG);
    g_assert_cmpint(name_req(t, FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "s",
                             target), ==, host);
    /* The longest one a path can have is fine */
    target[PATH_MAX - 1] = '\0';
    g_assert_cmpint(name_req(t, FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "s",
                             target), ==,
                    HOST_RET(symlinkat(target, t->dir_fd, "hs")));

    memset(xname, 'x', sizeof(xname) - 1);
    memcpy(xname, "user.", 5);
    xname[sizeof(xname) - 1] = '\0';
    fd = openat(t->dir_fd, "f", O_RDONLY | O_CLOEXEC);
    host = HOST_RET(fsetxattr(fd, xname, "v", 1, 0));
    g_assert_cmpint(host, ==, -ERANGE);
    r = test_req_new(FUSE_SETXATTR, ino);
    test_req_add(r, &sin, sizeof(sin));
    test_req_add_str(r, xname);
    test_req_add(r, "v", 1);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, host);
    host = HOST_RET(fgetxattr(fd, xname, NULL, 0));
    g_assert_cmpint(host, ==, -ERANGE);
    r = test_req_new(FUSE_GETXATTR, ino);
    test_req_add(r, &gin, sizeof(gin));
    test_req_add_str(r, xname);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, host);
    host = HOST_RET(fremovexattr(fd, xname));
    r = test_req_new(FUSE_REMOVEXATTR, ino);
    test_req_add_str(r, xname);
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, host);
    close(fd);
}

/* lutimes(): the link's own times change, its target's do not */
static void test_errno_symlink_times(TestFs *t, gconstpointer data)
{
    struct fuse_setattr_in in = {
        .valid = FATTR_ATIME | FATTR_MTIME,
        .atime = 1000000001, .atimensec = 5,
        .mtime = 1000000002, .mtimensec = 999999999,
    };
    struct fuse_attr_out out;
    struct stat st, target_before, target_after;
    uint64_t fh, link;
    TestReq *r;

    test_create(t, FUSE_ROOT_ID, "target", O_RDWR, &fh);
    g_assert_cmpint(symlinkat("target", t->dir_fd, "link"), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "target", &target_before, 0), ==, 0);
    link = test_lookup(t, FUSE_ROOT_ID, "link", NULL);

    r = test_req_new(FUSE_SETATTR, link);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_true(S_ISLNK(out.attr.mode));
    g_assert_cmpuint(out.attr.mtime, ==, 1000000002);
    g_assert_cmpuint(out.attr.mtimensec, ==, 999999999);
    g_assert_cmpint(fstatat(t->dir_fd, "link", &st, AT_SYMLINK_NOFOLLOW),
                    ==, 0);
    g_assert_cmpint(st.st_atim.tv_sec, ==, 1000000001);
    g_assert_cmpint(st.st_atim.tv_nsec, ==, 5);
    g_assert_cmpint(st.st_mtim.tv_sec, ==, 1000000002);
    g_assert_cmpint(fstatat(t->dir_fd, "target", &target_after, 0), ==, 0);
    g_assert_cmpint(target_after.st_mtim.tv_sec, ==,
                    target_before.st_mtim.tv_sec);
    g_assert_cmpint(target_after.st_mtim.tv_nsec, ==,
                    target_before.st_mtim.tv_nsec);

    /* touch -h: "now" on the link */
    in.valid = FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW;
    r = test_req_new(FUSE_SETATTR, link);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_cmpuint(out.attr.mtime, >, 1000000002);

    /* Nanoseconds out of range: what utimensat() says */
    in.valid = FATTR_MTIME;
    in.mtimensec = 1000000000;
    r = test_req_new(FUSE_SETATTR, link);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==,
                    HOST_RET(utimensat(t->dir_fd, "link",
                                       (struct timespec[]){
                                           { .tv_nsec = UTIME_OMIT },
                                           { 1, 1000000000 } },
                                       AT_SYMLINK_NOFOLLOW)));
}

/* MKNOD of any file type: what mknodat() makes of it */
static void test_errno_mknod_types(TestFs *t, gconstpointer data)
{
    static const mode_t types[] = {
        0, S_IFREG, S_IFIFO, S_IFSOCK, S_IFDIR, S_IFLNK, 0030000, S_IFMT,
    };
    struct fuse_create_in cin = { .flags = O_RDWR, .mode = S_IFCHR | 0640 };
    struct fuse_entry_out e;
    struct stat st;
    unsigned int i;
    char name[16];
    TestReq *r;

    for (i = 0; i < G_N_ELEMENTS(types); i++) {
        int host;

        snprintf(name, sizeof(name), "h%u", i);
        host = HOST_RET(mknodat(t->dir_fd, name, types[i] | 0640, 0));
        snprintf(name, sizeof(name), "g%u", i);
        r = test_req_new(FUSE_MKNOD, FUSE_ROOT_ID);
        test_req_add(r, &(struct fuse_mknod_in){ .mode = types[i] | 0640 },
                     sizeof(struct fuse_mknod_in));
        test_req_add_str(r, name);
        g_test_message("mknod type 0%o: host %d", types[i], host);
        g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==,
                        host);
        if (host == 0) {
            g_assert_cmpint(fstatat(t->dir_fd, name, &st,
                                    AT_SYMLINK_NOFOLLOW), ==, 0);
            g_assert_cmpuint(st.st_mode & S_IFMT, ==,
                             types[i] ? types[i] : S_IFREG);
            g_assert_cmpuint(e.attr.mode, ==, st.st_mode);
        }
    }

    /* open(O_CREAT) ignores file type bits in the mode: so does CREATE */
    r = test_req_new(FUSE_CREATE, FUSE_ROOT_ID);
    test_req_add(r, &cin, sizeof(cin));
    test_req_add_str(r, "c");
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    g_assert_cmpint(fstatat(t->dir_fd, "c", &st, 0), ==, 0);
    g_assert_true(S_ISREG(st.st_mode));
}

/* SYNCFS names the inode the guest holds, which may be a FIFO */
static void test_errno_syncfs_special(TestFs *t, gconstpointer data)
{
    uint64_t fifo;
    TestReq *r;

    g_assert_cmpint(mkfifoat(t->dir_fd, "fifo", 0600), ==, 0);
    g_assert_cmpint(symlinkat("fifo", t->dir_fd, "link"), ==, 0);
    fifo = test_lookup(t, FUSE_ROOT_ID, "fifo", NULL);
    r = test_req_new(FUSE_SYNCFS, fifo);
    test_req_add(r, &(struct fuse_syncfs_in){ 0 },
                 sizeof(struct fuse_syncfs_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
    r = test_req_new(FUSE_SYNCFS, test_lookup(t, FUSE_ROOT_ID, "link", NULL));
    test_req_add(r, &(struct fuse_syncfs_in){ 0 },
                 sizeof(struct fuse_syncfs_in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

/*
 * WRITE, FALLOCATE and LSEEK at offsets near and past INT64_MAX: each
 * answer must be the one the same call on a host fd gives.
 */
static void test_errno_offsets(TestFs *t, gconstpointer data)
{
    static const struct {
        uint64_t off, len;
    } cases[] = {
        { 0, 1 },
        { (1ULL << 44) - 1, 2 },
        { 1ULL << 44, 1 },
        { 1ULL << 62, 1 },
        { INT64_MAX - 1, 1 },
        { INT64_MAX - 1, 2 },
        { INT64_MAX, 0 },
        { INT64_MAX, 1 },
        { (uint64_t)INT64_MAX + 1, 1 },
        { UINT64_MAX, 1 },
        { UINT64_MAX - 4095, 4096 },
    };
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    int hfd = openat(t->dir_fd, "host", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    static char data4k[4096];
    unsigned int i;

    g_assert_cmpint(hfd, >=, 0);
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct fuse_fallocate_in fin = {
            .fh = fh, .offset = cases[i].off, .length = cases[i].len,
            .mode = FALLOC_FL_KEEP_SIZE,
        };
        struct fuse_lseek_in lin = {
            .fh = fh, .offset = cases[i].off, .whence = SEEK_DATA,
        };
        ssize_t n;
        int host, ours;
        TestReq *r;

        errno = 0;
        n = pwrite(hfd, data4k, cases[i].len, (off_t)cases[i].off);
        host = n < 0 ? -errno : (int)n;
        ours = test_write(t, ino, fh, cases[i].off, data4k, cases[i].len);
        g_test_message("write %" PRIu64 "+%" PRIu64 ": host %d, ours %d",
                       cases[i].off, cases[i].len, host, ours);
        g_assert_cmpint(ours, ==, host);

        host = HOST_RET(fallocate(hfd, FALLOC_FL_KEEP_SIZE,
                                  (off_t)cases[i].off,
                                  (off_t)cases[i].len));
        r = test_req_new(FUSE_FALLOCATE, ino);
        test_req_add(r, &fin, sizeof(fin));
        ours = test_send(t, r, 4096, NULL, 0, NULL);
        g_test_message("fallocate %" PRIu64 "+%" PRIu64 ": host %d, ours %d",
                       cases[i].off, cases[i].len, host, ours);
        g_assert_cmpint(ours, ==, host);

        host = HOST_RET(lseek(hfd, (off_t)cases[i].off, SEEK_DATA));
        r = test_req_new(FUSE_LSEEK, ino);
        test_req_add(r, &lin, sizeof(lin));
        ours = test_send(t, r, 4096, NULL, 0, NULL);
        g_test_message("SEEK_DATA %" PRIu64 ": host %d, ours %d",
                       cases[i].off, host, ours);
        g_assert_cmpint(ours, ==, host);
    }
    close(hfd);
}

/*
 * A daemon that may not open the file read-write (it is not root, or it
 * runs without CAP_DAC_OVERRIDE) and a file it may write but not read:
 * a write lock through the guest's writable handle is taken, as a local
 * process's is.  Run in a subprocess, which gives the capabilities up.
 */
static void test_errno_plock_access(void)
{
    struct fuse_lk_in in = {
        .owner = 7,
        .lk = { .start = 0, .end = 9, .type = F_WRLCK },
    };
    struct flock l = {
        .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_len = 10,
    };
    uint64_t fh, ino;
    TestFs t;
    TestReq *r;
    int fd;

    if (!g_test_subprocess()) {
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_passed();
        return;
    }
    g_assert_cmpint(capng_get_caps_process(), ==, 0);
    capng_update(CAPNG_DROP, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
                 CAP_DAC_OVERRIDE);
    capng_update(CAPNG_DROP, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
                 CAP_DAC_READ_SEARCH);
    g_assert_cmpint(capng_apply(CAPNG_SELECT_CAPS), ==, 0);

    test_fs_setup(&t, NULL);
    test_fs_init_session(&t, FUSE_POSIX_LOCKS);
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_WRONLY, &fh);
    g_assert_cmpint(fchmodat(t.dir_fd, "f", 0200, 0), ==, 0);
    g_assert_cmpint(faccessat(t.dir_fd, "f", R_OK, AT_EACCESS), <, 0);

    in.fh = fh;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, NULL, 0, NULL), ==, 0);
    /* ...and held on the host */
    fd = openat(t.dir_fd, "f", O_WRONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    l.l_type = F_WRLCK;
    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &l), ==, 0);
    g_assert_cmpint(l.l_type, ==, F_WRLCK);
    close(fd);
    test_fs_teardown(&t);
}

/* The same for an append-only file, which opens for writing only so */
static void test_errno_plock_append_only(TestFs *t, gconstpointer data)
{
    struct fuse_lk_in in = {
        .owner = 7,
        .lk = { .start = 0, .end = 9, .type = F_WRLCK },
    };
    uint64_t fh, ino = test_create(t, FUSE_ROOT_ID, "f", O_WRONLY, &fh);
    int fd, flags = FS_APPEND_FL, ret;
    TestReq *r;

    fh = test_open(t, ino, O_WRONLY | O_APPEND);
    fd = openat(t->dir_fd, "f", O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    ret = ioctl(fd, FS_IOC_SETFLAGS, &flags);
    close(fd);
    if (ret < 0) {
        g_test_skip("no append-only files here (needs root and a file "
                    "system with FS_APPEND_FL)");
        return;
    }
    in.fh = fh;
    r = test_req_new(FUSE_SETLK, ino);
    test_req_add(r, &in, sizeof(in));
    ret = test_send(t, r, 4096, NULL, 0, NULL);
    /* Cleared before any assertion can fail: teardown must remove it */
    flags = 0;
    fd = openat(t->dir_fd, "f", O_RDONLY | O_CLOEXEC);
    g_assert_cmpint(ioctl(fd, FS_IOC_SETFLAGS, &flags), ==, 0);
    close(fd);
    g_assert_cmpint(ret, ==, 0);
}

/*
 * A creation by uid 1000 in a directory of its supplementary group 2000
 * (FUSE_CREATE_SUPP_GROUP): the host must see the group, or it refuses
 * what it allows a local caller, and a setgid bit the caller may set.
 */
static int create_as_user(TestFs *t, uint32_t opcode, uint64_t parent,
                          const char *name, mode_t mode, bool ext)
{
    TestReq *r = test_req_new(opcode, parent);
    struct fuse_in_header *h = (void *)r->data->data;
    struct {
        struct fuse_ext_header xh;
        struct fuse_supp_groups sg;
        uint32_t gid;
    } __attribute__((packed)) groups = {
        .xh = { .size = sizeof(groups), .type = FUSE_EXT_GROUPS },
        .sg = { .nr_groups = 1 },
        .gid = 2000,
    };

    h->uid = 1000;
    h->gid = 1000;
    switch (opcode) {
    case FUSE_CREATE:
        test_req_add(r, &(struct fuse_create_in){ .flags = O_RDWR,
                                                  .mode = mode },
                     sizeof(struct fuse_create_in));
        break;
    case FUSE_MKDIR:
        test_req_add(r, &(struct fuse_mkdir_in){ .mode = mode },
                     sizeof(struct fuse_mkdir_in));
        break;
    case FUSE_MKNOD:
        test_req_add(r, &(struct fuse_mknod_in){ .mode = mode },
                     sizeof(struct fuse_mknod_in));
        break;
    }
    test_req_add_str(r, name);
    if (opcode == FUSE_SYMLINK) {
        test_req_add_str(r, "target");
    }
    if (ext) {
        G_STATIC_ASSERT(sizeof(groups) % 8 == 0);
        test_req_add(r, &groups, sizeof(groups));
        h = (void *)r->data->data;
        h->total_extlen = sizeof(groups) / 8;
    }
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static void test_errno_supp_group(void)
{
    static const uint32_t ops[] = {
        FUSE_CREATE, FUSE_MKDIR, FUSE_MKNOD, FUSE_SYMLINK,
    };
    uint64_t grp, sgid;
    struct stat st;
    unsigned int i;
    char name[16], path[32];
    TestFs t;

    if (geteuid() != 0) {
        g_test_skip("needs root");
        return;
    }
    test_fs_setup(&t, NULL);
    test_fs_init_session(&t, FUSE_CREATE_SUPP_GROUP);
    g_assert_cmpint(chmod(t.dir, 0755), ==, 0);
    g_assert_cmpint(mkdirat(t.dir_fd, "grp", 0775), ==, 0);
    g_assert_cmpint(fchmodat(t.dir_fd, "grp", 0775, 0), ==, 0);
    g_assert_cmpint(fchownat(t.dir_fd, "grp", 0, 2000, 0), ==, 0);
    g_assert_cmpint(mkdirat(t.dir_fd, "sgid", 0775), ==, 0);
    g_assert_cmpint(fchownat(t.dir_fd, "sgid", 0, 2000, 0), ==, 0);
    g_assert_cmpint(fchmodat(t.dir_fd, "sgid", 02775, 0), ==, 0);
    grp = test_lookup(&t, FUSE_ROOT_ID, "grp", NULL);
    sgid = test_lookup(&t, FUSE_ROOT_ID, "sgid", NULL);

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        mode_t mode = ops[i] == FUSE_MKNOD ? S_IFIFO | 0644 :
                      ops[i] == FUSE_CREATE ? S_IFREG | 0644 : 0755;

        snprintf(name, sizeof(name), "n%u", i);
        /* Not a member as far as anyone told us: the host refuses */
        g_assert_cmpint(create_as_user(&t, ops[i], grp, name, mode, false),
                        ==, -EACCES);
        g_assert_cmpint(create_as_user(&t, ops[i], grp, name, mode, true),
                        ==, 0);
        snprintf(path, sizeof(path), "grp/%s", name);
        g_assert_cmpint(fstatat(t.dir_fd, path, &st, AT_SYMLINK_NOFOLLOW),
                        ==, 0);
        g_assert_cmpuint(st.st_uid, ==, 1000);
        g_assert_cmpuint(st.st_gid, ==, 1000);
    }
    /* A member keeps the setgid bit of a file made in a setgid dir */
    g_assert_cmpint(create_as_user(&t, FUSE_CREATE, sgid, "keep",
                                   S_IFREG | 02755, true), ==, 0);
    g_assert_cmpint(fstatat(t.dir_fd, "sgid/keep", &st, 0), ==, 0);
    g_assert_cmpuint(st.st_gid, ==, 2000);
    g_assert_true(st.st_mode & S_ISGID);
    g_assert_cmpint(create_as_user(&t, FUSE_CREATE, sgid, "lose",
                                   S_IFREG | 02755, false), ==, -EACCES);
    /* The thread has no supplementary group left */
    g_assert_cmpint(getgroups(0, NULL), ==, 0);
    test_fs_teardown(&t);

    /* Not negotiated: the extension is not used */
    test_fs_setup(&t, NULL);
    test_fs_init_session(&t, 0);
    g_assert_cmpint(chmod(t.dir, 0755), ==, 0);
    g_assert_cmpint(mkdirat(t.dir_fd, "grp", 0775), ==, 0);
    g_assert_cmpint(fchmodat(t.dir_fd, "grp", 0775, 0), ==, 0);
    g_assert_cmpint(fchownat(t.dir_fd, "grp", 0, 2000, 0), ==, 0);
    grp = test_lookup(&t, FUSE_ROOT_ID, "grp", NULL);
    g_assert_cmpint(create_as_user(&t, FUSE_MKDIR, grp, "d", 0755, true),
                    ==, -EACCES);
    test_fs_teardown(&t);
}

static bool window_available(void *opaque)
{
    return true;
}

/*
 * Writes through a DAX window never reach the daemon, so it must not
 * take over clearing setuid/setgid on writes (the guest would then not
 * do it, and a user's write would keep the bits).
 */
static void test_errno_killpriv_dax(void)
{
    VfsdDaxBackend be = { .available = window_available };
    struct fuse_init_in in = {
        .major = 7, .minor = 41,
        .flags = FUSE_INIT_EXT | FUSE_HANDLE_KILLPRIV_V2,
    };
    struct fuse_init_out out;
    VfsdDax *dax;
    TestReq *r;
    TestFs t;

    /* Without a window it is offered... */
    test_fs_setup(&t, NULL);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_true(out.flags & FUSE_HANDLE_KILLPRIV_V2);
    test_fs_teardown(&t);

    /* ...with one it is not */
    test_fs_setup(&t, NULL);
    dax = t.fs.dax = vfsd_dax_new(&be);
    r = test_req_new(FUSE_INIT, 0);
    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    g_assert_false(out.flags & FUSE_HANDLE_KILLPRIV_V2);
    test_fs_teardown(&t);
    vfsd_dax_free(dax);
}

/* --no-readdirplus: INIT no longer offers READDIRPLUS, nor its auto mode */
static void test_no_readdirplus(void)
{
    struct fuse_init_in in = {
        .major = 7, .minor = 41,
        .flags = FUSE_INIT_EXT | FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO,
    };
    struct fuse_init_out out;
    VfsdOptions o;
    TestReq *r;
    TestFs t;
    int i;

    for (i = 0; i < 2; i++) {
        test_fs_setup(&t, NULL);
        o = t.opts;
        test_fs_teardown(&t);
        o.no_readdirplus = i;
        test_fs_setup(&t, &o);
        r = test_req_new(FUSE_INIT, 0);
        test_req_add(r, &in, sizeof(in));
        g_assert_cmpint(test_send(&t, r, 4096, &out, sizeof(out), NULL), ==,
                        0);
        g_assert_cmpint(!!(out.flags & FUSE_DO_READDIRPLUS), ==, !i);
        g_assert_cmpint(!!(out.flags & FUSE_READDIRPLUS_AUTO), ==, !i);
        test_fs_teardown(&t);
    }
}

/*
 * --preserve-noatime: a read through a file the guest opened O_NOATIME
 * leaves the host's atime alone; without it the flag is dropped and the
 * read updates an atime older than the mtime (relatime does that too).
 */
static void test_preserve_noatime(void)
{
    struct timespec old[2] = {
        { .tv_sec = 1000000 }, { .tv_nsec = UTIME_NOW }
    };
    VfsdOptions o;
    TestFs t;
    int i;

    for (i = 0; i < 2; i++) {
        struct fuse_read_in rd = { .size = 4 };
        g_autofree char *path = NULL;
        uint64_t ino;
        struct stat st;
        char buf[4];
        TestReq *r;

        test_fs_setup(&t, NULL);
        o = t.opts;
        test_fs_teardown(&t);
        o.preserve_noatime = i;
        test_fs_setup(&t, &o);
        test_fs_init_session(&t, 0);
        path = g_build_filename(t.dir, "f", NULL);
        g_assert_true(g_file_set_contents(path, "abcd", 4, NULL));
        g_assert_cmpint(utimensat(t.dir_fd, "f", old, 0), ==, 0);
        ino = test_lookup(&t, FUSE_ROOT_ID, "f", NULL);
        rd.fh = test_open(&t, ino, O_RDONLY | O_NOATIME);
        r = test_req_new(FUSE_READ, ino);
        test_req_add(r, &rd, sizeof(rd));
        g_assert_cmpint(test_send(&t, r, 4096, buf, sizeof(buf), NULL), ==,
                        0);
        g_assert_cmpint(fstatat(t.dir_fd, "f", &st, 0), ==, 0);
        if (i) {
            g_assert_cmpint(st.st_atim.tv_sec, ==, old[0].tv_sec);
        } else {
            g_assert_cmpint(st.st_atim.tv_sec, >, old[0].tv_sec);
        }
        test_fs_teardown(&t);
    }
}

/*
 * --translate-uid/--translate-gid: a map: rule both ways, a squash onto
 * one host id, forbid-guest refusing the caller and a chown, and ids no
 * rule covers passing unchanged.
 */
static void test_translate_ids(void)
{
    VfsdOptions o = {
        .fd = -1, .sandbox = VFSD_SANDBOX_NONE,
    };
    g_autofree char *err = NULL;
    struct fuse_entry_out e;
    struct fuse_attr_out out;
    TestFs t;

    if (geteuid() != 0) {
        g_test_skip("needs root to act as the translated ids");
        return;
    }
    g_assert_true(vfsd_idxlate_add(&o.uid_map.xlate, "map:1000:4242:10",
                                   &err));
    g_assert_true(vfsd_idxlate_add(&o.uid_map.xlate,
                                   "squash-guest:2000:777:100", &err));
    g_assert_true(vfsd_idxlate_add(&o.uid_map.xlate, "forbid-guest:66:2",
                                   &err));
    g_assert_true(vfsd_idxlate_add(&o.gid_map.xlate, "guest:1000:5000:1",
                                   &err));
    test_fs_setup(&t, &o);
    test_fs_init_session(&t, 0);
    g_assert_cmpint(chmod(t.dir, 0777), ==, 0);

    g_assert_cmpint(mkdir_as(&t, FUSE_ROOT_ID, "a", 1003, 1000, &e), ==, 0);
    host_owner(&t, "a", 4245, 5000);
    g_assert_cmpuint(e.attr.uid, ==, 1003);
    /* guest: is one way: host gid 5000 is shown as it is */
    g_assert_cmpuint(e.attr.gid, ==, 5000);
    g_assert_cmpint(mkdir_as(&t, FUSE_ROOT_ID, "b", 2050, 7, &e), ==, 0);
    host_owner(&t, "b", 777, 7);
    /* squash-guest is one way too; 777 is no rule's host id */
    g_assert_cmpuint(e.attr.uid, ==, 777);
    g_assert_cmpint(mkdir_as(&t, FUSE_ROOT_ID, "c", 55, 55, &e), ==, 0);
    host_owner(&t, "c", 55, 55);
    g_assert_cmpuint(e.attr.uid, ==, 55);
    g_assert_cmpint(mkdir_as(&t, FUSE_ROOT_ID, "d", 67, 0, &e), ==, -EPERM);
    g_assert_cmpint(chown_req(&t, e.nodeid, FATTR_UID, 66, 0, &out), ==,
                    -EPERM);
    host_owner(&t, "c", 55, 55);
    test_fs_teardown(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);

#define ADD(path, fn) \
    g_test_add("/virtiofsd/ops/" path, TestFs, NULL, setup, fn, teardown)
/* The same, with --inode-file-handles=mandatory */
#define ADD_FH(path, fn) \
    g_test_add("/virtiofsd/ops/handles/" path, TestFs, &by_handle, setup, \
               fn, teardown)

    ADD("create-write-read", test_create_write_read);
    ADD("create-trunc-existing", test_create_trunc_existing);
    ADD("guest-credentials", test_guest_credentials);
    ADD("dirs-and-names", test_dirs_and_names);
    ADD("attrs", test_attrs);
    ADD("killpriv-v2", test_killpriv);
    ADD("killpriv-v2/group", test_killpriv_group);
    g_test_add_func("/virtiofsd/ops/killpriv-v2/no-setgid",
                    test_killpriv_no_setgid);
    ADD("readdir", test_readdir);
    ADD("readdir/read-ahead", test_readdir_read_ahead);
    ADD("readdirplus/known-inodes", test_readdirplus_known);
    ADD("lookup/known-first", test_lookup_known_first);
    ADD("statfs-access-syncfs", test_statfs_access_syncfs);
    ADD("xattr", test_xattr);
    ADD("xattr-symlink", test_xattr_symlink);
    ADD("fallocate-lseek-copy", test_fallocate_lseek_copy);
    ADD("ioctl-fileattr", test_ioctl_fileattr);
    ADD("ioctl-refused", test_ioctl_refused);
    ADD("statx", test_statx);
    ADD("copy-file-range-64", test_copy_file_range_64);
    ADD("locks", test_locks);
    ADD("setlkw-no-wait", test_setlkw_no_wait);
    ADD("interrupt-setlkw", test_interrupt_setlkw);
    ADD("interrupt-duplicate-unique", test_interrupt_duplicate_unique);
    ADD("interrupt-waiter-lifetime", test_interrupt_waiter_lifetime);
    ADD("lost-reply", test_lost_reply);
    ADD("tmpfile", test_tmpfile);
    ADD("forget", test_forget);
    ADD_FH("fds-and-stale", test_handles);
    ADD_FH("idle-fds", test_handles_idle);
    ADD_FH("create-write-read", test_create_write_read);
    ADD_FH("create-trunc-existing", test_create_trunc_existing);
    ADD_FH("guest-credentials", test_guest_credentials);
    ADD_FH("dirs-and-names", test_dirs_and_names);
    ADD_FH("attrs", test_attrs);
    ADD_FH("killpriv-v2", test_killpriv);
    ADD_FH("readdir", test_readdir);
    ADD_FH("readdir/read-ahead", test_readdir_read_ahead);
    ADD_FH("readdirplus/known-inodes", test_readdirplus_known);
    ADD_FH("lookup/known-first", test_lookup_known_first);
    ADD_FH("lazy-handles", test_handles_lazy);
    ADD_FH("batched-hand-over", test_handles_batched);
    ADD_FH("statfs-access-syncfs", test_statfs_access_syncfs);
    ADD_FH("xattr", test_xattr);
    ADD_FH("xattr-symlink", test_xattr_symlink);
    ADD_FH("fallocate-lseek-copy", test_fallocate_lseek_copy);
    ADD_FH("ioctl-fileattr", test_ioctl_fileattr);
    ADD_FH("ioctl-refused", test_ioctl_refused);
    ADD_FH("statx", test_statx);
    ADD_FH("copy-file-range-64", test_copy_file_range_64);
    ADD_FH("locks", test_locks);
    ADD_FH("tmpfile", test_tmpfile);
    ADD_FH("errno/long-names", test_errno_long_names);
    ADD_FH("errno/symlink-times", test_errno_symlink_times);
    ADD_FH("errno/mknod-types", test_errno_mknod_types);
    ADD_FH("errno/syncfs-special", test_errno_syncfs_special);
    ADD_FH("errno/offsets", test_errno_offsets);
    g_test_add_func("/virtiofsd/ops/handles/startup", test_handles_startup);
    ADD("errno/long-names", test_errno_long_names);
    ADD("errno/long-strings", test_errno_long_strings);
    ADD("errno/symlink-times", test_errno_symlink_times);
    ADD("errno/mknod-types", test_errno_mknod_types);
    ADD("errno/syncfs-special", test_errno_syncfs_special);
    ADD("errno/offsets", test_errno_offsets);
    ADD("errno/plock-append-only", test_errno_plock_append_only);
    g_test_add_func("/virtiofsd/ops/errno/plock-access",
                    test_errno_plock_access);
    g_test_add_func("/virtiofsd/ops/errno/supp-group",
                    test_errno_supp_group);
    g_test_add_func("/virtiofsd/ops/errno/killpriv-dax",
                    test_errno_killpriv_dax);
    g_test_add_func("/virtiofsd/ops/killpriv-v2/attr-timeout",
                    test_killpriv_attr_timeout);
    g_test_add_func("/virtiofsd/ops/readonly", test_readonly);
    g_test_add_func("/virtiofsd/ops/security-label", test_security_label);
    g_test_add_func("/virtiofsd/ops/posix-acl", test_posix_acl);
    g_test_add_func("/virtiofsd/ops/id-map", test_id_map);
    g_test_add_func("/virtiofsd/ops/translate-ids", test_translate_ids);
    g_test_add_func("/virtiofsd/ops/no-readdirplus", test_no_readdirplus);
    g_test_add_func("/virtiofsd/ops/preserve-noatime",
                    test_preserve_noatime);
    g_test_add_data_func("/virtiofsd/ops/cache/never", &cache_cases[0],
                         test_cache_mode);
    g_test_add_data_func("/virtiofsd/ops/cache/metadata", &cache_cases[1],
                         test_cache_mode);
    g_test_add_data_func("/virtiofsd/ops/cache/auto", &cache_cases[2],
                         test_cache_mode);
    g_test_add_data_func("/virtiofsd/ops/cache/always", &cache_cases[3],
                         test_cache_mode);
    g_test_add_func("/virtiofsd/ops/cache/adaptive", test_cache_adaptive);
    g_test_add_data_func("/virtiofsd/ops/noflush/without-locks",
                         GINT_TO_POINTER(false), test_noflush);
    g_test_add_data_func("/virtiofsd/ops/noflush/with-locks",
                         GINT_TO_POINTER(true), test_noflush);
    g_test_add_data_func("/virtiofsd/ops/direct-io/dropped",
                         GINT_TO_POINTER(0), test_direct_io);
    g_test_add_data_func("/virtiofsd/ops/direct-io/allowed",
                         GINT_TO_POINTER(1), test_direct_io);
    return g_test_run();
}
