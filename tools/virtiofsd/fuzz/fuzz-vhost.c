/*
 * virtiofsd fuzzer: the vhost-user transport.  A hostile guest lays out
 * its virtqueue at will (descriptor chains, indirect tables, lengths and
 * addresses that point anywhere), and the daemon's queue processing
 * (vhost*.c over libvhost-user) pops and serves it.
 *
 * Each input is one session: the daemon's main loop (vfsd_vhost_serve())
 * runs in a thread on one end of a socketpair, this harness is the
 * front-end on the other, with 1 MiB of guest memory in a memfd at guest
 * physical GUEST_BASE (front-end virtual addresses are the same numbers).
 *
 *   byte 0     bits 0-2: the queue has 2 << n entries; bit 3: the
 *              request queue (clear: hiprio); bit 4: VIRTIO_RING_F_
 *              INDIRECT_DESC offered; bit 5: VIRTIO_RING_F_EVENT_IDX
 *   byte 1     how far the guest moves the avail index (it may claim
 *              more than the ring holds)
 *   then       the descriptor table (16 bytes each: addr, len, flags,
 *              next, little-endian), as much of it as the input has
 *   then       the avail ring's entries (u16 each), one per head
 *   then       the rest of guest memory from DATA_OFF: requests, reply
 *              buffers, indirect tables
 *
 * The session has had the INIT of a Linux 6.12 guest (as fuzz-request.c
 * sends it), so requests get past it.  After the kick the harness waits
 * until the daemon has used every head, or gave up on the device, or
 * stopped making progress (a request that waits for a lock), then ends
 * the session with a message libvhost-user refuses.
 *
 * Besides the sanitizers, the harness aborts on a used ring entry that
 * names a head the guest did not make available or claims more bytes
 * than that chain's device-writable descriptors hold, on a session that
 * does not end, and on fds the session leaves open.
 *
 * The scratch directory, the open guard and the fd counting are
 * fuzz-request.c's, included below with its libFuzzer entry points
 * renamed.
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

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "libvhost-user.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_ring.h"
#include "vhost.h"
#include "vu-frontend.h"

#define GUEST_BASE 0x100000ULL
#define GUEST_SIZE (1024 * 1024)
#define DESC_OFF 0x0
#define AVAIL_OFF 0x1000
#define USED_OFF 0x2000
#define DATA_OFF 0x4000
#define MAX_NUM 256
/* No progress for this long: a request waits (a lock), end the session */
#define IDLE_MS 100
#define END_MS 5000

typedef struct Session {
    VfsdFs fs;
    int sock;
    int served_fd;              /* eventfd: vfsd_vhost_serve() returned */
    int daemon_end;
} Session;

static void *serve_thread(void *opaque)
{
    Session *s = opaque;

    vfsd_vhost_serve(&s->fs, s->daemon_end);
    eventfd_write(s->served_fd, 1);
    return NULL;
}

/* A daemon that gave up on the device may have closed its end */
static void fe_check_sent(bool sent, const char *what)
{
    if (!sent && errno != EPIPE && errno != ECONNRESET) {
        fuzz_fail("%s: %s", what, strerror(errno));
    }
}

static uint16_t le16(const uint8_t *p)
{
    return p[0] | p[1] << 8;
}

/*
 * The bytes the device may write in the chain at @head, as the guest laid
 * it out in @mem, a copy from before the kick: the daemon's replies may
 * land on the tables themselves.  An upper bound: every writable entry of
 * every indirect table met counts, and the descriptor that refers to it.
 */
