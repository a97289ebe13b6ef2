/*
 * QTest for vhost-user-fs with the DAX cache window, against virtiofsd
 *
 * vhost-user-fs-test plays the back-end itself; this test starts the real
 * daemon on a scratch directory and speaks FUSE to it on a request queue,
 * as a guest driver would, so that FUSE_SETUPMAPPING and
 * FUSE_REMOVEMAPPING travel the whole way: virtqueue, daemon, back-end
 * request, the window in BAR 2 and the host file behind it.
 *
 * The daemon is $QTEST_VIRTIOFSD, or tools/virtiofsd/virtiofsd in the
 * build tree that holds $QTEST_QEMU_BINARY.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/wait.h>
#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "qemu/units.h"
#include "libqtest.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci-pc.h"
#include "libqos/vhost-user-fs.h"
#include "standard-headers/linux/fuse.h"
#include "standard-headers/linux/pci_regs.h"
#include "standard-headers/linux/virtio_config.h"

#define TWO_MB (2 * MiB)
#define FILE_SIZE (4 * MiB)
#define CACHE_SIZE (64 * MiB)
#define RAM_SIZE (256 * MiB)
#define FS_DEVFN QPCI_DEVFN(4, 0)
/* Where the test puts BAR 2: above RAM and the 32-bit hole */
#define CACHE_BAR_ADDR (64 * GiB)
#define REQUEST_QUEUE 1
#define TIMEOUT_MS 10000
#define FILE_NAME "pattern"
#define DIR_NAME "subdir"
/* The guest sends no file handle with SETUPMAPPING */
#define NO_FH UINT64_MAX
/* Requests in flight at once; above virtiofsd's 64 lock waiters */
#define MAX_PENDING 128
#define QUEUE_SIZE 1024

typedef struct TestCtx {
    char *dir;
    char *shared;
    char *file;
    char *sock;
    GPid daemon;
    QOSState *qs;
    QTestState *qts;
    QVhostUserFSPCI *fs;
    QVirtQueue *vq[2];
    uint64_t unique;
    /* Requests answered out of order, not yet waited for (fuse_wait()) */
    uint32_t done_head[MAX_PENDING];
    unsigned int n_done;
} TestCtx;

/* A request submitted without waiting for its reply */
typedef struct Pending {
    int qidx;
    uint32_t head;
    uint64_t req, rep;
    uint64_t unique;
} Pending;

/* The 64-bit word at @offset of the shared file */
static uint64_t pattern_word(uint64_t offset)
{
    return 0x5a5a000000000000ULL ^ offset;
}

static void make_pattern_file(const char *path)
{
    g_autofree uint64_t *buf = g_malloc(FILE_SIZE);
    uint64_t i;

    for (i = 0; i < FILE_SIZE / 8; i++) {
        buf[i] = cpu_to_le64(pattern_word(i * 8));
    }
    g_assert_true(g_file_set_contents(path, (char *)buf, FILE_SIZE, NULL));
}

static char *virtiofsd_path(void)
{
    const char *env = g_getenv("QTEST_VIRTIOFSD");
    const char *qemu = g_getenv("QTEST_QEMU_BINARY");
    g_autofree char *qemu_dir = NULL;
    char *path;

    if (env) {
        path = g_strdup(env);
    } else {
        g_assert_nonnull(qemu);
        qemu_dir = g_path_get_dirname(qemu);
        path = g_build_filename(qemu_dir, "tools", "virtiofsd", "virtiofsd",
                                NULL);
    }
    if (access(path, X_OK)) {
        g_test_message("virtiofsd not found at %s: build it or set "
                       "QTEST_VIRTIOFSD", path);
        g_test_fail();
        g_free(path);
        return NULL;
    }
    return path;
}

