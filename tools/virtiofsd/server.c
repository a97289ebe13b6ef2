/*
 * virtiofsd: FUSE request decoding and dispatch
 *
 * Everything here comes from the guest and is checked against the real
 * buffer lengths: the lengths inside the FUSE headers are claims, not
 * facts.  A request that does not decode gets an error reply and a
 * rate-limited log line; it never takes the daemon down.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "server.h"
#include "capture.h"
#include "dax.h"
#include "fs-dir.h"
#include "fs-entry.h"
#include "fs-file.h"
#include "fs-xattr.h"
#include "fs.h"
#include "fuse-ops.h"
#include "inode.h"
#include "intr.h"
#include "log.h"
#include "opnames.h"
#include "stats.h"

#define VFSD_MAX_PAGES (VFSD_MAX_IO / VFSD_PAGE_SIZE)
#define VFSD_MAX_XATTR_SIZE (64 * 1024)
/* FUSE_REMOVEMAPPING_MAX_ENTRY of a 4 KiB-page guest */
#define VFSD_MAX_REMOVEMAPPING 256
#define VFSD_MAX_BATCH_FORGET 65536
/* Most we hand to the guest per READDIR */
#define VFSD_MAX_READDIR (128 * 1024)
/*
 * The most argument bytes copied out of a request: a full BATCH_FORGET
 * (16 bytes per entry) with room to spare.  What lies past it is never
 * read, as the handlers read no further than they need.
 */
#define VFSD_MAX_ARGS (2 * 1024 * 1024)

typedef struct VfsdReq VfsdReq;

/*
 * How one opcode is served: a row of ops[] (below), made from the list
 * of fuse-ops.h.  The handler gets the row's variant, which tells apart
 * the two opcodes it serves (RMDIR is UNLINK of a directory); handlers
 * of one opcode ignore it.
 */
typedef struct VfsdOp {
    const char *name;
    void (*handler)(VfsdReq *r, bool variant);
    bool variant;
    unsigned int flags;
} VfsdOp;

struct VfsdReq {
    VfsdFs *fs;
    const VfsdOp *op;           /* the opcode's row, for its name too */
    VfsdBuf *in;
    VfsdBuf *out;
    struct fuse_in_header h;
    VfsdCtx ctx;
    bool no_wait;               /* a SETLKW must not wait (see server.h) */
    VfsdBuf ext;                /* the request extensions (total_extlen) */
    size_t written;
    /* What ctx.label_name and ctx.label point into; 0 or an errno */
    char *label_mem;
    int label_err;
};

/*
 * Sends the reply: a header and up to two pieces of payload.  An error
 * carries no payload.  A reply that does not fit the guest's buffer
 * becomes an error reply, if even that fits.  Returns whether the payload
 * reached the guest: what it carries (a lookup, a file handle) is the
 * guest's only then.
 */
static bool reply_full(VfsdReq *r, int err, const void *a, size_t alen,
                       const void *b, size_t blen)
{
    struct fuse_out_header oh = {
        .unique = r->h.unique,
    };
    VfsdBuf *out = r->out;

    if (err) {
        alen = blen = 0;
    } else if (vfsd_buf_remaining(out) < sizeof(oh) + alen + blen) {
        vfsd_guest_error("%s: reply of %zu bytes does not fit in %zu",
                         r->op->name, sizeof(oh) + alen + blen,
                         vfsd_buf_remaining(out));
        err = -EIO;
        alen = blen = 0;
    }
    oh.error = err;
    oh.len = sizeof(oh) + alen + blen;
    if (!vfsd_buf_write(out, &oh, sizeof(oh)) ||
        (alen && !vfsd_buf_write(out, a, alen)) ||
        (blen && !vfsd_buf_write(out, b, blen))) {
        vfsd_guest_error("%s: cannot write the reply (%zu bytes of room)",
                         r->op->name, vfsd_buf_remaining(out));
        r->written = 0;
        return false;
    }
    r->written = oh.len;
    return !err;
}

static void reply_err(VfsdReq *r, int err)
{
    reply_full(r, err, NULL, 0, NULL, 0);
}

static bool reply(VfsdReq *r, const void *p, size_t len)
{
    return reply_full(r, 0, p, len, NULL, 0);
}

/* For operations that return a byte count or a negative errno */
static void reply_status(VfsdReq *r, int ret)
{
    reply_err(r, ret < 0 ? ret : 0);
}

/* Fixed-size arguments; false (and an EINVAL reply) if truncated */
static bool get_arg(VfsdReq *r, void *p, size_t len)
{
    if (!vfsd_buf_read(r->in, p, len)) {
        vfsd_guest_error("%s: truncated request (%zu of %zu argument bytes)",
                         r->op->name, vfsd_buf_remaining(r->in),
                         len);
        reply_err(r, -EINVAL);
        return false;
    }
    return true;
}

/*
 * Whether a NUL comes before the end of the request: tells a string that
 * is too long (well-formed, the host has an errno for it) from one that
 * is not terminated at all (malformed).
 */
static bool terminated_later(VfsdBuf *peek)
{
    char chunk[256];

    while (vfsd_buf_remaining(peek)) {
        size_t n = MIN(vfsd_buf_remaining(peek), sizeof(chunk));

        if (!vfsd_buf_read(peek, chunk, n)) {
            return false;
        }
        if (memchr(chunk, '\0', n)) {
            return true;
        }
    }
    return false;
}

/*
 * A NUL-terminated string of at most @max bytes (without the NUL), into
 * @buf of @max + 1 bytes.  Consumes exactly the string and its NUL.
 * A longer string that is terminated is a request the host would answer
 * with an error of its own, @toolong (ENAMETOOLONG for a name or a path,
 * as getname() gives one of PATH_MAX bytes or more; ERANGE for an
 * extended attribute's name): the guest gets that, not EINVAL.
 */
static bool get_string(VfsdReq *r, char *buf, size_t max, int toolong)
{
    VfsdBuf peek = *r->in;
    size_t n = MIN(vfsd_buf_remaining(&peek), max + 1);
    char *nul = NULL;

    if (vfsd_buf_read(&peek, buf, n)) {
        nul = memchr(buf, '\0', n);
    }
    if (nul) {
        vfsd_buf_skip(r->in, nul - buf + 1);
        return true;
    }
    if (n == max + 1 && terminated_later(&peek)) {
        reply_err(r, toolong);
        return false;
    }
    vfsd_guest_error("%s: string argument is not terminated within the "
                     "request", r->op->name);
    reply_err(r, -EINVAL);
    return false;
}

/*
 * A name in a directory: one path component, of any length up to what a
 * path may have.  Whether it is too long for the file system is the
 * host's to say (ENAMETOOLONG past its NAME_MAX): Linux guests send
 * names of up to 1024 bytes (FUSE_NAME_MAX).
 */
static bool get_name(VfsdReq *r, char *buf)
{
    if (!get_string(r, buf, VFSD_NAME_MAX, -ENAMETOOLONG)) {
        return false;
    }
    if (!vfsd_valid_name(buf)) {
        vfsd_guest_error("%s: refused name \"%.64s\"", r->op->name,
                         buf);
        reply_err(r, -EINVAL);
        return false;
    }
    return true;
}

/*
 * The file system layer answers with its own types (fs-types.h); these
 * turn them into the wire's.
 */
static void set_timeout(double t, uint64_t *sec, uint32_t *nsec)
{
    *sec = (uint64_t)t;
    *nsec = (uint32_t)((t - (double)*sec) * 1e9);
}

