/*
 * virtiofsd: the vhost-user transport
 *
 * The main thread handles the front-end's vhost-user messages; each
 * started virtqueue (0 is hiprio, 1..N carry requests) has a thread that
 * waits for kicks and pops requests.  libvhost-user is not thread-safe:
 * the main thread holds dispatch_lock for writing while it processes a
 * message, queue threads and workers hold it for reading while they touch
 * a virtqueue or guest memory, and each queue's lock orders pops and
 * pushes.
 *
 * This file is the device: what it offers the front-end (features,
 * config space, shared memory), the messages libvhost-user leaves to
 * us, the back-end state transfer, and the serve loop with the device's
 * setup and teardown.  Its workers are in files of their own: the queue
 * threads (vhost-queue.c), blocking requests and their parking
 * (vhost-park.c), the DAX back-end (vhost-dax.c); what they share is in
 * vhost-dev.h, with the lock order.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "libvhost-user.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_ring.h"

#include "vhost.h"
#include "vhost-dax.h"
#include "vhost-dev.h"
#include "vhost-park.h"
#include "vhost-queue.h"
#include "dax.h"
#include "fs.h"
#include "inode.h"
#include "intr.h"
#include "log.h"
#include "migrate.h"

static uint64_t get_features(VuDev *vu)
{
    return 1ULL << VIRTIO_F_VERSION_1 |
           1ULL << VIRTIO_RING_F_INDIRECT_DESC |
           1ULL << VIRTIO_RING_F_EVENT_IDX;
}

/*
 * Back-end state transfer (QEMU 8.2 and later), which our libvhost-user
 * does not know: the front-end gives us one end of a pipe, we write the
 * state into it (source) or read it (destination), and CHECK asks how
 * that went.
 */
#define VFSD_VHOST_USER_PROTOCOL_F_DEVICE_STATE 19
#define VFSD_VHOST_USER_SET_DEVICE_STATE_FD 42
#define VFSD_VHOST_USER_CHECK_DEVICE_STATE 43
/* SET_DEVICE_STATE_FD's reply: no fd of ours comes back */
#define VFSD_DEVICE_STATE_NO_FD (1ULL << 8)
/* The only phase there is: the device stopped, after the RAM went */
#define VFSD_DEVICE_STATE_PHASE_STOPPED 0

static uint64_t get_protocol_features(VuDev *vu)
{
    VfsdDev *dev = vfsd_dev_of(vu);
    uint64_t features = 1ULL << VHOST_USER_PROTOCOL_F_SHMEM |
                        1ULL << VHOST_USER_PROTOCOL_F_SHMEM_REPLACE |
                        1ULL << VHOST_USER_PROTOCOL_F_MEM_RW;

    /*
     * Only with a tag to put in it: a front-end that asks us for the
     * config space (upstream QEMU's generic vhost-user device) could not
     * give the guest a mount tag otherwise.  QEMU's vhost-user-fs does
     * not acknowledge the feature; it has its tag property.
     */
    if (dev->fs->opts->tag) {
        features |= 1ULL << VHOST_USER_PROTOCOL_F_CONFIG;
    }
    /* Without it QEMU refuses to migrate the guest, as asked */
    if (!dev->fs->opts->no_migration) {
        features |= 1ULL << VFSD_VHOST_USER_PROTOCOL_F_DEVICE_STATE;
        /*
         * dax.c carries the window's mappings in the state and maps them
         * again on the destination (vfsd_dax_restore()).  The variable
         * plays a back-end without it, whose guest QEMU must refuse to
         * migrate while it has a DAX window: for the tests.
         */
        if (!g_getenv("VIRTIOFSD_TEST_NO_SHMEM_MIGRATE")) {
            features |= 1ULL << VFSD_VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE;
        }
    }
    return features;
}

/* struct virtio_fs_config, without the optional notify_buf_size */
#define VFSD_CONFIG_TAG_OFFSET 0
#define VFSD_CONFIG_NUM_QUEUES_OFFSET 36
#define VFSD_CONFIG_SIZE 40

