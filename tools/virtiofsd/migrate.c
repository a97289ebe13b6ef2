/*
 * virtiofsd: the state a live migration carries to the destination
 *
 * What the guest holds of us is named in its requests by nodeid and fh,
 * and it goes on using those after the switch-over without a word to
 * us.  The source therefore tells the destination, for each nodeid, how
 * to find the same file under the shared directory, and for each fh, how
 * it was opened; the destination opens them again before the guest runs.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "migrate.h"
#include "broker.h"
#include "dax.h"
#include "fd.h"
#include "fs.h"
#include "inode.h"
#include "log.h"
#include "migstream.h"
#include "server.h"

/* VfsdMigInode.flags: how the destination finds the inode */
#define MIG_INODE_PATH (1u << 0)
#define MIG_INODE_HANDLE (1u << 1)
#define MIG_INODE_FLAGS (MIG_INODE_PATH | MIG_INODE_HANDLE)

/* Lock types in the stream, independent of the host's F_* values */
#define MIG_LOCK_READ 1
#define MIG_LOCK_WRITE 2

/* Smallest encoded record of each section, for checking counts */
#define MIG_INODE_MIN 24
#define MIG_HANDLE_MIN 22
#define MIG_LOCK_MIN 36

/*
 * Nodeids and fhs count up by one from the first; the destination goes
 * on counting after the highest the stream gives.  No daemon reaches
 * this value, and keeping below it means the count cannot wrap round to
 * 0, or to 1 (the root's nodeid).
 */
#define MIG_ID_MAX (UINT64_C(1) << 62)

/*
 * Lost inodes a load accepts under --migration-on-error=guest-error.
 * Each costs an inode here, ten times its record in the stream: a forged
 * stream of lost records must not make the destination allocate
 * gigabytes.  A million files gone between save and load is no live
 * migration a guest could use anyway: more likely the destination shares
 * another directory.
 */
#define MIG_MAX_LOST (1u << 20)

/* Open flags carried for a file handle; creation flags never reopen */
#define MIG_OPEN_FLAGS (O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | \
                        O_SYNC | O_DIRECT | O_NOATIME | O_LARGEFILE)

/*
 * A guest lock released on the source when the state was saved: a POSIX
 * lock of @owner on @inode, or (@handle set) a BSD lock of a handle
 */
typedef struct MigHandedLock {
    VfsdInode *inode;           /* holds a reference */
    uint64_t owner;
    struct flock l;
    VfsdHandle *handle;         /* holds a reference; NULL: POSIX */
    int flock_op;               /* LOCK_SH or LOCK_EX */
} MigHandedLock;

struct VfsdMig {
    GArray *handed;             /* MigHandedLock */
    VfsdMigHook hook;           /* the transport's section, if any */
    /* What the last save or load carried, for the log */
    uint64_t inodes, handles, locks, lost;
    /* Inodes sent, or found, by their file handle alone (no path) */
    uint64_t by_handle;
};

static VfsdMig *mig_of(VfsdFs *fs)
{
    if (!fs->mig) {
        fs->mig = g_new0(VfsdMig, 1);
        fs->mig->handed = g_array_new(false, false, sizeof(MigHandedLock));
    }
    return fs->mig;
}

static void mig_drop_handed(VfsdMig *m)
{
    unsigned int i;

    for (i = 0; i < m->handed->len; i++) {
        MigHandedLock *hl = &g_array_index(m->handed, MigHandedLock, i);

        vfsd_inode_unref(hl->inode);
        vfsd_handle_put(hl->handle);
    }
    g_array_set_size(m->handed, 0);
}

void vfsd_migrate_set_hook(VfsdFs *fs, const VfsdMigHook *hook)
{
    mig_of(fs)->hook = *hook;
}

void vfsd_migrate_free(VfsdFs *fs)
{
    if (fs->mig) {
        mig_drop_handed(fs->mig);
        g_array_free(fs->mig->handed, true);
        g_free(fs->mig);
        fs->mig = NULL;
    }
}

typedef struct MigKey {
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id;
} MigKey;

static guint mig_key_hash(gconstpointer p)
{
    const MigKey *k = p;

    return g_int64_hash(&(gint64){ k->ino }) ^
           g_int64_hash(&(gint64){ k->dev }) ^ (guint)k->mnt_id;
}

static gboolean mig_key_equal(gconstpointer a, gconstpointer b)
{
    const MigKey *x = a, *y = b;

    return x->ino == y->ino && x->dev == y->dev && x->mnt_id == y->mnt_id;
}

static MigKey key_of_statx(const struct statx *stx)
{
    return (MigKey) {
        .dev = makedev(stx->stx_dev_major, stx->stx_dev_minor),
        .ino = stx->stx_ino,
        .mnt_id = stx->stx_mnt_id,
    };
}

static MigKey key_of_inode(const VfsdInode *inode)
{
    return (MigKey) {
        .dev = inode->dev,
        .ino = inode->ino,
        .mnt_id = inode->mnt_id,
    };
}

/*
 * A path from the stream or from /proc: relative, with no empty, "." or
 * ".." component, so that nothing but openat2()'s own checks stands
 * between it and the outside of the shared directory.
 */
static bool valid_rel_path(const char *p)
{
    g_auto(GStrv) parts = NULL;
    unsigned int i;

    if (!*p || strlen(p) >= PATH_MAX || p[0] == '/') {
        return false;
    }
    parts = g_strsplit(p, "/", -1);
    for (i = 0; parts[i]; i++) {
        if (!*parts[i] || !strcmp(parts[i], ".") || !strcmp(parts[i], "..")) {
            return false;
        }
    }
    return true;
}

/*
 * @rel under the shared directory, without following a symlink or
 * leaving it: an O_PATH fd, or a negative errno
 */
static int open_beneath(VfsdFs *fs, const char *rel)
{
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                   RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, fs->inodes.root->fd, rel, &how,
                      sizeof(how));

    return fd < 0 ? -errno : (int)fd;
}

/* What the source writes for one inode */
typedef struct MigInode {
    VfsdInode *inode;
    char *path;                 /* relative; NULL: not found */
    struct file_handle *handle; /* NULL: none */
} MigInode;

/* The file handle of @fd, or NULL if its file system gives none */
static struct file_handle *handle_of(int fd)
{
    struct file_handle *h = g_malloc0(sizeof(*h) + MAX_HANDLE_SZ);
    int mount_id;

    h->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fd, "", h, &mount_id, AT_EMPTY_PATH) < 0) {
        g_free(h);
        return NULL;
    }
    return h;
}

