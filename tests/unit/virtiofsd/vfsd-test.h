/*
 * virtiofsd tests: driving the dispatch layer with hand-built requests
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_TEST_H
#define VIRTIOFSD_TEST_H

#include <glib.h>

#include "creds.h"
#include "dax.h"
#include "fd.h"
#include "fs-dir.h"
#include "fs-entry.h"
#include "fs-file.h"
#include "fs-xattr.h"
#include "fs.h"
#include "inode.h"
#include "intr.h"
#include "server.h"

typedef struct TestFs {
    VfsdOptions opts;
    VfsdFs fs;
    char *dir;
    int dir_fd;                 /* the scratch dir, for checks on the host */
    uint64_t unique;
    /* Input split in pieces of this many bytes (0: one piece) */
    size_t seg_size;
    /* Pieces at odd positions go through the memory access callback */
    bool unmapped_odd;
    /* Requests come from the hiprio queue (vfsd_process_hiprio()) */
    bool hiprio;
    /* Requests that may block must not (vfsd_process_no_wait()) */
    bool no_wait;
    /*
     * Every piece goes through the memory access callback, which fails
     * the test when a byte of the request is read twice: a guest could
     * have changed it in between.
     */
    bool read_once;
    const uint8_t *req_base;    /* the request being sent, for read_once */
    size_t req_len;
    uint8_t *req_reads;         /* reads of each of its bytes */
    /* The reply cannot be written (a guest buffer that went away) */
    bool reply_fails;
} TestFs;

typedef struct TestReq {
    GByteArray *data;
} TestReq;

void test_fs_setup(TestFs *t, const VfsdOptions *opts);
void test_fs_teardown(TestFs *t);
/*
 * A second file system on @src's directory (a live migration's
 * destination), with @opts or @src's options, and no session yet; its
 * teardown leaves the directory to @src's.
 */
void test_fs_setup_peer(TestFs *d, const TestFs *src,
                        const VfsdOptions *opts);
void test_fs_teardown_peer(TestFs *d);
void test_fs_init_session(TestFs *t, uint64_t want_flags);

TestReq *test_req_new(uint32_t opcode, uint64_t nodeid);
void test_req_add(TestReq *r, const void *p, size_t len);
void test_req_add_str(TestReq *r, const char *s);

/*
 * Sends @r (and frees it) with an out buffer of @out_size bytes.  Returns
 * the reply's error field (0 or a negative errno); the payload goes to
 * @reply (up to @reply_size bytes) and its length to @reply_len.  Without
 * @reply_len, a successful reply shorter than @reply_size fails the test.
 * Returns 1 when the request got no reply.
 */
int test_send(TestFs *t, TestReq *r, size_t out_size, void *reply,
              size_t reply_size, size_t *reply_len);
/* Same, with the header length field set to @hdr_len and @out_size room */
int test_send_raw(TestFs *t, const void *req, size_t len, size_t out_size,
                  void *reply, size_t reply_size, size_t *reply_len);

/* Common operations; they assert success */
uint64_t test_lookup(TestFs *t, uint64_t parent, const char *name,
                     struct fuse_attr *attr);
int test_lookup_err(TestFs *t, uint64_t parent, const char *name);
uint64_t test_create(TestFs *t, uint64_t parent, const char *name,
                     uint32_t flags, uint64_t *fh);
uint64_t test_open(TestFs *t, uint64_t nodeid, uint32_t flags);
int test_write(TestFs *t, uint64_t nodeid, uint64_t fh, uint64_t off,
               const void *data, uint32_t len);

#endif /* VIRTIOFSD_TEST_H */