static int get_config(VuDev *vu, uint8_t *config, uint32_t len)
{
    VfsdDev *dev = vfsd_dev_of(vu);
    const char *tag = dev->fs->opts->tag;
    uint8_t cfg[VFSD_CONFIG_SIZE] = { 0 };
    uint32_t queues = GUINT32_TO_LE(1);

    if (!tag || len > VHOST_USER_MAX_CONFIG_SIZE) {
        vfsd_warn("front-end asked for %u bytes of config space%s", len,
                  tag ? "" : " but no --tag was given");
        return -1;
    }
    /*
     * One request queue: the guest uses as many as the config says, and
     * the device's number of queues is not ours to know.
     */
    memcpy(cfg + VFSD_CONFIG_TAG_OFFSET, tag, strlen(tag));
    memcpy(cfg + VFSD_CONFIG_NUM_QUEUES_OFFSET, &queues, sizeof(queues));
    memset(config, 0, len);
    memcpy(config, cfg, MIN(len, sizeof(cfg)));
    return 0;
}

/*
 * VHOST_USER_GET_SHMEM_CONFIG (upstream QEMU 11.1 and later): the size of
 * each shared memory region by shmid, here only the DAX window.  Our
 * libvhost-user does not know the request and its message buffer is
 * smaller than the reply, so the reply is written here.
 */
#define VFSD_VHOST_USER_GET_SHMEM_CONFIG 44
/*
 * Only upstream QEMU asks for it, and there every live mapping becomes a
 * region of the vhost memory table (see vhost-dax.c, dax_wait_begin()).
 * Past VHOST_USER_MAX_RAM_SLOTS regions libvhost-user gives up on the
 * device: measured with 11.1 and a 2 GiB window, the daemon disconnected
 * at 509 live mappings, and each map took ~0.3 s by then.  256 ranges of
 * 2 MiB leave the guest's RAM (and DIMMs) their slots.
 */
#define VFSD_UPSTREAM_MAX_WINDOW (512ULL << 20)
/* The version bits of a message's flags; libvhost-user keeps it private */
#define VFSD_VHOST_USER_VERSION 0x1
#define VFSD_VHOST_USER_MAX_SHMEM_REGIONS 256

static bool send_shmem_config(VfsdDev *dev, const VhostUserMsg *req,
                              char **err)
{
    struct {
        uint32_t nregions;
        uint32_t padding;
        uint64_t memory_sizes[VFSD_VHOST_USER_MAX_SHMEM_REGIONS];
    } reply = { 0 };
    VhostUserMsg hdr = {
        .request = req->request,
        .flags = VFSD_VHOST_USER_VERSION | VHOST_USER_REPLY_MASK,
        .size = sizeof(reply),
    };
    struct iovec iov[2] = {
        { .iov_base = &hdr, .iov_len = VHOST_USER_HDR_SIZE },
        { .iov_base = &reply, .iov_len = sizeof(reply) },
    };
    size_t want = VHOST_USER_HDR_SIZE + sizeof(reply);
    ssize_t n;

    if (dev->fs->opts->cache_size) {
        /*
         * A front-end with F_SHMEM_REPLACE (vhost-user-fs-pci's cache-size)
         * keeps mappings out of the memory table, and asks only to check
         * the window it sized itself.
         */
        uint64_t size = dev->fs->opts->cache_size;

        if (!vfsd_dev_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM_REPLACE)) {
            size = MIN(size, VFSD_UPSTREAM_MAX_WINDOW);
        }

        /* Once per connection: the front-end asks at realize */
        if (size < dev->fs->opts->cache_size) {
            vfsd_warn("--cache-size capped to %" PRIu64 " MiB for this "
                      "front-end: each DAX mapping takes one of the "
                      "daemon's %d memory slots", size >> 20,
                      VHOST_USER_MAX_RAM_SLOTS);
        }
        reply.nregions = 1;
        reply.memory_sizes[VFSD_DAX_SHMID] = size;
    }
    do {
        n = writev(dev->vu.sock, iov, 2);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)want) {
        *err = g_strdup_printf("cannot send the shared memory "
                               "configuration: %s",
                               n < 0 ? strerror(errno) : "short write");
        return false;
    }
    return true;
}

/*
 * libvhost-user gave up on the device, possibly in a queue thread: the
 * main thread ends the session rather than leave the guest waiting.
 */