/* Whether @rel leads to the file @key names, now */
static bool path_confirmed(VfsdFs *fs, const MigKey *key, const char *rel)
{
    struct statx stx;
    int fd = open_beneath(fs, rel);
    bool ok;

    if (fd < 0) {
        return false;
    }
    if (vfsd_statx(fd, &stx) == 0) {
        MigKey found = key_of_statx(&stx);

        ok = mig_key_equal(key, &found);
    } else {
        ok = false;
    }
    close(fd);
    return ok;
}

/*
 * The shared directory's own path, as /proc names our fds: "/" inside
 * the namespace sandbox, its host path otherwise.
 */
static bool share_path(VfsdFs *fs, char *root, size_t size)
{
    char name[32];
    ssize_t n;

    snprintf(name, sizeof(name), "%d", fs->inodes.root->fd);
    n = readlinkat(fs->proc_self_fd, name, root, size - 1);
    root[n > 0 ? n : 0] = 0;
    return n > 0 && root[0] == '/';
}

/*
 * The kernel's idea of the path of @fd (the file @key names), relative
 * to the shared directory whose own path is @root.  It can be stale (a
 * file unlinked, or renamed by someone outside the namespace), or name a
 * place outside the shared directory that happens to exist inside it
 * too: confirmed before use.
 */
static char *path_from_proc(VfsdFs *fs, int fd, const MigKey *key,
                            const char *root)
{
    char name[32], buf[PATH_MAX];
    size_t rlen = strlen(root);
    const char *rel;
    ssize_t n;

    snprintf(name, sizeof(name), "%d", fd);
    n = readlinkat(fs->proc_self_fd, name, buf, sizeof(buf) - 1);
    if (n <= 0) {
        return NULL;
    }
    buf[n] = 0;
    if (!strcmp(root, "/")) {
        rel = buf + 1;
    } else if (!strncmp(buf, root, rlen) && buf[rlen] == '/') {
        rel = buf + rlen + 1;
    } else {
        return NULL;
    }
    if (buf[0] != '/' || !valid_rel_path(rel) ||
        !path_confirmed(fs, key, rel)) {
        return NULL;
    }
    return g_strdup(rel);
}

/*
 * Where /proc did not tell: every path of the shared directory is tried
 * against the inodes still wanted (MigKey -> MigInode), breadth first,
 * each directory once, until none is wanted.  Slow, but only for what a
 * rename from outside the guest's sight made stale.
 */
static void find_paths_by_walk(VfsdFs *fs, GHashTable *wanted)
{
    g_autoptr(GQueue) dirs = g_queue_new();
    g_autoptr(GHashTable) seen = g_hash_table_new_full(mig_key_hash,
                                                       mig_key_equal,
                                                       g_free, NULL);
    char *dir;

    g_queue_push_tail(dirs, g_strdup(""));
    while (g_hash_table_size(wanted) && (dir = g_queue_pop_head(dirs))) {
        int fd = *dir ? open_beneath(fs, dir) : dup(fs->inodes.root->fd);
        int dfd = fd >= 0 ? openat(fd, ".", O_RDONLY | O_DIRECTORY |
                                   O_CLOEXEC) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *de;

        if (fd >= 0) {
            close(fd);
        }
        if (!d) {
            if (dfd >= 0) {
                close(dfd);
            }
            g_free(dir);
            continue;
        }
        while ((de = readdir(d))) {
            struct statx stx;
            MigKey k;
            MigInode *mi;
            char *path;

            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
                continue;
            }
            if (statx(dirfd(d), de->d_name, AT_SYMLINK_NOFOLLOW,
                      STATX_TYPE | STATX_INO | STATX_MNT_ID, &stx) < 0) {
                continue;
            }
            k = key_of_statx(&stx);
            path = *dir ? g_strdup_printf("%s/%s", dir, de->d_name) :
                          g_strdup(de->d_name);
            mi = g_hash_table_lookup(wanted, &k);
            if (mi) {
                mi->path = g_strdup(path);
                g_hash_table_remove(wanted, &k);
            }
            if (S_ISDIR(stx.stx_mode) && !g_hash_table_contains(seen, &k)) {
                g_hash_table_add(seen, g_memdup2(&k, sizeof(k)));
                g_queue_push_tail(dirs, path);
            } else {
                g_free(path);
            }
        }
        closedir(d);
        g_free(dir);
    }
    while ((dir = g_queue_pop_head(dirs))) {
        g_free(dir);
    }
}

static bool save_session(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    vfsd_mig_put_u32(w, fs->conn.proto_minor);
    vfsd_mig_put_u32(w, 0);
    vfsd_mig_put_u64(w, fs->conn.flags);
    vfsd_mig_put_u8(w, fs->conn.initialized);
    return true;
}

/*
 * Whether a file handle alone names @inode: in the file-handles mode, on
 * the shared directory's own mount, where the destination decodes it.  A
 * file on a submount goes by its path (the handle, if any, checks it).
 */
static bool named_by_handle(VfsdFs *fs, const VfsdInode *inode)
{
    return fs->opts->migration_mode == VFSD_MIG_FILE_HANDLES &&
           inode->mnt_id == fs->inodes.root->mnt_id;
}

/*
 * How the destination will find each inode of @all: its handle, its path
 * as /proc tells it, or failing that as a search of the shared directory
 * finds it; into @recs, one per inode.
 */
static void name_inodes(VfsdFs *fs, GPtrArray *all, MigInode *recs)
{
    g_autoptr(GHashTable) wanted = g_hash_table_new_full(mig_key_hash,
                                                         mig_key_equal,
                                                         g_free, NULL);
    bool want_handle = fs->opts->migration_mode == VFSD_MIG_FILE_HANDLES ||
                       fs->opts->migration_verify_handles;
    char root[PATH_MAX];
    bool have_root = share_path(fs, root, sizeof(root));
    unsigned int i;

    for (i = 0; i < all->len; i++) {
        MigInode *mi = &recs[i];
        MigKey k;

        mi->inode = g_ptr_array_index(all, i);
        if (mi->inode->lost) {
            continue;
        }
        k = key_of_inode(mi->inode);
        if (want_handle) {
            mi->handle = handle_of(mi->inode->fd);
        }
        if (mi->handle && named_by_handle(fs, mi->inode)) {
            continue;
        }
        if (have_root) {
            mi->path = path_from_proc(fs, mi->inode->fd, &k, root);
        }
        if (!mi->path) {
            g_hash_table_insert(wanted, g_memdup2(&k, sizeof(k)), mi);
        }
    }
    if (g_hash_table_size(wanted)) {
        vfsd_info("migration: %u inodes have no usable path in /proc, "
                  "searching the shared directory",
                  g_hash_table_size(wanted));
        find_paths_by_walk(fs, wanted);
    }
}

