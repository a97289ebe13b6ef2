/*
 * virtiofsd tests: --xattrmap through the request path, checked on the
 * host: the names the xattr requests reach, the errnos the guest gets,
 * and a moved security.capability dropped wherever the kernel would drop
 * the real one.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "vfsd-test.h"
#include "xattrmap.h"

static bool setup_map(TestFs *t, const char *rules)
{
    g_autofree char *err = NULL;
    VfsdOptions o = {
        .fd = -1, .cache = VFSD_CACHE_AUTO, .sandbox = VFSD_SANDBOX_NONE,
        .xattr = true, .killpriv_v2 = true, .dax_policy = VFSD_DAX_ALWAYS,
    };

    o.xattrmap = vfsd_xattrmap_parse(rules, &err);
    g_assert_nonnull(o.xattrmap);
    test_fs_setup(t, &o);
    test_fs_init_session(t, FUSE_HANDLE_KILLPRIV_V2 | FUSE_SETXATTR_EXT);
    if (setxattr(t->dir, "user.probe", "x", 1, 0) < 0) {
        g_test_skip("no user xattrs on this file system");
        return false;
    }
    return true;
}

static void teardown_map(TestFs *t)
{
    VfsdXattrMap *map = t->opts.xattrmap;

    test_fs_teardown(t);
    vfsd_xattrmap_free(map);
}

static char *host_path(TestFs *t, const char *name)
{
    return g_strdup_printf("%s/%s", t->dir, name);
}

/* The host's value of @attr on @name, or "-ERRNONAME" */
static char *host_get(TestFs *t, const char *name, const char *attr)
{
    g_autofree char *path = host_path(t, name);
    char buf[256];
    ssize_t n = getxattr(path, attr, buf, sizeof(buf) - 1);

    if (n < 0) {
        return g_strdup(errno == ENODATA ? "-ENODATA" : g_strerror(errno));
    }
    buf[n] = '\0';
    return g_strdup(buf);
}

static void host_set(TestFs *t, const char *name, const char *attr,
                     const char *value)
{
    g_autofree char *path = host_path(t, name);

    g_assert_cmpint(setxattr(path, attr, value, strlen(value), 0), ==, 0);
}

#define assert_host(t, name, attr, want)                    \
    do {                                                    \
        g_autofree char *got_ = host_get(t, name, attr);    \
        g_assert_cmpstr(got_, ==, want);                    \
    } while (0)

static int set_req(TestFs *t, uint64_t ino, const char *name,
                   const char *value)
{
    TestReq *r = test_req_new(FUSE_SETXATTR, ino);

    test_req_add(r, &(struct fuse_setxattr_in){ .size = strlen(value) },
                 sizeof(struct fuse_setxattr_in));
    test_req_add_str(r, name);
    test_req_add(r, value, strlen(value));
    return test_send(t, r, 4096, NULL, 0, NULL);
}

/* GETXATTR with a buffer: the value in @buf, its length returned */
static int get_req(TestFs *t, uint64_t ino, const char *name, char *buf,
                   size_t size)
{
    TestReq *r = test_req_new(FUSE_GETXATTR, ino);
    size_t len = 0;
    int ret;

    test_req_add(r, &(struct fuse_getxattr_in){ .size = size - 1 },
                 sizeof(struct fuse_getxattr_in));
    test_req_add_str(r, name);
    ret = test_send(t, r, 4096, buf, size - 1, &len);
    buf[ret < 0 ? 0 : len] = '\0';
    return ret < 0 ? ret : (int)len;
}

static int remove_req(TestFs *t, uint64_t ino, const char *name)
{
    TestReq *r = test_req_new(FUSE_REMOVEXATTR, ino);

    test_req_add_str(r, name);
    return test_send(t, r, 4096, NULL, 0, NULL);
}

