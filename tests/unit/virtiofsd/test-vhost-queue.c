/*
 * virtiofsd tests: the vhost-user transport (vhost*.c) against a fake
 * front-end on a socketpair, with guest memory in a memfd and a split
 * virtqueue the test fills as a guest would.
 *
 * The daemon's main loop runs in a thread of the test (vfsd_vhost_serve()
 * on a TestFs); the test drives the requests from the guest side and the
 * vhost-user messages from the front-end side.  The front-end also
 * answers the daemon's MEM_READs of guest memory it does not map (FAR:
 * a stand-in for the DAX window) from a buffer of the test's.
 *
 * A session ends with a message libvhost-user refuses: the daemon then
 * drops the device and vfsd_vhost_serve() returns (a closed socket would
 * make libvhost-user exit the process).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libvhost-user.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_ring.h"

#include "vfsd-test.h"
#include "vhost.h"
#include "vu-frontend.h"

#define GUEST_BASE 0x100000ULL      /* guest physical = front-end virtual */
#define GUEST_SIZE (1024 * 1024)
#define QUEUE 1
#define NUM 256
#define SLOTS (NUM / 2)             /* a request takes two descriptors */
#define BUF_SIZE 0x100
#define DESC_OFF 0x0
#define AVAIL_OFF 0x1000
#define USED_OFF 0x2000
#define REQ_OFF 0x4000
#define REP_OFF 0x10000
#define FAR_BASE 0x40000000ULL      /* outside the memory table */
#define FAR_SIZE (SLOTS * BUF_SIZE)
#define TIMEOUT_MS 5000
/* The back-end state transfer (VHOST_USER_PROTOCOL_F_DEVICE_STATE) */
#define DEVICE_STATE_F 19
#define SET_DEVICE_STATE_FD 42
#define CHECK_DEVICE_STATE 43
#define STATE_NO_FD (1ULL << 8)
/* A region added to the memory table, as upstream QEMU does per mapping */
#define REGION_GPA 0x80000000ULL
#define REGION_SIZE 0x10000
#define WINDOW_SIZE (8 << 20)

typedef struct Fe Fe;
typedef void (*FeOnRead)(Fe *f);

struct Fe {
    TestFs t;
    bool peer;                  /* t is on another Fe's directory */
    GThread *server;
    gboolean served;
    int sock;
    int kick;
    int call;
    int memfd;                  /* guest memory, room for hotplug included */
    uint8_t *mem;               /* the test's view of it */
    uint16_t avail_idx;         /* only ever written by one thread */
    /* The back-end channel: MEM_READ of FAR */
    int backend[2];
    GThread *backend_thread;
    uint8_t far[FAR_SIZE];
    FeOnRead on_read;           /* called before each MEM_READ reply */
    /*
     * SHMEM_MAP and SHMEM_UNMAP (fe_open_shmem()): each is pushed to
     * shmem_seen, and with shmem_hold its answer waits for a push to
     * shmem_go, as upstream QEMU's does while it waits itself.
     */
    GAsyncQueue *shmem_seen;
    GAsyncQueue *shmem_go;
    gint shmem_hold;
    /* The held answer says the map failed (a late one must not count) */
    gint shmem_held_fails;
};

static void fe_send(Fe *f, uint32_t request, const void *payload,
                    uint32_t size, int fd)
{
    g_assert_true(vu_fe_send(f->sock, request, payload, size, fd));
}

/* A reply to @request, within TIMEOUT_MS; false if none came */
static bool fe_recv(Fe *f, uint32_t request, void *payload, uint32_t size)
{
    struct pollfd pfd = { .fd = f->sock, .events = POLLIN };

    if (poll(&pfd, 1, TIMEOUT_MS) != 1) {
        return false;
    }
    g_assert_true(vu_fe_recv(f->sock, request, payload, size));
    return true;
}

/* Every message before it has been handled once this returns */
static void fe_barrier(Fe *f)
{
    uint64_t features;

    fe_send(f, VHOST_USER_GET_FEATURES, NULL, 0, -1);
    g_assert_true(fe_recv(f, VHOST_USER_GET_FEATURES, &features,
                          sizeof(features)));
}

static void fe_set_mem_table(Fe *f, int memfd, uint64_t size)
{
    g_assert_true(vu_fe_set_mem_table(f->sock, memfd, GUEST_BASE, size));
}

static bool read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len) {
        ssize_t n = read(fd, p, len);

        if (n <= 0) {
            return false;
        }
        p += n;
        len -= n;
    }
    return true;
}

/* A SHMEM_MAP or SHMEM_UNMAP whose header @hdr was read: always done */
static void backend_shmem(Fe *f, uint32_t *hdr)
{
    VhostUserMMap mm;
    uint64_t ok = 0;

    g_assert_cmpuint(hdr[2], ==, sizeof(mm));
    g_assert_true(read_all(f->backend[1], &mm, sizeof(mm)));
    g_async_queue_push(f->shmem_seen, GUINT_TO_POINTER(hdr[0]));
    if (g_atomic_int_get(&f->shmem_hold)) {
        g_async_queue_pop(f->shmem_go);
        if (g_atomic_int_get(&f->shmem_held_fails)) {
            ok = 1;
        }
    }
    if (hdr[1] & VHOST_USER_NEED_REPLY_MASK) {
        hdr[1] = 1 | VHOST_USER_REPLY_MASK;
        hdr[2] = sizeof(ok);
        g_assert_cmpint(write(f->backend[1], hdr, 3 * sizeof(*hdr)), ==,
                        3 * sizeof(*hdr));
        g_assert_cmpint(write(f->backend[1], &ok, sizeof(ok)), ==,
                        sizeof(ok));
    }
}

