/*
 * QTest for vhost-user-fs and its DAX cache window
 *
 * The test plays the vhost-user back-end itself: a thread answers QEMU's
 * front-end requests on the vhost-user socket, and the test body sends
 * back-end requests (SHMEM_MAP, SHMEM_UNMAP, MEM_READ, MEM_WRITE) on the
 * back-end channel and checks what the guest sees through the BAR.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <poll.h>
#include "qemu/cutils.h"
#include "qemu/units.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "libqos/libqos-pc.h"
#include "libqos/pci-pc.h"
#include "libqos/vhost-user-fs.h"
#include "standard-headers/linux/pci_regs.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_pci.h"

/* vhost-user protocol, front-end requests */
enum {
    VU_GET_FEATURES = 1,
    VU_SET_FEATURES = 2,
    VU_SET_MEM_TABLE = 5,
    VU_SET_VRING_KICK = 12,
    VU_SET_VRING_CALL = 13,
    VU_SET_VRING_ERR = 14,
    VU_GET_VRING_BASE = 11,
    VU_GET_PROTOCOL_FEATURES = 15,
    VU_SET_PROTOCOL_FEATURES = 16,
    VU_GET_QUEUE_NUM = 17,
    VU_SET_VRING_ENABLE = 18,
    VU_SET_BACKEND_REQ_FD = 21,
    VU_GET_SHMEM_CONFIG = 44,
};

/* back-end requests */
enum {
    VU_BACKEND_SHMEM_MAP = 9,
    VU_BACKEND_SHMEM_UNMAP = 10,
    VU_BACKEND_MEM_READ = 11,
    VU_BACKEND_MEM_WRITE = 12,
};

#define VU_VERSION 0x1
#define VU_REPLY_MASK (1u << 2)
#define VU_NEED_REPLY_MASK (1u << 3)
#define VU_F_PROTOCOL_FEATURES 30
#define VU_F_LOG_ALL 26

#define VU_PF_MQ 0
#define VU_PF_LOG_SHMFD 1
#define VU_PF_REPLY_ACK 3
#define VU_PF_BACKEND_REQ 5
#define VU_PF_BACKEND_SEND_FD 10
#define VU_PF_SHMEM 22
#define VU_PF_SHMEM_REPLACE 40
#define VU_PF_MEM_RW 41
#define VU_PF_DEVICE_STATE 19
#define VU_PF_SHMEM_MIGRATE 42
#define VU_SHM_FEATURES ((1ULL << VU_PF_SHMEM) | \
                         (1ULL << VU_PF_SHMEM_REPLACE) | \
                         (1ULL << VU_PF_MEM_RW))
#define VU_BASE_FEATURES ((1ULL << VU_PF_MQ) | (1ULL << VU_PF_REPLY_ACK) | \
                          (1ULL << VU_PF_BACKEND_REQ) | \
                          (1ULL << VU_PF_BACKEND_SEND_FD))

#define VU_MAP_RW (1ULL << 0)
#define VU_MAP_REPLACE (1ULL << 1)
#define VU_MEM_RW_MAX 65536

#define MAX_QUEUES 16
#define MAX_REGIONS 8
#define PAGE 4096
#define TWO_MB (2 * MiB)
#define STOP_PATTERN 0x5707c0a75707c0a7ULL
/* Enough for a Linux guest's page structures of a 16 GiB window */
#define RAM_SIZE (1 * GiB)
#define FS_DEVFN QPCI_DEVFN(4, 0)
/* Where the test puts BAR 2: far above RAM, aligned for any window size */
#define CACHE_BAR_ADDR (512 * GiB)
#define TIMEOUT_MS 10000

typedef struct QEMU_PACKED VuHeader {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
} VuHeader;

typedef struct VuMemRegion {
    uint64_t guest_phys_addr;
    uint64_t memory_size;
    uint64_t userspace_addr;
    uint64_t mmap_offset;
} VuMemRegion;

typedef struct VuMMap {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
    uint64_t flags;
} VuMMap;

typedef struct VuMemRW {
    uint64_t guest_address;
    uint32_t size;
    uint32_t status;
} VuMemRW;

/* The in-test back-end: a thread serving the front-end's requests */
typedef struct TestBackend {
    char *dir;
    char *sock_path;
    int listen_fd;
    int conn_fd;
    GThread *thread;
    uint64_t offered_protocol_features;

    /* Accept a new connection after each one ends (chardev reconnect-ms) */
    bool reconnect;

    GMutex lock;
    GCond cond;
    /* Protected by lock */
    /* Connections that ended so far */
    unsigned int connections_closed;
    /* Answer GET_FEATURES with a malformed reply (see BadReply) */
    int bad_reply;
    /*
     * Once: break the back-end channel before answering the
     * SET_BACKEND_REQ_FD that brought it, then fail that request
     * (test_backend_channel_breaks_in_wait)
     */
    bool break_channel;
    /*
     * The DAX window's size that GET_SHMEM_CONFIG answers (0: none, the
     * device sizes it), and how often the front-end asked
     */
    uint64_t shmem_config_size;
    unsigned int shmem_config_asks;
    uint64_t acked_features;
    uint64_t acked_protocol_features;
    /*
     * A back-end request to send, and wait for the reply to, before
     * answering the next GET_VRING_BASE (see BackendStopRequest)
     */
    int stop_request;
    int stop_map_fd;
    uint64_t stop_gpa;
    uint64_t stop_result;
    bool protocol_features_set;
    /*
     * Rings the current connection enabled: the front-end enables them
     * last when it starts the device, after creating its notifiers.
     */
    unsigned int vrings_enabled;
    int backend_req_fd;
    int kick_fd[MAX_QUEUES];
    unsigned int mem_tables;
    unsigned int nregions;
    VuMemRegion regions[MAX_REGIONS];
} TestBackend;

typedef struct TestCtx {
    TestBackend *be;
    QOSState *qs;
    QTestState *qts;
    QVhostUserFSPCI *fs;
    QVirtQueue *vq[MAX_QUEUES];
    unsigned int nvqs;
} TestCtx;

static void be_reply(int fd, VuHeader *hdr, const void *payload,
                     uint32_t size)
{
    VuHeader r = {
        .request = hdr->request,
        .flags = VU_VERSION | VU_REPLY_MASK,
        .size = size,
    };
    struct iovec iov[2] = {
        { .iov_base = &r, .iov_len = sizeof(r) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    ssize_t n = writev(fd, iov, 2);

    g_assert_cmpint(n, ==, sizeof(r) + size);
}

static void be_reply_u64(int fd, VuHeader *hdr, uint64_t val)
{
    be_reply(fd, hdr, &val, sizeof(val));
}

static bool read_all(int fd, void *buf, size_t len)
{
    while (len) {
        ssize_t n = read(fd, buf, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        buf = (char *)buf + n;
        len -= n;
    }
    return true;
}

/* Read one message; returns false on EOF. */
static bool recv_msg(int fd, VuHeader *hdr, void *payload, size_t max,
                     int *fds, size_t *nfds)
{
    char control[CMSG_SPACE(8 * sizeof(int))];
    struct iovec iov = { .iov_base = hdr, .iov_len = sizeof(*hdr) };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control,
        .msg_controllen = sizeof(control),
    };
    struct cmsghdr *cmsg;
    ssize_t n;

    *nfds = 0;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        return false;
    }
    g_assert_cmpint(n, ==, sizeof(*hdr));
    for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
            size_t len = cmsg->cmsg_len - CMSG_LEN(0);

            memcpy(fds, CMSG_DATA(cmsg), len);
            *nfds = len / sizeof(int);
        }
    }
    g_assert_cmpuint(hdr->size, <=, max);
    return read_all(fd, payload, hdr->size);
}

/* Replies a broken back-end could send to the front-end */
enum {
    BAD_REPLY_NONE,
    BAD_REPLY_SHORT,            /* 4 bytes where 8 belong */
    BAD_REPLY_LONG,             /* more than the largest payload */
    BAD_REPLY_WRONG_REQUEST,    /* the reply to another request */
    BAD_REPLY_NO_REPLY_FLAG,
    BAD_REPLY_WITH_FDS,         /* file descriptors nobody asked for */
    BAD_REPLY_MAX
};

static void be_bad_reply(TestBackend *be, VuHeader *hdr)
{
    int fd = be->conn_fd;
    uint64_t u64 = 1ULL << VIRTIO_F_VERSION_1;
    VuHeader r = {
        .request = hdr->request,
        .flags = VU_VERSION | VU_REPLY_MASK,
        .size = sizeof(u64),
    };
    struct iovec iov[2] = {
        { .iov_base = &r, .iov_len = sizeof(r) },
        { .iov_base = &u64, .iov_len = sizeof(u64) },
    };
    char control[CMSG_SPACE(2 * sizeof(int))] = { };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
    int fds[2] = { -1, -1 };
    ssize_t n;

    switch (be->bad_reply) {
    case BAD_REPLY_SHORT:
        r.size = iov[1].iov_len = 4;
        break;
    case BAD_REPLY_LONG:
        /* A header only: QEMU must give up before reading 1 MiB */
        r.size = MiB;
        msg.msg_iovlen = 1;
        break;
    case BAD_REPLY_WRONG_REQUEST:
        r.request = VU_GET_PROTOCOL_FEATURES;
        break;
    case BAD_REPLY_NO_REPLY_FLAG:
        r.flags = VU_VERSION;
        break;
    case BAD_REPLY_WITH_FDS: {
        struct cmsghdr *cmsg;

        fds[0] = memfd_create("vuf-bad-reply", MFD_CLOEXEC);
        fds[1] = dup(fds[0]);
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
        break;
    }
    default:
        g_assert_not_reached();
    }
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    g_assert_cmpint(n, >, 0);
    if (fds[0] >= 0) {
        close(fds[0]);
        close(fds[1]);
    }
}

/*
 * Back-end requests a daemon may have outstanding when the front-end
 * stops the device: it cannot stop a queue before the request in flight
 * there is done, and that may need the answer to a SHMEM_MAP or
 * MEM_WRITE first (FUSE_SETUPMAPPING, a reply into a buffer in the window).
 */
enum BackendStopRequest {
    STOP_REQUEST_NONE,
    STOP_REQUEST_MAP,
    STOP_REQUEST_MEM_WRITE,
    STOP_REQUEST_UNMAP,
};

static uint64_t shmem_map(TestBackend *be, int fd, uint64_t fd_offset,
                          uint64_t shm_offset, uint64_t len, uint64_t flags);
static uint64_t shmem_unmap(TestBackend *be, uint64_t shm_offset,
                            uint64_t len);
static uint64_t mem_write(TestBackend *be, uint64_t addr, const void *data,
                          uint32_t size);

/*
 * Called with be->lock held, which the requests take to find the back-end
 * channel: drop it meanwhile.
 */
static void be_stop_request(TestBackend *be)
{
    uint64_t pattern = STOP_PATTERN;
    int request = be->stop_request;
    uint64_t r = 0;

    be->stop_request = STOP_REQUEST_NONE;
    g_mutex_unlock(&be->lock);
    switch (request) {
    case STOP_REQUEST_MAP:
        r = shmem_map(be, be->stop_map_fd, 0, 0, TWO_MB, VU_MAP_RW);
        break;
    case STOP_REQUEST_MEM_WRITE:
        r = mem_write(be, be->stop_gpa, &pattern, sizeof(pattern));
        break;
    case STOP_REQUEST_UNMAP:
        r = shmem_unmap(be, 0, TWO_MB);
        break;
    default:
        g_assert_not_reached();
    }
    g_mutex_lock(&be->lock);
    be->stop_result = r;
}

/*
 * A request QEMU serves while it waits for a front-end reply, and that
 * makes it close the channel: a map whose payload size is absurd.  Wait
 * until it has, so that the failed reply comes after.
 */
static void be_break_channel(int fd)
{
    VuHeader bad = {
        .request = VU_BACKEND_SHMEM_MAP,
        .flags = VU_VERSION,
        .size = UINT32_MAX,
    };
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    char c;

    g_assert_cmpint(write(fd, &bad, sizeof(bad)), ==, sizeof(bad));
    g_assert_cmpint(poll(&pfd, 1, TIMEOUT_MS), ==, 1);
    g_assert_cmpint(read(fd, &c, 1), ==, 0);
}

static void be_handle(TestBackend *be, VuHeader *hdr, uint8_t *payload,
                      int *fds, size_t nfds)
{
    uint64_t u64 = 0;
    bool replied = false;
    size_t i;

    memcpy(&u64, payload, MIN(hdr->size, sizeof(u64)));

    g_mutex_lock(&be->lock);
    switch (hdr->request) {
    case VU_GET_FEATURES:
        if (be->bad_reply) {
            be_bad_reply(be, hdr);
            replied = true;
            break;
        }
        be_reply_u64(be->conn_fd, hdr, (1ULL << VIRTIO_F_VERSION_1) |
                     (1ULL << VU_F_PROTOCOL_FEATURES) |
                     (1ULL << VU_F_LOG_ALL));
        replied = true;
        break;
    case VU_SET_FEATURES:
        be->acked_features = u64;
        break;
    case VU_GET_PROTOCOL_FEATURES:
        be_reply_u64(be->conn_fd, hdr, be->offered_protocol_features);
        replied = true;
        break;
    case VU_SET_PROTOCOL_FEATURES:
        be->acked_protocol_features = u64;
        be->protocol_features_set = true;
        break;
    case VU_GET_QUEUE_NUM:
        be_reply_u64(be->conn_fd, hdr, MAX_QUEUES);
        replied = true;
        break;
    case VU_GET_SHMEM_CONFIG: {
        struct {
            uint32_t nregions;
            uint32_t padding;
            uint64_t memory_sizes[256];
        } cfg = {
            .nregions = be->shmem_config_size ? 1 : 0,
            .memory_sizes[0] = be->shmem_config_size,
        };

        be->shmem_config_asks++;
        be_reply(be->conn_fd, hdr, &cfg, sizeof(cfg));
        replied = true;
        break;
    }
    case VU_GET_VRING_BASE: {
        uint32_t state[2] = { (uint32_t)u64, 0 };

        if (be->stop_request != STOP_REQUEST_NONE) {
            be_stop_request(be);
        }
        be_reply(be->conn_fd, hdr, state, sizeof(state));
        replied = true;
        break;
    }
    case VU_SET_MEM_TABLE: {
        uint32_t n;

        memcpy(&n, payload, sizeof(n));
        g_assert_cmpuint(n, <=, MAX_REGIONS);
        be->nregions = n;
        memcpy(be->regions, payload + 8, n * sizeof(VuMemRegion));
        be->mem_tables++;
        break;
    }
    case VU_SET_VRING_KICK: {
        unsigned int idx = u64 & 0xff;

        g_assert_cmpuint(idx, <, MAX_QUEUES);
        if (be->kick_fd[idx] >= 0) {
            close(be->kick_fd[idx]);
            be->kick_fd[idx] = -1;
        }
        if (nfds) {
            be->kick_fd[idx] = fds[0];
            nfds = 0;
        }
        break;
    }
    case VU_SET_VRING_ENABLE:
        if (u64 >> 32) {
            be->vrings_enabled++;
        }
        break;
    case VU_SET_BACKEND_REQ_FD:
        g_assert_cmpuint(nfds, ==, 1);
        if (be->break_channel) {
            be->break_channel = false;
            be_break_channel(fds[0]);
            be_reply_u64(be->conn_fd, hdr, 1);
            replied = true;
            break;
        }
        be->backend_req_fd = fds[0];
        nfds = 0;
        break;
    default:
        break;
    }
    if ((hdr->flags & VU_NEED_REPLY_MASK) && !replied) {
        be_reply_u64(be->conn_fd, hdr, 0);
    }
    g_cond_broadcast(&be->cond);
    g_mutex_unlock(&be->lock);

    for (i = 0; i < nfds; i++) {
        close(fds[i]);
    }
}