static void kill_daemon(void *opaque)
{
    GPid *pid = opaque;

    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

/*
 * Whether a socket listens on @path: the path appears at bind(), a moment
 * before listen(), and QEMU would fail to connect in between.
 */
static bool is_listening(const char *path)
{
    g_autofree char *table = NULL;
    g_auto(GStrv) lines = NULL;
    char **l;

    if (!g_file_get_contents("/proc/net/unix", &table, NULL, NULL)) {
        return false;
    }
    lines = g_strsplit(table, "\n", -1);
    for (l = lines; *l; l++) {
        unsigned long flags;
        char name[PATH_MAX];

        /* Num: RefCount Protocol Flags Type St Inode Path */
        if (sscanf(*l, "%*s %*s %*s %lx %*s %*s %*s %4095s",
                   &flags, name) == 2 &&
            (flags & 0x10000) && !strcmp(name, path)) {
            return true;
        }
    }
    return false;
}

static bool start_daemon(TestCtx *t, const char *unmap_delay)
{
    g_autofree char *binary = virtiofsd_path();
    g_autofree char *sock_opt = g_strdup_printf("--socket-path=%s", t->sock);
    g_autofree char *dir_opt = g_strdup_printf("--shared-dir=%s", t->shared);
    /*
     * No sandbox, so that the test also runs without the privileges
     * namespaces need; the seccomp filter stays on.
     */
    const char *argv[] = {
        NULL, sock_opt, dir_opt, "--sandbox=none", "--cache=never",
        "--log-level=error", "--posix-lock", "--flock", unmap_delay, NULL,
    };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    g_autoptr(GError) err = NULL;

    if (!binary) {
        return false;
    }
    argv[0] = binary;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD |
                                G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                &t->daemon, &err));
    qtest_add_abrt_handler(kill_daemon, &t->daemon);

    while (!is_listening(t->sock)) {
        int status;

        if (waitpid(t->daemon, &status, WNOHANG) == t->daemon) {
            t->daemon = 0;
            g_test_message("virtiofsd exited with status 0x%x before "
                           "listening on its socket", status);
            g_test_fail();
            return false;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    return true;
}

/* @unmap_delay: the daemon's --dax-unmap-delay option */
static bool setup_delay(TestCtx *t, const char *unmap_delay)
{
    QPCIAddress addr = { .devfn = FS_DEVFN };
    QVirtioDevice *vdev;
    unsigned int i;

    memset(t, 0, sizeof(*t));
    t->dir = g_dir_make_tmp("vhost-user-fs-daemon-test-XXXXXX", NULL);
    g_assert_nonnull(t->dir);
    t->shared = g_build_filename(t->dir, "shared", NULL);
    t->file = g_build_filename(t->shared, FILE_NAME, NULL);
    t->sock = g_build_filename(t->dir, "vhost.sock", NULL);
    g_assert_cmpint(mkdir(t->shared, 0700), ==, 0);
    make_pattern_file(t->file);
    {
        g_autofree char *sub = g_build_filename(t->shared, DIR_NAME, NULL);

        g_assert_cmpint(mkdir(sub, 0700), ==, 0);
    }
    if (!start_daemon(t, unmap_delay)) {
        return false;
    }

    t->qs = qtest_pc_boot("-machine pc -m %" PRIu64 "M -nodefaults "
                          "-object memory-backend-memfd,id=mem,"
                          "size=%" PRIu64 "M,share=on -numa node,memdev=mem "
                          "-chardev socket,id=vuf,path=%s "
                          "-device vhost-user-fs-pci,chardev=vuf,tag=myfs,"
                          "addr=04.0,cache-size=%" PRIu64 "M,"
                          "queue-size=%d",
                          RAM_SIZE / MiB, RAM_SIZE / MiB, t->sock,
                          CACHE_SIZE / MiB, QUEUE_SIZE);
    t->qts = t->qs->qts;
    t->fs = qvhost_user_fs_pci_new(t->qs->pcibus, &addr);
    g_assert_nonnull(t->fs);
    vdev = t->fs->fs.vdev;

    qvhost_user_fs_pci_place_cache_bar(t->fs, CACHE_BAR_ADDR);

    qvirtio_pci_device_enable(&t->fs->pci_vdev);
    qvirtio_start_device(vdev);
    g_assert_true(qvirtio_get_features(vdev) & (1ULL << VIRTIO_F_VERSION_1));
    qvirtio_set_features(vdev, 1ULL << VIRTIO_F_VERSION_1);
    for (i = 0; i < ARRAY_SIZE(t->vq); i++) {
        t->vq[i] = qvirtqueue_setup(vdev, &t->qs->alloc, i);
    }
    qvirtio_set_driver_ok(vdev);
    return true;
}

/* With QEMU gone, the daemon must exit, and cleanly */
static void wait_daemon_exit(TestCtx *t)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    int status;

    while (waitpid(t->daemon, &status, WNOHANG) != t->daemon) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    t->daemon = 0;
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

/* Most tests check what each request does to the window at once */
static bool setup(TestCtx *t)
{
    return setup_delay(t, "--dax-unmap-delay=0");
}

static void teardown(TestCtx *t)
{
    unsigned int i;

    if (t->fs) {
        for (i = 0; i < ARRAY_SIZE(t->vq); i++) {
            qvirtqueue_cleanup(t->fs->fs.vdev->bus, t->vq[i], &t->qs->alloc);
        }
        qvhost_user_fs_pci_free(t->fs);
    }
    if (t->qs) {
        qtest_shutdown(t->qs);
        if (t->daemon) {
            wait_daemon_exit(t);
        }
    }
    if (t->daemon) {
        kill_daemon(&t->daemon);
    }
    qtest_remove_abrt_handler(&t->daemon);
    if (t->shared) {
        g_autofree char *sub = g_build_filename(t->shared, DIR_NAME, NULL);

        rmdir(sub);
        unlink(t->file);
        rmdir(t->shared);
        unlink(t->sock);
        rmdir(t->dir);
    }
    g_free(t->file);
    g_free(t->shared);
    g_free(t->sock);
    g_free(t->dir);
}

/*
 * One FUSE request on the request queue, as two descriptors: the request
 * (header and @arg, then @arg2 if any) for the device to read, and the
 * reply (header and up to @out_len bytes) for it to write.  Returns the
 * reply's error (0 or a negative errno) and, in @out_got, how many bytes
 * of payload came back.
 *
 * virtio-fs speaks little-endian FUSE; like virtiofsd, which takes the
 * messages as they come, this assumes a little-endian host.
 */
static int fuse_call(TestCtx *t, uint32_t opcode, uint64_t nodeid,
                     const void *arg, size_t arg_len,
                     const void *arg2, size_t arg2_len,
                     void *out, size_t out_len, size_t *out_got)
{
    QVirtQueue *vq = t->vq[REQUEST_QUEUE];
    struct fuse_in_header ih = {
        .len = sizeof(ih) + arg_len + arg2_len,
        .opcode = opcode,
        .unique = ++t->unique,
        .nodeid = nodeid,
        .uid = geteuid(),
        .gid = getegid(),
        .pid = getpid(),
    };
    struct fuse_out_header oh;
    size_t in_len = sizeof(oh) + out_len;
    uint64_t req = guest_alloc(&t->qs->alloc, ih.len);
    uint64_t rep = guest_alloc(&t->qs->alloc, in_len);
    uint32_t head, used_len;

    qtest_memwrite(t->qts, req, &ih, sizeof(ih));
    if (arg_len) {
        qtest_memwrite(t->qts, req + sizeof(ih), arg, arg_len);
    }
    if (arg2_len) {
        qtest_memwrite(t->qts, req + sizeof(ih) + arg_len, arg2, arg2_len);
    }
    head = qvirtqueue_add(t->qts, vq, req, ih.len, false, true);
    qvirtqueue_add(t->qts, vq, rep, in_len, true, false);
    qvirtqueue_kick(t->qts, t->fs->fs.vdev, vq, head);
    qvirtio_wait_used_elem(t->qts, t->fs->fs.vdev, vq, head, &used_len,
                           TIMEOUT_MS * 1000);

    g_assert_cmpuint(used_len, >=, sizeof(oh));
    qtest_memread(t->qts, rep, &oh, sizeof(oh));
    g_assert_cmpuint(oh.unique, ==, ih.unique);
    g_assert_cmpuint(oh.len, ==, used_len);
    g_assert_cmpint(oh.error, <=, 0);
    if (oh.error) {
        g_assert_cmpuint(oh.len, ==, sizeof(oh));
    }
    if (out_got) {
        *out_got = oh.len - sizeof(oh);
    }
    if (out_len) {
        qtest_memread(t->qts, rep + sizeof(oh), out,
                      MIN(out_len, oh.len - sizeof(oh)));
    }
    guest_free(&t->qs->alloc, req);
    guest_free(&t->qs->alloc, rep);
    return oh.error;
}

/*
 * The asynchronous form of fuse_call(), for requests that may wait (a
 * SETLKW) and may be answered in any order, on queue @qidx (0: hiprio).
 */
static Pending fuse_submit(TestCtx *t, int qidx, uint32_t opcode,
                           uint64_t nodeid, const void *arg, size_t arg_len)
{
    QVirtQueue *vq = t->vq[qidx];
    struct fuse_in_header ih = {
        .len = sizeof(ih) + arg_len,
        .opcode = opcode,
        .unique = ++t->unique,
        .nodeid = nodeid,
        .uid = geteuid(),
        .gid = getegid(),
        .pid = getpid(),
    };
    Pending p = {
        .qidx = qidx,
        .req = guest_alloc(&t->qs->alloc, ih.len),
        .rep = guest_alloc(&t->qs->alloc, sizeof(struct fuse_out_header)),
        .unique = ih.unique,
    };

    qtest_memwrite(t->qts, p.req, &ih, sizeof(ih));
    if (arg_len) {
        qtest_memwrite(t->qts, p.req + sizeof(ih), arg, arg_len);
    }
    p.head = qvirtqueue_add(t->qts, vq, p.req, ih.len, false, true);
    qvirtqueue_add(t->qts, vq, p.rep, sizeof(struct fuse_out_header), true,
                   false);
    qvirtqueue_kick(t->qts, t->fs->fs.vdev, vq, p.head);
    return p;
}

/* Whether @p was answered, without waiting; remembers what else was */
static bool fuse_answered(TestCtx *t, Pending *p)
{
    QVirtioDevice *d = t->fs->fs.vdev;
    QVirtQueue *vq = t->vq[p->qidx];
    uint32_t head, len;
    unsigned int i;

    d->bus->get_queue_isr_status(d, vq);
    while (qvirtqueue_get_buf(t->qts, vq, &head, &len)) {
        g_assert_cmpuint(t->n_done, <, MAX_PENDING);
        t->done_head[t->n_done++] = head;
    }
    for (i = 0; i < t->n_done; i++) {
        if (t->done_head[i] == p->head) {
            t->done_head[i] = t->done_head[--t->n_done];
            return true;
        }
    }
    return false;
}

/* Waits for the reply to @p; returns its error (no payload expected) */
static int fuse_wait(TestCtx *t, Pending *p)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    struct fuse_out_header oh;

    while (!fuse_answered(t, p)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    qtest_memread(t->qts, p->rep, &oh, sizeof(oh));
    g_assert_cmpuint(oh.unique, ==, p->unique);
    g_assert_cmpuint(oh.len, ==, sizeof(oh));
    guest_free(&t->qs->alloc, p->req);
    guest_free(&t->qs->alloc, p->rep);
    return oh.error;
}

static int fuse_call_async(TestCtx *t, int qidx, uint32_t opcode,
                           uint64_t nodeid, const void *arg, size_t arg_len)
{
    Pending p = fuse_submit(t, qidx, opcode, nodeid, arg, arg_len);

    return fuse_wait(t, &p);
}

static void fuse_init(TestCtx *t)
{
    struct fuse_init_in in = {
        .major = FUSE_KERNEL_VERSION,
        .minor = FUSE_KERNEL_MINOR_VERSION,
        .max_readahead = 128 * KiB,
        .flags = FUSE_MAP_ALIGNMENT | FUSE_INIT_EXT | FUSE_ASYNC_READ |
                 FUSE_MAX_PAGES,
        .flags2 = FUSE_HAS_INODE_DAX >> 32,
    };
    struct fuse_init_out out;
    size_t got;

    g_assert_cmpint(fuse_call(t, FUSE_INIT, 0, &in, sizeof(in), NULL, 0,
                              &out, sizeof(out), &got), ==, 0);
    g_assert_cmpuint(got, ==, sizeof(out));
    g_assert_cmpuint(out.major, ==, FUSE_KERNEL_VERSION);
    /*
     * The daemon announces its own minor, which may be newer than these
     * headers' (both sides then speak the smaller): only one too old for
     * DAX (7.31) is wrong.
     */
    g_assert_cmpuint(out.minor, >=, 31);
    g_assert_cmphex(out.flags & FUSE_MAP_ALIGNMENT, ==, FUSE_MAP_ALIGNMENT);
    /*
     * The guest aligns every moffset and foffset to 1 << map_alignment
     * and maps in 2 MiB ranges: the daemon cannot ask for more.
     */
    g_assert_cmpuint(out.map_alignment, >=, 12);
    g_assert_cmpuint(out.map_alignment, <=, 21);
}

static uint64_t fuse_lookup(TestCtx *t, const char *name, uint64_t size)
{
    struct fuse_entry_out e;
    size_t got;

    g_assert_cmpint(fuse_call(t, FUSE_LOOKUP, FUSE_ROOT_ID, name,
                              strlen(name) + 1, NULL, 0, &e, sizeof(e), &got),
                    ==, 0);
    g_assert_cmpuint(got, ==, sizeof(e));
    g_assert_cmpuint(e.nodeid, !=, 0);
    g_assert_cmpuint(e.nodeid, !=, FUSE_ROOT_ID);
    if (size != UINT64_MAX) {
        g_assert_cmpuint(e.attr.size, ==, size);
        g_assert_true(S_ISREG(e.attr.mode));
    }
    return e.nodeid;
}

static uint64_t fuse_open(TestCtx *t, uint64_t nodeid, uint32_t flags)
{
    struct fuse_open_in in = { .flags = flags };
    struct fuse_open_out out;
    size_t got;

    g_assert_cmpint(fuse_call(t, FUSE_OPEN, nodeid, &in, sizeof(in), NULL, 0,
                              &out, sizeof(out), &got), ==, 0);
    g_assert_cmpuint(got, ==, sizeof(out));
    return out.fh;
}

static int setupmapping(TestCtx *t, uint64_t nodeid, uint64_t fh,
                        uint64_t foffset, uint64_t len, uint64_t flags,
                        uint64_t moffset)
{
    struct fuse_setupmapping_in in = {
        .fh = fh,
        .foffset = foffset,
        .len = len,
        .flags = flags,
        .moffset = moffset,
    };

    return fuse_call(t, FUSE_SETUPMAPPING, nodeid, &in, sizeof(in), NULL, 0,
                     NULL, 0, NULL);
}

static int removemapping(TestCtx *t, uint64_t nodeid, uint64_t moffset,
                         uint64_t len)
{
    struct fuse_removemapping_in in = { .count = 1 };
    struct fuse_removemapping_one one = { .moffset = moffset, .len = len };

    return fuse_call(t, FUSE_REMOVEMAPPING, nodeid, &in, sizeof(in),
                     &one, sizeof(one), NULL, 0, NULL);
}

/* INIT, LOOKUP and OPEN of the pattern file; returns its nodeid */
static uint64_t open_pattern(TestCtx *t, uint32_t open_flags, uint64_t *fh)
{
    uint64_t nodeid;

    fuse_init(t);
    nodeid = fuse_lookup(t, FILE_NAME, FILE_SIZE);
    *fh = fuse_open(t, nodeid, open_flags);
    return nodeid;
}

static uint64_t bar_readq(TestCtx *t, uint64_t offset)
{
    return qtest_readq(t->qts, CACHE_BAR_ADDR + offset);
}

/* The window at @moffset shows @len bytes of the file from @foffset */
static void assert_window_shows_file(TestCtx *t, uint64_t moffset,
                                     uint64_t foffset, uint64_t len)
{
    g_autofree uint64_t *buf = g_malloc(len);
    uint64_t i;

    qtest_memread(t->qts, CACHE_BAR_ADDR + moffset, buf, len);
    for (i = 0; i < len / 8; i++) {
        if (le64_to_cpu(buf[i]) != pattern_word(foffset + i * 8)) {
            g_assert_cmphex(le64_to_cpu(buf[i]), ==,
                            pattern_word(foffset + i * 8));
        }
    }
}

static void assert_window_zero(TestCtx *t, uint64_t moffset, uint64_t len)
{
    g_autofree uint8_t *buf = g_malloc(len);

    qtest_memread(t->qts, CACHE_BAR_ADDR + moffset, buf, len);
    g_assert_true(buffer_is_zero(buf, len));
}

/* How many of QEMU's mappings are of the shared file */
static unsigned int count_maps(TestCtx *t)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/maps",
                                            qtest_pid(t->qts));
    g_autofree char *maps = NULL;
    g_auto(GStrv) lines = NULL;
    unsigned int n = 0;
    char **l;

    g_assert_true(g_file_get_contents(path, &maps, NULL, NULL));
    lines = g_strsplit(maps, "\n", -1);
    for (l = lines; *l; l++) {
        if (g_str_has_suffix(*l, t->file)) {
            n++;
        }
    }
    return n;
}