/* Writes @mi's record; returns its MIG_INODE_* flags (0: not found) */
static uint32_t put_inode_rec(VfsdFs *fs, VfsdMigWriter *w, MigInode *mi)
{
    uint32_t flags;

    /*
     * Without a path, a handle only goes as the file-handles mode's
     * name, where the destination decodes it on the right mount
     */
    if (!mi->path && mi->handle && !named_by_handle(fs, mi->inode)) {
        g_clear_pointer(&mi->handle, g_free);
    }
    flags = (mi->path ? MIG_INODE_PATH : 0) |
            (mi->handle ? MIG_INODE_HANDLE : 0);
    if (!flags) {
        /* The destination decides, by its --migration-on-error */
        vfsd_warn("migration: inode %" PRIu64 " (ino %" PRIu64 ") is "
                  "not found under the shared directory",
                  mi->inode->nodeid, (uint64_t)mi->inode->ino);
    }
    vfsd_mig_put_u64(w, mi->inode->nodeid);
    vfsd_mig_put_u64(w, mi->inode->nlookup);
    vfsd_mig_put_u32(w, mi->inode->type);
    vfsd_mig_put_u32(w, flags);
    if (mi->path) {
        vfsd_mig_put_blob(w, mi->path, strlen(mi->path));
    }
    if (mi->handle) {
        vfsd_mig_put_u32(w, mi->handle->handle_type);
        vfsd_mig_put_blob(w, mi->handle->f_handle, mi->handle->handle_bytes);
    }
    return flags;
}

static bool save_inodes(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    g_autoptr(GPtrArray) all = vfsd_inodes_snapshot(fs);
    g_autofree MigInode *recs = g_new0(MigInode, all->len ? all->len : 1);
    unsigned int i, unfound = 0, handle_only = 0;

    name_inodes(fs, all, recs);
    vfsd_mig_put_u64(w, all->len);
    for (i = 0; i < all->len; i++) {
        uint32_t flags = put_inode_rec(fs, w, &recs[i]);

        unfound += !flags;
        handle_only += flags == MIG_INODE_HANDLE;
        g_free(recs[i].path);
        g_free(recs[i].handle);
    }
    mig_of(fs)->inodes = all->len;
    mig_of(fs)->lost = unfound;
    mig_of(fs)->by_handle = handle_only;
    return true;
}

static GArray *locks_of_fd(VfsdFs *fs, int fd, const char *want);

/*
 * A handle's BSD lock (flock, on the handle's own fd) goes with it: 0
 * none, else MIG_LOCK_READ or MIG_LOCK_WRITE.  It is let go here, as
 * POSIX locks are in save_locks().
 */
static uint8_t save_flock(VfsdFs *fs, VfsdHandle *h)
{
    g_autoptr(GArray) held = NULL;
    MigHandedLock hl = { 0 };
    struct flock *l;

    if (h->is_dir) {
        return 0;
    }
    held = locks_of_fd(fs, h->fd, "FLOCK");
    if (!held->len) {
        return 0;
    }
    l = &g_array_index(held, struct flock, 0);
    hl.flock_op = l->l_type == F_WRLCK ? LOCK_EX : LOCK_SH;
    if (flock(h->fd, LOCK_UN) < 0) {
        vfsd_warn("migration: cannot release a BSD lock of inode %" PRIu64
                  ": %s", h->inode->nodeid, strerror(errno));
    } else {
        hl.handle = h;
        g_atomic_int_inc(&h->refcount);
        hl.inode = h->inode;
        vfsd_inode_ref(h->inode);
        g_array_append_val(mig_of(fs)->handed, hl);
    }
    return hl.flock_op == LOCK_EX ? MIG_LOCK_WRITE : MIG_LOCK_READ;
}

static bool save_handles(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    g_autoptr(GPtrArray) all = vfsd_handles_snapshot(fs);
    unsigned int i;

    vfsd_mig_put_u64(w, all->len);
    for (i = 0; i < all->len; i++) {
        VfsdHandle *h = g_ptr_array_index(all, i);

        vfsd_mig_put_u64(w, h->fh);
        vfsd_mig_put_u64(w, h->inode->nodeid);
        vfsd_mig_put_u32(w, h->is_dir ? O_RDONLY : h->flags & MIG_OPEN_FLAGS);
        vfsd_mig_put_u8(w, h->is_dir);
        vfsd_mig_put_u8(w, save_flock(fs, h));
    }
    mig_of(fs)->handles = all->len;
    return true;
}

/*
 * The locks of class @want (OFDLCK, FLOCK) on @fd, from
 * /proc/self/fdinfo (the kernel lists them there, and nowhere else by
 * open file).  Waiters ("->") are not held.
 */
static GArray *locks_of_fd(VfsdFs *fs, int fd, const char *want)
{
    GArray *out = g_array_new(false, false, sizeof(struct flock));
    g_autoptr(GString) buf = g_string_sized_new(4096);
    char name[48], chunk[4096];
    g_auto(GStrv) lines = NULL;
    ssize_t r;
    unsigned int i;
    int info;

    snprintf(name, sizeof(name), "../fdinfo/%d", fd);
    info = openat(fs->proc_self_fd, name, O_RDONLY | O_CLOEXEC);
    if (info < 0) {
        return out;
    }
    /*
     * Whole: an owner's every range is a line there, and a lock left
     * out would be silently dropped by the migration
     */
    for (;;) {
        r = read(info, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            vfsd_warn("migration: cannot read the locks of fd %d: %s", fd,
                      strerror(errno));
        }
        if (r <= 0) {
            break;
        }
        g_string_append_len(buf, chunk, r);
    }
    close(info);
    lines = g_strsplit(buf->str, "\n", -1);
    for (i = 0; lines[i]; i++) {
        char cls[16], kind[16], type[16], end[32];
        unsigned long long start;
        struct flock l = { .l_whence = SEEK_SET };

        if (!g_str_has_prefix(lines[i], "lock:") ||
            strstr(lines[i], "->") ||
            sscanf(lines[i], "lock: %*d: %15s %15s %15s %*d %*s %llu %31s",
                   cls, kind, type, &start, end) != 5 ||
            strcmp(cls, want)) {
            continue;
        }
        l.l_type = !strcmp(type, "WRITE") ? F_WRLCK : F_RDLCK;
        l.l_start = start;
        l.l_len = !strcmp(end, "EOF") ? 0 :
                  (off_t)(g_ascii_strtoull(end, NULL, 10) - start + 1);
        g_array_append_val(out, l);
    }
    return out;
}

