/*
 * vhost-user-fs load generator: a front-end without a guest
 *
 * Every figure a guest gives us is paced by the guest: under TCG its own
 * kernel costs far more per round trip than any back-end does.  This
 * program talks to a vhost-user-fs back-end (our virtiofsd, the Rust
 * virtiofsd, any other) as QEMU and a guest's virtio-fs driver would
 * together, with nothing else in the way: guest memory in a memfd given
 * with SET_MEM_TABLE, split virtqueues (hiprio and N request queues) with
 * eventfd kicks and calls, FUSE_INIT, then mixes of FUSE requests kept
 * DEPTH deep on each request queue by a thread of its own.
 *
 * Every reply is checked: the program makes its fixtures in the shared
 * directory itself, through the host, and compares what the back-end
 * says with what the host says (inode numbers, sizes, modes, owners,
 * times, file contents, directory listings).  A wrong reply or an error
 * that was not expected ends the run with status 1.
 *
 * --replay=STREAM replays instead what a real guest sent, recorded with
 * its replies by our daemon (VIRTIOFSD_RECORD), and checks each reply
 * against the recorded one (the replay mix, below).
 *
 * Per mix and depth it prints one JSON line: requests, requests per
 * second, p50 and p99 latency and, with --pid, the CPU time and context
 * switches of the back-end's whole process tree over the run (ours and
 * the Rust daemon both fork a sandboxed child).
 *
 * --floor runs, with no back-end, the host system calls each mix's
 * requests need, in a loop, and an eventfd ping-pong between two
 * threads: what a back-end cannot go below.
 *
 * bench/loadgen.py runs it for make bench and make check.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "libvhost-user.h"
#include "standard-headers/linux/fuse.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_ring.h"

#include "record-format.h"
#include "vu-frontend.h"

/* Guest addresses start here: 0 is a value a bug produces too easily */
#define GPA_BASE 0x100000ULL
/*
 * Descriptors a request may take: in header, arguments, data; out
 * header, body.  Each slot owns this many, from slot * SLOT_DESCS.
 */
#define SLOT_DESCS 8
#define PAGE 4096
#define BIG (128 * 1024)
/* Where the out header ends and a small reply body begins */
#define REP_BODY 64
#define MAX_DEPTH 64
#define MAX_QUEUES 16
/* How far past the first request not started a replay may start one */
#define REPLAY_WINDOW 64
#define WAIT_MS 10000

/* The fixtures */
#define PATTERN_SIZE (4 << 20)
#define BLOCKS (PATTERN_SIZE / PAGE)
#define NAMES 100
#define DIR_ENTRIES 1000
#define READDIR_SIZE 4096
#define OWNER_UID 4242
#define OWNER_GID 4343
#define TOP_DIR "loadgen"

typedef struct Vq Vq;

/* The request a slot sends next, as mix_next() fills it */
typedef struct Req {
    uint32_t opcode;
    uint64_t nodeid;
    uint32_t args_len;          /* after the in header, in the slot's page */
    uint64_t data_gpa;          /* device-readable payload */
    uint32_t data_len;
    uint32_t body_len;          /* room for the reply's body */
    bool big;                   /* the body goes to the slot's big area */
    bool no_reply;              /* FORGET, BATCH_FORGET */
    /* The replay: the recorded header, for its caller's ids and pid */
    const struct fuse_in_header *recorded;
} Req;

typedef struct Reply {
    int32_t error;
    const uint8_t *body;
    uint32_t len;
} Reply;

typedef struct Slot {
    Vq *q;
    unsigned int id;            /* in its queue */
    unsigned int gid;           /* across queues */
    uint16_t head;
    uint8_t *req;               /* in header and arguments */
    uint64_t req_gpa;
    uint8_t *rep;               /* out header, small body at REP_BODY */
    uint64_t rep_gpa;
    uint8_t *big;
    uint64_t big_gpa;
    Req r;
    uint64_t unique;
    uint64_t t0;
    bool busy;
    /* What a mix keeps per slot */
    int step;
    uint32_t n;                 /* sequences done */
    uint64_t nodeid, fh, off;
    uint64_t rng;
    uint8_t *seen;              /* readdirplus: the listing's names */
    unsigned int nseen;
    /* The replay: its request's place in the stream, and its data */
    size_t item;
    uint8_t *data;
    uint64_t data_gpa;
} Slot;

/* nodeid -> lookups gained, to FORGET when a mix ends */
typedef struct Refs {
    uint64_t *key;
    uint64_t *count;
    size_t cap, used;
} Refs;

struct Vq {
    int idx;                    /* vhost-user's: 0 hiprio, 1.. requests */
    uint16_t num;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    int kick, call;
    uint16_t avail_idx;         /* ours, not yet published maybe */
    uint16_t published;         /* in avail->idx */
    uint16_t last_used;
    uint64_t seq;
    Slot slots[MAX_DEPTH];
    unsigned int nslots;        /* in this run */
    unsigned int busy;
    pthread_t thread;
    /* This run's results */
    uint32_t *lat;
    size_t nlat, caplat;
    uint64_t done;
    Refs refs;
};

typedef struct Mix Mix;

struct Mix {
    const char *name;
    void (*setup)(void);
    /* Fill s->r with the slot's next request; false: none */
    bool (*next)(Slot *s);
    void (*done)(Slot *s, const Reply *rp);
    void (*teardown)(void);
    /* A reply may let slots that found nothing to send start again */
    bool refill;
};

typedef struct Opts {
    const char *socket;
    const char *dir;
    unsigned int queues;
    unsigned int depths[8];
    unsigned int ndepths;
    double seconds;
    uint64_t count;             /* requests per run instead of seconds */
    unsigned int unlink_files;
    unsigned int unpack_files;
    pid_t pid;
    const char *mixes;
    bool floor;
    bool no_event_idx;
    const char *replay;         /* a stream recorded with VIRTIOFSD_RECORD */
} Opts;

static struct {
    Opts o;
    int sock;
    bool event_idx;
    int memfd;
    uint8_t *mem;
    size_t memsize, brk;
    Vq hiprio;
    Vq rq[MAX_QUEUES];
    uint32_t max_write;
    /* Each slot's room for a reply body, and for request data (replay) */
    uint32_t slot_big, slot_data;
    int dirfd;                  /* DIR/loadgen */
    uint64_t top_nodeid;
    uint8_t *pattern;           /* in guest memory: WRITE data comes from it */
    uint64_t pattern_gpa;
    struct stat hot_st;
    ino_t name_ino[NAMES];
    ino_t entry_ino[DIR_ENTRIES];
    /* The mix running now */
    const Mix *mix;
    uint64_t deadline;
    uint64_t issued;            /* atomic */
    bool count_bound;
    uint64_t nodeid[2], fh;     /* the mix's file or directories */
    uint32_t io_size;
    uint8_t *written;           /* write mixes: blocks written */
    uint32_t unlink_total, unlink_next;
    uint32_t unpack_started;
} lg;

/* The replay mix's stream, its requests and the runs' state (below) */
typedef struct Item {
    const struct fuse_in_header *req;   /* in the mapped stream */
    const struct fuse_out_header *rep;  /* NULL: none (FORGET) */
    uint32_t room;                      /* for the reply, its header's too */
    bool hiprio;
    bool barrier;                       /* it names a node by its name */
    bool started;                       /* in this run */
    uint32_t touch, ntouch;             /* stream.touched[touch..] */
} Item;

/* recorded -> live, or node -> requests in flight touching it */
typedef struct Map {
    uint64_t *key, *val;
    uint8_t *used;
    size_t cap, n;
} Map;

static struct {
    uint8_t *file;
    size_t size;
    Item *items;
    size_t nitems, cap;
    uint64_t *touched;
    size_t ntouched, touched_cap;
    const uint8_t *init;        /* the guest's fuse_init_in and the rest */
    uint32_t init_len;
    uint32_t max_write;         /* the largest WRITE's data */
    /* This run's */
    size_t next;                /* the first request not started */
    Map node, fh;               /* recorded -> live */
    Map busy;                   /* touched -> requests in flight */
    Map passed;                 /* touched -> the last pick() passing it */
    uint64_t picks;
    unsigned int inflight;
    bool barrier;               /* one is in flight */
    uint64_t root;
} stream;