static void wait_no_maps(TestCtx *t)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    while (count_maps(t)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        /* A qtest round trip lets QEMU's main loop run */
        qtest_readb(t->qts, 0);
        g_usleep(10 * 1000);
    }
}

/* Bytes of QEMU's mappings of the shared file @name */
static uint64_t mapped_bytes(TestCtx *t, const char *name)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/maps",
                                            qtest_pid(t->qts));
    g_autofree char *suffix = g_strdup_printf("/%s", name);
    g_autofree char *maps = NULL;
    g_auto(GStrv) lines = NULL;
    uint64_t n = 0, start, end;
    char **l;

    g_assert_true(g_file_get_contents(path, &maps, NULL, NULL));
    lines = g_strsplit(maps, "\n", -1);
    for (l = lines; *l; l++) {
        if (g_str_has_suffix(*l, suffix) &&
            sscanf(*l, "%" SCNx64 "-%" SCNx64, &start, &end) == 2) {
            n += end - start;
        }
    }
    return n;
}

/* @len bytes of the pattern from @offset, as the file has them */
static uint64_t *pattern_bytes(uint64_t offset, uint64_t len)
{
    uint64_t *buf = g_malloc(len);
    uint64_t i;

    for (i = 0; i < len / 8; i++) {
        buf[i] = cpu_to_le64(pattern_word(offset + i * 8));
    }
    return buf;
}