static void attr_to_wire(const VfsdAttr *a, struct fuse_attr *w)
{
    memset(w, 0, sizeof(*w));
    w->ino = a->ino;
    w->size = a->size;
    w->blocks = a->blocks;
    w->atime = a->atime.tv_sec;
    w->atimensec = a->atime.tv_nsec;
    w->mtime = a->mtime.tv_sec;
    w->mtimensec = a->mtime.tv_nsec;
    w->ctime = a->ctime.tv_sec;
    w->ctimensec = a->ctime.tv_nsec;
    w->mode = a->mode;
    w->nlink = a->nlink;
    w->uid = a->uid;
    w->gid = a->gid;
    w->rdev = a->rdev;
    w->blksize = a->blksize;
    if (a->dax) {
        w->flags |= FUSE_ATTR_DAX;
    }
    if (a->submount) {
        w->flags |= FUSE_ATTR_SUBMOUNT;
    }
}

static void entry_to_wire(const VfsdEntry *e, struct fuse_entry_out *w)
{
    memset(w, 0, sizeof(*w));
    w->nodeid = e->nodeid;
    w->generation = e->generation;
    set_timeout(e->entry_timeout, &w->entry_valid, &w->entry_valid_nsec);
    set_timeout(e->attr_timeout, &w->attr_valid, &w->attr_valid_nsec);
    attr_to_wire(&e->attr, &w->attr);
}

static void open_to_wire(const VfsdOpened *o, struct fuse_open_out *w)
{
    memset(w, 0, sizeof(*w));
    w->fh = o->fh;
    if (o->keep & VFSD_OPEN_DIRECT_IO) {
        w->open_flags |= FOPEN_DIRECT_IO;
    }
    if (o->keep & VFSD_OPEN_PARALLEL_DIRECT_WRITES) {
        w->open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
    }
    if (o->keep & VFSD_OPEN_KEEP_CACHE) {
        w->open_flags |= FOPEN_KEEP_CACHE;
    }
    if (o->keep & VFSD_OPEN_CACHE_DIR) {
        w->open_flags |= FOPEN_CACHE_DIR;
    }
    if (o->keep & VFSD_OPEN_NOFLUSH) {
        w->open_flags |= FOPEN_NOFLUSH;
    }
}

static void reply_entry(VfsdReq *r, int ret, const VfsdEntry *e)
{
    struct fuse_entry_out out;

    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    entry_to_wire(e, &out);
    if (!reply(r, &out, sizeof(out)) && e->nodeid) {
        /* The guest will never forget a lookup it did not see */
        vfsd_inode_forget(r->fs, e->nodeid, 1);
    }
}

/* GETATTR and SETATTR */
static void reply_attr(VfsdReq *r, int ret, const VfsdAttr *attr,
                       double timeout)
{
    struct fuse_attr_out out;

    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    memset(&out, 0, sizeof(out));
    set_timeout(timeout, &out.attr_valid, &out.attr_valid_nsec);
    attr_to_wire(attr, &out.attr);
    reply(r, &out, sizeof(out));
}

/* What INIT offers the guest, from the options and the transport */
static uint64_t init_supported(VfsdFs *fs)
{
    uint64_t supported =
        FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES |
        FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_CACHE_SYMLINKS |
        FUSE_MAP_ALIGNMENT | FUSE_INIT_EXT | FUSE_ASYNC_DIO |
        FUSE_CREATE_SUPP_GROUP;

    if (!fs->opts->no_readdirplus) {
        supported |= FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO;
    }
    if (fs->opts->posix_lock) {
        supported |= FUSE_POSIX_LOCKS;
    }
    if (fs->opts->flock) {
        supported |= FUSE_FLOCK_LOCKS;
    }
    if (fs->opts->writeback) {
        supported |= FUSE_WRITEBACK_CACHE;
    }
    /*
     * With it the guest leaves clearing setuid/setgid on a write to us,
     * but writes through the DAX window never reach us: a user's write
     * would keep the bits the host clears.  Without it the guest clears
     * them itself (a SETATTR), whichever way it writes.
     */
    if (fs->opts->killpriv_v2 && !vfsd_dax_available(fs)) {
        supported |= FUSE_HANDLE_KILLPRIV_V2;
    }
    if (fs->opts->announce_submounts) {
        supported |= FUSE_SUBMOUNTS;
    }
    if (fs->opts->xattr) {
        supported |= FUSE_SETXATTR_EXT;
    }
    if (fs->opts->posix_acl) {
        /*
         * The guest checks ACLs itself and leaves umask to us, so that a
         * parent's default ACL can replace it (see vfsd_umask_enter()).
         */
        supported |= FUSE_POSIX_ACL | FUSE_DONT_MASK;
    }
    if (fs->opts->cache == VFSD_CACHE_AUTO ||
        fs->opts->cache == VFSD_CACHE_ADAPTIVE) {
        supported |= FUSE_AUTO_INVAL_DATA;
    }
    if (fs->opts->dax_policy != VFSD_DAX_NEVER) {
        supported |= FUSE_HAS_INODE_DAX;
    }
    if (fs->opts->allow_mmap) {
        /* Shared mmap of FOPEN_DIRECT_IO files, through the page cache */
        supported |= FUSE_DIRECT_IO_ALLOW_MMAP;
    }
    return supported;
}

uint64_t vfsd_init_flags_offered(VfsdFs *fs)
{
    uint64_t offered = init_supported(fs);

    if (fs->opts->security_label != VFSD_NEGOTIATE_NEVER) {
        offered |= FUSE_SECURITY_CTX;
    }
    return offered;
}

/*
 * What of the guest's INIT @flags this session takes: what we support,
 * and the security labels --security-label asks for.  -EPROTO where an
 * option demands what the guest cannot do.
 */
static int init_want(VfsdFs *fs, uint64_t flags, uint64_t *want)
{
    *want = flags & init_supported(fs);
    if (fs->opts->posix_acl_always && !(flags & FUSE_POSIX_ACL)) {
        vfsd_err("--posix-acl=always, and the guest has no POSIX ACLs "
                 "(FUSE_POSIX_ACL)");
        return -EPROTO;
    }
    if (fs->opts->security_label == VFSD_NEGOTIATE_NEVER) {
        return 0;
    }
    if (flags & FUSE_SECURITY_CTX) {
        *want |= FUSE_SECURITY_CTX;
    } else if (fs->opts->security_label == VFSD_NEGOTIATE_ALWAYS) {
        vfsd_err("--security-label=always, and the guest does not "
                 "send security labels (FUSE_SECURITY_CTX)");
        return -EPROTO;
    } else {
        vfsd_info("--security-label=auto: the guest does not send "
                  "security labels, files are created without");
    }
    return 0;
}

/* The session starts with @want: the reply says what we agreed on */
static void init_accept(VfsdReq *r, const struct fuse_init_in *in,
                        uint64_t want)
{
    VfsdFs *fs = r->fs;
    struct fuse_init_out out = { 0 };

    fs->conn.proto_minor = MIN(in->minor, VFSD_PROTO_MINOR);
    fs->conn.flags = want;
    fs->conn.initialized = true;

    out.major = FUSE_KERNEL_VERSION;
    out.minor = VFSD_PROTO_MINOR;
    out.max_readahead = in->max_readahead;
    out.flags = want & 0xffffffff;
    out.flags2 = want >> 32;
    out.max_background = 64;
    out.congestion_threshold = 48;
    out.max_write = VFSD_MAX_IO;
    out.time_gran = 1;
    out.max_pages = VFSD_MAX_PAGES;
    /* log2 of the alignment SETUPMAPPING offsets need: the page size */
    out.map_alignment = VFSD_PAGE_SHIFT;
    /*
     * The protocol spoken is the older of the guest's and ours: the
     * guest kernel matrix (mk/check.py) checks both against each kernel.
     */
    vfsd_info("guest FUSE %u.%u, flags 0x%" PRIx64 ", protocol %u.%u",
              in->major, in->minor, want, FUSE_KERNEL_VERSION,
              fs->conn.proto_minor);
    reply(r, &out, sizeof(out));
}