static gpointer be_thread(gpointer opaque)
{
    TestBackend *be = opaque;
    g_autofree uint8_t *payload = g_malloc(4096);
    VuHeader hdr;
    int fds[8];
    size_t nfds;

    do {
        int fd = accept(be->listen_fd, NULL, NULL);

        if (fd < 0) {
            break;
        }
        g_mutex_lock(&be->lock);
        be->conn_fd = fd;
        be->vrings_enabled = 0;
        g_mutex_unlock(&be->lock);
        while (recv_msg(fd, &hdr, payload, 4096, fds, &nfds)) {
            be_handle(be, &hdr, payload, fds, nfds);
        }
        g_mutex_lock(&be->lock);
        if (!be->reconnect) {
            g_mutex_unlock(&be->lock);
            break;
        }
        g_mutex_unlock(&be->lock);
        /* As a back-end that died and was started again */
        g_mutex_lock(&be->lock);
        close(be->conn_fd);
        be->conn_fd = -1;
        if (be->backend_req_fd >= 0) {
            close(be->backend_req_fd);
            be->backend_req_fd = -1;
        }
        be->connections_closed++;
        g_cond_broadcast(&be->cond);
        g_mutex_unlock(&be->lock);
    } while (true);
    return NULL;
}

/*
 * What the next be_new()'s GET_SHMEM_CONFIG answers: it must be set
 * before QEMU connects, which setup() does right after be_new().
 */
static uint64_t next_shmem_config_size;

static TestBackend *be_new(uint64_t protocol_features)
{
    TestBackend *be = g_new0(TestBackend, 1);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    int i;

    be->dir = g_dir_make_tmp("vhost-user-fs-test-XXXXXX", NULL);
    g_assert(be->dir);
    be->sock_path = g_strdup_printf("%s/vhost.sock", be->dir);
    be->offered_protocol_features = protocol_features;
    be->shmem_config_size = next_shmem_config_size;
    be->backend_req_fd = -1;
    be->conn_fd = -1;
    for (i = 0; i < MAX_QUEUES; i++) {
        be->kick_fd[i] = -1;
    }
    g_mutex_init(&be->lock);
    g_cond_init(&be->cond);

    be->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(be->listen_fd, >=, 0);
    g_strlcpy(addr.sun_path, be->sock_path, sizeof(addr.sun_path));
    g_assert_cmpint(bind(be->listen_fd, (struct sockaddr *)&addr,
                         sizeof(addr)), ==, 0);
    g_assert_cmpint(listen(be->listen_fd, 1), ==, 0);
    be->thread = g_thread_new("vhost-user-fs-backend", be_thread, be);
    return be;
}

/* Close the back-end's sockets as a dying back-end would. */
static void be_disconnect(TestBackend *be)
{
    g_mutex_lock(&be->lock);
    if (be->backend_req_fd >= 0) {
        close(be->backend_req_fd);
        be->backend_req_fd = -1;
    }
    if (be->conn_fd >= 0) {
        shutdown(be->conn_fd, SHUT_RDWR);
    }
    g_mutex_unlock(&be->lock);
}

static void be_free(TestBackend *be)
{
    int i;

    be_disconnect(be);
    shutdown(be->listen_fd, SHUT_RDWR);
    g_thread_join(be->thread);
    close(be->listen_fd);
    if (be->conn_fd >= 0) {
        close(be->conn_fd);
    }
    for (i = 0; i < MAX_QUEUES; i++) {
        if (be->kick_fd[i] >= 0) {
            close(be->kick_fd[i]);
        }
    }
    unlink(be->sock_path);
    rmdir(be->dir);
    g_free(be->sock_path);
    g_free(be->dir);
    g_mutex_clear(&be->lock);
    g_cond_clear(&be->cond);
    g_free(be);
}

static int be_req_fd(TestBackend *be)
{
    int fd;

    g_mutex_lock(&be->lock);
    fd = be->backend_req_fd;
    g_mutex_unlock(&be->lock);
    g_assert_cmpint(fd, >=, 0);
    return fd;
}

/* Send a back-end request with optional fds and extra data. */
static void be_send(TestBackend *be, uint32_t request, bool need_reply,
                    const void *payload, uint32_t size,
                    const void *data, uint32_t data_size,
                    const int *fds, size_t nfds)
{
    int fd = be_req_fd(be);
    VuHeader hdr = {
        .request = request,
        .flags = VU_VERSION | (need_reply ? VU_NEED_REPLY_MASK : 0),
        .size = size + data_size,
    };
    struct iovec iov[3] = {
        { .iov_base = &hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
        { .iov_base = (void *)data, .iov_len = data_size },
    };
    char control[CMSG_SPACE(8 * sizeof(int))] = { };
    struct msghdr msg = {
        .msg_iov = iov,
        .msg_iovlen = 3,
    };
    ssize_t n;

    if (nfds) {
        struct cmsghdr *cmsg;

        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, nfds * sizeof(int));
    }
    n = sendmsg(fd, &msg, 0);
    g_assert_cmpint(n, ==, sizeof(hdr) + size + data_size);
}

static void be_recv_reply(TestBackend *be, uint32_t request, void *payload,
                          uint32_t max, uint32_t *size)
{
    int fd = be_req_fd(be);
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    VuHeader hdr;
    int fds[8];
    size_t nfds;

    g_assert_cmpint(poll(&pfd, 1, TIMEOUT_MS), ==, 1);
    g_assert_true(recv_msg(fd, &hdr, payload, max, fds, &nfds));
    g_assert_cmpuint(nfds, ==, 0);
    g_assert_cmpuint(hdr.request, ==, request);
    g_assert_cmphex(hdr.flags, ==, VU_VERSION | VU_REPLY_MASK);
    *size = hdr.size;
}

static uint64_t be_recv_u64(TestBackend *be, uint32_t request)
{
    uint64_t val = 0;
    uint32_t size;

    be_recv_reply(be, request, &val, sizeof(val), &size);
    g_assert_cmpuint(size, ==, sizeof(val));
    return val;
}

static uint64_t shmem_map_full(TestBackend *be, uint8_t shmid, int fd,
                               uint64_t fd_offset, uint64_t shm_offset,
                               uint64_t len, uint64_t flags)
{
    VuMMap m = {
        .shmid = shmid,
        .fd_offset = fd_offset,
        .shm_offset = shm_offset,
        .len = len,
        .flags = flags,
    };

    be_send(be, VU_BACKEND_SHMEM_MAP, true, &m, sizeof(m), NULL, 0,
            &fd, fd >= 0 ? 1 : 0);
    return be_recv_u64(be, VU_BACKEND_SHMEM_MAP);
}

static uint64_t shmem_map(TestBackend *be, int fd, uint64_t fd_offset,
                          uint64_t shm_offset, uint64_t len, uint64_t flags)
{
    return shmem_map_full(be, 0, fd, fd_offset, shm_offset, len, flags);
}

static uint64_t shmem_unmap_full(TestBackend *be, uint8_t shmid,
                                 uint64_t shm_offset, uint64_t len, int fd)
{
    VuMMap m = {
        .shmid = shmid,
        .shm_offset = shm_offset,
        .len = len,
    };

    be_send(be, VU_BACKEND_SHMEM_UNMAP, true, &m, sizeof(m), NULL, 0,
            &fd, fd >= 0 ? 1 : 0);
    return be_recv_u64(be, VU_BACKEND_SHMEM_UNMAP);
}

static uint64_t shmem_unmap(TestBackend *be, uint64_t shm_offset,
                            uint64_t len)
{
    return shmem_unmap_full(be, 0, shm_offset, len, -1);
}

static uint64_t mem_write(TestBackend *be, uint64_t addr, const void *data,
                          uint32_t size)
{
    VuMemRW rw = { .guest_address = addr, .size = size };

    be_send(be, VU_BACKEND_MEM_WRITE, true, &rw, sizeof(rw), data, size,
            NULL, 0);
    return be_recv_u64(be, VU_BACKEND_MEM_WRITE);
}

/* Returns the status; on success @buf holds @size bytes. */
static uint32_t mem_read(TestBackend *be, uint64_t addr, void *buf,
                         uint32_t size)
{
    VuMemRW rw = { .guest_address = addr, .size = size };
    g_autofree uint8_t *reply = g_malloc(sizeof(rw) + VU_MEM_RW_MAX);
    uint32_t reply_size;

    be_send(be, VU_BACKEND_MEM_READ, false, &rw, sizeof(rw), NULL, 0,
            NULL, 0);
    be_recv_reply(be, VU_BACKEND_MEM_READ, reply,
                  sizeof(rw) + VU_MEM_RW_MAX, &reply_size);
    g_assert_cmpuint(reply_size, >=, sizeof(rw));
    memcpy(&rw, reply, sizeof(rw));
    if (rw.status) {
        g_assert_cmpuint(rw.size, ==, 0);
        g_assert_cmpuint(reply_size, ==, sizeof(rw));
        return rw.status;
    }
    g_assert_cmpuint(rw.size, ==, size);
    g_assert_cmpuint(reply_size, ==, sizeof(rw) + size);
    memcpy(buf, reply + sizeof(rw), size);
    return 0;
}

/* A memfd of @size bytes whose every 64-bit word holds @seed ^ offset */
static int make_file(const char *name, uint64_t size, uint64_t seed)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    g_autofree uint64_t *buf = g_malloc(TWO_MB);
    uint64_t off, i;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    for (off = 0; off < size; off += TWO_MB) {
        uint64_t n = MIN(TWO_MB, size - off);

        for (i = 0; i < n / 8; i++) {
            buf[i] = seed ^ (off + i * 8);
        }
        g_assert_cmpint(pwrite(fd, buf, n, off), ==, n);
    }
    return fd;
}

static uint64_t file_word(uint64_t seed, uint64_t file_offset)
{
    return seed ^ file_offset;
}

static uint64_t bar_readq(TestCtx *t, uint64_t offset)
{
    return qtest_readq(t->qts, CACHE_BAR_ADDR + offset);
}

/* How many mappings of memfd @name QEMU has */
static unsigned int count_maps(TestCtx *t, const char *name)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/maps",
                                            qtest_pid(t->qts));
    g_autofree char *pattern = g_strdup_printf("/memfd:%s ", name);
    g_autofree char *maps = NULL;
    unsigned int n = 0;
    char *p;

    g_assert_true(g_file_get_contents(path, &maps, NULL, NULL));
    for (p = strstr(maps, pattern); p; p = strstr(p + 1, pattern)) {
        n++;
    }
    return n;
}

/* How many file descriptors QEMU has open */
static unsigned int count_fds(TestCtx *t)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/fd", qtest_pid(t->qts));
    GDir *dir = g_dir_open(path, 0, NULL);
    unsigned int n = 0;

    g_assert_nonnull(dir);
    while (g_dir_read_name(dir)) {
        n++;
    }
    g_dir_close(dir);
    return n;
}

static void wait_no_maps(TestCtx *t, const char *name)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    while (count_maps(t, name)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        /* A qtest round trip lets QEMU's main loop run. */
        qtest_readb(t->qts, 0);
        g_usleep(10 * 1000);
    }
}

static void setup_machine(TestCtx *t, const char *machine,
                          const char *cache_size,
                          unsigned int nr_request_queues,
                          uint64_t protocol_features, bool reconnect,
                          const char *extra)
{
    g_autofree char *cache_opt = cache_size ?
        g_strdup_printf(",cache-size=%s", cache_size) : g_strdup("");
    QPCIAddress addr = { .devfn = FS_DEVFN };
    QVirtioDevice *vdev;
    uint64_t features;
    unsigned int i;

    memset(t, 0, sizeof(*t));
    t->be = be_new(protocol_features);
    t->be->reconnect = reconnect;
    t->qs = qtest_pc_boot("-machine %s -m %" PRIu64 "M -nodefaults "
                          "-object memory-backend-memfd,id=mem,"
                          "size=%" PRIu64 "M,share=on -numa node,memdev=mem "
                          "-chardev socket,id=vuf,path=%s%s "
                          "-device vhost-user-fs-pci,chardev=vuf,tag=myfs,"
                          "num-request-queues=%u,addr=04.0%s%s",
                          machine, RAM_SIZE / MiB, RAM_SIZE / MiB,
                          t->be->sock_path,
                          reconnect ? ",reconnect-ms=100" : "",
                          nr_request_queues, cache_opt,
                          extra ? extra : "");
    t->qts = t->qs->qts;
    t->nvqs = 1 + nr_request_queues;
    t->fs = qvhost_user_fs_pci_new(t->qs->pcibus, &addr);
    g_assert_nonnull(t->fs);
    vdev = t->fs->fs.vdev;

    qvhost_user_fs_pci_place_cache_bar(t->fs, CACHE_BAR_ADDR);

    qvirtio_pci_device_enable(&t->fs->pci_vdev);
    qvirtio_start_device(vdev);
    features = qvirtio_get_features(vdev);
    g_assert_true(features & (1ULL << VIRTIO_F_VERSION_1));
    qvirtio_set_features(vdev, 1ULL << VIRTIO_F_VERSION_1);
    for (i = 0; i < t->nvqs; i++) {
        t->vq[i] = qvirtqueue_setup(vdev, &t->qs->alloc, i);
    }
    qvirtio_set_driver_ok(vdev);

    /* The back-end channel exists once vhost_dev_init() is done. */
    g_mutex_lock(&t->be->lock);
    while (t->be->backend_req_fd < 0) {
        g_assert_true(g_cond_wait_until(&t->be->cond, &t->be->lock,
                                        g_get_monotonic_time() +
                                        TIMEOUT_MS * 1000));
    }
    g_mutex_unlock(&t->be->lock);
}

static void setup_full(TestCtx *t, const char *cache_size,
                       unsigned int nr_request_queues,
                       uint64_t protocol_features, const char *extra)
{
    setup_machine(t, "pc", cache_size, nr_request_queues, protocol_features,
                  false, extra);
}

static void setup(TestCtx *t, const char *cache_size)
{
    setup_full(t, cache_size, 1, VU_BASE_FEATURES | VU_SHM_FEATURES, NULL);
}

static void teardown(TestCtx *t)
{
    unsigned int i;

    for (i = 0; i < t->nvqs; i++) {
        qvirtqueue_cleanup(t->fs->fs.vdev->bus, t->vq[i], &t->qs->alloc);
    }
    qvhost_user_fs_pci_free(t->fs);
    qtest_shutdown(t->qs);
    be_free(t->be);
}

/* Exchanging a request with QEMU proves it is still serving us. */
static void assert_alive(TestCtx *t)
{
    int fd = make_file("vuf-alive", TWO_MB, 7);

    g_assert_cmpuint(shmem_map(t->be, fd, 0, 0, TWO_MB, 0), ==, 0);
    g_assert_cmphex(bar_readq(t, 8), ==, file_word(7, 8));
    g_assert_cmpuint(shmem_unmap(t->be, 0, TWO_MB), ==, 0);
    close(fd);
}

/*
 * Device basics: config space, negotiated features, queues
 */