static uint64_t fuse_getattr_size(TestCtx *t, uint64_t nodeid)
{
    struct fuse_getattr_in in = { };
    struct fuse_attr_out out;
    size_t got;

    g_assert_cmpint(fuse_call(t, FUSE_GETATTR, nodeid, &in, sizeof(in),
                              NULL, 0, &out, sizeof(out), &got), ==, 0);
    g_assert_cmpuint(got, ==, sizeof(out));
    return out.attr.size;
}

/* The window at @moffset shows the pattern up to @size, then zeros */
static void assert_window_file_then_zero(TestCtx *t, uint64_t moffset,
                                         uint64_t size, uint64_t len)
{
    g_autofree uint8_t *buf = g_malloc(len);
    g_autofree uint64_t *want = pattern_bytes(0, size);

    /*
     * qtest's memory accesses run in QEMU's main loop thread, which
     * blocks SIGBUS: a page of a file mapping past its end kills QEMU
     * there, where a vCPU thread would have its fault fixed up.
     */
    qtest_memread(t->qts, CACHE_BAR_ADDR + moffset, buf, len);
    g_assert_cmpmem(buf, size, want, size);
    g_assert_true(buffer_is_zero(buf + size, len - size));
}

#define SMALL_NAME "small"
#define SMALL_SIZE 4200         /* one page and a bit */
#define GROW_BY (64 * KiB)