static void do_init(VfsdReq *r, bool variant)
{
    VfsdFs *fs = r->fs;
    struct fuse_init_in in = { 0 };
    uint64_t flags, want;
    size_t compat = offsetof(struct fuse_init_in, flags2);
    int ret;

    if (!get_arg(r, &in, compat)) {
        return;
    }
    if (vfsd_buf_remaining(r->in) >= sizeof(in) - compat) {
        vfsd_buf_read(r->in, (uint8_t *)&in + compat, sizeof(in) - compat);
    }
    if (fs->conn.initialized) {
        /*
         * A guest that rebooted, or reset the device, without unmounting
         * sends no DESTROY: its INIT starts a new session, as after one.
         */
        vfsd_info("the guest started a new FUSE session: the old one's "
                  "inodes, handles and DAX mappings are dropped");
        vfsd_fs_reset(fs);
    }
    if (in.major != FUSE_KERNEL_VERSION || in.minor < VFSD_MIN_MINOR) {
        vfsd_err("guest speaks FUSE %u.%u, we need %u.%u or later",
                 in.major, in.minor, FUSE_KERNEL_VERSION, VFSD_MIN_MINOR);
        if (in.major > FUSE_KERNEL_VERSION) {
            /* The guest retries with our major version */
            struct fuse_init_out out = {
                .major = FUSE_KERNEL_VERSION,
                .minor = VFSD_PROTO_MINOR,
            };

            reply(r, &out, sizeof(out));
        } else {
            reply_err(r, -EPROTO);
        }
        return;
    }

    flags = in.flags;
    if (flags & FUSE_INIT_EXT) {
        flags |= (uint64_t)in.flags2 << 32;
    }
    ret = init_want(fs, flags, &want);
    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    init_accept(r, &in, want);
}

static void do_lookup(VfsdReq *r, bool variant)
{
    char name[VFSD_NAME_MAX + 1];
    VfsdEntry e;

    if (get_name(r, name)) {
        reply_entry(r, vfsd_op_lookup(r->fs, r->h.nodeid, name, &e), &e);
    }
}

static void do_forget(VfsdReq *r, bool variant)
{
    struct fuse_forget_in in;

    if (vfsd_buf_read(r->in, &in, sizeof(in))) {
        vfsd_inode_forget(r->fs, r->h.nodeid, in.nlookup);
    } else {
        vfsd_guest_error("FORGET: truncated request");
    }
}

/*
 * Only waits can be interrupted (SETLKW): every other request finishes on
 * its own.  Linux's virtio-fs driver does not send INTERRUPT (as of 6.12);
 * others may.  It gets no reply, as the guest expects for one that found
 * its request, and whatever is wrong with it is not worth the guest's
 * attention either.
 */
static void do_interrupt(VfsdReq *r, bool variant)
{
    struct fuse_interrupt_in in;

    if (vfsd_buf_read(r->in, &in, sizeof(in))) {
        vfsd_interrupt(r->fs, in.unique);
    } else {
        vfsd_guest_error("INTERRUPT: truncated request");
    }
}

static void do_batch_forget(VfsdReq *r, bool variant)
{
    struct fuse_batch_forget_in in;
    struct fuse_forget_one one;
    uint32_t i;

    if (!vfsd_buf_read(r->in, &in, sizeof(in))) {
        vfsd_guest_error("BATCH_FORGET: truncated request");
        return;
    }
    if (in.count > VFSD_MAX_BATCH_FORGET ||
        (uint64_t)in.count * sizeof(one) > vfsd_buf_remaining(r->in)) {
        vfsd_guest_error("BATCH_FORGET: count %u does not match the request",
                         in.count);
    }
    for (i = 0; i < in.count && vfsd_buf_read(r->in, &one, sizeof(one));
         i++) {
        vfsd_inode_forget(r->fs, one.nodeid, one.nlookup);
    }
}

static void do_getattr(VfsdReq *r, bool variant)
{
    struct fuse_getattr_in in;
    VfsdAttr attr;
    double timeout;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    ret = vfsd_op_getattr(r->fs, r->h.nodeid, &attr, &timeout);
    reply_attr(r, ret, &attr, timeout);
}

static void sx_time_to_wire(const struct timespec *t, struct fuse_sx_time *w)
{
    w->tv_sec = t->tv_sec;
    w->tv_nsec = t->tv_nsec;
}

static void statx_to_wire(const VfsdStatx *sx, struct fuse_statx *w)
{
    const VfsdAttr *a = &sx->attr;

    memset(w, 0, sizeof(*w));
    w->mask = sx->mask;
    w->blksize = a->blksize;
    w->attributes = sx->attributes;
    w->nlink = a->nlink;
    w->uid = a->uid;
    w->gid = a->gid;
    w->mode = a->mode;
    w->ino = a->ino;
    w->size = a->size;
    w->blocks = a->blocks;
    w->attributes_mask = sx->attributes_mask;
    sx_time_to_wire(&a->atime, &w->atime);
    sx_time_to_wire(&sx->btime, &w->btime);
    sx_time_to_wire(&a->ctime, &w->ctime);
    sx_time_to_wire(&a->mtime, &w->mtime);
    w->rdev_major = major(a->rdev);
    w->rdev_minor = minor(a->rdev);
    w->dev_major = major(sx->dev);
    w->dev_minor = minor(sx->dev);
    /*
     * The mount id, the I/O alignments and the like have no room in
     * struct fuse_statx as of 7.45: the guest has the basic fields and
     * the birth time of us, and the attributes.
     */
}

/*
 * The guest's statx(2), for what GETATTR cannot carry (the birth time,
 * the attributes).  Linux guests send it from 6.6 on when a caller asks
 * for more than the basic fields, and go back to GETATTR for good once
 * it gets ENOSYS; no INIT flag is involved.  Like GETATTR it is about
 * the inode, whichever file handle getattr_flags names.
 */
static void do_statx(VfsdReq *r, bool variant)
{
    struct fuse_statx_in in;
    struct fuse_statx_out out;
    VfsdStatx sx;
    double timeout;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    /*
     * How fresh the answer must be is the guest's to say; the path
     * flags of statx(2) have no meaning here, as there is no path, and
     * a flag statx(2) does not know gets its EINVAL.
     */
    if (in.sx_flags & ~AT_STATX_SYNC_TYPE) {
        vfsd_guest_error("STATX: flags 0x%x", in.sx_flags);
        reply_err(r, -EINVAL);
        return;
    }
    ret = vfsd_op_statx(r->fs, r->h.nodeid, in.sx_flags, in.sx_mask, &sx,
                        &timeout);
    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    /*
     * out.flags has no meaning defined yet: 0.  Nor does the reply carry
     * FUSE_ATTR_DAX, so a Linux guest mounted with dax=inode, which takes
     * a STATX reply for attributes without it, drops a DAX inode at its
     * last close instead of caching it (fuse_dax_dontcache()): a cost
     * the next open pays, not a wrong answer.
     */
    memset(&out, 0, sizeof(out));
    set_timeout(timeout, &out.attr_valid, &out.attr_valid_nsec);
    statx_to_wire(&sx, &out.stat);
    reply(r, &out, sizeof(out));
}