/* A wrong reply: status 1 */
static void fail(const Slot *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static const char *const opnames[] = {
    [FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET",
    [FUSE_GETATTR] = "GETATTR", [FUSE_SETATTR] = "SETATTR",
    [FUSE_UNLINK] = "UNLINK", [FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ",
    [FUSE_WRITE] = "WRITE", [FUSE_RELEASE] = "RELEASE",
    [FUSE_INIT] = "INIT", [FUSE_OPENDIR] = "OPENDIR",
    [FUSE_RELEASEDIR] = "RELEASEDIR", [FUSE_CREATE] = "CREATE",
    [FUSE_BATCH_FORGET] = "BATCH_FORGET", [FUSE_READDIRPLUS] = "READDIRPLUS",
    /* And what else a replay may send */
    [FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
    [FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR", [FUSE_RMDIR] = "RMDIR",
    [FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK", [FUSE_STATFS] = "STATFS",
    [FUSE_FSYNC] = "FSYNC", [FUSE_SETXATTR] = "SETXATTR",
    [FUSE_GETXATTR] = "GETXATTR", [FUSE_LISTXATTR] = "LISTXATTR",
    [FUSE_REMOVEXATTR] = "REMOVEXATTR", [FUSE_FLUSH] = "FLUSH",
    [FUSE_READDIR] = "READDIR", [FUSE_FSYNCDIR] = "FSYNCDIR",
    [FUSE_GETLK] = "GETLK", [FUSE_SETLK] = "SETLK", [FUSE_SETLKW] = "SETLKW",
    [FUSE_ACCESS] = "ACCESS", [FUSE_INTERRUPT] = "INTERRUPT",
    [FUSE_BMAP] = "BMAP", [FUSE_DESTROY] = "DESTROY", [FUSE_IOCTL] = "IOCTL",
    [FUSE_POLL] = "POLL", [FUSE_FALLOCATE] = "FALLOCATE",
    [FUSE_RENAME2] = "RENAME2", [FUSE_LSEEK] = "LSEEK",
    [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE", [FUSE_SYNCFS] = "SYNCFS",
    [FUSE_TMPFILE] = "TMPFILE", [FUSE_STATX] = "STATX",
};

static const char *opname(uint32_t op)
{
    return op < sizeof(opnames) / sizeof(opnames[0]) && opnames[op] ?
           opnames[op] : "?";
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                    noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "loadgen: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(2);
}

static void fail(const Slot *s, const char *fmt, ...)
{
    /* Never let go: the first failure is the one told */
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    va_list ap;

    pthread_mutex_lock(&once);
    fprintf(stderr, "loadgen: FAIL: %s", lg.mix ? lg.mix->name : "set-up");
    if (s) {
        fprintf(stderr, ", queue %d slot %u, %s (unique %" PRIu64 ")",
                s->q->idx, s->id, opname(s->r.opcode), s->unique);
    }
    fprintf(stderr, ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* ---- vhost-user messages (vu-frontend.c) ---- */

static void vu_check(bool ok, uint32_t request)
{
    if (!ok) {
        die("vhost-user message %u: %s", request, strerror(errno));
    }
}

static uint64_t vu_get_u64(uint32_t request)
{
    uint64_t v;

    vu_check(vu_fe_get_u64(lg.sock, request, &v), request);
    return v;
}

static void vu_set_u64(uint32_t request, uint64_t v)
{
    vu_check(vu_fe_send(lg.sock, request, &v, sizeof(v), -1), request);
}

/* ---- guest memory and virtqueues ---- */

static uint64_t mem_alloc(size_t len, size_t align, uint8_t **host)
{
    size_t at = (lg.brk + align - 1) & ~(align - 1);

    if (at + len > lg.memsize) {
        die("guest memory exhausted (%zu bytes)", lg.memsize);
    }
    lg.brk = at + len;
    *host = lg.mem + at;
    return GPA_BASE + at;
}

static uint64_t gpa_of(const void *host)
{
    return GPA_BASE + ((const uint8_t *)host - lg.mem);
}

static uint16_t *used_event(Vq *q)
{
    return &q->avail->ring[q->num];
}

static uint16_t *avail_event(Vq *q)
{
    return (uint16_t *)&q->used->ring[q->num];
}

static void vq_init(Vq *q, int idx, unsigned int depth)
{
    unsigned int num = 64, i;
    uint8_t *p;

    while (num < SLOT_DESCS * depth) {
        num *= 2;
    }
    q->idx = idx;
    q->num = num;
    mem_alloc(16 * num, PAGE, &p);
    q->desc = (struct vring_desc *)p;
    mem_alloc(6 + 2 * num, 2, &p);
    q->avail = (struct vring_avail *)p;
    mem_alloc(6 + 8 * num, PAGE, &p);
    q->used = (struct vring_used *)p;
    for (i = 0; i < depth; i++) {
        Slot *s = &q->slots[i];

        s->q = q;
        s->id = i;
        s->gid = (idx - 1) * MAX_DEPTH + i;
        s->head = i * SLOT_DESCS;
        s->req_gpa = mem_alloc(PAGE, PAGE, &s->req);
        s->rep_gpa = mem_alloc(PAGE, PAGE, &s->rep);
        s->big_gpa = mem_alloc(lg.slot_big, PAGE, &s->big);
        if (lg.slot_data) {
            s->data_gpa = mem_alloc(lg.slot_data, PAGE, &s->data);
        }
        s->seen = calloc(DIR_ENTRIES + 2, 1);
    }
    q->kick = eventfd(0, EFD_CLOEXEC);
    q->call = eventfd(0, EFD_CLOEXEC);
    if (q->kick < 0 || q->call < 0) {
        die("eventfd: %s", strerror(errno));
    }
}

static void vq_start(Vq *q)
{
    const VuFeVring v = {
        .index = q->idx,
        .num = q->num,
        .desc = gpa_of(q->desc),
        .avail = gpa_of(q->avail),
        .used = gpa_of(q->used),
        .call = q->call,
        .kick = q->kick,
    };

    vu_check(vu_fe_set_vring(lg.sock, &v), VHOST_USER_SET_VRING_ADDR);
    vu_check(vu_fe_enable_vring(lg.sock, q->idx, true),
             VHOST_USER_SET_VRING_ENABLE);
}

static void desc_set(Vq *q, uint16_t i, uint64_t gpa, uint32_t len,
                     uint16_t flags)
{
    q->desc[i].addr = gpa;
    q->desc[i].len = len;
    q->desc[i].flags = flags;
    q->desc[i].next = i + 1;
}

/* Put the slot's request on the ring; vq_publish() makes it visible */
static void slot_submit(Slot *s)
{
    Vq *q = s->q;
    Req *r = &s->r;
    struct fuse_in_header *h = (struct fuse_in_header *)s->req;
    struct fuse_out_header *oh = (struct fuse_out_header *)s->rep;
    uint16_t d = s->head;

    /* Even: the kernel's FUSE_INT_REQ_BIT stays clear */
    s->unique = ((uint64_t)q->idx << 48) | (++q->seq << 1);
    if (r->recorded) {
        *h = *r->recorded;
    } else {
        memset(h, 0, sizeof(*h));
        h->pid = 1;
    }
    h->len = sizeof(*h) + r->args_len + r->data_len;
    h->opcode = r->opcode;
    h->unique = s->unique;
    h->nodeid = r->nodeid;
    memset(oh, 0, sizeof(*oh));

    desc_set(q, d++, s->req_gpa, sizeof(*h), VRING_DESC_F_NEXT);
    if (r->args_len) {
        desc_set(q, d++, s->req_gpa + sizeof(*h), r->args_len,
                 VRING_DESC_F_NEXT);
    }
    if (r->data_len) {
        desc_set(q, d++, r->data_gpa, r->data_len, VRING_DESC_F_NEXT);
    }
    if (!r->no_reply) {
        desc_set(q, d++, s->rep_gpa, sizeof(*oh),
                 VRING_DESC_F_WRITE | VRING_DESC_F_NEXT);
        if (r->body_len) {
            desc_set(q, d++, r->big ? s->big_gpa : s->rep_gpa + REP_BODY,
                     r->body_len, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT);
        }
    }
    q->desc[d - 1].flags &= ~VRING_DESC_F_NEXT;

    q->avail->ring[q->avail_idx++ % q->num] = s->head;
    if (!s->busy) {
        s->busy = true;
        q->busy++;
    }
    s->t0 = now_ns();
}

static void vq_publish(Vq *q)
{
    uint16_t old = q->published, new = q->avail_idx;
    bool kick;

    if (old == new) {
        return;
    }
    /* The ring entries before the index, the index before the event */
    __atomic_store_n(&q->avail->idx, new, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    q->published = new;
    if (lg.event_idx) {
        kick = vring_need_event(__atomic_load_n(avail_event(q),
                                                __ATOMIC_ACQUIRE), new, old);
    } else {
        kick = !(__atomic_load_n(&q->used->flags, __ATOMIC_ACQUIRE) &
                 VRING_USED_F_NO_NOTIFY);
    }
    if (kick && eventfd_write(q->kick, 1) < 0) {
        die("kick: %s", strerror(errno));
    }
}

/*
 * Ask for a call at the next used entry; false if one came meanwhile
 * (so there is no need to wait).
 */
static bool vq_arm(Vq *q)
{
    if (lg.event_idx) {
        __atomic_store_n(used_event(q), q->last_used, __ATOMIC_RELEASE);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE) == q->last_used;
}

static void vq_wait(Vq *q)
{
    struct pollfd p = { .fd = q->call, .events = POLLIN };
    eventfd_t v;
    int n;

    do {
        n = poll(&p, 1, WAIT_MS);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
        fail(NULL, "queue %d: no reply within %d s (%u requests in flight)",
             q->idx, WAIT_MS / 1000, q->busy);
    }
    if (n < 0 || eventfd_read(q->call, &v) < 0) {
        die("waiting for a call: %s", strerror(errno));
    }
}

typedef void (*OnReply)(Slot *s, uint32_t used_len);

/* Hand each used entry to @cb; the number of them */
static unsigned int vq_drain(Vq *q, OnReply cb)
{
    uint16_t idx = __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE);
    unsigned int n = 0;

    while (q->last_used != idx) {
        struct vring_used_elem *e = &q->used->ring[q->last_used % q->num];
        uint32_t id = e->id, len = e->len;
        Slot *s;

        q->last_used++;
        if (id % SLOT_DESCS || id / SLOT_DESCS >= q->nslots ||
            !q->slots[id / SLOT_DESCS].busy) {
            fail(NULL, "queue %d: used entry for descriptor %u, which is "
                 "not the head of a request in flight", q->idx, id);
        }
        s = &q->slots[id / SLOT_DESCS];
        cb(s, len);
        n++;
    }
    return n;
}

/* The reply in the slot, checked against its request */
static Reply slot_reply(Slot *s, uint32_t used_len)
{
    const struct fuse_out_header *oh = (void *)s->rep;
    Reply rp;

    if (oh->unique != s->unique) {
        fail(s, "reply's unique is %" PRIu64, (uint64_t)oh->unique);
    }
    if (oh->len < sizeof(*oh) ||
        oh->len > sizeof(*oh) + s->r.body_len) {
        fail(s, "reply's length %u, room was %zu", oh->len,
             sizeof(*oh) + s->r.body_len);
    }
    if (used_len != oh->len) {
        fail(s, "used length %u, the reply says %u", used_len, oh->len);
    }
    if (oh->error > 0 || oh->error < -4095 ||
        (oh->error && oh->len != sizeof(*oh))) {
        fail(s, "reply's error %d with length %u", oh->error, oh->len);
    }
    rp.error = oh->error;
    rp.body = s->r.big ? s->big : s->rep + REP_BODY;
    rp.len = oh->len - sizeof(*oh);
    return rp;
}

/* ---- synchronous requests (set-up, tear-down) ---- */

static bool sync_done;
static uint32_t sync_len;

static void sync_reply(Slot *s, uint32_t used_len)
{
    s->busy = false;
    s->q->busy--;
    sync_done = true;
    sync_len = used_len;
}

/* Send the request of @q's slot 0 and wait for its reply */
static Reply sync_call(Vq *q)
{
    Slot *s = &q->slots[0];
    Reply none = { 0 };

    sync_done = false;
    slot_submit(s);
    vq_publish(q);
    while (!sync_done) {
        if (vq_drain(q, sync_reply)) {
            continue;
        }
        if (vq_arm(q)) {
            vq_wait(q);
        }
    }
    return s->r.no_reply ? none : slot_reply(s, sync_len);
}

static void *req_init(Slot *s, uint32_t opcode, uint64_t nodeid,
                      uint32_t args_len)
{
    memset(&s->r, 0, sizeof(s->r));
    s->r.opcode = opcode;
    s->r.nodeid = nodeid;
    s->r.args_len = args_len;
    memset(s->req + sizeof(struct fuse_in_header), 0, args_len);
    return s->req + sizeof(struct fuse_in_header);
}

/* A request whose arguments are a structure of @len bytes, then @name */
static void *req_named(Slot *s, uint32_t opcode, uint64_t nodeid,
                       size_t len, const char *name)
{
    uint8_t *a = req_init(s, opcode, nodeid, len + strlen(name) + 1);

    memcpy(a + len, name, strlen(name) + 1);
    return a;
}

static void req_body(Slot *s, uint32_t len, bool big)
{
    s->r.body_len = len;
    s->r.big = big;
}

/* A reply of exactly @len bytes and no error */
static const void *expect(Slot *s, const Reply *rp, uint32_t len)
{
    if (rp->error) {
        fail(s, "error %d (%s)", rp->error, strerror(-rp->error));
    }
    if (rp->len != len) {
        fail(s, "reply body of %u bytes, %u expected", rp->len, len);
    }
    return rp->body;
}

/* ---- lookups held, forgotten when a mix ends ---- */

static void refs_add(Refs *r, uint64_t nodeid, uint64_t n)
{
    size_t i;

    if (r->used * 2 >= r->cap) {
        Refs bigger = { 0 };

        bigger.cap = r->cap ? r->cap * 2 : 1024;
        bigger.key = calloc(bigger.cap, sizeof(uint64_t));
        bigger.count = calloc(bigger.cap, sizeof(uint64_t));
        for (i = 0; i < r->cap; i++) {
            if (r->key[i]) {
                refs_add(&bigger, r->key[i], r->count[i]);
            }
        }
        free(r->key);
        free(r->count);
        *r = bigger;
    }
    i = (nodeid * 0x9e3779b97f4a7c15ULL) % r->cap;
    while (r->key[i] && r->key[i] != nodeid) {
        i = (i + 1) % r->cap;
    }
    if (!r->key[i]) {
        r->key[i] = nodeid;
        r->used++;
    }
    r->count[i] += n;
}

static void forget_all(void)
{
    Slot *s = &lg.hiprio.slots[0];
    const unsigned int per = (PAGE - sizeof(struct fuse_in_header) -
                              sizeof(struct fuse_batch_forget_in)) /
                             sizeof(struct fuse_forget_one);
    Refs all = { 0 };
    size_t i;
    unsigned int q, n = 0;
    struct fuse_batch_forget_in *in = NULL;
    struct fuse_forget_one *one = NULL;

    for (q = 0; q < lg.o.queues; q++) {
        Refs *r = &lg.rq[q].refs;

        for (i = 0; i < r->cap; i++) {
            if (r->key[i]) {
                refs_add(&all, r->key[i], r->count[i]);
            }
        }
        free(r->key);
        free(r->count);
        memset(r, 0, sizeof(*r));
    }
    for (i = 0; i <= all.cap; i++) {
        if (n && (n == per || i == all.cap)) {
            in->count = n;
            s->r.args_len = sizeof(*in) + n * sizeof(*one);
            sync_call(&lg.hiprio);
            n = 0;
        }
        if (i == all.cap) {
            break;
        }
        if (!all.key[i] || !all.count[i]) {
            continue;
        }
        if (!n) {
            in = req_init(s, FUSE_BATCH_FORGET, 0, sizeof(*in));
            s->r.no_reply = true;
            one = (struct fuse_forget_one *)(in + 1);
        }
        one[n].nodeid = all.key[i];
        one[n].nlookup = all.count[i];
        n++;
    }
    free(all.key);
    free(all.count);
}

/* ---- the back-end's process tree ---- */

typedef struct Usage {
    uint64_t cpu_us;
    uint64_t csw;
} Usage;

static bool read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0) {
        return false;
    }
    n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0) {
        return false;
    }
    buf[n] = 0;
    return true;
}

/* Fields 4 (ppid), 14 and 15 (utime, stime) of /proc/PID/stat */
static bool proc_stat(pid_t pid, pid_t *ppid, uint64_t *ticks)
{
    char path[64], buf[1024];
    unsigned long long ut, st;
    const char *p;
    int pp;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (!read_text(path, buf, sizeof(buf))) {
        return false;
    }
    p = strrchr(buf, ')');      /* the command may hold spaces */
    if (!p || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu", &pp, &ut, &st) != 3) {
        return false;
    }
    *ppid = pp;
    *ticks = ut + st;
    return true;
}

static uint64_t proc_csw(pid_t pid)
{
    char path[320], buf[4096];
    uint64_t n = 0;
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    d = opendir(path);
    if (!d) {
        return 0;
    }
    while ((e = readdir(d))) {
        const char *p;

        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%s/status", pid,
                 e->d_name);
        if (!read_text(path, buf, sizeof(buf))) {
            continue;
        }
        p = strstr(buf, "voluntary_ctxt_switches:");
        if (p) {
            n += g_ascii_strtoull(strchr(p, ':') + 1, NULL, 10);
        }
        p = strstr(buf, "nonvoluntary_ctxt_switches:");
        if (p) {
            n += g_ascii_strtoull(strchr(p, ':') + 1, NULL, 10);
        }
    }
    closedir(d);
    return n;
}

/* CPU time and context switches of --pid and all its descendants */
static Usage tree_usage(void)
{
    enum { MAXP = 65536 };
    static pid_t pids[MAXP], ppids[MAXP];
    static uint64_t ticks[MAXP];
    static bool in[MAXP];
    Usage u = { 0 };
    unsigned int n = 0, i;
    bool grew = true;
    DIR *d;
    struct dirent *e;

    if (!lg.o.pid) {
        return u;
    }
    d = opendir("/proc");
    if (!d) {
        die("/proc: %s", strerror(errno));
    }
    while ((e = readdir(d)) && n < MAXP) {
        char *end;
        long pid = g_ascii_strtoll(e->d_name, &end, 10);

        if (*end || pid <= 0 ||
            !proc_stat(pid, &ppids[n], &ticks[n])) {
            continue;
        }
        pids[n] = pid;
        in[n] = pid == lg.o.pid;
        n++;
    }
    closedir(d);
    while (grew) {
        grew = false;
        for (i = 0; i < n; i++) {
            unsigned int j;

            for (j = 0; !in[i] && j < n; j++) {
                if (in[j] && ppids[i] == pids[j]) {
                    in[i] = grew = true;
                }
            }
        }
    }
    for (i = 0; i < n; i++) {
        if (in[i]) {
            u.cpu_us += ticks[i] * 1000000 / sysconf(_SC_CLK_TCK);
            u.csw += proc_csw(pids[i]);
        }
    }
    return u;
}

/*
 * Ticks all the host's CPUs spent busy, and in all, from /proc/stat:
 * the host is shared, and what else ran there bounds what we measure.
 */
static void host_cpu(uint64_t *busy, uint64_t *total)
{
    char buf[512];
    unsigned long long v[8] = { 0 };

    *busy = *total = 0;
    if (!read_text("/proc/stat", buf, sizeof(buf)) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
               &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
        return;
    }
    *total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    *busy = *total - v[3] - v[4];
}

static uint64_t self_cpu_us(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ULL +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- the fixtures, made through the host ---- */

static void pattern_fill(uint8_t *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i += 8) {
        uint64_t v = (i + 1) * 0x9e3779b97f4a7c15ULL;

        memcpy(p + i, &v, 8);
    }
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    return remove(path);
}

static void rm_tree(const char *path)
{
    if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT) {
        die("removing %s: %s", path, strerror(errno));
    }
}

static void write_file(int dirfd, const char *name, const void *data,
                       size_t len)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0644);

    if (fd < 0 || (len && pwrite(fd, data, len, 0) != (ssize_t)len)) {
        die("%s: %s", name, strerror(errno));
    }
    close(fd);
}

static void make_dir(int dirfd, const char *name)
{
    if (mkdirat(dirfd, name, 0755) < 0) {
        die("mkdir %s: %s", name, strerror(errno));
    }
}

static int open_dir(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        die("%s: %s", name, strerror(errno));
    }
    return fd;
}

static void ino_of(int dirfd, const char *name, ino_t *ino)
{
    struct stat st;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        die("%s: %s", name, strerror(errno));
    }
    *ino = st.st_ino;
}

