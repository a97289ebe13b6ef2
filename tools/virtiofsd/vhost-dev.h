/*
 * virtiofsd: the vhost-user device, as the transport's files share it
 *
 * The transport is the device (vhost.c) and its workers: the queue
 * threads (vhost-queue.c), the blocking requests and their parking
 * (vhost-park.c), the DAX back-end (vhost-dax.c).  This header holds what
 * they share.
 *
 * Lock order, outer first; a thread holding one may take only those
 * listed after it:
 *
 *   VfsdDev.dispatch_lock   libvhost-user is not thread-safe: written by
 *                           the main thread around each vhost-user
 *                           message, read by whoever touches a virtqueue
 *                           or guest memory (queue threads, pool workers,
 *                           a blocking request's end, the truncation watch,
 *                           the lazy unmaps).  Outer to the file system's
 *                           locks (fs-types.h); a thread lets it go while it
 *                           waits for the front-end or for the DAX window's
 *                           lock, and takes it back after (vhost-dax.c)
 *   VfsdDev.park_lock       blocking requests and the parked ones
 *   VfsdQueue.lock          pops and pushes; a leaf, also taken under the
 *                           DAX window's lock (a batch's signal before a
 *                           wait, vhost-dax.c)
 *   VfsdQueue.inflight_lock requests handed to the pool; a leaf
 *
 * A field shared between threads says which lock guards it ("under ..."),
 * or that it is atomic; the others are the main thread's, or set before
 * the queues start.  What a thread holds and runs (its hold of
 * dispatch_lock, its request, its batch) is vhost-dev.c's, reached
 * through the functions below.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_VHOST_DEV_H
#define VIRTIOFSD_VHOST_DEV_H

#include <pthread.h>

#include "libvhost-user.h"

#include "buf.h"
#include "fs-types.h"
#include "migrate.h"
#include "server.h"

/* Queue 0 is hiprio; QEMU enables as many request queues as it wants */
#define VFSD_MAX_QUEUES (1 + 64)
/*
 * Blocking requests (SETLKW) waiting at once, each in a thread of its
 * own.  Past that a SETLKW fails with ENOLCK if its lock is taken: a
 * guest that has this many lock waiters is more likely broken than
 * patient, and a bound is what keeps it from costing threads without end.
 */
#define VFSD_MAX_BLOCKING 64
/*
 * The most of a blocking request's arguments, and of its reply, copied:
 * a SETLKW has a few dozen bytes of arguments and replies with a header.
 */
#define VFSD_BLOCKING_MAX_COPY 4096

typedef struct VfsdDev VfsdDev;

typedef struct VfsdQueue {
    VfsdDev *dev;
    int qidx;
    pthread_t thread;
    int stop_fd;
    GMutex lock;                /* pops and pushes */
    /* Requests handed to the thread pool, waited for when stopping */
    GMutex inflight_lock;
    GCond inflight_cond;
    unsigned int inflight;      /* under inflight_lock */
    /* Set under dispatch_lock for writing: pop no more (vfsd_queue_stop()) */
    gint stopping;
} VfsdQueue;

/*
 * Where a ring stood when its queue stopped, to tell a restart of the
 * same ring (stop/cont) from a new one (a device reset) when the queue
 * starts again.
 */
typedef struct VfsdRingMark {
    bool valid;
    uint16_t last_avail;
    uint16_t used;
    uint64_t desc, avail, used_addr;    /* the front-end's addresses */
} VfsdRingMark;

/* The device; its locks are in the order at the top of this file */
struct VfsdDev {
    /*
     * libvhost-user's: its messages under dispatch_lock for writing; a
     * ring and guest memory under dispatch_lock for reading, and a ring
     * under its queue's lock as well
     */
    VuDev vu;
    VfsdFs *fs;
    pthread_rwlock_t dispatch_lock;
    /* Under dispatch_lock: set for writing, read for reading */
    VfsdQueue *queues[VFSD_MAX_QUEUES];
    GThreadPool *pool;
    GThreadPool *blocking_pool;
    /* Atomic: blocking requests, running or parked */
    gint blocking;
    /* Blocking requests across stops of their queue: vhost-park.c */
    GMutex park_lock;
    GCond park_cond;
    /* Under park_lock: requests of each queue in blocking_pool */
    unsigned int running[VFSD_MAX_QUEUES];
    GQueue parked;              /* under park_lock: VfsdElem */
    /* Under park_lock: waits interrupted (vfsd_interrupt_pause) */
    bool paused;
    uint64_t pause_seq;         /* under park_lock: pauses so far */
    /* Under dispatch_lock for writing */
    VfsdRingMark mark[VFSD_MAX_QUEUES];
    /*
     * Bumped under dispatch_lock for writing when the memory table
     * changes: the host addresses of a request popped before may then be
     * unmapped, or mapped to something else.
     */
    uint64_t mem_gen;
    int panic_fd;               /* wakes the main thread up on vu_panic() */
    /*
     * Readable while a stop gives up the waits for front-end answers
     * (see vfsd_queue_stop()); cancelling is set along with it, under
     * park_lock.
     */
    int cancel_fd;
    bool cancelling;
    /* --watch-truncate: a thread reads the inotify events */
    pthread_t watch_thread;
    int watch_stop_fd;          /* -1: no such thread */
    /* A back-end state transfer between SET_DEVICE_STATE_FD and CHECK */
    VfsdMigXfer *mig_xfer;
    gint polled;                /* atomic: --poll-us found requests */
};

