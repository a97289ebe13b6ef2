/*
 * virtiofsd: the queue workers of the vhost-user transport
 *
 * Each started virtqueue (0 is hiprio, 1..N carry requests) has a thread
 * that waits for kicks and pops requests, in batches under one hold of
 * dispatch_lock for reading; it runs them itself or hands them to the
 * thread pool (--thread-pool-size), and blocking ones to vhost-park.c.
 * The main thread starts and stops the queues as the front-end's
 * messages say.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vhost-queue.h"
#include "vhost-dev.h"
#include "vhost-park.h"
#include "buf.h"
#include "log.h"
#include "migrate.h"
#include "server.h"

/* Requests a queue thread runs under one hold of dispatch_lock */
#define VFSD_BATCH 16

/* The guest address libvhost-user translated to @va, under today's table */
static uint64_t va_to_gpa(VuDev *vu, const void *va)
{
    uintptr_t p = (uintptr_t)va;
    unsigned int i;

    for (i = 0; i < vu->nregions; i++) {
        VuDevRegion *r = &vu->regions[i];
        uintptr_t start = r->mmap_addr + r->mmap_offset;

        if (p >= start && p - start < r->size) {
            return r->gpa + (p - start);
        }
    }
    return VFSD_NO_GPA;
}

/*
 * Remembers the guest address of every piece of the request while the
 * table that mapped it is in force: a worker that runs it after the
 * table changed reaches it by those (see vfsd_elem_segs()).  libvhost-user
 * mapped each piece within one region of this table, so each is found.
 */
static void elem_record_gpa(VfsdDev *dev, VfsdElem *el)
{
    VuVirtqElement *e = &el->elem;
    unsigned int n = e->out_num + e->in_num, i;

    el->gpa = g_new(uint64_t, n ? n : 1);
    for (i = 0; i < n; i++) {
        bool in = i >= e->out_num;
        unsigned int k = in ? i - e->out_num : i;
        uint64_t *addr = in ? e->in_addr : e->out_addr;
        struct iovec *iov = in ? e->in_sg : e->out_sg;

        el->gpa[i] = addr ? addr[k] : va_to_gpa(&dev->vu, iov[k].iov_base);
    }
}

/*
 * Called with dispatch_lock held for reading: guest memory stays mapped.
 * @no_wait: a blocking request that has no thread to wait in.
 */
static void process_elem(VfsdElem *el, bool no_wait)
{
    VfsdDev *dev = el->dev;
    g_autofree VfsdSeg *out_segs = vfsd_elem_segs(el, false);
    g_autofree VfsdSeg *in_segs = vfsd_elem_segs(el, true);
    VfsdBuf in, out;
    size_t written;

    if (el->elem.in_addr || el->elem.out_addr) {
        vfsd_debug("queue %d: request with buffers outside the memory we "
                   "map", el->qidx);
    }
    /* The guest's out buffers are our input; the header was read already */
    vfsd_buf_init(&in, out_segs, el->elem.out_num, vfsd_dev_mem_access, dev);
    if (el->head.valid) {
        vfsd_buf_skip(&in, sizeof(el->head.h));
    }
    vfsd_buf_init(&out, in_segs, el->elem.in_num, vfsd_dev_mem_access, dev);
    vfsd_thread_set_req(&(VfsdRunning) {
        .el = el,
        .segs = { out_segs, in_segs },
        .nsegs = { el->elem.out_num, el->elem.in_num },
    });
    vfsd_thread_set_cancelled(false);
    if (el->qidx == 0) {
        written = vfsd_process_hiprio(dev->fs, &el->head, &in, &out);
    } else if (no_wait) {
        written = vfsd_process_no_wait(dev->fs, &el->head, &in, &out);
    } else {
        written = vfsd_process_request(dev->fs, &el->head, &in, &out);
    }
    vfsd_thread_set_req(NULL);
    if (vfsd_park_rerun_wanted(el)) {
        vfsd_park_rerun(el, out_segs);
    } else {
        vfsd_elem_complete(el, written);
    }
}

void vfsd_queue_pool_worker(gpointer data, gpointer user_data)
{
    VfsdElem *el = data;
    VfsdDev *dev = el->dev;

    vfsd_dev_read_lock(dev);
    process_elem(el, false);
    vfsd_dev_read_unlock(dev);
}

/*
 * Called with dispatch_lock held for reading, right after the pop: reads
 * the request's header once, into daemon memory, and a blocking request's
 * arguments, while the memory table that mapped it is in force.  Where
 * the request runs and what runs are both decided from that copy: the
 * guest can rewrite its buffer at any time.
 */
