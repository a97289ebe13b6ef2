/*
 * virtiofsd: file handles, opened by a process of their own
 *
 * open_by_handle_at() with CAP_DAC_READ_SEARCH opens any inode of a file
 * system, whatever directory it lies in, through any fd of that file
 * system.  No sandbox bounds it: a process that parses guest requests
 * and holds the capability reaches the whole file system once a guest
 * takes it over.  So the serving process never holds it.  The broker, a
 * process forked before the first request, holds it alone, and opens
 * only handles it made itself from fds the server gave it: the server
 * had reached those inodes already, so nothing the broker returns
 * reaches further than the server could.  The server names them by a
 * number; it never hands the broker handle bytes to open.
 *
 * The one exception, vfsd_broker_identify(), decodes foreign handle
 * bytes (a migration stream's) but answers with the file's identity,
 * never an fd: the server must then find that file beneath the shared
 * directory on its own.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"

enum {
    BROKER_REGISTER = 1,        /* fds: the inode, and its mount's once */
                                /* no reply: an open says how it went */
    BROKER_OPEN,
    BROKER_FORGET,              /* no reply */
    BROKER_IDENTIFY,
    BROKER_REGISTER_MANY,       /* a BrokerBatch, an fd each: no reply */
    BROKER_FORGET_MANY,         /* a BrokerBatch, no fd: no reply */
};

/*
 * Inodes whose fds the idle list lets go, and those the guest forgets,
 * go to the broker BROKER_BATCH at a time: one message and one wake-up
 * of the broker for all of them.
 */
#define BROKER_BATCH 16

/* Bounds the broker's memory whatever the server asks */
#define BROKER_MAX_HANDLES (8u << 20)
#define BROKER_MAX_MOUNTS 4096

typedef struct BrokerMsg {
    uint32_t op;
    uint32_t handle_bytes;      /* BROKER_IDENTIFY */
    uint64_t id;
    uint64_t mnt_id;            /* BROKER_REGISTER */
    int32_t handle_type;        /* BROKER_IDENTIFY */
    uint32_t padding;
    uint8_t handle[MAX_HANDLE_SZ];
} BrokerMsg;

/* BROKER_REGISTER_MANY (inodes on mounts the broker has) and _FORGET_MANY */
typedef struct BrokerBatch {
    uint32_t op;
    uint32_t count;
    uint64_t id[BROKER_BATCH];
    uint64_t mnt_id[BROKER_BATCH];     /* BROKER_REGISTER_MANY */
} BrokerBatch;

typedef struct BrokerReply {
    int32_t err;                /* 0 or a positive errno */
    uint32_t mode;              /* BROKER_IDENTIFY: st_mode */
    uint64_t dev;
    uint64_t ino;
} BrokerReply;

struct VfsdBroker {
    int sock;
    int alive;                  /* see broker_main() */
    pid_t pid;
    GMutex lock;                /* one request and its reply at a time */
    uint64_t next_id;           /* under lock */
    GHashTable *mounts_sent;    /* under lock: mount ids the broker has */
    gint made, opened;
    gint messages;              /* sent to the broker */
    /*
     * Under lock: what waits for its batch to fill up, and goes before
     * any other message: inodes handed over (our fds of them) and ids
     * forgotten
     */
    BrokerBatch reg;
    int reg_fd[BROKER_BATCH];
    BrokerBatch forget;
};

/* The broker's own state, in its process */
typedef struct BrokerEntry {
    uint64_t mnt_id;
    struct file_handle *fh;     /* NULL: registering failed with @err */
    int err;
} BrokerEntry;

typedef struct BrokerState {
    int sock;
    uint64_t root_mnt;
    GHashTable *entries;        /* uint64_t id -> BrokerEntry */
    GHashTable *mounts;         /* mount id -> real fd of that mount */
} BrokerState;

static void entry_free(gpointer p)
{
    BrokerEntry *e = p;

    g_free(e->fh);
    g_free(e);
}

static int mount_fd(BrokerState *s, uint64_t mnt_id)
{
    gpointer v = g_hash_table_lookup(s->mounts, &mnt_id);

    return v ? GPOINTER_TO_INT(v) - 1 : -1;
}

