/*
 * virtiofsd: the DAX window's back-end over vhost-user
 *
 * dax.c decides what the window holds; this file carries its decisions
 * to the front-end (map and unmap requests on the back-end channel), and
 * runs the thread that watches for host-side truncation of mapped files.
 * A thread that waits here for the front-end may let dispatch_lock go
 * (dax_wait_begin()), and then reaches its request's buffers by guest
 * address afterwards.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vhost-dax.h"
#include "vhost-dev.h"
#include "dax.h"
#include "log.h"

static bool dax_available(void *opaque)
{
    VfsdDev *dev = opaque;

    return vfsd_dev_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM) &&
           dev->vu.backend_fd >= 0;
}

static bool dax_can_replace(void *opaque)
{
    VfsdDev *dev = opaque;

    return vfsd_dev_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM_REPLACE);
}

/*
 * Upstream QEMU (11.1) puts each window mapping into the vhost memory
 * table: right after answering a map or unmap, it sends us ADD_MEM_REG or
 * REM_MEM_REG and waits for the answer, and reads no back-end request
 * meanwhile.  Our main thread needs dispatch_lock for writing to take that
 * message, so a thread that held it for reading while it waited for the
 * answer to its next map or unmap would deadlock QEMU and us (a truncate
 * cuts several mappings in a row).  With such a front-end, the lock is let
 * go for the wait, by a thread that holds it for reading (a thread
 * without it has nothing to let go).  It touches no guest memory
 * meanwhile, and afterwards reaches its request's buffers through the
 * table then in force (thread_req_retranslate()): the window regions the
 * front-end added or removed may have held them.  Returns whether the
 * lock was let go.  A QEMU that offers F_SHMEM_REPLACE serves back-end
 * requests while it waits and never needs this.
 */
static bool dax_wait_begin(VfsdDev *dev)
{
    if (dax_can_replace(dev) || !vfsd_thread_reads()) {
        return false;
    }
    vfsd_thread_batch_signal();
    vfsd_dev_read_unlock(dev);
    return true;
}

/*
 * The request this thread runs was translated to host addresses under
 * the memory table of its pop.  The front-end may have changed the table
 * while we waited: a REM_MEM_REG of the window range the guest put its
 * reply buffer in unmaps what those addresses point at, and another
 * mapping may sit there now.  So every piece is reached by guest address
 * from now on, under the table in force at each access; a piece the table
 * no longer holds fails the access, and the request with it, as a buffer
 * outside guest memory does.
 */
static void thread_req_retranslate(VfsdDev *dev)
{
    VfsdRunning *r = vfsd_thread_req();
    VuVirtqElement *e;
    unsigned int d, i;

    if (!r || r->el->by_gpa || r->el->mem_gen == dev->mem_gen) {
        return;
    }
    e = &r->el->elem;
    for (d = 0; d < 2; d++) {
        uint64_t *gpa = r->el->gpa + (d ? e->out_num : 0);

        for (i = 0; i < r->nsegs[d]; i++) {
            r->segs[d][i].base = NULL;
            r->segs[d][i].addr = gpa[i];
        }
    }
    r->el->by_gpa = true;
    vfsd_debug("queue %d: memory table changed during a front-end round "
               "trip: request buffers reached by guest address",
               r->el->qidx);
}

static void dax_wait_end(VfsdDev *dev, bool dropped)
{
    if (dropped) {
        vfsd_dev_read_lock(dev);
        thread_req_retranslate(dev);
    }
}

static bool dax_map(void *opaque, uint64_t fd_offset, uint64_t shm_offset,
                    uint64_t len, uint64_t flags, int fd)
{
    VfsdDev *dev = opaque;
    bool dropped = dax_wait_begin(dev);
    bool ok;

    errno = 0;
    ok = vu_shmem_map(&dev->vu, VFSD_DAX_SHMID, fd_offset, shm_offset, len,
                      flags, fd);
    if (!ok && errno == ECANCELED) {
        /*
         * A stop gave the wait up (vfsd_queue_stop()): the front-end carries
         * the map out after the stop, or refuses it.  Either way it is
         * undone right after, so that the window holds what our records
         * say: nothing there.
         */
        vfsd_info("DAX: device stopping: map of window range 0x%" PRIx64
                  "+0x%" PRIx64 " given up, and undone", shm_offset, len);
        vu_shmem_unmap_nowait(&dev->vu, VFSD_DAX_SHMID, shm_offset, len);
        vfsd_thread_set_cancelled(true);
    }
    dax_wait_end(dev, dropped);
    return ok;
}