/* The front-end's side of the back-end channel */
static gpointer backend_thread(gpointer opaque)
{
    Fe *f = opaque;
    uint32_t hdr[3];
    VhostUserMemRW rw;
    uint8_t data[BUF_SIZE];

    while (read_all(f->backend[1], hdr, sizeof(hdr))) {
        if (hdr[0] == VHOST_USER_BACKEND_SHMEM_MAP ||
            hdr[0] == VHOST_USER_BACKEND_SHMEM_UNMAP) {
            backend_shmem(f, hdr);
            continue;
        }
        g_assert_cmpuint(hdr[0], ==, VHOST_USER_BACKEND_MEM_READ);
        g_assert_cmpuint(hdr[2], ==, sizeof(rw));
        g_assert_true(read_all(f->backend[1], &rw, sizeof(rw)));
        g_assert_cmpuint(rw.guest_address, >=, FAR_BASE);
        g_assert_cmpuint(rw.guest_address + rw.size, <=, FAR_BASE + FAR_SIZE);
        g_assert_cmpuint(rw.size, <=, sizeof(data));
        memcpy(data, f->far + rw.guest_address - FAR_BASE, rw.size);
        if (f->on_read) {
            f->on_read(f);
        }
        hdr[1] = 1 | VHOST_USER_REPLY_MASK;
        hdr[2] = sizeof(rw) + rw.size;
        rw.status = 0;
        g_assert_cmpint(write(f->backend[1], hdr, sizeof(hdr)), ==,
                        sizeof(hdr));
        g_assert_cmpint(write(f->backend[1], &rw, sizeof(rw)), ==,
                        sizeof(rw));
        g_assert_cmpint(write(f->backend[1], data, rw.size), ==, rw.size);
    }
    return NULL;
}

static gpointer server_thread(gpointer opaque)
{
    Fe *f = opaque;
    int fds[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds),
                    ==, 0);
    g_atomic_int_set(&f->sock, fds[0]);
    vfsd_vhost_serve(&f->t.fs, fds[1]);
    close(fds[1]);
    g_atomic_int_set(&f->served, true);
    return NULL;
}

static int new_memfd(const char *name, size_t size)
{
    int fd = memfd_create(name, MFD_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    return fd;
}

static uint8_t *map_memfd(int fd, size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    g_assert_true(p != MAP_FAILED);
    return p;
}

/*
 * A connected device over GUEST_SIZE bytes of guest memory, its queue
 * not started: on a file system of its own with a FUSE session, or with
 * @peer, on @peer's directory and without one (a migration destination).
 */
static void fe_open_with(Fe *f, unsigned int pool_size, Fe *peer,
                         bool shmem)
{
    VfsdOptions opts = {
        .fd = -1,
        .cache = VFSD_CACHE_AUTO,
        .sandbox = VFSD_SANDBOX_NONE,
        .posix_lock = true,
        .thread_pool_size = pool_size,
        .cache_size = shmem ? WINDOW_SIZE : 0,
    };
    uint64_t features = 1ULL << VIRTIO_F_VERSION_1 |
                        1ULL << VHOST_USER_F_PROTOCOL_FEATURES;
    uint64_t protocol = 1ULL << VHOST_USER_PROTOCOL_F_MEM_RW |
                        1ULL << VHOST_USER_PROTOCOL_F_BACKEND_REQ |
                        1ULL << DEVICE_STATE_F;
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    if (shmem) {
        /* Upstream QEMU 11.1: no MEM_RW, no SHMEM_REPLACE */
        protocol = 1ULL << VHOST_USER_PROTOCOL_F_BACKEND_REQ |
                   1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK |
                   1ULL << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS |
                   1ULL << VHOST_USER_PROTOCOL_F_SHMEM;
    }
    memset(f, 0, sizeof(*f));
    f->shmem_seen = g_async_queue_new();
    f->shmem_go = g_async_queue_new();
    f->sock = -1;
    if (peer) {
        f->peer = true;
        test_fs_setup_peer(&f->t, &peer->t, NULL);
    } else {
        test_fs_setup(&f->t, &opts);
        test_fs_init_session(&f->t, FUSE_POSIX_LOCKS);
    }
    f->server = g_thread_new("vfsd-serve", server_thread, f);
    while (g_atomic_int_get(&f->sock) < 0) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }

    f->memfd = new_memfd("vfsd-guest", 2 * GUEST_SIZE);
    f->mem = map_memfd(f->memfd, 2 * GUEST_SIZE);
    f->kick = eventfd(0, EFD_CLOEXEC);
    f->call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                               f->backend), ==, 0);
    f->backend_thread = g_thread_new("backend", backend_thread, f);

    fe_send(f, VHOST_USER_SET_FEATURES, &features, sizeof(features), -1);
    fe_send(f, VHOST_USER_SET_PROTOCOL_FEATURES, &protocol, sizeof(protocol),
            -1);
    fe_send(f, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, f->backend[0]);
    close(f->backend[0]);
    fe_set_mem_table(f, f->memfd, GUEST_SIZE);
}

static void fe_open(Fe *f, unsigned int pool_size, Fe *peer)
{
    fe_open_with(f, pool_size, peer, false);
}

/* Starts the queue from @base, as the front-end does */
static void fe_queue_start(Fe *f, uint16_t base)
{
    const VuFeVring v = {
        .index = QUEUE,
        .num = NUM,
        .base = base,
        .desc = GUEST_BASE + DESC_OFF,
        .avail = GUEST_BASE + AVAIL_OFF,
        .used = GUEST_BASE + USED_OFF,
        .call = f->call,
        .kick = f->kick,
    };

    g_assert_true(vu_fe_set_vring(f->sock, &v));
    g_assert_true(vu_fe_enable_vring(f->sock, QUEUE, true));
    fe_barrier(f);
}

/* Stops the queue (GET_VRING_BASE); where it stopped */
static uint16_t fe_queue_stop(Fe *f)
{
    struct vhost_vring_state state = { .index = QUEUE };

    fe_send(f, VHOST_USER_GET_VRING_BASE, &state, sizeof(state), -1);
    g_assert_true(fe_recv(f, VHOST_USER_GET_VRING_BASE, &state,
                          sizeof(state)));
    g_assert_cmpuint(state.index, ==, QUEUE);
    return state.num;
}

/* A started request queue over GUEST_SIZE bytes of guest memory */
static void fe_start(Fe *f, unsigned int pool_size)
{
    fe_open(f, pool_size, NULL);
    fe_queue_start(f, 0);
}