/*
 * @mfd is to be the fd handles of mount @mnt_id are opened through: it
 * must really be on that mount, or a handle made on one file system
 * would be decoded on another, where it names some other file.
 */
static int add_mount(BrokerState *s, uint64_t mnt_id, int mfd)
{
    struct statx stx;
    int fl = fcntl(mfd, F_GETFL);

    if (fl < 0 || (fl & O_PATH) ||
        statx(mfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 ||
        !(stx.stx_mask & STATX_MNT_ID) || stx.stx_mnt_id != mnt_id) {
        return -EINVAL;
    }
    if (g_hash_table_size(s->mounts) >= BROKER_MAX_MOUNTS) {
        return -ENOSPC;
    }
    g_hash_table_insert(s->mounts, g_memdup2(&mnt_id, sizeof(mnt_id)),
                        GINT_TO_POINTER(mfd + 1));
    return 0;
}

static int do_register(BrokerState *s, const BrokerMsg *m, int *fds,
                       int nfds)
{
    g_autofree struct file_handle *fh = g_malloc(sizeof(*fh) +
                                                 MAX_HANDLE_SZ);
    BrokerEntry *e;
    size_t size;
    int mnt_id, ret;

    if (nfds < 1 || g_hash_table_contains(s->entries, &m->id) ||
        g_hash_table_size(s->entries) >= BROKER_MAX_HANDLES) {
        return -ENOSPC;         /* nothing kept: an open gets ENOENT */
    }
    e = g_new0(BrokerEntry, 1);
    e->mnt_id = m->mnt_id;
    g_hash_table_insert(s->entries, g_memdup2(&m->id, sizeof(m->id)), e);
    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fds[0], "", fh, &mnt_id, AT_EMPTY_PATH) < 0) {
        e->err = errno;
        return -errno;
    }
    if ((uint64_t)mnt_id != m->mnt_id) {
        e->err = EINVAL;
        return -EINVAL;
    }
    if (mount_fd(s, m->mnt_id) < 0) {
        ret = nfds < 2 ? -EINVAL : add_mount(s, m->mnt_id, fds[1]);
        if (ret < 0) {
            e->err = -ret;
            return ret;
        }
        fds[1] = -1;            /* kept */
    }
    size = sizeof(*fh) + fh->handle_bytes;
    e->fh = g_realloc(g_steal_pointer(&fh), size);
    return 0;
}

static int do_open(BrokerState *s, const BrokerMsg *m)
{
    BrokerEntry *e = g_hash_table_lookup(s->entries, &m->id);
    int fd;

    if (!e) {
        return -ENOENT;
    }
    if (!e->fh) {
        return -e->err;
    }
    fd = open_by_handle_at(mount_fd(s, e->mnt_id), e->fh,
                           O_PATH | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int do_identify(BrokerState *s, const BrokerMsg *m, BrokerReply *r)
{
    g_autofree struct file_handle *fh = NULL;
    struct statx stx;
    int fd, ret = 0;

    if (m->handle_bytes == 0 || m->handle_bytes > MAX_HANDLE_SZ) {
        return -EINVAL;
    }
    fh = g_malloc(sizeof(*fh) + m->handle_bytes);
    fh->handle_bytes = m->handle_bytes;
    fh->handle_type = m->handle_type;
    memcpy(fh->f_handle, m->handle, m->handle_bytes);
    fd = open_by_handle_at(mount_fd(s, s->root_mnt), fh, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE |
              STATX_INO, &stx) < 0) {
        ret = -errno;
    } else {
        r->mode = stx.stx_mode & S_IFMT;
        r->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        r->ino = stx.stx_ino;
    }
    close(fd);
    return ret;
}

static bool send_reply(int sock, const BrokerReply *r, int fd)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = { .iov_base = (void *)r, .iov_len = sizeof(*r) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct cmsghdr *c;
    ssize_t n;

    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == sizeof(*r);
}

/* One batch: exactly a BrokerBatch, an fd per inode to register */
static bool serve_batch(BrokerState *s, const BrokerBatch *bt, int *fds,
                        int nfds)
{
    BrokerMsg m = { 0 };
    uint32_t i;

    if (bt->count == 0 || bt->count > BROKER_BATCH ||
        nfds != (bt->op == BROKER_REGISTER_MANY ? (int)bt->count : 0)) {
        return false;
    }
    for (i = 0; i < bt->count; i++) {
        if (bt->op == BROKER_FORGET_MANY) {
            g_hash_table_remove(s->entries, &bt->id[i]);
            continue;
        }
        /* As a BROKER_REGISTER of an inode whose mount the broker has */
        m.op = BROKER_REGISTER;
        m.id = bt->id[i];
        m.mnt_id = bt->mnt_id[i];
        do_register(s, &m, &fds[i], 1);
    }
    return true;
}

/*
 * The fds that came with a message, into @fds; false when there were more
 * than BROKER_BATCH, those past it closed.
 */
static bool take_fds(struct msghdr *msg, int *fds, int *nfds)
{
    struct cmsghdr *c;
    bool ok = true;
    int i;

    for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

            for (i = 0; i < (int)cnt; i++) {
                int fd;

                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (*nfds < BROKER_BATCH) {
                    fds[(*nfds)++] = fd;
                } else {
                    close(fd);
                    ok = false;
                }
            }
        }
    }
    return ok;
}

