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
#include "dax.h"
#include "fs.h"
#include "inode.h"
#include "intr.h"
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

static void park_rerun(VfsdElem *el, VfsdSeg *out_segs);

/*
 * A request whose map a stop gave up (see queue_stop()) did not do what
 * it was asked, and the front-end could not tell us why: it took the
 * ring back.  Nor could a guest that resets its device ever see a reply;
 * one that stopped (QMP stop, or a migration) gets the request run again
 * when the ring starts, as a parked lock request does.  Only a
 * SETUPMAPPING is run again: it can be, and others that map (those that
 * grow a file) have done their part on the host already, which is what
 * their reply says; their mappings are handled as the front-end's
 * failures are.
 */
static bool rerun_wanted(VfsdElem *el)
{
    bool cancelled = vfsd_thread_cancelled();

    vfsd_thread_set_cancelled(false);
    return cancelled && el->qidx > 0 && el->head.valid &&
           el->head.h.opcode == FUSE_SETUPMAPPING;
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
    if (rerun_wanted(el)) {
        park_rerun(el, out_segs);
    } else {
        vfsd_elem_complete(el, written);
    }
}

static void pool_worker(gpointer data, gpointer user_data)
{
    VfsdElem *el = data;
    VfsdDev *dev = el->dev;

    vfsd_dev_read_lock(dev);
    process_elem(el, false);
    vfsd_dev_read_unlock(dev);
}

/*
 * Blocking requests (SETLKW) across a stop of their queue.  At
 * GET_VRING_BASE the front-end takes the ring back, to start it again
 * as it was (QMP stop and cont), to hand it to another QEMU (live
 * migration), or to reset it.  A lock wait cannot go on meanwhile and
 * answer whenever the lock comes: the reply would land in a ring we no
 * longer own.  Nor can it be answered EINTR: Linux restarts an
 * interrupted FUSE lock call only when a signal is pending, so the guest
 * process would see an error that nothing caused.  So a stop interrupts
 * every wait (vfsd_interrupt_pause()) and parks its request, to run
 * again, or with its reply when the lock came first.  When the queue
 * starts on the same ring, parked requests run again or get their
 * replies; on a new ring they are dropped, as the guest that sent them
 * reset its device.  A live migration carries them, and the destination
 * does the same on the ring it is given (save_parked(), load_parked()).
 */

/* Called with dispatch_lock held: whether @qidx's ring is ours to use */
static bool queue_live(VfsdDev *dev, int qidx)
{
    VfsdQueue *q = dev->queues[qidx];

    return q && !g_atomic_int_get(&q->stopping);
}

/* Called with park_lock held */
static void blocking_submit(VfsdDev *dev, VfsdElem *el)
{
    dev->running[el->qidx]++;
    el->pause_seq = dev->pause_seq;
    g_thread_pool_push(dev->blocking_pool, el, NULL);
}

/* Called with dispatch_lock held, while el's queue is live */
static void blocking_reply(VfsdElem *el, const void *rep, size_t written)
{
    VfsdDev *dev = el->dev;
    g_autofree VfsdSeg *in_segs = vfsd_elem_segs(el, true);
    VfsdBuf guest;

    vfsd_buf_init(&guest, in_segs, el->elem.in_num, vfsd_dev_mem_access, dev);
    if (!vfsd_buf_write(&guest, rep, written)) {
        written = 0;
    }
    vfsd_elem_complete(el, written);
    g_atomic_int_add(&dev->blocking, -1);
}

/*
 * Called with dispatch_lock and park_lock held: a request that ran to
 * its end, or whose wait a pause interrupted (@interrupted), either
 * reaches the guest now, runs again, or is parked (@rep taken over).
 */
