/*
 * libvhost-user: the back-end side of the shared memory protocol
 * (SHMEM_MAP/UNMAP, MAP_REPLACE, MEM_READ/WRITE) against a fake front-end
 * on a socketpair, and elements with buffers the back-end cannot map.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libvhost-user.h"

typedef struct Msg {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
    uint8_t payload[16 + VHOST_USER_MEM_RW_MAX];
    int nfds;
} Msg;

/* The fake front-end's replies, in order */
typedef struct Script {
    int sock;
    GAsyncQueue *seen;          /* Msg * */
    uint64_t ack;               /* u64 reply to NEED_REPLY requests */
    uint32_t read_status;       /* MEM_READ: 0 or an errno */
    /* Each reply waits for a push to go (the cancelled wait may end first) */
    gint hold;
    GAsyncQueue *go;
} Script;

static bool read_msg(int fd, Msg *m)
{
    char control[CMSG_SPACE(8 * sizeof(int))];
    uint32_t hdr[3];
    struct iovec iov = { .iov_base = hdr, .iov_len = sizeof(hdr) };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control, .msg_controllen = sizeof(control),
    };
    struct cmsghdr *c;
    size_t got = 0;

    if (recvmsg(fd, &mh, MSG_WAITALL) != sizeof(hdr)) {
        return false;
    }
    m->request = hdr[0];
    m->flags = hdr[1];
    m->size = hdr[2];
    m->nfds = 0;
    for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        int fds[8], i;

        m->nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        memcpy(fds, CMSG_DATA(c), m->nfds * sizeof(int));
        for (i = 0; i < m->nfds; i++) {
            close(fds[i]);
        }
    }
    g_assert_cmpuint(m->size, <=, sizeof(m->payload));
    while (got < m->size) {
        ssize_t n = read(fd, m->payload + got, m->size - got);

        g_assert_cmpint(n, >, 0);
        got += n;
    }
    return true;
}

static void send_reply(int fd, uint32_t request, const void *p, size_t len)
{
    uint32_t hdr[3] = { request, 0x1 | VHOST_USER_REPLY_MASK, len };

    g_assert_cmpint(write(fd, hdr, sizeof(hdr)), ==, sizeof(hdr));
    if (len) {
        g_assert_cmpint(write(fd, p, len), ==, (ssize_t)len);
    }
}

static gpointer frontend(gpointer opaque)
{
    Script *s = opaque;
    Msg *m;

    for (;;) {
        m = g_new0(Msg, 1);
        if (!read_msg(s->sock, m)) {
            g_free(m);
            break;
        }
        if (m->request == VHOST_USER_BACKEND_MEM_READ) {
            VhostUserMemRW rw;
            g_autofree uint8_t *data = NULL;
            uint32_t i;

            memcpy(&rw, m->payload, sizeof(rw));
            if (s->read_status) {
                rw.status = s->read_status;
                rw.size = 0;
                send_reply(s->sock, m->request, &rw, sizeof(rw));
            } else {
                data = g_malloc(sizeof(rw) + rw.size);
                for (i = 0; i < rw.size; i++) {
                    data[sizeof(rw) + i] = (rw.guest_address + i) & 0xff;
                }
                memcpy(data, &rw, sizeof(rw));
                send_reply(s->sock, m->request, data, sizeof(rw) + rw.size);
            }
        } else if (m->flags & VHOST_USER_NEED_REPLY_MASK) {
            if (g_atomic_int_get(&s->hold)) {
                g_async_queue_pop(s->go);
            }
            send_reply(s->sock, m->request, &s->ack, sizeof(s->ack));
        }
        g_async_queue_push(s->seen, m);
    }
    return NULL;
}

typedef struct Fixture {
    VuDev dev;
    Script script;
    GThread *thread;
    int sv[2];
    int unused[2];
} Fixture;

static void panic_cb(VuDev *dev, const char *err)
{
}

static void set_watch(VuDev *dev, int fd, int condition, vu_watch_cb cb,
                      void *data)
{
}

static void remove_watch(VuDev *dev, int fd)
{
}

static const VuDevIface iface;

