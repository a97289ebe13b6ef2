/*
 * virtiofsd fuzzer: FUSE requests from a hostile guest, straight into the
 * dispatch layer (vfsd_process_request), without a VM or vhost-user.
 *
 * An input is one guest session:
 *
 *   byte 0     configuration: bits 0-1 cache mode, bit 2 read-only,
 *              bit 3 writeback (clear: --posix-acl instead), bits 4-5
 *              DAX policy, bit 6 the front-end offers SHMEM_REPLACE,
 *              bit 7 no DAX window at all
 *   records    u16 len (LE), u8 seg, u8 out, then len bytes of request
 *              (a FUSE header and its arguments, lying at will).
 *              seg bits 0-6: both directions are cut in pieces of that
 *              many bytes (0: one piece); bit 7: odd pieces go through
 *              the memory access callback, as a buffer inside the DAX
 *              window does.  seg 0x80 exactly (one piece, so none odd):
 *              every piece goes through the callback, as the pieces of
 *              a request popped before the memory table changed do
 *              (vhost-dev.c reaches them by guest address then).
 *              out: room for the reply (see out_size()).
 *
 * Every session has --uid-map/--gid-map: guest ids 0-65535 are the same
 * on the host (so the seed corpus means what it did before), the next
 * 65536 are host 200000 on, the rest are unmapped; ids and ACL values
 * from the guest all go through the translation.
 *
 * Unless the first request is an INIT, the session starts with the INIT
 * a Linux 6.12 guest sends, so that single requests get past it.
 * Every input starts from a fresh VfsdFs and a freshly populated scratch
 * directory: nodeids (from 2) and file handles (from 1) are deterministic,
 * which the seed corpus relies on.
 *
 * Besides the sanitizers, the harness aborts on:
 * - an open of anything outside the scratch directory, or of a device
 *   node, FIFO or socket (CVE-2020-35517); checked before the open, so
 *   the fuzzer never actually opens one;
 * - fds the daemon holds that its own accounting (fds_open, which bounds
 *   what a guest can make it hold, CVE-2020-10717) does not know of, or
 *   the other way round, after every request and after the session;
 * - a reply that breaks the transport's rules (length, error range);
 * - a byte of a request read twice through the memory access callback:
 *   the guest could have changed it in between (a double fetch), so a
 *   check could pass on one value and the work be done on another.
 *
 * What makes the daemon's confinement inert here: no sandbox and no
 * seccomp filter are set up (sandbox.c and seccomp-filter.c are not linked);
 * instead the process gets a private mount namespace with a small tmpfs
 * as the scratch directory when it can (as root), and RLIMIT_FSIZE
 * bounds file growth in any case.  SETLKW is skipped: the daemon runs it
 * where it may block, and two lock owners here would deadlock.
 *
 * While an input runs the working directory is /proc/self/fd, as in the
 * daemon (see fs-xattr.c): give libFuzzer an absolute -artifact_prefix.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "broker.h"
#include "creds.h"
#include "dax.h"
#include "fs.h"
#include "inode.h"
#include "server.h"
#include "fuzz-request.h"

/* fds_max becomes this minus the daemon's reserve (64): 96, reachable */
#define FUZZ_NOFILE 160
#define FUZZ_FSIZE (16 * 1024 * 1024)
#define FUZZ_TMPFS_OPTS "size=48m,nr_inodes=4096,mode=0755"
#define FUZZ_MAX_RECORDS 256
/* The device's cache window */
#define FUZZ_WINDOW (64 * 1024 * 1024ULL)
/* The front-end fails unmaps that start here (the mappings go anyway) */
#define FUZZ_UNMAP_FAILS (32 * 1024 * 1024ULL)
#define FUZZ_UNMAP_FAILS_LEN (2 * 1024 * 1024ULL)
#define FUZZ_MAX_MAPS 1024

static char scratch[PATH_MAX];
/* Outside the scratch directory, reachable by the "escape" symlink */
static char sentinel[PATH_MAX];
static struct stat sentinel_st;
static size_t scratch_len;
static int scratch_fd = -1;
/* libFuzzer's paths may be relative: its directory is restored after */
static int cwd_fd = -1;
static bool in_session;