static void blocking_settle(VfsdElem *el, void *rep, size_t written,
                            bool interrupted)
{
    VfsdDev *dev = el->dev;

    if (interrupted) {
        g_free(rep);
        if (!dev->paused && queue_live(dev, el->qidx)) {
            blocking_submit(dev, el);
        } else {
            g_queue_push_tail(&dev->parked, el);
        }
    } else if (!queue_live(dev, el->qidx)) {
        el->reply = rep;
        el->reply_len = written;
        g_queue_push_tail(&dev->parked, el);
    } else {
        blocking_reply(el, rep, written);
        g_free(rep);
    }
}

/*
 * Called with dispatch_lock and park_lock held: a request to run again
 * (rerun_wanted()) waits in the parked list while a stop gives up round
 * trips, or while its queue is stopped; otherwise it runs again now.
 */
static void rerun_settle(VfsdElem *el)
{
    VfsdDev *dev = el->dev;

    if (dev->cancelling || !queue_live(dev, el->qidx)) {
        el->rerun = true;
        g_queue_push_tail(&dev->parked, el);
    } else {
        blocking_submit(dev, el);
    }
}

/*
 * Called with dispatch_lock held for reading: a request a pool worker or
 * the queue thread ran goes to the blocking requests' way of running
 * again, with a copy of its arguments, read from the guest's buffer
 * (@out_segs, as the request ran) now that the request is done with it.
 */
static void park_rerun(VfsdElem *el, VfsdSeg *out_segs)
{
    VfsdDev *dev = el->dev;
    VfsdBuf in;
    size_t n;

    vfsd_buf_init(&in, out_segs, el->elem.out_num, vfsd_dev_mem_access, dev);
    vfsd_buf_skip(&in, sizeof(el->head.h));
    n = MIN(vfsd_buf_remaining(&in), (size_t)VFSD_BLOCKING_MAX_COPY);
    g_free(el->args);
    el->args = g_malloc(n ? n : 1);
    el->args_len = vfsd_buf_read(&in, el->args, n) ? n : 0;
    el->head.avail = sizeof(el->head.h) + el->args_len;
    vfsd_elem_inflight_done(el);
    el->counted = false;
    g_atomic_int_add(&dev->blocking, 1);
    g_mutex_lock(&dev->park_lock);
    rerun_settle(el);
    g_mutex_unlock(&dev->park_lock);
}

/*
 * Called by the main thread with dispatch_lock held for writing, once a
 * stop no longer gives up round trips: requests parked to run again on
 * queues that did not stop run now.
 */
static void rerun_live(VfsdDev *dev)
{
    GList *l, *next;

    g_mutex_lock(&dev->park_lock);
    dev->cancelling = false;
    for (l = dev->parked.head; l; l = next) {
        VfsdElem *el = l->data;

        next = l->next;
        if (el->rerun && !el->carried && queue_live(dev, el->qidx)) {
            g_queue_delete_link(&dev->parked, l);
            el->rerun = false;
            blocking_submit(dev, el);
        }
    }
    g_mutex_unlock(&dev->park_lock);
}

/*
 * A request that may wait forever (SETLKW) must not hold dispatch_lock
 * meanwhile, or the front-end could not even stop the device: it runs on
 * the copy of its arguments taken when it was popped, and its reply goes
 * to the guest through the memory table in force when it is done.
 */