/*
 * Each guest lock goes into the stream and is let go here, so that the
 * destination (on the same host, or on a shared file system) can take
 * it; vfsd_migrate_resume() takes it back if the guest stays.
 */
static bool save_locks(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    g_autoptr(GPtrArray) all = vfsd_inodes_snapshot(fs);
    VfsdMig *m = mig_of(fs);
    size_t count_at;
    uint64_t count = 0;
    unsigned int i, j;

    count_at = vfsd_mig_tell(w);
    vfsd_mig_put_u64(w, 0);
    for (i = 0; i < all->len; i++) {
        VfsdInode *inode = g_ptr_array_index(all, i);
        GHashTableIter it;
        gpointer owner, fdp;

        g_mutex_lock(&inode->plock_lock);
        if (!inode->plocks) {
            g_mutex_unlock(&inode->plock_lock);
            continue;
        }
        g_hash_table_iter_init(&it, inode->plocks);
        while (g_hash_table_iter_next(&it, &owner, &fdp)) {
            int fd = GPOINTER_TO_INT(fdp) - 1;
            g_autoptr(GArray) held = locks_of_fd(fs, fd, "OFDLCK");

            for (j = 0; j < held->len; j++) {
                struct flock l = g_array_index(held, struct flock, j);
                struct flock un = l;
                MigHandedLock hl = {
                    .inode = inode,
                    .owner = *(uint64_t *)owner,
                    .l = l,
                };

                vfsd_mig_put_u64(w, inode->nodeid);
                vfsd_mig_put_u64(w, hl.owner);
                vfsd_mig_put_u32(w, l.l_type == F_WRLCK ? MIG_LOCK_WRITE :
                                                          MIG_LOCK_READ);
                vfsd_mig_put_u64(w, l.l_start);
                vfsd_mig_put_u64(w, l.l_len);
                count++;
                un.l_type = F_UNLCK;
                if (fcntl(fd, F_OFD_SETLK, &un) < 0) {
                    vfsd_warn("migration: cannot release a lock of inode "
                              "%" PRIu64 ": %s", inode->nodeid,
                              strerror(errno));
                    continue;
                }
                vfsd_inode_ref(inode);
                g_array_append_val(m->handed, hl);
            }
        }
        g_mutex_unlock(&inode->plock_lock);
    }
    vfsd_mig_patch_u64(w, count_at, count);
    m->locks = count;
    return true;
}

void vfsd_migrate_resume(VfsdFs *fs)
{
    VfsdMig *m = fs->mig;
    unsigned int i;

    if (!m || !m->handed->len) {
        return;
    }
    for (i = 0; i < m->handed->len; i++) {
        MigHandedLock *hl = &g_array_index(m->handed, MigHandedLock, i);
        VfsdInode *inode = hl->inode;
        gpointer fdp = NULL;
        int ret = -EBADF;

        if (hl->handle) {
            ret = flock(hl->handle->fd, hl->flock_op | LOCK_NB) < 0 ?
                  -errno : 0;
        } else {
            g_mutex_lock(&inode->plock_lock);
            if (inode->plocks) {
                fdp = g_hash_table_lookup(inode->plocks, &hl->owner);
            }
            if (fdp) {
                ret = fcntl(GPOINTER_TO_INT(fdp) - 1, F_OFD_SETLK, &hl->l);
                ret = ret < 0 ? -errno : 0;
            }
            g_mutex_unlock(&inode->plock_lock);
        }
        if (ret < 0) {
            vfsd_err("migration failed and a guest lock of inode %" PRIu64
                     " cannot be taken back: %s", inode->nodeid,
                     strerror(-ret));
        }
    }
    vfsd_info("migration did not complete: %u guest locks taken back",
              m->handed->len);
    mig_drop_handed(m);
}

/*
 * Something of the guest's the destination cannot restore: under
 * --migration-on-error=guest-error the inode is lost (EIO for the guest)
 * and the load goes on; under abort the load fails.
 */
static bool restore_failed(VfsdFs *fs, uint64_t nodeid, char **err,
                           const char *fmt, ...) G_GNUC_PRINTF(4, 5);

static bool restore_failed(VfsdFs *fs, uint64_t nodeid, char **err,
                           const char *fmt, ...)
{
    static VfsdRateLimit lost_rl;
    g_autofree char *why = NULL;
    va_list ap;

    va_start(ap, fmt);
    why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (fs->opts->migration_on_error == VFSD_MIG_ABORT) {
        *err = g_strdup_printf("inode %" PRIu64 ": %s", nodeid, why);
        return false;
    }
    if (mig_of(fs)->lost >= MIG_MAX_LOST) {
        *err = g_strdup_printf("more than %u files the guest knows cannot "
                               "be found (is this the source's shared "
                               "directory?); the last: inode %" PRIu64
                               ": %s", MIG_MAX_LOST, nodeid, why);
        return false;
    }
    /* A stream can hold a million of them: the total goes in the log */
    vfsd_log_rl(&lost_rl, VFSD_LOG_WARN, "migration: inode %" PRIu64
                ": %s; the guest gets EIO on it", nodeid, why);
    vfsd_inode_set_lost(fs, nodeid);
    mig_of(fs)->lost++;
    return true;
}

static bool load_session(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    uint32_t minor = vfsd_mig_get_u32(r);
    uint64_t flags, offered;
    uint8_t initialized;

    vfsd_mig_get_u32(r);
    flags = vfsd_mig_get_u64(r);
    initialized = vfsd_mig_get_u8(r);
    if (r->bad || initialized > 1 ||
        (initialized && (minor < VFSD_MIN_MINOR ||
                         minor > VFSD_PROTO_MINOR))) {
        *err = g_strdup("bad session section");
        return false;
    }
    /*
     * What the guest and the source agreed on changes how requests are
     * read (FUSE_SECURITY_CTX, FUSE_SETXATTR_EXT) and what they may do:
     * a flag our options would not have offered means other options, or
     * a forged stream.  Dropping it would misread the guest's requests.
     */
    offered = vfsd_init_flags_offered(fs);
    if (flags & ~offered) {
        *err = g_strdup_printf("the source's FUSE session agreed on flags "
                               "0x%" PRIx64 " that this daemon's options "
                               "do not offer (start it with the source's "
                               "options)", flags & ~offered);
        return false;
    }
    fs->conn.proto_minor = minor;
    fs->conn.flags = flags;
    fs->conn.initialized = initialized;
    return true;
}