static uint64_t writable_room(const uint8_t *mem, unsigned int num,
                              uint16_t head)
{
    const struct vring_desc *desc = (const void *)(mem + DESC_OFF);
    uint64_t room = 0;
    unsigned int i = head, steps = 0;

    while (i < num && steps++ < num) {
        struct vring_desc d;

        memcpy(&d, &desc[i], sizeof(d));
        if (d.flags & VRING_DESC_F_INDIRECT) {
            uint64_t off = d.addr - GUEST_BASE;
            unsigned int n = d.len / sizeof(d), j;

            if (d.addr >= GUEST_BASE && off <= GUEST_SIZE &&
                d.len <= GUEST_SIZE - off) {
                for (j = 0; j < n; j++) {
                    struct vring_desc id;

                    memcpy(&id, mem + off + j * sizeof(id), sizeof(id));
                    if (id.flags & VRING_DESC_F_WRITE) {
                        room += id.len;
                    }
                }
            }
        }
        /* Counted whether or not the table above was followed */
        if (d.flags & VRING_DESC_F_WRITE) {
            room += d.len;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            break;
        }
        i = d.next;
    }
    return room;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    return fuzz_request_initialize(argc, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    VfsdOptions opts = { 0 };
    Session s = { 0 };
    unsigned int num, qidx, before, i, heads, used_seen = 0;
    uint64_t features;
    uint8_t *mem;
    g_autofree uint8_t *laid_out = NULL;
    int memfd, kick, call, sv[2], proc_fd;
    pthread_t thread;
    uint16_t avail_heads[MAX_NUM * 2];
    gint64 idle_since, end;
    size_t pos = 2, n;
    bool served = false;

    if (size < 2) {
        return 0;
    }
    num = 2u << (data[0] & 7);
    qidx = (data[0] & 8) ? 1 : 0;
    heads = data[1];

    before = session_start();

    /* Guest memory, laid out from the input */
    memfd = memfd_create("fuzz-vhost-guest", MFD_CLOEXEC);
    if (memfd < 0 || ftruncate(memfd, GUEST_SIZE) < 0) {
        fuzz_fail("memfd: %s", strerror(errno));
    }
    mem = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
               0);
    if (mem == MAP_FAILED) {
        fuzz_fail("mmap: %s", strerror(errno));
    }
    n = MIN(size - pos, (size_t)num * sizeof(struct vring_desc));
    memcpy(mem + DESC_OFF, data + pos, n);
    pos += n;
    for (i = 0; i < heads; i++) {
        uint16_t h = 0;

        if (pos + 2 <= size) {
            h = le16(data + pos);
            pos += 2;
        }
        avail_heads[i] = h;
        memcpy(mem + AVAIL_OFF + 4 + 2 * (i % num), &h, 2);
    }
    n = MIN(size - pos, (size_t)(GUEST_SIZE - DATA_OFF));
    memcpy(mem + DATA_OFF, data + pos, n);

    /* The daemon's side, as main.c sets it up */
    opts.fd = -1;
    opts.cache = VFSD_CACHE_AUTO;
    opts.sandbox = VFSD_SANDBOX_NONE;
    opts.xattr = true;
    opts.posix_lock = true;
    opts.flock = true;
    opts.dax_policy = VFSD_DAX_NEVER;
    proc_fd = fuzz_fs_init(&s.fs, &opts);
    in_session = true;
    send_guest_init(&s.fs);

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        fuzz_fail("socketpair: %s", strerror(errno));
    }
    s.sock = sv[0];
    s.daemon_end = sv[1];
    s.served_fd = eventfd(0, EFD_CLOEXEC);
    kick = eventfd(0, EFD_CLOEXEC);
    call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s.served_fd < 0 || kick < 0 || call < 0) {
        fuzz_fail("eventfd: %s", strerror(errno));
    }
    if (pthread_create(&thread, NULL, serve_thread, &s)) {
        fuzz_fail("cannot start the daemon's thread");
    }

    {
        const VuFeVring v = {
            .index = qidx,
            .num = num,
            .desc = GUEST_BASE + DESC_OFF,
            .avail = GUEST_BASE + AVAIL_OFF,
            .used = GUEST_BASE + USED_OFF,
            .call = call,
            .kick = kick,
        };

        /* No protocol features: the rings are enabled with the features */
        features = 1ULL << VIRTIO_F_VERSION_1;
        if (data[0] & 0x10) {
            features |= 1ULL << VIRTIO_RING_F_INDIRECT_DESC;
        }
        if (data[0] & 0x20) {
            features |= 1ULL << VIRTIO_RING_F_EVENT_IDX;
        }
        fe_check_sent(vu_fe_send(s.sock, VHOST_USER_SET_FEATURES, &features,
                                 sizeof(features), -1) &&
                      vu_fe_set_mem_table(s.sock, memfd, GUEST_BASE,
                                          GUEST_SIZE) &&
                      vu_fe_set_vring(s.sock, &v), "setting the device up");
    }
    /* Publish, then kick */
    laid_out = g_memdup2(mem, GUEST_SIZE);
    {
        uint16_t avail_idx = heads;

        __atomic_store_n((uint16_t *)(mem + AVAIL_OFF + 2), avail_idx,
                         __ATOMIC_RELEASE);
    }
    eventfd_write(kick, 1);

    /* Until every head is used, the device is given up, or no progress */
    idle_since = g_get_monotonic_time();
    end = idle_since + END_MS * 1000;
    for (;;) {
        struct pollfd pfd = { .fd = s.served_fd, .events = POLLIN };
        uint16_t used = __atomic_load_n((uint16_t *)(mem + USED_OFF + 2),
                                        __ATOMIC_ACQUIRE);
        gint64 now = g_get_monotonic_time();

        if (used != used_seen) {
            if ((uint16_t)(used - used_seen) > heads) {
                fuzz_fail("used index %u, only %u heads were available",
                          used, heads);
            }
            for (; used_seen != used; used_seen++) {
                const struct vring_used_elem *u =
                    (const void *)(mem + USED_OFF + 4 +
                                   (used_seen % num) * 8);
                uint32_t id, len;
                unsigned int j;
                bool known = false;

                memcpy(&id, &u->id, 4);
                memcpy(&len, &u->len, 4);
                for (j = 0; j < heads && !known; j++) {
                    known = avail_heads[j] == id;
                }
                if (!known) {
                    fuzz_fail("used head %u was never made available", id);
                }
                if (len > writable_room(laid_out, num, id)) {
                    fuzz_fail("used head %u claims %u bytes written, its "
                              "chain has room for %" G_GUINT64_FORMAT, id,
                              len, writable_room(laid_out, num, id));
                }
            }
            idle_since = now;
        }
        if (used_seen == heads % 65536 && heads) {
            break;
        }
        if (poll(&pfd, 1, 1) == 1) {
            served = true;
            break;
        }
        if (now - idle_since > IDLE_MS * 1000) {
            break;
        }
        if (now > end) {
            fuzz_fail("the queue kept the daemon busy for %d ms", END_MS);
        }
    }

    /* What a seed reached, for whoever checks the corpus still does */
    if (g_getenv("FUZZ_VHOST_VERBOSE")) {
        fprintf(stderr, "fuzz-vhost: %u of %u heads used%s\n", used_seen,
                heads, served ? ", the daemon gave the device up" : "");
    }

    /* The end: libvhost-user refuses an oversized message */
    if (!served) {
        static uint8_t junk[sizeof(VhostUserMsg)];

        fe_check_sent(vu_fe_send(s.sock, VHOST_USER_GET_FEATURES, junk,
                                 sizeof(junk), -1), "ending the session");
    }
    {
        struct pollfd pfd = { .fd = s.served_fd, .events = POLLIN };

        if (poll(&pfd, 1, END_MS) != 1) {
            fuzz_fail("the session did not end within %d ms", END_MS);
        }
    }
    pthread_join(thread, NULL);
    in_session = false;
    check_sentinel();
    vfsd_fs_cleanup(&s.fs);
    close(proc_fd);
    close(sv[0]);
    close(sv[1]);
    close(s.served_fd);
    close(kick);
    close(call);
    munmap(mem, GUEST_SIZE);
    close(memfd);
    session_done(before);
    return 0;
}