static void panic_cb(VuDev *vu, const char *err)
{
    VfsdDev *dev = vfsd_dev_of(vu);

    vfsd_err("vhost-user: %s", err ? err : "unknown error");
    eventfd_write(dev->panic_fd, 1);
}

/* Kick fds are polled by the queue threads, never by libvhost-user */
static void set_watch(VuDev *vu, int fd, int condition, vu_watch_cb cb,
                      void *data)
{
}

static void remove_watch(VuDev *vu, int fd)
{
}

static int reply_u64(VhostUserMsg *vmsg, uint64_t v, int *do_reply)
{
    vmsg->payload.u64 = v;
    vmsg->size = sizeof(vmsg->payload.u64);
    vmsg->fd_num = 0;
    *do_reply = 1;
    return 1;
}

/* Waits for a transfer under way; its result, or true if none */
static bool mig_xfer_end(VfsdDev *dev)
{
    g_autofree char *err = NULL;

    if (!dev->mig_xfer) {
        return true;
    }
    if (!vfsd_migrate_end(g_steal_pointer(&dev->mig_xfer), &err)) {
        vfsd_err("migration: %s", err);
        /* A load that failed after them: none of it is the guest's */
        g_mutex_lock(&dev->park_lock);
        vfsd_park_drop(dev, -1, true);
        g_mutex_unlock(&dev->park_lock);
        return false;
    }
    return true;
}

static int set_device_state_fd(VfsdDev *dev, VhostUserMsg *vmsg,
                               int *do_reply)
{
    struct {
        uint32_t direction;
        uint32_t phase;
    } params;
    g_autofree char *err = NULL;
    int fd = vmsg->fd_num == 1 ? vmsg->fds[0] : -1;
    unsigned int i;

    /* A new transfer replaces one the front-end gave up on */
    mig_xfer_end(dev);
    for (i = fd >= 0 ? 1 : 0; i < vmsg->fd_num; i++) {
        close(vmsg->fds[i]);
    }
    if (fd < 0 || vmsg->size < sizeof(params) ||
        !vfsd_dev_has_proto(dev, VFSD_VHOST_USER_PROTOCOL_F_DEVICE_STATE)) {
        vfsd_err("migration: malformed SET_DEVICE_STATE_FD (%u fds, %u "
                 "bytes)", vmsg->fd_num, vmsg->size);
        if (fd >= 0) {
            close(fd);
        }
        return reply_u64(vmsg, 1 | VFSD_DEVICE_STATE_NO_FD, do_reply);
    }
    memcpy(&params, &vmsg->payload, sizeof(params));
    if ((params.direction != VFSD_MIG_SAVE &&
         params.direction != VFSD_MIG_LOAD) ||
        params.phase != VFSD_DEVICE_STATE_PHASE_STOPPED) {
        vfsd_err("migration: unknown transfer direction %u or phase %u",
                 params.direction, params.phase);
        close(fd);
        return reply_u64(vmsg, 1 | VFSD_DEVICE_STATE_NO_FD, do_reply);
    }
    vfsd_info("migration: %s the device state",
              params.direction == VFSD_MIG_SAVE ? "saving" : "loading");
    dev->mig_xfer = vfsd_migrate_begin(dev->fs, params.direction, fd, &err);
    if (!dev->mig_xfer) {
        vfsd_err("migration: %s", err);
        return reply_u64(vmsg, 1 | VFSD_DEVICE_STATE_NO_FD, do_reply);
    }
    return reply_u64(vmsg, VFSD_DEVICE_STATE_NO_FD, do_reply);
}

/*
 * libvhost-user reads a closed connection as a VHOST_USER_NONE message and
 * ends the process (the front-end has dropped its mappings already).
 */
