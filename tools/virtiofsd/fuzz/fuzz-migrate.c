/*
 * virtiofsd fuzzer: the live-migration state stream a destination loads
 * (vfsd_migrate_load()).  The stream comes from the source daemon, which
 * a guest may have taken over: it can name any file by file handle, any
 * nodeid, fh, session flag or DAX mapping.  Nothing it says may give the
 * guest a file outside the shared directory.
 *
 * An input:
 *
 *   byte 0     configuration: bit 0 --migration-on-error=guest-error
 *              (clear: abort), bit 1 --inode-file-handles=prefer, bit 2
 *              read-only, bit 3 no DAX window at all, bit 4 the
 *              front-end does not restore a window (no SHMEM_MIGRATE),
 *              bit 5 the front-end offers SHMEM_REPLACE, bit 6
 *              writeback (clear: --posix-acl instead)
 *   the rest   the state stream, as the front-end hands it over
 *
 * File handles are host-specific, so that a seed cannot carry a real
 * one: in an inode record whose handle type is FUZZ_HANDLE_MAGIC, the
 * first byte of the handle picks a file (targets[]), and the harness
 * puts that file's real handle in its place, fixing up the section's
 * length, before loading.  The targets are files of the shared directory
 * and, on the same file system (so that their handles decode there),
 * files and directories outside it.
 *
 * The share is a directory inside the scratch tmpfs (T/share), populated
 * as fuzz-request.c does, plus symlinks that lead out; beside it lie
 * T/outside (a file) and T/outdir/secret.  After a load that succeeded,
 * the DAX table is mapped again through a fake front-end, as
 * vfsd_migrate_end() does, and the guest's requests (GETATTR, OPEN,
 * READ, WRITE, READDIR, READLINK) run on every nodeid and fh the load
 * restored.
 *
 * Besides the sanitizers and fuzz-request.c's checks (an open outside
 * the share, an fd the daemon's accounting does not know of, a bad
 * reply), the harness aborts when:
 * - after the load, or after the requests, the daemon holds an fd on
 *   anything outside the share (an O_PATH fd from open_by_handle_at()
 *   passes no open guard);
 * - anything outside the share was read, written or changed: contents,
 *   size, mode, mtime, ctime, and atime (set in the past at the start,
 *   so that relatime records the first read).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#define LLVMFuzzerInitialize fuzz_request_initialize
#define LLVMFuzzerTestOneInput fuzz_request_one
#include "fuzz-request.c"
#undef LLVMFuzzerInitialize
#undef LLVMFuzzerTestOneInput

#include "migrate.h"
#include "migstream.h"

#define FUZZ_HANDLE_MAGIC 0x4d5a5a46u   /* "FZZM" */
#define FUZZ_MAX_FD 4096

/* The file a placeholder handle names: path relative to T */
static const struct {
    const char *path;
    bool outside;
} targets[] = {
    { "outside", true },
    { "outdir", true },
    { "outdir/secret", true },
    { ".", true },              /* T, the share's parent */
    { "share", false },         /* the share's root: nodeid 1 already */
    { "share/file", false },
    { "share/dir", false },
    { "share/dir/sub", false },
    { "share/big", false },
    { "share/hard", false },
};
#define N_TARGETS G_N_ELEMENTS(targets)

/* T: the tmpfs (or directory) holding the share and the outside files */
static char top[PATH_MAX];
static int top_fd = -1;
static struct file_handle *handles[N_TARGETS];
/* What the outside targets were, and (files) held */
static struct stat outside_st[N_TARGETS];
static bool pre_session_fd[FUZZ_MAX_FD];

static struct file_handle *handle_at(const char *rel)
{
    struct file_handle *h = g_malloc0(sizeof(*h) + MAX_HANDLE_SZ);
    int mount_id;

    h->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(top_fd, rel, h, &mount_id, 0) < 0) {
        g_free(h);
        return NULL;
    }
    return h;
}