static G_NORETURN G_GNUC_PRINTF(1, 2) void fuzz_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz-request: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

static bool fd_path(int fd, char *buf, size_t size)
{
    char link[64];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, buf, size - 1);
    if (n < 0) {
        return false;
    }
    buf[n] = '\0';
    return true;
}

static bool in_scratch(const char *p)
{
    return !strncmp(p, scratch, scratch_len) &&
           (p[scratch_len] == '/' || p[scratch_len] == '\0' ||
            p[scratch_len] == ' ');
}

/* The guard on every open the daemon makes */
static int guarded_openat(bool is64, int dirfd, const char *path, int flags,
                          mode_t mode)
{
    struct stat st;
    char where[PATH_MAX + 32];
    int fd;

    if (!in_session || !strcmp(path, "/proc/self/fd")) {
        goto open;
    }
    /* O_CREAT | O_EXCL never opens what is there */
    if (!(flags & O_PATH) &&
        (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL) &&
        fstatat(dirfd, path, &st, (flags & O_NOFOLLOW) ?
                AT_SYMLINK_NOFOLLOW : 0) == 0 &&
        !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
        !((flags & O_NOFOLLOW) && S_ISLNK(st.st_mode))) {
        fuzz_fail("the daemon opens a file of type 0%o (\"%s\", flags 0%o)",
                  st.st_mode & S_IFMT, path, flags);
    }
open:
    fd = is64 ? __real_openat64(dirfd, path, flags, mode) :
                __real_openat(dirfd, path, flags, mode);
    if (fd >= 0 && in_session) {
        if (!fd_path(fd, where, sizeof(where))) {
            fuzz_fail("cannot tell what fd %d is", fd);
        }
        if (!in_scratch(where)) {
            fuzz_fail("the daemon opened \"%s\" outside %s", where, scratch);
        }
    }
    return fd;
}

int __wrap_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    va_list ap;

    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    return guarded_openat(false, dirfd, path, flags, mode);
}

int __wrap_openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    va_list ap;

    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    return guarded_openat(true, dirfd, path, flags, mode);
}

/* A front-end that enforces the vhost-user SHMEM rules of the contract */
typedef struct FuzzMap {
    uint64_t start, len;
} FuzzMap;

typedef struct FuzzFrontend {
    FuzzMap maps[FUZZ_MAX_MAPS];
    unsigned int n;
    bool replace;
} FuzzFrontend;

static FuzzFrontend frontend;

static bool fe_available(void *opaque)
{
    return true;
}

static bool fe_can_replace(void *opaque)
{
    return frontend.replace;
}

static bool fe_map(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                   uint64_t len, uint64_t flags, int fd)
{
    FuzzFrontend *f = &frontend;
    struct stat st;
    unsigned int i;
    int fl;

    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        fuzz_fail("SHMEM_MAP of an fd that is not a regular file");
    }
    fl = fcntl(fd, F_GETFL);
    if ((flags & VFSD_DAX_MAP_RW) && (fl & O_ACCMODE) != O_RDWR) {
        fuzz_fail("writable SHMEM_MAP of an fd opened 0%o", fl);
    }
    if (flags & ~(VFSD_DAX_MAP_RW | VFSD_DAX_MAP_REPLACE) ||
        ((flags & VFSD_DAX_MAP_REPLACE) && !f->replace)) {
        fuzz_fail("SHMEM_MAP with flags 0x%" G_GINT64_MODIFIER "x", flags);
    }
    if (!len || shm_offset + len < shm_offset ||
        shm_offset + len > FUZZ_WINDOW) {
        return false;
    }
    for (i = 0; i < f->n; i++) {
        FuzzMap *o = &f->maps[i];

        if (o->start < shm_offset + len && shm_offset < o->start + o->len &&
            (!(flags & VFSD_DAX_MAP_REPLACE) || o->start < shm_offset ||
             o->start + o->len > shm_offset + len)) {
            return false;
        }
    }
    for (i = 0; i < f->n;) {
        FuzzMap *o = &f->maps[i];

        if (o->start < shm_offset + len && shm_offset < o->start + o->len) {
            *o = f->maps[--f->n];
        } else {
            i++;
        }
    }
    if (f->n == FUZZ_MAX_MAPS) {
        return false;
    }
    f->maps[f->n].start = shm_offset;
    f->maps[f->n].len = len;
    f->n++;
    return true;
}