static void test_names(void)
{
    TestFs t;
    uint64_t fh, ino;
    char buf[512];
    struct fuse_getxattr_out gout;
    g_autofree char *path = NULL;
    g_autofree char *longname = NULL;
    ssize_t host_len;
    size_t len = 0;
    TestReq *r;

    if (!setup_map(&t, ":map::user.vm.:")) {
        teardown_map(&t);
        return;
    }
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    path = host_path(&t, "f");

    g_assert_cmpint(set_req(&t, ino, "trusted.a", "v"), ==, 0);
    assert_host(&t, "f", "user.vm.trusted.a", "v");
    assert_host(&t, "f", "trusted.a", "-ENODATA");

    host_set(&t, "f", "user.vm.user.b", "w");
    host_set(&t, "f", "user.plain", "hidden");
    g_assert_cmpint(get_req(&t, ino, "user.b", buf, sizeof(buf)), ==, 1);
    g_assert_cmpstr(buf, ==, "w");
    g_assert_cmpint(get_req(&t, ino, "user.plain", buf, sizeof(buf)), ==,
                    -ENODATA);

    /* A length probe gets the host's length, which bounds the list */
    host_len = listxattr(path, NULL, 0);
    g_assert_cmpint(host_len, >, 0);
    r = test_req_new(FUSE_LISTXATTR, ino);
    test_req_add(r, &(struct fuse_getxattr_in){ .size = 0 },
                 sizeof(struct fuse_getxattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, &gout, sizeof(gout), NULL), ==,
                    0);
    g_assert_cmpuint(gout.size, ==, host_len);
    r = test_req_new(FUSE_LISTXATTR, ino);
    test_req_add(r, &(struct fuse_getxattr_in){ .size = gout.size },
                 sizeof(struct fuse_getxattr_in));
    g_assert_cmpint(test_send(&t, r, 4096, buf, sizeof(buf), &len), ==, 0);
    /* Only the mapped names, prefix stripped, in whatever order */
    g_assert_cmpuint(len, ==, sizeof("trusted.a") + sizeof("user.b"));
    g_assert_nonnull(memmem(buf, len, "trusted.a", sizeof("trusted.a")));
    g_assert_nonnull(memmem(buf, len, "user.b", sizeof("user.b")));

    g_assert_cmpint(remove_req(&t, ino, "user.b"), ==, 0);
    assert_host(&t, "f", "user.vm.user.b", "-ENODATA");
    assert_host(&t, "f", "user.plain", "hidden");

    /* 250 bytes from the guest, 258 on the host: the kernel's ERANGE */
    longname = g_strnfill(250, 'n');
    memcpy(longname, "user.", 5);
    g_assert_cmpint(set_req(&t, ino, longname, "x"), ==, -ERANGE);
    teardown_map(&t);
}

static void test_refusals(void)
{
    TestFs t;
    uint64_t fh, ino;
    char buf[64];

    if (!setup_map(&t, "/bad/all/user.no./user.no./ "
                   "/unsupported/all/user.ns./user.ns./ /ok/all///")) {
        teardown_map(&t);
        return;
    }
    ino = test_create(&t, FUSE_ROOT_ID, "f", O_RDWR, &fh);
    host_set(&t, "f", "user.no.x", "1");
    host_set(&t, "f", "user.ns.x", "2");

    g_assert_cmpint(get_req(&t, ino, "user.no.x", buf, sizeof(buf)), ==,
                    -ENODATA);
    g_assert_cmpint(set_req(&t, ino, "user.no.x", "3"), ==, -EPERM);
    g_assert_cmpint(remove_req(&t, ino, "user.no.x"), ==, -EPERM);
    g_assert_cmpint(get_req(&t, ino, "user.ns.x", buf, sizeof(buf)), ==,
                    -ENOTSUP);
    g_assert_cmpint(set_req(&t, ino, "user.ns.x", "3"), ==, -ENOTSUP);
    g_assert_cmpint(remove_req(&t, ino, "user.ns.x"), ==, -ENOTSUP);
    /* Untouched on the host */
    assert_host(&t, "f", "user.no.x", "1");
    assert_host(&t, "f", "user.ns.x", "2");
    /* ok passes */
    g_assert_cmpint(set_req(&t, ino, "user.ok", "4"), ==, 0);
    assert_host(&t, "f", "user.ok", "4");
    teardown_map(&t);
}