static void elem_prepare(VfsdQueue *q, VfsdElem *el)
{
    VfsdDev *dev = q->dev;
    g_autofree VfsdSeg *segs = NULL;
    VfsdBuf in;

    el->dev = dev;
    el->qidx = q->qidx;
    el->mem_gen = dev->mem_gen;
    el->counted = false;
    el->args = NULL;
    el->args_len = 0;
    el->reply = NULL;
    el->carried = el->by_gpa = el->rerun = false;
    elem_record_gpa(dev, el);

    segs = vfsd_elem_segs(el, false);
    vfsd_buf_init(&in, segs, el->elem.out_num, vfsd_dev_mem_access, dev);
    vfsd_request_head(&in, &el->head);
    if (q->qidx > 0 && vfsd_request_may_block(&el->head)) {
        size_t n = MIN(vfsd_buf_remaining(&in),
                       (size_t)VFSD_BLOCKING_MAX_COPY);

        el->args = g_malloc(n ? n : 1);
        if (vfsd_buf_read(&in, el->args, n)) {
            el->args_len = n;
        }
        /* What process() checks the header's length against */
        el->head.avail = sizeof(el->head.h) + el->args_len;
    }
}

/* Runs or hands over one request of @q; dispatch_lock held for reading */
static void drain_one(VfsdQueue *q, VfsdElem *el)
{
    VfsdDev *dev = q->dev;

    elem_prepare(q, el);
    if (q->qidx > 0 && vfsd_request_may_block(&el->head)) {
        if (g_atomic_int_add(&dev->blocking, 1) < VFSD_MAX_BLOCKING) {
            g_mutex_lock(&dev->park_lock);
            vfsd_park_submit(dev, el);
            g_mutex_unlock(&dev->park_lock);
        } else {
            g_atomic_int_add(&dev->blocking, -1);
            process_elem(el, true);
        }
    } else if (dev->pool && q->qidx > 0) {
        el->counted = true;
        g_mutex_lock(&q->inflight_lock);
        q->inflight++;
        g_mutex_unlock(&q->inflight_lock);
        g_thread_pool_push(dev->pool, el, NULL);
    } else {
        /*
         * Hiprio requests are quick (the others there are refused): no
         * need to hand them over.
         */
        process_elem(el, false);
    }
}

/*
 * Pops what the guest queued.  dispatch_lock is taken per batch of
 * VFSD_BATCH requests, so that a busy queue cannot keep the main thread
 * from the front-end's messages for long, and the guest is signalled
 * before it goes.
 */
static void drain_queue(VfsdQueue *q)
{
    VfsdDev *dev = q->dev;
    VuDev *vu = &dev->vu;
    VfsdElem *el;
    unsigned int n;
    bool done = false;

    vfsd_thread_batch_begin(q);
    while (!done) {
        vfsd_dev_read_lock(dev);
        for (n = 0; n < VFSD_BATCH && !done; n++) {
            /*
             * A guest that keeps its ring full must not keep us here
             * once the front-end wants the queue back.
             */
            if (g_atomic_int_get(&q->stopping)) {
                done = true;
                break;
            }
            g_mutex_lock(&q->lock);
            el = vu_queue_pop(vu, vu_get_queue(vu, q->qidx),
                              sizeof(VfsdElem));
            g_mutex_unlock(&q->lock);
            if (!el) {
                done = true;
                break;
            }
            drain_one(q, el);
        }
        vfsd_thread_batch_signal();
        vfsd_dev_read_unlock(dev);
    }
    vfsd_thread_batch_end();
}

/*
 * Whether @q's ring has requests, or (@stop) the queue is stopping.
 * With @notify, the guest's kicks are first turned on (true) or off.
 */
static bool queue_has_work(VfsdQueue *q, int notify, bool *stop)
{
    VfsdDev *dev = q->dev;
    VuDev *vu = &dev->vu;
    bool work = false;

    vfsd_dev_read_lock(dev);
    *stop = g_atomic_int_get(&q->stopping);
    if (!*stop) {
        VuVirtq *vq = vu_get_queue(vu, q->qidx);

        g_mutex_lock(&q->lock);
        if (notify >= 0) {
            vu_queue_set_notification(vu, vq, notify);
        }
        work = !vu_queue_empty(vu, vq);
        g_mutex_unlock(&q->lock);
    }
    vfsd_dev_read_unlock(dev);
    return work;
}

/*
 * --poll-us: once @q has run dry, look for more for that long with the
 * guest's kicks off, so that a guest sending one request after another
 * neither kicks (a VM exit, an eventfd write) nor waits for this thread
 * to wake up.  Kicks are turned back on before giving up, and the ring
 * looked at once more, since a request queued just before then came
 * without one.  Returns whether there is work.
 */
static bool queue_poll(VfsdQueue *q)
{
    gint64 end = g_get_monotonic_time() + q->dev->fs->opts->poll_us;
    bool stop;

    if (queue_has_work(q, false, &stop)) {
        return true;
    }
    while (!stop && g_get_monotonic_time() < end) {
        if (queue_has_work(q, -1, &stop)) {
            g_atomic_int_inc(&q->dev->polled);
            return true;
        }
    }
    return !stop && queue_has_work(q, true, &stop);
}