/* Must cover whole mappings exactly, one or several adjacent ones */
static bool fe_unmap(void *opaque, uint64_t shm_offset, uint64_t len)
{
    FuzzFrontend *f = &frontend;
    uint64_t covered = 0;
    unsigned int i;

    if (shm_offset + len < shm_offset) {
        return false;
    }
    for (i = 0; i < f->n; i++) {
        FuzzMap *o = &f->maps[i];

        if (o->start < shm_offset + len && shm_offset < o->start + o->len) {
            if (o->start < shm_offset ||
                o->start + o->len > shm_offset + len) {
                return false;
            }
            covered += o->len;
        }
    }
    if (covered != len) {
        return false;
    }
    for (i = 0; i < f->n;) {
        FuzzMap *o = &f->maps[i];

        if (o->start >= shm_offset && o->start < shm_offset + len) {
            *o = f->maps[--f->n];
        } else {
            i++;
        }
    }
    /* The daemon's error paths, for a front-end that failed midway */
    return shm_offset < FUZZ_UNMAP_FAILS ||
           shm_offset >= FUZZ_UNMAP_FAILS + FUZZ_UNMAP_FAILS_LEN;
}

/* The fake front-end as a DAX back-end; a harness copies it to add to it */
static const VfsdDaxBackend fe_backend = {
    .available = fe_available,
    .can_replace = fe_can_replace,
    .map = fe_map,
    .unmap = fe_unmap,
};

/* The request being run, for the double-fetch check */
static const uint8_t *req_base;
static size_t req_len;
static uint8_t *req_reads;

static bool fuzz_mem(void *opaque, uint64_t addr, void *buf, size_t len,
                     bool is_write)
{
    const uint8_t *p = (const uint8_t *)(uintptr_t)addr;
    size_t i;

    if (!is_write && req_reads) {
        for (i = 0; i < len; i++) {
            if (p + i >= req_base && p + i < req_base + req_len &&
                ++req_reads[p + i - req_base] > 1) {
                fuzz_fail("byte %zu of the request was read twice",
                          (size_t)(p + i - req_base));
            }
        }
    }
    /* Here a "guest address" is a host pointer into the harness's copy */
    if (is_write) {
        memcpy((void *)(uintptr_t)addr, buf, len);
    } else {
        memcpy(buf, (void *)(uintptr_t)addr, len);
    }
    return true;
}

/* Calls @fn on each open fd of the process */
static void for_each_fd(void (*fn)(int fd, const char *when),
                        const char *when)
{
    char buf[4096];
    long got, pos;
    int dfd = __real_openat(AT_FDCWD, "/proc/self/fd",
                            O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (dfd < 0) {
        fuzz_fail("cannot open /proc/self/fd: %s", strerror(errno));
    }
    while ((got = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
        for (pos = 0; pos < got;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + pos);

            if (d->name[0] != '.' && atoi(d->name) != dfd) {
                fn(atoi(d->name), when);
            }
            pos += d->reclen;
        }
    }
    close(dfd);
}

static unsigned int fd_count;

static void count_one_fd(int fd, const char *when)
{
    fd_count++;
}

static unsigned int count_fds(void)
{
    fd_count = 0;
    for_each_fd(count_one_fd, NULL);
    return fd_count;
}

static void put_file(int dirfd, const char *name, size_t size)
{
    char block[512];
    size_t i;
    int fd = __real_openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC,
                           0644);

    if (fd < 0) {
        fuzz_fail("cannot create %s: %s", name, strerror(errno));
    }
    for (i = 0; i < sizeof(block); i++) {
        block[i] = 'a' + i % 26;
    }
    for (i = 0; i < size && i < 16384; i += sizeof(block)) {
        if (write(fd, block, MIN(sizeof(block), size - i)) < 0) {
            fuzz_fail("cannot fill %s: %s", name, strerror(errno));
        }
    }
    if (size > 16384 && ftruncate(fd, size) < 0) {
        fuzz_fail("cannot size %s: %s", name, strerror(errno));
    }
    close(fd);
}