static void make_fixtures(void)
{
    char path[PATH_MAX], name[32];
    int d, i;

    snprintf(path, sizeof(path), "%s/%s", lg.o.dir, TOP_DIR);
    rm_tree(path);
    if (mkdir(path, 0755) < 0) {
        die("mkdir %s: %s", path, strerror(errno));
    }
    lg.dirfd = open_dir(AT_FDCWD, path);
    if (lg.o.replay) {
        /* The stream makes all it touches */
        return;
    }
    write_file(lg.dirfd, "hot", lg.pattern, PATTERN_SIZE);
    if (fstatat(lg.dirfd, "hot", &lg.hot_st, 0) < 0) {
        die("hot: %s", strerror(errno));
    }
    make_dir(lg.dirfd, "names");
    d = open_dir(lg.dirfd, "names");
    for (i = 0; i < NAMES; i++) {
        snprintf(name, sizeof(name), "n%07d", i);
        write_file(d, name, NULL, 0);
        ino_of(d, name, &lg.name_ino[i]);
    }
    close(d);
    make_dir(lg.dirfd, "dir1000");
    d = open_dir(lg.dirfd, "dir1000");
    for (i = 0; i < DIR_ENTRIES; i++) {
        snprintf(name, sizeof(name), "e%07d", i);
        write_file(d, name, NULL, 0);
        ino_of(d, name, &lg.entry_ino[i]);
    }
    close(d);
}

/* ---- set-up requests ---- */

static Slot *setup_slot(void)
{
    return &lg.rq[0].slots[0];
}

static uint64_t lookup(uint64_t parent, const char *name, ino_t ino)
{
    Slot *s = setup_slot();
    const struct fuse_entry_out *e;
    Reply rp;

    req_named(s, FUSE_LOOKUP, parent, 0, name);
    req_body(s, sizeof(*e), false);
    rp = sync_call(s->q);
    e = expect(s, &rp, sizeof(*e));
    if (!e->nodeid || (ino && e->attr.ino != ino)) {
        fail(s, "%s: nodeid %" PRIu64 ", inode %" PRIu64 ", the host's "
             "is %" PRIu64, name, (uint64_t)e->nodeid, (uint64_t)e->attr.ino,
             (uint64_t)ino);
    }
    refs_add(&s->q->refs, e->nodeid, 1);
    return e->nodeid;
}

static uint64_t open_node(uint32_t opcode, uint64_t nodeid, uint32_t flags)
{
    Slot *s = setup_slot();
    struct fuse_open_in *in = req_init(s, opcode, nodeid, sizeof(*in));
    const struct fuse_open_out *out;
    Reply rp;

    in->flags = flags;
    req_body(s, sizeof(*out), false);
    rp = sync_call(s->q);
    out = expect(s, &rp, sizeof(*out));
    return out->fh;
}

static void release_node(uint32_t opcode, uint64_t nodeid, uint64_t fh)
{
    Slot *s = setup_slot();
    struct fuse_release_in *in = req_init(s, opcode, nodeid, sizeof(*in));
    Reply rp;

    in->fh = fh;
    rp = sync_call(s->q);
    expect(s, &rp, 0);
}

static ino_t host_ino(const char *path)
{
    ino_t ino;

    ino_of(lg.dirfd, path, &ino);
    return ino;
}

static void fuse_init(void)
{
    Slot *s = setup_slot();
    struct fuse_init_in *in = req_init(s, FUSE_INIT, 0, sizeof(*in));
    const struct fuse_init_out *out;
    Reply rp;

    s->q->nslots = 1;
    in->major = FUSE_KERNEL_VERSION;
    in->minor = FUSE_KERNEL_MINOR_VERSION;
    in->max_readahead = BIG;
    /* What a guest asks for, less what changes the semantics we check */
    in->flags = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_EXPORT_SUPPORT |
                FUSE_BIG_WRITES | FUSE_DONT_MASK | FUSE_AUTO_INVAL_DATA |
                FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO | FUSE_ASYNC_DIO |
                FUSE_PARALLEL_DIROPS | FUSE_ABORT_ERROR | FUSE_MAX_PAGES |
                FUSE_CACHE_SYMLINKS | FUSE_EXPLICIT_INVAL_DATA |
                FUSE_INIT_EXT;
    if (stream.init) {
        /* The recorded guest's: its requests mean what they meant then */
        s->r.args_len = MIN(stream.init_len,
                            PAGE - sizeof(struct fuse_in_header));
        memcpy(in, stream.init, s->r.args_len);
    }
    req_body(s, sizeof(*out), false);
    rp = sync_call(s->q);
    if (rp.error) {
        fail(s, "error %d", rp.error);
    }
    out = (const void *)rp.body;
    if (rp.len < offsetof(struct fuse_init_out, time_gran) ||
        out->major != FUSE_KERNEL_VERSION) {
        fail(s, "reply of %u bytes, major %u", rp.len, out->major);
    }
    lg.max_write = out->max_write;
    if (stream.init && lg.max_write < stream.max_write) {
        fail(s, "max_write %u: the recording's WRITEs of %u do not fit",
             lg.max_write, stream.max_write);
    }
    if (!stream.init && lg.max_write < BIG) {
        fail(s, "max_write %u: the 128 KiB writes do not fit", lg.max_write);
    }
    lg.top_nodeid = lookup(FUSE_ROOT_ID, TOP_DIR, host_ino("."));
    /* Held for the whole connection, not forgotten with a mix's lookups */
    free(s->q->refs.key);
    free(s->q->refs.count);
    memset(&s->q->refs, 0, sizeof(s->q->refs));
}

/* ---- the mixes ---- */

/* Whether a slot may start another request or sequence */
static bool may_start(void)
{
    if (lg.count_bound) {
        return __atomic_fetch_add(&lg.issued, 1, __ATOMIC_RELAXED) <
               lg.o.count;
    }
    return now_ns() < lg.deadline;
}