static void blocking_worker(gpointer data, gpointer user_data)
{
    VfsdElem *el = data;
    VfsdDev *dev = el->dev;
    void *rep;
    VfsdSeg req_seg, rep_seg;
    VfsdBuf in, out;
    size_t rep_len = 0, written;
    unsigned int i;
    bool interrupted, rerun;

    for (i = 0; i < el->elem.in_num; i++) {
        rep_len += el->elem.in_sg[i].iov_len;
    }
    rep_len = MIN(rep_len, (size_t)VFSD_BLOCKING_MAX_COPY);
    rep = g_malloc0(rep_len ? rep_len : 1);
    req_seg = (VfsdSeg) { .base = el->args, .len = el->args_len };
    rep_seg = (VfsdSeg) { .base = rep, .len = rep_len };
    vfsd_buf_init(&in, &req_seg, 1, NULL, NULL);
    vfsd_buf_init(&out, &rep_seg, 1, NULL, NULL);
    vfsd_thread_set_cancelled(false);
    written = vfsd_process_request(dev->fs, &el->head, &in, &out);
    rerun = rerun_wanted(el);

    pthread_rwlock_rdlock(&dev->dispatch_lock);
    g_mutex_lock(&dev->park_lock);
    /*
     * EINTR after a pause began is the pause's; the guest's own INTERRUPT
     * at that very moment (Linux's virtio-fs sends none) would get the
     * lock asked again instead.
     */
    interrupted = el->pause_seq != dev->pause_seq &&
                  vfsd_reply_error(rep, written) == -EINTR;
    dev->running[el->qidx]--;
    if (rerun) {
        g_free(rep);
        rerun_settle(el);
    } else {
        blocking_settle(el, rep, written, interrupted);
    }
    g_cond_broadcast(&dev->park_cond);
    g_mutex_unlock(&dev->park_lock);
    pthread_rwlock_unlock(&dev->dispatch_lock);
}

/*
 * Called by the main thread from queue_stop(), without dispatch_lock:
 * the waits of @qidx end, and their requests are parked.
 */
static void park(VfsdDev *dev, int qidx)
{
    g_mutex_lock(&dev->park_lock);
    if (dev->running[qidx] && !dev->paused) {
        dev->paused = true;
        dev->pause_seq++;
        g_mutex_unlock(&dev->park_lock);
        /* Returns once every wait has ended */
        vfsd_interrupt_pause(dev->fs, true);
        g_mutex_lock(&dev->park_lock);
    }
    while (dev->running[qidx]) {
        g_cond_wait(&dev->park_cond, &dev->park_lock);
    }
    g_mutex_unlock(&dev->park_lock);
}

/* Called with dispatch_lock held for writing: where @qidx's ring stands */
static void ring_mark(VfsdDev *dev, int qidx)
{
    VuVirtq *vq = vu_get_queue(&dev->vu, qidx);

    dev->mark[qidx] = (VfsdRingMark) {
        .valid = true,
        .last_avail = vq->last_avail_idx,
        .used = vq->used_idx,
        .desc = vq->vra.desc_user_addr,
        .avail = vq->vra.avail_user_addr,
        .used_addr = vq->vra.used_user_addr,
    };
}

/*
 * Whether @qidx starts on the ring it stopped on.  A parked request is
 * in flight, so that ring had fewer used than available entries: a reset
 * one, started from zero, cannot pass for it.
 */
static bool ring_same(VfsdDev *dev, int qidx)
{
    VuVirtq *vq = vu_get_queue(&dev->vu, qidx);
    VfsdRingMark *m = &dev->mark[qidx];

    return m->valid && m->last_avail == vq->last_avail_idx &&
           m->used == vq->used_idx && m->desc == vq->vra.desc_user_addr &&
           m->avail == vq->vra.avail_user_addr &&
           m->used_addr == vq->vra.used_user_addr;
}

/*
 * Called with park_lock held: the parked requests of @qidx that came
 * with the migration take their places among the ring's requests in
 * flight, if they fit there; false if they do not, and the ring cannot
 * take them.  Which heads are in flight the ring does not say (the
 * guest may have reused their available entries since): a source that
 * names a wrong one can confuse this guest's ring, as any back-end of
 * its device could, but not our memory.
 */