static bool dax_unmap(void *opaque, uint64_t shm_offset, uint64_t len)
{
    VfsdDev *dev = opaque;
    bool dropped = dax_wait_begin(dev);
    bool ok;

    errno = 0;
    ok = vu_shmem_unmap(&dev->vu, VFSD_DAX_SHMID, shm_offset, len);
    if (!ok && errno == ECANCELED) {
        /* Sent, and handled after the stop: as good as unmap_nowait's */
        ok = true;
        vfsd_thread_set_cancelled(true);
    }
    dax_wait_end(dev, dropped);
    return ok;
}

/*
 * Not waiting for the reply is not enough with upstream QEMU: it reads no
 * back-end request while it waits for our answer to the REM_MEM_REG of an
 * earlier unmap, so a run of unmaps (a REMOVEMAPPING of 256 ranges) fills
 * the back-end socket and the write blocks, with the lock still held that
 * our main thread needs to give that answer.  Seen as a hang of guest and
 * daemon in make bench.
 */
static bool dax_unmap_nowait(void *opaque, uint64_t shm_offset, uint64_t len)
{
    VfsdDev *dev = opaque;
    bool dropped = dax_wait_begin(dev);
    bool ok;

    ok = vu_shmem_unmap_nowait(&dev->vu, VFSD_DAX_SHMID, shm_offset, len);
    dax_wait_end(dev, dropped);
    return ok;
}

static bool dax_can_migrate(void *opaque)
{
    return vfsd_dev_has_proto(opaque,
                                VFSD_VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE);
}

/*
 * The window's lock, or an inode's setup lock (dax.c), is held across
 * the round trips above, with dispatch_lock let go.  A second thread
 * that waited for it holding dispatch_lock (a pool worker, a second
 * queue, the truncation watch) would keep our main thread from the
 * ADD_MEM_REG or REM_MEM_REG the holder's front-end waits on, and with
 * a writer waiting, the holder could not take dispatch_lock back
 * either: it lets dispatch_lock go while it waits, which the holder's
 * round trip does the same way.
 */
static void dax_lock(void *opaque, GMutex *lock)
{
    VfsdDev *dev = opaque;
    bool dropped;

    if (g_mutex_trylock(lock)) {
        return;
    }
    dropped = dax_wait_begin(dev);
    g_mutex_lock(lock);
    dax_wait_end(dev, dropped);
}
VfsdDax *vfsd_vhost_dax_new(VfsdDev *dev)
{
    VfsdDaxBackend be = {
        .available = dax_available,
        .can_replace = dax_can_replace,
        .map = dax_map,
        .unmap = dax_unmap,
        .unmap_nowait = dax_unmap_nowait,
        .can_migrate = dax_can_migrate,
        .lock = dax_lock,
        .opaque = dev,
    };

    return vfsd_dax_new(&be);
}

/*
 * Host-side truncation of mapped files.  Its own thread, so that
 * requests never wait for it; it takes dispatch_lock like a worker, since
 * dropping mappings talks to the front-end through libvhost-user.
 */
static void *watch_thread(void *opaque)
{
    VfsdDev *dev = opaque;
    int watch_fd = vfsd_dax_watch_fd(dev->fs->dax);

    for (;;) {
        struct pollfd pfd[2] = {
            { .fd = watch_fd, .events = POLLIN },
            { .fd = dev->watch_stop_fd, .events = POLLIN },
        };

        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            vfsd_err("truncation watch: poll: %s", strerror(errno));
            break;
        }
        if (pfd[1].revents) {
            break;
        }
        if (pfd[0].revents & POLLIN) {
            vfsd_dev_read_lock(dev);
            vfsd_dax_watch_events(dev->fs);
            vfsd_dev_read_unlock(dev);
        }
    }
    return NULL;
}

bool vfsd_vhost_dax_watch_start(VfsdDev *dev, char **err)
{
    int ret;

    if (!vfsd_dax_watch_start(dev->fs->dax, VFSD_DAX_MAX_WATCHES, err)) {
        return false;
    }
    dev->watch_stop_fd = eventfd(0, EFD_CLOEXEC);
    if (dev->watch_stop_fd < 0) {
        *err = g_strdup_printf("eventfd: %s", strerror(errno));
        return false;
    }
    ret = pthread_create(&dev->watch_thread, NULL, watch_thread, dev);
    if (ret) {
        *err = g_strdup_printf("cannot start the truncation watch thread: "
                               "%s", strerror(ret));
        close(dev->watch_stop_fd);
        dev->watch_stop_fd = -1;
        return false;
    }
    return true;
}

void vfsd_vhost_dax_watch_stop(VfsdDev *dev)
{
    if (dev->watch_stop_fd < 0) {
        return;
    }
    eventfd_write(dev->watch_stop_fd, 1);
    pthread_join(dev->watch_thread, NULL);
    close(dev->watch_stop_fd);
    dev->watch_stop_fd = -1;
}