/* Ends the session: libvhost-user refuses an oversized message */
static void fe_stop(Fe *f)
{
    static uint8_t junk[sizeof(VhostUserMsg)];
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    fe_send(f, VHOST_USER_GET_FEATURES, junk, sizeof(junk), -1);
    while (!g_atomic_int_get(&f->served)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    g_thread_join(f->server);
    /* libvhost-user closed its end of the back-end channel */
    g_thread_join(f->backend_thread);
    close(f->backend[1]);
    close(f->sock);
    close(f->kick);
    close(f->call);
    munmap(f->mem, 2 * GUEST_SIZE);
    close(f->memfd);
    g_async_queue_unref(f->shmem_seen);
    g_async_queue_unref(f->shmem_go);
    if (f->peer) {
        test_fs_teardown_peer(&f->t);
    } else {
        test_fs_teardown(&f->t);
    }
}

static void *gpa(Fe *f, uint64_t off)
{
    return f->mem + off;
}

static uint16_t used_idx(Fe *f)
{
    struct vring_used *u = gpa(f, USED_OFF);

    return __atomic_load_n(&u->idx, __ATOMIC_ACQUIRE);
}

/*
 * Queues @req (a FUSE request) with BUF_SIZE bytes of room for its reply.
 * @far: the request lies where the daemon reads it with MEM_READ.
 */
static unsigned int fe_add_rep(Fe *f, const void *req, size_t len, bool far,
                               uint64_t rep)
{
    struct vring_desc *desc = gpa(f, DESC_OFF);
    struct vring_avail *avail = gpa(f, AVAIL_OFF);
    unsigned int slot = f->avail_idx % SLOTS;

    g_assert_cmpuint(len, <=, BUF_SIZE);
    memcpy(far ? f->far + slot * BUF_SIZE : gpa(f, REQ_OFF + slot * BUF_SIZE),
           req, len);
    memset(gpa(f, REP_OFF + slot * BUF_SIZE), 0, BUF_SIZE);
    desc[2 * slot] = (struct vring_desc) {
        .addr = (far ? FAR_BASE : GUEST_BASE + REQ_OFF) + slot * BUF_SIZE,
        .len = len,
        .flags = VRING_DESC_F_NEXT,
        .next = 2 * slot + 1,
    };
    desc[2 * slot + 1] = (struct vring_desc) {
        .addr = rep ? rep : GUEST_BASE + REP_OFF + slot * BUF_SIZE,
        .len = BUF_SIZE,
        .flags = VRING_DESC_F_WRITE,
    };
    avail->ring[f->avail_idx % NUM] = 2 * slot;
    f->avail_idx++;
    __atomic_store_n(&avail->idx, f->avail_idx, __ATOMIC_RELEASE);
    eventfd_write(f->kick, 1);
    return slot;
}

static unsigned int fe_add(Fe *f, const void *req, size_t len, bool far)
{
    return fe_add_rep(f, req, len, far, 0);
}

static void fe_add_getattr(Fe *f, uint64_t unique, bool far)
{
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in in;
    } req = {
        .h = {
            .len = sizeof(req), .opcode = FUSE_GETATTR, .unique = unique,
            .nodeid = FUSE_ROOT_ID,
        },
    };

    fe_add(f, &req, sizeof(req), far);
}

static gint feeding;

/*
 * A guest that never lets its ring run empty: every request is read
 * through MEM_READ, and each read is answered only once another request
 * is queued, so the daemon never finds the ring empty while this feeds.
 */
static void feed(Fe *f)
{
    if (g_atomic_int_get(&feeding) &&
        (uint16_t)(f->avail_idx - used_idx(f)) < 32) {
        fe_add_getattr(f, f->avail_idx + 1, true);
    }
}

/*
 * GET_VRING_BASE while the guest keeps the queue busy: the front-end
 * waits for it holding its big lock, so it must come back; and every
 * request popped is answered before it does, none after (the front-end
 * restarts the queue from the index it got: a request popped after that
 * would run twice).
 */
static void test_stop_busy_queue(gconstpointer data)
{
    struct vhost_vring_state state = { .index = QUEUE };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    Fe f;
    bool answered;

    fe_start(&f, GPOINTER_TO_UINT(data));
    f.on_read = feed;
    g_atomic_int_set(&feeding, 1);
    fe_add_getattr(&f, 1, true);
    /* Busy: the daemon has popped and answered requests */
    while (used_idx(&f) < 100) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    fe_send(&f, VHOST_USER_GET_VRING_BASE, &state, sizeof(state), -1);
    answered = fe_recv(&f, VHOST_USER_GET_VRING_BASE, &state, sizeof(state));
    g_atomic_int_set(&feeding, 0);
    if (!answered) {
        g_test_message("no GET_VRING_BASE reply while the ring is busy");
        g_test_fail();
        g_assert_true(fe_recv(&f, VHOST_USER_GET_VRING_BASE, &state,
                              sizeof(state)));
    }
    g_assert_cmpuint(state.index, ==, QUEUE);
    g_assert_cmpuint(used_idx(&f), ==, state.num);
    /* Nothing popped behind the front-end's back, later either */
    g_usleep(50 * 1000);
    g_assert_cmpuint(used_idx(&f), ==, state.num);
    g_assert_cmpuint(f.avail_idx, >, state.num);
    fe_stop(&f);
}

/* The daemon's mapping of a memfd the test also maps at @ours */
static bool find_mapping(const char *name, uint8_t *ours, uintptr_t *start,
                         uintptr_t *end)
{
    g_autofree char *maps = NULL;
    g_auto(GStrv) lines = NULL;
    char **l;

    g_assert_true(g_file_get_contents("/proc/self/maps", &maps, NULL, NULL));
    lines = g_strsplit(maps, "\n", -1);
    for (l = lines; *l; l++) {
        unsigned long s, e;

        if (strstr(*l, name) && sscanf(*l, "%lx-%lx", &s, &e) == 2 &&
            s != (uintptr_t)ours) {
            *start = s;
            *end = e;
            return true;
        }
    }
    return false;
}

static void lock_range(TestFs *t, uint64_t ino, uint64_t fh, uint64_t owner,
                       uint32_t type)
{
    struct fuse_lk_in in = {
        .fh = fh, .owner = owner,
        .lk = { .start = 0, .end = 99, .type = type },
    };
    TestReq *r = test_req_new(FUSE_SETLK, ino);

    test_req_add(r, &in, sizeof(in));
    g_assert_cmpint(test_send(t, r, 4096, NULL, 0, NULL), ==, 0);
}

static unsigned int count_waiters(TestFs *t)
{
    unsigned int n;

    g_mutex_lock(&t->fs.intr.lock);
    n = g_list_length(t->fs.intr.waiters);
    g_mutex_unlock(&t->fs.intr.lock);
    return n;
}