/*
 * What a guest finds in the shared directory, nodeids in lookup order are
 * up to the input.  "escape" points outside, to the sentinel: following
 * it is a bug (see check_sentinel()).
 */
static void populate(void)
{
    int d;

    put_file(scratch_fd, "file", 8192);
    put_file(scratch_fd, "empty", 0);
    put_file(scratch_fd, "big", 4 * 1024 * 1024);
    if (mkdirat(scratch_fd, "dir", 0755) < 0 ||
        symlinkat("file", scratch_fd, "link") < 0 ||
        symlinkat(sentinel, scratch_fd, "escape") < 0 ||
        mknodat(scratch_fd, "fifo", S_IFIFO | 0644, 0) < 0 ||
        linkat(scratch_fd, "file", scratch_fd, "hard", 0) < 0) {
        fuzz_fail("cannot populate %s: %s", scratch, strerror(errno));
    }
    d = __real_openat(scratch_fd, "dir", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || mkdirat(d, "nested", 0700) < 0) {
        fuzz_fail("cannot populate %s/dir: %s", scratch, strerror(errno));
    }
    put_file(d, "sub", 100);
    close(d);
}

/* Empties @dirfd (closed here); modes the guest set do not stop root */
static void empty_dir(int dirfd)
{
    DIR *dir = fdopendir(dirfd);
    struct dirent *de;

    if (!dir) {
        fuzz_fail("cannot list the scratch directory: %s", strerror(errno));
    }
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
            continue;
        }
        if (unlinkat(dirfd, de->d_name, 0) == 0) {
            continue;
        }
        if (errno == EISDIR || errno == EPERM) {
            int sub = __real_openat(dirfd, de->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                    O_CLOEXEC);

            if (sub >= 0) {
                empty_dir(sub);
            }
            if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) == 0) {
                continue;
            }
        }
        fuzz_fail("cannot remove %s/%s: %s", scratch, de->d_name,
                  strerror(errno));
    }
    closedir(dir);
}

static void remove_sentinel(void)
{
    unlink(sentinel);
    /* Empty by now (the last input cleaned it), or the run crashed */
    if (scratch[0]) {
        umount2(scratch, MNT_DETACH);
        rmdir(scratch);
    }
}

/* In $TMPDIR, beside the tmpfs, so it lives outside it */
static void make_sentinel(const char *tmp)
{
    g_autofree char *path = g_build_filename(tmp, "virtiofsd-fuzz-outside-"
                                             "XXXXXX", NULL);
    int fd = mkstemp(path);

    if (fd < 0 || write(fd, "outside\n", 8) != 8 ||
        fstat(fd, &sentinel_st) < 0) {
        fuzz_fail("cannot create the sentinel %s: %s", path,
                  strerror(errno));
    }
    close(fd);
    g_strlcpy(sentinel, path, sizeof(sentinel));
    atexit(remove_sentinel);
}

/* Nothing the guest did may change the file outside, not even its ctime */
static void check_sentinel(void)
{
    struct stat st;

    if (lstat(sentinel, &st) < 0 || st.st_ino != sentinel_st.st_ino ||
        st.st_mode != sentinel_st.st_mode ||
        st.st_uid != sentinel_st.st_uid || st.st_gid != sentinel_st.st_gid ||
        st.st_size != sentinel_st.st_size ||
        st.st_nlink != sentinel_st.st_nlink ||
        st.st_ctim.tv_sec != sentinel_st.st_ctim.tv_sec ||
        st.st_ctim.tv_nsec != sentinel_st.st_ctim.tv_nsec ||
        st.st_mtim.tv_sec != sentinel_st.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != sentinel_st.st_mtim.tv_nsec) {
        fuzz_fail("the file outside the shared directory (%s) changed",
                  sentinel);
    }
}