static int process_msg(VuDev *vu, VhostUserMsg *vmsg, int *do_reply)
{
    VfsdDev *dev = vfsd_dev_of(vu);

    switch (vmsg->request) {
    case VHOST_USER_SET_MEM_TABLE:
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_REM_MEM_REG:
        /* Requests popped before now reach the guest by address */
        dev->mem_gen++;
        return 0;
    case VHOST_USER_NONE:
        vfsd_info("front-end disconnected, exiting");
        /* libvhost-user exits right after this: no cleanup will report */
        if (dev->fs->stats) {
            vfsd_stats_report(dev->fs->stats);
        }
        vfsd_inodes_report(dev->fs);
        if (dev->fs->opts->poll_us) {
            vfsd_info("--poll-us: requests found by polling %d times",
                      g_atomic_int_get(&dev->polled));
        }
        return 0;
    case VFSD_VHOST_USER_GET_SHMEM_CONFIG: {
        g_autofree char *err = NULL;

        if (!send_shmem_config(dev, vmsg, &err)) {
            vfsd_err("%s", err);
            dev->vu.broken = true;
        }
        *do_reply = 0;
        return 1;
    }
    case VFSD_VHOST_USER_SET_DEVICE_STATE_FD:
        return set_device_state_fd(dev, vmsg, do_reply);
    case VFSD_VHOST_USER_CHECK_DEVICE_STATE:
        /* No transfer at all is a failed one too */
        return reply_u64(vmsg, dev->mig_xfer && mig_xfer_end(dev) ? 0 : 1,
                         do_reply);
    case VHOST_USER_SET_CONFIG:
        /*
         * virtio-fs has no writable config field.  libvhost-user would
         * ignore the write, or take a refusal as fatal: refuse it here,
         * in the reply when one is asked for.
         */
        vfsd_guest_error("config space write of %u bytes refused: it is "
                         "read-only", vmsg->payload.config.size);
        if (vmsg->flags & VHOST_USER_NEED_REPLY_MASK) {
            vmsg->payload.u64 = 1;
            vmsg->size = sizeof(vmsg->payload.u64);
            vmsg->fd_num = 0;
            *do_reply = 1;
        } else {
            *do_reply = 0;
        }
        return 1;
    }
    return 0;
}

static const VuDevIface iface = {
    .process_msg = process_msg,
    .get_features = get_features,
    .get_protocol_features = get_protocol_features,
    .get_config = get_config,
    .queue_set_started = vfsd_queue_set_started,
};

/* The device on @conn_fd, its pools and DAX window; NULL if it fails */
static VfsdDev *serve_setup(VfsdFs *fs, int conn_fd, char **err)
{
    VfsdDev *dev = g_new0(VfsdDev, 1);
    pthread_rwlockattr_t attr;

    dev->fs = fs;
    dev->watch_stop_fd = -1;
    dev->panic_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    dev->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (dev->panic_fd < 0 || dev->cancel_fd < 0) {
        *err = g_strdup_printf("eventfd: %s", strerror(errno));
        close(dev->panic_fd);
        close(dev->cancel_fd);
        g_free(dev);
        return NULL;
    }
    /* The main thread must not starve behind busy queues */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&dev->dispatch_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (!vu_init(&dev->vu, VFSD_MAX_QUEUES, conn_fd, panic_cb, NULL,
                 set_watch, remove_watch, &iface)) {
        *err = g_strdup("cannot initialize the vhost-user device");
        close(dev->panic_fd);
        close(dev->cancel_fd);
        g_free(dev);
        return NULL;
    }
    vu_set_unmapped_buffers_allowed(&dev->vu, true);
    vu_set_backend_cancel_fd(&dev->vu, dev->cancel_fd);
    fs->dax = vfsd_vhost_dax_new(dev);
    if (fs->opts->thread_pool_size) {
        dev->pool = g_thread_pool_new(vfsd_queue_pool_worker, dev,
                                      fs->opts->thread_pool_size, FALSE,
                                      NULL);
    }
    dev->blocking_pool = g_thread_pool_new(vfsd_park_worker, dev,
                                           VFSD_MAX_BLOCKING, FALSE, NULL);
    g_mutex_init(&dev->park_lock);
    g_cond_init(&dev->park_cond);
    g_queue_init(&dev->parked);
    vfsd_migrate_set_hook(fs, &(VfsdMigHook) {
        .save = vfsd_park_save,
        .load = vfsd_park_load,
        .opaque = dev,
    });
    return dev;
}