/*
 * The guest maps a whole 2 MiB range of a small file, as Linux does.
 * QEMU must never hold a page of the file past its end: whatever touches
 * such a page (here QEMU's main loop) would get SIGBUS.  The daemon maps
 * the file only up to the page that holds its end, and when the file
 * grows, through a guest write or on the host, it maps more before the
 * guest can learn the new size: the guest then reads the new data
 * through the range it already has, never zeros.
 */
static void test_map_past_eof(void)
{
    g_autofree char *small = NULL;
    g_autofree char *got_data = NULL;
    g_autofree uint64_t *data = pattern_bytes(0, SMALL_SIZE + 2 * GROW_BY);
    gsize got_len;
    struct fuse_write_in win = { };
    struct fuse_write_out wout;
    uint64_t nodeid, fh, size;
    size_t got;
    int fd;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    small = g_build_filename(t.shared, SMALL_NAME, NULL);
    g_assert_true(g_file_set_contents(small, (char *)data, SMALL_SIZE,
                                      NULL));
    fuse_init(&t);
    nodeid = fuse_lookup(&t, SMALL_NAME, SMALL_SIZE);
    fh = fuse_open(&t, nodeid, O_RDWR);

    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ |
                                 FUSE_SETUPMAPPING_FLAG_WRITE, 0), ==, 0);
    g_assert_cmpuint(mapped_bytes(&t, SMALL_NAME), ==, 2 * 4096);
    assert_window_file_then_zero(&t, 0, SMALL_SIZE, TWO_MB);
    /* A store past the end goes to the window's own page, not the file */
    qtest_writeq(t.qts, CACHE_BAR_ADDR + MiB, 0x1234);
    g_assert_cmphex(bar_readq(&t, MiB), ==, 0x1234);
    g_assert_true(g_file_get_contents(small, &got_data, &got_len, NULL));
    g_assert_cmpuint(got_len, ==, SMALL_SIZE);
    qtest_writeq(t.qts, CACHE_BAR_ADDR + MiB, 0);

    /* The guest appends through FUSE_WRITE, then reads the new tail */
    win.fh = fh;
    win.offset = SMALL_SIZE;
    win.size = GROW_BY;
    g_assert_cmpint(fuse_call(&t, FUSE_WRITE, nodeid, &win, sizeof(win),
                              (uint8_t *)data + SMALL_SIZE, GROW_BY,
                              &wout, sizeof(wout), &got), ==, 0);
    g_assert_cmpuint(wout.size, ==, GROW_BY);
    size = SMALL_SIZE + GROW_BY;
    g_assert_cmpuint(mapped_bytes(&t, SMALL_NAME), ==,
                     ROUND_UP(size, 4096));
    assert_window_file_then_zero(&t, 0, size, TWO_MB);

    /* The file grows on the host: the guest learns it from GETATTR */
    fd = open(small, O_WRONLY | O_APPEND);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, (uint8_t *)data + size, GROW_BY), ==, GROW_BY);
    close(fd);
    size += GROW_BY;
    g_assert_cmpuint(fuse_getattr_size(&t, nodeid), ==, size);
    g_assert_cmpuint(mapped_bytes(&t, SMALL_NAME), ==,
                     ROUND_UP(size, 4096));
    assert_window_file_then_zero(&t, 0, size, TWO_MB);

    /* A range wholly past the end maps nothing, and still unmaps */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, TWO_MB, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, TWO_MB), ==, 0);
    g_assert_cmpuint(mapped_bytes(&t, SMALL_NAME), ==,
                     ROUND_UP(size, 4096));
    assert_window_zero(&t, TWO_MB, TWO_MB);
    g_assert_cmpint(removemapping(&t, nodeid, TWO_MB, TWO_MB), ==, 0);
    g_assert_cmpint(removemapping(&t, nodeid, 0, TWO_MB), ==, 0);
    g_assert_cmpuint(mapped_bytes(&t, SMALL_NAME), ==, 0);

    unlink(small);
    teardown(&t);
}