static bool carried_fit(VfsdDev *dev, int qidx, unsigned int n, char **err)
{
    VuVirtq *vq = vu_get_queue(&dev->vu, qidx);
    uint16_t in_flight = vq->last_avail_idx - vq->used_idx;
    g_autofree bool *seen = g_new0(bool, vq->vring.num ? vq->vring.num : 1);
    GList *l;

    if (n > in_flight || n > vq->vring.num - vq->inuse) {
        *err = g_strdup_printf("migration: queue %d has %u requests in "
                               "flight, %u carried ones do not fit", qidx,
                               in_flight, n);
        return false;
    }
    for (l = dev->parked.head; l; l = l->next) {
        VfsdElem *el = l->data;

        if (el->qidx != qidx || !el->carried) {
            continue;
        }
        if (el->elem.index >= vq->vring.num || seen[el->elem.index]) {
            *err = g_strdup_printf("migration: carried request %u of queue "
                                   "%d is not in its ring of %u",
                                   el->elem.index, qidx, vq->vring.num);
            return false;
        }
        seen[el->elem.index] = true;
    }
    vq->inuse += n;
    return true;
}

/*
 * Called with park_lock held: drops the parked requests of @qidx (every
 * queue's if negative) that came with a migration (@carried) or not
 */
static void parked_drop(VfsdDev *dev, int qidx, bool carried)
{
    GList *l = dev->parked.head, *next;

    for (; l; l = next) {
        VfsdElem *el = l->data;

        next = l->next;
        if ((qidx >= 0 && el->qidx != qidx) || el->carried != carried) {
            continue;
        }
        g_queue_delete_link(&dev->parked, l);
        vfsd_elem_free(el);
        g_atomic_int_add(&dev->blocking, -1);
    }
}

/*
 * Called by the main thread with dispatch_lock held for writing, once
 * queue @qidx has started: parked requests of live queues run again or
 * get their replies.
 */
static void parked_restart(VfsdDev *dev, int qidx)
{
    VuVirtq *vq = vu_get_queue(&dev->vu, qidx);
    unsigned int here = 0, carried = 0;
    bool resume;
    GList *l, *next;

    g_mutex_lock(&dev->park_lock);
    for (l = dev->parked.head; l; l = l->next) {
        VfsdElem *el = l->data;

        if (el->qidx == qidx) {
            if (el->carried) {
                carried++;
            } else {
                here++;
            }
        }
    }
    if (here && !ring_same(dev, qidx)) {
        vfsd_info("queue %d starts on a new ring: %u parked requests "
                  "dropped", qidx, here);
        parked_drop(dev, qidx, false);
        vq->inuse -= MIN(vq->inuse, here);
    }
    dev->mark[qidx].valid = false;
    if (carried) {
        g_autofree char *err = NULL;

        if (carried_fit(dev, qidx, carried, &err)) {
            for (l = dev->parked.head; l; l = l->next) {
                VfsdElem *el = l->data;

                if (el->qidx == qidx) {
                    el->carried = false;
                }
            }
            vfsd_info("queue %d: %u lock requests carried by the migration "
                      "resume", qidx, carried);
        } else {
            vfsd_err("%s", err);
            parked_drop(dev, qidx, true);
        }
    }
    resume = dev->paused;
    dev->paused = false;
    g_mutex_unlock(&dev->park_lock);
    if (resume) {
        vfsd_interrupt_pause(dev->fs, false);
    }

    g_mutex_lock(&dev->park_lock);
    for (l = dev->parked.head; l; l = next) {
        VfsdElem *el = l->data;

        next = l->next;
        if (el->carried || !queue_live(dev, el->qidx)) {
            continue;
        }
        g_queue_delete_link(&dev->parked, l);
        if (el->reply) {
            blocking_reply(el, el->reply, el->reply_len);
        } else {
            el->rerun = false;
            blocking_submit(dev, el);
        }
    }
    g_mutex_unlock(&dev->park_lock);
}

/* The smallest parked request in the stream, and the most segments */
#define VFSD_MIG_PARKED_MIN 13
#define VFSD_MIG_PARKED_MAX_SEGS 1024