/* The DAX window's helpers; false if one asked for cannot start */
static bool serve_start_dax(VfsdDev *dev, char **err)
{
    VfsdFs *fs = dev->fs;

    /* Asked for explicitly: not serving beats serving without it */
    if (fs->opts->watch_truncate && !vfsd_vhost_dax_watch_start(dev, err)) {
        return false;
    }
    if (fs->opts->dax_unmap_delay_ms) {
        g_autofree char *why = NULL;

        /* Only slower without it */
        if (!vfsd_dax_lazy_start(fs->dax, fs->opts->dax_unmap_delay_ms,
                                 &why)) {
            vfsd_warn("%s", why);
        }
    }
    return true;
}

/*
 * Serves vhost-user messages and the lazy unmaps until the front-end
 * disconnects (true) or something breaks (false)
 */
static bool serve_loop(VfsdDev *dev, int conn_fd, char **err)
{
    VfsdFs *fs = dev->fs;

    for (;;) {
        /* A negative fd (lazy unmaps off) is left out by poll() */
        struct pollfd pfd[3] = {
            { .fd = conn_fd, .events = POLLIN },
            { .fd = dev->panic_fd, .events = POLLIN },
            { .fd = vfsd_dax_flush_fd(fs->dax), .events = POLLIN },
        };
        bool more;

        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            *err = g_strdup_printf("poll: %s", strerror(errno));
            return false;
        }
        if (pfd[1].revents) {
            *err = g_strdup("vhost-user device broken, disconnecting");
            return false;
        }
        if (pfd[2].revents & POLLIN) {
            /* Unmaps talk to the front-end, like a worker's */
            vfsd_dev_read_lock(dev);
            vfsd_dax_flush(fs);
            vfsd_dev_read_unlock(dev);
            if (!pfd[0].revents) {
                continue;
            }
        }
        pthread_rwlock_wrlock(&dev->dispatch_lock);
        more = vu_dispatch(&dev->vu);
        pthread_rwlock_unlock(&dev->dispatch_lock);
        if (!more) {
            vfsd_info("front-end disconnected");
            return true;
        }
        if (dev->vu.broken) {
            *err = g_strdup("vhost-user device broken, disconnecting");
            return false;
        }
    }
}

/* Stops the queues and pools, and drops the session's state */
static void serve_teardown(VfsdDev *dev)
{
    VfsdFs *fs = dev->fs;
    unsigned int i;

    pthread_rwlock_wrlock(&dev->dispatch_lock);
    for (i = 0; i < VFSD_MAX_QUEUES; i++) {
        vfsd_queue_stop(dev, i);
    }
    pthread_rwlock_unlock(&dev->dispatch_lock);
    vfsd_vhost_dax_watch_stop(dev);
    if (dev->pool) {
        g_thread_pool_free(dev->pool, FALSE, TRUE);
    }
    /*
     * Lock waiters give up (EINTR) and their replies are dropped: nothing
     * of theirs may run on once the file system and dev are gone.
     */
    vfsd_interrupt_all(fs);
    g_thread_pool_free(dev->blocking_pool, FALSE, TRUE);

    mig_xfer_end(dev);
    vfsd_migrate_free(fs);
    vfsd_park_drop(dev, -1, false);
    vfsd_park_drop(dev, -1, true);
    g_mutex_clear(&dev->park_lock);
    g_cond_clear(&dev->park_cond);
    /* The front-end drops its mappings on disconnect */
    vfsd_dax_forget_all(fs);
    vfsd_fs_reset(fs);
    vfsd_dax_free(fs->dax);
    fs->dax = NULL;
    vu_deinit(&dev->vu);
    pthread_rwlock_destroy(&dev->dispatch_lock);
    close(dev->panic_fd);
    close(dev->cancel_fd);
    g_free(dev);
}

bool vfsd_vhost_serve(VfsdFs *fs, int conn_fd)
{
    g_autofree char *err = NULL;
    VfsdDev *dev = serve_setup(fs, conn_fd, &err);
    bool ok;

    /* The top of the daemon's chain: nothing above logs (main.c exits) */
    if (!dev) {
        vfsd_err("%s", err);
        return false;
    }
    ok = serve_start_dax(dev, &err) && serve_loop(dev, conn_fd, &err);
    if (!ok) {
        /* Before the teardown's own lines, as when the loop logged it */
        vfsd_err("%s", err);
    }
    serve_teardown(dev);
    return ok;
}