static void test_init_lookup_open(void)
{
    char tag[QVIRTIO_FS_TAG_LEN + 1];
    uint64_t fh;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    qvhost_user_fs_get_tag(&t.fs->fs, tag);
    g_assert_cmpstr(tag, ==, "myfs");
    open_pattern(&t, O_RDONLY, &fh);
    g_assert_cmpint(fuse_call(&t, FUSE_LOOKUP, FUSE_ROOT_ID, "missing", 8,
                              NULL, 0, NULL, 0, NULL), ==, -ENOENT);
    /* Nothing is mapped until the guest asks */
    g_assert_cmpuint(count_maps(&t), ==, 0);
    assert_window_zero(&t, 0, TWO_MB);
    teardown(&t);
}

static void test_map_read_remove(void)
{
    uint64_t nodeid, fh;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDONLY, &fh);

    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, 0), ==, 0);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, TWO_MB, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    assert_window_shows_file(&t, 0, 0, FILE_SIZE);
    assert_window_zero(&t, FILE_SIZE, TWO_MB);

    g_assert_cmpint(removemapping(&t, nodeid, TWO_MB, TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 1);
    assert_window_zero(&t, TWO_MB, TWO_MB);
    assert_window_shows_file(&t, 0, 0, TWO_MB);

    /* The same file range may sit at several places in the window */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ,
                                 CACHE_SIZE - TWO_MB), ==, 0);
    assert_window_shows_file(&t, CACHE_SIZE - TWO_MB, 0, TWO_MB);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    teardown(&t);
}

static void test_map_write(void)
{
    const uint64_t word = 0x0123456789abcdefULL;
    uint64_t nodeid, fh, val;
    int fd;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDWR, &fh);
    fd = open(t.file, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);

    /* A writable mapping: guest stores land in the host file */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, TWO_MB, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ |
                                 FUSE_SETUPMAPPING_FLAG_WRITE, 0), ==, 0);
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 4096, word);
    g_assert_cmpint(pread(fd, &val, 8, TWO_MB + 4096), ==, 8);
    g_assert_cmphex(le64_to_cpu(val), ==, word);

    /*
     * What the guest does on the first write to a range it has read:
     * the same SETUPMAPPING again, now writable, over the read-only one.
     */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, 8 * MiB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 8 * MiB + 64), ==, pattern_word(64));
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ |
                                 FUSE_SETUPMAPPING_FLAG_WRITE, 8 * MiB),
                    ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    g_assert_cmphex(bar_readq(&t, 8 * MiB + 64), ==, pattern_word(64));
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 8 * MiB + 64, ~word);
    g_assert_cmpint(pread(fd, &val, 8, 64), ==, 8);
    g_assert_cmphex(le64_to_cpu(val), ==, ~word);

    close(fd);
    teardown(&t);
}