/*
 * Replacing the memory table, as memory hotplug does: the same guest
 * memory, grown to twice the size.  libvhost-user unmaps the old mapping
 * and maps the new one; a guard page above the old one keeps the new one
 * from starting where the old one did, so that a host address from the
 * old table cannot be right by chance.
 */
typedef struct TableSwitch {
    uintptr_t old_start, old_end;
    void *guard;
    void *trap;
} TableSwitch;

static void table_switch_send(Fe *f, TableSwitch *ts)
{
    g_assert_true(find_mapping("vfsd-guest", f->mem, &ts->old_start,
                               &ts->old_end));
    ts->guard = mmap((void *)ts->old_end, 4096, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                     0);
    fe_set_mem_table(f, f->memfd, 2 * GUEST_SIZE);
}

/*
 * Once the switch is done, a trap takes the old mapping's range if it is
 * free, so that a write through an old host address lands where the
 * test sees it rather than crashing the test.
 */
static void table_switch_done(Fe *f, TableSwitch *ts)
{
    ts->trap = mmap((void *)ts->old_start, ts->old_end - ts->old_start,
                    PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

static void table_switch_check(TableSwitch *ts)
{
    size_t i;

    if (ts->trap != MAP_FAILED) {
        for (i = 0; i < ts->old_end - ts->old_start; i++) {
            g_assert_cmpuint(((uint8_t *)ts->trap)[i], ==, 0);
        }
        munmap(ts->trap, ts->old_end - ts->old_start);
    }
    if (ts->guard != MAP_FAILED) {
        munmap(ts->guard, 4096);
    }
}

static void wait_used(Fe *f, uint16_t n)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    while (used_idx(f) != n) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static void assert_reply(Fe *f, unsigned int slot, uint64_t unique,
                         uint32_t len)
{
    struct fuse_out_header oh;

    memcpy(&oh, gpa(f, REP_OFF + slot * BUF_SIZE), sizeof(oh));
    g_assert_cmpuint(oh.unique, ==, unique);
    g_assert_cmpint(oh.error, ==, 0);
    g_assert_cmpuint(oh.len, ==, len);
}

/*
 * A SETLKW waits while the front-end replaces the memory table: its
 * reply must go where the guest address points under the new table, not
 * through the host address the old table gave.
 */
static void test_mem_table_change(gconstpointer data)
{
    struct {
        struct fuse_in_header h;
        struct fuse_lk_in in;
    } req = {
        .h = {
            .len = sizeof(req), .opcode = FUSE_SETLKW, .unique = 4242,
        },
        .in = {
            .owner = 2,
            .lk = { .start = 0, .end = 99, .type = F_WRLCK },
        },
    };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    uint64_t ino, fh1, fh2;
    TableSwitch ts;
    unsigned int slot;
    Fe f;

    fe_start(&f, GPOINTER_TO_UINT(data));
    ino = test_create(&f.t, FUSE_ROOT_ID, "locked", O_RDWR, &fh1);
    fh2 = test_open(&f.t, ino, O_RDWR);
    lock_range(&f.t, ino, fh1, 1, F_WRLCK);

    req.h.nodeid = ino;
    req.in.fh = fh2;
    slot = fe_add(&f, &req, sizeof(req), false);
    while (count_waiters(&f.t) == 0) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }

    table_switch_send(&f, &ts);
    fe_barrier(&f);
    table_switch_done(&f, &ts);

    lock_range(&f.t, ino, fh1, 1, F_UNLCK);
    wait_used(&f, 1);
    assert_reply(&f, slot, 4242, sizeof(struct fuse_out_header));
    table_switch_check(&ts);
    fe_stop(&f);
}

static GMutex hold_lock;
static GCond hold_cond;
static bool holding;

static void hold_read(Fe *f)
{
    g_mutex_lock(&hold_lock);
    while (holding) {
        g_cond_wait(&hold_cond, &hold_lock);
    }
    g_mutex_unlock(&hold_lock);
}

/*
 * A request popped, translated and handed to the thread pool, whose only
 * worker is busy: the memory table changes before the worker gets to it.
 * The busy worker waits in a MEM_READ of its request's arguments, which
 * the fake front-end holds until the new table has been sent; the main
 * thread then waits for the worker's lock, and gets it before the worker
 * takes up the queued request.  Timing decides only whether the case is
 * reached (100 ms for the main thread to wait): the wrong outcome is a
 * write through the old table's address, into unmapped memory.
 */
static void test_mem_table_change_queued(void)
{
    struct fuse_in_header hdr = {
        .len = sizeof(hdr) + sizeof(struct fuse_getattr_in),
        .opcode = FUSE_GETATTR, .unique = 500, .nodeid = FUSE_ROOT_ID,
    };
    struct vring_desc *desc;
    struct vring_avail *avail;
    TableSwitch ts;
    Fe f;

    fe_start(&f, 1);
    f.on_read = hold_read;
    holding = true;

    /* First the header, mapped; its arguments in FAR; then the reply */
    desc = gpa(&f, DESC_OFF);
    avail = gpa(&f, AVAIL_OFF);
    memcpy(gpa(&f, REQ_OFF), &hdr, sizeof(hdr));
    memset(f.far, 0, sizeof(struct fuse_getattr_in));
    desc[0] = (struct vring_desc) {
        .addr = GUEST_BASE + REQ_OFF, .len = sizeof(hdr),
        .flags = VRING_DESC_F_NEXT, .next = 200,
    };
    desc[200] = (struct vring_desc) {
        .addr = FAR_BASE, .len = sizeof(struct fuse_getattr_in),
        .flags = VRING_DESC_F_NEXT, .next = 1,
    };
    desc[1] = (struct vring_desc) {
        .addr = GUEST_BASE + REP_OFF, .len = BUF_SIZE,
        .flags = VRING_DESC_F_WRITE,
    };
    avail->ring[0] = 0;
    f.avail_idx = 1;
    __atomic_store_n(&avail->idx, f.avail_idx, __ATOMIC_RELEASE);
    eventfd_write(f.kick, 1);
    /* The worker is in the MEM_READ; this one waits in the pool */
    fe_add_getattr(&f, 501, false);
    g_usleep(100 * 1000);

    table_switch_send(&f, &ts);
    g_usleep(100 * 1000);
    g_mutex_lock(&hold_lock);
    holding = false;
    g_cond_broadcast(&hold_cond);
    g_mutex_unlock(&hold_lock);
    fe_barrier(&f);
    table_switch_done(&f, &ts);

    wait_used(&f, 2);
    assert_reply(&f, 0, 500, sizeof(struct fuse_out_header) +
                 sizeof(struct fuse_attr_out));
    assert_reply(&f, 1, 501, sizeof(struct fuse_out_header) +
                 sizeof(struct fuse_attr_out));
    table_switch_check(&ts);
    fe_stop(&f);
}

/*
 * DAX against upstream QEMU 11.1: each SHMEM_MAP or SHMEM_UNMAP is
 * followed by an ADD_MEM_REG or REM_MEM_REG the front-end waits on, so
 * the daemon lets dispatch_lock go while it waits for the answer.
 */

/* A started queue, a window and a 4 KiB file to map; its node id */
static uint64_t fe_start_shmem(Fe *f, unsigned int pool_size)
{
    static const uint8_t page[4096];
    uint64_t ino, fh;

    fe_open_with(f, pool_size, NULL, true);
    ino = test_create(&f->t, FUSE_ROOT_ID, "mapped", O_RDWR, &fh);
    g_assert_cmpint(test_write(&f->t, ino, fh, 0, page, sizeof(page)), ==,
                    sizeof(page));
    fe_queue_start(f, 0);
    return ino;
}

/* A region of @memfd at REGION_GPA: added, or removed (@memfd -1) */
static void fe_region(Fe *f, uint32_t request, int memfd)
{
    VhostUserMemRegMsg m = {
        .region = {
            .guest_phys_addr = REGION_GPA,
            .memory_size = REGION_SIZE,
            .userspace_addr = REGION_GPA,
        },
    };

    fe_send(f, request, &m, sizeof(m), memfd);
}

/* The next SHMEM request on the back-end channel */
static uint32_t shmem_next(Fe *f)
{
    gpointer p = g_async_queue_timeout_pop(f->shmem_seen,
                                           TIMEOUT_MS * 1000);

    g_assert_nonnull(p);
    return GPOINTER_TO_UINT(p);
}

/* Lets the held answer go, and holds no more */
static void shmem_release(Fe *f)
{
    g_atomic_int_set(&f->shmem_hold, 0);
    g_async_queue_push(f->shmem_go, GUINT_TO_POINTER(1));
}

/* A SETUPMAPPING of @ino's first page at @moffset; @rep: see fe_add_rep() */
static unsigned int fe_add_setupmapping(Fe *f, uint64_t unique, uint64_t ino,
                                        uint64_t moffset, uint64_t rep)
{
    struct {
        struct fuse_in_header h;
        struct fuse_setupmapping_in in;
    } req = {
        .h = {
            .len = sizeof(req), .opcode = FUSE_SETUPMAPPING,
            .unique = unique, .nodeid = ino,
        },
        .in = {
            .fh = -1, .len = 4096, .moffset = moffset,
            .flags = FUSE_SETUPMAPPING_FLAG_READ,
        },
    };

    return fe_add_rep(f, &req, sizeof(req), false, rep);
}

/*
 * The guest's reply buffer lies in a region of the memory table (with
 * 11.1, a DAX window mapping of another file) that the front-end removes
 * while the daemon waits for its answer to a map.  The daemon must not
 * write the reply through the host address it had for the buffer: a trap
 * takes that address over once the region is gone, and must stay
 * untouched.  The buffer is gone from the table, so the request fails.
 */
static void test_shmem_reply_region_removed(gconstpointer data)
{
    int rfd = new_memfd("vfsd-region", REGION_SIZE);
    uint8_t *rmem = map_memfd(rfd, REGION_SIZE);
    struct vring_used *used;
    uintptr_t start, end;
    uint8_t *trap;
    uint64_t ino;
    size_t i;
    Fe f;

    ino = fe_start_shmem(&f, GPOINTER_TO_UINT(data));
    fe_region(&f, VHOST_USER_ADD_MEM_REG, rfd);
    fe_barrier(&f);
    g_assert_true(find_mapping("vfsd-region", rmem, &start, &end));

    g_atomic_int_set(&f.shmem_hold, 1);
    fe_add_setupmapping(&f, 600, ino, 0, REGION_GPA);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);
    fe_region(&f, VHOST_USER_REM_MEM_REG, -1);
    fe_barrier(&f);
    g_assert_false(find_mapping("vfsd-region", rmem, &start, &end));
    trap = mmap((void *)start, end - start, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    g_assert_true(trap != MAP_FAILED);

    shmem_release(&f);
    wait_used(&f, 1);
    for (i = 0; i < end - start; i++) {
        g_assert_cmpuint(trap[i], ==, 0);
    }
    used = gpa(&f, USED_OFF);
    g_assert_cmpuint(used->ring[0].len, ==, 0);
    for (i = 0; i < REGION_SIZE; i++) {
        g_assert_cmpuint(rmem[i], ==, 0);
    }
    munmap(trap, end - start);
    fe_stop(&f);
    munmap(rmem, REGION_SIZE);
    close(rfd);
}

/*
 * A second worker wants the window's lock while the first holds it,
 * waiting for the front-end's answer to its map.  The front-end's next
 * message (REM_MEM_REG of a region, as 11.1 sends while it waits for
 * our answer) must be handled: QEMU holds its big lock meanwhile.  The
 * second worker reaches the lock within the 100 ms the test waits; if it
 * did not, the test would pass without having reached the case.
 */
static void test_shmem_second_waiter(void)
{
    int rfd = new_memfd("vfsd-region", REGION_SIZE);
    unsigned int a, b;
    uint64_t ino;
    Fe f;

    ino = fe_start_shmem(&f, 2);
    fe_region(&f, VHOST_USER_ADD_MEM_REG, rfd);
    fe_barrier(&f);

    g_atomic_int_set(&f.shmem_hold, 1);
    a = fe_add_setupmapping(&f, 700, ino, 0, 0);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);
    b = fe_add_setupmapping(&f, 701, ino, 2 << 20, 0);
    g_usleep(100 * 1000);

    fe_region(&f, VHOST_USER_REM_MEM_REG, -1);
    fe_barrier(&f);

    shmem_release(&f);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);
    wait_used(&f, 2);
    assert_reply(&f, a, 700, sizeof(struct fuse_out_header));
    assert_reply(&f, b, 701, sizeof(struct fuse_out_header));
    fe_stop(&f);
    close(rfd);
}