/*
 * Migration (the VFSD_MIG_SEC_REQUESTS section): each parked request by
 * queue and descriptor head, with the guest addresses of the buffers its
 * reply goes to, and its reply, or its header and arguments to run it
 * again.  Called with dispatch_lock held for writing, the device stopped.
 */
static bool save_parked(void *opaque, VfsdMigWriter *w, char **err)
{
    VfsdDev *dev = opaque;
    GList *l;
    unsigned int i;

    g_mutex_lock(&dev->park_lock);
    for (i = 0; i < VFSD_MAX_QUEUES; i++) {
        if (dev->running[i]) {
            g_mutex_unlock(&dev->park_lock);
            *err = g_strdup_printf("queue %u still runs %u lock requests",
                                   i, dev->running[i]);
            return false;
        }
    }
    if (!dev->parked.length) {
        g_mutex_unlock(&dev->park_lock);
        return true;
    }
    vfsd_mig_put_u64(w, dev->parked.length);
    for (l = dev->parked.head; l; l = l->next) {
        VfsdElem *el = l->data;
        VuVirtqElement *e = &el->elem;

        vfsd_mig_put_u16(w, el->qidx);
        vfsd_mig_put_u16(w, e->index);
        vfsd_mig_put_u8(w, el->reply != NULL);
        vfsd_mig_put_u32(w, e->in_num);
        for (i = 0; i < e->in_num; i++) {
            vfsd_mig_put_u64(w, el->gpa[e->out_num + i]);
            vfsd_mig_put_u32(w, e->in_sg[i].iov_len);
        }
        if (el->reply) {
            vfsd_mig_put_blob(w, el->reply, el->reply_len);
        } else {
            /* A blob of the header and the arguments */
            vfsd_mig_put_u32(w, sizeof(el->head.h) + el->args_len);
            vfsd_mig_put_bytes(w, &el->head.h, sizeof(el->head.h));
            vfsd_mig_put_bytes(w, el->args, el->args_len);
        }
    }
    vfsd_info("migration: %u parked lock requests saved",
              dev->parked.length);
    g_mutex_unlock(&dev->park_lock);
    return true;
}

/* One parked request from the stream, or NULL (@err) if it is malformed */
static VfsdElem *load_one_parked(VfsdDev *dev, VfsdMigReader *r,
                                 uint64_t i, char **err)
{
    uint16_t qidx = vfsd_mig_get_u16(r);
    uint16_t head = vfsd_mig_get_u16(r);
    uint8_t has_reply = vfsd_mig_get_u8(r);
    uint32_t n_in = vfsd_mig_get_u32(r), len, k;
    const uint8_t *blob;
    VfsdElem *el;

    if (r->bad || !qidx || qidx >= VFSD_MAX_QUEUES || has_reply > 1 ||
        n_in > VFSD_MIG_PARKED_MAX_SEGS ||
        n_in > vfsd_mig_remaining(r) / 12) {
        *err = g_strdup_printf("bad parked request record %" PRIu64, i);
        return NULL;
    }
    el = calloc(1, sizeof(*el) + n_in * sizeof(struct iovec));
    if (!el) {
        *err = g_strdup("out of memory");
        return NULL;
    }
    el->dev = dev;
    el->qidx = qidx;
    el->carried = el->by_gpa = true;
    el->elem.index = head;
    el->elem.in_num = n_in;
    el->elem.in_sg = (struct iovec *)(el + 1);
    el->gpa = g_new(uint64_t, n_in ? n_in : 1);
    for (k = 0; k < n_in; k++) {
        el->gpa[k] = vfsd_mig_get_u64(r);
        el->elem.in_sg[k].iov_len = vfsd_mig_get_u32(r);
    }
    blob = vfsd_mig_get_blob(r, sizeof(el->head.h) + VFSD_BLOCKING_MAX_COPY,
                             &len);
    if (!blob) {
        goto bad;
    }
    if (has_reply) {
        el->reply = g_memdup2(blob, len ? len : 1);
        el->reply_len = len;
    } else {
        VfsdSeg seg = { .base = (void *)blob, .len = len };
        VfsdBuf b;

        vfsd_buf_init(&b, &seg, 1, NULL, NULL);
        vfsd_request_head(&b, &el->head);
        /* Only what the source parks: the rest never waits */
        if (!vfsd_request_may_block(&el->head) &&
            el->head.h.opcode != FUSE_SETUPMAPPING) {
            goto bad;
        }
        el->args_len = len - sizeof(el->head.h);
        el->args = g_memdup2(blob + sizeof(el->head.h),
                             el->args_len ? el->args_len : 1);
        el->head.avail = len;
    }
    return el;

bad:
    vfsd_elem_free(el);
    *err = g_strdup_printf("bad parked request record %" PRIu64, i);
    return NULL;
}