static void check_attr(Slot *s, const struct fuse_attr *a,
                       const struct stat *st)
{
    if (a->ino != st->st_ino || a->size != (uint64_t)st->st_size ||
        a->mode != st->st_mode || a->nlink != st->st_nlink ||
        a->uid != st->st_uid || a->gid != st->st_gid ||
        a->mtime != (uint64_t)st->st_mtim.tv_sec ||
        a->mtimensec != st->st_mtim.tv_nsec) {
        fail(s, "attributes ino %" PRIu64 " size %" PRIu64 " mode %o nlink "
             "%u uid %u gid %u mtime %" PRIu64 ".%09u; the host has %" PRIu64
             " %" PRIu64 " %o %u %u %u %" PRIu64 ".%09ld",
             (uint64_t)a->ino, (uint64_t)a->size, a->mode, a->nlink, a->uid,
             a->gid, (uint64_t)a->mtime, a->mtimensec,
             (uint64_t)st->st_ino, (uint64_t)st->st_size, st->st_mode,
             (unsigned int)st->st_nlink, st->st_uid, st->st_gid,
             (uint64_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    }
}

/* GETATTR of a file the guest holds */

static void getattr_setup(void)
{
    lg.nodeid[0] = lookup(lg.top_nodeid, "hot", lg.hot_st.st_ino);
}

static bool getattr_next(Slot *s)
{
    if (!may_start()) {
        return false;
    }
    req_init(s, FUSE_GETATTR, lg.nodeid[0], sizeof(struct fuse_getattr_in));
    req_body(s, sizeof(struct fuse_attr_out), false);
    return true;
}

static void getattr_done(Slot *s, const Reply *rp)
{
    const struct fuse_attr_out *a = expect(s, rp, sizeof(*a));

    check_attr(s, &a->attr, &lg.hot_st);
}

/* LOOKUP: a known name, then a missing one */

static void lookup_setup(void)
{
    lg.nodeid[0] = lookup(lg.top_nodeid, "names", host_ino("names"));
}

static bool lookup_next(Slot *s)
{
    char name[32];

    if (!may_start()) {
        return false;
    }
    snprintf(name, sizeof(name), "%c%07u", s->n % 2 ? 'm' : 'n',
             (s->n / 2 + s->gid) % NAMES);
    req_named(s, FUSE_LOOKUP, lg.nodeid[0], 0, name);
    req_body(s, sizeof(struct fuse_entry_out), false);
    return true;
}

/* A missing name: ENOENT, or an entry without a node (a negative one) */
static void check_missing(Slot *s, const Reply *rp)
{
    const struct fuse_entry_out *e = (const void *)rp->body;

    if (rp->error == -ENOENT) {
        return;
    }
    if (rp->error || rp->len != sizeof(*e) || e->nodeid) {
        fail(s, "a missing name: error %d, %u bytes%s", rp->error, rp->len,
             rp->len == sizeof(*e) && e->nodeid ? ", a node" : "");
    }
}

static void lookup_done(Slot *s, const Reply *rp)
{
    unsigned int i = (s->n / 2 + s->gid) % NAMES;
    const struct fuse_entry_out *e;

    if (s->n++ % 2) {
        check_missing(s, rp);
        return;
    }
    e = expect(s, rp, sizeof(*e));
    if (!e->nodeid || e->attr.ino != lg.name_ino[i]) {
        fail(s, "n%07u: nodeid %" PRIu64 ", inode %" PRIu64 ", the host's "
             "is %" PRIu64, i, (uint64_t)e->nodeid, (uint64_t)e->attr.ino,
             (uint64_t)lg.name_ino[i]);
    }
    refs_add(&s->q->refs, e->nodeid, 1);
}

/*
 * What a guest's tar x sends per regular file (cache=auto; counted with
 * the daemon's --stats in docs/benchmarks/tree.md): LOOKUP of the new
 * name, CREATE (O_CREAT | O_EXCL), WRITE, then tar's set_stat(): times,
 * owner, mode, each a SETATTR on the open file, and RELEASE.
 */
enum { U_LOOKUP, U_CREATE, U_WRITE, U_TIMES, U_OWNER, U_MODE, U_RELEASE,
       U_STEPS };

static void unpack_name(char *buf, size_t size, unsigned int gid,
                        unsigned int n)
{
    snprintf(buf, size, "u%03u-%07u", gid, n);
}

static uint64_t unpack_block(unsigned int gid, unsigned int n)
{
    return (gid * 7919ULL + n) % BLOCKS;
}

static void unpack_times(unsigned int gid, unsigned int n,
                         struct timespec *at, struct timespec *mt)
{
    at->tv_sec = 1000000000 + gid;
    at->tv_nsec = (n * 1000 + gid) % 1000000000;
    mt->tv_sec = 1500000000 + n;
    mt->tv_nsec = (n * 7 + gid) % 1000000000;
}

/*
 * The files stay looked up until the mix ends, as a guest keeps what it
 * unpacked in its dentry cache: a back-end that holds an fd per inode
 * runs out of them past its RLIMIT_NOFILE, so a run makes at most
 * --unpack-files files, however long it may last.
 */
static void unpack_setup(void)
{
    lg.unpack_started = 0;
    make_dir(lg.dirfd, "unpack");
    lg.nodeid[0] = lookup(lg.top_nodeid, "unpack", host_ino("unpack"));
}

static bool unpack_next(Slot *s)
{
    struct fuse_setattr_in *sa;
    struct timespec at, mt;
    char name[32];

    unpack_name(name, sizeof(name), s->gid, s->n);
    switch (s->step) {
    case U_LOOKUP:
        if (!may_start() ||
            __atomic_fetch_add(&lg.unpack_started, 1, __ATOMIC_RELAXED) >=
            lg.o.unpack_files) {
            return false;
        }
        req_named(s, FUSE_LOOKUP, lg.nodeid[0], 0, name);
        req_body(s, sizeof(struct fuse_entry_out), false);
        break;
    case U_CREATE: {
        struct fuse_create_in *c = req_named(s, FUSE_CREATE, lg.nodeid[0],
                                             sizeof(*c), name);

        c->flags = O_WRONLY | O_CREAT | O_EXCL;
        c->mode = S_IFREG | 0600;
        req_body(s, sizeof(struct fuse_entry_out) +
                 sizeof(struct fuse_open_out), false);
        break;
    }
    case U_WRITE: {
        struct fuse_write_in *w = req_init(s, FUSE_WRITE, s->nodeid,
                                           sizeof(*w));

        w->fh = s->fh;
        w->size = PAGE;
        s->r.data_gpa = lg.pattern_gpa + unpack_block(s->gid, s->n) * PAGE;
        s->r.data_len = PAGE;
        req_body(s, sizeof(struct fuse_write_out), false);
        break;
    }
    case U_TIMES:
    case U_OWNER:
    case U_MODE:
        sa = req_init(s, FUSE_SETATTR, s->nodeid, sizeof(*sa));
        sa->fh = s->fh;
        sa->valid = FATTR_FH;
        if (s->step == U_TIMES) {
            unpack_times(s->gid, s->n, &at, &mt);
            sa->valid |= FATTR_ATIME | FATTR_MTIME;
            sa->atime = at.tv_sec;
            sa->atimensec = at.tv_nsec;
            sa->mtime = mt.tv_sec;
            sa->mtimensec = mt.tv_nsec;
        } else if (s->step == U_OWNER) {
            sa->valid |= FATTR_UID | FATTR_GID;
            sa->uid = OWNER_UID;
            sa->gid = OWNER_GID;
        } else {
            sa->valid |= FATTR_MODE;
            sa->mode = S_IFREG | 0644;
        }
        req_body(s, sizeof(struct fuse_attr_out), false);
        break;
    case U_RELEASE: {
        struct fuse_release_in *r = req_init(s, FUSE_RELEASE, s->nodeid,
                                             sizeof(*r));

        r->fh = s->fh;
        r->flags = O_WRONLY;
        break;
    }
    }
    return true;
}

static void unpack_done(Slot *s, const Reply *rp)
{
    const struct fuse_entry_out *e;
    const struct fuse_attr_out *a;
    const struct fuse_write_out *w;
    struct timespec at, mt;

    switch (s->step) {
    case U_LOOKUP:
        check_missing(s, rp);
        break;
    case U_CREATE:
        e = expect(s, rp, sizeof(*e) + sizeof(struct fuse_open_out));
        if (!e->nodeid || e->attr.mode != (S_IFREG | 0600) || e->attr.size) {
            fail(s, "new file: nodeid %" PRIu64 ", mode %o, size %" PRIu64,
                 (uint64_t)e->nodeid, e->attr.mode, (uint64_t)e->attr.size);
        }
        s->nodeid = e->nodeid;
        s->fh = ((const struct fuse_open_out *)(e + 1))->fh;
        refs_add(&s->q->refs, e->nodeid, 1);
        break;
    case U_WRITE:
        w = expect(s, rp, sizeof(*w));
        if (w->size != PAGE) {
            fail(s, "wrote %u bytes of %u", w->size, PAGE);
        }
        break;
    case U_TIMES:
    case U_OWNER:
    case U_MODE:
        a = expect(s, rp, sizeof(*a));
        unpack_times(s->gid, s->n, &at, &mt);
        if (a->attr.size != PAGE ||
            (s->step >= U_TIMES &&
             (a->attr.mtime != (uint64_t)mt.tv_sec ||
              a->attr.mtimensec != mt.tv_nsec)) ||
            (s->step >= U_OWNER &&
             (a->attr.uid != OWNER_UID || a->attr.gid != OWNER_GID)) ||
            (s->step == U_MODE && a->attr.mode != (S_IFREG | 0644))) {
            fail(s, "after the change: size %" PRIu64 ", mtime %" PRIu64
                 ".%09u, uid %u, gid %u, mode %o", (uint64_t)a->attr.size,
                 (uint64_t)a->attr.mtime, a->attr.mtimensec, a->attr.uid,
                 a->attr.gid, a->attr.mode);
        }
        break;
    case U_RELEASE:
        expect(s, rp, 0);
        break;
    }
    if (++s->step == U_STEPS) {
        s->step = U_LOOKUP;
        s->n++;
    }
}

/* What the host has after the run: every file as its requests left it */
static void unpack_teardown(void)
{
    int d = open_dir(lg.dirfd, "unpack");
    uint8_t buf[PAGE];
    unsigned int q, i, n, total = 0;
    struct timespec at, mt;
    char name[32];

    for (q = 0; q < lg.o.queues; q++) {
        for (i = 0; i < lg.rq[q].nslots; i++) {
            Slot *s = &lg.rq[q].slots[i];

            for (n = 0; n < s->n; n++) {
                struct stat st;
                int fd;

                unpack_name(name, sizeof(name), s->gid, n);
                unpack_times(s->gid, n, &at, &mt);
                fd = openat(d, name, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &st) < 0 ||
                    pread(fd, buf, sizeof(buf), 0) != PAGE) {
                    fail(NULL, "the host's %s: %s", name, strerror(errno));
                }
                close(fd);
                if (st.st_size != PAGE || st.st_mode != (S_IFREG | 0644) ||
                    st.st_uid != OWNER_UID || st.st_gid != OWNER_GID ||
                    st.st_mtim.tv_sec != mt.tv_sec ||
                    st.st_mtim.tv_nsec != mt.tv_nsec ||
                    st.st_atim.tv_sec != at.tv_sec ||
                    st.st_atim.tv_nsec != at.tv_nsec ||
                    memcmp(buf, lg.pattern + unpack_block(s->gid, n) * PAGE,
                           PAGE)) {
                    fail(NULL, "the host's %s is not what was asked: size "
                         "%jd mode %o uid %u gid %u mtime %jd.%09ld%s", name,
                         (intmax_t)st.st_size, st.st_mode, st.st_uid,
                         st.st_gid, (intmax_t)st.st_mtim.tv_sec,
                         st.st_mtim.tv_nsec,
                         st.st_atim.tv_sec != at.tv_sec ? ", atime" : "");
                }
                total++;
            }
        }
    }
    close(d);
    if (!total) {
        fail(NULL, "no file was made");
    }
}

/* READDIRPLUS of a directory of DIR_ENTRIES files, OPENDIR to RELEASEDIR */
enum { D_OPEN, D_READ, D_RELEASE };

static void readdir_setup(void)
{
    lg.nodeid[0] = lookup(lg.top_nodeid, "dir1000", host_ino("dir1000"));
}

static bool readdir_next(Slot *s)
{
    struct fuse_read_in *r;

    switch (s->step) {
    case D_OPEN:
        if (!may_start()) {
            return false;
        }
        req_init(s, FUSE_OPENDIR, lg.nodeid[0], sizeof(struct fuse_open_in));
        req_body(s, sizeof(struct fuse_open_out), false);
        break;
    case D_READ:
        r = req_init(s, FUSE_READDIRPLUS, lg.nodeid[0], sizeof(*r));
        r->fh = s->fh;
        r->offset = s->off;
        r->size = READDIR_SIZE;
        req_body(s, READDIR_SIZE, true);
        break;
    case D_RELEASE:
        r = req_init(s, FUSE_RELEASEDIR, lg.nodeid[0],
                     sizeof(struct fuse_release_in));
        r->fh = s->fh;
        break;
    }
    return true;
}

static void readdir_entries(Slot *s, const Reply *rp)
{
    uint32_t at = 0;

    while (at < rp->len) {
        const struct fuse_direntplus *d = (const void *)(rp->body + at);
        const char *name = d->dirent.name;
        char num[8];
        unsigned int i;
        char *end;

        if (rp->len - at < FUSE_NAME_OFFSET_DIRENTPLUS ||
            d->dirent.namelen > NAME_MAX ||
            rp->len - at < FUSE_DIRENTPLUS_SIZE(d)) {
            fail(s, "an entry cut short at byte %u of %u", at, rp->len);
        }
        if (d->dirent.namelen == 1 && name[0] == '.') {
            i = DIR_ENTRIES;
        } else if (d->dirent.namelen == 2 && !memcmp(name, "..", 2)) {
            i = DIR_ENTRIES + 1;
        } else {
            if (d->dirent.namelen == 8) {
                memcpy(num, name + 1, 7);
                num[7] = 0;
            } else {
                num[0] = 0;
            }
            i = g_ascii_strtoull(num, &end, 10);
            if (d->dirent.namelen != 8 || name[0] != 'e' ||
                end != num + 7 || i >= DIR_ENTRIES) {
                fail(s, "an entry named \"%.*s\"", (int)d->dirent.namelen,
                     name);
            }
            if (d->dirent.ino != lg.entry_ino[i] || !d->entry_out.nodeid ||
                d->entry_out.attr.ino != lg.entry_ino[i] ||
                d->entry_out.attr.mode != (S_IFREG | 0644)) {
                fail(s, "e%07u: inode %" PRIu64 ", nodeid %" PRIu64 ", its "
                     "attributes' inode %" PRIu64 " mode %o; the host's "
                     "inode is %" PRIu64, i, (uint64_t)d->dirent.ino,
                     (uint64_t)d->entry_out.nodeid,
                     (uint64_t)d->entry_out.attr.ino,
                     d->entry_out.attr.mode, (uint64_t)lg.entry_ino[i]);
            }
        }
        if (s->seen[i]) {
            fail(s, "\"%.*s\" listed twice", (int)d->dirent.namelen, name);
        }
        s->seen[i] = 1;
        s->nseen++;
        if (d->entry_out.nodeid) {
            refs_add(&s->q->refs, d->entry_out.nodeid, 1);
        }
        s->off = d->dirent.off;
        at += FUSE_DIRENTPLUS_SIZE(d);
    }
}

static void readdir_done(Slot *s, const Reply *rp)
{
    unsigned int i;

    switch (s->step) {
    case D_OPEN:
        s->fh = ((const struct fuse_open_out *)
                 expect(s, rp, sizeof(struct fuse_open_out)))->fh;
        s->off = 0;
        s->nseen = 0;
        memset(s->seen, 0, DIR_ENTRIES + 2);
        s->step = D_READ;
        break;
    case D_READ:
        if (rp->error) {
            expect(s, rp, 0);
        }
        if (rp->len) {
            readdir_entries(s, rp);
            break;
        }
        for (i = 0; i < DIR_ENTRIES; i++) {
            if (!s->seen[i]) {
                fail(s, "the listing ended without e%07u (%u entries)", i,
                     s->nseen);
            }
        }
        s->step = D_RELEASE;
        break;
    case D_RELEASE:
        expect(s, rp, 0);
        s->step = D_OPEN;
        s->n++;
        break;
    }
}

/* READ of the pattern file at random aligned offsets */

static void read_setup(void)
{
    lg.nodeid[0] = lookup(lg.top_nodeid, "hot", lg.hot_st.st_ino);
    lg.fh = open_node(FUSE_OPEN, lg.nodeid[0], O_RDONLY);
}

static void io_teardown(void)
{
    release_node(FUSE_RELEASE, lg.nodeid[0], lg.fh);
}

static bool read_next(Slot *s)
{
    struct fuse_read_in *r;

    if (!may_start()) {
        return false;
    }
    s->off = xorshift(&s->rng) % (PATTERN_SIZE / lg.io_size) * lg.io_size;
    r = req_init(s, FUSE_READ, lg.nodeid[0], sizeof(*r));
    r->fh = lg.fh;
    r->offset = s->off;
    r->size = lg.io_size;
    req_body(s, lg.io_size, true);
    return true;
}

static void read_done(Slot *s, const Reply *rp)
{
    const uint8_t *data = expect(s, rp, lg.io_size);

    if (memcmp(data, lg.pattern + s->off, lg.io_size)) {
        fail(s, "the data read at %" PRIu64 " is not the file's", s->off);
    }
}

static void read4k_setup(void)
{
    lg.io_size = PAGE;
    read_setup();
}

static void read128k_setup(void)
{
    lg.io_size = BIG;
    read_setup();
}

/* WRITE of the pattern at random aligned offsets of a zeroed file */

static void write_setup(void)
{
    int fd = openat(lg.dirfd, "w", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0644);

    if (fd < 0 || ftruncate(fd, PATTERN_SIZE) < 0) {
        die("w: %s", strerror(errno));
    }
    close(fd);
    lg.written = calloc(BLOCKS, 1);
    lg.nodeid[0] = lookup(lg.top_nodeid, "w", host_ino("w"));
    lg.fh = open_node(FUSE_OPEN, lg.nodeid[0], O_WRONLY);
}

static bool write_next(Slot *s)
{
    struct fuse_write_in *w;

    if (!may_start()) {
        return false;
    }
    s->off = xorshift(&s->rng) % (PATTERN_SIZE / lg.io_size) * lg.io_size;
    w = req_init(s, FUSE_WRITE, lg.nodeid[0], sizeof(*w));
    w->fh = lg.fh;
    w->offset = s->off;
    w->size = lg.io_size;
    s->r.data_gpa = lg.pattern_gpa + s->off;
    s->r.data_len = lg.io_size;
    req_body(s, sizeof(struct fuse_write_out), false);
    return true;
}

static void write_done(Slot *s, const Reply *rp)
{
    const struct fuse_write_out *w = expect(s, rp, sizeof(*w));

    if (w->size != lg.io_size) {
        fail(s, "wrote %u bytes of %u", w->size, lg.io_size);
    }
    memset(lg.written + s->off / PAGE, 1, lg.io_size / PAGE);
}

/* Blocks written hold the pattern, the others are still zero */
static void write_teardown(void)
{
    static const uint8_t zero[PAGE];
    uint8_t *buf = malloc(PATTERN_SIZE);
    unsigned int b, nw = 0;
    int fd;

    io_teardown();
    fd = openat(lg.dirfd, "w", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || pread(fd, buf, PATTERN_SIZE, 0) != PATTERN_SIZE) {
        fail(NULL, "the host's w: %s", strerror(errno));
    }
    close(fd);
    for (b = 0; b < BLOCKS; b++) {
        const uint8_t *want = lg.written[b] ? lg.pattern + b * PAGE : zero;

        if (memcmp(buf + b * PAGE, want, PAGE)) {
            fail(NULL, "the host's w: block %u is not what was %s", b,
                 lg.written[b] ? "written" : "there (nothing was written)");
        }
        nw += lg.written[b];
    }
    free(buf);
    free(lg.written);
    if (!nw) {
        fail(NULL, "nothing was written");
    }
}

static void write4k_setup(void)
{
    lg.io_size = PAGE;
    write_setup();
}

static void write128k_setup(void)
{
    lg.io_size = BIG;
    write_setup();
}

/* UNLINK of files made on the host beforehand: a count, not a time */

static void unlink_setup(void)
{
    char name[32];
    unsigned int i;
    int d;

    lg.unlink_total = lg.count_bound && lg.o.count < lg.o.unlink_files ?
                      lg.o.count : lg.o.unlink_files;
    lg.unlink_next = 0;
    make_dir(lg.dirfd, "unlink");
    d = open_dir(lg.dirfd, "unlink");
    for (i = 0; i < lg.unlink_total; i++) {
        snprintf(name, sizeof(name), "k%07u", i);
        write_file(d, name, NULL, 0);
    }
    close(d);
    lg.nodeid[0] = lookup(lg.top_nodeid, "unlink", host_ino("unlink"));
}

static bool unlink_next(Slot *s)
{
    char name[32];
    uint32_t i = __atomic_fetch_add(&lg.unlink_next, 1, __ATOMIC_RELAXED);

    if (i >= lg.unlink_total) {
        return false;
    }
    s->off = i;
    snprintf(name, sizeof(name), "k%07u", i);
    req_named(s, FUSE_UNLINK, lg.nodeid[0], 0, name);
    return true;
}

static void unlink_done(Slot *s, const Reply *rp)
{
    expect(s, rp, 0);
}

/*
 * After the run, not per reply: a look-up of a name in the directory the
 * daemon is unlinking from takes the directory's lock, and made the
 * daemon's unlinks wait for the generator's checks (and spin on the
 * lock, CPU charged to the daemon).  Every name sent is gone, every other
 * one is still there.
 */
static void unlink_teardown(void)
{
    uint32_t sent = MIN(lg.unlink_next, lg.unlink_total), i;
    char name[32];
    struct stat st;
    int gone;

    for (i = 0; i < lg.unlink_total; i++) {
        snprintf(name, sizeof(name), "unlink/k%07u", i);
        gone = fstatat(lg.dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
               errno == ENOENT;
        if (gone != (i < sent)) {
            fail(NULL, "the host's %s is %s after the run (%u of %u sent)",
                 name, gone ? "gone" : "still there", sent, lg.unlink_total);
        }
    }
}

/*
 * A replay of a stream the daemon recorded from a real guest
 * (VIRTIOFSD_RECORD, tools/virtiofsd/record-format.h): its requests, in
 * the order they started, against the same starting directory, which is
 * an empty one (the guest made all it touched).  The recorded root is
 * DIR/loadgen/replay, made afresh for each run.  Node ids and file
 * handles are the recording daemon's: each reply that gives one maps it
 * to the live one, and requests are rewritten with the live ones.
 *
 * Each reply is checked against the recorded one: the same error (a
 * missing name may be ENOENT or an entry without a node, in either), and
 * for a success what does not depend on the host's numbering or clock:
 * the type, mode, owner and size (of what is not a directory) in
 * attributes, the data of READ and READLINK, the size of WRITE, the
 * names, types and offsets of a listing.  The recording and the replay
 * must both be on tmpfs for the offsets to agree.
 *
 * At depth 1 the requests go one at a time, in order.  At depth D up to
 * D are in flight, and a request may start before earlier ones of the
 * next REPLAY_WINDOW, but only when no request in flight, nor any
 * earlier one not started yet, touches a node or a file handle it
 * touches (by the ids in its request and in its recorded reply): one
 * node's requests keep their order, and so each reply is the recorded
 * one whatever order the back-end completes them in.  UNLINK, RMDIR and
 * RENAME name a node that neither their request nor their reply gives,
 * so each waits for all before it, and all after it wait.  FORGET and
 * BATCH_FORGET, which came on the hiprio queue, go there.  The whole
 * stream runs each time: --seconds and --count do not apply.
 */

static uint64_t *map_at(Map *m, uint64_t key, bool add)
{
    size_t i;

    if (add && (m->n + 1) * 2 > m->cap) {
        Map bigger = { 0 };

        bigger.cap = m->cap ? m->cap * 2 : 4096;
        bigger.key = g_new0(uint64_t, bigger.cap);
        bigger.val = g_new0(uint64_t, bigger.cap);
        bigger.used = g_new0(uint8_t, bigger.cap);
        for (i = 0; i < m->cap; i++) {
            if (m->used[i]) {
                *map_at(&bigger, m->key[i], true) = m->val[i];
            }
        }
        g_free(m->key);
        g_free(m->val);
        g_free(m->used);
        *m = bigger;
    }
    if (!m->cap) {
        return NULL;
    }
    i = (key * 0x9e3779b97f4a7c15ULL) % m->cap;
    while (m->used[i] && m->key[i] != key) {
        i = (i + 1) % m->cap;
    }
    if (!m->used[i]) {
        if (!add) {
            return NULL;
        }
        m->used[i] = 1;
        m->key[i] = key;
        m->val[i] = 0;
        m->n++;
    }
    return &m->val[i];
}

static void map_free(Map *m)
{
    g_free(m->key);
    g_free(m->val);
    g_free(m->used);
    memset(m, 0, sizeof(*m));
}

static const char *const replay_skipped[] = {
    /* Not replayed: the generator's INIT stands for it; no session end */
    [FUSE_INIT] = "INIT", [FUSE_DESTROY] = "DESTROY",
    [FUSE_INTERRUPT] = "INTERRUPT",
};

static bool replay_skips(uint32_t op)
{
    return op < sizeof(replay_skipped) / sizeof(replay_skipped[0]) &&
           replay_skipped[op];
}

static bool is_entry_op(uint32_t op)
{
    return op == FUSE_LOOKUP || op == FUSE_MKNOD || op == FUSE_MKDIR ||
           op == FUSE_SYMLINK || op == FUSE_LINK || op == FUSE_CREATE ||
           op == FUSE_TMPFILE;
}

/* What a request touches: a node id, or a file handle with this bit */
#define TOUCH_FH (1ULL << 63)

static void touch(uint64_t id)
{
    if (!id || id == TOUCH_FH) {
        return;
    }
    if (stream.ntouched == stream.touched_cap) {
        stream.touched_cap = stream.touched_cap ? stream.touched_cap * 2 :
                             65536;
        stream.touched = g_renew(uint64_t, stream.touched,
                                 stream.touched_cap);
    }
    stream.touched[stream.ntouched++] = id;
}

/*
 * Where a request's arguments @a hold node ids and file handles (@fh):
 * at most three, at the offsets put in @at; their number
 */
static unsigned int ids_in_args(uint32_t op, const uint8_t *a, size_t *at,
                                bool *fh)
{
    const struct fuse_getattr_in *ga = (const void *)a;
    const struct fuse_setattr_in *sa = (const void *)a;

    switch (op) {
    case FUSE_READ:
    case FUSE_WRITE:
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FLUSH:
    case FUSE_FSYNC:
    case FUSE_FSYNCDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_LSEEK:
    case FUSE_FALLOCATE:
    case FUSE_GETLK:
    case FUSE_SETLK:
    case FUSE_SETLKW:
    case FUSE_IOCTL:
    case FUSE_POLL:
        at[0] = 0;                  /* fh comes first in all of them */
        fh[0] = true;
        return 1;
    case FUSE_GETATTR:
        at[0] = offsetof(struct fuse_getattr_in, fh);
        fh[0] = true;
        return ga->getattr_flags & FUSE_GETATTR_FH ? 1 : 0;
    case FUSE_SETATTR:
        at[0] = offsetof(struct fuse_setattr_in, fh);
        fh[0] = true;
        return sa->valid & FATTR_FH ? 1 : 0;
    case FUSE_RENAME:
    case FUSE_RENAME2:
    case FUSE_LINK:
        at[0] = 0;                  /* newdir, oldnodeid */
        fh[0] = false;
        return 1;
    case FUSE_COPY_FILE_RANGE:
        at[0] = offsetof(struct fuse_copy_file_range_in, fh_in);
        at[1] = offsetof(struct fuse_copy_file_range_in, nodeid_out);
        at[2] = offsetof(struct fuse_copy_file_range_in, fh_out);
        fh[0] = fh[2] = true;
        fh[1] = false;
        return 3;
    }
    return 0;
}

/* The ids @it touches: its own, its arguments', its recorded reply's */
static void item_touches(Item *it)
{
    const struct fuse_in_header *h = it->req;
    const uint8_t *a = (const uint8_t *)(h + 1);
    uint32_t alen = h->len - sizeof(*h), i, n;
    size_t at[3];
    bool fh[3];
    uint64_t v;

    it->touch = stream.ntouched;
    touch(h->nodeid);
    /* Their flags say whether GETATTR and SETATTR name a handle */
    if ((h->opcode == FUSE_GETATTR &&
         alen < sizeof(struct fuse_getattr_in)) ||
        (h->opcode == FUSE_SETATTR &&
         alen < sizeof(struct fuse_setattr_in))) {
        die("the stream's %s (unique %" PRIu64 ") is cut short",
            opname(h->opcode), (uint64_t)h->unique);
    }
    n = ids_in_args(h->opcode, a, at, fh);
    for (i = 0; i < n; i++) {
        if (alen < at[i] + sizeof(v)) {
            die("the stream's %s (unique %" PRIu64 ") is cut short",
                opname(h->opcode), (uint64_t)h->unique);
        }
        memcpy(&v, a + at[i], sizeof(v));
        touch(fh[i] ? v | TOUCH_FH : v);
    }
    if (h->opcode == FUSE_BATCH_FORGET) {
        const struct fuse_batch_forget_in *b = (const void *)a;

        if (alen < sizeof(*b) ||
            b->count > (alen - sizeof(*b)) / sizeof(struct fuse_forget_one)) {
            die("the stream's BATCH_FORGET (unique %" PRIu64 ") is cut "
                "short", (uint64_t)h->unique);
        }
        for (i = 0; i < b->count; i++) {
            memcpy(&v, a + sizeof(*b) + i * sizeof(struct fuse_forget_one),
                   sizeof(v));
            touch(v);
        }
    }
    if (it->rep && !it->rep->error) {
        const uint8_t *body = (const uint8_t *)(it->rep + 1);
        uint32_t len = it->rep->len - sizeof(*it->rep), off = 0;
        size_t o = SIZE_MAX;        /* where the reply's fuse_open_out is */

        if (is_entry_op(h->opcode) &&
            len >= sizeof(struct fuse_entry_out)) {
            touch(((const struct fuse_entry_out *)body)->nodeid);
        }
        if (h->opcode == FUSE_CREATE || h->opcode == FUSE_TMPFILE) {
            o = sizeof(struct fuse_entry_out);
        } else if (h->opcode == FUSE_OPEN || h->opcode == FUSE_OPENDIR) {
            o = 0;
        }
        if (o != SIZE_MAX && len >= o + sizeof(struct fuse_open_out)) {
            /* A handle the recorder gives again after a RELEASE: in order */
            touch(((const struct fuse_open_out *)(body + o))->fh | TOUCH_FH);
        }
        while (h->opcode == FUSE_READDIRPLUS && off < len) {
            const struct fuse_direntplus *d = (const void *)(body + off);

            if (len - off < FUSE_NAME_OFFSET_DIRENTPLUS ||
                len - off < FUSE_DIRENTPLUS_SIZE(d)) {
                die("the stream's reply to READDIRPLUS (unique %" PRIu64
                    ") is cut short", (uint64_t)h->unique);
            }
            touch(d->entry_out.nodeid);
            off += FUSE_DIRENTPLUS_SIZE(d);
        }
    }
    it->ntouch = stream.ntouched - it->touch;
}

/*
 * The bytes of a request that go with its header; the rest, its data,
 * go to a buffer of their own, as a guest lays out a WRITE
 */
static uint32_t args_len(const struct fuse_in_header *h)
{
    uint32_t len = h->len - sizeof(*h);

    if (h->opcode == FUSE_WRITE) {
        return MIN(len, sizeof(struct fuse_write_in));
    }
    return len > PAGE - sizeof(*h) ? 0 : len;
}

/* Reads the stream at @path; dies on a file that is not a whole one */
static void replay_load(const char *path)
{
    Map pending = { 0 };
    size_t at = strlen(VFSD_RECORD_MAGIC), i;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0) {
        die("%s: %s", path, strerror(errno));
    }
    stream.size = st.st_size;
    stream.file = stream.size ?
                  mmap(NULL, stream.size, PROT_READ, MAP_PRIVATE, fd, 0) :
                  MAP_FAILED;
    close(fd);
    if (stream.file == MAP_FAILED || stream.size < at ||
        memcmp(stream.file, VFSD_RECORD_MAGIC, at)) {
        die("%s: not a stream of VIRTIOFSD_RECORD's", path);
    }
    while (at < stream.size) {
        VfsdRecord r;
        const uint8_t *body = stream.file + at + sizeof(r);
        uint64_t *p;

        if (stream.size - at < sizeof(r)) {
            die("%s: cut short at byte %zu", path, at);
        }
        memcpy(&r, stream.file + at, sizeof(r));
        if (r.len > stream.size - at - sizeof(r)) {
            die("%s: the record at byte %zu runs past the end", path, at);
        }
        at += sizeof(r) + MIN(VFSD_RECORD_ALIGN(r.len), stream.size - at -
                              sizeof(r));
        if (r.kind == VFSD_RECORD_REQUEST) {
            const struct fuse_in_header *h = (const void *)body;

            if (r.len < sizeof(*h) || h->len != r.len) {
                die("%s: request %" PRIu64 " of %u bytes says %u", path,
                    r.unique, r.len, r.len < sizeof(*h) ? 0 : h->len);
            }
            if (h->opcode == FUSE_INIT && !stream.init) {
                stream.init = body + sizeof(*h);
                stream.init_len = r.len - sizeof(*h);
            }
            if (replay_skips(h->opcode)) {
                *map_at(&pending, r.unique, true) = SIZE_MAX;
                continue;
            }
            if (stream.nitems == stream.cap) {
                stream.cap = stream.cap ? stream.cap * 2 : 65536;
                stream.items = g_renew(Item, stream.items, stream.cap);
            }
            stream.items[stream.nitems] = (Item) {
                .req = h,
                .room = r.room,
                .hiprio = r.flags & VFSD_RECORD_HIPRIO,
                .barrier = h->opcode == FUSE_UNLINK ||
                           h->opcode == FUSE_RMDIR ||
                           h->opcode == FUSE_RENAME ||
                           h->opcode == FUSE_RENAME2,
            };
            if (h->opcode == FUSE_WRITE) {
                stream.max_write = MAX(stream.max_write, r.len - sizeof(*h) -
                                   sizeof(struct fuse_write_in));
            }
            *map_at(&pending, r.unique, true) = stream.nitems++;
        } else if (r.kind == VFSD_RECORD_REPLY) {
            const struct fuse_out_header *o = (const void *)body;

            p = map_at(&pending, r.unique, false);
            if (!p || r.len < sizeof(*o) || o->len != r.len) {
                die("%s: a reply to %" PRIu64 " %s", path, r.unique,
                    p ? "of the wrong length" : "that was never asked");
            }
            if (*p != SIZE_MAX) {
                stream.items[*p].rep = o;
            }
            *p = SIZE_MAX;
        } else {
            die("%s: a record of kind %u before byte %zu", path, r.kind,
                at);
        }
    }
    map_free(&pending);
    if (!stream.init ||
        stream.init_len < offsetof(struct fuse_init_in, unused)) {
        die("%s: no INIT", path);
    }
    for (i = 0; i < stream.nitems; i++) {
        Item *it = &stream.items[i];
        uint32_t op = it->req->opcode;

        if (it->hiprio != (op == FUSE_FORGET || op == FUSE_BATCH_FORGET)) {
            die("%s: %s (unique %" PRIu64 ") on the %s queue", path,
                opname(op), (uint64_t)it->req->unique,
                it->hiprio ? "hiprio" : "request");
        }
        if (!it->hiprio && !it->rep) {
            die("%s: %s (unique %" PRIu64 ") has no reply: the recording "
                "was cut short", path, opname(op),
                (uint64_t)it->req->unique);
        }
        if (!it->hiprio && (it->room < sizeof(struct fuse_out_header) ||
                            it->rep->len > it->room)) {
            die("%s: %s (unique %" PRIu64 "): a reply of %u bytes in %u",
                path, opname(op), (uint64_t)it->req->unique,
                it->rep->len, it->room);
        }
        lg.slot_big = MAX(lg.slot_big, it->room);
        lg.slot_data = MAX(lg.slot_data, it->req->len -
                           sizeof(struct fuse_in_header) -
                           args_len(it->req));
        item_touches(it);
    }
    lg.slot_big = (lg.slot_big + PAGE - 1) & ~(PAGE - 1);
    lg.slot_data = (lg.slot_data + PAGE - 1) & ~(PAGE - 1);
}

static uint64_t live(const Map *m, uint64_t recorded, const char *what,
                     size_t item)
{
    uint64_t *v = map_at((Map *)m, recorded, false);

    if (!v) {
        fail(NULL, "request %zu of the stream (%s) names %s %" PRIu64
             ", which no reply gave", item,
             opname(stream.items[item].req->opcode), what, recorded);
    }
    return *v;
}

static uint64_t live_node(uint64_t recorded, size_t item)
{
    if (!recorded || recorded == FUSE_ROOT_ID) {
        return recorded ? stream.root : 0;
    }
    return live(&stream.node, recorded, "node", item);
}

/* Rewrites the u64 at @p, a recorded node id (@fh: a file handle) */
static void patch(uint8_t *p, bool fh, size_t item)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    v = fh ? live(&stream.fh, v, "file handle", item) : live_node(v, item);
    memcpy(p, &v, sizeof(v));
}