/*
 * The front-end stops the queue (GET_VRING_BASE, a reset of the guest's
 * device or a QMP stop) while the daemon waits for its answer to a map.
 * Upstream 11.1 reads no back-end request until the stop is answered, so
 * the stop must not wait for the map: the wait is given up, the request
 * is not answered to the guest (nothing is: it ran on a ring the
 * front-end took back) and runs again when the queue starts on the same
 * ring.  The late answer, a failure here, must not be taken for the
 * answer to the map that follows, and the window must not keep what the
 * given-up map may have mapped: an unmap of that range is queued after it.
 */
static void test_shmem_stop_while_mapping(gconstpointer data)
{
    unsigned int a, b;
    uint16_t base;
    uint64_t ino;
    Fe f;

    ino = fe_start_shmem(&f, GPOINTER_TO_UINT(data));
    g_atomic_int_set(&f.shmem_hold, 1);
    g_atomic_int_set(&f.shmem_held_fails, 1);
    a = fe_add_setupmapping(&f, 800, ino, 0, 0);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);

    /* Fails (within TIMEOUT_MS) if the stop waits for the map */
    base = fe_queue_stop(&f);
    g_assert_cmpuint(base, ==, 1);
    g_assert_cmpuint(used_idx(&f), ==, 0);

    /* Answered now that the stop was: the map failed after all */
    shmem_release(&f);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_UNMAP);
    g_atomic_int_set(&f.shmem_held_fails, 0);

    /* The same ring again: the request runs again, and maps */
    fe_queue_start(&f, base);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);
    wait_used(&f, 1);
    assert_reply(&f, a, 800, sizeof(struct fuse_out_header));
    b = fe_add_setupmapping(&f, 801, ino, 2 << 20, 0);
    g_assert_cmpuint(shmem_next(&f), ==, VHOST_USER_BACKEND_SHMEM_MAP);
    wait_used(&f, 2);
    assert_reply(&f, b, 801, sizeof(struct fuse_out_header));
    fe_stop(&f);
}

