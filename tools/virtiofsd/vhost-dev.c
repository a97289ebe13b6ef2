/*
 * virtiofsd: the vhost-user device, as the transport's files share it
 *
 * What every thread that runs requests needs, whichever file started it:
 * a popped request's buffers and its completion, guest memory by
 * address, and the thread's own state (its hold of dispatch_lock, the
 * request it runs, its batch), kept here so that the files that set it
 * and those that read it see the same.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <stdlib.h>
#include <string.h>

#include "vhost-dev.h"

static __thread VfsdRunning *thread_req;
/*
 * Whether this thread holds dispatch_lock for reading, as a queue
 * thread, a pool worker or the truncation watch does around work that
 * may wait for the front-end; only such a hold is let go for the wait.
 */
static __thread bool thread_reads;
/* A front-end round trip of the request this thread runs was given up */
static __thread bool thread_cancelled;
/*
 * The queue whose requests this thread runs in a batch (vhost-queue.c,
 * drain_queue()), and how many of their completions it has not
 * signalled yet: the guest is told once for several, but always before
 * dispatch_lock goes.
 */
static __thread VfsdQueue *thread_batch;
static __thread unsigned int thread_unsignalled;

void vfsd_dev_read_lock(VfsdDev *dev)
{
    pthread_rwlock_rdlock(&dev->dispatch_lock);
    thread_reads = true;
}

void vfsd_dev_read_unlock(VfsdDev *dev)
{
    thread_reads = false;
    pthread_rwlock_unlock(&dev->dispatch_lock);
}

bool vfsd_thread_reads(void)
{
    return thread_reads;
}

void vfsd_thread_set_req(VfsdRunning *r)
{
    thread_req = r;
}

VfsdRunning *vfsd_thread_req(void)
{
    return thread_req;
}

void vfsd_thread_set_cancelled(bool cancelled)
{
    thread_cancelled = cancelled;
}

bool vfsd_thread_cancelled(void)
{
    return thread_cancelled;
}

void vfsd_thread_batch_begin(VfsdQueue *q)
{
    thread_batch = q;
}

void vfsd_thread_batch_end(void)
{
    thread_batch = NULL;
}

void vfsd_elem_free(VfsdElem *el)
{
    g_free(el->gpa);
    g_free(el->args);
    g_free(el->reply);
    free(el);                   /* libvhost-user malloc()ed it */
}

/*
 * Guest memory by guest address, under the memory table in force now:
 * what the daemon maps is copied directly, the rest (a buffer inside the
 * DAX window) goes through the front-end.
 */
bool vfsd_dev_mem_access(void *opaque, uint64_t addr, void *buf, size_t len,
                         bool is_write)
{
    VfsdDev *dev = opaque;
    uint8_t *p = buf;

    while (len) {
        uint64_t n = len;
        uint8_t *va = vu_gpa_to_va(&dev->vu, &n, addr);

        if (!va) {
            break;
        }
        if (is_write) {
            memcpy(va, p, n);
        } else {
            memcpy(p, va, n);
        }
        addr += n;
        p += n;
        len -= n;
    }
    if (!len) {
        return true;
    }
    return is_write ? vu_mem_write(&dev->vu, addr, p, len) :
                      vu_mem_read(&dev->vu, addr, p, len);
}

/*
 * One direction of a request, for access under dispatch_lock.  Popped
 * under another memory table, its host addresses mean nothing now: every
 * piece is then reached by guest address.
 */
VfsdSeg *vfsd_elem_segs(VfsdElem *el, bool in)
{
    VuVirtqElement *e = &el->elem;
    unsigned int n = in ? e->in_num : e->out_num;
    struct iovec *iov = in ? e->in_sg : e->out_sg;
    uint64_t *gpa = el->gpa + (in ? e->out_num : 0);
    bool stale = el->by_gpa || el->mem_gen != el->dev->mem_gen;
    VfsdSeg *segs = g_new(VfsdSeg, n ? n : 1);
    unsigned int i;

    for (i = 0; i < n; i++) {
        segs[i].base = stale ? NULL : iov[i].iov_base;
        /* Cannot happen; if it did, better a short buffer than a wrong one */
        segs[i].len = stale && gpa[i] == VFSD_NO_GPA ? 0 : iov[i].iov_len;
        segs[i].addr = gpa[i];
    }
    return segs;
}

/*
 * Called with dispatch_lock held, while the queue el came from runs: the
 * queue thread, the pool's requests and blocking ones (see vfsd_park())
 * all end before the queue stops.
 */
void vfsd_elem_inflight_done(VfsdElem *el)
{
    VfsdQueue *q = el->dev->queues[el->qidx];

    if (el->counted) {
        g_mutex_lock(&q->inflight_lock);
        if (--q->inflight == 0) {
            g_cond_broadcast(&q->inflight_cond);
        }
        g_mutex_unlock(&q->inflight_lock);
    }
}

/* Tells the guest of the completions this thread's batch has not */
void vfsd_thread_batch_signal(void)
{
    VfsdQueue *q = thread_batch;

    if (q && thread_unsignalled) {
        VuDev *vu = &q->dev->vu;

        g_mutex_lock(&q->lock);
        vu_queue_notify(vu, vu_get_queue(vu, q->qidx));
        g_mutex_unlock(&q->lock);
        thread_unsignalled = 0;
    }
}

/*
 * In a batch, the guest is told at once only when it has queued nothing
 * more: otherwise the next requests run first, and one signal covers
 * them all (at the batch's end at the latest).
 */
void vfsd_elem_complete(VfsdElem *el, size_t written)
{
    VfsdDev *dev = el->dev;
    VfsdQueue *q = dev->queues[el->qidx];
    VuDev *vu = &dev->vu;
    VuVirtq *vq = vu_get_queue(vu, el->qidx);

    g_mutex_lock(&q->lock);
    vu_queue_push(vu, vq, &el->elem, written);
    if (thread_batch == q && !vu_queue_empty(vu, vq)) {
        thread_unsignalled++;
    } else {
        vu_queue_notify(vu, vq);
        if (thread_batch == q) {
            thread_unsignalled = 0;
        }
    }
    g_mutex_unlock(&q->lock);
    vfsd_elem_inflight_done(el);
    vfsd_elem_free(el);
}