static void test_config_and_queues(void)
{
    char tag[QVIRTIO_FS_TAG_LEN + 1];
    uint64_t acked;
    TestCtx t;
    unsigned int i;

    setup_full(&t, "64M", 3, VU_BASE_FEATURES | VU_SHM_FEATURES, NULL);

    qvhost_user_fs_get_tag(&t.fs->fs, tag);
    g_assert_cmpstr(tag, ==, "myfs");
    g_assert_cmpuint(qvhost_user_fs_get_num_request_queues(&t.fs->fs), ==, 3);

    g_mutex_lock(&t.be->lock);
    acked = t.be->acked_protocol_features;
    g_assert_true(t.be->protocol_features_set);
    g_assert_true(t.be->acked_features & (1ULL << VIRTIO_F_VERSION_1));
    g_assert_true(t.be->acked_features & (1ULL << VU_F_PROTOCOL_FEATURES));
    g_mutex_unlock(&t.be->lock);
    g_assert_cmphex(acked, ==, VU_BASE_FEATURES | VU_SHM_FEATURES);

    /* hiprio and three request queues, each kicked through to us */
    for (i = 0; i < t.nvqs; i++) {
        uint64_t req = guest_alloc(&t.qs->alloc, 64);
        struct pollfd pfd = { .events = POLLIN };
        uint64_t cnt;
        uint32_t head;

        g_mutex_lock(&t.be->lock);
        pfd.fd = t.be->kick_fd[i];
        g_mutex_unlock(&t.be->lock);
        g_assert_cmpint(pfd.fd, >=, 0);

        head = qvirtqueue_add(t.qts, t.vq[i], req, 64, false, false);
        qvirtqueue_kick(t.qts, t.fs->fs.vdev, t.vq[i], head);
        g_assert_cmpint(poll(&pfd, 1, TIMEOUT_MS), ==, 1);
        g_assert_cmpint(read(pfd.fd, &cnt, sizeof(cnt)), ==, sizeof(cnt));
        g_assert_cmpuint(cnt, >=, 1);
        guest_free(&t.qs->alloc, req);
    }
    teardown(&t);
}

static void test_no_cache(void)
{
    uint8_t bar;
    uint64_t offset, length;
    int fd = make_file("vuf-nocache", TWO_MB, 1);
    TestCtx t;

    setup_full(&t, NULL, 1, VU_BASE_FEATURES | VU_SHM_FEATURES, NULL);

    /* Exactly upstream's device: no window, no shared memory features */
    g_mutex_lock(&t.be->lock);
    g_assert_cmphex(t.be->acked_protocol_features, ==, VU_BASE_FEATURES);
    g_assert_cmpuint(t.be->shmem_config_asks, ==, 0);
    g_mutex_unlock(&t.be->lock);
    g_assert_cmpuint(qvirtio_pci_find_shm_cap(&t.fs->pci_vdev, 0, &bar,
                                              &offset, &length), ==, 0);
    qpci_config_writel(t.fs->pci_vdev.pdev, PCI_BASE_ADDRESS_2, 0xffffffff);
    g_assert_cmphex(qpci_config_readl(t.fs->pci_vdev.pdev,
                                      PCI_BASE_ADDRESS_2), ==, 0);

    /* ...and it refuses shared memory requests. */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, 0), ==, EINVAL);
    g_assert_cmpuint(count_maps(&t, "vuf-nocache"), ==, 0);
    close(fd);
    teardown(&t);
}

/*
 * The window as the guest sees it
 */

static void test_window_bar_and_cap(void)
{
    QPCIDevice *pdev;
    uint64_t offset, length, mask;
    uint32_t lo, hi;
    uint8_t bar;
    TestCtx t;

    setup(&t, "16G");
    pdev = t.fs->pci_vdev.pdev;

    g_assert_cmpuint(qvirtio_pci_find_shm_cap(&t.fs->pci_vdev, 0, &bar,
                                              &offset, &length), !=, 0);
    g_assert_cmpuint(bar, ==, 2);
    g_assert_cmpuint(offset, ==, 0);
    g_assert_cmpuint(length, ==, 16 * GiB);

    lo = qpci_config_readl(pdev, PCI_BASE_ADDRESS_2);
    g_assert_cmphex(lo & 0xf, ==, PCI_BASE_ADDRESS_SPACE_MEMORY |
                    PCI_BASE_ADDRESS_MEM_TYPE_64 |
                    PCI_BASE_ADDRESS_MEM_PREFETCH);
    g_assert_cmphex(lo & ~0xfULL, ==, (uint32_t)CACHE_BAR_ADDR);
    hi = qpci_config_readl(pdev, PCI_BASE_ADDRESS_2 + 4);
    g_assert_cmphex(hi, ==, CACHE_BAR_ADDR >> 32);

    /* Size the BAR the way firmware does */
    qpci_config_writel(pdev, PCI_BASE_ADDRESS_2, 0xffffffff);
    qpci_config_writel(pdev, PCI_BASE_ADDRESS_2 + 4, 0xffffffff);
    mask = qpci_config_readl(pdev, PCI_BASE_ADDRESS_2) |
           (uint64_t)qpci_config_readl(pdev, PCI_BASE_ADDRESS_2 + 4) << 32;
    g_assert_cmphex(~(mask & ~0xfULL) + 1, ==, 16 * GiB);
    qpci_config_writel(pdev, PCI_BASE_ADDRESS_2, lo);
    qpci_config_writel(pdev, PCI_BASE_ADDRESS_2 + 4, hi);

    /* An empty window reads as zeros, start to end */
    g_assert_cmphex(bar_readq(&t, 0), ==, 0);
    g_assert_cmphex(bar_readq(&t, 16 * GiB - 8), ==, 0);
    teardown(&t);
}

/* The same window on q35, whose PCI host has its own 64-bit hole */
static void test_window_q35(void)
{
    int fd = make_file("vuf-q35", TWO_MB, 0x35);
    uint64_t offset, length;
    uint8_t bar;
    TestCtx t;

    setup_machine(&t, "q35", "16G", 1, VU_BASE_FEATURES | VU_SHM_FEATURES,
                  false, NULL);
    g_assert_cmpuint(qvirtio_pci_find_shm_cap(&t.fs->pci_vdev, 0, &bar,
                                              &offset, &length), !=, 0);
    g_assert_cmpuint(bar, ==, 2);
    g_assert_cmpuint(length, ==, 16 * GiB);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 16 * GiB - TWO_MB, TWO_MB, 0),
                     ==, 0);
    g_assert_cmphex(bar_readq(&t, 16 * GiB - 8), ==,
                    file_word(0x35, TWO_MB - 8));
    g_assert_cmpuint(shmem_unmap(t.be, 16 * GiB - TWO_MB, TWO_MB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 16 * GiB - 8), ==, 0);
    close(fd);
    teardown(&t);
}

/*
 * The window stays out of the back-end's memory table, and out of every
 * vhost table: vhost's listener rejects it as RAM no device may reach
 * (reason 4, RAM_PROTECTED), before it would look for an fd (reason 2,
 * which only vhost-user has).  VFIO and vDPA skip such RAM too; there is
 * no VFIO device or vhost kernel module here to test them with.
 */
static void test_window_not_in_mem_table(void)
{
    unsigned int i, tables;
    int fd = make_file("vuf-memtable", TWO_MB, 3);
    g_autofree char *trace = g_strdup_printf("%s/vuf-memtable-trace.%d",
                                             g_get_tmp_dir(), getpid());
    g_autofree char *extra = g_strdup_printf(
        " -trace enable=vhost_reject_section,file=%s", trace);
    g_autofree char *log = NULL;
    TestCtx t;

    setup_full(&t, "1G", 1, VU_BASE_FEATURES | VU_SHM_FEATURES, extra);

    g_mutex_lock(&t.be->lock);
    tables = t.be->mem_tables;
    g_assert_cmpuint(tables, >=, 1);
    for (i = 0; i < t.be->nregions; i++) {
        VuMemRegion *r = &t.be->regions[i];

        g_assert_cmphex(r->guest_phys_addr + r->memory_size, <=,
                        CACHE_BAR_ADDR);
    }
    g_mutex_unlock(&t.be->lock);

    /* Mapping changes nothing the back-end's memory table depends on */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, VU_MAP_RW), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 0, TWO_MB), ==, 0);
    g_mutex_lock(&t.be->lock);
    g_assert_cmpuint(t.be->mem_tables, ==, tables);
    g_mutex_unlock(&t.be->lock);
    close(fd);
    teardown(&t);

    g_assert_true(g_file_get_contents(trace, &log, NULL, NULL));
    unlink(trace);
    g_assert_nonnull(strstr(log, "vhost_reject_section vhost-user-fs-cache:4"));
    g_assert_null(strstr(log, "vhost_reject_section vhost-user-fs-cache:2"));
}

static void test_map_read_write_unmap(void)
{
    int fd = make_file("vuf-data", 8 * MiB, 0x1111);
    uint64_t word;
    TestCtx t;

    setup(&t, "64M");

    /* File offset 4M..6M, read-only, at window offset 10M */
    g_assert_cmpuint(shmem_map(t.be, fd, 4 * MiB, 10 * MiB, TWO_MB, 0),
                     ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-data"), ==, 1);
    g_assert_cmphex(bar_readq(&t, 10 * MiB), ==,
                    file_word(0x1111, 4 * MiB));
    g_assert_cmphex(bar_readq(&t, 12 * MiB - 8), ==,
                    file_word(0x1111, 6 * MiB - 8));
    /* Around the mapping, the window still reads zeros */
    g_assert_cmphex(bar_readq(&t, 10 * MiB - 8), ==, 0);
    g_assert_cmphex(bar_readq(&t, 12 * MiB), ==, 0);

    /*
     * A guest write to a read-only mapping must not reach the file: it
     * makes the whole mapping a hole (window/readonly-stores), which
     * shows the write, and stays the back-end's to unmap
     */
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 10 * MiB + 64, 0xdeadbeef);
    g_assert_cmpint(pread(fd, &word, 8, 4 * MiB + 64), ==, 8);
    g_assert_cmphex(word, ==, file_word(0x1111, 4 * MiB + 64));
    g_assert_cmpuint(count_maps(&t, "vuf-data"), ==, 0);
    g_assert_cmphex(bar_readq(&t, 10 * MiB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 10 * MiB + 64), ==, 0xdeadbeef);

    g_assert_cmpuint(shmem_unmap(t.be, 10 * MiB, TWO_MB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 10 * MiB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 10 * MiB + 64), ==, 0xdeadbeef);
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 10 * MiB + 64, 0);

    /* Read-write: guest writes reach the file and back */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, 4 * MiB, VU_MAP_RW), ==, 0);
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 3 * MiB + 16, 0xfeedface);
    g_assert_cmpint(pread(fd, &word, 8, 3 * MiB + 16), ==, 8);
    g_assert_cmphex(word, ==, 0xfeedface);
    word = 0xc0ffee;
    g_assert_cmpint(pwrite(fd, &word, 8, 24), ==, 8);
    g_assert_cmphex(bar_readq(&t, 24), ==, 0xc0ffee);
    g_assert_cmpuint(shmem_unmap(t.be, 0, 4 * MiB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 3 * MiB + 16), ==, 0);

    /*
     * Guest writes into a hole never reach a file.  All holes show one
     * scratch buffer (16 MiB for this window), so the write shows in
     * every 16 MiB of holes, and stays there while a file is mapped over
     * it; only a reset clears it.  Writing zero back clears it here.
     */
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 20 * MiB, 0x5a5a);
    g_assert_cmphex(bar_readq(&t, 20 * MiB), ==, 0x5a5a);
    g_assert_cmphex(bar_readq(&t, 4 * MiB), ==, 0x5a5a);
    g_assert_cmphex(bar_readq(&t, 52 * MiB), ==, 0x5a5a);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 20 * MiB, TWO_MB, 0), ==, 0);
    g_assert_cmphex(bar_readq(&t, 20 * MiB), ==, file_word(0x1111, 0));
    g_assert_cmphex(bar_readq(&t, 4 * MiB), ==, 0x5a5a);
    g_assert_cmpuint(shmem_unmap(t.be, 20 * MiB, TWO_MB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 20 * MiB), ==, 0x5a5a);
    g_assert_cmpint(pread(fd, &word, 8, 0), ==, 8);
    g_assert_cmphex(word, ==, file_word(0x1111, 0));
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 4 * MiB, 0);
    g_assert_cmphex(bar_readq(&t, 20 * MiB), ==, 0);

    /* Several adjacent mappings go in one unmap */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, TWO_MB, PAGE, 0), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, TWO_MB + PAGE, PAGE, 0), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 0, TWO_MB + 2 * PAGE), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-data"), ==, 0);

    close(fd);
    teardown(&t);
}

static void test_replace(void)
{
    int a = make_file("vuf-old", 4 * MiB, 0xa);
    int b = make_file("vuf-new", 4 * MiB, 0xb);
    TestCtx t;

    setup(&t, "64M");

    /* The guest's read-only to read-write upgrade */
    g_assert_cmpuint(shmem_map(t.be, a, 0, 0, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, b, 0, 0, TWO_MB, VU_MAP_RW),
                     ==, EEXIST);
    g_assert_cmphex(bar_readq(&t, 0), ==, file_word(0xa, 0));
    g_assert_cmpuint(shmem_map(t.be, b, 0, 0, TWO_MB,
                               VU_MAP_RW | VU_MAP_REPLACE), ==, 0);
    g_assert_cmphex(bar_readq(&t, 0), ==, file_word(0xb, 0));
    g_assert_cmpuint(count_maps(&t, "vuf-old"), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-new"), ==, 1);

    /* Replacing two mappings and a hole with one */
    g_assert_cmpuint(shmem_map(t.be, a, 0, TWO_MB, PAGE, 0), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, a, 0, 4 * MiB, 4 * MiB,
                               VU_MAP_REPLACE), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, a, 0, 0, 4 * MiB, VU_MAP_REPLACE),
                     ==, 0);
    g_assert_cmphex(bar_readq(&t, 3 * MiB), ==, file_word(0xa, 3 * MiB));

    /* A mapping that sticks out of the range makes REPLACE fail */
    g_assert_cmpuint(shmem_map(t.be, b, 0, TWO_MB, 4 * MiB,
                               VU_MAP_REPLACE), ==, EBUSY);
    g_assert_cmphex(bar_readq(&t, 3 * MiB), ==, file_word(0xa, 3 * MiB));
    g_assert_cmphex(bar_readq(&t, 5 * MiB), ==, file_word(0xa, 1 * MiB));

    g_assert_cmpuint(shmem_unmap(t.be, 0, 8 * MiB), ==, 0);
    close(a);
    close(b);
    teardown(&t);
}

typedef struct ReplaceReader {
    int mem_fd;
    uint64_t host_addr;
    uint64_t seeds[2];
    gint stop;
    gint reads;
    gint bad;
} ReplaceReader;

static gpointer replace_reader(gpointer opaque)
{
    ReplaceReader *r = opaque;

    while (!g_atomic_int_get(&r->stop)) {
        uint64_t word = 0;

        if (pread(r->mem_fd, &word, 8, r->host_addr + 4096) != 8 ||
            (word != file_word(r->seeds[0], 4096) &&
             word != file_word(r->seeds[1], 4096))) {
            g_atomic_int_inc(&r->bad);
        }
        g_atomic_int_inc(&r->reads);
    }
    return NULL;
}

/*
 * While the back-end replaces a mapping again and again, another thread
 * reads the window through QEMU's own address space: it must only ever
 * see the old file or the new one, never the zeros of a hole.
 */
