/*
 * virtiofsd: blocking requests, and parking them across stops
 *
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
 * does the same on the ring it is given (vfsd_park_save(),
 * vfsd_park_load()).
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "vhost-park.h"
#include "vhost-dev.h"
#include "buf.h"
#include "intr.h"
#include "log.h"
#include "migrate.h"
#include "migstream.h"
#include "server.h"

/* Called with dispatch_lock held: whether @qidx's ring is ours to use */
static bool queue_live(VfsdDev *dev, int qidx)
{
    VfsdQueue *q = dev->queues[qidx];

    return q && !g_atomic_int_get(&q->stopping);
}

/* Called with park_lock held */
void vfsd_park_submit(VfsdDev *dev, VfsdElem *el)
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
            vfsd_park_submit(dev, el);
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
 * A request whose map a stop gave up (see vfsd_queue_stop()) did not do what
 * it was asked, and the front-end could not tell us why: it took the
 * ring back.  Nor could a guest that resets its device ever see a reply;
 * one that stopped (QMP stop, or a migration) gets the request run again
 * when the ring starts, as a parked lock request does.  Only a
 * SETUPMAPPING is run again: it can be, and others that map (those that
 * grow a file) have done their part on the host already, which is what
 * their reply says; their mappings are handled as the front-end's
 * failures are.
 */
bool vfsd_park_rerun_wanted(VfsdElem *el)
{
    bool cancelled = vfsd_thread_cancelled();

    vfsd_thread_set_cancelled(false);
    return cancelled && el->qidx > 0 && el->head.valid &&
           el->head.h.opcode == FUSE_SETUPMAPPING;
}

/*
 * Called with dispatch_lock and park_lock held: a request to run again
 * (vfsd_park_rerun_wanted()) waits in the parked list while a stop gives
 * up round trips, or while its queue is stopped; otherwise it runs again
 * now.
 */
static void rerun_settle(VfsdElem *el)
{
    VfsdDev *dev = el->dev;

    if (dev->cancelling || !queue_live(dev, el->qidx)) {
        el->rerun = true;
        g_queue_push_tail(&dev->parked, el);
    } else {
        vfsd_park_submit(dev, el);
    }
}

/*
 * Called with dispatch_lock held for reading: a request a pool worker or
 * the queue thread ran goes to the blocking requests' way of running
 * again, with a copy of its arguments, read from the guest's buffer
 * (@out_segs, as the request ran) now that the request is done with it.
 */
void vfsd_park_rerun(VfsdElem *el, VfsdSeg *out_segs)
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
void vfsd_park_rerun_live(VfsdDev *dev)
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
            vfsd_park_submit(dev, el);
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
void vfsd_park_worker(gpointer data, gpointer user_data)
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
    rerun = vfsd_park_rerun_wanted(el);

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
 * Called by the main thread from vfsd_queue_stop(), without dispatch_lock:
 * the waits of @qidx end, and their requests are parked.
 */
void vfsd_park(VfsdDev *dev, int qidx)
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
void vfsd_park_ring_mark(VfsdDev *dev, int qidx)
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
void vfsd_park_drop(VfsdDev *dev, int qidx, bool carried)
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
void vfsd_park_restart(VfsdDev *dev, int qidx)
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
        vfsd_park_drop(dev, qidx, false);
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
            vfsd_park_drop(dev, qidx, true);
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
            vfsd_park_submit(dev, el);
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
bool vfsd_park_save(void *opaque, VfsdMigWriter *w, char **err)
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
 * their queue does (vfsd_park_restart()).
 */
bool vfsd_park_load(void *opaque, VfsdMigReader *r, char **err)
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
            vfsd_park_drop(dev, -1, true);
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