/*
 * The back-end state transfer through the transport: the feature is
 * offered, malformed requests get an error reply, a save writes our
 * stream into the front-end's pipe and CHECK says how it went.
 */

static uint64_t set_state_fd(Fe *f, uint32_t dir, uint32_t phase, int fd)
{
    uint32_t params[2] = { dir, phase };
    uint64_t ret;

    fe_send(f, SET_DEVICE_STATE_FD, params, sizeof(params), fd);
    g_assert_true(fe_recv(f, SET_DEVICE_STATE_FD, &ret, sizeof(ret)));
    return ret;
}

static uint64_t check_state(Fe *f)
{
    uint64_t ret;

    fe_send(f, CHECK_DEVICE_STATE, NULL, 0, -1);
    g_assert_true(fe_recv(f, CHECK_DEVICE_STATE, &ret, sizeof(ret)));
    return ret;
}

static void test_device_state(void)
{
    Fe f;
    uint64_t protocol, ret;
    g_autoptr(GByteArray) got = g_byte_array_new();
    uint8_t buf[4096];
    int p[2];
    ssize_t n;

    fe_start(&f, 0);
    fe_send(&f, VHOST_USER_GET_PROTOCOL_FEATURES, NULL, 0, -1);
    g_assert_true(fe_recv(&f, VHOST_USER_GET_PROTOCOL_FEATURES, &protocol,
                          sizeof(protocol)));
    g_assert_true(protocol & (1ULL << DEVICE_STATE_F));
    protocol = 1ULL << VHOST_USER_PROTOCOL_F_MEM_RW |
               1ULL << VHOST_USER_PROTOCOL_F_BACKEND_REQ |
               1ULL << DEVICE_STATE_F;
    fe_send(&f, VHOST_USER_SET_PROTOCOL_FEATURES, &protocol,
            sizeof(protocol), -1);

    /* Nothing transferred: nothing to vouch for */
    g_assert_cmpuint(check_state(&f), !=, 0);
    /* No fd, then a phase that does not exist */
    ret = set_state_fd(&f, 0, 0, -1);
    g_assert_cmpuint(ret & 0xff, !=, 0);
    g_assert_true(ret & STATE_NO_FD);
    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    ret = set_state_fd(&f, 0, 1, p[1]);
    close(p[1]);
    g_assert_cmpuint(ret & 0xff, !=, 0);
    /* The back-end closed its end: the pipe is at its end */
    g_assert_cmpint(read(p[0], buf, sizeof(buf)), ==, 0);
    close(p[0]);

    /* A save: our stream, then end of file, then success */
    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    g_assert_cmpuint(set_state_fd(&f, 0, 0, p[1]), ==, STATE_NO_FD);
    close(p[1]);
    while ((n = read(p[0], buf, sizeof(buf))) > 0) {
        g_byte_array_append(got, buf, n);
    }
    close(p[0]);
    g_assert_cmpuint(got->len, >, 16);
    g_assert_cmpmem(got->data, 8, "VFSDMIG\n", 8);
    g_assert_cmpuint(check_state(&f), ==, 0);

    /* A load into a daemon that serves a guest already is refused */
    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    g_assert_cmpuint(set_state_fd(&f, 1, 0, p[0]), ==, STATE_NO_FD);
    close(p[0]);
    g_assert_cmpint(write(p[1], got->data, got->len), ==, got->len);
    close(p[1]);
    g_assert_cmpuint(check_state(&f), ==, 1);
    fe_stop(&f);
}

/*
 * Lock waits across a stop of their queue (vhost-park.c, vfsd_park()).
 * The guest's SETLKW (owner 2, on its own handle) waits for owner 1's lock.
 */
typedef struct LockWait {
    uint64_t ino, fh1, fh2;
    unsigned int slot;
} LockWait;