static void setup(Fixture *f, gconstpointer data)
{
    uint64_t features = GPOINTER_TO_SIZE(data);

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, f->sv), ==, 0);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, f->unused), ==, 0);
    g_assert_true(vu_init(&f->dev, 2, f->unused[0], panic_cb, NULL,
                          set_watch, remove_watch, &iface));
    f->dev.backend_fd = f->sv[0];
    f->dev.protocol_features = features;
    f->script.sock = f->sv[1];
    f->script.seen = g_async_queue_new_full(g_free);
    f->script.go = g_async_queue_new();
    f->thread = g_thread_new("frontend", frontend, &f->script);
}

static void teardown(Fixture *f, gconstpointer data)
{
    shutdown(f->sv[0], SHUT_RDWR);
    g_thread_join(f->thread);
    close(f->sv[1]);
    vu_deinit(&f->dev);
    close(f->unused[1]);
    g_async_queue_unref(f->script.seen);
    g_async_queue_unref(f->script.go);
}

static Msg *next_msg(Fixture *f)
{
    Msg *m = g_async_queue_timeout_pop(f->script.seen, 5 * G_USEC_PER_SEC);

    g_assert_nonnull(m);
    return m;
}

#define F(x) (1ULL << VHOST_USER_PROTOCOL_F_##x)
#define ALL (F(SHMEM) | F(SHMEM_REPLACE) | F(MEM_RW) | F(REPLY_ACK) | \
             F(BACKEND_REQ))

static void test_map_unmap(Fixture *f, gconstpointer data)
{
    g_autofree Msg *m = NULL;
    VhostUserMMap mm;
    int fd = open("/dev/null", O_RDONLY);

    g_assert_true(vu_shmem_map(&f->dev, 0, 0x1000, 0x200000, 0x200000,
                               VHOST_USER_FLAG_MAP_RW, fd));
    m = next_msg(f);
    g_assert_cmpuint(m->request, ==, VHOST_USER_BACKEND_SHMEM_MAP);
    g_assert_cmpuint(m->request, ==, 9);
    g_assert_true(m->flags & VHOST_USER_NEED_REPLY_MASK);
    g_assert_cmpuint(m->size, ==, 40);
    g_assert_cmpint(m->nfds, ==, 1);
    memcpy(&mm, m->payload, sizeof(mm));
    g_assert_cmpuint(mm.shmid, ==, 0);
    g_assert_cmpuint(mm.fd_offset, ==, 0x1000);
    g_assert_cmpuint(mm.shm_offset, ==, 0x200000);
    g_assert_cmpuint(mm.len, ==, 0x200000);
    g_assert_cmpuint(mm.flags, ==, VHOST_USER_FLAG_MAP_RW);
    g_free(m);

    /* Atomic replacement */
    g_assert_true(vu_shmem_map(&f->dev, 0, 0, 0x200000, 0x200000,
                               VHOST_USER_FLAG_MAP_REPLACE, fd));
    m = next_msg(f);
    memcpy(&mm, m->payload, sizeof(mm));
    g_assert_cmpuint(mm.flags, ==, VHOST_USER_FLAG_MAP_REPLACE);
    g_free(m);

    g_assert_true(vu_shmem_unmap(&f->dev, 0, 0x200000, 0x400000));
    m = next_msg(f);
    g_assert_cmpuint(m->request, ==, 10);
    g_assert_cmpint(m->nfds, ==, 0);
    memcpy(&mm, m->payload, sizeof(mm));
    g_assert_cmpuint(mm.shm_offset, ==, 0x200000);
    g_assert_cmpuint(mm.len, ==, 0x400000);
    g_free(m);

    /* The front-end says no */
    f->script.ack = EINVAL;
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 0, fd));
    g_free(next_msg(f));
    g_assert_false(vu_shmem_unmap(&f->dev, 0, 0, 4096));
    m = next_msg(f);

    /* Invalid requests never reach the front-end */
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 1ULL << 7, fd));
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 0, 0, fd));
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 0, -1));
    g_assert_false(vu_shmem_unmap(&f->dev, 0, 0, 0));
    g_assert_null(g_async_queue_timeout_pop(f->script.seen, 100000));
    close(fd);
}

/*
 * An unmap nobody waits for: no NEED_REPLY, so the front-end sends nothing
 * back, and a refusal cannot be seen.  The next request that waits must
 * still get its own reply, not a stale one.
 */