static void test_invalid_mappings(void)
{
    const uint64_t rd = FUSE_SETUPMAPPING_FLAG_READ;
    uint64_t nodeid, dir, fh;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDONLY, &fh);
    dir = fuse_lookup(&t, DIR_NAME, UINT64_MAX);

    /* Beyond the window, or running off its end */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, rd, CACHE_SIZE),
                    <, 0);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, 2 * TWO_MB, rd,
                                 CACHE_SIZE - TWO_MB), <, 0);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, rd,
                                 -TWO_MB), <, 0);
    /* Unaligned window or file offset, unaligned or empty length */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, rd, 512),
                    ==, -EINVAL);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 512, TWO_MB, rd, 0),
                    ==, -EINVAL);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB - 512, rd, 0),
                    ==, -EINVAL);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, 0, rd, 0), ==, -EINVAL);
    /* Unknown flags */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, 1ULL << 40, 0),
                    ==, -EINVAL);
    /*
     * Bad file handles: the guest sends none (fh is -1), so the daemon
     * maps the inode, and a node it does not know or a directory fails.
     */
    g_assert_cmpint(setupmapping(&t, 0xdead, fh, 0, TWO_MB, rd, 0),
                    ==, -ENOENT);
    g_assert_cmpint(setupmapping(&t, dir, NO_FH, 0, TWO_MB, rd, 0),
                    ==, -EINVAL);
    g_assert_cmpuint(count_maps(&t), ==, 0);

    /* A removal that cuts through a mapping */
    g_assert_cmpint(setupmapping(&t, nodeid, NO_FH, 0, TWO_MB, rd, 0), ==, 0);
    g_assert_cmpint(removemapping(&t, nodeid, 0, 4096), ==, -EINVAL);
    g_assert_cmpint(setupmapping(&t, nodeid, NO_FH, 0, 4096, rd, 4096),
                    ==, -EINVAL);
    g_assert_cmpuint(count_maps(&t), ==, 1);

    /* The daemon and QEMU still serve the guest */
    assert_window_shows_file(&t, 0, 0, TWO_MB);
    g_assert_cmpint(setupmapping(&t, nodeid, NO_FH, TWO_MB, TWO_MB, rd,
                                 TWO_MB), ==, 0);
    assert_window_shows_file(&t, TWO_MB, TWO_MB, TWO_MB);
    g_assert_cmpint(removemapping(&t, nodeid, 0, 2 * TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 0);
    teardown(&t);
}

static void test_destroy_drops_mappings(void)
{
    uint64_t nodeid, fh;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDWR, &fh);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, 0), ==, 0);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, TWO_MB, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ |
                                 FUSE_SETUPMAPPING_FLAG_WRITE, 16 * MiB),
                    ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);

    g_assert_cmpint(fuse_call(&t, FUSE_DESTROY, 0, NULL, 0, NULL, 0,
                              NULL, 0, NULL), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 0);
    assert_window_zero(&t, 0, TWO_MB);
    assert_window_zero(&t, 16 * MiB, TWO_MB);

    /* A new session starts from an empty window */
    nodeid = open_pattern(&t, O_RDONLY, &fh);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, 0), ==, 0);
    assert_window_shows_file(&t, 0, 0, TWO_MB);
    teardown(&t);
}

/*
 * With an unmap delay, a removed range stays mapped until a map takes the
 * slot over, in one replace, or the delay runs out.
 */
