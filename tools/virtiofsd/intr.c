/*
 * virtiofsd: FUSE_INTERRUPT of requests that wait (SETLKW)
 *
 * A request that may wait without end registers under its unique.  An
 * INTERRUPT for it marks it and sends its thread VFSD_INTR_SIGNAL, whose
 * handler does nothing: installed without SA_RESTART, it only makes the
 * blocking fcntl() or flock() fail with EINTR, after which the waiter
 * sees the mark and gives up.  The signal may land just before the
 * thread enters the call and be lost; so the interrupter signals again
 * every millisecond until the waiter has finished, one way or another.
 *
 * The guest sends INTERRUPT on the hiprio queue and the request on
 * another, so the INTERRUPT can arrive first: a few uniques interrupted
 * before their request are remembered for it.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "intr.h"
#include "log.h"

#define VFSD_INTR_RETRY_US 1000

static void intr_signal_handler(int sig)
{
}

bool vfsd_intr_init(VfsdFs *fs, char **err)
{
    struct sigaction sa = { .sa_handler = intr_signal_handler };

    g_mutex_init(&fs->intr.lock);
    g_cond_init(&fs->intr.cond);
    fs->intr.waiters = NULL;
    /* No SA_RESTART: the point is that blocking calls return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(VFSD_INTR_SIGNAL, &sa, NULL) < 0) {
        *err = g_strdup_printf("cannot install the interrupt signal "
                               "handler: %s", strerror(errno));
        return false;
    }
    return true;
}

void vfsd_intr_cleanup(VfsdFs *fs)
{
    g_list_free(fs->intr.waiters);
    fs->intr.waiters = NULL;
    g_mutex_clear(&fs->intr.lock);
    g_cond_clear(&fs->intr.cond);
}

/* Called with fs->intr.lock held */
static bool take_early(VfsdFs *fs, uint64_t unique)
{
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(fs->intr.early); i++) {
        if (fs->intr.early[i] == unique) {
            fs->intr.early[i] = 0;
            return true;
        }
    }
    return false;
}

void vfsd_waiter_begin(VfsdFs *fs, VfsdWaiter *w, uint64_t unique)
{
    w->unique = unique;
    w->thread = pthread_self();
    w->done = false;
    w->users = 0;
    g_mutex_lock(&fs->intr.lock);
    w->interrupted = fs->intr.closing || fs->intr.paused ||
                     (unique && take_early(fs, unique));
    fs->intr.waiters = g_list_prepend(fs->intr.waiters, w);
    g_mutex_unlock(&fs->intr.lock);
}

bool vfsd_waiter_interrupted(VfsdFs *fs, VfsdWaiter *w)
{
    bool ret;

    g_mutex_lock(&fs->intr.lock);
    ret = w->interrupted;
    g_mutex_unlock(&fs->intr.lock);
    return ret;
}

/*
 * @w lives in its thread's stack: it must not return while an
 * interrupter still looks at it.
 */
void vfsd_waiter_end(VfsdFs *fs, VfsdWaiter *w)
{
    g_mutex_lock(&fs->intr.lock);
    fs->intr.waiters = g_list_remove(fs->intr.waiters, w);
    w->done = true;
    g_cond_broadcast(&fs->intr.cond);
    while (w->users) {
        g_cond_wait(&fs->intr.cond, &fs->intr.lock);
    }
    g_mutex_unlock(&fs->intr.lock);
}

/*
 * Called with fs->intr.lock held, and @w held (users) so that it stays
 * there.  Bounded: the waiter is in its blocking call (the signal ends
 * it), or on its way into it or out of it.
 */
static void interrupt_waiter(VfsdFs *fs, VfsdWaiter *w)
{
    gint64 deadline;

    w->interrupted = true;
    while (!w->done) {
        pthread_kill(w->thread, VFSD_INTR_SIGNAL);
        deadline = g_get_monotonic_time() + VFSD_INTR_RETRY_US;
        g_cond_wait_until(&fs->intr.cond, &fs->intr.lock, deadline);
    }
}

static void waiter_release(VfsdFs *fs, VfsdWaiter *w)
{
    if (--w->users == 0) {
        g_cond_broadcast(&fs->intr.cond);
    }
}

void vfsd_interrupt(VfsdFs *fs, uint64_t unique)
{
    g_autoptr(GPtrArray) found = g_ptr_array_new();
    GList *l;
    guint i;

    if (!unique) {
        return;
    }
    g_mutex_lock(&fs->intr.lock);
    /* A guest that reused the unique gets all its namesakes interrupted */
    for (l = fs->intr.waiters; l; l = l->next) {
        VfsdWaiter *w = l->data;

        if (w->unique == unique) {
            w->users++;
            g_ptr_array_add(found, w);
        }
    }
    for (i = 0; i < found->len; i++) {
        interrupt_waiter(fs, found->pdata[i]);
        waiter_release(fs, found->pdata[i]);
    }
    if (!found->len) {
        /* Not here yet, or done already: the oldest guess goes */
        fs->intr.early[fs->intr.early_next] = unique;
        fs->intr.early_next = (fs->intr.early_next + 1) %
                              G_N_ELEMENTS(fs->intr.early);
    }
    g_mutex_unlock(&fs->intr.lock);
}

/*
 * Called with fs->intr.lock held, and closing or paused set so that no
 * waiter comes in uninterrupted meanwhile
 */
static void interrupt_every_waiter(VfsdFs *fs)
{
    VfsdWaiter *w;

    /* Each one done leaves the list */
    while (fs->intr.waiters) {
        w = fs->intr.waiters->data;
        w->users++;
        interrupt_waiter(fs, w);
        waiter_release(fs, w);
    }
}

void vfsd_interrupt_all(VfsdFs *fs)
{
    g_mutex_lock(&fs->intr.lock);
    fs->intr.closing = true;
    interrupt_every_waiter(fs);
    g_mutex_unlock(&fs->intr.lock);
}

void vfsd_interrupt_pause(VfsdFs *fs, bool pause)
{
    g_mutex_lock(&fs->intr.lock);
    fs->intr.paused = pause;
    if (pause) {
        interrupt_every_waiter(fs);
    }
    g_mutex_unlock(&fs->intr.lock);
}