static void test_unmap_nowait(Fixture *f, gconstpointer data)
{
    g_autofree Msg *m = NULL;
    VhostUserMMap mm;
    int fd = open("/dev/null", O_RDONLY);

    f->script.ack = EINVAL;
    g_assert_true(vu_shmem_unmap_nowait(&f->dev, 0, 0x200000, 0x200000));
    m = next_msg(f);
    g_assert_cmpuint(m->request, ==, VHOST_USER_BACKEND_SHMEM_UNMAP);
    g_assert_false(m->flags & VHOST_USER_NEED_REPLY_MASK);
    memcpy(&mm, m->payload, sizeof(mm));
    g_assert_cmpuint(mm.shm_offset, ==, 0x200000);
    g_assert_cmpuint(mm.len, ==, 0x200000);
    g_free(m);

    f->script.ack = 0;
    g_assert_true(vu_shmem_map(&f->dev, 0, 0, 0x200000, 0x200000, 0, fd));
    m = next_msg(f);
    g_assert_true(m->flags & VHOST_USER_NEED_REPLY_MASK);

    /* Invalid, or the feature is missing: nothing is sent */
    g_assert_false(vu_shmem_unmap_nowait(&f->dev, 0, 0, 0));
    f->dev.protocol_features &= ~F(SHMEM);
    g_assert_false(vu_shmem_unmap_nowait(&f->dev, 0, 0, 4096));
    g_assert_null(g_async_queue_timeout_pop(f->script.seen, 100000));
    close(fd);
}

/*
 * A wait given up (the cancel fd readable, as a stop makes it): the map
 * fails with ECANCELED, and its answer, a refusal that comes late, is
 * not taken for the answer to the next request.
 */
static void test_cancel(Fixture *f, gconstpointer data)
{
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fd = open("/dev/null", O_RDONLY);
    eventfd_t v;
    uint8_t buf[4];
    Msg *m;

    g_assert_cmpint(efd, >=, 0);
    vu_set_backend_cancel_fd(&f->dev, efd);
    g_assert_true(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 0, fd));
    g_free(next_msg(f));

    g_atomic_int_set(&f->script.hold, 1);
    f->script.ack = EINVAL;
    eventfd_write(efd, 1);
    errno = 0;
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0x200000, 4096, 0, fd));
    g_assert_cmpint(errno, ==, ECANCELED);
    g_assert_cmpuint(f->dev.shmem.backend_replies_owed, ==, 1);
    eventfd_read(efd, &v);

    /* The late refusal, then our answers: the owed one is dropped */
    g_async_queue_push(f->script.go, GINT_TO_POINTER(1));
    m = next_msg(f);
    g_assert_cmpuint(m->request, ==, VHOST_USER_BACKEND_SHMEM_MAP);
    g_free(m);
    g_atomic_int_set(&f->script.hold, 0);
    f->script.ack = 0;
    g_assert_true(vu_shmem_unmap(&f->dev, 0, 0, 4096));
    g_assert_cmpuint(f->dev.shmem.backend_replies_owed, ==, 0);
    g_free(next_msg(f));

    /* A MEM_READ drops an owed answer the same way */
    g_atomic_int_set(&f->script.hold, 1);
    eventfd_write(efd, 1);
    g_assert_false(vu_shmem_unmap(&f->dev, 0, 0x200000, 4096));
    g_assert_cmpint(errno, ==, ECANCELED);
    eventfd_read(efd, &v);
    g_async_queue_push(f->script.go, GINT_TO_POINTER(1));
    g_free(next_msg(f));
    g_atomic_int_set(&f->script.hold, 0);
    g_assert_true(vu_mem_read(&f->dev, 0x1000, buf, sizeof(buf)));
    g_assert_cmpuint(buf[0], ==, 0x00);
    g_assert_cmpuint(buf[3], ==, 0x03);
    g_assert_cmpuint(f->dev.shmem.backend_replies_owed, ==, 0);
    g_free(next_msg(f));
    close(fd);
    close(efd);
}