/* The device whose libvhost-user state is @vu */
static inline VfsdDev *vfsd_dev_of(VuDev *vu)
{
    return (VfsdDev *)((char *)vu - offsetof(VfsdDev, vu));
}

/* Whether the front-end acknowledged protocol feature @bit */
static inline bool vfsd_dev_has_proto(VfsdDev *dev, unsigned int bit)
{
    return dev->vu.protocol_features & (1ULL << bit);
}

typedef struct VfsdElem {
    VuVirtqElement elem;
    VfsdDev *dev;
    int qidx;
    uint64_t mem_gen;           /* of the memory table elem was mapped with */
    uint64_t *gpa;              /* guest address of each out_sg, then in_sg */
    VfsdReqHead head;           /* read from the guest once, when popped */
    void *args;                 /* a blocking request's arguments, copied */
    size_t args_len;
    bool counted;               /* in the queue's inflight */
    /* Blocking requests only, under park_lock */
    uint64_t pause_seq;         /* dev's when it was handed to a worker */
    void *reply;                /* parked with its reply; NULL: to run */
    size_t reply_len;
    bool carried;               /* from a migration source: not popped here */
    /* No host address at all: carried, or the table changed as it ran */
    bool by_gpa;
    /* Parked to run again: a stop gave up its front-end round trip */
    bool rerun;
} VfsdElem;

/* Not found in the memory table (vhost-queue.c, elem_record_gpa()) */
#define VFSD_NO_GPA UINT64_MAX

/*
 * The request a thread runs (vhost-queue.c, process_elem()), with the
 * segments its buffers are reached by: a thread that lets dispatch_lock
 * go in the middle of it (vhost-dax.c, dax_wait_begin()) must not use
 * host addresses from before once it has the lock back, as the memory
 * table may have changed meanwhile (see dax_wait_end()).
 */
typedef struct VfsdRunning {
    VfsdElem *el;
    VfsdSeg *segs[2];           /* out, in */
    unsigned int nsegs[2];
} VfsdRunning;

/* dispatch_lock for reading, by a thread that may let it go to wait */
void vfsd_dev_read_lock(VfsdDev *dev);
void vfsd_dev_read_unlock(VfsdDev *dev);
/* Whether this thread holds dispatch_lock by vfsd_dev_read_lock() */
bool vfsd_thread_reads(void);

/* The request this thread runs, or NULL */
void vfsd_thread_set_req(VfsdRunning *r);
VfsdRunning *vfsd_thread_req(void);

/* Whether a front-end round trip of this thread's request was given up */
void vfsd_thread_set_cancelled(bool cancelled);
bool vfsd_thread_cancelled(void);

/*
 * The requests of @q this thread runs from now until
 * vfsd_thread_batch_end() are a batch: the guest is told of their
 * completions once for several (vfsd_thread_batch_signal()), but always
 * before dispatch_lock goes.
 */
void vfsd_thread_batch_begin(VfsdQueue *q);
void vfsd_thread_batch_end(void);
void vfsd_thread_batch_signal(void);

/* Guest memory by guest address, for a VfsdBuf of @opaque, the device */
bool vfsd_dev_mem_access(void *opaque, uint64_t addr, void *buf, size_t len,
                         bool is_write);

void vfsd_elem_free(VfsdElem *el);
/* One direction of @el (@in: the guest's in buffers), for a VfsdBuf */
VfsdSeg *vfsd_elem_segs(VfsdElem *el, bool in);
/* @el leaves its queue's inflight count, if it was in it */
void vfsd_elem_inflight_done(VfsdElem *el);
/* Puts @el in the used ring with @written bytes of reply, and frees it */
void vfsd_elem_complete(VfsdElem *el, size_t written);

#endif /* VIRTIOFSD_VHOST_DEV_H */