static void *queue_thread(void *opaque)
{
    VfsdQueue *q = opaque;
    VfsdDev *dev = q->dev;
    bool poll_dry = q->qidx > 0 && dev->fs->opts->poll_us;
    int kick_fd;

    pthread_rwlock_rdlock(&dev->dispatch_lock);
    kick_fd = vu_get_queue(&dev->vu, q->qidx)->kick_fd;
    pthread_rwlock_unlock(&dev->dispatch_lock);
    /*
     * A poll that a stop ended left the kicks off: on again, and what
     * came meanwhile without a kick is served now.
     */
    if (poll_dry) {
        bool stop;

        if (queue_has_work(q, true, &stop)) {
            drain_queue(q);
        }
    }

    for (;;) {
        struct pollfd pfd[2] = {
            { .fd = kick_fd, .events = POLLIN },
            { .fd = q->stop_fd, .events = POLLIN },
        };
        eventfd_t v;

        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            vfsd_err("queue %d: poll: %s", q->qidx, strerror(errno));
            break;
        }
        if (pfd[1].revents) {
            break;
        }
        if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            vfsd_err("queue %d: kick fd failed", q->qidx);
            break;
        }
        if (pfd[0].revents & POLLIN) {
            eventfd_read(kick_fd, &v);
            do {
                drain_queue(q);
            } while (poll_dry && queue_poll(q));
        }
    }
    return NULL;
}

/*
 * Called by the main thread, with dispatch_lock held for writing.  On
 * GET_VRING_BASE libvhost-user has just read where the queue stands, and
 * the front-end restarts it from there: a request popped after that would
 * run now and again then.  The queue thread checks stopping under the
 * lock before every pop, so it pops nothing more, however full the guest
 * keeps the ring.
 */
void vfsd_queue_stop(VfsdDev *dev, int qidx)
{
    VfsdQueue *q = dev->queues[qidx];
    bool cancel;

    if (!q) {
        return;
    }
    /*
     * Upstream QEMU (11.1) reads no back-end request while it waits for
     * our answer to GET_VRING_BASE: a map it was sent just before waits
     * until then.  A thread of this queue may be waiting for that map's
     * answer, or for the window's lock its holder keeps across such a
     * wait, and we could not answer: QEMU and we would wait for each
     * other (with its big lock held).  So those waits are given up until
     * the queue stopped (libvhost-user drops the late answer), and the
     * request is run again later (vfsd_park_rerun_wanted()).  A QEMU that
     * offers F_SHMEM_REPLACE serves back-end requests while it waits and
     * needs none of this.
     */
    cancel = vfsd_dev_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM) &&
             !vfsd_dev_has_proto(dev, VHOST_USER_PROTOCOL_F_SHMEM_REPLACE);
    if (cancel) {
        g_mutex_lock(&dev->park_lock);
        dev->cancelling = true;
        g_mutex_unlock(&dev->park_lock);
        eventfd_write(dev->cancel_fd, 1);
    }
    g_atomic_int_set(&q->stopping, 1);
    eventfd_write(q->stop_fd, 1);
    /* The thread may be waiting for the lock to finish a request */
    pthread_rwlock_unlock(&dev->dispatch_lock);
    pthread_join(q->thread, NULL);
    /*
     * Requests handed to the pool finish before the front-end learns
     * where the queue stopped, and blocking ones are parked.
     */
    g_mutex_lock(&q->inflight_lock);
    while (q->inflight) {
        g_cond_wait(&q->inflight_cond, &q->inflight_lock);
    }
    g_mutex_unlock(&q->inflight_lock);
    vfsd_park(dev, qidx);
    pthread_rwlock_wrlock(&dev->dispatch_lock);
    if (cancel) {
        eventfd_t v;

        eventfd_read(dev->cancel_fd, &v);
        vfsd_park_rerun_live(dev);
    }
    vfsd_park_ring_mark(dev, qidx);
    close(q->stop_fd);
    g_mutex_clear(&q->lock);
    g_mutex_clear(&q->inflight_lock);
    g_cond_clear(&q->inflight_cond);
    g_free(q);
    dev->queues[qidx] = NULL;
}

void vfsd_queue_set_started(VuDev *vu, int qidx, bool started)
{
    VfsdDev *dev = vfsd_dev_of(vu);
    VfsdQueue *q;
    int err;

    if (qidx < 0 || qidx >= VFSD_MAX_QUEUES) {
        return;
    }
    vfsd_queue_stop(dev, qidx);
    if (!started) {
        return;
    }
    /*
     * Queues start again on the source only if the migration did not
     * complete: the guest's locks, let go for the destination, come back.
     */
    vfsd_migrate_resume(dev->fs);

    q = g_new0(VfsdQueue, 1);
    q->dev = dev;
    q->qidx = qidx;
    g_mutex_init(&q->lock);
    g_mutex_init(&q->inflight_lock);
    g_cond_init(&q->inflight_cond);
    q->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (q->stop_fd < 0) {
        vfsd_err("queue %d: eventfd: %s", qidx, strerror(errno));
        g_free(q);
        return;
    }
    err = pthread_create(&q->thread, NULL, queue_thread, q);
    if (err) {
        vfsd_err("queue %d: cannot start its thread: %s", qidx,
                 strerror(err));
        close(q->stop_fd);
        g_free(q);
        return;
    }
    dev->queues[qidx] = q;
    vfsd_park_restart(dev, qidx);
}