static void setattr_from_wire(const struct fuse_setattr_in *in,
                              VfsdSetattr *s)
{
    static const struct {
        uint32_t fattr;
        unsigned int ours;
    } bits[] = {
        { FATTR_MODE, VFSD_SET_MODE },
        { FATTR_UID, VFSD_SET_UID },
        { FATTR_GID, VFSD_SET_GID },
        { FATTR_SIZE, VFSD_SET_SIZE },
        { FATTR_ATIME, VFSD_SET_ATIME },
        { FATTR_MTIME, VFSD_SET_MTIME },
        { FATTR_ATIME_NOW, VFSD_SET_ATIME_NOW },
        { FATTR_MTIME_NOW, VFSD_SET_MTIME_NOW },
        { FATTR_FH, VFSD_SET_FH },
        { FATTR_KILL_SUIDGID, VFSD_SET_KILL_SUIDGID },
    };
    unsigned int i;

    /* Other bits (FATTR_CTIME, FATTR_LOCKOWNER...) ask for nothing we do */
    memset(s, 0, sizeof(*s));
    for (i = 0; i < G_N_ELEMENTS(bits); i++) {
        if (in->valid & bits[i].fattr) {
            s->valid |= bits[i].ours;
        }
    }
    s->mode = in->mode;
    s->uid = in->uid;
    s->gid = in->gid;
    s->size = in->size;
    s->fh = in->fh;
    s->atime.tv_sec = in->atime;
    s->atime.tv_nsec = in->atimensec;
    s->mtime.tv_sec = in->mtime;
    s->mtime.tv_nsec = in->mtimensec;
}

static void do_setattr(VfsdReq *r, bool variant)
{
    struct fuse_setattr_in in;
    VfsdSetattr set;
    VfsdAttr attr;
    double timeout;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    setattr_from_wire(&in, &set);
    ret = vfsd_op_setattr(r->fs, &r->ctx, r->h.nodeid, &set, &attr,
                          &timeout);
    reply_attr(r, ret, &attr, timeout);
}

static void do_readlink(VfsdReq *r, bool variant)
{
    char buf[PATH_MAX];
    int ret = vfsd_op_readlink(r->fs, r->h.nodeid, buf, sizeof(buf));

    if (ret < 0) {
        reply_err(r, ret);
    } else {
        reply(r, buf, ret);
    }
}

static void do_symlink(VfsdReq *r, bool variant)
{
    char name[VFSD_NAME_MAX + 1];
    g_autofree char *target = g_malloc(PATH_MAX);
    VfsdEntry e;

    /* FUSE_SYMLINK: the new name, then the target */
    if (!get_name(r, name) ||
        !get_string(r, target, PATH_MAX - 1, -ENAMETOOLONG)) {
        return;
    }
    if (!target[0]) {
        reply_err(r, -ENOENT);
        return;
    }
    reply_entry(r, vfsd_op_mknod(r->fs, &r->ctx, r->h.nodeid, name,
                                 S_IFLNK | 0777, 0, 0, target, &e), &e);
}

static void do_mknod(VfsdReq *r, bool variant)
{
    struct fuse_mknod_in in;
    char name[VFSD_NAME_MAX + 1];
    VfsdEntry e;

    if (!get_arg(r, &in, sizeof(in)) || !get_name(r, name)) {
        return;
    }
    /*
     * Any file type goes to mknodat(), which answers as it would a local
     * caller: a regular file for type 0, EPERM for a directory, EINVAL
     * for a symlink or an unknown type.
     */
    reply_entry(r, vfsd_op_mknod(r->fs, &r->ctx, r->h.nodeid, name, in.mode,
                                 makedev(major(in.rdev), minor(in.rdev)),
                                 in.umask, NULL, &e), &e);
}

static void do_mkdir(VfsdReq *r, bool variant)
{
    struct fuse_mkdir_in in;
    char name[VFSD_NAME_MAX + 1];
    VfsdEntry e;

    if (!get_arg(r, &in, sizeof(in)) || !get_name(r, name)) {
        return;
    }
    reply_entry(r, vfsd_op_mkdir(r->fs, &r->ctx, r->h.nodeid, name,
                                 in.mode & 07777, in.umask, &e), &e);
}

static void do_unlink(VfsdReq *r, bool is_dir)
{
    char name[VFSD_NAME_MAX + 1];

    if (get_name(r, name)) {
        reply_status(r, vfsd_op_unlink(r->fs, r->h.nodeid, name, is_dir));
    }
}

static void do_rename(VfsdReq *r, bool v2)
{
    struct fuse_rename2_in in = { 0 };
    char name[VFSD_NAME_MAX + 1], newname[VFSD_NAME_MAX + 1];

    if (!get_arg(r, &in, v2 ? sizeof(in) :
                 sizeof(struct fuse_rename_in)) ||
        !get_name(r, name) || !get_name(r, newname)) {
        return;
    }
    reply_status(r, vfsd_op_rename(r->fs, r->h.nodeid, name, in.newdir,
                                   newname, in.flags));
}

static void do_link(VfsdReq *r, bool variant)
{
    struct fuse_link_in in;
    char name[VFSD_NAME_MAX + 1];
    VfsdEntry e;

    if (!get_arg(r, &in, sizeof(in)) || !get_name(r, name)) {
        return;
    }
    reply_entry(r, vfsd_op_link(r->fs, in.oldnodeid, r->h.nodeid, name, &e),
                &e);
}

static void do_open(VfsdReq *r, bool is_dir)
{
    struct fuse_open_in in;
    struct fuse_open_out out;
    VfsdOpened o;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    if (is_dir) {
        ret = vfsd_op_opendir(r->fs, r->h.nodeid, in.flags, &o);
    } else {
        ret = vfsd_op_open(r->fs, &r->ctx, r->h.nodeid, in.flags,
                           in.open_flags & FUSE_OPEN_KILL_SUIDGID, &o);
    }
    if (ret < 0) {
        reply_err(r, ret);
    } else {
        open_to_wire(&o, &out);
        reply(r, &out, sizeof(out));
    }
}

static void do_create(VfsdReq *r, bool tmpfile)
{
    struct fuse_create_in in;
    char name[VFSD_NAME_MAX + 1];
    struct fuse_entry_out we;
    struct fuse_open_out wo;
    VfsdEntry e;
    VfsdOpened o;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    /* The guest names an O_TMPFILE dentry "/": nothing to check or use */
    if (tmpfile ? !get_string(r, name, VFSD_NAME_MAX, -ENAMETOOLONG) :
                  !get_name(r, name)) {
        return;
    }
    /* File type bits are ignored, as open(2) ignores them with O_CREAT */
    ret = vfsd_op_create(r->fs, &r->ctx, r->h.nodeid, name, in.flags,
                         in.open_flags & FUSE_OPEN_KILL_SUIDGID, in.mode,
                         in.umask, tmpfile, &e, &o);
    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    entry_to_wire(&e, &we);
    open_to_wire(&o, &wo);
    if (!reply_full(r, 0, &we, sizeof(we), &wo, sizeof(wo))) {
        /* Nor will it release a handle it never had */
        vfsd_op_release(r->fs, o.fh, false, false);
        vfsd_inode_forget(r->fs, e.nodeid, 1);
    }
}

/*
 * READ and READDIR write their data straight into the guest's buffers,
 * behind the reply header, which is written last once the length is known.
 * Returns false (having replied) if not even the header fits.
 */
static bool begin_data_reply(VfsdReq *r, VfsdBuf *hdr)
{
    if (vfsd_buf_remaining(r->out) < sizeof(struct fuse_out_header)) {
        reply_err(r, -EIO);
        return false;
    }
    *hdr = *r->out;
    vfsd_buf_skip(r->out, sizeof(struct fuse_out_header));
    return true;
}

/* @n: bytes of data written behind the header, or a negative errno */
static void end_data_reply(VfsdReq *r, VfsdBuf *hdr, ssize_t n)
{
    struct fuse_out_header oh = { .unique = r->h.unique };

    if (n < 0) {
        *r->out = *hdr;
        reply_err(r, n);
        return;
    }
    oh.len = sizeof(oh) + n;
    vfsd_buf_write(hdr, &oh, sizeof(oh));
    r->written = oh.len;
}

