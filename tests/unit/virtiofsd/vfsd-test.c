/*
 * virtiofsd tests: driving the dispatch layer with hand-built requests
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "vfsd-test.h"

static bool test_mem(void *opaque, uint64_t addr, void *buf, size_t len,
                     bool is_write)
{
    TestFs *t = opaque;

    if (!is_write && t->req_reads) {
        const uint8_t *p = (const uint8_t *)(uintptr_t)addr;
        size_t i;

        for (i = 0; i < len; i++) {
            if (p + i >= t->req_base && p + i < t->req_base + t->req_len &&
                ++t->req_reads[p + i - t->req_base] > 1) {
                g_test_message("byte %zu of the request was read twice",
                               (size_t)(p + i - t->req_base));
                g_test_fail();
            }
        }
    }
    if (is_write && t->reply_fails) {
        return false;
    }
    /* In these tests a guest address is a host pointer */
    if (is_write) {
        memcpy((void *)(uintptr_t)addr, buf, len);
    } else {
        memcpy(buf, (void *)(uintptr_t)addr, len);
    }
    return true;
}

void test_fs_setup(TestFs *t, const VfsdOptions *opts)
{
    g_autofree char *err = NULL;
    int root_fd, proc_fd;

    memset(t, 0, sizeof(*t));
    if (opts) {
        t->opts = *opts;
    } else {
        t->opts.fd = -1;
        t->opts.cache = VFSD_CACHE_AUTO;
        t->opts.sandbox = VFSD_SANDBOX_NONE;
        t->opts.xattr = true;
        t->opts.flock = true;
        t->opts.posix_lock = true;
        t->opts.killpriv_v2 = true;
        t->opts.dax_policy = VFSD_DAX_ALWAYS;
    }
    t->dir = g_dir_make_tmp("virtiofsd-test-XXXXXX", NULL);
    g_assert_nonnull(t->dir);
    t->dir_fd = open(t->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    root_fd = open(t->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    g_assert_cmpint(root_fd, >=, 0);
    g_assert_cmpint(proc_fd, >=, 0);
    /* As the daemon does: see fs-xattr.c */
    g_assert_cmpint(fchdir(proc_fd), ==, 0);
    g_assert_true(vfsd_fs_init(&t->fs, &t->opts, root_fd, proc_fd, &err));
}

void test_fs_teardown(TestFs *t)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", t->dir);

    vfsd_fs_cleanup(&t->fs);
    close(t->fs.proc_self_fd);
    close(t->dir_fd);
    g_assert_cmpint(chdir("/"), ==, 0);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(t->dir);
}

void test_fs_setup_peer(TestFs *d, const TestFs *src,
                        const VfsdOptions *opts)
{
    g_autofree char *err = NULL;
    int root_fd, proc_fd;

    memset(d, 0, sizeof(*d));
    d->opts = opts ? *opts : src->opts;
    d->dir = g_strdup(src->dir);
    d->dir_fd = open(d->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    root_fd = open(d->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    g_assert_cmpint(root_fd, >=, 0);
    g_assert_cmpint(proc_fd, >=, 0);
    g_assert_true(vfsd_fs_init(&d->fs, &d->opts, root_fd, proc_fd, &err));
}

void test_fs_teardown_peer(TestFs *d)
{
    vfsd_fs_cleanup(&d->fs);
    close(d->fs.proc_self_fd);
    close(d->dir_fd);
    g_free(d->dir);
}

TestReq *test_req_new(uint32_t opcode, uint64_t nodeid)
{
    TestReq *r = g_new0(TestReq, 1);
    struct fuse_in_header h = {
        .opcode = opcode,
        .nodeid = nodeid,
        .uid = 0,
        .gid = 0,
        .pid = 1,
    };

    r->data = g_byte_array_new();
    g_byte_array_append(r->data, (void *)&h, sizeof(h));
    return r;
}

void test_req_add(TestReq *r, const void *p, size_t len)
{
    g_byte_array_append(r->data, p, len);
}

void test_req_add_str(TestReq *r, const char *s)
{
    g_byte_array_append(r->data, (const void *)s, strlen(s) + 1);
}

static size_t make_segs(TestFs *t, uint8_t *p, size_t len, VfsdSeg **segs,
                        bool unmapped)
{
    size_t seg_size = t->seg_size ? t->seg_size : MAX(len, 1);
    size_t n = MAX((len + seg_size - 1) / seg_size, 1), i;

    *segs = g_new0(VfsdSeg, n);
    for (i = 0; i < n; i++) {
        (*segs)[i].addr = (uintptr_t)(p + i * seg_size);
        (*segs)[i].len = MIN(seg_size, len - MIN(len, i * seg_size));
        (*segs)[i].base = (unmapped || (t->unmapped_odd && (i & 1))) ?
                          NULL : p + i * seg_size;
    }
    return n;
}

int test_send_raw(TestFs *t, const void *req, size_t len, size_t out_size,
                  void *reply, size_t reply_size, size_t *reply_len)
{
    g_autofree uint8_t *in = g_memdup2(req, len);
    g_autofree uint8_t *out = g_malloc0(out_size ? out_size : 1);
    g_autofree VfsdSeg *in_segs = NULL, *out_segs = NULL;
    struct fuse_out_header oh;
    VfsdReqHead head;
    VfsdBuf ib, ob;
    size_t n_in, n_out, written;

    n_in = make_segs(t, in, len, &in_segs, t->read_once);
    n_out = make_segs(t, out, out_size, &out_segs,
                      t->read_once || t->reply_fails);
    vfsd_buf_init(&ib, in_segs, len ? n_in : 0, test_mem, t);
    vfsd_buf_init(&ob, out_segs, out_size ? n_out : 0, test_mem, t);
    if (t->read_once) {
        t->req_base = in;
        t->req_len = len;
        t->req_reads = g_malloc0(len ? len : 1);
    }
    /* As the transport does: the header once, then the rest */
    vfsd_request_head(&ib, &head);
    if (t->hiprio) {
        written = vfsd_process_hiprio(&t->fs, &head, &ib, &ob);
    } else if (t->no_wait) {
        written = vfsd_process_no_wait(&t->fs, &head, &ib, &ob);
    } else {
        written = vfsd_process_request(&t->fs, &head, &ib, &ob);
    }
    g_clear_pointer(&t->req_reads, g_free);
    if (written == 0) {
        return 1;
    }
    g_assert_cmpuint(written, >=, sizeof(oh));
    g_assert_cmpuint(written, <=, out_size);
    memcpy(&oh, out, sizeof(oh));
    g_assert_cmpuint(oh.len, ==, written);
    if (oh.error) {
        g_assert_cmpuint(oh.len, ==, sizeof(oh));
        g_assert_cmpint(oh.error, <, 0);
    }
    if (reply_len) {
        *reply_len = oh.len - sizeof(oh);
    }
    if (reply && !reply_len && !oh.error) {
        /* A caller that takes no length counts on every byte of @reply */
        g_assert_cmpuint(oh.len - sizeof(oh), >=, reply_size);
    }
    if (reply) {
        memcpy(reply, out + sizeof(oh), MIN(reply_size, oh.len - sizeof(oh)));
    }
    return oh.error;
}

int test_send(TestFs *t, TestReq *r, size_t out_size, void *reply,
              size_t reply_size, size_t *reply_len)
{
    struct fuse_in_header *h = (void *)r->data->data;
    int ret;

    h->len = r->data->len;
    h->unique = ++t->unique;
    ret = test_send_raw(t, r->data->data, r->data->len, out_size, reply,
                        reply_size, reply_len);
    g_byte_array_free(r->data, true);
    g_free(r);
    return ret;
}

void test_fs_init_session(TestFs *t, uint64_t want_flags)
{
    TestReq *r = test_req_new(FUSE_INIT, 0);
    struct fuse_init_in in = {
        .major = 7,
        .minor = 41,
        .max_readahead = 65536,
        .flags = (want_flags & 0xffffffff) | FUSE_INIT_EXT,
        .flags2 = want_flags >> 32,
    };
    struct fuse_init_out out;

    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
}

uint64_t test_lookup(TestFs *t, uint64_t parent, const char *name,
                     struct fuse_attr *attr)
{
    TestReq *r = test_req_new(FUSE_LOOKUP, parent);
    struct fuse_entry_out e;

    test_req_add_str(r, name);
    g_assert_cmpint(test_send(t, r, 4096, &e, sizeof(e), NULL), ==, 0);
    g_assert_cmpuint(e.nodeid, !=, 0);
    if (attr) {
        *attr = e.attr;
    }
    return e.nodeid;
}

int test_lookup_err(TestFs *t, uint64_t parent, const char *name)
{
    TestReq *r = test_req_new(FUSE_LOOKUP, parent);
    struct fuse_entry_out e;
    int ret;

    test_req_add_str(r, name);
    ret = test_send(t, r, 4096, &e, sizeof(e), NULL);
    if (ret == 0 && e.nodeid == 0) {
        return -ENOENT;
    }
    return ret;
}

uint64_t test_create(TestFs *t, uint64_t parent, const char *name,
                     uint32_t flags, uint64_t *fh)
{
    TestReq *r = test_req_new(FUSE_CREATE, parent);
    struct fuse_create_in in = {
        .flags = flags,
        .mode = S_IFREG | 0644,
        .umask = 022,
    };
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } out;

    test_req_add(r, &in, sizeof(in));
    test_req_add_str(r, name);
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    *fh = out.o.fh;
    return out.e.nodeid;
}

uint64_t test_open(TestFs *t, uint64_t nodeid, uint32_t flags)
{
    TestReq *r = test_req_new(FUSE_OPEN, nodeid);
    struct fuse_open_in in = { .flags = flags };
    struct fuse_open_out out;

    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, &out, sizeof(out), NULL), ==, 0);
    return out.fh;
}

int test_write(TestFs *t, uint64_t nodeid, uint64_t fh, uint64_t off,
               const void *data, uint32_t len)
{
    TestReq *r = test_req_new(FUSE_WRITE, nodeid);
    struct fuse_write_in in = { .fh = fh, .offset = off, .size = len };
    struct fuse_write_out out;
    int ret;

    test_req_add(r, &in, sizeof(in));
    test_req_add(r, data, len);
    ret = test_send(t, r, 4096, &out, sizeof(out), NULL);
    return ret < 0 ? ret : (int)out.size;
}