static int setattr_req(TestFs *t, uint64_t ino, uint32_t valid,
                       uint64_t size)
{
    TestReq *r = test_req_new(FUSE_SETATTR, ino);
    struct fuse_attr_out out;

    test_req_add(r, &(struct fuse_setattr_in){
                     .valid = valid, .size = size,
                     .uid = geteuid(), .gid = getegid() },
                 sizeof(struct fuse_setattr_in));
    return test_send(t, r, 4096, &out, sizeof(out), NULL);
}

#define CAP "user.vm.security.capability"

static uint64_t cap_file(TestFs *t, const char *name, mode_t type)
{
    g_autofree char *path = host_path(t, name);

    if (type == S_IFDIR) {
        g_assert_cmpint(mkdir(path, 0755), ==, 0);
    } else {
        g_assert_true(g_file_set_contents(path, "data", 4, NULL));
    }
    host_set(t, name, CAP, "cap");
    return test_lookup(t, FUSE_ROOT_ID, name, NULL);
}

static void test_capability(void)
{
    TestFs t;
    uint64_t ino, fh;

    if (!setup_map(&t, ":map::user.vm.:")) {
        teardown_map(&t);
        return;
    }
    g_assert_cmpstr(vfsd_xattrmap_capability_name(t.opts.xattrmap), ==, CAP);

    ino = cap_file(&t, "write", S_IFREG);
    fh = test_open(&t, ino, O_RDWR);
    g_assert_cmpint(test_write(&t, ino, fh, 0, "x", 1), ==, 1);
    assert_host(&t, "write", CAP, "-ENODATA");

    ino = cap_file(&t, "truncate", S_IFREG);
    g_assert_cmpint(setattr_req(&t, ino, FATTR_SIZE, 1), ==, 0);
    assert_host(&t, "truncate", CAP, "-ENODATA");

    ino = cap_file(&t, "chown", S_IFREG);
    g_assert_cmpint(setattr_req(&t, ino, FATTR_UID | FATTR_GID, 0), ==, 0);
    assert_host(&t, "chown", CAP, "-ENODATA");

    ino = cap_file(&t, "open-trunc", S_IFREG);
    test_open(&t, ino, O_RDWR | O_TRUNC);
    assert_host(&t, "open-trunc", CAP, "-ENODATA");

    ino = cap_file(&t, "create-trunc", S_IFREG);
    test_create(&t, FUSE_ROOT_ID, "create-trunc", O_RDWR | O_TRUNC, &fh);
    assert_host(&t, "create-trunc", CAP, "-ENODATA");

    ino = cap_file(&t, "setxattr", S_IFREG);
    g_assert_cmpint(set_req(&t, ino, "user.other", "o"), ==, 0);
    assert_host(&t, "setxattr", CAP, "-ENODATA");

    /* What does not change the file keeps it */
    ino = cap_file(&t, "open", S_IFREG);
    test_open(&t, ino, O_RDWR);
    g_assert_cmpint(setattr_req(&t, ino, FATTR_MTIME, 0), ==, 0);
    assert_host(&t, "open", CAP, "cap");

    /* Only regular files carry capabilities that count */
    ino = cap_file(&t, "dir", S_IFDIR);
    g_assert_cmpint(setattr_req(&t, ino, FATTR_UID | FATTR_GID, 0), ==, 0);
    assert_host(&t, "dir", CAP, "cap");
    teardown_map(&t);

    /* Not moved: the host kernel does the work, the daemon leaves it */
    if (!setup_map(&t, ":ok:all:::")) {
        teardown_map(&t);
        return;
    }
    g_assert_null(vfsd_xattrmap_capability_name(t.opts.xattrmap));
    ino = cap_file(&t, "write", S_IFREG);
    fh = test_open(&t, ino, O_RDWR);
    g_assert_cmpint(test_write(&t, ino, fh, 0, "x", 1), ==, 1);
    assert_host(&t, "write", CAP, "cap");
    teardown_map(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtiofsd/xattrmap-fs/names", test_names);
    g_test_add_func("/virtiofsd/xattrmap-fs/refusals", test_refusals);
    g_test_add_func("/virtiofsd/xattrmap-fs/capability", test_capability);
    return g_test_run();
}