static void test_features(Fixture *f, gconstpointer data)
{
    int fd = open("/dev/null", O_RDONLY);
    uint8_t buf[4];
    g_autofree Msg *m = NULL;

    /* SHMEM only: no REPLACE, no MEM_RW, no REPLY_ACK so no waiting */
    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 4096,
                                VHOST_USER_FLAG_MAP_REPLACE, fd));
    g_assert_false(vu_mem_read(&f->dev, 0, buf, sizeof(buf)));
    g_assert_false(vu_mem_write(&f->dev, 0, buf, sizeof(buf)));
    g_assert_null(g_async_queue_timeout_pop(f->script.seen, 100000));

    g_assert_true(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 0, fd));
    m = next_msg(f);
    g_assert_false(m->flags & VHOST_USER_NEED_REPLY_MASK);
    close(fd);
}

static void test_no_shmem(Fixture *f, gconstpointer data)
{
    int fd = open("/dev/null", O_RDONLY);

    g_assert_false(vu_shmem_map(&f->dev, 0, 0, 0, 4096, 0, fd));
    g_assert_false(vu_shmem_unmap(&f->dev, 0, 0, 4096));
    g_assert_null(g_async_queue_timeout_pop(f->script.seen, 100000));
    close(fd);
}

static void test_mem_read(Fixture *f, gconstpointer data)
{
    size_t len = VHOST_USER_MEM_RW_MAX + 1000;
    g_autofree uint8_t *buf = g_malloc(len);
    g_autofree Msg *m1 = NULL, *m2 = NULL;
    VhostUserMemRW rw;
    size_t i;

    g_assert_true(vu_mem_read(&f->dev, 0x10000, buf, len));
    for (i = 0; i < len; i++) {
        g_assert_cmpuint(buf[i], ==, (0x10000 + i) & 0xff);
    }
    /* Split at VHOST_USER_MEM_RW_MAX, header only */
    m1 = next_msg(f);
    m2 = next_msg(f);
    g_assert_cmpuint(m1->request, ==, 11);
    g_assert_cmpuint(m1->size, ==, sizeof(rw));
    memcpy(&rw, m1->payload, sizeof(rw));
    g_assert_cmpuint(rw.guest_address, ==, 0x10000);
    g_assert_cmpuint(rw.size, ==, VHOST_USER_MEM_RW_MAX);
    memcpy(&rw, m2->payload, sizeof(rw));
    g_assert_cmpuint(rw.guest_address, ==, 0x10000 + VHOST_USER_MEM_RW_MAX);
    g_assert_cmpuint(rw.size, ==, 1000);

    /* A failure status */
    f->script.read_status = EFAULT;
    g_assert_false(vu_mem_read(&f->dev, 0x10000, buf, 10));
    g_free(next_msg(f));
    /* The channel is still in sync afterwards */
    f->script.read_status = 0;
    g_assert_true(vu_mem_read(&f->dev, 0x20, buf, 10));
    g_assert_cmpuint(buf[0], ==, 0x20);
    g_free(next_msg(f));
}

static void test_mem_write(Fixture *f, gconstpointer data)
{
    size_t len = VHOST_USER_MEM_RW_MAX + 7;
    g_autofree uint8_t *buf = g_malloc(len);
    g_autofree Msg *m1 = NULL, *m2 = NULL;
    VhostUserMemRW rw;
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = i * 7;
    }
    g_assert_true(vu_mem_write(&f->dev, 0x5000, buf, len));
    m1 = next_msg(f);
    m2 = next_msg(f);
    g_assert_cmpuint(m1->request, ==, 12);
    g_assert_true(m1->flags & VHOST_USER_NEED_REPLY_MASK);
    g_assert_cmpuint(m1->size, ==, sizeof(rw) + VHOST_USER_MEM_RW_MAX);
    memcpy(&rw, m1->payload, sizeof(rw));
    g_assert_cmpuint(rw.guest_address, ==, 0x5000);
    g_assert_cmpmem(m1->payload + sizeof(rw), VHOST_USER_MEM_RW_MAX, buf,
                    VHOST_USER_MEM_RW_MAX);
    g_assert_cmpuint(m2->size, ==, sizeof(rw) + 7);
    g_assert_cmpmem(m2->payload + sizeof(rw), 7, buf + VHOST_USER_MEM_RW_MAX,
                    7);

    f->script.ack = EFAULT;
    g_assert_false(vu_mem_write(&f->dev, 0x5000, buf, 10));
    g_free(next_msg(f));
}