/*
 * The destination's side, called with dispatch_lock held for writing
 * before any queue starts: the requests wait in the parked list until
 * their queue does (parked_restart()).
 */
static bool load_parked(void *opaque, VfsdMigReader *r, char **err)
{
    VfsdDev *dev = opaque;
    uint64_t count, i;
    bool ok = true;

    if (!vfsd_mig_get_count(r, VFSD_MIG_PARKED_MIN, &count) ||
        count > VFSD_MAX_BLOCKING) {
        *err = g_strdup("bad parked request count");
        return false;
    }
    g_mutex_lock(&dev->park_lock);
    for (i = 0; i < count && ok; i++) {
        VfsdElem *el = load_one_parked(dev, r, i, err);

        if (el) {
            g_atomic_int_add(&dev->blocking, 1);
            g_queue_push_tail(&dev->parked, el);
        } else {
            parked_drop(dev, -1, true);
            ok = false;
        }
    }
    g_mutex_unlock(&dev->park_lock);
    if (ok) {
        vfsd_info("migration: %" PRIu64 " parked lock requests restored",
                  count);
    }
    return ok;
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
            blocking_submit(dev, el);
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
static void queue_stop(VfsdDev *dev, int qidx)
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
     * request is run again later (rerun_wanted()).  A QEMU that offers
     * F_SHMEM_REPLACE serves back-end requests while it waits and needs
     * none of this.
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
    park(dev, qidx);
    pthread_rwlock_wrlock(&dev->dispatch_lock);
    if (cancel) {
        eventfd_t v;

        eventfd_read(dev->cancel_fd, &v);
        rerun_live(dev);
    }
    ring_mark(dev, qidx);
    close(q->stop_fd);
    g_mutex_clear(&q->lock);
    g_mutex_clear(&q->inflight_lock);
    g_cond_clear(&q->inflight_cond);
    g_free(q);
    dev->queues[qidx] = NULL;
}

static void queue_set_started(VuDev *vu, int qidx, bool started)
{
    VfsdDev *dev = vfsd_dev_of(vu);
    VfsdQueue *q;
    int err;

    if (qidx < 0 || qidx >= VFSD_MAX_QUEUES) {
        return;
    }
    queue_stop(dev, qidx);
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
    parked_restart(dev, qidx);
}

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
        parked_drop(dev, -1, true);
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
    .queue_set_started = queue_set_started,
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
        dev->pool = g_thread_pool_new(pool_worker, dev,
                                      fs->opts->thread_pool_size, FALSE,
                                      NULL);
    }
    dev->blocking_pool = g_thread_pool_new(blocking_worker, dev,
                                           VFSD_MAX_BLOCKING, FALSE, NULL);
    g_mutex_init(&dev->park_lock);
    g_cond_init(&dev->park_cond);
    g_queue_init(&dev->parked);
    vfsd_migrate_set_hook(fs, &(VfsdMigHook) {
        .save = save_parked,
        .load = load_parked,
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
        queue_stop(dev, i);
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
    parked_drop(dev, -1, false);
    parked_drop(dev, -1, true);
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