/*
 * One BrokerMsg other than a batch: the answer, for the ops that have one,
 * in @r, and BROKER_OPEN's fd to send with it in @out.  False for an op
 * the broker does not know.
 */
static bool serve_msg(BrokerState *s, const BrokerMsg *mp, int *fds,
                      int nfds, BrokerReply *r, int *out)
{
    int ret;

    switch (mp->op) {
    case BROKER_REGISTER:
        do_register(s, mp, fds, nfds);
        return true;
    case BROKER_OPEN:
        ret = do_open(s, mp);
        if (ret >= 0) {
            *out = ret;
            ret = 0;
        }
        break;
    case BROKER_FORGET:
        g_hash_table_remove(s->entries, &mp->id);
        return true;
    case BROKER_IDENTIFY:
        ret = do_identify(s, mp, r);
        break;
    default:
        return false;
    }
    r->err = -ret;
    return true;
}

/*
 * One message: exactly a BrokerMsg, with at most two fds, or a
 * BrokerBatch.  Anything else is a server that is not ours any more, and
 * ends the broker: it owes such a server nothing.
 */
static bool serve_one(BrokerState *s)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(BROKER_BATCH * sizeof(int))];
    } ctl;
    union {
        BrokerMsg m;
        BrokerBatch b;
    } u;
    BrokerMsg *mp = &u.m;
    BrokerReply r = { 0 };
    struct iovec iov = { .iov_base = &u, .iov_len = sizeof(u) };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
    };
    int fds[BROKER_BATCH], nfds = 0, out = -1, i;
    ssize_t n;
    bool ok, batch;

    do {
        n = recvmsg(s->sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        return false;           /* the server is gone */
    }
    ok = take_fds(&msg, fds, &nfds);
    batch = n >= (ssize_t)sizeof(uint32_t) &&
            (u.m.op == BROKER_REGISTER_MANY || u.m.op == BROKER_FORGET_MANY);
    if (n != (batch ? sizeof(u.b) : sizeof(u.m)) ||
        (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        ok = false;
    }
    if (ok && !batch && (nfds > (mp->op == BROKER_REGISTER ? 2 : 0))) {
        ok = false;
    }
    if (ok && batch) {
        ok = serve_batch(s, &u.b, fds, nfds);
    } else if (ok) {
        ok = serve_msg(s, mp, fds, nfds, &r, &out);
    }
    for (i = 0; i < nfds; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    if (ok && !batch && mp->op != BROKER_FORGET &&
        mp->op != BROKER_REGISTER) {
        ok = send_reply(s->sock, &r, out);
    }
    if (out >= 0) {
        close(out);
    }
    return ok;
}

/*
 * The broker's system calls: its messages, the handles, and what glib's
 * allocator needs.  @action is --seccomp's; VFSD_SECCOMP_NONE: nothing.
 */
static bool broker_seccomp(VfsdSeccomp action)
{
    static const int allowed[] = {
        SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(open_by_handle_at),
        SCMP_SYS(name_to_handle_at), SCMP_SYS(statx), SCMP_SYS(fcntl),
        SCMP_SYS(close), SCMP_SYS(exit), SCMP_SYS(exit_group),
        SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap),
        SCMP_SYS(madvise), SCMP_SYS(rt_sigreturn), SCMP_SYS(restart_syscall),
        SCMP_SYS(futex),
    };
    scmp_filter_ctx ctx;
    unsigned int i;
    int ret = 0;

    if (action == VFSD_SECCOMP_NONE) {
        return true;
    }
    ctx = seccomp_init(action == VFSD_SECCOMP_LOG ? SCMP_ACT_LOG :
                       SCMP_ACT_KILL_PROCESS);
    if (!ctx) {
        return false;
    }
    for (i = 0; i < G_N_ELEMENTS(allowed) && ret == 0; i++) {
        ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
    }
    if (ret == 0) {
        ret = seccomp_load(ctx);
    }
    seccomp_release(ctx);
    return ret == 0;
}

static G_NORETURN void broker_main(int sock, int root_mfd, int alive,
                                   VfsdSeccomp action)
{
    BrokerState s = { .sock = sock };
    struct pollfd pfd = { .fd = alive, .events = POLLIN };
    struct statx stx;
    int keep[3] = { sock, root_mfd, alive };
    int fd, i;

    /* Nothing to live for once the server is gone */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || poll(&pfd, 1, 0) != 0) {
        _exit(1);
    }
    /*
     * Not even the server may read or trace it: it holds what the
     * server must not.
     */
    prctl(PR_SET_DUMPABLE, 0);
    /*
     * Only what it was given: not the server's fds, nor the ones the
     * daemon was started with.  Everything above the highest of the
     * three it keeps goes in one call.
     */
    for (fd = 0; fd <= MAX(MAX(sock, root_mfd), alive); fd++) {
        bool kept = false;

        for (i = 0; i < 3; i++) {
            kept |= keep[i] == fd;
        }
        if (!kept) {
            close(fd);
        }
    }
    syscall(SYS_close_range, MAX(MAX(sock, root_mfd), alive) + 1, ~0U, 0);
    close(alive);

    capng_clear(CAPNG_SELECT_BOTH);
    capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED,
                 CAP_DAC_READ_SEARCH);
    if (capng_apply(CAPNG_SELECT_BOTH) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        !broker_seccomp(action)) {
        _exit(1);
    }
    if (statx(root_mfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 ||
        !(stx.stx_mask & STATX_MNT_ID)) {
        _exit(1);
    }
    s.root_mnt = stx.stx_mnt_id;
    s.entries = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                      entry_free);
    s.mounts = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     NULL);
    g_hash_table_insert(s.mounts, g_memdup2(&s.root_mnt, sizeof(uint64_t)),
                        GINT_TO_POINTER(root_mfd + 1));
    while (serve_one(&s)) {
        continue;
    }
    _exit(0);
}