static void test_replace_atomic(void)
{
    int a = make_file("vuf-ping", TWO_MB, 0x1);
    int b = make_file("vuf-pong", TWO_MB, 0x2);
    g_autofree char *maps_path = NULL;
    g_autofree char *mem_path = NULL;
    g_autofree char *maps = NULL;
    ReplaceReader r = { .seeds = { 0x1, 0x2 } };
    GThread *thread;
    char *line;
    TestCtx t;
    int i;

    setup(&t, "64M");
    g_assert_cmpuint(shmem_map(t.be, a, 0, 0, TWO_MB, 0), ==, 0);

    maps_path = g_strdup_printf("/proc/%d/maps", qtest_pid(t.qts));
    g_assert_true(g_file_get_contents(maps_path, &maps, NULL, NULL));
    line = strstr(maps, "/memfd:vuf-ping ");
    g_assert_nonnull(line);
    while (line > maps && line[-1] != '\n') {
        line--;
    }
    r.host_addr = g_ascii_strtoull(line, NULL, 16);
    mem_path = g_strdup_printf("/proc/%d/mem", qtest_pid(t.qts));
    r.mem_fd = open(mem_path, O_RDONLY);
    if (r.mem_fd < 0) {
        /* Without it the test proves nothing: fail, do not skip */
        g_test_message("cannot open %s: %s", mem_path, g_strerror(errno));
        g_test_fail();
        goto out;
    }

    thread = g_thread_new("reader", replace_reader, &r);
    /* At least 2000 replacements, and as many as it takes to overlap */
    for (i = 0; i < 2000 || (g_atomic_int_get(&r.reads) < 1000 && i < 100000);
         i++) {
        g_assert_cmpuint(shmem_map(t.be, i % 2 ? a : b, 0, 0, TWO_MB,
                                   VU_MAP_REPLACE | (i % 2 ? 0 : VU_MAP_RW)),
                         ==, 0);
    }
    g_atomic_int_set(&r.stop, 1);
    g_thread_join(thread);
    close(r.mem_fd);
    g_test_message("%d reads during %d replacements", r.reads, i);
    g_assert_cmpint(r.reads, >=, 1000);
    g_assert_cmpint(r.bad, ==, 0);

out:
    g_assert_cmpuint(shmem_unmap(t.be, 0, TWO_MB), ==, 0);
    close(a);
    close(b);
    teardown(&t);
}

/* QEMU's proportional set size in bytes: what its memory costs the host */
static uint64_t qemu_pss(TestCtx *t)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/smaps_rollup",
                                            qtest_pid(t->qts));
    g_autofree char *text = NULL;
    const char *pss;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    pss = strstr(text, "\nPss:");
    g_assert_nonnull(pss);
    return g_ascii_strtoull(pss + strlen("\nPss:"), NULL, 10) * KiB;
}

static uint64_t pread_word(int fd, uint64_t offset)
{
    uint64_t word;

    g_assert_cmpint(pread(fd, &word, 8, offset), ==, 8);
    return word;
}

/*
 * A guest store into a range mapped read-only must not reach the file,
 * and must not cost QEMU memory either: it makes the mapping a hole,
 * which shows the window's scratch (16 MiB for a 512 MiB window), so
 * stores into every page of 256 MiB cost 16 MiB at most.  A private
 * writable mapping would copy every page stored into, 256 MiB.
 */
#define RO_STORES_LEN (256 * MiB)
#define RO_STORES_MAX_COST (64 * MiB)

static void test_readonly_stores(void)
{
    g_autofree char *trace_path = g_strdup_printf(
        "%s/vuf-ro-stores-trace.%d", g_get_tmp_dir(), getpid());
    g_autofree char *extra = g_strdup_printf(
        " -trace enable=virtio_shmem_arena_readonly_store,file=%s",
        trace_path);
    g_autofree char *trace = NULL;
    uint64_t seed = 0x5eed, before, after, off;
    int fd = make_file("vuf-ro-stores", RO_STORES_LEN, seed);
    int other = make_file("vuf-ro-other", TWO_MB, 0x0e);
    TestCtx t;

    setup_full(&t, "512M", 1, VU_BASE_FEATURES | VU_SHM_FEATURES, extra);
    /* As a Linux guest has them: 2 MiB ranges */
    for (off = 0; off < RO_STORES_LEN; off += TWO_MB) {
        g_assert_cmpuint(shmem_map(t.be, fd, off, off, TWO_MB, 0), ==, 0);
    }
    /* A read-only range nobody stores into */
    g_assert_cmpuint(shmem_map(t.be, other, 0, 300 * MiB, TWO_MB, 0), ==, 0);

    /* QEMU's own stores, as a device model's or a TCG vCPU's */
    before = qemu_pss(&t);
    for (off = 0; off < RO_STORES_LEN; off += TWO_MB) {
        qtest_memset(t.qts, CACHE_BAR_ADDR + off, 0xa5, TWO_MB);
    }
    after = qemu_pss(&t);
    g_test_message("QEMU's Pss: %" PRIu64 " KiB before the stores, %" PRIu64
                   " KiB after", before / KiB, after / KiB);
    g_assert_cmpuint(after, <, before + RO_STORES_MAX_COST);

    /* The file never saw them; the ranges are holes with what was stored */
    for (off = 0; off < RO_STORES_LEN; off += 32 * MiB) {
        g_assert_cmphex(pread_word(fd, off + 8), ==, file_word(seed, off + 8));
    }
    g_assert_cmpuint(count_maps(&t, "vuf-ro-stores"), ==, 0);
    g_assert_cmphex(bar_readq(&t, 8), ==, 0xa5a5a5a5a5a5a5a5ULL);
    g_assert_cmphex(bar_readq(&t, RO_STORES_LEN - 8), ==,
                    0xa5a5a5a5a5a5a5a5ULL);
    /* The range nobody stored into still shows its file */
    g_assert_cmpuint(count_maps(&t, "vuf-ro-other"), ==, 1);
    g_assert_cmphex(bar_readq(&t, 300 * MiB + 8), ==, file_word(0x0e, 8));

    /* The guest's upgrade shows the file again, and writes reach it */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB,
                               VU_MAP_RW | VU_MAP_REPLACE), ==, 0);
    g_assert_cmphex(bar_readq(&t, 8), ==, file_word(seed, 8));
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 16, 0x600d);
    g_assert_cmphex(pread_word(fd, 16), ==, 0x600d);
    /* The mappings made holes are still the back-end's to unmap */
    g_assert_cmpuint(shmem_unmap(t.be, 0, RO_STORES_LEN), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 300 * MiB, TWO_MB), ==, 0);
    close(fd);
    close(other);
    teardown(&t);

    /* One fix-up per mapping stored into, all of its pages at once */
    g_assert_true(g_file_get_contents(trace_path, &trace, NULL, NULL));
    unlink(trace_path);
    g_assert_nonnull(strstr(trace, "virtio_shmem_arena_readonly_store "
                            "128 fix-ups: 65536 pages"));
}

/*
 * Only a store into a window is the window's: QEMU dies of any other
 * SIGSEGV as it would without the window's handler.  A SIGSEGV sent to
 * it stands for the others, which the handler passes on the same way.
 */
/* In the child: a QEMU that is meant to die leaves no core file behind */
static void no_core_dump(gpointer data)
{
    struct rlimit none = { 0, 0 };

    setrlimit(RLIMIT_CORE, &none);
}

static void test_other_sigsegv(void)
{
    TestBackend *be = be_new(VU_BASE_FEATURES | VU_SHM_FEATURES);
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    g_autofree char *cmd = NULL;
    g_autofree char *status_path = NULL;
    g_autofree char *status = NULL;
    g_auto(GStrv) argv = NULL;
    const char *caught;
    int wstatus;
    GPid pid;

    /* Not libqtest's: it would take the death for a failure */
    cmd = g_strdup_printf("%s -machine pc -m 128M -nodefaults -display none "
                          "-accel qtest -object memory-backend-memfd,id=mem,"
                          "size=128M,share=on -numa node,memdev=mem "
                          "-chardev socket,id=vuf,path=%s "
                          "-device vhost-user-fs-pci,chardev=vuf,tag=myfs,"
                          "cache-size=64M", g_getenv("QTEST_QEMU_BINARY"),
                          be->sock_path);
    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                no_core_dump, NULL, &pid, NULL));
    /* The window exists once the device has its back-end channel */
    g_mutex_lock(&be->lock);
    while (be->backend_req_fd < 0) {
        g_assert_true(g_cond_wait_until(&be->cond, &be->lock, deadline));
    }
    g_mutex_unlock(&be->lock);

    /* The window's handler is there (SIGSEGV's bit in SigCgt) */
    status_path = g_strdup_printf("/proc/%d/status", pid);
    g_assert_true(g_file_get_contents(status_path, &status, NULL, NULL));
    caught = strstr(status, "SigCgt:");
    g_assert_nonnull(caught);
    g_assert_true(g_ascii_strtoull(caught + strlen("SigCgt:"), NULL, 16) &
                  (1ULL << (SIGSEGV - 1)));

    g_assert_cmpint(kill(pid, SIGSEGV), ==, 0);
    g_assert_cmpint(waitpid(pid, &wstatus, 0), ==, pid);
    g_spawn_close_pid(pid);
    g_assert_true(WIFSIGNALED(wstatus));
    g_assert_cmpint(WTERMSIG(wstatus), ==, SIGSEGV);
    be_free(be);
}

/*
 * Requests a back-end must not get away with
 */

static void test_invalid_map_requests(void)
{
    int fd = make_file("vuf-bad", 8 * MiB, 5);
    int fds[2] = { fd, fd };
    VuMMap m = { .len = TWO_MB };
    VuMemRW rw = { .size = 8 };
    unsigned int fds_before;
    TestCtx t;

    setup(&t, "64M");
    fds_before = count_fds(&t);

    /* shmid that names no region */
    g_assert_cmpuint(shmem_map_full(t.be, 1, fd, 0, 0, TWO_MB, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map_full(t.be, 255, fd, 0, 0, TWO_MB, 0),
                     ==, EINVAL);
    /* no fd, and two fds */
    g_assert_cmpuint(shmem_map(t.be, -1, 0, 0, TWO_MB, 0), ==, EINVAL);
    be_send(t.be, VU_BACKEND_SHMEM_MAP, true, &m, sizeof(m), NULL, 0,
            fds, 2);
    g_assert_cmpuint(be_recv_u64(t.be, VU_BACKEND_SHMEM_MAP), ==, EINVAL);
    /* a short payload */
    be_send(t.be, VU_BACKEND_SHMEM_MAP, true, &m, sizeof(m) - 8, NULL, 0,
            &fd, 1);
    g_assert_cmpuint(be_recv_u64(t.be, VU_BACKEND_SHMEM_MAP), ==, EINVAL);
    /* out of range, and arithmetic that would wrap */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 64 * MiB, PAGE, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 63 * MiB, TWO_MB, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, 128 * MiB, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, -(uint64_t)PAGE, 2 * PAGE, 0),
                     ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, PAGE, -(uint64_t)PAGE, 0),
                     ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, -(uint64_t)PAGE, 0, 2 * PAGE, 0),
                     ==, EINVAL);
    /* unaligned offset, length, file offset; empty */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 512, PAGE, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, PAGE + 1, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 100, 0, PAGE, 0), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, 0, 0), ==, EINVAL);
    /* unknown flags */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, PAGE, 1ULL << 2), ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, PAGE, 1ULL << 63), ==, EINVAL);
    /* an fd that cannot be mapped */
    {
        int pipefd[2];

        g_assert_cmpint(pipe(pipefd), ==, 0);
        g_assert_cmpuint(shmem_map(t.be, pipefd[0], 0, 0, PAGE, 0), !=, 0);
        close(pipefd[0]);
        close(pipefd[1]);
    }
    g_assert_cmpuint(count_maps(&t, "vuf-bad"), ==, 0);

    /* overlap, with and without REPLACE */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 4 * MiB, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 4 * MiB, TWO_MB, 0), ==, EEXIST);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 5 * MiB, TWO_MB, 0), ==, EEXIST);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 3 * MiB, TWO_MB, 0), ==, EEXIST);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 5 * MiB, PAGE, VU_MAP_REPLACE),
                     ==, EBUSY);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 3 * MiB, TWO_MB, VU_MAP_REPLACE),
                     ==, EBUSY);
    g_assert_cmphex(bar_readq(&t, 5 * MiB), ==, file_word(5, MiB));

    /* partial unmaps, unmaps of nothing, unmaps with an fd */
    g_assert_cmpuint(shmem_unmap(t.be, 4 * MiB, MiB), ==, EINVAL);
    g_assert_cmpuint(shmem_unmap(t.be, 5 * MiB, MiB), ==, EINVAL);
    g_assert_cmpuint(shmem_unmap(t.be, 3 * MiB, 4 * MiB), ==, EINVAL);
    g_assert_cmpuint(shmem_unmap(t.be, 4 * MiB, 4 * MiB), ==, EINVAL);
    g_assert_cmpuint(shmem_unmap(t.be, 8 * MiB, TWO_MB), ==, ENOENT);
    g_assert_cmpuint(shmem_unmap(t.be, 4 * MiB + 1, TWO_MB), ==, EINVAL);
    g_assert_cmpuint(shmem_unmap(t.be, -(uint64_t)PAGE, 2 * PAGE), ==,
                     EINVAL);
    g_assert_cmpuint(shmem_unmap_full(t.be, 1, 4 * MiB, TWO_MB, -1), ==,
                     EINVAL);
    g_assert_cmpuint(shmem_unmap_full(t.be, 0, 4 * MiB, TWO_MB, fd), ==,
                     EINVAL);
    /* memory access requests carry no fds either */
    rw.guest_address = MiB;
    be_send(t.be, VU_BACKEND_MEM_WRITE, true, &rw, sizeof(rw), &rw, 8,
            fds, 2);
    g_assert_cmpuint(be_recv_u64(t.be, VU_BACKEND_MEM_WRITE), ==, EINVAL);
    /* a gap between two mappings is not covered */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 8 * MiB, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 4 * MiB, 6 * MiB), ==, EINVAL);
    g_assert_cmpuint(count_maps(&t, "vuf-bad"), ==, 2);
    g_assert_cmphex(bar_readq(&t, 8 * MiB), ==, file_word(5, 0));

    g_assert_cmpuint(shmem_unmap(t.be, 4 * MiB, TWO_MB), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 8 * MiB, TWO_MB), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-bad"), ==, 0);

    /* Through all of that, no fd leaked into QEMU and it kept serving */
    g_assert_cmpuint(count_fds(&t), ==, fds_before);
    close(fd);
    assert_alive(&t);
    teardown(&t);
}

static void test_replace_needs_feature(void)
{
    int fd = make_file("vuf-norepl", TWO_MB, 9);
    TestCtx t;

    setup_full(&t, "64M", 1, VU_BASE_FEATURES | (1ULL << VU_PF_SHMEM), NULL);
    g_mutex_lock(&t.be->lock);
    g_assert_cmphex(t.be->acked_protocol_features, ==,
                    VU_BASE_FEATURES | (1ULL << VU_PF_SHMEM));
    g_mutex_unlock(&t.be->lock);

    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, VU_MAP_REPLACE),
                     ==, EINVAL);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 0, TWO_MB), ==, 0);

    /* MEM_READ and MEM_WRITE are refused without F_MEM_RW */
    {
        uint8_t buf[16] = { 1 };

        g_assert_cmpuint(mem_read(t.be, MiB, buf, sizeof(buf)), ==, EINVAL);
        g_assert_cmpuint(mem_write(t.be, MiB, buf, sizeof(buf)), ==, EINVAL);
    }
    close(fd);
    teardown(&t);
}