/* The handles and nodes in a request's arguments, @a, made live */
static void patch_args(uint32_t op, uint8_t *a, size_t item)
{
    size_t at[3];
    bool fh[3];
    unsigned int i, n = ids_in_args(op, a, at, fh);

    for (i = 0; i < n; i++) {
        patch(a + at[i], fh[i], item);
    }
}

/*
 * Whether @it may start now: nothing in flight touches what it touches,
 * nor anything before it not started yet (marked with this @pick)
 */
static bool item_free(const Item *it, uint64_t pick)
{
    uint32_t i;

    for (i = 0; i < it->ntouch; i++) {
        uint64_t id = stream.touched[it->touch + i];
        uint64_t *n = map_at(&stream.busy, id, false);
        uint64_t *p = map_at(&stream.passed, id, false);

        if ((n && *n) || (p && *p == pick)) {
            return false;
        }
    }
    return true;
}

static void item_pass(const Item *it, uint64_t pick)
{
    uint32_t i;

    for (i = 0; i < it->ntouch; i++) {
        *map_at(&stream.passed, stream.touched[it->touch + i], true) = pick;
    }
}

static void item_busy(const Item *it, int64_t delta)
{
    uint32_t i;

    stream.inflight += delta;
    if (it->barrier) {
        stream.barrier = delta > 0;
    }
    for (i = 0; i < it->ntouch; i++) {
        *map_at(&stream.busy, stream.touched[it->touch + i], true) += delta;
    }
}