static void wait_waiters(Fe *f, unsigned int n)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    while (count_waiters(&f->t) != n) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static void lock_wait_begin(Fe *f, LockWait *lw, uint64_t unique)
{
    struct {
        struct fuse_in_header h;
        struct fuse_lk_in in;
    } req = {
        .h = { .len = sizeof(req), .opcode = FUSE_SETLKW, .unique = unique },
        .in = { .owner = 2, .lk = { .start = 0, .end = 99, .type = F_WRLCK } },
    };

    lw->ino = test_create(&f->t, FUSE_ROOT_ID, "locked", O_RDWR, &lw->fh1);
    lw->fh2 = test_open(&f->t, lw->ino, O_RDWR);
    lock_range(&f->t, lw->ino, lw->fh1, 1, F_WRLCK);
    req.h.nodeid = lw->ino;
    req.in.fh = lw->fh2;
    lw->slot = fe_add(f, &req, sizeof(req), false);
    wait_waiters(f, 1);
}

/* Whether owner 1 could take its lock again now (SETLK) */
static int lock_again(Fe *f, LockWait *lw)
{
    struct fuse_lk_in in = {
        .fh = lw->fh1, .owner = 1,
        .lk = { .start = 0, .end = 99, .type = F_WRLCK },
    };
    TestReq *r = test_req_new(FUSE_SETLK, lw->ino);

    test_req_add(r, &in, sizeof(in));
    return test_send(&f->t, r, 4096, NULL, 0, NULL);
}

/* The guest's request waits again, unanswered: owner 1 lets go */
static void lock_wait_release(Fe *f, LockWait *lw)
{
    wait_waiters(f, 1);
    g_assert_cmpuint(used_idx(f), ==, 0);
    lock_range(&f->t, lw->ino, lw->fh1, 1, F_UNLCK);
}

/* The guest got its reply and the lock, and the ring goes on */
static void lock_wait_answered(Fe *f, LockWait *lw)
{
    wait_used(f, 1);
    assert_reply(f, lw->slot, 4242, sizeof(struct fuse_out_header));
    /* Owner 2 holds the lock on the host */
    g_assert_cmpint(lock_again(f, lw), ==, -EAGAIN);
    fe_add_getattr(f, 4243, false);
    wait_used(f, 2);
}

/*
 * The queue starts on a ring with nothing in flight: the parked request
 * is dropped, never answered, never run, and the ring works
 */
static void lock_wait_dropped(Fe *f, LockWait *lw)
{
    fe_queue_start(f, 0);
    lock_range(&f->t, lw->ino, lw->fh1, 1, F_UNLCK);
    fe_add_getattr(f, 5000, false);
    wait_used(f, 1);
    assert_reply(f, 0, 5000, sizeof(struct fuse_out_header) +
                 sizeof(struct fuse_attr_out));
    g_usleep(50 * 1000);
    g_assert_cmpuint(used_idx(f), ==, 1);
    /* Nobody took the lock for the dropped request */
    g_assert_cmpint(lock_again(f, lw), ==, 0);
}

/*
 * QMP stop and cont: the queue stops (GET_VRING_BASE) and starts again
 * on the same ring.  The wait must not go on in a ring the daemon no
 * longer owns, nor be lost: once the lock is free, released while the
 * queue is stopped (@data) or after it started again, the guest gets
 * it and its reply, and nothing reaches the ring while it is stopped.
 */
static void test_lock_wait_stop_cont(gconstpointer data)
{
    bool while_stopped = GPOINTER_TO_UINT(data);
    LockWait lw;
    uint16_t base;
    Fe f;

    fe_start(&f, 0);
    lock_wait_begin(&f, &lw, 4242);
    base = fe_queue_stop(&f);
    g_assert_cmpuint(base, ==, 1);
    /* Parked: nothing waits on the host meanwhile */
    g_assert_cmpuint(count_waiters(&f.t), ==, 0);
    if (while_stopped) {
        lock_range(&f.t, lw.ino, lw.fh1, 1, F_UNLCK);
        g_usleep(50 * 1000);
        g_assert_cmpuint(used_idx(&f), ==, 0);
    }
    fe_queue_start(&f, base);
    if (!while_stopped) {
        lock_wait_release(&f, &lw);
    }
    lock_wait_answered(&f, &lw);
    fe_stop(&f);
}

/*
 * The guest reset its device while the queue was stopped: it starts on
 * a new ring, from zero.  The parked wait belongs to the old one and is
 * dropped, unanswered; the new ring works.
 */
static void test_lock_wait_reset(void)
{
    LockWait lw;
    Fe f;

    fe_start(&f, 0);
    lock_wait_begin(&f, &lw, 4242);
    g_assert_cmpuint(fe_queue_stop(&f), ==, 1);
    memset(gpa(&f, AVAIL_OFF), 0, USED_OFF - AVAIL_OFF);
    memset(gpa(&f, USED_OFF), 0, REQ_OFF - USED_OFF);
    f.avail_idx = 0;
    lock_wait_dropped(&f, &lw);
    fe_stop(&f);
}

/* The source's state, saved through the transport */
static GByteArray *save_state(Fe *f)
{
    GByteArray *got = g_byte_array_new();
    uint8_t buf[4096];
    ssize_t n;
    int p[2];

    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    g_assert_cmpuint(set_state_fd(f, 0, 0, p[1]), ==, STATE_NO_FD);
    close(p[1]);
    while ((n = read(p[0], buf, sizeof(buf))) > 0) {
        g_byte_array_append(got, buf, n);
    }
    close(p[0]);
    g_assert_cmpuint(check_state(f), ==, 0);
    return got;
}

static uint64_t load_state(Fe *f, const void *state, size_t len)
{
    int p[2];

    g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
    g_assert_cmpuint(set_state_fd(f, 1, 0, p[0]), ==, STATE_NO_FD);
    close(p[0]);
    g_assert_cmpint(write(p[1], state, len), ==, len);
    close(p[1]);
    return check_state(f);
}

/*
 * A source whose guest waits in a SETLKW, stopped and saved; where its
 * queue stopped, and the state in @state
 */
static uint16_t lock_wait_source(Fe *src, LockWait *lw, GByteArray **state)
{
    uint16_t base;

    fe_start(src, 0);
    lock_wait_begin(src, lw, 4242);
    base = fe_queue_stop(src);
    g_assert_cmpuint(base, ==, 1);
    *state = save_state(src);
    return base;
}

/*
 * Live migration while the guest's SETLKW waits: the source parks it at
 * the stop and carries it, the destination runs it again on the ring it
 * is given (the same guest memory) and answers it there once the lock
 * (carried too, owner 1's) is released.  The source never answers.
 */