static void test_mem_rw(void)
{
    g_autofree uint8_t *out = g_malloc(VU_MEM_RW_MAX + 1);
    g_autofree uint8_t *in = g_malloc(VU_MEM_RW_MAX + 1);
    int fd = make_file("vuf-memrw", TWO_MB, 0x77);
    uint64_t gpa, word;
    struct stat st;
    TestCtx t;
    int i;

    setup(&t, "64M");
    gpa = guest_alloc(&t.qs->alloc, VU_MEM_RW_MAX);

    for (i = 0; i < VU_MEM_RW_MAX + 1; i++) {
        out[i] = i * 7 + 3;
    }
    /* Guest RAM: written by the back-end, seen by the guest and back */
    g_assert_cmpuint(mem_write(t.be, gpa, out, VU_MEM_RW_MAX), ==, 0);
    qtest_memread(t.qts, gpa, in, VU_MEM_RW_MAX);
    g_assert_cmpmem(in, VU_MEM_RW_MAX, out, VU_MEM_RW_MAX);
    memset(in, 0, VU_MEM_RW_MAX);
    g_assert_cmpuint(mem_read(t.be, gpa, in, VU_MEM_RW_MAX), ==, 0);
    g_assert_cmpmem(in, VU_MEM_RW_MAX, out, VU_MEM_RW_MAX);

    /* A buffer inside the window, which the back-end cannot map */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, VU_MAP_RW), ==, 0);
    g_assert_cmpuint(mem_read(t.be, CACHE_BAR_ADDR + 8, in, 8), ==, 0);
    memcpy(&word, in, 8);
    g_assert_cmphex(word, ==, file_word(0x77, 8));
    g_assert_cmpuint(mem_write(t.be, CACHE_BAR_ADDR + 64, out, 8), ==, 0);
    g_assert_cmpint(pread(fd, in, 8, 64), ==, 8);
    g_assert_cmpmem(in, 8, out, 8);

    /*
     * The file shrinks under its mapping (the back-end may do that to
     * its own files): the page past the end reads zeros and takes writes
     * into nowhere, where a plain copy would kill QEMU with SIGBUS.
     */
    g_assert_cmpint(ftruncate(fd, 0), ==, 0);
    memset(in, 0xff, 8);
    g_assert_cmpuint(mem_read(t.be, CACHE_BAR_ADDR + 4096, in, 8), ==, 0);
    memcpy(&word, in, 8);
    g_assert_cmphex(word, ==, 0);
    g_assert_cmpuint(mem_write(t.be, CACHE_BAR_ADDR + 8192, out, 8), ==, 0);
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);
    g_assert_cmpuint(shmem_unmap(t.be, 0, TWO_MB), ==, 0);

    /* Too large, in both directions; QEMU stays in sync and answers */
    g_assert_cmpuint(mem_read(t.be, gpa, in, VU_MEM_RW_MAX + 1), ==, EINVAL);
    g_assert_cmpuint(mem_write(t.be, gpa, out, VU_MEM_RW_MAX + 1), ==,
                     EINVAL);
    /* Header and data that disagree; a short header */
    {
        VuMemRW rw = { .guest_address = gpa, .size = 32 };

        be_send(t.be, VU_BACKEND_MEM_WRITE, true, &rw, sizeof(rw), out, 16,
                NULL, 0);
        g_assert_cmpuint(be_recv_u64(t.be, VU_BACKEND_MEM_WRITE), ==, EINVAL);
        be_send(t.be, VU_BACKEND_MEM_WRITE, true, &rw, 8, NULL, 0, NULL, 0);
        g_assert_cmpuint(be_recv_u64(t.be, VU_BACKEND_MEM_WRITE), ==, EINVAL);
    }
    /* Addresses that wrap or hit nothing */
    g_assert_cmpuint(mem_read(t.be, -8ULL, in, 16), ==, EINVAL);
    g_assert_cmpuint(mem_read(t.be, 1ULL << 62, in, 16), ==, EFAULT);
    g_assert_cmpuint(mem_write(t.be, 1ULL << 62, out, 16), ==, EFAULT);
    /* Device registers (here: this device's own) are not guest memory */
    g_assert_cmpuint(mem_read(t.be, t.fs->pci_vdev.bar.addr, in, 4), ==,
                     EFAULT);
    memset(out, 0, 4);
    g_assert_cmpuint(mem_write(t.be, t.fs->pci_vdev.bar.addr, out, 4), ==,
                     EFAULT);
    /* A buffer that runs from RAM into a hole is refused as a whole */
    g_assert_cmpuint(mem_read(t.be, RAM_SIZE - 8, in, 16), ==, EFAULT);

    guest_free(&t.qs->alloc, gpa);
    close(fd);
    assert_alive(&t);
    teardown(&t);
}

/*
 * Back-end requests while QEMU waits for the back-end
 */

/* stop and cont the VM; the back-end sends @request while it stops */
static void stop_cont_with_request(TestCtx *t, int request)
{
    g_mutex_lock(&t->be->lock);
    t->be->stop_request = request;
    t->be->stop_result = UINT64_MAX;
    g_mutex_unlock(&t->be->lock);

    qtest_qmp_assert_success(t->qts, "{ 'execute': 'stop' }");

    g_mutex_lock(&t->be->lock);
    g_assert_cmpint(t->be->stop_request, ==, STOP_REQUEST_NONE);
    g_assert_cmphex(t->be->stop_result, ==, 0);
    g_mutex_unlock(&t->be->lock);

    qtest_qmp_assert_success(t->qts, "{ 'execute': 'cont' }");
}

/*
 * "stop" stops the back-end's queues: QEMU sends GET_VRING_BASE and waits
 * for the reply.  A daemon cannot stop a queue before the request in
 * flight there is done, and that may need QEMU's answer to a back-end
 * request first.  Without QEMU serving the back-end channel while it
 * waits, both sides would wait for each other forever (here: until the
 * back-end's request times out and fails the test).
 */
static void test_stop_serves_backend(void)
{
    int fd = make_file("vuf-stop", TWO_MB, 0x88);
    uint64_t gpa;
    unsigned int i;
    TestCtx t;

    setup(&t, "64M");
    gpa = guest_alloc(&t.qs->alloc, sizeof(uint64_t));
    t.be->stop_map_fd = fd;
    t.be->stop_gpa = gpa;

    for (i = 0; i < 3; i++) {
        stop_cont_with_request(&t, STOP_REQUEST_MAP);
        g_assert_cmphex(bar_readq(&t, 0), ==, file_word(0x88, 0));
        g_assert_cmpuint(count_maps(&t, "vuf-stop"), ==, 1);

        qtest_writeq(t.qts, gpa, 0);
        stop_cont_with_request(&t, STOP_REQUEST_MEM_WRITE);
        g_assert_cmphex(qtest_readq(t.qts, gpa), ==, STOP_PATTERN);

        stop_cont_with_request(&t, STOP_REQUEST_UNMAP);
        g_assert_cmphex(bar_readq(&t, 0), ==, 0);
        g_assert_cmpuint(count_maps(&t, "vuf-stop"), ==, 0);
    }

    close(fd);
    teardown(&t);
}

/*
 * Lifetime of mappings
 */

static void test_reset_drops_mappings(void)
{
    int fd = make_file("vuf-reset", 4 * MiB, 0x33);
    TestCtx t;

    setup(&t, "64M");
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, VU_MAP_RW), ==, 0);
    g_assert_cmpuint(shmem_map(t.be, fd, TWO_MB, 32 * MiB, TWO_MB, 0), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-reset"), ==, 2);
    /* What the guest left in the holes (their scratch) goes too */
    qtest_writeq(t.qts, CACHE_BAR_ADDR + 8 * MiB + 8, 0x77);
    g_assert_cmphex(bar_readq(&t, 24 * MiB + 8), ==, 0x77);

    qvirtio_reset(t.fs->fs.vdev);
    g_assert_cmpuint(count_maps(&t, "vuf-reset"), ==, 0);
    g_assert_cmphex(bar_readq(&t, 0), ==, 0);
    g_assert_cmphex(bar_readq(&t, 32 * MiB), ==, 0);
    g_assert_cmphex(bar_readq(&t, 8 * MiB + 8), ==, 0);
    g_assert_cmphex(bar_readq(&t, 24 * MiB + 8), ==, 0);
    /* The old ranges are free again */
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, 0), ==, 0);

    /* A system reset drops them too */
    qtest_system_reset(t.qts);
    g_assert_cmpuint(count_maps(&t, "vuf-reset"), ==, 0);

    close(fd);
    teardown(&t);
}

static void test_disconnect_drops_mappings(void)
{
    int fd = make_file("vuf-disconnect", 4 * MiB, 0x44);
    TestCtx t;

    setup(&t, "64M");
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, 4 * MiB, VU_MAP_RW), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-disconnect"), ==, 1);
    close(fd);

    be_disconnect(t.be);
    wait_no_maps(&t, "vuf-disconnect");
    g_assert_cmphex(bar_readq(&t, 0), ==, 0);
    teardown(&t);
}

/*
 * A back-end that sends garbage, on its channel or in its replies, may
 * lose its connection, but QEMU must not crash, leak file descriptors or
 * keep mappings.  Each round ends with the back-end going away and a new
 * one connecting (reconnect-ms), which also gives it a fresh channel.
 */

/* Send raw bytes and fds on the back-end channel; QEMU may hang up. */
static void be_send_raw(TestBackend *be, const void *buf, size_t len,
                        const int *fds, size_t nfds)
{
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    char control[CMSG_SPACE(8 * sizeof(int))] = { };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

    g_assert_cmpuint(nfds, <=, 8);
    if (nfds) {
        struct cmsghdr *cmsg;

        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, nfds * sizeof(int));
    }
    sendmsg(be_req_fd(be), &msg, MSG_NOSIGNAL);
}

/*
 * Wait for QEMU to hold @expected fds again, and to keep holding that
 * many for a while: a new back-end connection is set up a piece at a
 * time, and the count can pass through @expected on its way (an old fd
 * closed before a new one is opened).  More than that is a leak.
 */
static void wait_fds(TestCtx *t, unsigned int expected)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    unsigned int n = 0, stable = 0;

    while (stable < 20 && g_get_monotonic_time() < deadline) {
        qtest_readb(t->qts, 0);
        n = count_fds(t);
        stable = n == expected ? stable + 1 : 0;
        g_usleep(10 * 1000);
    }
    g_assert_cmpuint(n, ==, expected);
}

/*
 * Wait for the connection after the first @closed ones to be set up, up
 * to a started device with @nvqs rings: until then the front-end is
 * still opening fds, and counting them would catch it halfway.
 */
static void be_wait_connected(TestBackend *be, unsigned int closed,
                              unsigned int nvqs)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;

    g_mutex_lock(&be->lock);
    while (be->connections_closed < closed || be->backend_req_fd < 0 ||
           be->vrings_enabled < nvqs) {
        g_assert_true(g_cond_wait_until(&be->cond, &be->lock, deadline));
    }
    g_mutex_unlock(&be->lock);
}

static unsigned int be_connections_closed(TestBackend *be)
{
    unsigned int n;

    g_mutex_lock(&be->lock);
    n = be->connections_closed;
    g_mutex_unlock(&be->lock);
    return n;
}

enum {
    GARBAGE_RANDOM,             /* random bytes, with fds */
    GARBAGE_SHORT_HEADER,
    GARBAGE_SHORT_PAYLOAD,      /* the back-end dies half-way through */
    GARBAGE_HUGE_SIZE,
    GARBAGE_BAD_SIZES,
    GARBAGE_STRAY_FDS,
    GARBAGE_MAP_FLOOD,
    GARBAGE_MAX
};

static const char *const garbage_names[GARBAGE_MAX] = {
    [GARBAGE_RANDOM] = "random bytes with fds",
    [GARBAGE_SHORT_HEADER] = "a truncated header",
    [GARBAGE_SHORT_PAYLOAD] = "a truncated payload",
    [GARBAGE_HUGE_SIZE] = "a 4 GiB payload size",
    [GARBAGE_BAD_SIZES] = "wrong payload sizes",
    [GARBAGE_STRAY_FDS] = "fds where none belong",
    [GARBAGE_MAP_FLOOD] = "a flood of map requests",
};

static void send_garbage(TestCtx *t, int kind, int fd)
{
    int fds[8] = { fd, fd, fd, fd, fd, fd, fd, fd };
    VuMMap m = { .len = PAGE };
    VuMemRW rw = { .size = 8 };
    uint64_t junk[64] = { };
    VuHeader hdr = { .flags = VU_VERSION };
    g_autofree uint8_t *buf = NULL;
    GRand *rand;
    unsigned int i;

    switch (kind) {
    case GARBAGE_RANDOM:
        rand = g_rand_new_with_seed(0x5eed);
        buf = g_malloc(64 * KiB);
        for (i = 0; i < 64 * KiB / 4; i++) {
            ((uint32_t *)buf)[i] = g_rand_int(rand);
        }
        g_rand_free(rand);
        for (i = 0; i < 16; i++) {
            be_send_raw(t->be, buf + i * 4 * KiB, 4 * KiB, fds, i % 4);
        }
        break;
    case GARBAGE_SHORT_HEADER:
        hdr.request = VU_BACKEND_SHMEM_MAP;
        be_send_raw(t->be, &hdr, sizeof(hdr) - 3, fds, 1);
        break;
    case GARBAGE_SHORT_PAYLOAD:
        hdr.request = VU_BACKEND_SHMEM_MAP;
        hdr.size = sizeof(m);
        be_send_raw(t->be, &hdr, sizeof(hdr), fds, 1);
        be_send_raw(t->be, &m, sizeof(m) / 2, NULL, 0);
        break;
    case GARBAGE_HUGE_SIZE:
        hdr.request = VU_BACKEND_MEM_WRITE;
        hdr.size = UINT32_MAX;
        be_send_raw(t->be, &hdr, sizeof(hdr), fds, 2);
        be_send_raw(t->be, &rw, sizeof(rw), NULL, 0);
        hdr.request = VU_BACKEND_SHMEM_MAP;
        be_send_raw(t->be, &hdr, sizeof(hdr), fds, 2);
        break;
    case GARBAGE_BAD_SIZES: {
        static const uint32_t sizes[] = { 0, 1, 39, 41, 256 };

        for (i = 0; i < ARRAY_SIZE(sizes); i++) {
            be_send(t->be, VU_BACKEND_SHMEM_MAP, true, junk, sizes[i],
                    NULL, 0, &fd, 1);
            g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_SHMEM_MAP), ==,
                             EINVAL);
            be_send(t->be, VU_BACKEND_SHMEM_UNMAP, true, junk, sizes[i],
                    NULL, 0, NULL, 0);
            g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_SHMEM_UNMAP), ==,
                             EINVAL);
        }
        /* MEM_WRITE whose header and data disagree, both ways */
        rw.guest_address = MiB;
        be_send(t->be, VU_BACKEND_MEM_WRITE, true, &rw, sizeof(rw), junk, 4,
                NULL, 0);
        g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_MEM_WRITE), ==,
                         EINVAL);
        be_send(t->be, VU_BACKEND_MEM_WRITE, true, &rw, sizeof(rw), junk, 16,
                NULL, 0);
        g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_MEM_WRITE), ==,
                         EINVAL);
        be_send(t->be, VU_BACKEND_MEM_WRITE, true, &rw, 4, NULL, 0, NULL, 0);
        g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_MEM_WRITE), ==,
                         EINVAL);
        /* The channel survives all of these */
        g_assert_cmpuint(shmem_map(t->be, fd, 0, 4 * MiB, PAGE, 0), ==, 0);
        break;
    }
    case GARBAGE_STRAY_FDS: {
        /* IOTLB, config change, host notifier, then unknown requests */
        static const uint32_t requests[] = { 1, 2, 3, 13, 200, 0xffffffff };

        for (i = 0; i < ARRAY_SIZE(requests); i++) {
            be_send(t->be, requests[i], false, junk, 64, NULL, 0, fds, 8);
        }
        be_send(t->be, VU_BACKEND_SHMEM_UNMAP, true, &m, sizeof(m), NULL, 0,
                fds, 8);
        g_assert_cmpuint(be_recv_u64(t->be, VU_BACKEND_SHMEM_UNMAP), ==,
                         EINVAL);
        break;
    }
    case GARBAGE_MAP_FLOOD:
        /* No replies asked for: nothing slows the back-end down */
        for (i = 0; i < 4096; i++) {
            m.shm_offset = 4 * MiB + (uint64_t)i * PAGE;
            m.flags = i & 1 ? VU_MAP_RW : 0;
            be_send(t->be, VU_BACKEND_SHMEM_MAP, false, &m, sizeof(m), NULL, 0,
                    &fd, 1);
        }
        /* ... and as many that fail (overlaps) */
        for (i = 0; i < 4096; i++) {
            m.shm_offset = 4 * MiB + (uint64_t)(i % 64) * PAGE;
            be_send(t->be, VU_BACKEND_SHMEM_MAP, false, &m, sizeof(m), NULL, 0,
                    &fd, 1);
        }
        /* A reply orders us after all of them */
        g_assert_cmpuint(shmem_map(t->be, fd, 0, 0, PAGE, 0), ==, EEXIST);
        g_assert_cmpuint(count_maps(t, "vuf-garbage"), ==, 1 + 4096);
        break;
    default:
        g_assert_not_reached();
    }
}