/* Contents read without touching atime (owner or root: O_NOATIME) */
static bool outside_content_ok(const char *rel, const char *want)
{
    char buf[64];
    ssize_t n;
    int fd = __real_openat(top_fd, rel, O_RDONLY | O_NOATIME | O_CLOEXEC);

    if (fd < 0) {
        return false;
    }
    n = read(fd, buf, sizeof(buf));
    close(fd);
    return n == (ssize_t)strlen(want) && !memcmp(buf, want, n);
}

#define OUTSIDE_DATA "outside the share\n"

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static void check_outside(const char *when)
{
    unsigned int i;

    for (i = 0; i < N_TARGETS; i++) {
        const struct stat *was = &outside_st[i];
        struct stat st;

        if (!targets[i].outside) {
            continue;
        }
        if (fstatat(top_fd, targets[i].path, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            st.st_ino != was->st_ino || st.st_mode != was->st_mode ||
            st.st_uid != was->st_uid || st.st_gid != was->st_gid ||
            st.st_size != was->st_size || st.st_nlink != was->st_nlink ||
            !same_time(st.st_mtim, was->st_mtim) ||
            !same_time(st.st_ctim, was->st_ctim) ||
            !same_time(st.st_atim, was->st_atim)) {
            fuzz_fail("%s: %s/%s, outside the shared directory, was read "
                      "or changed", when, top, targets[i].path);
        }
        if (S_ISREG(st.st_mode) &&
            !outside_content_ok(targets[i].path, OUTSIDE_DATA)) {
            fuzz_fail("%s: %s/%s, outside the shared directory, was "
                      "written", when, top, targets[i].path);
        }
    }
    check_sentinel();
}

static void mark_pre_session(int fd, const char *when)
{
    if (fd < FUZZ_MAX_FD) {
        pre_session_fd[fd] = true;
    }
}

/* An fd the session opened: on the share, or on no path at all */
static void check_fd_inside(int fd, const char *when)
{
    char where[PATH_MAX + 32];

    if (fd < FUZZ_MAX_FD && pre_session_fd[fd]) {
        return;
    }
    if (!fd_path(fd, where, sizeof(where))) {
        fuzz_fail("%s: cannot tell what fd %d is", when, fd);
    }
    /* anon_inode:, pipe:, socket: (no file), /proc/self/fd (the root's) */
    if (where[0] != '/' || g_str_has_prefix(where, "/proc/")) {
        return;
    }
    if (!in_scratch(where)) {
        fuzz_fail("%s: the daemon holds fd %d on \"%s\", outside %s", when,
                  fd, where, scratch);
    }
}

static void check_fds_inside(const char *when)
{
    for_each_fd(check_fd_inside, when);
}

static void remove_top(void)
{
    unlinkat(top_fd, "outdir/secret", 0);
    unlinkat(top_fd, "outdir", AT_REMOVEDIR);
    unlinkat(top_fd, "outside", 0);
    unlinkat(top_fd, "share", AT_REMOVEDIR);
    /* remove_sentinel() (run after) unmounts and removes T */
    g_strlcpy(scratch, top, sizeof(scratch));
}

static void put_outside(const char *rel)
{
    int fd = __real_openat(top_fd, rel, O_WRONLY | O_CREAT | O_EXCL |
                           O_CLOEXEC, 0600);

    if (fd < 0 || write(fd, OUTSIDE_DATA, strlen(OUTSIDE_DATA)) !=
                  (ssize_t)strlen(OUTSIDE_DATA)) {
        fuzz_fail("cannot create %s/%s: %s", top, rel, strerror(errno));
    }
    close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* An atime in the past: relatime then notes the next read */
    const struct timespec times[2] = { { 1000000000, 0 }, { 0, UTIME_OMIT } };
    unsigned int i;

    setup_scratch();
    /* The scratch directory becomes T, and the share a directory in it */
    g_strlcpy(top, scratch, sizeof(top));
    top_fd = scratch_fd;
    if (mkdirat(top_fd, "share", 0755) < 0 ||
        mkdirat(top_fd, "outdir", 0755) < 0) {
        fuzz_fail("cannot populate %s: %s", top, strerror(errno));
    }
    put_outside("outside");
    put_outside("outdir/secret");
    snprintf(scratch, sizeof(scratch), "%s/share", top);
    scratch_len = strlen(scratch);
    scratch_fd = __real_openat(top_fd, "share", O_RDONLY | O_DIRECTORY |
                               O_CLOEXEC);
    if (scratch_fd < 0) {
        fuzz_fail("cannot open %s: %s", scratch, strerror(errno));
    }
    atexit(remove_top);
    for (i = 0; i < N_TARGETS; i++) {
        if (!targets[i].outside) {
            continue;
        }
        if (utimensat(top_fd, targets[i].path, times,
                      AT_SYMLINK_NOFOLLOW) < 0 ||
            fstatat(top_fd, targets[i].path, &outside_st[i],
                    AT_SYMLINK_NOFOLLOW) < 0) {
            fuzz_fail("cannot set up %s/%s: %s", top, targets[i].path,
                      strerror(errno));
        }
        /* Where file handles cannot be had (no privilege), none is used */
        handles[i] = handle_at(targets[i].path);
    }
    return 0;
}

/* The share's own files, made again for each input: their handles too */
static void share_handles(void)
{
    unsigned int i;

    for (i = 0; i < N_TARGETS; i++) {
        if (!targets[i].outside) {
            g_free(handles[i]);
            handles[i] = handle_at(targets[i].path);
        }
    }
}

/*
 * The inode section with its placeholder handles replaced: false if it
 * does not parse as one, and the input then goes in as it is.
 */
static bool resolve_inodes(const uint8_t *p, size_t len, VfsdMigWriter *w)
{
    VfsdMigReader r;
    uint64_t count, i;

    vfsd_mig_reader_init(&r, p, len);
    if (!vfsd_mig_get_count(&r, 24, &count)) {
        return false;
    }
    vfsd_mig_put_u64(w, count);
    for (i = 0; i < count; i++) {
        uint32_t flags, plen, htype, hlen;
        const uint8_t *path, *h;

        vfsd_mig_put_u64(w, vfsd_mig_get_u64(&r));     /* nodeid */
        vfsd_mig_put_u64(w, vfsd_mig_get_u64(&r));     /* lookups */
        vfsd_mig_put_u32(w, vfsd_mig_get_u32(&r));     /* type */
        flags = vfsd_mig_get_u32(&r);
        vfsd_mig_put_u32(w, flags);
        if (flags & 1) {
            path = vfsd_mig_get_blob(&r, PATH_MAX, &plen);
            if (!path) {
                return false;
            }
            vfsd_mig_put_blob(w, path, plen);
        }
        if (flags & 2) {
            htype = vfsd_mig_get_u32(&r);
            h = vfsd_mig_get_blob(&r, MAX_HANDLE_SZ, &hlen);
            if (!h) {
                return false;
            }
            if (htype == FUZZ_HANDLE_MAGIC && hlen &&
                handles[h[0] % N_TARGETS]) {
                const struct file_handle *real = handles[h[0] % N_TARGETS];

                vfsd_mig_put_u32(w, real->handle_type);
                vfsd_mig_put_blob(w, real->f_handle, real->handle_bytes);
            } else {
                vfsd_mig_put_u32(w, htype);
                vfsd_mig_put_blob(w, h, hlen);
            }
        }
        if (r.bad) {
            return false;
        }
    }
    return !vfsd_mig_remaining(&r);
}

/* @data with its placeholders replaced, as far as its sections parse */
static GByteArray *resolve_stream(const uint8_t *data, size_t size)
{
    GByteArray *out = g_byte_array_new();
    VfsdMigWriter w = { .buf = out };
    size_t pos = MIN(size, VFSD_MIG_MAGIC_LEN + 8);

    vfsd_mig_put_bytes(&w, data, pos);
    while (size - pos >= 16) {
        VfsdMigReader r;
        uint32_t type, flags;
        uint64_t slen;
        size_t len_at, start;

        vfsd_mig_reader_init(&r, data + pos, size - pos);
        type = vfsd_mig_get_u32(&r);
        flags = vfsd_mig_get_u32(&r);
        slen = vfsd_mig_get_u64(&r);
        if (type == VFSD_MIG_SEC_END || slen > size - pos - 16) {
            break;
        }
        vfsd_mig_put_u32(&w, type);
        vfsd_mig_put_u32(&w, flags);
        len_at = vfsd_mig_tell(&w);
        vfsd_mig_put_u64(&w, slen);
        start = vfsd_mig_tell(&w);
        if (type != VFSD_MIG_SEC_INODES ||
            !resolve_inodes(data + pos + 16, slen, &w)) {
            g_byte_array_set_size(out, start);
            vfsd_mig_put_bytes(&w, data + pos + 16, slen);
        }
        vfsd_mig_patch_u64(&w, len_at, vfsd_mig_tell(&w) - start);
        pos += 16 + slen;
    }
    vfsd_mig_put_bytes(&w, data + pos, size - pos);
    return out;
}

static bool fe_can_migrate(void *opaque)
{
    return true;
}

static uint64_t next_unique = 100;

/*
 * One request of the guest: the reply's error (0 on success), its
 * payload (up to @out_len bytes) copied to @out
 */
static int call(VfsdFs *fs, uint32_t opcode, uint64_t nodeid,
                const void *arg, size_t arg_len, const void *data,
                size_t data_len, void *out, size_t out_len)
{
    size_t len = sizeof(struct fuse_in_header) + arg_len + data_len;
    size_t room = sizeof(struct fuse_out_header) + 8192;
    g_autofree uint8_t *in = g_malloc0(len);
    g_autofree uint8_t *reply = g_malloc0(room);
    struct fuse_in_header h = {
        .len = len, .opcode = opcode, .unique = next_unique++,
        .nodeid = nodeid,
    };
    struct fuse_out_header oh;
    VfsdSeg in_seg = { .addr = (uintptr_t)in, .len = len, .base = in };
    VfsdSeg out_seg = { .addr = (uintptr_t)reply, .len = room,
                        .base = reply };
    VfsdReqHead head;
    VfsdBuf ib, ob;
    size_t written;

    memcpy(in, &h, sizeof(h));
    if (arg_len) {
        memcpy(in + sizeof(h), arg, arg_len);
    }
    if (data_len) {
        memcpy(in + sizeof(h) + arg_len, data, data_len);
    }
    vfsd_buf_init(&ib, &in_seg, 1, fuzz_mem, NULL);
    vfsd_buf_init(&ob, &out_seg, 1, fuzz_mem, NULL);
    vfsd_request_head(&ib, &head);
    written = vfsd_process_request(fs, &head, &ib, &ob);
    check_reply(reply, room, written, &h.unique);
    if (!written) {
        return -ENOSYS;
    }
    memcpy(&oh, reply, sizeof(oh));
    if (!oh.error && out) {
        memcpy(out, reply + sizeof(oh), MIN(out_len, written - sizeof(oh)));
    }
    return oh.error;
}

/* What the guest does with a file it holds open as @fh */
static void use_handle(VfsdFs *fs, uint64_t nodeid, uint64_t fh, bool is_dir)
{
    struct fuse_getattr_in ga = { .getattr_flags = FUSE_GETATTR_FH, .fh = fh };
    struct fuse_read_in rd = { .fh = fh, .size = 4096 };
    struct fuse_write_in wr = { .fh = fh, .size = 5 };

    call(fs, FUSE_GETATTR, nodeid, &ga, sizeof(ga), NULL, 0, NULL, 0);
    if (is_dir) {
        call(fs, FUSE_READDIR, nodeid, &rd, sizeof(rd), NULL, 0, NULL, 0);
        return;
    }
    call(fs, FUSE_READ, nodeid, &rd, sizeof(rd), NULL, 0, NULL, 0);
    call(fs, FUSE_WRITE, nodeid, &wr, sizeof(wr), "fuzz!", 5, NULL, 0);
}

/* And with a file it knows by @nodeid */
static void use_inode(VfsdFs *fs, uint64_t nodeid, uint32_t type)
{
    struct fuse_getattr_in ga = { 0 };
    struct fuse_open_in op = { .flags = O_RDWR };
    struct fuse_open_out oo = { 0 };
    struct fuse_release_in rel = { 0 };
    bool is_dir = type == S_IFDIR;

    call(fs, FUSE_GETATTR, nodeid, &ga, sizeof(ga), NULL, 0, NULL, 0);
    if (type == S_IFLNK) {
        call(fs, FUSE_READLINK, nodeid, NULL, 0, NULL, 0, NULL, 0);
        return;
    }
    if (type != S_IFREG && !is_dir) {
        return;
    }
    if (is_dir) {
        op.flags = O_RDONLY | O_DIRECTORY;
        if (call(fs, FUSE_OPENDIR, nodeid, &op, sizeof(op), NULL, 0, &oo,
                 sizeof(oo))) {
            return;
        }
    } else if (call(fs, FUSE_OPEN, nodeid, &op, sizeof(op), NULL, 0, &oo,
                    sizeof(oo))) {
        /* A read-only share, or a file the guest may only read */
        op.flags = O_RDONLY;
        if (call(fs, FUSE_OPEN, nodeid, &op, sizeof(op), NULL, 0, &oo,
                 sizeof(oo))) {
            return;
        }
    }
    use_handle(fs, nodeid, oo.fh, is_dir);
    rel.fh = oo.fh;
    call(fs, is_dir ? FUSE_RELEASEDIR : FUSE_RELEASE, nodeid, &rel,
         sizeof(rel), NULL, 0, NULL, 0);
}

typedef struct Restored {
    uint64_t nodeid, fh;
    uint32_t type;
    bool is_dir;
} Restored;

/* The guest runs on: every nodeid and fh the stream gave is used */
static void guest_runs(VfsdFs *fs)
{
    g_autoptr(GArray) inodes = g_array_new(false, false, sizeof(Restored));
    g_autoptr(GArray) fhs = g_array_new(false, false, sizeof(Restored));
    g_autoptr(GPtrArray) all = vfsd_inodes_snapshot(fs);
    g_autoptr(GPtrArray) open = vfsd_handles_snapshot(fs);
    unsigned int i, found = 0;

    /* Copied: the requests may drop what the snapshots hold */
    for (i = 0; i < all->len; i++) {
        VfsdInode *inode = g_ptr_array_index(all, i);
        Restored r = { .nodeid = inode->nodeid, .type = inode->type };

        g_array_append_val(inodes, r);
        found += !inode->lost;
    }
    for (i = 0; i < open->len; i++) {
        VfsdHandle *h = g_ptr_array_index(open, i);
        Restored r = {
            .nodeid = h->inode->nodeid, .fh = h->fh, .is_dir = h->is_dir,
        };

        g_array_append_val(fhs, r);
    }
    g_clear_pointer(&all, g_ptr_array_unref);
    g_clear_pointer(&open, g_ptr_array_unref);
    /* For the replay of the seeds: what a good one restored */
    if (getenv("FUZZ_MIGRATE_VERBOSE")) {
        fprintf(stderr, "fuzz-migrate: restored %u inodes (%u lost), %u "
                "handles, %u DAX mappings\n", found, inodes->len - found,
                fhs->len, frontend.n);
    }

    if (!fs->conn.initialized) {
        send_guest_init(fs);
    }
    for (i = 0; i < fhs->len; i++) {
        Restored *r = &g_array_index(fhs, Restored, i);

        use_handle(fs, r->nodeid, r->fh, r->is_dir);
    }
    for (i = 0; i < inodes->len; i++) {
        Restored *r = &g_array_index(inodes, Restored, i);

        use_inode(fs, r->nodeid, r->type);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    VfsdOptions opts = { 0 };
    VfsdDaxBackend be = fe_backend;
    g_autoptr(GByteArray) stream = NULL;
    VfsdFs fs;
    g_autofree char *err = NULL;
    unsigned int before, base;
    int proc_fd;
    bool loaded;
    uint8_t cfg;

    if (size < 1) {
        return 0;
    }
    cfg = data[0];
    opts.fd = -1;
    opts.cache = VFSD_CACHE_AUTO;
    opts.migration_on_error = (cfg & 1) ? VFSD_MIG_GUEST_ERROR :
                                          VFSD_MIG_ABORT;
    opts.inode_file_handles = (cfg & 2) ? VFSD_INODE_FH_PREFER :
                                          VFSD_INODE_FH_NEVER;
    opts.readonly = cfg & 4;
    opts.writeback = cfg & 0x40;
    opts.posix_acl = !(cfg & 0x40);
    opts.dax_policy = VFSD_DAX_ALWAYS;
    opts.cache_size = FUZZ_WINDOW;
    opts.sandbox = VFSD_SANDBOX_NONE;
    opts.xattr = true;
    opts.flock = true;
    opts.posix_lock = true;
    opts.killpriv_v2 = true;
    opts.announce_submounts = true;
    memset(&frontend, 0, sizeof(frontend));
    frontend.replace = cfg & 0x20;
    if (!(cfg & 0x10)) {
        be.can_migrate = fe_can_migrate;
    }

    session_start();
    /* Symlinks that lead out of the share, to T's files */
    if (symlinkat("../outside", scratch_fd, "out") < 0 ||
        symlinkat(top, scratch_fd, "up") < 0) {
        fuzz_fail("cannot populate %s: %s", scratch, strerror(errno));
    }
    share_handles();
    stream = resolve_stream(data + 1, size - 1);

    before = count_fds();
    memset(pre_session_fd, 0, sizeof(pre_session_fd));
    for_each_fd(mark_pre_session, NULL);
    proc_fd = fuzz_fs_init(&fs, &opts);
    if (!(cfg & 8)) {
        fs.dax = vfsd_dax_new(&be);
    }
    base = before + 1;
    in_session = true;

    /* As vfsd_migrate_end() does with what the front-end sent */
    loaded = vfsd_migrate_load(&fs, stream->data, stream->len, &err);
    if (loaded) {
        loaded = vfsd_dax_restore(&fs, &err);
    } else {
        vfsd_dax_load_cancel(&fs);
    }
    if (getenv("FUZZ_MIGRATE_VERBOSE")) {
        fprintf(stderr, "fuzz-migrate: %s%s\n", loaded ? "loaded" :
                "refused: ", loaded ? "" : err);
    }
    check_fds_inside("after the load");
    check_fds(&fs, base, "after the load");
    check_outside("after the load");
    /*
     * A failed load leaves the destination to be thrown away (QEMU stops
     * the migration); only a loaded one serves the guest
     */
    if (loaded) {
        guest_runs(&fs);
        check_fds_inside("after the guest's requests");
        check_fds(&fs, base, "after the guest's requests");
    }

    in_session = false;
    check_outside("after the session");
    /* As vhost.c: the migration state is the transport's to free */
    vfsd_migrate_free(&fs);
    vfsd_fs_cleanup(&fs);
    session_end(&fs, proc_fd, before);
    return 0;
}