static bool valid_type(uint32_t t)
{
    return t == S_IFREG || t == S_IFDIR || t == S_IFLNK || t == S_IFCHR ||
           t == S_IFBLK || t == S_IFIFO || t == S_IFSOCK;
}

/*
 * The inode under @path, checked against @handle when there is one: an
 * O_PATH fd or -errno.
 */
static int find_inode(VfsdFs *fs, const char *path, int handle_type,
                      const uint8_t *hbytes, uint32_t hlen, const char **why)
{
    int fd = open_beneath(fs, path);

    *why = "cannot open its path";
    if (fd >= 0 && hlen) {
        g_autofree struct file_handle *mine = handle_of(fd);

        /* Someone replaced the file under its path */
        if (!mine || mine->handle_type != handle_type ||
            mine->handle_bytes != hlen ||
            memcmp(mine->f_handle, hbytes, hlen)) {
            close(fd);
            *why = "its path leads to another file (file handles differ)";
            return -ESTALE;
        }
    }
    return fd;
}

/*
 * The file a handle alone names, as the broker identifies it on the
 * shared directory's mount (this process cannot open handles): its key
 * and type, to be looked for beneath the shared directory.
 */
static int identify_handle(VfsdFs *fs, int handle_type,
                           const uint8_t *hbytes, uint32_t hlen, MigKey *k,
                           mode_t *type, const char **why)
{
    uint64_t ino;
    dev_t dev;
    int ret;

    *why = "cannot open its file handle";
    if (!fs->broker) {
        /* Neither the capability nor the broker: say what to do */
        *why = "cannot open its file handle, as this daemon opens none "
               "(start it with --migration-mode=file-handles, as the "
               "source, and with CAP_DAC_READ_SEARCH)";
        return -EPERM;
    }
    ret = vfsd_broker_identify(fs->broker, handle_type, hbytes, hlen, &dev,
                               &ino, type);
    if (ret == 0) {
        k->dev = dev;
        k->ino = ino;
        k->mnt_id = fs->inodes.root->mnt_id;
    }
    return ret;
}

/*
 * Restores @nodeid on @fd, or (@fd a negative errno, or a file another
 * nodeid has) as lost for @why under --migration-on-error: false when
 * the load must stop, with *err set.
 */
static bool restore_one(VfsdFs *fs, uint64_t nodeid, uint64_t nlookup,
                        uint32_t type, int fd, const struct statx *stx,
                        const char *why, const char *path, char **err)
{
    if (fd >= 0) {
        if (vfsd_inode_restore(fs, nodeid, nlookup, fd, stx, type)) {
            /* Found by its handle alone, no path given */
            mig_of(fs)->by_handle += !path;
            return true;
        }
        vfsd_fd_close(fs, fd);
        fd = -EEXIST;
        why = "another nodeid has the same file";
    }
    /* A nodeid twice is a corrupt stream whatever the policy */
    if (!vfsd_inode_restore(fs, nodeid, nlookup, -1, NULL, type)) {
        *err = g_strdup_printf("nodeid %" PRIu64 " given twice", nodeid);
        return false;
    }
    return restore_failed(fs, nodeid, err, "%s%s%s: %s", why,
                          path ? " " : "", path ? path : "", strerror(-fd));
}

/*
 * A record that names its file by handle alone, identified but not yet
 * found beneath the shared directory
 */
typedef struct MigPending {
    MigInode mi;                /* path: where the search found it */
    uint64_t nodeid, nlookup;
    uint32_t type;
    MigKey key;
} MigPending;

/*
 * A file handle is a name for any file of a file system, and the stream
 * comes from a source a guest may have taken over: a handle decodes to
 * whatever file it names, in the shared directory or not.  So this
 * process never opens one: the broker says which file it names on the
 * shared directory's mount (where the source sends handles alone from),
 * and the file is restored only where a search of the shared directory
 * finds it, opened by that path.  Anything else is treated as a file
 * that cannot be found.
 */
static bool restore_pending(VfsdFs *fs, GPtrArray *pending,
                            GHashTable *wanted, char **err)
{
    unsigned int i;

    if (!pending->len) {
        return true;
    }
    vfsd_info("migration: %u files named by handle alone, searching the "
              "shared directory", pending->len);
    find_paths_by_walk(fs, wanted);
    for (i = 0; i < pending->len; i++) {
        MigPending *p = g_ptr_array_index(pending, i);
        struct statx stx = { 0 };
        MigKey found;
        int fd = -ENOENT;

        if (p->mi.path && !vfsd_fd_reserve(fs)) {
            fd = -ENFILE;
        } else if (p->mi.path) {
            fd = open_beneath(fs, p->mi.path);
            if (fd >= 0 && vfsd_statx(fd, &stx) == 0) {
                found = key_of_statx(&stx);
            }
            /* Renamed again since the search: as good as not found */
            if (fd >= 0 && (!mig_key_equal(&found, &p->key) ||
                            (stx.stx_mode & S_IFMT) != p->type)) {
                close(fd);
                fd = -ENOENT;
            }
            if (fd < 0) {
                vfsd_fd_release(fs);
            }
        }
        if (!restore_one(fs, p->nodeid, p->nlookup, p->type, fd, &stx,
                         "its file handle names no file under the shared "
                         "directory", NULL, err)) {
            return false;
        }
    }
    return true;
}

static void mig_pending_free(gpointer p)
{
    MigPending *pd = p;

    g_free(pd->mi.path);
    g_free(pd);
}

/* A record of the inodes section, as the stream gives it */
typedef struct MigInodeRec {
    uint64_t nodeid, nlookup;
    uint32_t type;
    uint32_t flags;             /* MIG_INODE_* */
    char *path;                 /* NULL: none given */
    int handle_type;
    const uint8_t *handle;      /* into the stream; NULL: none given */
    uint32_t handle_len;
} MigInodeRec;

static void mig_inode_rec_clear(MigInodeRec *rec)
{
    g_free(rec->path);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MigInodeRec, mig_inode_rec_clear)

/* The next record of the inodes section: false when it is malformed */
static bool read_inode_rec(VfsdMigReader *r, MigInodeRec *rec)
{
    const uint8_t *p;
    uint32_t len;

    rec->nodeid = vfsd_mig_get_u64(r);
    rec->nlookup = vfsd_mig_get_u64(r);
    rec->type = vfsd_mig_get_u32(r);
    rec->flags = vfsd_mig_get_u32(r);
    if (rec->flags & MIG_INODE_PATH) {
        p = vfsd_mig_get_blob(r, PATH_MAX - 1, &len);
        /* Checked as the string it becomes: no NUL inside */
        if (p && !memchr(p, 0, len)) {
            rec->path = g_strndup((const char *)p, len);
        }
        if (!rec->path || !valid_rel_path(rec->path)) {
            r->bad = true;
        }
    }
    if (rec->flags & MIG_INODE_HANDLE) {
        rec->handle_type = (int)vfsd_mig_get_u32(r);
        rec->handle = vfsd_mig_get_blob(r, MAX_HANDLE_SZ, &rec->handle_len);
        if (!rec->handle_len) {
            r->bad = true;
        }
    }
    return !r->bad && rec->nodeid > FUSE_ROOT_ID &&
           rec->nodeid <= MIG_ID_MAX && rec->nlookup &&
           valid_type(rec->type) && !(rec->flags & ~MIG_INODE_FLAGS);
}