static void test_backend_garbage(void)
{
    int fd = make_file("vuf-garbage", 8 * MiB, 0x6a);
    unsigned int fds_before, closed = 0;
    TestCtx t;
    int kind;

    setup_machine(&t, "pc", "64M", 1, VU_BASE_FEATURES | VU_SHM_FEATURES,
                  true, NULL);
    fds_before = count_fds(&t);

    for (kind = 0; kind < GARBAGE_MAX; kind++) {
        g_test_message("back-end channel: %s", garbage_names[kind]);
        g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, TWO_MB, VU_MAP_RW), ==, 0);
        send_garbage(&t, kind, fd);

        be_disconnect(t.be);
        be_wait_connected(t.be, ++closed, t.nvqs);
        wait_no_maps(&t, "vuf-garbage");
        wait_fds(&t, fds_before);
        assert_alive(&t);
    }
    close(fd);
    teardown(&t);
}

static void test_backend_bad_replies(void)
{
    unsigned int fds_before, closed;
    TestCtx t;
    int kind;

    setup_machine(&t, "pc", "64M", 1, VU_BASE_FEATURES | VU_SHM_FEATURES,
                  true, NULL);
    fds_before = count_fds(&t);

    for (kind = BAD_REPLY_NONE + 1; kind < BAD_REPLY_MAX; kind++) {
        g_test_message("reply to GET_FEATURES: bad in way %d", kind);
        closed = be_connections_closed(t.be);
        g_mutex_lock(&t.be->lock);
        t.be->bad_reply = kind;
        g_mutex_unlock(&t.be->lock);
        be_disconnect(t.be);

        if (kind != BAD_REPLY_WITH_FDS) {
            /* QEMU hangs up on the bad reply, and tries again */
            closed += 2;
            g_mutex_lock(&t.be->lock);
            while (t.be->connections_closed < closed) {
                g_assert_true(g_cond_wait_until(&t.be->cond, &t.be->lock,
                                                g_get_monotonic_time() +
                                                TIMEOUT_MS * 1000));
            }
            g_mutex_unlock(&t.be->lock);
        } else {
            /* Unwanted fds in a reply are dropped, nothing else changes */
            closed += 1;
        }
        g_mutex_lock(&t.be->lock);
        t.be->bad_reply = BAD_REPLY_NONE;
        g_mutex_unlock(&t.be->lock);
        be_wait_connected(t.be, closed, t.nvqs);
        wait_fds(&t, fds_before);
        assert_alive(&t);
    }
    teardown(&t);
}

/*
 * While QEMU waits for the reply to SET_BACKEND_REQ_FD it serves the new
 * back-end channel, and a bad request there makes it close the channel;
 * the reply then says the request failed, and the failed setup closes
 * the channel too.  It must be closed once: a second close destroys a
 * GSource that is gone (a GLib critical, made fatal here).  QEMU then
 * hangs up, and the next back-end gets a working device.
 */
static void test_backend_channel_breaks_in_wait(void)
{
    unsigned int closed;
    TestCtx t;

    g_setenv("G_DEBUG", "fatal-criticals", true);
    setup_machine(&t, "pc", "64M", 1, VU_BASE_FEATURES | VU_SHM_FEATURES,
                  true, NULL);
    g_unsetenv("G_DEBUG");

    closed = be_connections_closed(t.be);
    g_mutex_lock(&t.be->lock);
    t.be->break_channel = true;
    g_mutex_unlock(&t.be->lock);
    be_disconnect(t.be);

    /* Our hang-up, then QEMU's on the failed setup */
    closed += 2;
    be_wait_connected(t.be, closed, t.nvqs);
    g_mutex_lock(&t.be->lock);
    g_assert_false(t.be->break_channel);
    g_mutex_unlock(&t.be->lock);
    assert_alive(&t);
    teardown(&t);
}

static void test_many_mappings(void)
{
    int fd = make_file("vuf-many", TWO_MB, 0x55);
    const unsigned int n = 8192;
    unsigned int i;
    TestCtx t;

    setup(&t, "16G");
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(shmem_map(t.be, fd, 0, (uint64_t)i * TWO_MB, TWO_MB,
                                   i % 2 ? VU_MAP_RW : 0), ==, 0);
    }
    g_assert_cmpuint(count_maps(&t, "vuf-many"), ==, n);
    for (i = 0; i < n; i += 1021) {
        g_assert_cmphex(bar_readq(&t, (uint64_t)i * TWO_MB + 4096), ==,
                        file_word(0x55, 4096));
    }
    g_assert_cmphex(bar_readq(&t, 16 * GiB - 8), ==,
                    file_word(0x55, TWO_MB - 8));

    /* One unmap of the whole window removes all of them */
    g_assert_cmpuint(shmem_unmap(t.be, 0, 16 * GiB), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-many"), ==, 0);
    close(fd);
    teardown(&t);
}

/*
 * How many bytes of QEMU's address space show a window's holes: its
 * scratch memfd, mapped over and over (hw/virtio/virtio-shmem-arena.c)
 */
static uint64_t window_hole_bytes(QTestState *qts)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/maps", qtest_pid(qts));
    g_autofree char *maps = NULL;
    g_auto(GStrv) lines = NULL;
    uint64_t bytes = 0;
    char **l;

    g_assert_true(g_file_get_contents(path, &maps, NULL, NULL));
    lines = g_strsplit(maps, "\n", -1);
    for (l = lines; *l; l++) {
        uint64_t start, end;
        char name[64] = "";

        if (sscanf(*l, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %63s",
                   &start, &end, name) == 3 &&
            !strcmp(name, "/memfd:virtio-shmem-scratch")) {
            bytes += end - start;
        }
    }
    return bytes;
}

static void test_migration_blocked(void)
{
    QDict *rsp;
    const char *desc;
    TestCtx t;

    /* With LOG_ALL and LOG_SHMFD, vhost adds no blocker of its own */
    setup_full(&t, "64M", 1, VU_BASE_FEATURES | VU_SHM_FEATURES |
               (1ULL << VU_PF_LOG_SHMFD), NULL);
    rsp = qtest_qmp(t.qts, "{ 'execute': 'migrate', 'arguments': "
                    "{ 'uri': 'exec:cat > /dev/null' } }");
    g_assert_true(qdict_haskey(rsp, "error"));
    desc = qdict_get_str(qdict_get_qdict(rsp, "error"), "desc");
    g_test_message("%s", desc);
    g_assert_nonnull(strstr(desc, "vhost-user-fs device with tag \"myfs\" "
                            "has a DAX cache window (cache-size) and cannot "
                            "be migrated"));
    qobject_unref(rsp);
    teardown(&t);
}

/*
 * The reason QMP's migrate gives for refusing at once, or NULL if it
 * started; then waits for it to end.  The destination does not exist: a
 * migration that starts fails to connect, without touching the device.
 */
static char *migrate_refusal(TestCtx *t)
{
    char *desc = NULL;
    QDict *rsp;

    rsp = qtest_qmp(t->qts, "{ 'execute': 'migrate', 'arguments': "
                    "{ 'uri': 'unix:/nonexistent/vuf-migrate.sock' } }");
    if (qdict_haskey(rsp, "error")) {
        desc = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "error"),
                                      "desc"));
        g_test_message("migrate refused: %s", desc);
    }
    qobject_unref(rsp);
    for (;;) {
        QDict *ret;
        const char *status;
        bool over;

        rsp = qtest_qmp(t->qts, "{ 'execute': 'query-migrate' }");
        ret = qdict_get_qdict(rsp, "return");
        status = qdict_haskey(ret, "status") ?
                 qdict_get_str(ret, "status") : "none";
        over = strcmp(status, "setup") && strcmp(status, "active");
        qobject_unref(rsp);
        if (over) {
            break;
        }
        g_usleep(10 * 1000);
    }
    return desc;
}

static bool migration_blocked(TestCtx *t)
{
    g_autofree char *desc = migrate_refusal(t);

    return desc && strstr(desc, "has a DAX cache window (cache-size) and "
                          "cannot be migrated: its back-end does not carry "
                          "the window's mappings");
}

/*
 * A back-end that carries the window (SHMEM_MIGRATE with DEVICE_STATE)
 * lifts the blocker; one without either feature, connecting later,
 * brings it back, and so on.  Without a window the feature is never
 * negotiated.
 */
static void test_migration_with_window(void)
{
    uint64_t carries = VU_BASE_FEATURES | VU_SHM_FEATURES |
                       (1ULL << VU_PF_LOG_SHMFD) |
                       (1ULL << VU_PF_DEVICE_STATE) |
                       (1ULL << VU_PF_SHMEM_MIGRATE);
    const uint64_t lacking[] = {
        carries & ~(1ULL << VU_PF_SHMEM_MIGRATE),
        carries & ~(1ULL << VU_PF_DEVICE_STATE),
    };
    unsigned int closed = 0, i;
    TestCtx t;

    setup_machine(&t, "pc", "64M", 1, carries, true, NULL);
    g_assert_true(t.be->acked_protocol_features &
                  (1ULL << VU_PF_SHMEM_MIGRATE));
    g_assert_false(migration_blocked(&t));

    for (i = 0; i < G_N_ELEMENTS(lacking); i++) {
        g_mutex_lock(&t.be->lock);
        t.be->offered_protocol_features = lacking[i];
        g_mutex_unlock(&t.be->lock);
        be_disconnect(t.be);
        be_wait_connected(t.be, ++closed, t.nvqs);
        g_assert_true(migration_blocked(&t));

        g_mutex_lock(&t.be->lock);
        t.be->offered_protocol_features = carries;
        g_mutex_unlock(&t.be->lock);
        be_disconnect(t.be);
        be_wait_connected(t.be, ++closed, t.nvqs);
        g_assert_false(migration_blocked(&t));
    }
    teardown(&t);

    setup_full(&t, NULL, 1, carries, NULL);
    g_assert_false(t.be->acked_protocol_features &
                   (1ULL << VU_PF_SHMEM_MIGRATE));
    teardown(&t);
}

/*
 * Under KVM a guest access to a window page whose file shrank fails
 * KVM_RUN with EFAULT where the host virtualizes in hardware (which used
 * to stop the VM for good), and raises SIGBUS in the vCPU thread under a
 * KVM that shadows the guest's pages, as kvm_pvm does.  Either way the
 * window must repair each mapping that now reaches past its file's end
 * and let the vCPU go on, reading zeros there.  The guest is a
 * small firmware (vhost-user-fs-kvm-guest.S) that reads a word of each
 * page of the window without end; the window is placed below 4 GiB,
 * where it reaches it without paging.
 */
#define KVM_BAR_ADDR 0xc0000000ULL
#define KVM_GUEST_WIN 0x8000            /* the window's address */
#define KVM_GUEST_LEN 0x8004            /* bytes to read */
#define KVM_GUEST_SUM 0x8008            /* the sum of the words read */
#define KVM_GUEST_PASSES 0x800c
#define KVM_GUEST_STORE 0x8010          /* not 0: store it, do not read */

static const uint8_t kvm_guest[] = {
    0xfa, 0xfc, 0x2e, 0x66, 0x0f, 0x01, 0x1e, 0x8e, 0x00, 0x2e, 0x66, 0x0f,
    0x01, 0x16, 0x88, 0x00, 0x0f, 0x20, 0xc0, 0x66, 0x25, 0xff, 0xff, 0xff,
    0x9f, 0x66, 0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x28, 0x00,
    0x0f, 0x00, 0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0,
    0x8e, 0xd0, 0x8b, 0x35, 0x00, 0x80, 0x00, 0x00, 0x85, 0xf6, 0x74, 0xf6,
    0x8b, 0x0d, 0x04, 0x80, 0x00, 0x00, 0x8b, 0x1d, 0x10, 0x80, 0x00, 0x00,
    0x31, 0xd2, 0x85, 0xdb, 0x75, 0x0b, 0x8b, 0x04, 0x16, 0x01, 0x05, 0x08,
    0x80, 0x00, 0x00, 0xeb, 0x03, 0x89, 0x1c, 0x16, 0x81, 0xc2, 0x00, 0x10,
    0x00, 0x00, 0x39, 0xca, 0x72, 0xe4, 0xff, 0x05, 0x0c, 0x80, 0x00, 0x00,
    0xeb, 0xce, 0x66, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x9b, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x93, 0xcf, 0x00, 0x17, 0x00, 0x70, 0x00, 0x0f, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00
};

/* The guest's pass count once it is at least @n past @from */
static uint32_t kvm_guest_passes(TestCtx *t, uint32_t from, uint32_t n)
{
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    uint32_t passes;

    while ((passes = qtest_readl(t->qts, KVM_GUEST_PASSES)) - from < n) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    return passes;
}

/*
 * The sum of the numbers right after @after on the lines of @trace that
 * hold the trace event @event ("": right after the event's name)
 */
static unsigned int trace_sum(const char *trace, const char *event,
                              const char *after)
{
    g_auto(GStrv) lines = g_strsplit(trace, "\n", -1);
    unsigned int sum = 0;
    char **l;

    for (l = lines; *l; l++) {
        const char *p = strstr(*l, event), *end;
        unsigned int n;

        p = p ? strstr(p + strlen(event), after) : NULL;
        if (p && qemu_strtoui(p + strlen(after), &end, 10, &n) == 0) {
            sum += n;
        }
    }
    return sum;
}

/*
 * Boot the firmware under @accel with a window of @cache_size at
 * KVM_BAR_ADDR, tracing the events @events (one a line) into
 * @dir/trace
 */