/* A one-element split ring in our own memory, as guest memory at GPA */
#define GPA 0x100000ULL
#define WINDOW_GPA 0x80000000ULL

typedef struct Ring {
    struct vring_desc desc[4];
    struct {
        uint16_t flags, idx, ring[4];
    } avail;
    struct {
        uint16_t flags, idx;
        struct vring_used_elem ring[4];
    } used;
    uint8_t out[64];
    uint8_t in[64];
} Ring;

static void ring_setup(VuDev *dev, Ring *r, uint64_t in_gpa)
{
    VuVirtq *vq = &dev->vq[0];

    memset(r, 0, sizeof(*r));
    dev->nregions = 1;
    dev->regions[0] = (VuDevRegion) {
        .gpa = GPA, .size = sizeof(*r), .qva = 0,
        .mmap_addr = (uintptr_t)r, .mmap_offset = 0,
    };
    r->desc[0] = (struct vring_desc) {
        .addr = GPA + offsetof(Ring, out), .len = 64,
        .flags = VRING_DESC_F_NEXT, .next = 1,
    };
    r->desc[1] = (struct vring_desc) {
        .addr = in_gpa, .len = 64, .flags = VRING_DESC_F_WRITE,
    };
    r->avail.idx = 1;
    vq->vring.num = 4;
    vq->vring.desc = r->desc;
    vq->vring.avail = (void *)&r->avail;
    vq->vring.used = (void *)&r->used;
}

static void test_unmapped_buffers(void)
{
    VuDev dev;
    Ring r;
    VuVirtqElement *e;
    int sv[2];

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    g_assert_true(vu_init(&dev, 1, sv[0], panic_cb, NULL, set_watch,
                          remove_watch, &iface));

    /* All mapped: as before, no addresses */
    ring_setup(&dev, &r, GPA + offsetof(Ring, in));
    e = vu_queue_pop(&dev, &dev.vq[0], sizeof(*e));
    g_assert_nonnull(e);
    g_assert_nonnull(e->in_sg[0].iov_base);
    g_assert_null(e->in_addr);
    g_assert_null(e->out_addr);
    free(e);

    /* The in buffer lies in a window we have not mapped: refused... */
    ring_setup(&dev, &r, WINDOW_GPA);
    dev.vq[0].last_avail_idx = dev.vq[0].shadow_avail_idx = 0;
    dev.vq[0].inuse = 0;
    g_assert_null(vu_queue_pop(&dev, &dev.vq[0], sizeof(*e)));
    g_assert_true(dev.broken);

    /* ...unless the device opted in */
    dev.broken = false;
    vu_set_unmapped_buffers_allowed(&dev, true);
    dev.vq[0].last_avail_idx = dev.vq[0].shadow_avail_idx = 0;
    dev.vq[0].inuse = 0;
    e = vu_queue_pop(&dev, &dev.vq[0], sizeof(*e));
    g_assert_nonnull(e);
    g_assert_cmpuint(e->out_num, ==, 1);
    g_assert_cmpuint(e->in_num, ==, 1);
    g_assert_true(e->out_sg[0].iov_base == r.out);
    g_assert_null(e->in_sg[0].iov_base);
    g_assert_cmpuint(e->in_sg[0].iov_len, ==, 64);
    g_assert_nonnull(e->in_addr);
    g_assert_cmpuint(e->in_addr[0], ==, WINDOW_GPA);
    g_assert_cmpuint(e->out_addr[0], ==, GPA + offsetof(Ring, out));
    free(e);

    vu_deinit(&dev);
    close(sv[1]);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

#define ADD(path, fn, feat)                                             \
    g_test_add("/libvhost-user/shmem/" path, Fixture,                  \
               GSIZE_TO_POINTER(feat), setup, fn, teardown)

    ADD("map-unmap", test_map_unmap, ALL);
    ADD("unmap-nowait", test_unmap_nowait, ALL);
    ADD("cancel", test_cancel, ALL);
    ADD("features", test_features, F(SHMEM) | F(BACKEND_REQ));
    ADD("no-shmem", test_no_shmem, F(REPLY_ACK));
    ADD("mem-read", test_mem_read, ALL);
    ADD("mem-write", test_mem_write, ALL);
    g_test_add_func("/libvhost-user/unmapped-buffers", test_unmapped_buffers);
    return g_test_run();
}