VfsdBroker *vfsd_broker_spawn(int root_fd, int proc_fd, VfsdSeccomp action,
                              char **err)
{
    VfsdBroker *b;
    char name[32];
    int sv[2], alive[2], root_mfd;
    pid_t pid;

    capng_get_caps_process();
    if (!capng_have_capability(CAPNG_EFFECTIVE, CAP_DAC_READ_SEARCH)) {
        *err = g_strdup("opening file handles needs CAP_DAC_READ_SEARCH");
        return NULL;
    }
    /* open_by_handle_at() takes a real open, not an O_PATH fd */
    snprintf(name, sizeof(name), "%d", root_fd);
    root_mfd = openat(proc_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_mfd < 0) {
        *err = g_strdup_printf("cannot open the shared directory: %s",
                               strerror(errno));
        return NULL;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        *err = g_strdup_printf("socketpair: %s", strerror(errno));
        close(root_mfd);
        return NULL;
    }
    if (pipe2(alive, O_CLOEXEC) < 0) {
        *err = g_strdup_printf("pipe: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        close(root_mfd);
        return NULL;
    }
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        close(alive[1]);
        broker_main(sv[1], root_mfd, alive[0], action);
    }
    close(sv[1]);
    close(alive[0]);
    close(root_mfd);
    if (pid < 0) {
        *err = g_strdup_printf("fork: %s", strerror(errno));
        close(sv[0]);
        close(alive[1]);
        return NULL;
    }
    /*
     * The pipe's write end dies with us: the broker checks it after
     * asking to be killed with its parent, in case we went first.
     */
    b = g_new0(VfsdBroker, 1);
    b->sock = sv[0];
    b->pid = pid;
    b->next_id = 1;
    b->mounts_sent = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                           g_free, NULL);
    g_mutex_init(&b->lock);
    b->alive = alive[1];
    return b;
}