static void fw_guest_setup(TestCtx *t, const char *accel,
                           const char *cache_size, const char *dir,
                           const char *events)
{
    /* At the reset vector: ljmp $0xf000, $0 */
    static const uint8_t reset[] = { 0xea, 0x00, 0x00, 0x00, 0xf0 };
    g_autofree char *image_path = g_build_filename(dir, "guest.bin", NULL);
    g_autofree char *events_path = g_build_filename(dir, "events", NULL);
    g_autofree char *trace_path = g_build_filename(dir, "trace", NULL);
    g_autofree uint8_t *image = g_malloc0(64 * KiB);
    g_autofree char *extra = NULL;

    memcpy(image, kvm_guest, sizeof(kvm_guest));
    memcpy(image + 64 * KiB - 16, reset, sizeof(reset));
    g_assert_true(g_file_set_contents(image_path, (char *)image, 64 * KiB,
                                      NULL));
    g_assert_true(g_file_set_contents(events_path, events, -1, NULL));
    extra = g_strdup_printf(" -accel %s -bios %s -trace events=%s,file=%s",
                            accel, image_path, events_path, trace_path);
    setup_full(t, cache_size, 1, VU_BASE_FEATURES | VU_SHM_FEATURES, extra);
    qvhost_user_fs_pci_place_cache_bar(t->fs, KVM_BAR_ADDR);
}

/* What fw_guest_setup() traced, once QEMU is gone; removes @dir */
static char *fw_guest_trace(const char *dir)
{
    g_autofree char *image_path = g_build_filename(dir, "guest.bin", NULL);
    g_autofree char *events_path = g_build_filename(dir, "events", NULL);
    g_autofree char *trace_path = g_build_filename(dir, "trace", NULL);
    char *trace = NULL;

    g_assert_true(g_file_get_contents(trace_path, &trace, NULL, NULL));
    unlink(image_path);
    unlink(events_path);
    unlink(trace_path);
    rmdir(dir);
    return trace;
}

static bool vm_running(TestCtx *t)
{
    QDict *rsp = qtest_qmp(t->qts, "{'execute': 'query-status'}");
    bool running = qdict_get_bool(qdict_get_qdict(rsp, "return"), "running");

    qobject_unref(rsp);
    return running;
}

/*
 * What the KVM truncate case saw, run once for both of its tests: the
 * mappings the window repaired, and how many of them through the path
 * without an address, after KVM_RUN failed with EFAULT (the rest came
 * through the SIGBUS handler)
 */
static struct {
    bool ran;
    const char *skipped;
    unsigned int fixups, efault_fixups;
} kvm_truncate_seen;

static void kvm_truncate_run(void)
{
    g_autofree char *dir = NULL, *trace = NULL;
    uint64_t seed = 0x4b564d;
    uint32_t passes;
    TestCtx t;
    int fd;

    if (kvm_truncate_seen.ran || kvm_truncate_seen.skipped) {
        return;
    }
    if (!qtest_has_accel("kvm")) {
        kvm_truncate_seen.skipped = "no usable KVM here (/dev/kvm)";
        return;
    }
    dir = g_dir_make_tmp("vuf-kvm-XXXXXX", NULL);
    g_assert_nonnull(dir);
    /* Both repairs' events */
    fw_guest_setup(&t, "kvm", "64M", dir, "virtio_shmem_arena_sigbus\n"
                   "virtio_shmem_arena_fixup_all\n");

    fd = make_file("vuf-kvm", 8 * MiB, seed);
    g_assert_cmpuint(shmem_map(t.be, fd, 0, 0, 8 * MiB, 0), ==, 0);
    qtest_writel(t.qts, KVM_GUEST_LEN, 8 * MiB);
    qtest_writel(t.qts, KVM_GUEST_WIN, KVM_BAR_ADDR);
    passes = kvm_guest_passes(&t, 0, 2);
    g_assert_cmphex(qtest_readl(t.qts, KVM_GUEST_SUM), !=, 0);

    /* The host cuts the file in half under the reading guest */
    g_assert_cmpint(ftruncate(fd, 4 * MiB), ==, 0);
    kvm_guest_passes(&t, passes, 3);
    g_assert_true(vm_running(&t));
    g_assert_cmphex(qtest_readq(t.qts, KVM_BAR_ADDR + 6 * MiB), ==, 0);
    g_assert_cmphex(qtest_readq(t.qts, KVM_BAR_ADDR + MiB), ==,
                    file_word(seed, MiB));

    g_assert_cmpuint(shmem_unmap(t.be, 0, 8 * MiB), ==, 0);
    close(fd);
    teardown(&t);

    trace = fw_guest_trace(dir);
    kvm_truncate_seen.fixups = trace_sum(trace, "virtio_shmem_arena_sigbus ",
                                         "");
    kvm_truncate_seen.efault_fixups =
        trace_sum(trace, "virtio_shmem_arena_fixup_all ", "EFAULT): ");
    kvm_truncate_seen.ran = true;
}

/* The guest went on because the window repaired the mapping, either way */
static void test_kvm_truncate(void)
{
    kvm_truncate_run();
    if (kvm_truncate_seen.skipped) {
        g_test_skip(kvm_truncate_seen.skipped);
        return;
    }
    g_test_message("repaired %u mappings: %u after KVM_RUN's EFAULT, %u in "
                   "the SIGBUS handler", kvm_truncate_seen.fixups,
                   kvm_truncate_seen.efault_fixups,
                   kvm_truncate_seen.fixups - kvm_truncate_seen.efault_fixups);
    g_assert_cmpuint(kvm_truncate_seen.fixups, >, 0);
    g_assert_cmpuint(kvm_truncate_seen.efault_fixups, <=,
                     kvm_truncate_seen.fixups);
}

/*
 * ...through the KVM patch's repair, after KVM_RUN failed with EFAULT.
 * A KVM that shadows the guest's page tables (kvm_pvm) raises SIGBUS in
 * the vCPU thread instead, and never takes that path: there this part
 * is skipped, saying so, never passed.
 */
static void test_kvm_truncate_efault(void)
{
    g_autofree char *why = NULL;

    kvm_truncate_run();
    if (kvm_truncate_seen.skipped) {
        g_test_skip(kvm_truncate_seen.skipped);
        return;
    }
    if (!kvm_truncate_seen.efault_fixups) {
        why = g_strdup_printf("the EFAULT repair was not reached: this KVM "
                              "raised SIGBUS in the vCPU thread (one that "
                              "shadows guest page tables, as kvm_pvm "
                              "does), and the signal path repaired %u "
                              "mappings", kvm_truncate_seen.fixups);
        g_test_skip(why);
        return;
    }
    g_assert_cmpuint(kvm_truncate_seen.efault_fixups, >, 0);
}

/*
 * window/readonly-stores from a guest: the firmware stores into every
 * page of 256 MiB of read-only ranges, pass after pass, and must go on
 * at no cost to QEMU.  Under TCG the vCPU thread's own store raises
 * SIGSEGV.  Under KVM, where the host virtualizes in hardware, each
 * store fails KVM_RUN with EFAULT, which says nothing of where; under
 * kvm_pvm the vCPU thread takes SIGSEGV, as under TCG.  Returns the
 * mappings the window made holes, and in @efault_fixups how many of them
 * after KVM_RUN failed with EFAULT.
 */
static unsigned int guest_readonly_stores(const char *accel,
                                          unsigned int *efault_fixups)
{
    g_autofree char *dir = g_dir_make_tmp("vuf-fw-XXXXXX", NULL);
    g_autofree char *trace = NULL;
    uint64_t seed = 0x4b564d2;
    uint64_t before, after, off;
    int fd;
    TestCtx t;

    g_assert_nonnull(dir);
    fw_guest_setup(&t, accel, "512M", dir,
                   "virtio_shmem_arena_readonly_store\n"
                   "virtio_shmem_arena_fixup_all\n");
    fd = make_file("vuf-fw-ro", RO_STORES_LEN, seed);
    for (off = 0; off < RO_STORES_LEN; off += TWO_MB) {
        g_assert_cmpuint(shmem_map(t.be, fd, off, off, TWO_MB, 0), ==, 0);
    }
    before = qemu_pss(&t);
    qtest_writel(t.qts, KVM_GUEST_STORE, 0x5707e);
    qtest_writel(t.qts, KVM_GUEST_LEN, RO_STORES_LEN);
    qtest_writel(t.qts, KVM_GUEST_WIN, KVM_BAR_ADDR);
    kvm_guest_passes(&t, 0, 3);
    g_assert_true(vm_running(&t));
    after = qemu_pss(&t);
    g_test_message("QEMU's Pss: %" PRIu64 " KiB before the stores, %" PRIu64
                   " KiB after", before / KiB, after / KiB);
    g_assert_cmpuint(after, <, before + RO_STORES_MAX_COST);

    g_assert_cmpuint(count_maps(&t, "vuf-fw-ro"), ==, 0);
    g_assert_cmphex(qtest_readl(t.qts, KVM_BAR_ADDR + 4 * MiB), ==, 0x5707e);
    for (off = 0; off < RO_STORES_LEN; off += 32 * MiB) {
        g_assert_cmphex(pread_word(fd, off), ==, file_word(seed, off));
    }

    g_assert_cmpuint(shmem_unmap(t.be, 0, RO_STORES_LEN), ==, 0);
    close(fd);
    teardown(&t);

    trace = fw_guest_trace(dir);
    *efault_fixups = trace_sum(trace, "virtio_shmem_arena_fixup_all ",
                               "EFAULT): ");
    return trace_sum(trace, "virtio_shmem_arena_readonly_store ", "");
}

static void test_tcg_readonly_stores(void)
{
    unsigned int efault_fixups;

    if (!qtest_has_accel("tcg")) {
        g_test_skip("no TCG in this QEMU");
        return;
    }
    /* One fix-up per 2 MiB mapping, in the SIGSEGV handler */
    g_assert_cmpuint(guest_readonly_stores("tcg", &efault_fixups), ==, 128);
    g_assert_cmpuint(efault_fixups, ==, 0);
}

/* What the KVM case saw, run once for both of its tests */
static struct {
    bool ran;
    const char *skipped;
    unsigned int fixups, efault_fixups;
} kvm_readonly_seen;

static void kvm_readonly_stores_run(void)
{
    if (kvm_readonly_seen.ran || kvm_readonly_seen.skipped) {
        return;
    }
    if (!qtest_has_accel("kvm")) {
        kvm_readonly_seen.skipped = "no usable KVM here (/dev/kvm)";
        return;
    }
    kvm_readonly_seen.fixups =
        guest_readonly_stores("kvm", &kvm_readonly_seen.efault_fixups);
    kvm_readonly_seen.ran = true;
}

/*
 * Either way every mapping became a hole: one at a time through SIGSEGV,
 * or all of them at once after an EFAULT
 */
static void test_kvm_readonly_stores(void)
{
    kvm_readonly_stores_run();
    if (kvm_readonly_seen.skipped) {
        g_test_skip(kvm_readonly_seen.skipped);
        return;
    }
    g_test_message("%u mappings made holes, %u of them after KVM_RUN's "
                   "EFAULT", kvm_readonly_seen.fixups,
                   kvm_readonly_seen.efault_fixups);
    g_assert_cmpuint(kvm_readonly_seen.fixups, ==, 128);
    g_assert_cmpuint(kvm_readonly_seen.efault_fixups, <=, 128);
}

/*
 * ...through the path without an address, after KVM_RUN failed with
 * EFAULT: skipped, saying so, where the vCPU thread took SIGSEGV instead
 * (kvm_pvm), as window/kvm-truncate-efault is.
 */
static void test_kvm_readonly_stores_efault(void)
{
    g_autofree char *why = NULL;

    kvm_readonly_stores_run();
    if (kvm_readonly_seen.skipped) {
        g_test_skip(kvm_readonly_seen.skipped);
        return;
    }
    if (!kvm_readonly_seen.efault_fixups) {
        why = g_strdup_printf("the EFAULT repair was not reached: this KVM "
                              "raised SIGSEGV in the vCPU thread (one that "
                              "shadows guest page tables, as kvm_pvm "
                              "does), and the signal path made %u "
                              "mappings holes", kvm_readonly_seen.fixups);
        g_test_skip(why);
        return;
    }
    g_assert_cmpuint(kvm_readonly_seen.efault_fixups, ==, 128);
}

/*
 * A back-end mapping page-sized pieces hits the cap on live mappings
 * (16384 for a small window) long before the host's VMA limit.
 */
static void test_mapping_limit(void)
{
    int fd = make_file("vuf-limit", TWO_MB, 0x77);
    const unsigned int max = 16384;
    unsigned int i;
    TestCtx t;

    setup(&t, "128M");
    for (i = 0; i < max; i++) {
        g_assert_cmpuint(shmem_map(t.be, fd, 0, (uint64_t)i * PAGE, PAGE, 0),
                         ==, 0);
    }
    g_assert_cmpuint(shmem_map(t.be, fd, 0, (uint64_t)max * PAGE, PAGE, 0),
                     ==, ENOSPC);
    /* Replacing one mapping by another stays possible at the limit */
    g_assert_cmpuint(shmem_map(t.be, fd, PAGE, 0, PAGE, VU_MAP_REPLACE),
                     ==, 0);
    g_assert_cmphex(bar_readq(&t, 0), ==, file_word(0x77, PAGE));
    g_assert_cmpuint(shmem_unmap(t.be, 0, (uint64_t)max * PAGE), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-limit"), ==, 0);
    close(fd);
    teardown(&t);
}

/*
 * Hot-plug and hot-unplug: the window's mappings and its reserved
 * address space go with the device, and QEMU carries on.
 */
static void test_hotplug_unplug(void)
{
    TestBackend *be = be_new(VU_BASE_FEATURES | VU_SHM_FEATURES);
    int fd = make_file("vuf-hotplug", TWO_MB, 0x66);
    QTestState *qts;
    TestCtx t = { .be = be };

    qts = qtest_initf("-machine pc -m 1G -nodefaults "
                      "-object memory-backend-memfd,id=mem,size=1G,"
                      "share=on -numa node,memdev=mem "
                      "-chardev socket,id=vuf,path=%s", be->sock_path);
    t.qts = qts;
    g_assert_cmpuint(window_hole_bytes(qts), ==, 0);

    qtest_qmp_device_add(qts, "vhost-user-fs-pci", "fs1",
                         "{'chardev': 'vuf', 'tag': 'hot', "
                         "'cache-size': %" PRIu64 ", 'addr': '05.0'}",
                         (uint64_t)(32 * GiB));
    g_assert_cmpuint(window_hole_bytes(qts), ==, 32 * GiB);

    g_mutex_lock(&be->lock);
    while (be->backend_req_fd < 0) {
        g_assert_true(g_cond_wait_until(&be->cond, &be->lock,
                                        g_get_monotonic_time() +
                                        TIMEOUT_MS * 1000));
    }
    g_mutex_unlock(&be->lock);
    g_assert_cmpuint(shmem_map(be, fd, 0, 0, TWO_MB, VU_MAP_RW), ==, 0);
    g_assert_cmpuint(count_maps(&t, "vuf-hotplug"), ==, 1);

    qpci_unplug_acpi_device_test(qts, "fs1", 5);
    g_assert_cmpuint(count_maps(&t, "vuf-hotplug"), ==, 0);
    g_assert_cmpuint(window_hole_bytes(qts), ==, 0);

    close(fd);
    qtest_quit(qts);
    be_free(be);
}

/*
 * Command line validation
 */

typedef struct BadOption {
    const char *name;
    const char *opts;
    const char *error;
    /* NULL for -machine pc and vhost-user-fs-pci */
    const char *machine;
    const char *driver;
    /* More QEMU options, or NULL */
    const char *extra;
} BadOption;

static const BadOption bad_options[] = {
    { "not-power-of-two", "cache-size=3M",
      "cache-size must be a power of two" },
    { "too-small", "cache-size=1M", "cache-size must be at least 2 MiB" },
    { "too-large", "cache-size=2T", "cache-size must be at most 1 TiB" },
    { "modern-pio-notify", "cache-size=2M,modern-pio-notify=on",
      "cache-size cannot be used with modern-pio-notify=on" },
    /* The default CPU model has phys-bits=40: a 1 TiB BAR lands at 1 TiB */
    { "beyond-phys-bits", "cache-size=1T",
      "cache-size=1 TiB does not fit in the guest physical address space" },
    /*
     * Not an error, only a warning (QEMU then fails because the
     * back-end hangs up): 128 MiB of RAM cannot hold the page structures.
     */
    { "guest-ram-warning", "cache-size=64G",
      "warning: vhost-user-fs: a Linux guest needs about 1 GiB of its RAM "
      "for cache-size=64 GiB, but the machine has 128 MiB" },
    /* Locking every future mapping would pin the whole window */
    { "mem-lock", "cache-size=16M",
      "cache-size cannot be used with -overcommit mem-lock=on",
      NULL, NULL, "-overcommit mem-lock=on" },
    /* QEMU's virtio-mmio cannot expose a shared memory region */
    { "virtio-mmio", "cache-size=16M",
      "cache-size needs a PCI transport: use vhost-user-fs-pci",
      "microvm", "vhost-user-fs-device" },
};

/*
 * The end of a QEMU that was expected to fail: its stderr (also to the
 * test log), once it exited; its status in @status.
 */
static char *qemu_failure_text(GPid pid, int err_fd, int status)
{
    GString *text = g_string_new("");
    char buf[1024];
    ssize_t n;

    g_spawn_close_pid(pid);
    while ((n = read(err_fd, buf, sizeof(buf))) > 0) {
        g_string_append_len(text, buf, n);
    }
    close(err_fd);
    g_test_message("%s", text->str);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), !=, 0);
    return g_string_free(text, false);
}