/*
 * The file of a record that gives its path, checked against its handle
 * if it gives one too: an O_PATH fd, with its *stx, or a negative errno
 * and *why.  A record with neither path nor handle is a file the source
 * could not find.
 */
static int locate_by_path(VfsdFs *fs, const MigInodeRec *rec,
                          struct statx *stx, const char **why)
{
    int fd;

    if (!rec->path) {
        *why = "the source found no path to it";
        return -ENOENT;
    }
    if (!vfsd_fd_reserve(fs)) {
        *why = "too many open files";
        return -ENFILE;
    }
    fd = find_inode(fs, rec->path, rec->handle_type, rec->handle,
                    rec->handle_len, why);
    if (fd < 0) {
        vfsd_fd_release(fs);
        return fd;
    }
    if (vfsd_statx(fd, stx) < 0 || (stx->stx_mode & S_IFMT) != rec->type) {
        vfsd_fd_close(fs, fd);
        *why = "its path leads to a file of another type";
        return -ESTALE;
    }
    return fd;
}

/*
 * A record that names its file by handle alone: once the broker has
 * identified the file, the record waits in @pending (its key in
 * @wanted) for restore_pending() to find it.  0 when it waits, else a
 * negative errno and *why.
 */
static int defer_by_handle(VfsdFs *fs, const MigInodeRec *rec,
                           GPtrArray *pending, GHashTable *wanted,
                           const char **why)
{
    MigPending *pd;
    mode_t found;
    MigKey k;
    int ret;

    ret = identify_handle(fs, rec->handle_type, rec->handle,
                          rec->handle_len, &k, &found, why);
    if (ret < 0) {
        return ret;
    }
    if (found != rec->type) {
        *why = "its file handle names a file of another type";
        return -ESTALE;
    }
    if (g_hash_table_contains(wanted, &k)) {
        *why = "another nodeid has the same file";
        return -EEXIST;
    }
    pd = g_new0(MigPending, 1);
    pd->nodeid = rec->nodeid;
    pd->nlookup = rec->nlookup;
    pd->type = rec->type;
    pd->key = k;
    g_ptr_array_add(pending, pd);
    g_hash_table_insert(wanted, g_memdup2(&k, sizeof(k)), &pd->mi);
    return 0;
}

/*
 * Each record is read, then its file located (by its path, or by its
 * handle through the broker), then restored, or lost under
 * --migration-on-error; those named by handle alone wait for one search
 * of the shared directory at the end.
 */
static bool load_inodes(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    g_autoptr(GPtrArray) pending =
        g_ptr_array_new_with_free_func(mig_pending_free);
    g_autoptr(GHashTable) wanted = g_hash_table_new_full(mig_key_hash,
                                                         mig_key_equal,
                                                         g_free, NULL);
    uint64_t count, i;

    if (!vfsd_mig_get_count(r, MIG_INODE_MIN, &count)) {
        *err = g_strdup("bad inode count");
        return false;
    }
    for (i = 0; i < count; i++) {
        g_auto(MigInodeRec) rec = { 0 };
        const char *why = NULL;
        struct statx stx;
        int fd;

        if (!read_inode_rec(r, &rec)) {
            *err = g_strdup_printf("bad inode record %" PRIu64, i);
            return false;
        }
        if (rec.flags == MIG_INODE_HANDLE) {
            fd = defer_by_handle(fs, &rec, pending, wanted, &why);
            if (!fd) {
                continue;
            }
        } else {
            fd = locate_by_path(fs, &rec, &stx, &why);
        }
        if (!restore_one(fs, rec.nodeid, rec.nlookup, rec.type, fd, &stx,
                         why, rec.path, err)) {
            return false;
        }
    }
    if (!restore_pending(fs, pending, wanted, err)) {
        return false;
    }
    mig_of(fs)->inodes = count;
    return true;
}

/*
 * The inode of a handle or lock record: NULL with *skip when it is lost
 * (the guest gets EIO there anyway), NULL alone for a nodeid the stream
 * never gave, which is a corrupt stream.
 */
static VfsdInode *record_inode(VfsdFs *fs, uint64_t nodeid, bool *skip)
{
    VfsdInode *inode = vfsd_inode_get(fs, nodeid);

    *skip = !inode && vfsd_inode_lost(fs, nodeid);
    return inode;
}

static bool load_handles(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    uint64_t count, i;

    if (!vfsd_mig_get_count(r, MIG_HANDLE_MIN, &count)) {
        *err = g_strdup("bad handle count");
        return false;
    }
    for (i = 0; i < count; i++) {
        uint64_t fh = vfsd_mig_get_u64(r);
        uint64_t nodeid = vfsd_mig_get_u64(r);
        uint32_t flags = vfsd_mig_get_u32(r);
        uint8_t is_dir = vfsd_mig_get_u8(r);
        uint8_t flock_type = vfsd_mig_get_u8(r);
        g_autoptr(VfsdInode) inode = NULL;
        bool skip;
        int fd;

        if (r->bad || !fh || fh > MIG_ID_MAX || is_dir > 1 ||
            (flags & ~MIG_OPEN_FLAGS) || flock_type > MIG_LOCK_WRITE ||
            (is_dir && flock_type)) {
            *err = g_strdup_printf("bad handle record %" PRIu64, i);
            return false;
        }
        inode = record_inode(fs, nodeid, &skip);
        if (skip) {
            continue;
        }
        if (!inode || (inode->type == S_IFDIR) != is_dir) {
            *err = g_strdup_printf("handle %" PRIu64 " of unknown inode %"
                                   PRIu64, fh, nodeid);
            return false;
        }
        fd = vfsd_fd_open(fs, inode, is_dir ? O_RDONLY | O_DIRECTORY :
                                              (int)flags);
        if (fd < 0) {
            if (!restore_failed(fs, nodeid, err, "cannot open handle %"
                                PRIu64 " again: %s", fh, strerror(-fd))) {
                return false;
            }
            continue;
        }
        if (!vfsd_handle_restore(fs, fh, fd, (int)flags, inode, is_dir)) {
            vfsd_fd_close(fs, fd);
            *err = g_strdup_printf("handle %" PRIu64 " given twice", fh);
            return false;
        }
        if (flock_type &&
            flock(fd, (flock_type == MIG_LOCK_WRITE ? LOCK_EX : LOCK_SH) |
                      LOCK_NB) < 0 &&
            !restore_failed(fs, nodeid, err, "cannot take the guest's BSD "
                            "lock of handle %" PRIu64 " again: %s", fh,
                            strerror(errno))) {
            return false;
        }
    }
    mig_of(fs)->handles = count;
    return true;
}