/* The request to start next, in the window of @depth; false: none now */
static bool replay_pick(unsigned int depth, size_t *item)
{
    size_t end = MIN(stream.nitems, stream.next +
                     (depth > 1 ? REPLAY_WINDOW : 1));
    uint64_t pick = ++stream.picks;
    size_t i;

    for (i = stream.next; i < end && !stream.barrier; i++) {
        Item *it = &stream.items[i];

        if (it->started) {
            continue;
        }
        if (it->barrier && (i != stream.next || stream.inflight)) {
            return false;
        }
        if (item_free(it, pick)) {
            it->started = true;
            while (stream.next < stream.nitems &&
                   stream.items[stream.next].started) {
                stream.next++;
            }
            *item = i;
            return true;
        }
        item_pass(it, pick);
    }
    return false;
}

/* FORGET and BATCH_FORGET, on the hiprio queue, made live */
static void replay_forget(Slot *s, size_t item)
{
    const struct fuse_in_header *h = stream.items[item].req;
    Slot *f = &lg.hiprio.slots[0];
    uint32_t len = h->len - sizeof(*h), i;
    const struct fuse_forget_one *one;
    uint32_t n;
    uint8_t *a;

    if (len > PAGE - sizeof(*h)) {
        fail(s, "request %zu of the stream: a %s of %u bytes", item,
             opname(h->opcode), len);
    }
    a = req_init(f, h->opcode, 0, len);
    memcpy(a, h + 1, len);
    f->r.no_reply = true;
    if (h->opcode == FUSE_FORGET) {
        f->r.nodeid = live_node(h->nodeid, item);
        refs_add(&s->q->refs, f->r.nodeid,
                 -((const struct fuse_forget_in *)a)->nlookup);
    } else {
        n = ((const struct fuse_batch_forget_in *)a)->count;
        one = (const void *)(a + sizeof(struct fuse_batch_forget_in));
        for (i = 0; i < n; i++) {
            patch(a + sizeof(struct fuse_batch_forget_in) +
                  i * sizeof(*one), false, item);
            refs_add(&s->q->refs, one[i].nodeid, -one[i].nlookup);
        }
    }
    sync_call(&lg.hiprio);
    s->q->done++;
}

static void replay_setup(void)
{
    char path[PATH_MAX];
    size_t i;

    snprintf(path, sizeof(path), "%s/%s/replay", lg.o.dir, TOP_DIR);
    rm_tree(path);
    make_dir(lg.dirfd, "replay");
    stream.root = lookup(lg.top_nodeid, "replay", host_ino("replay"));
    stream.next = 0;
    for (i = 0; i < stream.nitems; i++) {
        stream.items[i].started = false;
    }
}

static bool replay_next(Slot *s)
{
    size_t item;

    while (replay_pick(s->q->nslots, &item)) {
        const Item *it = &stream.items[item];
        const struct fuse_in_header *h = it->req;
        uint32_t len = h->len - sizeof(*h), args = args_len(h);
        uint8_t *a;

        if (it->hiprio) {
            replay_forget(s, item);
            continue;
        }
        a = req_init(s, h->opcode, live_node(h->nodeid, item), args);
        memcpy(a, h + 1, args);
        if (len > args) {
            memcpy(s->data, (const uint8_t *)(h + 1) + args, len - args);
            s->r.data_gpa = s->data_gpa;
            s->r.data_len = len - args;
        }
        patch_args(h->opcode, args ? a : s->data, item);
        s->r.recorded = h;
        req_body(s, it->room - sizeof(struct fuse_out_header),
                 it->room - sizeof(struct fuse_out_header) >
                 PAGE - REP_BODY);
        s->item = item;
        item_busy(it, 1);
        return true;
    }
    return false;
}

/* The parts of attributes that do not depend on the host's numbering */
static void replay_attr(Slot *s, uint64_t recorded_node,
                        const struct fuse_attr *a, const struct fuse_attr *r)
{
    /* The root is the replay's own directory, made by the host */
    if (recorded_node == FUSE_ROOT_ID) {
        return;
    }
    if (a->mode != r->mode || a->uid != r->uid || a->gid != r->gid ||
        (!S_ISDIR(r->mode) && a->size != r->size)) {
        fail(s, "request %zu of the stream: attributes mode %o uid %u gid "
             "%u size %" PRIu64 "; recorded %o %u %u %" PRIu64, s->item,
             a->mode, a->uid, a->gid, (uint64_t)a->size, r->mode, r->uid,
             r->gid, (uint64_t)r->size);
    }
}

/* A node the live reply gave for the recorded @rec_node, held as a guest */
static void replay_entry(Slot *s, const struct fuse_entry_out *e,
                         const struct fuse_entry_out *r)
{
    if (!r->nodeid) {
        return;
    }
    if (!e->nodeid) {
        fail(s, "request %zu of the stream: no node, recorded %" PRIu64,
             s->item, (uint64_t)r->nodeid);
    }
    *map_at(&stream.node, r->nodeid, true) = e->nodeid;
    refs_add(&s->q->refs, e->nodeid, 1);
    replay_attr(s, r->nodeid, &e->attr, &r->attr);
}

static void replay_listing(Slot *s, const Reply *rep, const uint8_t *rb,
                           uint32_t rlen, bool plus)
{
    uint32_t at = 0;

    while (at < rep->len || at < rlen) {
        const struct fuse_direntplus *dp = (const void *)(rep->body + at);
        const struct fuse_direntplus *rdp = (const void *)(rb + at);
        const struct fuse_dirent *d = plus ? &dp->dirent : (const void *)dp;
        const struct fuse_dirent *r = plus ? &rdp->dirent :
                                      (const void *)rdp;
        uint32_t size = 0;

        if (at < rep->len && at < rlen &&
            rep->len - at >= (plus ? FUSE_NAME_OFFSET_DIRENTPLUS :
                              FUSE_NAME_OFFSET)) {
            size = plus ? FUSE_DIRENTPLUS_SIZE(dp) : FUSE_DIRENT_SIZE(d);
        }
        if (!size || rep->len - at < size) {
            fail(s, "request %zu of the stream: a listing of %u bytes, "
                 "recorded %u (they part at byte %u)", s->item, rep->len,
                 rlen, at);
        }
        if (d->namelen != r->namelen || d->type != r->type ||
            d->off != r->off || memcmp(d->name, r->name, d->namelen)) {
            fail(s, "request %zu of the stream: an entry \"%.*s\" type %u "
                 "offset %" PRIu64 ", recorded \"%.*s\" %u %" PRIu64,
                 s->item, (int)MIN(d->namelen, NAME_MAX), d->name, d->type,
                 (uint64_t)d->off, (int)r->namelen, r->name, r->type,
                 (uint64_t)r->off);
        }
        /* What a guest does with them: "." and ".." are not held */
        if (plus && !(d->namelen == 1 && d->name[0] == '.') &&
            !(d->namelen == 2 && !memcmp(d->name, "..", 2))) {
            if (dp->entry_out.nodeid && !rdp->entry_out.nodeid) {
                refs_add(&s->q->refs, dp->entry_out.nodeid, 1);
            } else {
                replay_entry(s, &dp->entry_out, &rdp->entry_out);
            }
        }
        at += size;
    }
}

static void replay_done(Slot *s, const Reply *rep)
{
    const Item *it = &stream.items[s->item];
    const struct fuse_in_header *h = it->req;
    const uint8_t *rb = (const uint8_t *)(it->rep + 1);
    uint32_t rlen = it->rep->len - sizeof(*it->rep);
    int32_t rerr = it->rep->error;

    item_busy(it, -1);
    if (h->opcode == FUSE_LOOKUP &&
        (rerr == -ENOENT ||
         (!rerr && !((const struct fuse_entry_out *)rb)->nodeid))) {
        /* A missing name: either way, as recorded */
        check_missing(s, rep);
        return;
    }
    if (rep->error != rerr) {
        fail(s, "request %zu of the stream: error %d, recorded %d", s->item,
             rep->error, rerr);
    }
    if (rerr) {
        return;
    }
    switch (h->opcode) {
    case FUSE_LOOKUP:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    case FUSE_TMPFILE:
    case FUSE_CREATE:
        expect(s, rep, rlen);
        replay_entry(s, (const void *)rep->body, (const void *)rb);
        if (h->opcode == FUSE_CREATE || h->opcode == FUSE_TMPFILE) {
            const struct fuse_open_out *o = (const void *)
                (rep->body + sizeof(struct fuse_entry_out));
            const struct fuse_open_out *ro = (const void *)
                (rb + sizeof(struct fuse_entry_out));

            *map_at(&stream.fh, ro->fh, true) = o->fh;
        }
        break;
    case FUSE_GETATTR:
    case FUSE_SETATTR:
        expect(s, rep, rlen);
        replay_attr(s, h->nodeid,
                    &((const struct fuse_attr_out *)rep->body)->attr,
                    &((const struct fuse_attr_out *)rb)->attr);
        break;
    case FUSE_OPEN:
    case FUSE_OPENDIR:
        expect(s, rep, rlen);
        *map_at(&stream.fh, ((const struct fuse_open_out *)rb)->fh, true) =
            ((const struct fuse_open_out *)rep->body)->fh;
        break;
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
        replay_listing(s, rep, rb, rlen, h->opcode == FUSE_READDIRPLUS);
        break;
    case FUSE_READ:
    case FUSE_READLINK:
    case FUSE_WRITE:
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
    case FUSE_LSEEK:
        if (memcmp(expect(s, rep, rlen), rb, rlen)) {
            fail(s, "request %zu of the stream: the %u bytes of the reply "
                 "are not the recorded ones", s->item, rlen);
        }
        break;
    case FUSE_STATFS:
        /* The host's figures of the moment */
        break;
    default:
        expect(s, rep, rlen);
        break;
    }
}

static void replay_teardown(void)
{
    if (stream.next != stream.nitems) {
        fail(NULL, "the replay stopped at request %zu of %zu", stream.next,
             stream.nitems);
    }
    map_free(&stream.node);
    map_free(&stream.fh);
    map_free(&stream.busy);
    map_free(&stream.passed);
}

static const Mix mixes[] = {
    { "getattr", getattr_setup, getattr_next, getattr_done, NULL },
    { "lookup", lookup_setup, lookup_next, lookup_done, NULL },
    { "unpack", unpack_setup, unpack_next, unpack_done, unpack_teardown },
    { "readdirplus", readdir_setup, readdir_next, readdir_done, NULL },
    { "read-4k", read4k_setup, read_next, read_done, io_teardown },
    { "read-128k", read128k_setup, read_next, read_done, io_teardown },
    { "write-4k", write4k_setup, write_next, write_done, write_teardown },
    { "write-128k", write128k_setup, write_next, write_done,
      write_teardown },
    { "unlink", unlink_setup, unlink_next, unlink_done, unlink_teardown },
    { "replay", replay_setup, replay_next, replay_done, replay_teardown,
      true },
};
#define NMIXES (sizeof(mixes) / sizeof(mixes[0]))

static bool mix_wanted(const char *name)
{
    const char *p = lg.o.mixes;
    size_t len = strlen(name);

    if (!p || !strcmp(p, "all")) {
        return true;
    }
    while ((p = strstr(p, name))) {
        if ((p == lg.o.mixes || p[-1] == ',') &&
            (p[len] == ',' || !p[len])) {
            return true;
        }
        p += len;
    }
    return false;
}