/*
 * GET_SHMEM_CONFIG: the device asks once per connection; a back-end that
 * states the window's size (as one written for QEMU 11.1's
 * vhost-user-device does) is served, one that states no size too (the
 * other tests), and one that expects another size is refused at realize
 * with both sizes in the error.
 */
static void test_shmem_config(void)
{
    TestCtx t;

    next_shmem_config_size = 64 * MiB;
    setup(&t, "64M");
    next_shmem_config_size = 0;
    g_mutex_lock(&t.be->lock);
    g_assert_cmpuint(t.be->shmem_config_asks, ==, 1);
    g_mutex_unlock(&t.be->lock);
    assert_alive(&t);
    teardown(&t);
}

static void test_shmem_config_mismatch(void)
{
    TestBackend *be;
    g_autofree char *cmd = NULL;
    g_autofree char *err = NULL;
    g_auto(GStrv) argv = NULL;
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    int status, err_fd;
    GPid pid;

    next_shmem_config_size = 32 * MiB;
    be = be_new(VU_BASE_FEATURES | VU_SHM_FEATURES);
    next_shmem_config_size = 0;
    cmd = g_strdup_printf("%s -machine pc -m 128M -nodefaults -display none "
                          "-accel qtest -object memory-backend-memfd,id=mem,"
                          "size=128M,share=on -numa node,memdev=mem "
                          "-chardev socket,id=vuf,path=%s "
                          "-device vhost-user-fs-pci,chardev=vuf,tag=myfs,"
                          "cache-size=64M", g_getenv("QTEST_QEMU_BINARY"),
                          be->sock_path);
    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD |
                                           G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                           NULL, &pid, NULL, NULL, &err_fd,
                                           NULL));
    /* A QEMU that accepted the back-end would run for ever: end it */
    while (waitpid(pid, &status, WNOHANG) == 0 &&
           g_get_monotonic_time() < deadline) {
        g_usleep(10 * 1000);
    }
    if (g_get_monotonic_time() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    err = qemu_failure_text(pid, err_fd, status);
    g_assert_nonnull(strstr(err, "the back-end expects shared memory region "
                            "0 to be 33554432 bytes, the device's is "
                            "67108864"));
    g_mutex_lock(&be->lock);
    g_assert_cmpuint(be->shmem_config_asks, ==, 1);
    g_mutex_unlock(&be->lock);
    be_free(be);
}

static void test_bad_option(const void *opaque)
{
    const BadOption *o = opaque;
    g_autofree char *dir = g_dir_make_tmp("vhost-user-fs-test-XXXXXX", NULL);
    g_autofree char *sock = g_strdup_printf("%s/s", dir);
    g_autofree char *chardev = g_strdup_printf(
        "socket,id=vuf,path=%s,server=on,wait=off", sock);
    g_autofree char *device = g_strdup_printf(
        "%s,chardev=vuf,tag=myfs,%s", o->driver ?: "vhost-user-fs-pci",
        o->opts);
    g_autofree char *err = NULL;
    g_autofree char *cmd = g_strdup_printf(
        "%s -machine %s -m 128M -nodefaults -display none -accel qtest "
        "-chardev %s -device %s %s", g_getenv("QTEST_QEMU_BINARY"),
        o->machine ?: "pc", chardev, device, o->extra ?: "");
    g_auto(GStrv) argv = NULL;
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    gint64 deadline = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    int status, err_fd;
    GPid pid;

    /* Like libqtest, allow extra options in QTEST_QEMU_BINARY */
    g_assert_nonnull(g_getenv("QTEST_QEMU_BINARY"));
    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                           NULL, &pid, NULL, NULL, &err_fd,
                                           NULL));

    /*
     * A device that gets past its checks waits for its back-end: be one
     * that hangs up at once, so that QEMU fails and exits.
     */
    g_strlcpy(addr.sun_path, sock, sizeof(addr.sun_path));
    while (waitpid(pid, &status, WNOHANG) == 0) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool connected = !connect(fd, (struct sockaddr *)&addr, sizeof(addr));

        close(fd);
        if (connected) {
            g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    err = qemu_failure_text(pid, err_fd, status);
    g_assert_nonnull(strstr(err, o->error));
    unlink(sock);
    rmdir(dir);
}

/*
 * Benchmark (-m perf): map+unmap pairs per second through the back-end
 * channel, with 1 and with 8192 live mappings.
 *
 * A pair costs a few tens of microseconds, almost all of it two round
 * trips between two processes (the profile shows the window's own work,
 * mmap() included, at well under a fifth of it): on a shared machine a
 * single timing of each case mostly measures what the other processes
 * did meanwhile.  So:
 * - the two cases are timed in rounds, in alternating order (1, 8192 |
 *   8192, 1 | 1, 8192 ...), so that neither is always the first or the
 *   last, and each round compares two blocks adjacent in time;
 * - within a block every pair is timed, and the block's figure is its
 *   median pair: a pair that waited for a CPU taken by another process
 *   is an outlier, not a cost of the window;
 * - the result is the median over the rounds.  The plain throughput of
 *   each block is printed too.
 */
#define BENCH_ROUNDS 9
#define BENCH_PAIRS 4000
#define BENCH_WARMUP 2000
#define BENCH_LIVE 8192
#define BENCH_WINDOW (16 * GiB)

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Sorts @v */
static double bench_median(double *v, unsigned int n)
{
    qsort(v, n, sizeof(*v), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Microseconds are too coarse for a pair: half of one is 2% */
static double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Time @n map+unmap pairs at window offset 0.  Returns the median pair
 * in seconds; *@secs gets the whole block's time.
 */
static double bench_pairs(TestCtx *t, int fd, unsigned int n, double *secs)
{
    g_autofree double *pair = g_new(double, n);
    double start = bench_now();
    double last = start;
    unsigned int i;

    for (i = 0; i < n; i++) {
        double now;

        g_assert_cmpuint(shmem_map(t->be, fd, 0, 0, TWO_MB, VU_MAP_RW),
                         ==, 0);
        g_assert_cmpuint(shmem_unmap(t->be, 0, TWO_MB), ==, 0);
        now = bench_now();
        pair[i] = now - last;
        last = now;
    }
    *secs = last - start;
    return bench_median(pair, n);
}

/* Fill the rest of the window with BENCH_LIVE - 1 read-only mappings */
static void bench_fill(TestCtx *t, int fd)
{
    unsigned int i;

    for (i = 1; i < BENCH_LIVE; i++) {
        g_assert_cmpuint(shmem_map(t->be, fd, 0, (uint64_t)i * TWO_MB,
                                   TWO_MB, 0), ==, 0);
    }
}

static void bench_drain(TestCtx *t)
{
    /* One request: the mappings tile the range exactly */
    g_assert_cmpuint(shmem_unmap(t->be, TWO_MB, BENCH_WINDOW - TWO_MB),
                     ==, 0);
}

static void bench_report(unsigned int live, double *pair, double *tput)
{
    double p = bench_median(pair, BENCH_ROUNDS);

    /* The "min perf:" lines are what bench/run.py reads */
    g_test_minimized_result(p, "%u live mapping%s: median pair %.1f us, "
                            "%.0f pairs/s; throughput %.0f pairs/s "
                            "(medians of %u rounds of %u pairs)",
                            live, live == 1 ? "" : "s", p * 1e6, 1 / p,
                            bench_median(tput, BENCH_ROUNDS), BENCH_ROUNDS,
                            BENCH_PAIRS);
}

static void test_bench(void)
{
    int fd = make_file("vuf-bench", TWO_MB, 1);
    double one[BENCH_ROUNDS], full[BENCH_ROUNDS], ratio[BENCH_ROUNDS];
    double one_tput[BENCH_ROUNDS], full_tput[BENCH_ROUNDS];
    double secs;
    bool filled = false;
    unsigned int r;
    TestCtx t;

    setup(&t, "16G");
    g_assert_cmpuint(BENCH_LIVE * TWO_MB, ==, BENCH_WINDOW);

    /* Fault in QEMU's and the kernel's paths before timing them */
    bench_pairs(&t, fd, BENCH_WARMUP, &secs);

    for (r = 0; r < BENCH_ROUNDS; r++) {
        /* Even rounds start where the previous one ended: 1 live */
        if (r % 2 == 0) {
            g_assert_false(filled);
            one[r] = bench_pairs(&t, fd, BENCH_PAIRS, &secs);
            one_tput[r] = BENCH_PAIRS / secs;
            bench_fill(&t, fd);
            filled = true;
            full[r] = bench_pairs(&t, fd, BENCH_PAIRS, &secs);
            full_tput[r] = BENCH_PAIRS / secs;
        } else {
            g_assert_true(filled);
            full[r] = bench_pairs(&t, fd, BENCH_PAIRS, &secs);
            full_tput[r] = BENCH_PAIRS / secs;
            bench_drain(&t);
            filled = false;
            one[r] = bench_pairs(&t, fd, BENCH_PAIRS, &secs);
            one_tput[r] = BENCH_PAIRS / secs;
        }
        /* How fast 8192 live goes, relative to 1 live */
        ratio[r] = one[r] / full[r];
        g_test_message("round %u: 1 live: median pair %.1f us, throughput "
                       "%.0f pairs/s; %u live: %.1f us, %.0f pairs/s; "
                       "ratio %.2f", r, one[r] * 1e6, one_tput[r],
                       BENCH_LIVE, full[r] * 1e6, full_tput[r], ratio[r]);
    }
    if (filled) {
        bench_drain(&t);
    }

    g_test_message("%u live vs 1 live: median ratio of pair rates %.2f",
                   BENCH_LIVE, bench_median(ratio, BENCH_ROUNDS));
    bench_report(1, one, one_tput);
    bench_report(BENCH_LIVE, full, full_tput);

    close(fd);
    teardown(&t);
}

int main(int argc, char **argv)
{
    size_t i;

    g_test_init(&argc, &argv, NULL);

    if (!qtest_has_device("vhost-user-fs-pci")) {
        g_test_skip("vhost-user-fs-pci is not built in");
        return g_test_run();
    }

    qtest_add_func("/vhost-user-fs/config-and-queues", test_config_and_queues);
    qtest_add_func("/vhost-user-fs/no-cache-is-upstream", test_no_cache);
    qtest_add_func("/vhost-user-fs/window/bar-and-capability",
                   test_window_bar_and_cap);
    qtest_add_func("/vhost-user-fs/window/q35", test_window_q35);
    qtest_add_func("/vhost-user-fs/window/shmem-config", test_shmem_config);
    qtest_add_func("/vhost-user-fs/window/shmem-config-mismatch",
                   test_shmem_config_mismatch);
    qtest_add_func("/vhost-user-fs/window/not-in-memory-table",
                   test_window_not_in_mem_table);
    qtest_add_func("/vhost-user-fs/window/map-read-write-unmap",
                   test_map_read_write_unmap);
    qtest_add_func("/vhost-user-fs/window/replace", test_replace);
    qtest_add_func("/vhost-user-fs/window/replace-never-shows-zeros",
                   test_replace_atomic);
    qtest_add_func("/vhost-user-fs/window/readonly-stores",
                   test_readonly_stores);
    qtest_add_func("/vhost-user-fs/window/other-sigsegv", test_other_sigsegv);
    qtest_add_func("/vhost-user-fs/window/replace-needs-feature",
                   test_replace_needs_feature);
    qtest_add_func("/vhost-user-fs/window/invalid-requests",
                   test_invalid_map_requests);
    qtest_add_func("/vhost-user-fs/window/mem-read-write", test_mem_rw);
    qtest_add_func("/vhost-user-fs/backend/served-while-stopping",
                   test_stop_serves_backend);
    qtest_add_func("/vhost-user-fs/window/reset-drops-mappings",
                   test_reset_drops_mappings);
    qtest_add_func("/vhost-user-fs/window/disconnect-drops-mappings",
                   test_disconnect_drops_mappings);
    qtest_add_func("/vhost-user-fs/backend/garbage-on-backend-channel",
                   test_backend_garbage);
    qtest_add_func("/vhost-user-fs/backend/bad-replies",
                   test_backend_bad_replies);
    qtest_add_func("/vhost-user-fs/backend/channel-breaks-in-wait",
                   test_backend_channel_breaks_in_wait);
    qtest_add_func("/vhost-user-fs/window/8192-mappings", test_many_mappings);
    qtest_add_func("/vhost-user-fs/window/mapping-limit", test_mapping_limit);
    qtest_add_func("/vhost-user-fs/window/kvm-truncate", test_kvm_truncate);
    qtest_add_func("/vhost-user-fs/window/kvm-truncate-efault",
                   test_kvm_truncate_efault);
    qtest_add_func("/vhost-user-fs/window/tcg-readonly-stores",
                   test_tcg_readonly_stores);
    qtest_add_func("/vhost-user-fs/window/kvm-readonly-stores",
                   test_kvm_readonly_stores);
    qtest_add_func("/vhost-user-fs/window/kvm-readonly-stores-efault",
                   test_kvm_readonly_stores_efault);
    qtest_add_func("/vhost-user-fs/window/migration-blocked",
                   test_migration_blocked);
    qtest_add_func("/vhost-user-fs/window/migration-with-window",
                   test_migration_with_window);
    qtest_add_func("/vhost-user-fs/window/hotplug-unplug",
                   test_hotplug_unplug);
    for (i = 0; i < ARRAY_SIZE(bad_options); i++) {
        g_autofree char *path = g_strdup_printf("/vhost-user-fs/cmdline/%s",
                                                bad_options[i].name);

        qtest_add_data_func(path, &bad_options[i], test_bad_option);
    }
    if (g_test_perf()) {
        qtest_add_func("/vhost-user-fs/bench/map-unmap", test_bench);
    }

    return g_test_run();
}