static bool load_locks(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    uint64_t count, i;

    if (!vfsd_mig_get_count(r, MIG_LOCK_MIN, &count)) {
        *err = g_strdup("bad lock count");
        return false;
    }
    for (i = 0; i < count; i++) {
        uint64_t nodeid = vfsd_mig_get_u64(r);
        uint64_t owner = vfsd_mig_get_u64(r);
        uint32_t type = vfsd_mig_get_u32(r);
        uint64_t start = vfsd_mig_get_u64(r);
        uint64_t len = vfsd_mig_get_u64(r);
        g_autoptr(VfsdInode) inode = NULL;
        struct flock l = { .l_whence = SEEK_SET };
        bool skip;
        int fd;

        if (r->bad || (type != MIG_LOCK_READ && type != MIG_LOCK_WRITE) ||
            start > INT64_MAX || len > INT64_MAX - start) {
            *err = g_strdup_printf("bad lock record %" PRIu64, i);
            return false;
        }
        inode = record_inode(fs, nodeid, &skip);
        if (skip) {
            continue;
        }
        if (!inode || inode->type != S_IFREG) {
            *err = g_strdup_printf("lock on unknown inode %" PRIu64, nodeid);
            return false;
        }
        l.l_type = type == MIG_LOCK_WRITE ? F_WRLCK : F_RDLCK;
        l.l_start = start;
        l.l_len = len;
        fd = vfsd_inode_plock_fd(inode, owner, type == MIG_LOCK_WRITE ?
                                 O_WRONLY : O_RDONLY, false);
        if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &l) < 0) {
            fd = -errno;
        }
        if (fd < 0 &&
            !restore_failed(fs, nodeid, err, "cannot take the guest's %s "
                            "lock at %" PRIu64 "+%" PRIu64 " again: %s",
                            type == MIG_LOCK_WRITE ? "write" : "read",
                            start, len, strerror(-fd))) {
            return false;
        }
    }
    mig_of(fs)->locks = count;
    return true;
}

static bool save_requests(VfsdFs *fs, VfsdMigWriter *w, char **err)
{
    VfsdMigHook *hook = &mig_of(fs)->hook;

    return !hook->save || hook->save(hook->opaque, w, err);
}

static bool load_requests(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    VfsdMigHook *hook = &mig_of(fs)->hook;

    if (!hook->load) {
        *err = g_strdup("the state carries requests in flight, and "
                        "nothing here can take them");
        return false;
    }
    return hook->load(hook->opaque, r, err);
}

/*
 * The sections, in the order they are written and must be read: each
 * one's load may rely on those above it (handles on inodes).  A layer
 * with state of its own adds a row with its save and load; those only
 * see the stream through migstream.h.  A save that writes nothing leaves
 * its section out.
 */
static const struct {
    uint32_t type;
    const char *name;
    bool (*save)(VfsdFs *fs, VfsdMigWriter *w, char **err);
    bool (*load)(VfsdFs *fs, VfsdMigReader *r, char **err);
} sections[] = {
    { VFSD_MIG_SEC_SESSION, "session", save_session, load_session },
    { VFSD_MIG_SEC_INODES, "inodes", save_inodes, load_inodes },
    { VFSD_MIG_SEC_HANDLES, "handles", save_handles, load_handles },
    { VFSD_MIG_SEC_LOCKS, "locks", save_locks, load_locks },
    /* Checked on load, mapped only once the whole stream is */
    { VFSD_MIG_SEC_DAX, "dax mappings", vfsd_dax_save, vfsd_dax_load },
    /* Requests that wait on the locks and files above */
    { VFSD_MIG_SEC_REQUESTS, "requests", save_requests, load_requests },
};

GByteArray *vfsd_migrate_save(VfsdFs *fs, char **err)
{
    GByteArray *buf = g_byte_array_new();
    VfsdMigWriter w = { .buf = buf };
    int64_t t0 = g_get_monotonic_time();
    unsigned int i;

    /* Locks let go by an earlier attempt came back when queues started */
    mig_drop_handed(mig_of(fs));
    vfsd_mig_put_bytes(&w, VFSD_MIG_MAGIC, VFSD_MIG_MAGIC_LEN);
    vfsd_mig_put_u32(&w, VFSD_MIG_VERSION);
    vfsd_mig_put_u32(&w, 0);
    for (i = 0; i < G_N_ELEMENTS(sections); i++) {
        size_t len_at, start;

        if (!sections[i].save) {
            continue;
        }
        vfsd_mig_put_u32(&w, sections[i].type);
        vfsd_mig_put_u32(&w, 0);
        len_at = vfsd_mig_tell(&w);
        vfsd_mig_put_u64(&w, 0);
        start = vfsd_mig_tell(&w);
        if (!sections[i].save(fs, &w, err)) {
            g_byte_array_unref(buf);
            return NULL;
        }
        if (vfsd_mig_tell(&w) == start) {
            g_byte_array_set_size(buf, len_at - 8);
            continue;
        }
        vfsd_mig_patch_u64(&w, len_at, vfsd_mig_tell(&w) - start);
    }
    vfsd_mig_put_u32(&w, VFSD_MIG_SEC_END);
    vfsd_mig_put_u32(&w, 0);
    vfsd_mig_put_u64(&w, 0);
    vfsd_info("migration: state saved, %u bytes: %" PRIu64 " inodes (%"
              PRIu64 " without a path, %" PRIu64 " by file handle only), %"
              PRIu64 " handles, %" PRIu64 " locks, in %" PRId64 " us",
              buf->len, fs->mig->inodes, fs->mig->lost, fs->mig->by_handle,
              fs->mig->handles, fs->mig->locks, g_get_monotonic_time() - t0);
    return buf;
}