static void do_read(VfsdReq *r, bool variant)
{
    struct fuse_read_in in;
    VfsdBuf hdr;

    if (get_arg(r, &in, sizeof(in)) && begin_data_reply(r, &hdr)) {
        end_data_reply(r, &hdr,
                       vfsd_op_read(r->fs, in.fh, in.offset, in.size, r->out));
    }
}

static void do_write(VfsdReq *r, bool variant)
{
    struct fuse_write_in in;
    struct fuse_write_out out = { 0 };
    ssize_t n;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    n = vfsd_op_write(r->fs, &r->ctx, in.fh, in.offset, in.size,
                      in.write_flags & FUSE_WRITE_KILL_SUIDGID, r->in);
    if (n < 0) {
        reply_err(r, n);
        return;
    }
    out.size = n;
    reply(r, &out, sizeof(out));
}

static void do_statfs(VfsdReq *r, bool variant)
{
    struct fuse_statfs_out out;
    struct statfs st;
    int ret = vfsd_op_statfs(r->fs, r->h.nodeid, &st);

    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    memset(&out, 0, sizeof(out));
    out.st.blocks = st.f_blocks;
    out.st.bfree = st.f_bfree;
    out.st.bavail = st.f_bavail;
    out.st.files = st.f_files;
    out.st.ffree = st.f_ffree;
    out.st.bsize = st.f_bsize;
    out.st.namelen = st.f_namelen;
    out.st.frsize = st.f_frsize;
    reply(r, &out, sizeof(out));
}

static void do_release(VfsdReq *r, bool is_dir)
{
    struct fuse_release_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_release(r->fs, in.fh,
                                        in.release_flags &
                                        FUSE_RELEASE_FLOCK_UNLOCK, is_dir));
    }
}

static void do_fsync(VfsdReq *r, bool is_dir)
{
    struct fuse_fsync_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_fsync(r->fs, r->h.nodeid, in.fh,
                                      in.fsync_flags & FUSE_FSYNC_FDATASYNC,
                                      is_dir));
    }
}

static void do_flush(VfsdReq *r, bool variant)
{
    struct fuse_flush_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_flush(r->fs, in.fh, in.lock_owner));
    }
}

static void do_setxattr(VfsdReq *r, bool variant)
{
    struct fuse_setxattr_in in = { 0 };
    size_t insize = (r->fs->conn.flags & FUSE_SETXATTR_EXT) ?
                    sizeof(in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
    char name[XATTR_NAME_MAX + 1];
    g_autofree void *value = NULL;

    if (!get_arg(r, &in, insize) ||
        !get_string(r, name, XATTR_NAME_MAX, -ERANGE)) {
        return;
    }
    if (in.size > VFSD_MAX_XATTR_SIZE) {
        reply_err(r, -E2BIG);
        return;
    }
    value = g_malloc(in.size ? in.size : 1);
    if (!get_arg(r, value, in.size)) {
        return;
    }
    /*
     * Other setxattr_flags bits are ignored: none is defined, and the
     * guest sends this one without asking whether we know it.
     */
    reply_status(r, vfsd_op_setxattr(r->fs, r->h.nodeid, name, value,
                                     in.size, in.flags,
                                     in.setxattr_flags &
                                     FUSE_SETXATTR_ACL_KILL_SGID));
}

/* GETXATTR and LISTXATTR: size 0 asks for the size only */
static void do_getxattr(VfsdReq *r, bool list)
{
    struct fuse_getxattr_in in;
    char name[XATTR_NAME_MAX + 1];
    g_autofree void *value = NULL;
    ssize_t ret;

    if (!get_arg(r, &in, sizeof(in)) ||
        (!list && !get_string(r, name, XATTR_NAME_MAX, -ERANGE))) {
        return;
    }
    if (in.size > VFSD_MAX_XATTR_SIZE) {
        in.size = VFSD_MAX_XATTR_SIZE;
    }
    if (in.size) {
        value = g_malloc(in.size);
    }
    ret = list ? vfsd_op_listxattr(r->fs, r->h.nodeid, value, in.size) :
                 vfsd_op_getxattr(r->fs, r->h.nodeid, name, value, in.size);
    if (ret < 0) {
        reply_err(r, ret);
    } else if (!in.size) {
        struct fuse_getxattr_out out = { .size = ret };

        reply(r, &out, sizeof(out));
    } else {
        reply(r, value, ret);
    }
}

static void do_removexattr(VfsdReq *r, bool variant)
{
    char name[XATTR_NAME_MAX + 1];

    if (get_string(r, name, XATTR_NAME_MAX, -ERANGE)) {
        reply_status(r, vfsd_op_removexattr(r->fs, r->h.nodeid, name));
    }
}

/* READDIR(PLUS) replies: fuse_dirent or fuse_direntplus records */
typedef struct VfsdDirPack {
    GByteArray *data;
    size_t max;
    bool plus;
} VfsdDirPack;

static size_t dirent_size(bool plus, size_t namelen)
{
    return FUSE_DIRENT_ALIGN((plus ? FUSE_NAME_OFFSET_DIRENTPLUS :
                                     FUSE_NAME_OFFSET) + namelen);
}

static bool dirpack_fits(void *opaque, size_t namelen)
{
    VfsdDirPack *p = opaque;

    return p->data->len + dirent_size(p->plus, namelen) <= p->max;
}

/* An entry without a lookup (@e NULL) has nodeid 0: the guest skips it */
static void dirpack_add(void *opaque, const VfsdDirent *d, const VfsdEntry *e)
{
    VfsdDirPack *p = opaque;
    size_t len = dirent_size(p->plus, d->namelen);
    size_t pos = p->data->len;
    struct fuse_dirent *de;

    g_byte_array_set_size(p->data, pos + len);
    memset(p->data->data + pos, 0, len);
    if (p->plus) {
        struct fuse_direntplus *dp = (void *)(p->data->data + pos);

        de = &dp->dirent;
        if (e) {
            entry_to_wire(e, &dp->entry_out);
        }
    } else {
        de = (void *)(p->data->data + pos);
    }
    de->ino = d->ino;
    de->off = d->off;
    de->namelen = d->namelen;
    de->type = d->type;
    memcpy(de->name, d->name, d->namelen);
}

/* The lookups of a READDIRPLUS reply that never reached the guest */
static void readdirplus_unlookup(VfsdFs *fs, const GByteArray *data)
{
    size_t pos = 0;

    while (pos + FUSE_NAME_OFFSET_DIRENTPLUS <= data->len) {
        const struct fuse_direntplus *dp = (void *)(data->data + pos);

        if (dp->entry_out.nodeid) {
            vfsd_inode_forget(fs, dp->entry_out.nodeid, 1);
        }
        pos += FUSE_DIRENTPLUS_SIZE(dp);
    }
}

static void do_readdir(VfsdReq *r, bool plus)
{
    struct fuse_read_in in;
    g_autoptr(GByteArray) data = g_byte_array_new();
    size_t room = vfsd_buf_remaining(r->out);
    VfsdDirPack pack = { .data = data, .plus = plus };
    const VfsdDirSink sink = {
        .fits = dirpack_fits,
        .add = dirpack_add,
        .opaque = &pack,
    };
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    if (room < sizeof(struct fuse_out_header)) {
        reply_err(r, -EIO);
        return;
    }
    pack.max = MIN(MIN((size_t)in.size,
                       room - sizeof(struct fuse_out_header)),
                   VFSD_MAX_READDIR);
    ret = vfsd_op_readdir(r->fs, in.fh, in.offset, pack.max, plus, &sink);
    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    /* The guest will never forget lookups it did not see */
    if (!reply(r, data->data, data->len) && plus) {
        readdirplus_unlookup(r->fs, data);
    }
}

static void lock_from_wire(const struct fuse_lk_in *in, VfsdLock *lk)
{
    lk->owner = in->owner;
    lk->start = in->lk.start;
    lk->end = in->lk.end;
    lk->type = in->lk.type;
    lk->flock = in->lk_flags & FUSE_LK_FLOCK;
}

static void do_getlk(VfsdReq *r, bool variant)
{
    struct fuse_lk_in in;
    struct fuse_lk_out out = { 0 };
    VfsdLock lk, found;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    lock_from_wire(&in, &lk);
    ret = vfsd_op_getlk(r->fs, in.fh, &lk, &found);
    if (ret < 0) {
        reply_err(r, ret);
        return;
    }
    out.lk.type = found.type;
    out.lk.start = found.start;
    out.lk.end = found.end;
    reply(r, &out, sizeof(out));
}

static void do_setlk(VfsdReq *r, bool sleep)
{
    struct fuse_lk_in in;
    VfsdLock lk;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    lock_from_wire(&in, &lk);
    if (sleep && r->no_wait) {
        /* The lock if it is free, rather than a wait nobody would serve */
        ret = vfsd_op_setlk(r->fs, in.fh, &lk, NULL);
        if (ret == -EAGAIN) {
            vfsd_guest_error("SETLKW: too many lock waiters, refused with "
                             "ENOLCK");
            ret = -ENOLCK;
        }
    } else if (sleep) {
        VfsdWaiter w;

        vfsd_waiter_begin(r->fs, &w, r->h.unique);
        ret = vfsd_op_setlk(r->fs, in.fh, &lk, &w);
        vfsd_waiter_end(r->fs, &w);
    } else {
        ret = vfsd_op_setlk(r->fs, in.fh, &lk, NULL);
    }
    reply_status(r, ret);
}

static void do_access(VfsdReq *r, bool variant)
{
    struct fuse_access_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_access(r->fs, &r->ctx, r->h.nodeid,
                                       in.mask));
    }
}