/* ---- running a mix ---- */

static void on_reply(Slot *s, uint32_t used_len)
{
    Vq *q = s->q;
    uint64_t t = now_ns();
    Reply rp = slot_reply(s, used_len);

    if (q->nlat == q->caplat) {
        q->caplat = q->caplat ? q->caplat * 2 : 65536;
        q->lat = realloc(q->lat, q->caplat * sizeof(*q->lat));
    }
    q->lat[q->nlat++] = t - s->t0 > UINT32_MAX ? UINT32_MAX : t - s->t0;
    q->done++;
    lg.mix->done(s, &rp);
    if (lg.mix->next(s)) {
        slot_submit(s);
    } else {
        s->busy = false;
        q->busy--;
    }
    if (lg.mix->refill) {
        unsigned int i;

        for (i = 0; i < q->nslots && q->busy < q->nslots; i++) {
            if (!q->slots[i].busy) {
                if (!lg.mix->next(&q->slots[i])) {
                    break;
                }
                slot_submit(&q->slots[i]);
            }
        }
    }
}

static void *vq_run(void *opaque)
{
    Vq *q = opaque;
    unsigned int i;

    for (i = 0; i < q->nslots; i++) {
        if (lg.mix->next(&q->slots[i])) {
            slot_submit(&q->slots[i]);
        }
    }
    vq_publish(q);
    while (q->busy) {
        if (vq_drain(q, on_reply)) {
            vq_publish(q);
            continue;
        }
        if (vq_arm(q)) {
            vq_wait(q);
        }
    }
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

static void run_mix(const Mix *m, unsigned int depth)
{
    uint64_t t0, t1, done = 0, fe0, fe1, busy0, busy1, all0, all1;
    Usage u0, u1;
    uint32_t *all;
    double lat_sum = 0;
    size_t n = 0, k;
    unsigned int q, i;

    lg.mix = m;
    lg.issued = 0;
    for (q = 0; q < lg.o.queues; q++) {
        Vq *v = &lg.rq[q];

        v->nslots = depth;
        v->nlat = 0;
        v->done = 0;
        for (i = 0; i < depth; i++) {
            Slot *s = &v->slots[i];

            s->step = 0;
            s->n = 0;
            s->rng = 0x2545f4914f6cdd1dULL * (s->gid + 1);
        }
    }
    /* Set-up requests go through queue 1's slot 0, one at a time */
    lg.rq[0].nslots = 1;
    m->setup();
    lg.rq[0].nslots = depth;

    u0 = tree_usage();
    host_cpu(&busy0, &all0);
    fe0 = self_cpu_us();
    t0 = now_ns();
    lg.deadline = t0 + (uint64_t)(lg.o.seconds * 1e9);
    for (q = 0; q < lg.o.queues; q++) {
        if (pthread_create(&lg.rq[q].thread, NULL, vq_run, &lg.rq[q])) {
            die("pthread_create failed");
        }
    }
    for (q = 0; q < lg.o.queues; q++) {
        pthread_join(lg.rq[q].thread, NULL);
        done += lg.rq[q].done;
        n += lg.rq[q].nlat;
    }
    t1 = now_ns();
    fe1 = self_cpu_us();
    host_cpu(&busy1, &all1);
    u1 = tree_usage();

    lg.rq[0].nslots = 1;
    if (m->teardown) {
        m->teardown();
    }
    forget_all();
    lg.rq[0].nslots = depth;
    if (!done) {
        fail(NULL, "no request was answered");
    }

    all = malloc(n * sizeof(*all));
    n = 0;
    for (q = 0; q < lg.o.queues; q++) {
        memcpy(all + n, lg.rq[q].lat, lg.rq[q].nlat * sizeof(*all));
        n += lg.rq[q].nlat;
    }
    qsort(all, n, sizeof(*all), cmp_u32);
    printf("{\"mix\": \"%s\", \"depth\": %u, \"queues\": %u, "
           "\"requests\": %" PRIu64 ", \"seconds\": %.6f, \"rps\": %.1f, "
           "\"p50_us\": %.2f, \"p99_us\": %.2f, \"mean_us\": %.2f",
           m->name, depth, lg.o.queues, done, (t1 - t0) / 1e9,
           done / ((t1 - t0) / 1e9), all[n / 2] / 1e3,
           all[(size_t)(n * 0.99)] / 1e3,
           (t1 - t0) / 1e3 * lg.o.queues * depth / done);
    /*
     * Requests in flight on average (the latencies' sum over the time):
     * DEPTH a queue, but for the replay, whose stream's order allows less
     */
    for (k = 0; k < n; k++) {
        lat_sum += all[k];
    }
    printf(", \"inflight\": %.2f", lat_sum / (double)(t1 - t0));
    if (lg.o.pid) {
        printf(", \"cpu_us\": %" PRIu64 ", \"csw\": %" PRIu64,
               u1.cpu_us - u0.cpu_us, u1.csw - u0.csw);
    }
    /* The host's CPUs busy (of its ncpu), ours counted */
    printf(", \"frontend_cpu_us\": %" PRIu64 ", \"host_busy_cpus\": %.2f",
           fe1 - fe0, all1 > all0 ? (double)(busy1 - busy0) / (all1 - all0) *
           sysconf(_SC_NPROCESSORS_ONLN) : 0.0);
    printf("}\n");
    fflush(stdout);
    free(all);
    lg.mix = NULL;
}

/* ---- the connection ---- */

static void connect_backend(unsigned int max_depth)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    uint64_t features, protocol, acked;
    unsigned int q;

    lg.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (strlen(lg.o.socket) >= sizeof(sa.sun_path)) {
        die("socket path too long: %s", lg.o.socket);
    }
    strcpy(sa.sun_path, lg.o.socket);
    if (lg.sock < 0 || connect(lg.sock, (struct sockaddr *)&sa,
                               sizeof(sa)) < 0) {
        die("connecting to %s: %s", lg.o.socket, strerror(errno));
    }

    /* In QEMU's order (vhost_dev_init(), vhost_dev_start()) */
    features = vu_get_u64(VHOST_USER_GET_FEATURES);
    if (!(features & (1ULL << VIRTIO_F_VERSION_1)) ||
        !(features & (1ULL << VHOST_USER_F_PROTOCOL_FEATURES))) {
        die("the back-end's features 0x%" PRIx64 " lack VERSION_1 or "
            "PROTOCOL_FEATURES", features);
    }
    protocol = vu_get_u64(VHOST_USER_GET_PROTOCOL_FEATURES) &
               (1ULL << VHOST_USER_PROTOCOL_F_MQ);
    vu_set_u64(VHOST_USER_SET_PROTOCOL_FEATURES, protocol);
    if (protocol & (1ULL << VHOST_USER_PROTOCOL_F_MQ)) {
        uint64_t n = vu_get_u64(VHOST_USER_GET_QUEUE_NUM);

        if (n < 1 + lg.o.queues) {
            printf("{\"error\": \"queues\", \"offered\": %" PRIu64 "}\n",
                   n ? n - 1 : 0);
            fprintf(stderr, "loadgen: the back-end serves %" PRIu64
                    " request queue(s), %u asked\n", n ? n - 1 : 0,
                    lg.o.queues);
            exit(3);
        }
    }
    vu_check(vu_fe_send(lg.sock, VHOST_USER_SET_OWNER, NULL, 0, -1),
             VHOST_USER_SET_OWNER);
    lg.event_idx = !lg.o.no_event_idx &&
                   (features & (1ULL << VIRTIO_RING_F_EVENT_IDX));
    acked = 1ULL << VIRTIO_F_VERSION_1 |
            1ULL << VHOST_USER_F_PROTOCOL_FEATURES |
            (lg.event_idx ? 1ULL << VIRTIO_RING_F_EVENT_IDX : 0);
    vu_set_u64(VHOST_USER_SET_FEATURES, acked);

    lg.memsize = PATTERN_SIZE + (1 + lg.o.queues) *
                 (4 * PAGE + 16 * SLOT_DESCS * MAX_DEPTH +
                  max_depth * (2 * PAGE + lg.slot_big + lg.slot_data));
    lg.memsize = (lg.memsize + (2 << 20) - 1) & ~((2 << 20) - 1);
    lg.memfd = memfd_create("loadgen-guest", MFD_CLOEXEC);
    if (lg.memfd < 0 || ftruncate(lg.memfd, lg.memsize) < 0) {
        die("guest memory: %s", strerror(errno));
    }
    lg.mem = mmap(NULL, lg.memsize, PROT_READ | PROT_WRITE, MAP_SHARED,
                  lg.memfd, 0);
    if (lg.mem == MAP_FAILED) {
        die("guest memory: %s", strerror(errno));
    }
    lg.pattern_gpa = mem_alloc(PATTERN_SIZE, PAGE, &lg.pattern);
    pattern_fill(lg.pattern, PATTERN_SIZE);
    vq_init(&lg.hiprio, 0, 1);
    lg.hiprio.nslots = 1;
    for (q = 0; q < lg.o.queues; q++) {
        vq_init(&lg.rq[q], q + 1, max_depth);
    }

    vu_check(vu_fe_set_mem_table(lg.sock, lg.memfd, GPA_BASE, lg.memsize),
             VHOST_USER_SET_MEM_TABLE);
    vq_start(&lg.hiprio);
    for (q = 0; q < lg.o.queues; q++) {
        vq_start(&lg.rq[q]);
    }
    /* A round trip: every message before it has been handled */
    vu_get_u64(VHOST_USER_GET_FEATURES);
}

/* ---- the floor: the host's own calls, no back-end ---- */

/* The time of each turn of a loop, for its median */
typedef struct Laps {
    uint64_t t0, last, end;
    uint32_t *d;
    size_t n, cap;
} Laps;

static void laps_start(Laps *l)
{
    memset(l, 0, sizeof(*l));
    l->t0 = l->last = now_ns();
    l->end = l->t0 + (uint64_t)(lg.o.seconds * 1e9);
}

/* The turn that just ended; whether there is time for another */
static bool lap(Laps *l)
{
    uint64_t t = now_ns();

    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 65536;
        l->d = realloc(l->d, l->cap * sizeof(*l->d));
    }
    l->d[l->n++] = MIN(t - l->last, UINT32_MAX);
    l->last = t;
    return t < l->end;
}

/*
 * A turn is @per requests' worth of calls (a file of the unpack is
 * U_STEPS requests): the figures are per request.
 */
static void floor_print(const char *mix, Laps *l, double per)
{
    qsort(l->d, l->n, sizeof(*l->d), cmp_u32);
    printf("{\"mix\": \"%s\", \"floor_p50_us\": %.3f, \"floor_mean_us\": "
           "%.3f, \"turns\": %zu, \"requests_per_turn\": %.2f}\n", mix,
           l->d[l->n / 2] / 1e3 / per,
           (l->last - l->t0) / 1e3 / l->n / per, l->n, per);
    fflush(stdout);
    free(l->d);
}

static void statx_fd(int fd)
{
    struct statx stx;

    if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0) {
        die("statx: %s", strerror(errno));
    }
}

/*
 * A lookup's calls, as a back-end that holds inodes by fd makes them:
 * the name opened O_PATH, its attributes; the fd let go, as the inode
 * is known already.
 */
static bool floor_lookup(int d, const char *name)
{
    int fd = openat(d, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0) {
        return false;
    }
    statx_fd(fd);
    close(fd);
    return true;
}

static void floor_unpack(void)
{
    struct timespec ts[2];
    char name[32];
    unsigned int n = 0;
    Laps l;
    int d, fd;

    make_dir(lg.dirfd, "unpack");
    d = open_dir(lg.dirfd, "unpack");
    laps_start(&l);
    do {
        unpack_name(name, sizeof(name), 0, n);
        unpack_times(0, n++, &ts[0], &ts[1]);
        if (floor_lookup(d, name)) {
            die("floor: %s exists", name);
        }
        fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            die("floor: %s: %s", name, strerror(errno));
        }
        statx_fd(fd);
        if (pwrite(fd, lg.pattern, PAGE, 0) != PAGE || futimens(fd, ts) < 0) {
            die("floor: %s: %s", name, strerror(errno));
        }
        statx_fd(fd);
        if (fchown(fd, OWNER_UID, OWNER_GID) < 0) {
            die("floor: %s: %s", name, strerror(errno));
        }
        statx_fd(fd);
        if (fchmod(fd, 0644) < 0) {
            die("floor: %s: %s", name, strerror(errno));
        }
        statx_fd(fd);
        close(fd);
    } while (lap(&l));
    floor_print("unpack", &l, U_STEPS);
    close(d);
}

/*
 * A listing: OPENDIR, then as many entries a getdents64 as a
 * READDIR_SIZE reply of READDIRPLUS holds, each looked up, to the empty
 * read that ends it, and RELEASEDIR.
 */
static void floor_readdir(uint8_t *buf)
{
    const unsigned int per = READDIR_SIZE /
        FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + 8);
    const unsigned int dent = (offsetof(struct dirent, d_name) + 9 + 7) & ~7;
    unsigned int reqs = 2;
    int d = open_dir(lg.dirfd, "dir1000");
    bool first = true;
    Laps l;

    laps_start(&l);
    do {
        int dfd = open_dir(d, ".");
        long got, at;

        do {
            got = syscall(SYS_getdents64, dfd, buf, per * dent);
            if (got < 0) {
                die("floor: getdents64: %s", strerror(errno));
            }
            for (at = 0; at < got;) {
                struct dirent *e = (struct dirent *)(buf + at);

                if (e->d_name[0] != '.' && !floor_lookup(dfd, e->d_name)) {
                    die("floor: %s: %s", e->d_name, strerror(errno));
                }
                at += e->d_reclen;
            }
            reqs += first;
        } while (got > 0);
        close(dfd);
        first = false;
    } while (lap(&l));
    floor_print("readdirplus", &l, reqs);
    close(d);
}