void vfsd_broker_free(VfsdBroker *b)
{
    uint32_t i;

    if (!b) {
        return;
    }
    for (i = 0; i < b->reg.count; i++) {
        close(b->reg_fd[i]);
    }
    close(b->sock);
    close(b->alive);
    while (waitpid(b->pid, NULL, 0) < 0 && errno == EINTR) {
        continue;
    }
    g_hash_table_destroy(b->mounts_sent);
    g_mutex_clear(&b->lock);
    g_free(b);
}

/* Sends the batch @bt, with an fd each from @fds for a registration */
static void batch_send_locked(VfsdBroker *b, BrokerBatch *bt, const int *fds)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(BROKER_BATCH * sizeof(int))];
    } ctl;
    struct iovec iov = { .iov_base = bt, .iov_len = sizeof(*bt) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct cmsghdr *c;
    ssize_t n;

    if (!bt->count) {
        return;
    }
    if (fds) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(bt->count * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(bt->count * sizeof(int));
        memcpy(CMSG_DATA(c), fds, bt->count * sizeof(int));
    }
    do {
        n = sendmsg(b->sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    g_atomic_int_inc(&b->messages);
    /* Not sent: opening those inodes will say so (the broker lacks them) */
    bt->count = 0;
}

/* What waits goes first: the inodes handed over, then the forgotten */
static void batches_flush_locked(VfsdBroker *b)
{
    uint32_t i, n = b->reg.count;

    batch_send_locked(b, &b->reg, b->reg_fd);
    for (i = 0; i < n; i++) {
        close(b->reg_fd[i]);
    }
    batch_send_locked(b, &b->forget, NULL);
}

/* Sends @m with @fds, then (unless @m wants none) reads the reply */
static int call_locked(VfsdBroker *b, const BrokerMsg *m, const int *fds,
                       int nfds, BrokerReply *r, int *fd_out)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct cmsghdr *c;
    ssize_t n;
    int fd = -1;

    batches_flush_locked(b);
    g_atomic_int_inc(&b->messages);
    if (nfds) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    do {
        n = sendmsg(b->sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(*m)) {
        return -EIO;
    }
    if (!r) {
        return 0;
    }
    memset(&msg, 0, sizeof(msg));
    iov.iov_base = r;
    iov.iov_len = sizeof(*r);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    do {
        n = recvmsg(b->sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    for (c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c;
         c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0) {
            memcpy(&fd, CMSG_DATA(c), sizeof(int));
        }
    }
    if (n != sizeof(*r) || (fd >= 0 && (!fd_out || r->err))) {
        if (fd >= 0) {
            close(fd);
        }
        return -EIO;
    }
    if (fd_out) {
        if (!r->err && fd < 0) {
            return -EIO;
        }
        *fd_out = fd;
    }
    return -r->err;
}

int vfsd_broker_register(VfsdBroker *b, int proc_fd, int fd,
                         uint64_t mnt_id, uint64_t *id)
{
    BrokerMsg m = { .op = BROKER_REGISTER, .mnt_id = mnt_id };
    char name[32];
    int fds[2] = { fd, -1 }, ret;

    g_mutex_lock(&b->lock);
    if (!g_hash_table_contains(b->mounts_sent, &mnt_id)) {
        /*
         * The guest reaches a mount first through its root, which is
         * what the broker keeps to open the mount's handles.  It must
         * be a real open, so only a directory will do: a mount whose
         * root is another file (a bind-mounted file) has no handles.
         */
        snprintf(name, sizeof(name), "%d", fd);
        fds[1] = openat(proc_fd, name,
                        O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
        if (fds[1] < 0) {
            ret = errno == ENOTDIR ? -EOPNOTSUPP : -errno;
            g_mutex_unlock(&b->lock);
            return ret;
        }
    }
    /*
     * No reply, so that a new inode costs no round trip: the broker
     * makes the same handle we could, and if it cannot keep it after
     * all, opening it later says why.
     */
    m.id = b->next_id++;
    ret = call_locked(b, &m, fds, fds[1] >= 0 ? 2 : 1, NULL, NULL);
    if (ret == 0 && fds[1] >= 0) {
        g_hash_table_add(b->mounts_sent, g_memdup2(&mnt_id, sizeof(mnt_id)));
    }
    g_mutex_unlock(&b->lock);
    if (fds[1] >= 0) {
        close(fds[1]);
    }
    if (ret == 0) {
        *id = m.id;
        g_atomic_int_inc(&b->made);
    }
    return ret;
}

int vfsd_broker_hand_over(VfsdBroker *b, int proc_fd, int fd,
                          uint64_t mnt_id, uint64_t *id)
{
    BrokerBatch *bt = &b->reg;
    int ret;

    g_mutex_lock(&b->lock);
    if (!g_hash_table_contains(b->mounts_sent, &mnt_id)) {
        /* The mount's root goes with its first inode: on its own */
        g_mutex_unlock(&b->lock);
        ret = vfsd_broker_register(b, proc_fd, fd, mnt_id, id);
        if (ret == 0) {
            close(fd);
        }
        return ret;
    }
    *id = b->next_id++;
    bt->op = BROKER_REGISTER_MANY;
    bt->id[bt->count] = *id;
    bt->mnt_id[bt->count] = mnt_id;
    b->reg_fd[bt->count++] = fd;
    if (bt->count == BROKER_BATCH) {
        batches_flush_locked(b);
    }
    g_mutex_unlock(&b->lock);
    g_atomic_int_inc(&b->made);
    return 0;
}

int vfsd_broker_open(VfsdBroker *b, uint64_t id)
{
    BrokerMsg m = { .op = BROKER_OPEN, .id = id };
    BrokerReply r;
    int fd = -1, ret;

    g_mutex_lock(&b->lock);
    ret = call_locked(b, &m, NULL, 0, &r, &fd);
    g_mutex_unlock(&b->lock);
    if (ret == 0) {
        g_atomic_int_inc(&b->opened);
        return fd;
    }
    return ret;
}

void vfsd_broker_forget(VfsdBroker *b, uint64_t id)
{
    BrokerBatch *bt = &b->forget;

    /* No hurry: the broker only holds a few handles longer */
    g_mutex_lock(&b->lock);
    bt->op = BROKER_FORGET_MANY;
    bt->id[bt->count++] = id;
    if (bt->count == BROKER_BATCH) {
        batches_flush_locked(b);
    }
    g_mutex_unlock(&b->lock);
}

int vfsd_broker_identify(VfsdBroker *b, int handle_type,
                         const void *bytes, uint32_t len, dev_t *dev,
                         uint64_t *ino, mode_t *type)
{
    BrokerMsg m = { .op = BROKER_IDENTIFY, .handle_type = handle_type };
    BrokerReply r;
    int ret;

    if (len == 0 || len > MAX_HANDLE_SZ) {
        return -EINVAL;
    }
    m.handle_bytes = len;
    memcpy(m.handle, bytes, len);
    g_mutex_lock(&b->lock);
    ret = call_locked(b, &m, NULL, 0, &r, NULL);
    g_mutex_unlock(&b->lock);
    if (ret == 0) {
        *dev = r.dev;
        *ino = r.ino;
        *type = r.mode;
    }
    return ret;
}

unsigned int vfsd_broker_fds(VfsdBroker *b)
{
    unsigned int n;

    if (!b) {
        return 0;
    }
    g_mutex_lock(&b->lock);
    n = 2 + b->reg.count;
    g_mutex_unlock(&b->lock);
    return n;
}

void vfsd_broker_counts(VfsdBroker *b, unsigned int *made,
                        unsigned int *opened)
{
    *made = g_atomic_int_get(&b->made);
    *opened = g_atomic_int_get(&b->opened);
}

unsigned int vfsd_broker_messages(VfsdBroker *b)
{
    return g_atomic_int_get(&b->messages);
}