static void do_fallocate(VfsdReq *r, bool variant)
{
    struct fuse_fallocate_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_fallocate(r->fs, r->h.nodeid, in.fh,
                                          in.offset, in.length, in.mode));
    }
}

static void do_lseek(VfsdReq *r, bool variant)
{
    struct fuse_lseek_in in;
    struct fuse_lseek_out out = { 0 };
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    ret = vfsd_op_lseek(r->fs, in.fh, in.offset, in.whence, &out.offset);
    if (ret < 0) {
        reply_err(r, ret);
    } else {
        reply(r, &out, sizeof(out));
    }
}

/* The size of the answer to IOCTL @cmd if we serve it, else 0 */
static size_t ioctl_answer_size(uint32_t cmd, uint32_t flags)
{
    /* The retry protocol of unrestricted ioctls is CUSE's, not virtio-fs' */
    if (flags & FUSE_IOCTL_UNRESTRICTED) {
        return 0;
    }
    switch (cmd) {
    case FS_IOC_GETFLAGS:
    case FS_IOC32_GETFLAGS:
        /* The same query from a 64-bit or a 32-bit guest kernel */
        return sizeof(uint32_t);
    case FS_IOC_FSGETXATTR:
        return sizeof(struct fsxattr);
    default:
        return 0;
    }
}

/*
 * IOCTL, for the two queries Linux's FUSE sends to read a file's
 * attributes for lsattr (FS_IOC_GETFLAGS) and for FS_IOC_FSGETXATTR
 * (xfs_io's stat, project ids): it opens the file, asks, and releases it.
 * They are answered by the host's file system.  Everything else, setting
 * those attributes included, gets ENOTTY, the answer for a command a file
 * does not know, which is also what the guest makes of ENOSYS: any other
 * command number would run host kernel code the guest picks, with the
 * daemon's privileges, and most are device commands a share's files never
 * take (a guest's isatty() on a shared file sends TCGETS here).
 */
static void do_ioctl(VfsdReq *r, bool variant)
{
    static gint logged_other;
    struct fuse_ioctl_in in;
    struct fuse_ioctl_out out = { 0 };
    union {
        uint32_t flags;
        struct fsxattr fsx;
    } attr;
    bool is_dir;
    size_t len;
    int ret;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    len = ioctl_answer_size(in.cmd, in.flags);
    if (!len) {
        if (g_atomic_int_compare_and_exchange(&logged_other, 0, 1)) {
            vfsd_info("the guest sent IOCTL command 0x%x (flags 0x%x), which "
                      "we do not serve: it gets ENOTTY (logged once)",
                      in.cmd, in.flags);
        }
        reply_err(r, -ENOTTY);
        return;
    }
    if (in.out_size < len) {
        vfsd_guest_error("IOCTL 0x%x: %u bytes of room for a %zu-byte answer",
                         in.cmd, in.out_size, len);
        reply_err(r, -EINVAL);
        return;
    }
    is_dir = in.flags & FUSE_IOCTL_DIR;
    if (in.cmd == FS_IOC_FSGETXATTR) {
        ret = vfsd_op_get_fsxattr(r->fs, in.fh, is_dir, &attr.fsx);
    } else {
        ret = vfsd_op_get_flags(r->fs, in.fh, is_dir, &attr.flags);
    }
    if (ret < 0) {
        reply_err(r, ret);
    } else {
        reply_full(r, 0, &out, sizeof(out), &attr, len);
    }
}

/*
 * The largest count COPY_FILE_RANGE's 32-bit reply can carry, less what
 * would make it a count the guest's page cache cannot take as a whole:
 * the guest asks for no more (fs/fuse/file.c), and loops for the rest.
 */
#define VFSD_COPY32_MAX ((uint64_t)UINT32_MAX & ~(uint64_t)(VFSD_PAGE_SIZE - 1))

/*
 * COPY_FILE_RANGE and COPY_FILE_RANGE_64 (7.45) take the same request and
 * differ in the reply: a 32-bit count in fuse_write_out, or a 64-bit one.
 */
static void do_copy_file_range(VfsdReq *r, bool wide)
{
    struct fuse_copy_file_range_in in;
    uint64_t len;
    ssize_t n;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    /*
     * Never copy more than the reply can tell: a guest told less than
     * was copied would copy the rest again, over what a writer may have
     * changed meanwhile.
     */
    len = wide ? in.len : MIN(in.len, VFSD_COPY32_MAX);
    n = vfsd_op_copy_file_range(r->fs, in.fh_in, in.off_in, in.fh_out,
                                in.off_out, len, in.flags);
    if (n < 0) {
        reply_err(r, n);
    } else if (wide) {
        struct fuse_copy_file_range_out out = { .bytes_copied = n };

        reply(r, &out, sizeof(out));
    } else {
        struct fuse_write_out out = { .size = n };

        reply(r, &out, sizeof(out));
    }
}

static void do_syncfs(VfsdReq *r, bool variant)
{
    struct fuse_syncfs_in in;

    if (get_arg(r, &in, sizeof(in))) {
        reply_status(r, vfsd_op_syncfs(r->fs, r->h.nodeid));
    }
}

static void do_setupmapping(VfsdReq *r, bool variant)
{
    struct fuse_setupmapping_in in;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    /* Without a window the answer is EOPNOTSUPP, whatever the flags */
    if (vfsd_dax_available(r->fs) &&
        (in.flags & ~(uint64_t)(FUSE_SETUPMAPPING_FLAG_WRITE |
                                FUSE_SETUPMAPPING_FLAG_READ))) {
        vfsd_guest_error("SETUPMAPPING: unknown flags 0x%" PRIx64, in.flags);
        reply_err(r, -EINVAL);
        return;
    }
    /* in.fh is not used: dax.c opens the inode itself (see setup_open()) */
    reply_status(r, vfsd_op_setupmapping(r->fs, r->h.nodeid, in.foffset,
                                         in.len, in.moffset,
                                         in.flags &
                                         FUSE_SETUPMAPPING_FLAG_WRITE));
}