static void setup_scratch(void)
{
    const char *tmp = g_getenv("TMPDIR");
    g_autofree char *tmpl = g_build_filename(tmp ? tmp : "/tmp",
                                             "virtiofsd-fuzz-XXXXXX", NULL);
    struct rlimit fsize = { FUZZ_FSIZE, FUZZ_FSIZE };
    char *err = NULL;

    if (!mkdtemp(tmpl)) {
        fuzz_fail("mkdtemp: %s", strerror(errno));
    }
    /*
     * As root: a private mount namespace, so that the tmpfs (and with it
     * anything the guest created) disappears with the process.
     */
    if (unshare(CLONE_NEWNS) == 0 &&
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mount("virtiofsd-fuzz", tmpl, "tmpfs", MS_NOSUID,
              FUZZ_TMPFS_OPTS) == 0) {
        /* Outside, the mount point stays an empty directory */
    } else {
        fprintf(stderr, "fuzz-request: no private tmpfs (%s), using %s\n",
                strerror(errno), tmpl);
    }
    g_strlcpy(scratch, tmpl, sizeof(scratch));
    make_sentinel(tmp ? tmp : "/tmp");
    scratch_len = strlen(scratch);
    cwd_fd = __real_openat(AT_FDCWD, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd_fd < 0) {
        fuzz_fail("cannot open the working directory: %s", strerror(errno));
    }
    scratch_fd = __real_openat(AT_FDCWD, scratch,
                               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (scratch_fd < 0) {
        fuzz_fail("cannot open %s: %s", scratch, strerror(errno));
    }
    if (setrlimit(RLIMIT_FSIZE, &fsize) < 0) {
        fuzz_fail("setrlimit: %s", strerror(errno));
    }
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* As main.c: modes come from the guest, already masked */
    umask(0);
    if (!vfsd_creds_init(&err)) {
        fuzz_fail("%s", err);
    }
    vfsd_log_init(false, VFSD_LOG_ERROR);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setup_scratch();
    return 0;
}

static size_t out_size(uint8_t out)
{
    if (out == 0) {
        return 8192 + sizeof(struct fuse_out_header);
    }
    if (out == 255) {
        return 256 * 1024;
    }
    return out * 16;
}

static VfsdSeg *make_segs(uint8_t *p, size_t len, uint8_t seg,
                          unsigned int *n)
{
    size_t piece = (seg & 0x7f) ? (seg & 0x7f) : MAX(len, 1);
    VfsdSeg *segs;
    unsigned int i;

    *n = MAX((len + piece - 1) / piece, 1);
    segs = g_new0(VfsdSeg, *n);
    for (i = 0; i < *n; i++) {
        size_t off = i * piece;

        segs[i].addr = (uintptr_t)(p + off);
        segs[i].len = MIN(piece, len - MIN(len, off));
        segs[i].base = (seg == 0x80 || ((seg & 0x80) && (i & 1))) ? NULL :
                       p + off;
    }
    return segs;
}

/* @unique: what the request said, if it had a whole header */
static void check_reply(const uint8_t *out, size_t room, size_t written,
                        const uint64_t *unique)
{
    struct fuse_out_header oh;

    if (written == 0) {
        return;
    }
    if (written < sizeof(oh) || written > room) {
        fuzz_fail("reply of %zu bytes in %zu bytes of room", written, room);
    }
    memcpy(&oh, out, sizeof(oh));
    if (oh.len != written) {
        fuzz_fail("reply header says %u bytes, %zu written", oh.len,
                  written);
    }
    if (oh.error > 0 || oh.error < -4095 ||
        (oh.error && oh.len != sizeof(oh))) {
        fuzz_fail("error reply %d of %u bytes", oh.error, oh.len);
    }
    if (unique && oh.unique != *unique) {
        fuzz_fail("reply to unique %" G_GINT64_MODIFIER "u for %"
                  G_GINT64_MODIFIER "u", (uint64_t)oh.unique, *unique);
    }
}

static void send_one(VfsdFs *fs, const uint8_t *req, size_t len,
                     uint8_t seg, uint8_t out)
{
    size_t room = out_size(out);
    g_autofree uint8_t *in = g_malloc(len ? len : 1);
    g_autofree uint8_t *reply = g_malloc0(room);
    g_autofree VfsdSeg *in_segs = NULL, *out_segs = NULL;
    struct fuse_in_header h = { 0 };
    VfsdReqHead head;
    unsigned int n_in, n_out;
    VfsdBuf ib, ob;
    size_t written;

    memcpy(in, req, len);
    in_segs = make_segs(in, len, seg, &n_in);
    out_segs = make_segs(reply, room, seg, &n_out);
    vfsd_buf_init(&ib, in_segs, len ? n_in : 0, fuzz_mem, NULL);
    vfsd_buf_init(&ob, out_segs, n_out, fuzz_mem, NULL);
    req_base = in;
    req_len = len;
    req_reads = g_malloc0(len ? len : 1);
    /* As the transport does: the header once, then the rest */
    vfsd_request_head(&ib, &head);
    if (vfsd_request_may_block(&head)) {
        g_clear_pointer(&req_reads, g_free);
        return;
    }
    memcpy(&h, req, MIN(len, sizeof(h)));
    written = vfsd_process_request(fs, &head, &ib, &ob);
    g_clear_pointer(&req_reads, g_free);
    check_reply(reply, room, written, len >= sizeof(h) ? &h.unique : NULL);
}

/* The INIT of a Linux 6.12 guest mounting with -o dax=inode */
static void send_guest_init(VfsdFs *fs)
{
    struct {
        struct fuse_in_header h;
        struct fuse_init_in in;
    } req = {
        .h = {
            .len = sizeof(req),
            .opcode = FUSE_INIT,
            .unique = 2,
        },
        .in = {
            .major = 7,
            .minor = 41,
            .max_readahead = 128 * 1024,
        },
    };
    uint64_t flags = FUSE_ASYNC_READ | FUSE_POSIX_LOCKS |
        FUSE_ATOMIC_O_TRUNC | FUSE_EXPORT_SUPPORT | FUSE_BIG_WRITES |
        FUSE_DONT_MASK | FUSE_SPLICE_WRITE | FUSE_SPLICE_MOVE |
        FUSE_SPLICE_READ | FUSE_FLOCK_LOCKS | FUSE_HAS_IOCTL_DIR |
        FUSE_AUTO_INVAL_DATA | FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
        FUSE_ASYNC_DIO | FUSE_WRITEBACK_CACHE | FUSE_NO_OPEN_SUPPORT |
        FUSE_PARALLEL_DIROPS | FUSE_HANDLE_KILLPRIV | FUSE_POSIX_ACL |
        FUSE_ABORT_ERROR | FUSE_MAX_PAGES | FUSE_CACHE_SYMLINKS |
        FUSE_NO_OPENDIR_SUPPORT | FUSE_EXPLICIT_INVAL_DATA |
        FUSE_MAP_ALIGNMENT | FUSE_SUBMOUNTS | FUSE_HANDLE_KILLPRIV_V2 |
        FUSE_SETXATTR_EXT | FUSE_INIT_EXT | FUSE_SECURITY_CTX |
        FUSE_HAS_INODE_DAX | FUSE_CREATE_SUPP_GROUP | FUSE_HAS_EXPIRE_ONLY |
        FUSE_DIRECT_IO_ALLOW_MMAP | FUSE_PASSTHROUGH |
        FUSE_NO_EXPORT_SUPPORT | FUSE_HAS_RESEND | FUSE_ALLOW_IDMAP;

    req.in.flags = flags;
    req.in.flags2 = flags >> 32;
    send_one(fs, (const uint8_t *)&req, sizeof(req), 0, 0);
    if (!fs->conn.initialized) {
        fuzz_fail("the INIT of a 6.12 guest was refused");
    }
}

static void check_fds(VfsdFs *fs, unsigned int base, const char *when)
{
    /*
     * The broker's socket and pipe are the daemon's, as the root's; idle
     * fds of handle inodes are its cache, not the guest's
     */
    unsigned int held = count_fds() - base - vfsd_broker_fds(fs->broker) -
                        fs->inodes.idle.length;

    if (held != (unsigned int)g_atomic_int_get(&fs->fds_open)) {
        fuzz_fail("%s: the daemon holds %u fds, its accounting says %d",
                  when, held, g_atomic_int_get(&fs->fds_open));
    }
    if (fs->fds_open > fs->fds_max) {
        fuzz_fail("%s: %d fds held, the bound is %d", when, fs->fds_open,
                  fs->fds_max);
    }
}

/*
 * Before a session, whatever harness runs it: the fd limit (per input:
 * libFuzzer raises it after LLVMFuzzerInitialize(), which left the bound
 * out of reach) and the share's files.  Returns count_fds() for
 * session_done().
 */
static unsigned int session_start(void)
{
    struct rlimit nofile;

    if (getrlimit(RLIMIT_NOFILE, &nofile) < 0) {
        fuzz_fail("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    }
    nofile.rlim_cur = FUZZ_NOFILE;
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
        fuzz_fail("setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    }
    populate();
    return count_fds();
}

/*
 * After a session, whatever harness ran it: no fd may outlive it, and the
 * next one starts from the same working directory and an empty share.
 * BEFORE is count_fds() from before the session.
 */
static void session_done(unsigned int before)
{
    if (count_fds() != before) {
        fuzz_fail("%u fds leaked by the session", count_fds() - before);
    }
    if (fchdir(cwd_fd) < 0) {
        fuzz_fail("cannot go back to the working directory: %s",
                  strerror(errno));
    }
    empty_dir(__real_openat(scratch_fd, ".", O_RDONLY | O_DIRECTORY |
                            O_CLOEXEC));
}

/*
 * The end of a session on @fs, cleaned up already but for its window:
 * nothing may stay mapped in the fake front-end, no fd counted open.
 */
static void session_end(VfsdFs *fs, int proc_fd, unsigned int before)
{
    if (fs->dax) {
        vfsd_dax_free(fs->dax);
        if (frontend.n) {
            fuzz_fail("%u mappings left in the window after the session",
                      frontend.n);
        }
    }
    close(proc_fd);
    if (fs->fds_open != 0) {
        fuzz_fail("the session ended with fds_open %d", fs->fds_open);
    }
    session_done(before);
}

/*
 * The daemon's file system over the scratch directory, opened as main.c
 * opens it, with /proc/self/fd as the working directory: returns the
 * /proc fd, which session_end() closes.
 */
static int fuzz_fs_init(VfsdFs *fs, const VfsdOptions *opts)
{
    g_autofree char *err = NULL;
    int root_fd = __real_openat(scratch_fd, ".", O_PATH | O_DIRECTORY |
                                O_CLOEXEC);
    int proc_fd = __real_openat(AT_FDCWD, "/proc/self/fd",
                                O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (root_fd < 0 || proc_fd < 0 || fchdir(proc_fd) < 0) {
        fuzz_fail("cannot open the shared directory or /proc/self/fd");
    }
    if (!vfsd_fs_init(fs, opts, root_fd, proc_fd, &err)) {
        fuzz_fail("vfsd_fs_init: %s", err);
    }
    return proc_fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const VfsdCache caches[] = {
        VFSD_CACHE_AUTO, VFSD_CACHE_NEVER, VFSD_CACHE_METADATA,
        VFSD_CACHE_ALWAYS,
    };
    static const VfsdDaxPolicy policies[] = {
        VFSD_DAX_ALWAYS, VFSD_DAX_NEVER, VFSD_DAX_SIZE, VFSD_DAX_XATTR,
    };
    VfsdOptions opts = { 0 };
    VfsdDaxBackend be = fe_backend;
    VfsdFs fs;
    g_autofree char *err = NULL;
    unsigned int before, base, records = 0;
    int proc_fd;
    uint32_t opcode = 0;
    uint8_t cfg;
    size_t pos = 1;

    if (size < 1) {
        return 0;
    }
    cfg = data[0];
    opts.fd = -1;
    opts.cache = caches[cfg & 3];
    /* Adaptive timeouts in place of fixed ones in half the auto inputs */
    if (opts.cache == VFSD_CACHE_AUTO && (size & 1)) {
        opts.cache = VFSD_CACHE_ADAPTIVE;
    }
    opts.adaptive_min = VFSD_ADAPTIVE_MIN;
    opts.adaptive_max = VFSD_ADAPTIVE_MAX;
    opts.adaptive_fraction = VFSD_ADAPTIVE_FRACTION;
    opts.readonly = cfg & 4;
    opts.writeback = cfg & 8;
    /* Both paths of the umask: the guest's, or ours under FUSE_DONT_MASK */
    opts.posix_acl = !(cfg & 8);
    opts.dax_policy = policies[(cfg >> 4) & 3];
    opts.dax_min_size = 1024 * 1024;
    opts.sandbox = VFSD_SANDBOX_NONE;
    /*
     * Inodes by file handle in half the inputs (cache=auto and always),
     * where the privileges allow it
     */
    opts.inode_file_handles = (cfg & 2) ? VFSD_INODE_FH_PREFER :
                              VFSD_INODE_FH_NEVER;
    opts.xattr = true;
    opts.flock = true;
    opts.posix_lock = true;
    opts.killpriv_v2 = true;
    opts.announce_submounts = true;
    if (!vfsd_idmap_add(&opts.uid_map, ":0:0:65536:", &err) ||
        !vfsd_idmap_add(&opts.uid_map, ":65536:200000:65536:", &err) ||
        !vfsd_idmap_add(&opts.gid_map, ":0:0:65536:", &err) ||
        !vfsd_idmap_add(&opts.gid_map, ":65536:200000:65536:", &err)) {
        fuzz_fail("id maps: %s", err);
    }
    memset(&frontend, 0, sizeof(frontend));
    frontend.replace = cfg & 0x40;
    /*
     * Half the inputs run under --xattrmap, with a rule of each type and
     * security.capability moved, so that killpriv drops it by name; the
     * names the corpus uses (user.*, system.posix_acl_*) pass unchanged.
     */
    if (cfg & 0x40) {
        opts.xattrmap = vfsd_xattrmap_parse(
            ":prefix:all:trusted.:user.fz.: "
            ":prefix:client:security.capability:user.fz.: "
            ":bad:client:user.fz.:: :unsupported:all:user.ns.:user.ns.: "
            ":ok:all:::", &err);
        if (!opts.xattrmap) {
            fuzz_fail("xattrmap: %s", err);
        }
    }

    before = session_start();
    proc_fd = fuzz_fs_init(&fs, &opts);
    if (fs.fds_max > FUZZ_NOFILE) {
        fuzz_fail("the fd bound is %d, out of the guest's reach", fs.fds_max);
    }
    if (!(cfg & 0x80)) {
        fs.dax = vfsd_dax_new(&be);
    }
    /* Everything but /proc/self/fd is the daemon's, root included */
    base = before + 1;
    in_session = true;

    /* The opcode of the first request */
    if (size >= 1 + 4 + offsetof(struct fuse_in_header, unique)) {
        memcpy(&opcode, data + 1 + 4 + offsetof(struct fuse_in_header,
                                                opcode), sizeof(opcode));
    }
    if (opcode != FUSE_INIT) {
        send_guest_init(&fs);
    }
    while (pos + 4 <= size && records++ < FUZZ_MAX_RECORDS) {
        size_t len = data[pos] | (data[pos + 1] << 8);
        uint8_t seg = data[pos + 2], out = data[pos + 3];

        pos += 4;
        len = MIN(len, size - pos);
        send_one(&fs, data + pos, len, seg, out);
        pos += len;
        check_fds(&fs, base, "after a request");
    }

    in_session = false;
    check_sentinel();
    vfsd_fs_cleanup(&fs);
    vfsd_xattrmap_free(opts.xattrmap);
    session_end(&fs, proc_fd, before);
    return 0;
}