static void test_lazy_unmap(void)
{
    const uint64_t rd = FUSE_SETUPMAPPING_FLAG_READ;
    uint64_t nodeid, fh;
    gint64 removed;
    TestCtx t;

    if (!setup_delay(&t, "--dax-unmap-delay=500")) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDONLY, &fh);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, rd, 0), ==, 0);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, TWO_MB, TWO_MB, rd, TWO_MB),
                    ==, 0);

    g_assert_cmpint(removemapping(&t, nodeid, TWO_MB, TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    assert_window_shows_file(&t, TWO_MB, TWO_MB, TWO_MB);

    /* The slot reused for the head of the file: replaced, not added */
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB, rd, TWO_MB),
                    ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    assert_window_shows_file(&t, TWO_MB, 0, TWO_MB);

    removed = g_get_monotonic_time();
    g_assert_cmpint(removemapping(&t, nodeid, 0, 2 * TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 2);
    wait_no_maps(&t);
    g_assert_cmpint(g_get_monotonic_time() - removed, >=, 500 * 1000);
    assert_window_zero(&t, 0, 2 * TWO_MB);
    teardown(&t);
}

static void test_daemon_exit_drops_mappings(void)
{
    uint64_t nodeid, fh;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    nodeid = open_pattern(&t, O_RDONLY, &fh);
    g_assert_cmpint(setupmapping(&t, nodeid, fh, 0, TWO_MB,
                                 FUSE_SETUPMAPPING_FLAG_READ, 0), ==, 0);
    g_assert_cmpuint(count_maps(&t), ==, 1);

    /* A daemon that dies cannot clean up: QEMU must */
    kill_daemon(&t.daemon);
    wait_no_maps(&t);
    assert_window_zero(&t, 0, TWO_MB);
    teardown(&t);
}

/*
 * Wait until a lock request on the pattern file waits in the host's
 * kernel: the proof that the daemon has taken a SETLKW and is blocked in
 * it, where a pause would only make that likely.  /proc/locks lists a
 * blocked request as "N: -> CLASS MODE TYPE PID MAJ:MIN:INODE START END".
 */
static void wait_lock_blocked_in_kernel(TestCtx *t)
{
    g_autofree char *path = g_build_filename(t->shared, FILE_NAME, NULL);
    gint64 deadline = g_get_monotonic_time() + 30 * G_TIME_SPAN_SECOND;
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    for (;;) {
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
                unsigned long long ino;
                char end;

                if (sscanf(tok[j], "%x:%x:%llu%c", &maj, &min, &ino,
                           &end) == 3 && ino == st.st_ino) {
                    return;
                }
            }
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static struct fuse_lk_in lock_arg(uint64_t fh, uint64_t owner, uint32_t type,
                                  uint64_t start, uint64_t end)
{
    return (struct fuse_lk_in) {
        .fh = fh,
        .owner = owner,
        .lk = { .start = start, .end = end, .type = type },
    };
}

/*
 * Lock waits (SETLKW) run where they hold up nothing: not on hiprio, not
 * in the request queue's thread; and there is a bound on them.
 */
static void test_lock_waits(void)
{
    Pending waiters[64], p;
    struct fuse_lk_in lk;
    struct fuse_access_in ain = { .mask = R_OK };
    uint64_t ino, fh;
    unsigned int i;
    TestCtx t;

    if (!setup(&t)) {
        teardown(&t);
        return;
    }
    ino = open_pattern(&t, O_RDWR, &fh);
    lk = lock_arg(fh, 1, F_WRLCK, 0, 4095);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLK, ino, &lk,
                                    sizeof(lk)), ==, 0);

    /* On hiprio it is refused at once instead of blocking the queue */
    lk = lock_arg(fh, 2, F_RDLCK, 0, 4095);
    g_assert_cmpint(fuse_call_async(&t, 0, FUSE_SETLKW, ino, &lk, sizeof(lk)),
                    ==, -EINVAL);

    /* As many waiters as virtiofsd keeps... */
    for (i = 0; i < G_N_ELEMENTS(waiters); i++) {
        lk = lock_arg(fh, 100 + i, F_RDLCK, 0, 4095);
        waiters[i] = fuse_submit(&t, REQUEST_QUEUE, FUSE_SETLKW, ino, &lk,
                                 sizeof(lk));
    }
    /* ...and the same queue still serves everything else */
    for (i = 0; i < 4; i++) {
        g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_ACCESS, ino,
                                        &ain, sizeof(ain)), ==, 0);
    }
    /* Past the bound, a taken lock fails instead of waiting; a free one */
    lk = lock_arg(fh, 200, F_RDLCK, 0, 4095);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLKW, ino, &lk,
                                    sizeof(lk)), ==, -ENOLCK);
    lk = lock_arg(fh, 201, F_WRLCK, 8192, 8192);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLKW, ino, &lk,
                                    sizeof(lk)), ==, 0);
    for (i = 0; i < G_N_ELEMENTS(waiters); i++) {
        g_assert_false(fuse_answered(&t, &waiters[i]));
    }

    /* Once the lock goes, every waiter gets its (shared) lock */
    lk = lock_arg(fh, 1, F_UNLCK, 0, 4095);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLK, ino, &lk,
                                    sizeof(lk)), ==, 0);
    for (i = 0; i < G_N_ELEMENTS(waiters); i++) {
        g_assert_cmpint(fuse_wait(&t, &waiters[i]), ==, 0);
    }
    /* The bound counts waiters, not waits that ever were: this one waits */
    lk = lock_arg(fh, 1, F_WRLCK, 16384, 16384);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLK, ino, &lk,
                                    sizeof(lk)), ==, 0);
    lk = lock_arg(fh, 300, F_RDLCK, 16384, 16384);
    p = fuse_submit(&t, REQUEST_QUEUE, FUSE_SETLKW, ino, &lk, sizeof(lk));
    wait_lock_blocked_in_kernel(&t);
    g_assert_false(fuse_answered(&t, &p));
    lk = lock_arg(fh, 1, F_UNLCK, 16384, 16384);
    g_assert_cmpint(fuse_call_async(&t, REQUEST_QUEUE, FUSE_SETLK, ino, &lk,
                                    sizeof(lk)), ==, 0);
    g_assert_cmpint(fuse_wait(&t, &p), ==, 0);
    teardown(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    if (!qtest_has_device("vhost-user-fs-pci")) {
        g_test_skip("vhost-user-fs-pci is not built in");
        return g_test_run();
    }

    qtest_add_func("/vhost-user-fs-daemon/init-lookup-open",
                   test_init_lookup_open);
    qtest_add_func("/vhost-user-fs-daemon/window/map-read-remove",
                   test_map_read_remove);
    qtest_add_func("/vhost-user-fs-daemon/window/map-write-upgrade",
                   test_map_write);
    qtest_add_func("/vhost-user-fs-daemon/window/invalid-requests",
                   test_invalid_mappings);
    qtest_add_func("/vhost-user-fs-daemon/window/destroy-drops-mappings",
                   test_destroy_drops_mappings);
    qtest_add_func("/vhost-user-fs-daemon/window/daemon-exit-drops-mappings",
                   test_daemon_exit_drops_mappings);
    qtest_add_func("/vhost-user-fs-daemon/window/lazy-unmap",
                   test_lazy_unmap);
    qtest_add_func("/vhost-user-fs-daemon/window/never-past-eof",
                   test_map_past_eof);
    qtest_add_func("/vhost-user-fs-daemon/lock-waits", test_lock_waits);

    return g_test_run();
}