static void test_lock_wait_migrate(void)
{
    g_autoptr(GByteArray) state = NULL;
    LockWait lw;
    uint16_t base;
    Fe src, dst;

    base = lock_wait_source(&src, &lw, &state);
    fe_open(&dst, 0, &src);
    g_assert_cmpuint(load_state(&dst, state->data, state->len), ==, 0);
    /* The guest's memory, as the migration brought it */
    memcpy(dst.mem, src.mem, GUEST_SIZE);
    dst.avail_idx = src.avail_idx;
    fe_queue_start(&dst, base);
    lock_wait_release(&dst, &lw);
    lock_wait_answered(&dst, &lw);
    g_assert_cmpuint(used_idx(&src), ==, 0);
    fe_stop(&dst);
    fe_stop(&src);
}

/*
 * A destination given parked requests its ring cannot have in flight
 * (more than it has, or heads outside it) drops them rather than
 * corrupt the guest's ring: the queue works on.
 */
static void test_lock_wait_migrate_bad_ring(void)
{
    g_autoptr(GByteArray) state = NULL;
    LockWait lw;
    Fe src, dst;

    lock_wait_source(&src, &lw, &state);
    fe_open(&dst, 0, &src);
    g_assert_cmpuint(load_state(&dst, state->data, state->len), ==, 0);
    /* A ring with nothing in flight: base 0, used 0 */
    lock_wait_dropped(&dst, &lw);
    fe_stop(&dst);
    fe_stop(&src);
}

/* Where the payload of section @type starts in @state, and its length */
static size_t find_section(GByteArray *state, uint32_t type, size_t *len)
{
    size_t pos = 16;            /* magic, version, flags */

    while (pos + 16 <= state->len) {
        uint32_t t;
        uint64_t l;

        memcpy(&t, state->data + pos, 4);
        memcpy(&l, state->data + pos + 8, 8);
        if (t == type) {
            *len = l;
            return pos + 16;
        }
        g_assert_cmpuint(t, !=, 0);
        pos += 16 + l;
    }
    g_assert_not_reached();
}

/*
 * The parked requests' section comes from the source through QEMU, and
 * is not trusted: every byte of it changed, one at a time, the
 * destination either refuses the state or takes something it can
 * answer, and lives on.
 */
static void test_lock_wait_bad_stream(void)
{
    g_autoptr(GByteArray) state = NULL;
    static const uint8_t masks[] = { 0xff, 0x01, 0x80 };
    unsigned int refused = 0, taken = 0, m;
    size_t start, len, i;
    uint16_t base;
    LockWait lw;
    Fe src, dst;

    base = lock_wait_source(&src, &lw, &state);
    start = find_section(state, 6 /* VFSD_MIG_SEC_REQUESTS */, &len);
    g_assert_cmpuint(len, >, 8);

    for (i = start; i < start + len; i++) {
        for (m = 0; m < G_N_ELEMENTS(masks); m++) {
            state->data[i] ^= masks[m];
            fe_open(&dst, 0, &src);
            if (load_state(&dst, state->data, state->len) == 0) {
                /* What it took meets the ring */
                memcpy(dst.mem, src.mem, GUEST_SIZE);
                fe_queue_start(&dst, base);
                taken++;
            } else {
                refused++;
            }
            /* Alive: it answers, then ends the session as asked */
            fe_barrier(&dst);
            fe_stop(&dst);
            state->data[i] ^= masks[m];
        }
    }
    g_test_message("%u changed states refused, %u taken", refused, taken);
    /*
     * Every change of the count's eight bytes at least is refused (a
     * count too large for the rest, or data after the records); changes
     * inside the request or the guest addresses are the guest's business
     * and taken.
     */
    g_assert_cmpuint(refused, >=, 3 * 8);
    g_assert_cmpuint(taken, >, 0);
    fe_stop(&src);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    vfsd_log_init(false, VFSD_LOG_ERROR);
    g_test_add_data_func("/virtiofsd/vhost/stop-busy-queue/inline",
                         GUINT_TO_POINTER(0), test_stop_busy_queue);
    g_test_add_data_func("/virtiofsd/vhost/stop-busy-queue/pool",
                         GUINT_TO_POINTER(2), test_stop_busy_queue);
    g_test_add_data_func("/virtiofsd/vhost/mem-table-change/inline",
                         GUINT_TO_POINTER(0), test_mem_table_change);
    g_test_add_data_func("/virtiofsd/vhost/mem-table-change/pool",
                         GUINT_TO_POINTER(2), test_mem_table_change);
    g_test_add_func("/virtiofsd/vhost/device-state", test_device_state);
    g_test_add_data_func("/virtiofsd/vhost/shmem/reply-region-removed/inline",
                         GUINT_TO_POINTER(0),
                         test_shmem_reply_region_removed);
    g_test_add_data_func("/virtiofsd/vhost/shmem/reply-region-removed/pool",
                         GUINT_TO_POINTER(2),
                         test_shmem_reply_region_removed);
    g_test_add_data_func("/virtiofsd/vhost/shmem/stop-while-mapping/inline",
                         GUINT_TO_POINTER(0), test_shmem_stop_while_mapping);
    g_test_add_data_func("/virtiofsd/vhost/shmem/stop-while-mapping/pool",
                         GUINT_TO_POINTER(2), test_shmem_stop_while_mapping);
    g_test_add_func("/virtiofsd/vhost/shmem/second-waiter",
                    test_shmem_second_waiter);
    g_test_add_func("/virtiofsd/vhost/mem-table-change/queued",
                    test_mem_table_change_queued);
    g_test_add_data_func("/virtiofsd/vhost/lock-wait/stop-cont",
                         GUINT_TO_POINTER(0), test_lock_wait_stop_cont);
    g_test_add_data_func("/virtiofsd/vhost/lock-wait/stop-release-cont",
                         GUINT_TO_POINTER(1), test_lock_wait_stop_cont);
    g_test_add_func("/virtiofsd/vhost/lock-wait/reset",
                    test_lock_wait_reset);
    g_test_add_func("/virtiofsd/vhost/lock-wait/migrate",
                    test_lock_wait_migrate);
    g_test_add_func("/virtiofsd/vhost/lock-wait/migrate-bad-ring",
                    test_lock_wait_migrate_bad_ring);
    g_test_add_func("/virtiofsd/vhost/lock-wait/bad-stream",
                    test_lock_wait_bad_stream);
    return g_test_run();
}