static void floor_io(const char *mix, uint32_t size, bool write,
                     uint8_t *buf)
{
    uint64_t rng = 0x2545f4914f6cdd1dULL;
    int fd = write ? openat(lg.dirfd, "w", O_WRONLY | O_CREAT | O_CLOEXEC,
                            0644) :
                     openat(lg.dirfd, "hot", O_RDONLY | O_CLOEXEC);
    Laps l;

    if (fd < 0 || (write && ftruncate(fd, PATTERN_SIZE) < 0)) {
        die("floor: %s: %s", mix, strerror(errno));
    }
    laps_start(&l);
    do {
        off_t off = xorshift(&rng) % (PATTERN_SIZE / size) * size;
        ssize_t r = write ? pwrite(fd, lg.pattern + off, size, off) :
                            pread(fd, buf, size, off);

        if (r != size) {
            die("floor: %s: %s", mix, strerror(errno));
        }
    } while (lap(&l));
    floor_print(mix, &l, 1);
    close(fd);
}

static void floor_run(void)
{
    uint8_t *buf = malloc(BIG);
    char name[32];
    unsigned int n;
    int fd, d;
    Laps l;

    lg.pattern = malloc(PATTERN_SIZE);
    pattern_fill(lg.pattern, PATTERN_SIZE);
    make_fixtures();

    if (mix_wanted("getattr")) {
        fd = openat(lg.dirfd, "hot", O_PATH | O_CLOEXEC);
        laps_start(&l);
        do {
            statx_fd(fd);
        } while (lap(&l));
        floor_print("getattr", &l, 1);
        close(fd);
    }
    if (mix_wanted("lookup")) {
        d = open_dir(lg.dirfd, "names");
        n = 0;
        laps_start(&l);
        do {
            snprintf(name, sizeof(name), "%c%07u", n % 2 ? 'm' : 'n',
                     n / 2 % NAMES);
            if (floor_lookup(d, name) == n++ % 2) {
                die("floor: lookup of %s", name);
            }
        } while (lap(&l));
        floor_print("lookup", &l, 1);
        close(d);
    }
    if (mix_wanted("unpack")) {
        floor_unpack();
    }
    if (mix_wanted("readdirplus")) {
        floor_readdir(buf);
    }
    if (mix_wanted("read-4k")) {
        floor_io("read-4k", PAGE, false, buf);
    }
    if (mix_wanted("read-128k")) {
        floor_io("read-128k", BIG, false, buf);
    }
    if (mix_wanted("write-4k")) {
        floor_io("write-4k", PAGE, true, buf);
    }
    if (mix_wanted("write-128k")) {
        floor_io("write-128k", BIG, true, buf);
    }
    if (mix_wanted("unlink")) {
        make_dir(lg.dirfd, "unlink");
        d = open_dir(lg.dirfd, "unlink");
        for (n = 0; n < lg.o.unlink_files; n++) {
            snprintf(name, sizeof(name), "k%07u", n);
            write_file(d, name, NULL, 0);
        }
        laps_start(&l);
        for (n = 0; n < lg.o.unlink_files; n++) {
            snprintf(name, sizeof(name), "k%07u", n);
            if (unlinkat(d, name, 0) < 0) {
                die("floor: unlink %s: %s", name, strerror(errno));
            }
            lap(&l);
        }
        floor_print("unlink", &l, 1);
        close(d);
    }
    free(buf);
}

/*
 * A kick and a call alone: an eventfd write that wakes a thread blocked
 * on it, there and back between two threads.
 */
static int ping[2];
static bool pong_stop;

static void *pong(void *opaque)
{
    eventfd_t v;

    while (eventfd_read(ping[0], &v) == 0 &&
           !__atomic_load_n(&pong_stop, __ATOMIC_RELAXED)) {
        eventfd_write(ping[1], 1);
    }
    return NULL;
}

static void eventfd_floor(void)
{
    pthread_t t;
    eventfd_t v;
    Laps l;

    ping[0] = eventfd(0, EFD_CLOEXEC);
    ping[1] = eventfd(0, EFD_CLOEXEC);
    if (ping[0] < 0 || ping[1] < 0 ||
        pthread_create(&t, NULL, pong, NULL)) {
        die("eventfd floor: %s", strerror(errno));
    }
    laps_start(&l);
    do {
        eventfd_write(ping[0], 1);
        eventfd_read(ping[1], &v);
    } while (lap(&l));
    floor_print("eventfd", &l, 1);
    __atomic_store_n(&pong_stop, true, __ATOMIC_RELAXED);
    eventfd_write(ping[0], 1);
    pthread_join(t, NULL);
}

/*
 * The transport's floor: this program's own round trip, rings and all,
 * against a back-end thread that does nothing but answer ENOSYS at once.
 * What a real back-end adds to it is the back-end.
 */
static bool null_stop;

static void *null_backend(void *opaque)
{
    Vq *q = opaque;
    uint16_t last_avail = 0, used = 0;
    struct pollfd p = { .fd = q->kick, .events = POLLIN };
    eventfd_t v;

    while (!__atomic_load_n(&null_stop, __ATOMIC_ACQUIRE)) {
        uint16_t avail = __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
        uint16_t old = used;

        if (avail == last_avail) {
            /* Ask for a kick, then look once more before sleeping */
            __atomic_store_n(avail_event(q), last_avail, __ATOMIC_RELEASE);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE) ==
                last_avail) {
                poll(&p, 1, 100);
                eventfd_read(q->kick, &v);
            }
            continue;
        }
        while (last_avail != avail) {
            uint16_t head = q->avail->ring[last_avail++ % q->num], d = head;
            const struct fuse_in_header *h =
                (void *)(lg.mem + q->desc[d].addr - GPA_BASE);
            struct fuse_out_header *oh;

            while (!(q->desc[d].flags & VRING_DESC_F_WRITE)) {
                d = q->desc[d].next;
            }
            oh = (void *)(lg.mem + q->desc[d].addr - GPA_BASE);
            oh->len = sizeof(*oh);
            oh->error = -ENOSYS;
            oh->unique = h->unique;
            q->used->ring[used % q->num].id = head;
            q->used->ring[used % q->num].len = sizeof(*oh);
            used++;
        }
        __atomic_store_n(&q->used->idx, used, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!lg.event_idx ||
            vring_need_event(__atomic_load_n(used_event(q), __ATOMIC_ACQUIRE),
                             used, old)) {
            eventfd_write(q->call, 1);
        }
    }
    return NULL;
}

static bool null_next(Slot *s)
{
    if (!may_start()) {
        return false;
    }
    req_init(s, FUSE_GETATTR, FUSE_ROOT_ID, sizeof(struct fuse_getattr_in));
    req_body(s, sizeof(struct fuse_attr_out), false);
    return true;
}

static void null_done(Slot *s, const Reply *rp)
{
    if (rp->error != -ENOSYS) {
        fail(s, "the null back-end's reply: error %d", rp->error);
    }
}

static void transport_floor(void)
{
    static const Mix null_mix = { "transport", NULL, null_next, null_done };
    Vq *q = &lg.rq[0];
    pthread_t t;
    Laps l = { 0 };

    lg.memsize = 1 << 20;
    lg.mem = mmap(NULL, lg.memsize, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (lg.mem == MAP_FAILED) {
        die("transport floor: %s", strerror(errno));
    }
    lg.event_idx = !lg.o.no_event_idx;
    vq_init(q, 1, 1);
    q->nslots = 1;
    lg.mix = &null_mix;
    lg.count_bound = false;
    if (pthread_create(&t, NULL, null_backend, q)) {
        die("transport floor: pthread_create failed");
    }
    laps_start(&l);
    lg.deadline = l.end;
    vq_run(q);
    l.last = now_ns();
    __atomic_store_n(&null_stop, true, __ATOMIC_RELEASE);
    eventfd_write(q->kick, 1);
    pthread_join(t, NULL);
    l.d = q->lat;
    l.n = q->nlat;
    floor_print("transport", &l, 1);
    q->lat = NULL;
    lg.mix = NULL;
}

/* Each mix at each depth, its scratch files removed after each run */
static void run_all(void)
{
    static const char *const scratch[] = { "unpack", "unlink", "w",
                                           "replay" };
    char path[PATH_MAX];
    unsigned int i, d, k;

    for (i = 0; i < NMIXES; i++) {
        /* The replay runs alone, with its stream's INIT */
        if (!mix_wanted(mixes[i].name) ||
            !strcmp(mixes[i].name, "replay") != (lg.o.replay != NULL)) {
            continue;
        }
        for (d = 0; d < lg.o.ndepths; d++) {
            run_mix(&mixes[i], lg.o.depths[d]);
            for (k = 0; k < sizeof(scratch) / sizeof(scratch[0]); k++) {
                snprintf(path, sizeof(path), "%s/%s/%s", lg.o.dir, TOP_DIR,
                         scratch[k]);
                rm_tree(path);
            }
        }
    }
}

/* ---- main ---- */

static void usage(void)
{
    size_t i;

    fprintf(stderr,
"usage: loadgen --socket=PATH --dir=SHARED [--pid=PID] [--queues=N]\n"
"               [--depths=1,32] [--seconds=S | --count=N] [--mixes=a,b]\n"
"               [--unlink-files=N] [--unpack-files=N] [--no-event-idx]\n"
"       loadgen --socket=PATH --dir=SHARED --replay=STREAM [--pid=PID]\n"
"               [--depths=1,32]\n"
"       loadgen --floor --dir=DIR [--seconds=S] [--mixes=a,b]\n"
"\n"
"SHARED is the directory the back-end at PATH shares; the fixtures go\n"
"to SHARED/" TOP_DIR ", made and checked through the host.  PID: the\n"
"back-end's, for its CPU time and context switches.  One JSON line per\n"
"mix and depth; unpack and unlink make at most N files a run.  The\n"
"replay mix replays STREAM (VIRTIOFSD_RECORD) whole, alone.  Exit\n"
"status: 0 all replies right, 1 a wrong reply, 2 a set-up failure,\n"
"3 the back-end has fewer request queues.\n"
"Mixes:");
    for (i = 0; i < NMIXES; i++) {
        fprintf(stderr, " %s", mixes[i].name);
    }
    fprintf(stderr, "\n");
    exit(2);
}

static unsigned int parse_uint(const char *s, const char *what)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = g_ascii_strtoull(s, &end, 10);
    if (errno || end == s || *end || v > UINT_MAX) {
        die("%s: not a number: %s", what, s);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "dir", required_argument, NULL, 'd' },
        { "pid", required_argument, NULL, 'p' },
        { "queues", required_argument, NULL, 'q' },
        { "depths", required_argument, NULL, 'D' },
        { "seconds", required_argument, NULL, 't' },
        { "count", required_argument, NULL, 'c' },
        { "mixes", required_argument, NULL, 'm' },
        { "unlink-files", required_argument, NULL, 'u' },
        { "unpack-files", required_argument, NULL, 'U' },
        { "floor", no_argument, NULL, 'f' },
        { "no-event-idx", no_argument, NULL, 'E' },
        { "replay", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned int max_depth = 0, i, d;
    char path[PATH_MAX];
    char *tok, *save;
    int c;

    lg.o.queues = 1;
    lg.o.seconds = 1;
    lg.o.unlink_files = 50000;
    lg.o.unpack_files = 8000;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            lg.o.socket = optarg;
            break;
        case 'd':
            lg.o.dir = optarg;
            break;
        case 'p':
            lg.o.pid = parse_uint(optarg, "--pid");
            break;
        case 'q':
            lg.o.queues = parse_uint(optarg, "--queues");
            break;
        case 'D':
            for (tok = strtok_r(optarg, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                if (lg.o.ndepths == 8) {
                    die("--depths: at most 8");
                }
                lg.o.depths[lg.o.ndepths++] = parse_uint(tok, "--depths");
            }
            break;
        case 't':
            lg.o.seconds = strtod(optarg, NULL);
            break;
        case 'c':
            lg.o.count = parse_uint(optarg, "--count");
            break;
        case 'm':
            lg.o.mixes = optarg;
            break;
        case 'u':
            lg.o.unlink_files = parse_uint(optarg, "--unlink-files");
            break;
        case 'U':
            lg.o.unpack_files = parse_uint(optarg, "--unpack-files");
            break;
        case 'f':
            lg.o.floor = true;
            break;
        case 'E':
            lg.o.no_event_idx = true;
            break;
        case 'r':
            lg.o.replay = optarg;
            break;
        default:
            usage();
        }
    }
    if (optind != argc || !lg.o.dir || (!lg.o.floor && !lg.o.socket) ||
        lg.o.seconds <= 0) {
        usage();
    }
    if (lg.o.mixes) {
        char *copy = strdup(lg.o.mixes);

        for (tok = strtok_r(copy, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            for (i = 0; i < NMIXES && strcmp(tok, mixes[i].name); i++) {
                continue;
            }
            if (i == NMIXES && strcmp(tok, "all") &&
                strcmp(tok, "transport")) {
                die("no mix %s", tok);
            }
        }
        free(copy);
    }
    if (!lg.o.ndepths) {
        lg.o.depths[lg.o.ndepths++] = 1;
    }
    for (d = 0; d < lg.o.ndepths; d++) {
        if (!lg.o.depths[d] || lg.o.depths[d] > MAX_DEPTH) {
            die("--depths: 1 to %d", MAX_DEPTH);
        }
        max_depth = MAX(max_depth, lg.o.depths[d]);
    }
    if (!lg.o.queues || lg.o.queues > MAX_QUEUES) {
        die("--queues: 1 to %d", MAX_QUEUES);
    }
    lg.count_bound = lg.o.count > 0;
    lg.slot_big = BIG;
    if (lg.o.replay) {
        if (lg.o.floor || lg.o.queues != 1 ||
            (lg.o.mixes && strcmp(lg.o.mixes, "replay"))) {
            die("--replay: the replay mix alone, on one request queue");
        }
        lg.o.mixes = "replay";
        replay_load(lg.o.replay);
    } else if (lg.o.mixes && mix_wanted("replay") &&
               strcmp(lg.o.mixes, "all")) {
        die("the replay mix needs --replay=STREAM");
    }
    /* The modes the checks expect of files made through the host */
    umask(022);

    if (lg.o.floor) {
        floor_run();
        if (mix_wanted("transport")) {
            eventfd_floor();
            transport_floor();
        }
    } else {
        connect_backend(max_depth);
        make_fixtures();
        fuse_init();
        run_all();
        close(lg.sock);
    }
    snprintf(path, sizeof(path), "%s/%s", lg.o.dir, TOP_DIR);
    rm_tree(path);
    return 0;
}