static void do_removemapping(VfsdReq *r, bool variant)
{
    struct fuse_removemapping_in in;
    g_autofree struct fuse_removemapping_one *wire = NULL;
    g_autofree VfsdDaxRange *ranges = NULL;
    uint32_t i;

    if (!get_arg(r, &in, sizeof(in))) {
        return;
    }
    if (in.count == 0 || in.count > VFSD_MAX_REMOVEMAPPING) {
        vfsd_guest_error("REMOVEMAPPING: bad count %u", in.count);
        reply_err(r, -EINVAL);
        return;
    }
    wire = g_new(struct fuse_removemapping_one, in.count);
    if (!get_arg(r, wire, in.count * sizeof(*wire))) {
        return;
    }
    ranges = g_new(VfsdDaxRange, in.count);
    for (i = 0; i < in.count; i++) {
        ranges[i].moffset = wire[i].moffset;
        ranges[i].len = wire[i].len;
    }
    reply_status(r, vfsd_op_removemapping(r->fs, ranges, in.count));
}

static void do_destroy(VfsdReq *r, bool variant)
{
    vfsd_fs_reset(r->fs);
    reply_err(r, 0);
}

/*
 * The security label of a creation (FUSE_SECURITY_CTX): a fuse_secctx,
 * the attribute's name (NUL-terminated) and its value, in an extension
 * whose type is the number of labels.  Linux sends one, or none when no
 * security module labels the file.  A malformed or unexpected one fails
 * the creation with EINVAL: the file must not be made without the label
 * the guest asked for.
 */
static void get_label(VfsdReq *r, VfsdBuf *body, uint32_t count)
{
    struct fuse_secctx sc;
    size_t len, avail;
    char *mem;

    if (count == 0) {
        return;
    }
    if (count != 1 || r->ctx.label_name ||
        !vfsd_buf_read(body, &sc, sizeof(sc))) {
        vfsd_guest_error("%s: %u security labels", r->op->name,
                         count);
        r->label_err = -EINVAL;
        return;
    }
    /* The args were copied: one piece, the extension's end bounds it */
    avail = vfsd_buf_remaining(body);
    if (sc.size == 0 || sc.size > XATTR_SIZE_MAX || sc.size >= avail) {
        vfsd_guest_error("%s: a security label of %u bytes in %zu",
                         r->op->name, sc.size, avail);
        r->label_err = -EINVAL;
        return;
    }
    mem = g_malloc(avail + 1);
    if (!vfsd_buf_read(body, mem, avail)) {
        g_free(mem);
        r->label_err = -EINVAL;
        return;
    }
    mem[avail] = '\0';
    len = strnlen(mem, avail);
    /* name, NUL, value: padding may follow the value */
    if (len == 0 || len > XATTR_NAME_MAX || len + 1 + sc.size > avail) {
        vfsd_guest_error("%s: malformed security label",
                         r->op->name);
        g_free(mem);
        r->label_err = -EINVAL;
        return;
    }
    r->label_mem = mem;
    r->ctx.label_name = mem;
    r->ctx.label = mem + len + 1;
    r->ctx.label_size = sc.size;
}

/*
 * FUSE_EXT_GROUPS comes with a creation when the caller is in the parent
 * directory's group without it being its own: the host must act with
 * that group too, or refuse what the guest (and the host, for a local
 * caller) allows.  Malformed extensions are ignored with a log line: the
 * request is served with the caller's own group only.  A malformed
 * security label is not (see get_label()).
 */
static void get_extensions(VfsdReq *r)
{
    VfsdBuf ext = r->ext;
    struct fuse_ext_header xh;
    struct fuse_supp_groups sg;
    uint32_t gid;

    while (vfsd_buf_read(&ext, &xh, sizeof(xh))) {
        VfsdBuf body = ext;

        if (xh.size < sizeof(xh) || xh.size % 8 ||
            xh.size - sizeof(xh) > vfsd_buf_remaining(&ext)) {
            vfsd_guest_error("%s: extension of %u bytes in %zu",
                             r->op->name, xh.size,
                             vfsd_buf_remaining(&ext) + sizeof(xh));
            /* A label may have been in it */
            if (r->fs->conn.flags & FUSE_SECURITY_CTX) {
                r->label_err = -EINVAL;
            }
            return;
        }
        body.remaining = xh.size - sizeof(xh);
        vfsd_buf_skip(&ext, xh.size - sizeof(xh));
        if (xh.type <= FUSE_MAX_NR_SECCTX &&
            (r->fs->conn.flags & FUSE_SECURITY_CTX)) {
            get_label(r, &body, xh.type);
            continue;
        }
        if (xh.type != FUSE_EXT_GROUPS ||
            !(r->fs->conn.flags & FUSE_CREATE_SUPP_GROUP)) {
            continue;
        }
        /* Linux sends exactly one: the parent's group */
        if (!vfsd_buf_read(&body, &sg, sizeof(sg)) || sg.nr_groups != 1 ||
            !vfsd_buf_read(&body, &gid, sizeof(gid))) {
            vfsd_guest_error("%s: malformed supplementary groups",
                             r->op->name);
            continue;
        }
        r->ctx.supp_gid = vfsd_idmap_to_host(&r->fs->opts->gid_map, gid);
    }
}

void vfsd_request_head(VfsdBuf *in, VfsdReqHead *head)
{
    head->avail = vfsd_buf_remaining(in);
    head->valid = vfsd_buf_read(in, &head->h, sizeof(head->h));
    if (!head->valid) {
        /* The error reply's unique */
        memset(&head->h, 0, sizeof(head->h));
    }
}

/*
 * Every opcode we know, and how we serve it: the list of fuse-ops.h,
 * which opnames.c's names come from too.  An opcode without a handler
 * (BMAP, POLL...) or without a row gets ENOSYS: the guest has fallbacks.
 */
#define VFSD_OP_ROW(opcode, fn, var, fl) \
    [FUSE_##opcode] = { .name = #opcode, .handler = fn, .variant = var, \
                        .flags = fl },

static const VfsdOp ops[VFSD_OPCODE_LIMIT] = {
    VFSD_FUSE_OPS(VFSD_OP_ROW)
};

#undef VFSD_OP_ROW

/* The opcode's row; one without a handler for an opcode we do not know */
static const VfsdOp *op_of(uint32_t opcode)
{
    static const VfsdOp unknown = { .name = "unknown" };

    return opcode < G_N_ELEMENTS(ops) && ops[opcode].name ? &ops[opcode] :
                                                            &unknown;
}

bool vfsd_request_may_block(const VfsdReqHead *head)
{
    return head->valid && (op_of(head->h.opcode)->flags & VFSD_OP_MAY_BLOCK);
}

int vfsd_reply_error(const void *rep, size_t len)
{
    struct fuse_out_header oh;

    if (len < sizeof(oh)) {
        return 0;
    }
    memcpy(&oh, rep, sizeof(oh));
    return oh.error;
}

typedef enum VfsdRunMode {
    VFSD_RUN_NORMAL,
    VFSD_RUN_HIPRIO,
    VFSD_RUN_NO_WAIT,
} VfsdRunMode;

/*
 * Checks the header against the request, copies the arguments out of
 * guest memory (into @args, for the caller to free) and finds the
 * extensions and the caller's ids.  False when the request got an error
 * reply instead.
 */
