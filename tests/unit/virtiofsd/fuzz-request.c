/*
 * virtiofsd: libFuzzer target for request decoding and dispatch
 *
 * One input is one request as the guest would queue it:
 *   byte 0: bits 0-5 the size of the pieces the input is split into
 *           (0: one piece), bit 6: odd pieces are reached through the
 *           memory access callback (as buffers in the DAX window are),
 *           bit 7: fix up the header's length field to the real size
 *   byte 1: the reply buffer's size in 64-byte units
 *   the rest: the request (struct fuse_in_header and what follows)
 *
 * The file system is a scratch directory with a few entries; the session
 * is initialized and re-initialized after a DESTROY, and the DAX window
 * is a fake that accepts every mapping.  Build it with clang outside the
 * QEMU build, e.g. from the top of the tree after "make prepare":
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Itools/virtiofsd -iquote build/src/include \
 *     $(pkg-config --cflags glib-2.0) tools/virtiofsd/{buf,creds,dax,fs,\
 *     fs-dir,fs-entry,fs-file,fs-xattr,inode,log,options,server}.c \
 *     tests/unit/virtiofsd/fuzz-request.c \
 *     $(pkg-config --libs glib-2.0) -lcap-ng -o fuzz-request
 *
 * and run it as an unprivileged user: it acts on its scratch directory
 * under $TMPDIR, and a bug that escapes it should find nothing to harm.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vfsd-test.h"

static VfsdOptions opts = {
    .fd = -1,
    .cache = VFSD_CACHE_AUTO,
    .sandbox = VFSD_SANDBOX_NONE,
    .xattr = true,
    .flock = true,
    .posix_lock = true,
    .killpriv_v2 = true,
    .dax_policy = VFSD_DAX_ALWAYS,
};
static VfsdFs fs;

static bool fake_true(void *opaque)
{
    return true;
}

static bool fake_map(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                     uint64_t len, uint64_t flags, int fd)
{
    return true;
}

static bool fake_unmap(void *opaque, uint64_t shm_offset, uint64_t len)
{
    return true;
}

static bool fake_mem(void *opaque, uint64_t addr, void *buf, size_t len,
                     bool is_write)
{
    if (is_write) {
        memcpy((void *)(uintptr_t)addr, buf, len);
    } else {
        memcpy(buf, (void *)(uintptr_t)addr, len);
    }
    return true;
}

static void session_init(void)
{
    struct {
        struct fuse_in_header h;
        struct fuse_init_in in;
    } req = {
        .h = { .len = sizeof(req), .opcode = FUSE_INIT, .unique = 1 },
        .in = {
            .major = 7, .minor = 41,
            .flags = FUSE_INIT_EXT | FUSE_DO_READDIRPLUS | FUSE_POSIX_LOCKS |
                     FUSE_FLOCK_LOCKS | FUSE_MAP_ALIGNMENT |
                     FUSE_HANDLE_KILLPRIV_V2 | FUSE_SETXATTR_EXT,
            .flags2 = FUSE_HAS_INODE_DAX >> 32,
        },
    };
    uint8_t out[256];
    VfsdSeg is = { .base = &req, .len = sizeof(req) };
    VfsdSeg os = { .base = out, .len = sizeof(out) };
    VfsdBuf ib, ob;

    vfsd_buf_init(&ib, &is, 1, NULL, NULL);
    vfsd_buf_init(&ob, &os, 1, NULL, NULL);
    vfsd_process_request(&fs, &ib, &ob);
}

static void setup(void)
{
    static const VfsdDaxBackend be = {
        .available = fake_true,
        .can_replace = fake_true,
        .map = fake_map,
        .unmap = fake_unmap,
    };
    g_autofree char *dir = g_dir_make_tmp("virtiofsd-fuzz-XXXXXX", NULL);
    g_autofree char *err = NULL;
    int root_fd, proc_fd, fd;

    vfsd_log_init(false, VFSD_LOG_ERROR);
    root_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0 || proc_fd < 0 || fchdir(proc_fd) < 0 ||
        !vfsd_fs_init(&fs, &opts, root_fd, proc_fd, &err)) {
        fprintf(stderr, "fuzz setup failed: %s\n", err ? err : "open");
        abort();
    }
    fd = openat(root_fd, "file", O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, "0123456789", 10) != 10) {
            abort();
        }
        close(fd);
    }
    mkdirat(root_fd, "dir", 0755);
    symlinkat("/etc/passwd", root_fd, "link");
    mkfifoat(root_fd, "fifo", 0644);
    fs.dax = vfsd_dax_new(&be);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    g_autofree uint8_t *in = NULL, *out = NULL;
    g_autofree VfsdSeg *in_segs = NULL, *out_segs = NULL;
    size_t piece, out_size, n_in, n_out, i;
    VfsdBuf ib, ob;
    uint8_t mode;

    if (!ready) {
        setup();
        ready = true;
    }
    if (!fs.initialized) {
        session_init();
    }
    if (size < 2) {
        return 0;
    }
    mode = data[0];
    out_size = (size_t)data[1] * 64;
    data += 2;
    size -= 2;

    in = g_malloc0(MAX(size, 1));
    memcpy(in, data, size);
    out = g_malloc0(out_size ? out_size : 1);
    if ((mode & 0x80) && size >= sizeof(struct fuse_in_header)) {
        ((struct fuse_in_header *)in)->len = size;
    }

    piece = mode & 0x3f;
    n_in = piece ? (size + piece - 1) / piece : 1;
    n_out = piece ? (out_size + piece - 1) / piece : 1;
    in_segs = g_new0(VfsdSeg, MAX(n_in, 1));
    out_segs = g_new0(VfsdSeg, MAX(n_out, 1));
    for (i = 0; i < n_in; i++) {
        size_t off = piece ? i * piece : 0;

        in_segs[i].len = piece ? MIN(piece, size - off) : size;
        in_segs[i].addr = (uintptr_t)(in + off);
        in_segs[i].base = ((mode & 0x40) && (i & 1)) ? NULL : in + off;
    }
    for (i = 0; i < n_out; i++) {
        size_t off = piece ? i * piece : 0;

        out_segs[i].len = piece ? MIN(piece, out_size - off) : out_size;
        out_segs[i].addr = (uintptr_t)(out + off);
        out_segs[i].base = ((mode & 0x40) && (i & 1)) ? NULL : out + off;
    }
    vfsd_buf_init(&ib, in_segs, size ? n_in : 0, fake_mem, NULL);
    vfsd_buf_init(&ob, out_segs, out_size ? n_out : 0, fake_mem, NULL);
    if (vfsd_process_request(&fs, &ib, &ob) > out_size) {
        abort();
    }
    return 0;
}