/* The stream's header: false, with *err, for a stream we cannot read */
static bool load_header(VfsdMigReader *r, char **err)
{
    char magic[VFSD_MIG_MAGIC_LEN];
    uint32_t version, hflags;

    vfsd_mig_get_bytes(r, magic, sizeof(magic));
    version = vfsd_mig_get_u32(r);
    hflags = vfsd_mig_get_u32(r);
    if (r->bad || memcmp(magic, VFSD_MIG_MAGIC, sizeof(magic))) {
        *err = g_strdup("not a virtiofsd state stream of ours (the source "
                        "may be another daemon)");
        return false;
    }
    /* Version 1 defines no header flag */
    if (version != VFSD_MIG_VERSION || hflags) {
        *err = g_strdup_printf("state stream version %u (flags 0x%x), this "
                               "daemon reads version %d", version, hflags,
                               VFSD_MIG_VERSION);
        return false;
    }
    return true;
}

/*
 * The sections up to the end mark, each loaded by its row of sections[],
 * in the rows' order; one this daemon cannot load is skipped if it is
 * optional, else the load fails.
 */
static bool load_sections(VfsdFs *fs, VfsdMigReader *r, char **err)
{
    unsigned int next = 0;

    for (;;) {
        uint32_t type = vfsd_mig_get_u32(r);
        uint32_t flags = vfsd_mig_get_u32(r);
        uint64_t slen = vfsd_mig_get_u64(r);
        VfsdMigReader sub;
        unsigned int i;

        if (r->bad || slen > vfsd_mig_remaining(r)) {
            *err = g_strdup("truncated state stream");
            return false;
        }
        if (flags & ~VFSD_MIG_SEC_OPTIONAL) {
            *err = g_strdup_printf("state section type %u has unknown "
                                   "flags 0x%x", type, flags);
            return false;
        }
        if (type == VFSD_MIG_SEC_END) {
            return true;
        }
        vfsd_mig_reader_init(&sub, r->p + r->pos, slen);
        r->pos += slen;
        for (i = next; i < G_N_ELEMENTS(sections); i++) {
            if (sections[i].type == type) {
                break;
            }
        }
        if (i == G_N_ELEMENTS(sections) || !sections[i].load) {
            if (flags & VFSD_MIG_SEC_OPTIONAL) {
                vfsd_warn("migration: section type %u skipped", type);
                continue;
            }
            *err = g_strdup_printf("state section type %u unknown, out of "
                                   "order, or not supported here", type);
            return false;
        }
        next = i + 1;
        if (!sections[i].load(fs, &sub, err)) {
            return false;
        }
        if (sub.bad || vfsd_mig_remaining(&sub)) {
            *err = g_strdup_printf("bad %s section", sections[i].name);
            return false;
        }
    }
}

bool vfsd_migrate_load(VfsdFs *fs, const uint8_t *p, size_t len, char **err)
{
    VfsdMigReader r;
    int64_t t0 = g_get_monotonic_time();
    VfsdMig *m;

    if (fs->conn.initialized) {
        *err = g_strdup("the destination serves a guest already");
        return false;
    }
    m = mig_of(fs);
    m->inodes = m->handles = m->locks = m->lost = m->by_handle = 0;
    vfsd_mig_reader_init(&r, p, len);
    if (!load_header(&r, err) || !load_sections(fs, &r, err)) {
        return false;
    }
    if (vfsd_mig_remaining(&r)) {
        *err = g_strdup("data after the end of the state stream");
        return false;
    }
    vfsd_info("migration: state restored, %zu bytes: %" PRIu64 " inodes (%"
              PRIu64 " by file handle only), %" PRIu64 " handles, %" PRIu64
              " locks, %" PRIu64 " lost, in %" PRId64 " us", len, m->inodes,
              m->by_handle, m->handles, m->locks, m->lost,
              g_get_monotonic_time() - t0);
    return true;
}

struct VfsdMigXfer {
    VfsdFs *fs;
    VfsdMigDir dir;
    int fd;
    GThread *thread;
    GByteArray *buf;
    char *err;                  /* the thread's */
};

static gpointer xfer_thread(gpointer opaque)
{
    VfsdMigXfer *x = opaque;

    if (x->dir == VFSD_MIG_SAVE) {
        size_t done = 0;

        while (done < x->buf->len) {
            ssize_t n = write(x->fd, x->buf->data + done, x->buf->len - done);

            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                x->err = g_strdup_printf("cannot send the state: %s",
                                         n < 0 ? strerror(errno) : "closed");
                break;
            }
            done += n;
        }
    } else {
        uint8_t chunk[65536];

        for (;;) {
            ssize_t n = read(x->fd, chunk, sizeof(chunk));

            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0) {
                x->err = g_strdup_printf("cannot receive the state: %s",
                                         strerror(errno));
                break;
            }
            if (!n) {
                break;
            }
            if (x->buf->len + n > VFSD_MIG_MAX_STATE) {
                x->err = g_strdup_printf("state larger than %llu bytes",
                                         VFSD_MIG_MAX_STATE);
                break;
            }
            g_byte_array_append(x->buf, chunk, n);
        }
    }
    /* End of file for the front-end when saving */
    close(x->fd);
    x->fd = -1;
    return NULL;
}

VfsdMigXfer *vfsd_migrate_begin(VfsdFs *fs, VfsdMigDir dir, int fd,
                                char **err)
{
    VfsdMigXfer *x = g_new0(VfsdMigXfer, 1);

    x->fs = fs;
    x->dir = dir;
    x->fd = fd;
    if (dir == VFSD_MIG_SAVE) {
        x->buf = vfsd_migrate_save(fs, err);
        if (!x->buf) {
            close(fd);
            g_free(x);
            return NULL;
        }
    } else {
        x->buf = g_byte_array_new();
    }
    x->thread = g_thread_new("vfsd-migrate", xfer_thread, x);
    return x;
}

bool vfsd_migrate_end(VfsdMigXfer *x, char **err)
{
    bool ok;

    g_thread_join(x->thread);
    ok = !x->err;
    if (!ok) {
        *err = g_steal_pointer(&x->err);
    } else if (x->dir == VFSD_MIG_LOAD) {
        ok = vfsd_migrate_load(x->fs, x->buf->data, x->buf->len, err);
        /*
         * The DAX window's mappings, now that all of the stream is read
         * and checked: the front-end serves our map requests while it
         * waits for our answer to CHECK_DEVICE_STATE, and runs the guest
         * only after it.  A mapping that fails fails the migration
         * whatever --migration-on-error says: the guest would read zeros.
         */
        if (ok) {
            ok = vfsd_dax_restore(x->fs, err);
        } else {
            vfsd_dax_load_cancel(x->fs);
        }
    }
    g_byte_array_unref(x->buf);
    g_free(x);
    return ok;
}