static bool decode(VfsdReq *r, const VfsdReqHead *head, uint8_t **args,
                   VfsdSeg *args_seg, VfsdBuf *args_buf)
{
    VfsdBuf *in = r->in;
    size_t avail = head->avail;
    size_t ext_len;

    if (!head->valid) {
        vfsd_guest_error("request of %zu bytes has no FUSE header", avail);
        reply_err(r, -EINVAL);
        return false;
    }
    /* @in is all that is left of the request: never claim more than it */
    if (r->h.len < sizeof(r->h) || r->h.len > avail ||
        r->h.len - sizeof(r->h) > vfsd_buf_remaining(in)) {
        vfsd_guest_error("%s: header says %u bytes, request has %zu",
                         r->op->name, r->h.len, avail);
        reply_err(r, -EINVAL);
        return false;
    }
    /* Nothing past the length the guest announced belongs to the request */
    in->remaining = r->h.len - sizeof(r->h);
    /* Extensions come last: the arguments end where they begin */
    ext_len = (size_t)r->h.total_extlen * 8;
    if (ext_len > in->remaining) {
        vfsd_guest_error("%s: %zu bytes of extensions in %zu bytes",
                         r->op->name, ext_len, in->remaining);
        reply_err(r, -EINVAL);
        return false;
    }
    /*
     * The guest can rewrite its buffers while we decode them: every
     * argument is decoded from one private copy, so no check can be made
     * on one value and the work done on another.  The exception is data
     * read once straight from guest memory (VFSD_OP_DATA_IN_PLACE),
     * whose fixed arguments are read once too, by get_arg().
     */
    if (!(r->op->flags & VFSD_OP_DATA_IN_PLACE) &&
        in->remaining) {
        size_t n = MIN(in->remaining, (size_t)VFSD_MAX_ARGS);

        *args = g_malloc(n);
        if (!vfsd_buf_read(in, *args, n)) {
            vfsd_guest_error("%s: cannot read the request's arguments",
                             r->op->name);
            reply_err(r, -EIO);
            return false;
        }
        *args_seg = (VfsdSeg) { .base = *args, .len = n };
        vfsd_buf_init(args_buf, args_seg, 1, NULL, NULL);
        r->in = args_buf;
    }
    if (ext_len > vfsd_buf_remaining(r->in)) {
        vfsd_guest_error("%s: extensions past the arguments copied",
                         r->op->name);
        reply_err(r, -EINVAL);
        return false;
    }
    r->ext = *r->in;
    vfsd_buf_skip(&r->ext, vfsd_buf_remaining(r->in) - ext_len);
    r->in->remaining -= ext_len;

    /* The host's ids for the caller; VFSD_NO_ID when it has none */
    r->ctx.uid = vfsd_idmap_to_host(&r->fs->opts->uid_map, r->h.uid);
    r->ctx.gid = vfsd_idmap_to_host(&r->fs->opts->gid_map, r->h.gid);
    r->ctx.pid = r->h.pid;
    r->ctx.supp_gid = VFSD_NO_ID;
    get_extensions(r);
    return true;
}

/*
 * An opcode we do not serve gets ENOSYS, and the guest does without it.
 * Which ones a guest sends tells what newer guests would have of us, so
 * each is logged, once: a guest that keeps sending it (one that has no
 * fallback) must not fill the log.  Opcodes past the table's share one
 * rate-limited line, as a guest can send any number of them.
 */
static void log_unserved(VfsdReq *r)
{
    static guint logged[(VFSD_OPCODE_LIMIT + 31) / 32];
    static VfsdRateLimit rl;
    uint32_t opcode = r->h.opcode;

    if (opcode < VFSD_OPCODE_LIMIT) {
        guint bit = 1u << (opcode % 32);

        if (g_atomic_int_or(&logged[opcode / 32], bit) & bit) {
            return;
        }
        vfsd_info("the guest sent %s (opcode %u), which we do not serve: "
                  "it gets ENOSYS (logged once)", r->op->name, opcode);
    } else {
        vfsd_log_rl(&rl, VFSD_LOG_INFO, "the guest sent opcode %u, which we "
                    "do not serve: it gets ENOSYS", opcode);
    }
}

static size_t process_req(VfsdReq *r, const VfsdReqHead *head,
                          VfsdBuf *in, VfsdRunMode mode)
{
    VfsdFs *fs = r->fs;
    g_autofree uint8_t *args = NULL;
    VfsdSeg args_seg;
    VfsdBuf args_buf;
    const VfsdOp *op = r->op;
    int64_t start;

    if (G_UNLIKELY(vfsd_capture_fd >= 0)) {
        vfsd_capture_request(head->valid ? &head->h : NULL, in, r->out);
    }
    if (!decode(r, head, &args, &args_seg, &args_buf)) {
        return r->written;
    }
    vfsd_debug("%s unique %" PRIu64 " nodeid %" PRIu64 " len %u",
               r->op->name, (uint64_t)r->h.unique,
               (uint64_t)r->h.nodeid, r->h.len);

    if (mode == VFSD_RUN_HIPRIO && !(op->flags & VFSD_OP_HIPRIO)) {
        vfsd_guest_error("%s on the hiprio queue, which only takes FORGET, "
                         "BATCH_FORGET and INTERRUPT",
                         r->op->name);
        reply_err(r, -EINVAL);
        return r->written;
    }
    if (!fs->conn.initialized && !(op->flags & VFSD_OP_BEFORE_INIT)) {
        vfsd_guest_error("%s before INIT", r->op->name);
        reply_err(r, -EIO);
        return r->written;
    }

    /*
     * A file a migration could not bring along: every request on it
     * fails, but the guest may still forget it and close its handles.
     */
    if (G_UNLIKELY(vfsd_inode_lost(fs, r->h.nodeid)) &&
        !(op->flags & VFSD_OP_HIPRIO) && r->h.opcode != FUSE_RELEASE &&
        r->h.opcode != FUSE_RELEASEDIR) {
        vfsd_guest_error("%s on inode %" PRIu64 ", lost in migration",
                         r->op->name, (uint64_t)r->h.nodeid);
        reply_err(r, -EIO);
        return r->written;
    }

    start = fs->stats ? vfsd_stats_now() : 0;
    if (!op->handler) {
        log_unserved(r);
        reply_err(r, -ENOSYS);
    } else if (op->flags & VFSD_OP_NO_REPLY) {
        op->handler(r, op->variant);
        return 0;
    } else if ((op->flags & VFSD_OP_LABELLED) && r->label_err) {
        reply_err(r, r->label_err);
    } else {
        op->handler(r, op->variant);
    }
    if (fs->stats) {
        vfsd_stats_record_op(fs->stats, r->h.opcode, start);
    }
    return r->written;
}

static size_t process(VfsdFs *fs, const VfsdReqHead *head, VfsdBuf *in,
                      VfsdBuf *out, VfsdRunMode mode)
{
    VfsdReq req = {
        .fs = fs,
        .op = op_of(head->h.opcode),
        .in = in,
        .out = out,
        .h = head->h,
        .no_wait = mode == VFSD_RUN_NO_WAIT,
    };
    const VfsdBuf rep = *out;
    size_t n;

    if (G_UNLIKELY(vfsd_record_fd >= 0) && head->valid) {
        vfsd_record_request(&head->h, in, out, mode == VFSD_RUN_HIPRIO);
    }
    n = process_req(&req, head, in, mode);
    if (G_UNLIKELY(vfsd_record_fd >= 0) && head->valid) {
        vfsd_record_reply(head->h.unique, &rep, n);
    }
    g_free(req.label_mem);
    return n;
}

size_t vfsd_process_request(VfsdFs *fs, const VfsdReqHead *head,
                            VfsdBuf *in, VfsdBuf *out)
{
    return process(fs, head, in, out, VFSD_RUN_NORMAL);
}

size_t vfsd_process_hiprio(VfsdFs *fs, const VfsdReqHead *head,
                           VfsdBuf *in, VfsdBuf *out)
{
    return process(fs, head, in, out, VFSD_RUN_HIPRIO);
}

size_t vfsd_process_no_wait(VfsdFs *fs, const VfsdReqHead *head,
                            VfsdBuf *in, VfsdBuf *out)
{
    return process(fs, head, in, out, VFSD_RUN_NO_WAIT);
}
