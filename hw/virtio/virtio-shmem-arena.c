/*
 * Virtio shared memory window
 *
 * The window is one RAM memory region over a host range that is reserved
 * once, when the device is realized.  Mapping a file range into it is a
 * single mmap(MAP_FIXED) over part of that range: the guest physical
 * layout, the KVM memory slots and the vhost memory tables all stay the
 * same, so a guest can keep thousands of mappings and churn through them
 * quickly.  Holes all show one small shared scratch buffer (see
 * shmem_arena_fill()): they read as zeros until the guest writes there,
 * and what it writes costs QEMU no more than that buffer.  Read-only
 * ranges are mapped without write access, and a store into one makes
 * that whole mapping a hole (shmem_arena_write_fault_fixup()), so what
 * the guest stores there costs no more either.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/madvise.h"
#include "qemu/memfd.h"
#include "exec/cpu-common.h"
#include "hw/virtio/virtiofs-dax-compat.h"
#include VIRTIOFS_DAX_RAMBLOCK_H
#include VIRTIOFS_DAX_TB_H
#include "system/tcg.h"
#include "system/cpus.h"
#include "hw/virtio/virtio-shmem-arena.h"
#include "trace.h"

typedef struct VirtioSharedMemoryArenaMapping {
    /* start and last are offsets in the window */
    IntervalTreeNode node;
    /* Its entry in win->slots, for the SIGBUS fixup */
    unsigned int slot;
} VirtioSharedMemoryArenaMapping;

/*
 * A live mapping as the SIGBUS fixup sees it: the fixup runs in signal
 * context and cannot walk the interval tree, which the main thread
 * changes and frees from.  Written under the window's range lock.
 */
struct VirtioSharedMemoryArenaSlot {
    /* Offset in the window */
    uint64_t offset;
    /* What is still mapped from the file there; 0: a free slot */
    uint64_t len;
    /* Whether guest writes reach the file; else it is mapped PROT_READ */
    bool writable;
};

/*
 * The host ranges of all windows, for the SIGBUS fixup.  It runs in
 * signal context and finds its range without a lock; start and size are
 * written under the BQL, size last when adding and first when removing.
 */
#define SHMEM_ARENA_MAX_RANGES 64
typedef struct ShmemArenaRange {
    uintptr_t start;
    uintptr_t size;
    /*
     * A spin lock, taken by the fixup and by everything that mmap()s
     * over the window: the fixup must not map over a mapping the main
     * thread made after the fault (see shmem_arena_sigbus_fixup).
     * Never held while touching the window's memory, so a fault cannot
     * come while it is held, and held only across system calls and
     * updates of @slots.
     */
    int lock;
    /* The window's scratch, for shmem_arena_fill() */
    int scratch_fd;
    uint64_t scratch_size;
    /* The window's mapping table, nr_slots entries */
    VirtioSharedMemoryArenaSlot *slots;
    unsigned int nr_slots;
} ShmemArenaRange;
static ShmemArenaRange shmem_arena_ranges[SHMEM_ARENA_MAX_RANGES];

/* Pages the fixup filled with zeros since the last report */
static unsigned int shmem_arena_sigbus_pages, shmem_arena_sigbus_fixups;
/* Read-only mappings a guest store made holes since the last report */
static unsigned int shmem_arena_ro_pages, shmem_arena_ro_fixups;
/*
 * Bumped by every change to what a window maps, under its range lock:
 * tells a KVM EFAULT that nothing explains from one that the window
 * changed under (shmem_arena_fixup_all()).
 */
static unsigned int shmem_arena_generation;

bool virtio_shmem_arena_check_size(const char *prop, uint64_t size,
                                   Error **errp)
{
    g_autofree char *min = size_to_str(VIRTIO_SHMEM_ARENA_MIN_SIZE);
    g_autofree char *max = size_to_str(VIRTIO_SHMEM_ARENA_MAX_SIZE);

    if (!is_power_of_2(size)) {
        error_setg(errp, "%s must be a power of two, got %" PRIu64 " bytes",
                   prop, size);
        return false;
    }
    if (size < VIRTIO_SHMEM_ARENA_MIN_SIZE) {
        error_setg(errp, "%s must be at least %s", prop, min);
        return false;
    }
    if (size > VIRTIO_SHMEM_ARENA_MAX_SIZE) {
        error_setg(errp, "%s must be at most %s", prop, max);
        return false;
    }
    return true;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* Async-signal-safe, like everything the fixup calls */
static void shmem_arena_range_lock(ShmemArenaRange *r)
{
    while (qatomic_xchg(&r->lock, 1)) {
        sched_yield();
    }
}

static void shmem_arena_range_unlock(ShmemArenaRange *r)
{
    qatomic_store_release(&r->lock, 0);
}

/* The window's range in shmem_arena_ranges, or NULL if it has none */
static ShmemArenaRange *shmem_arena_range(VirtioSharedMemoryArena *win)
{
    return win->range < 0 ? NULL : &shmem_arena_ranges[win->range];
}

/*
 * What the guest sees where nothing is mapped.  Private anonymous memory
 * would read as zeros, but every page the guest writes would cost QEMU a
 * page, up to the window's size.  Read-only zeros would fault on a write:
 * under KVM the vCPU would stop, under TCG the store is QEMU's own and
 * would kill it.  So holes are a shared mapping of one small memfd, the
 * scratch, repeated: window offset o shows scratch offset o modulo its
 * size.  A guest write to a hole lands in the scratch and shows at the
 * same place in every scratch-sized piece of the window's holes, and
 * QEMU's memory for all of them is the scratch's size at most.  The
 * holes cost one VMA per scratch-sized piece of the window (neighbours
 * with consecutive scratch offsets merge): 16 MiB, or a 1024th of
 * windows over 16 GiB, keeps that at 1024 at most.
 */
#define SHMEM_ARENA_SCRATCH_MIN (16 * MiB)
#define SHMEM_ARENA_SCRATCH_PIECES 1024

static uint64_t shmem_arena_scratch_size(uint64_t size)
{
    return MIN(size, MAX(SHMEM_ARENA_SCRATCH_MIN,
                         size / SHMEM_ARENA_SCRATCH_PIECES));
}

/*
 * Put the scratch over [@offset, @offset + @len) of the window at @host,
 * dropping whatever was mapped there.  On failure, errno says why, and
 * part of the range may be changed.  Async-signal-safe: the SIGBUS fixup
 * uses it.
 */
static bool shmem_arena_fill(uint8_t *host, int scratch_fd,
                             uint64_t scratch_size, uint64_t offset,
                             uint64_t len)
{
    while (len) {
        uint64_t in = offset & (scratch_size - 1);
        uint64_t n = MIN(len, scratch_size - in);
        void *p = mmap(host + offset, n, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, scratch_fd, in);

        if (p == MAP_FAILED) {
            return false;
        }
        /* Whatever the guest left there is not worth a core dump */
        qemu_madvise(p, n, QEMU_MADV_DONTDUMP);
        offset += n;
        len -= n;
    }
    return true;
}

/* shmem_arena_fill() for @win, with mmap()'s result */
static void *shmem_arena_fill_win(VirtioSharedMemoryArena *win,
                                  uint64_t offset, uint64_t len)
{
    return shmem_arena_fill(win->host, win->scratch_fd, win->scratch_size,
                            offset, len) ? win->host + offset : MAP_FAILED;
}

/*
 * Around every mmap() over the window: the SIGBUS fixup must not map
 * over what such a call put there, and must find in win->slots what the
 * window holds when it runs.
 */
static void shmem_arena_begin_remap(VirtioSharedMemoryArena *win)
{
    ShmemArenaRange *r = shmem_arena_range(win);

    if (r) {
        shmem_arena_range_lock(r);
    }
}

/*
 * Ends the remap of [@offset, @offset + @len): if @remapped, the mappings
 * that were there are gone for the fixup, and if @slot is not -1, that
 * slot describes the new mapping.  The caller updates the interval tree
 * afterwards.
 */
static void shmem_arena_end_remap(VirtioSharedMemoryArena *win, uint64_t offset,
                                  uint64_t len, bool remapped, int slot)
{
    ShmemArenaRange *r = shmem_arena_range(win);
    uint64_t last = offset + len - 1;
    IntervalTreeNode *node;

    if (remapped) {
        for (node = interval_tree_iter_first(&win->mappings, offset, last);
             node; node = interval_tree_iter_next(node, offset, last)) {
            VirtioSharedMemoryArenaMapping *m =
                container_of(node, VirtioSharedMemoryArenaMapping, node);

            win->slots[m->slot].len = 0;
        }
        if (slot >= 0) {
            win->slots[slot].offset = offset;
            win->slots[slot].len = len;
        }
        qatomic_inc(&shmem_arena_generation);
    }
    if (r) {
        shmem_arena_range_unlock(r);
    }
}

static void shmem_arena_sigbus_say(const char *msg)
{
    int saved_errno = errno;

    if (write(STDERR_FILENO, msg, strlen(msg)) < 0) {
        /* Nothing else to do in signal context */
    }
    errno = saved_errno;
}

/*
 * The first page of [@lo, @fault] that faults, given that @fault does:
 * a file mapping faults from the page past the file's end on, so probe
 * by halves.  MADV_POPULATE_READ fails with EFAULT where an access would
 * raise SIGBUS; it reads one page of the file at most per probe.
 * Async-signal-safe.
 */
static uintptr_t shmem_arena_first_fault(uintptr_t lo, uintptr_t fault,
                                         uintptr_t page_size)
{
    uintptr_t hi = fault;

    while (lo < hi) {
        uintptr_t mid = lo + (hi - lo) / page_size / 2 * page_size;

        if (madvise((void *)mid, page_size, MADV_POPULATE_READ) < 0 &&
            errno == EFAULT) {
            hi = mid;
        } else {
            lo = mid + page_size;
        }
    }
    return hi;
}

/*
 * Past the end of its file from @page on, which faults: make that part of
 * @slot a hole.  Called under @r's lock.  Async-signal-safe.
 */
static bool shmem_arena_fix_slot(ShmemArenaRange *r, uintptr_t start,
                                 VirtioSharedMemoryArenaSlot *slot,
                                 uintptr_t page, uintptr_t page_size)
{
    uintptr_t first = shmem_arena_first_fault(start + slot->offset, page,
                                              page_size);
    uintptr_t end = start + slot->offset + slot->len;

    if (!shmem_arena_fill((uint8_t *)start, r->scratch_fd, r->scratch_size,
                          first - start, end - first)) {
        return false;
    }
    slot->len = first - start - slot->offset;
    qatomic_add(&shmem_arena_sigbus_pages, (end - first) / page_size);
    qatomic_inc(&shmem_arena_sigbus_fixups);
    qatomic_inc(&shmem_arena_generation);
    return true;
}

/*
 * A store into read-only @slot: make what is left of it a hole.  Called
 * under @r's lock.  Async-signal-safe.
 */
static bool shmem_arena_fix_readonly(ShmemArenaRange *r, uintptr_t start,
                                     VirtioSharedMemoryArenaSlot *slot,
                                     uintptr_t page_size)
{
    if (!shmem_arena_fill((uint8_t *)start, r->scratch_fd, r->scratch_size,
                          slot->offset, slot->len)) {
        return false;
    }
    qatomic_add(&shmem_arena_ro_pages, slot->len / page_size);
    qatomic_inc(&shmem_arena_ro_fixups);
    qatomic_inc(&shmem_arena_generation);
    slot->len = 0;
    return true;
}

/* Every read-only mapping of every window becomes a hole: how many */
static unsigned int shmem_arena_fix_readonly_all(void)
{
    uintptr_t page_size = qemu_real_host_page_size();
    unsigned int i, j, fixed = 0;

    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];

        if (!qatomic_read(&r->size)) {
            continue;
        }
        shmem_arena_range_lock(r);
        for (j = 0; r->size && j < r->nr_slots; j++) {
            VirtioSharedMemoryArenaSlot *slot = &r->slots[j];

            if (slot->len && !slot->writable) {
                fixed += shmem_arena_fix_readonly(r, r->start, slot,
                                                  page_size);
            }
        }
        shmem_arena_range_unlock(r);
    }
    return fixed;
}

/*
 * The range of the window that holds @page, locked, and its start in
 * @start; NULL if no window holds it.  Async-signal-safe.
 */
static ShmemArenaRange *shmem_arena_lock_range_of(uintptr_t page,
                                                  uintptr_t *start)
{
    unsigned int i;

    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];
        uintptr_t size = qatomic_read(&r->size);
        uintptr_t s;

        /* Read the size before the start it publishes */
        smp_rmb();
        s = qatomic_read(&r->start);
        if (!size || page - s >= size) {
            continue;
        }
        shmem_arena_range_lock(r);
        /* Gone meanwhile (hot-unplug): not ours after all */
        if (r->size != size || r->start != s) {
            shmem_arena_range_unlock(r);
            return NULL;
        }
        *start = s;
        return r;
    }
    return NULL;
}

/* The live mapping of @r that holds @page, or NULL; under @r's lock */
static VirtioSharedMemoryArenaSlot *shmem_arena_slot_of(ShmemArenaRange *r,
                                                        uintptr_t start,
                                                        uintptr_t page)
{
    unsigned int j;

    for (j = 0; j < r->nr_slots; j++) {
        if (r->slots[j].len &&
            page - start - r->slots[j].offset < r->slots[j].len) {
            return &r->slots[j];
        }
    }
    return NULL;
}

static void shmem_arena_report_sigbus(void);

/*
 * The repair shmem_arena_sigbus_fixup() (below) makes, for when the
 * accelerator cannot say where the guest faulted.  KVM does not raise
 * SIGBUS for a guest access to a file page that is gone: it fails
 * KVM_RUN with EFAULT, and Linux (up to at least 6.12) says which
 * address only for guest_memfd.  A mapping never covers more than its
 * file backs when it is made (virtiofsd maps up to the page that holds
 * the end, and grows the mapping with the file), so a mapping whose last
 * page now faults lies partly past the end of a file that shrank: repair
 * every such mapping.  One probe per live mapping, on a path a guest
 * takes once per host truncate.
 *
 * The EFAULT may also be a guest store into a read-only mapping (see
 * shmem_arena_write_fault_fixup()), and KVM does not say which one.  When
 * nothing is truncated, that EFAULT may still be old news: another vCPU
 * may have repaired the page since, or the back-end mapped the range
 * anew.  So the first such EFAULT only lets the vCPU retry (the caller
 * retries once when we return false), and so does one that comes after
 * a window changed.  One that comes back when no window has changed
 * since is a store into a read-only mapping, or a fault that is not a
 * window's at all: every read-only mapping of every window becomes a
 * hole, and the guest reads the scratch where it had mapped files
 * read-only, until they are mapped again.  A guest that follows the
 * protocol never stores there (it asks for the range writable first),
 * and so never loses its read-only mappings this way.  Not in signal
 * context.
 */
static bool shmem_arena_fixup_all(void)
{
    static __thread bool unexplained;
    static __thread unsigned int unexplained_generation;
    uintptr_t page_size = qemu_real_host_page_size();
    unsigned int i, j, fixed = 0, generation;
    bool retry;

    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];
        uintptr_t start;

        if (!qatomic_read(&r->size)) {
            continue;
        }
        shmem_arena_range_lock(r);
        start = r->start;
        for (j = 0; r->size && j < r->nr_slots; j++) {
            VirtioSharedMemoryArenaSlot *slot = &r->slots[j];
            uintptr_t last;

            if (!slot->len) {
                continue;
            }
            last = start + slot->offset + slot->len - page_size;
            if (madvise((void *)last, page_size, MADV_POPULATE_READ) < 0 &&
                errno == EFAULT) {
                fixed += shmem_arena_fix_slot(r, start, slot, last,
                                              page_size);
            }
        }
        shmem_arena_range_unlock(r);
    }
    /* Read after the probes: a repair they found done is counted in it */
    generation = qatomic_read(&shmem_arena_generation);
    if (!fixed && !unexplained) {
        /* The caller retries once */
        unexplained = true;
        unexplained_generation = generation;
        retry = false;
    } else if (!fixed && generation != unexplained_generation) {
        /* The windows changed since: that may have been it */
        unexplained_generation = generation;
        retry = true;
    } else {
        if (!fixed) {
            fixed = shmem_arena_fix_readonly_all();
        }
        unexplained = false;
        retry = fixed;
    }
    /*
     * Apart from the signal path's own trace, which both report: a test
     * must be able to tell which repair the accelerator took
     */
    trace_virtio_shmem_arena_fixup_all(fixed);
    shmem_arena_report_sigbus();
    return retry;
}

/*
 * A file mapped into a window can shrink under the guest, e.g. truncated
 * by another program on the host; a guest access to a page past its new
 * end then raises SIGBUS, which would kill QEMU.  Make the whole part of
 * that mapping past the file's end a hole instead (shmem_arena_fill(),
 * one mmap() per piece of scratch): the guest reads zeros, as it would
 * past the end of a file, and what it writes there never reaches the
 * file.  One fixup per mapping and truncate, one VMA more at most,
 * however many pages the guest touches: the cost is bounded by the
 * window's max_mappings, which its budget of VMAs already allows for
 * (shmem_arena_budget).  The hole stays
 * until the range is mapped anew: a file that grows back is seen there
 * again once the back-end maps it again (virtiofsd does when it learns
 * the file shrank, at once with --watch-truncate, and then grows the
 * mapping with the file).  Async-signal-safe.
 *
 * The fault may be old news by the time we run: the main thread may
 * have mapped something else there since (a back-end's SHMEM_MAP over a
 * range the guest gave up, the repair of a truncated mapping), and our
 * MAP_FIXED would throw that mapping away.  So, under the window's lock,
 * which every remap holds, ask the kernel first whether the page still
 * faults and just retry the access if not.  A page that faults again
 * right after such a probe (a write the file system refuses, say) gets
 * the zeros like any other.
 */
static bool shmem_arena_sigbus_fixup(void *addr)
{
    static __thread uintptr_t probed;
    uintptr_t page_size = qemu_real_host_page_size();
    uintptr_t page = (uintptr_t)addr & ~(page_size - 1);
    VirtioSharedMemoryArenaSlot *slot;
    ShmemArenaRange *r;
    uintptr_t start;
    bool fixed = false;
    int saved_errno;

    if (!addr) {
        return shmem_arena_fixup_all();
    }
    saved_errno = errno;
    r = shmem_arena_lock_range_of(page, &start);
    if (!r) {
        errno = saved_errno;
        return false;
    }
    if (probed != page &&
        madvise((void *)page, page_size, MADV_POPULATE_READ) == 0) {
        /* Mapped anew since the fault */
        probed = page;
        shmem_arena_range_unlock(r);
        errno = saved_errno;
        return true;
    }
    probed = 0;
    slot = shmem_arena_slot_of(r, start, page);
    if (!slot) {
        /* Not a file page that we know of: nothing we can fix */
        shmem_arena_sigbus_say("qemu: SIGBUS in a virtio shared memory "
                               "window outside its mappings\n");
    } else {
        fixed = shmem_arena_fix_slot(r, start, slot, page, page_size);
    }
    shmem_arena_range_unlock(r);
    errno = saved_errno;
    return fixed;
}

/*
 * A store into a range that the back-end mapped read-only.  Such ranges
 * are mapped PROT_READ: a private writable mapping would keep the
 * guest's writes out of the file too, but would copy every page the
 * guest writes into QEMU's anonymous memory, up to the window's size.
 * Instead the whole mapping becomes a hole, like the part of a mapping
 * past the end of a truncated file: one mmap() per piece of scratch, no
 * VMA more than the mapping had, and from then on the guest's stores
 * there land in the scratch and cost QEMU nothing more.  It reads the
 * scratch there until the range is mapped again.  The guest loses the
 * file's content in that range, but a guest that follows the protocol
 * never stores into a read-only range: Linux asks for it writable first
 * (FUSE_SETUPMAPPING again with the WRITE flag, which the back-end
 * answers with a replacing map), and only then lets anything write.
 *
 * Under TCG the store is QEMU's own and raises SIGSEGV, and so does a
 * copy by any thread of QEMU into a buffer the guest placed there; under
 * KVM the guest's store fails KVM_RUN with EFAULT instead, see
 * shmem_arena_fixup_all().  The fault may be old news by the time we
 * hold the lock (the back-end replaced the mapping, say with the
 * writable one the guest asked for): the slots say what is mapped now,
 * and a page in no read-only mapping is writable, so the store is just
 * retried.  Async-signal-safe.
 */
static bool shmem_arena_write_fault_fixup(void *addr)
{
    uintptr_t page_size = qemu_real_host_page_size();
    uintptr_t page = (uintptr_t)addr & ~(page_size - 1);
    VirtioSharedMemoryArenaSlot *slot;
    ShmemArenaRange *r;
    uintptr_t start;
    bool fixed = true;
    int saved_errno = errno;

    r = shmem_arena_lock_range_of(page, &start);
    if (!r) {
        errno = saved_errno;
        return false;
    }
    slot = shmem_arena_slot_of(r, start, page);
    if (slot && !slot->writable) {
        fixed = shmem_arena_fix_readonly(r, start, slot, page_size);
    }
    shmem_arena_range_unlock(r);
    errno = saved_errno;
    return fixed;
}

/* Say, outside signal context, that the fixups had to step in. */
static void shmem_arena_report_sigbus(void)
{
    unsigned int fixups = qatomic_xchg(&shmem_arena_sigbus_fixups, 0);
    unsigned int pages = qatomic_xchg(&shmem_arena_sigbus_pages, 0);

    if (fixups) {
        trace_virtio_shmem_arena_sigbus(fixups, pages);
        warn_report_once("the guest accessed pages past the end of files "
                         "mapped into a virtio shared memory window (files "
                         "truncated on the host?); they now read as zeros");
    }
    fixups = qatomic_xchg(&shmem_arena_ro_fixups, 0);
    pages = qatomic_xchg(&shmem_arena_ro_pages, 0);
    if (fixups) {
        trace_virtio_shmem_arena_readonly_store(fixups, pages);
        warn_report_once("the guest stored into ranges of a virtio shared "
                         "memory window mapped read-only; those ranges no "
                         "longer show their files until mapped again");
    }
}

static void shmem_arena_add_range(VirtioSharedMemoryArena *win)
{
    unsigned int i;

    win->range = -1;
    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];

        if (!qatomic_read(&r->size)) {
            /* Not in use: the fixup skips it, nobody else takes the lock */
            r->slots = win->slots;
            r->nr_slots = win->max_mappings + 1;
            r->scratch_fd = win->scratch_fd;
            r->scratch_size = win->scratch_size;
            qatomic_set(&r->start, (uintptr_t)win->host);
            /* A non-zero size publishes the rest (pairs with the fixup) */
            smp_wmb();
            qatomic_set(&r->size, win->size);
            win->range = i;
            qemu_set_sigbus_fixup(shmem_arena_sigbus_fixup);
            qemu_set_write_fault_fixup(shmem_arena_write_fault_fixup);
            return;
        }
    }
    warn_report("too many virtio shared memory windows: a file truncated "
                "under %s will crash QEMU", memory_region_name(&win->mr));
}

static void shmem_arena_remove_range(VirtioSharedMemoryArena *win)
{
    ShmemArenaRange *r = shmem_arena_range(win);

    if (!r) {
        return;
    }
    /* A fixup that found the range before sees it gone once it locks */
    shmem_arena_range_lock(r);
    qatomic_set(&r->size, 0);
    /* Retire the size before the start can be reused */
    smp_wmb();
    qatomic_set(&r->start, 0);
    r->slots = NULL;
    r->nr_slots = 0;
    shmem_arena_range_unlock(r);
    win->range = -1;
}

/*
 * Under TCG, translated code is looked up by RAM address and only
 * invalidated when QEMU sees a write to its page.  A remap changes the
 * bytes behind the same host address without such a write, so translated
 * blocks from the old file (think: a binary executed from a DAX mapping)
 * must be dropped here.  The softmmu TLB needs nothing: it caches the host
 * address, which never changes.  KVM needs nothing either: the kernel's
 * MMU notifiers zap the guest mappings of the replaced pages.
 */
static void shmem_arena_invalidate_code(VirtioSharedMemoryArena *win,
                                        uint64_t offset, uint64_t len)
{
#ifdef CONFIG_TCG
    if (tcg_enabled()) {
        ram_addr_t base = memory_region_get_ram_addr(&win->mr) + offset;

        virtiofs_dax_tb_invalidate_phys_range(base, base + len - 1);
    }
#endif
}

/* Forget the mappings that overlap [offset, last] */
static void shmem_arena_forget(VirtioSharedMemoryArena *win, uint64_t offset,
                               uint64_t last)
{
    IntervalTreeNode *node;

    while ((node = interval_tree_iter_first(&win->mappings, offset, last))) {
        VirtioSharedMemoryArenaMapping *m =
            container_of(node, VirtioSharedMemoryArenaMapping, node);

        interval_tree_remove(node, &win->mappings);
        win->free_slots[win->nr_free_slots++] = m->slot;
        g_free(m);
        win->nr_mappings--;
    }
}

/*
 * Check that [offset, offset + len) is a non-empty, page-aligned range
 * inside the window, without overflowing.
 */
static bool shmem_arena_range_valid(VirtioSharedMemoryArena *win,
                                    uint64_t offset, uint64_t len)
{
    uint64_t page_mask = qemu_real_host_page_size() - 1;

    return len != 0 && !(offset & page_mask) && !(len & page_mask) &&
           len <= win->size && offset <= win->size - len;
}

/*
 * After a failed mmap(MAP_FIXED) Linux may have removed part of the old
 * mappings.  A hole in the window would make the next guest access
 * through it fault in QEMU, so detect that (msync() fails with ENOMEM on
 * unmapped pages, and with MS_ASYNC it does nothing else) and fill the
 * range with zeros, forgetting the mappings that were there.
 */
static void shmem_arena_repair(VirtioSharedMemoryArena *win, uint64_t offset,
                               uint64_t len)
{
    void *p;

    if (msync(win->host + offset, len, MS_ASYNC) == 0 ||
        errno != ENOMEM) {
        return;
    }

    error_report("virtio shared memory window %s: a failed mapping left a "
                 "hole at offset 0x%" PRIx64 "; dropping the mappings there",
                 memory_region_name(&win->mr), offset);
    shmem_arena_begin_remap(win);
    p = shmem_arena_fill_win(win, offset, len);
    shmem_arena_end_remap(win, offset, len, p != MAP_FAILED, -1);
    if (p == MAP_FAILED) {
        /* Only an exhausted host gets here; a guest access may crash QEMU. */
        error_report("cannot repair virtio shared memory window %s: %s",
                     memory_region_name(&win->mr), strerror(errno));
        return;
    }
    shmem_arena_forget(win, offset, offset + len - 1);
    shmem_arena_invalidate_code(win, offset, len);
}

/*
 * Ends the remap of [@offset, @offset + @len) whose mmap() gave @p, and
 * that puts there the mapping of @slot (-1: none): 0, or its -errno once
 * the hole a failure may have left is filled.
 */
static int shmem_arena_remapped(VirtioSharedMemoryArena *win,
                                uint64_t offset, uint64_t len, void *p,
                                int slot)
{
    int err = errno;

    shmem_arena_end_remap(win, offset, len, p != MAP_FAILED, slot);
    if (p != MAP_FAILED) {
        return 0;
    }
    shmem_arena_repair(win, offset, len);
    return -err;
}

/*
 * How many mappings a window may hold.  Its holes cost a VMA per piece
 * of scratch (shmem_arena_fill()); each mapping costs the process up to
 * three VMAs (a mapping in the middle of a hole splits it in three, and
 * the SIGBUS fixup may split the mapping in two), out of vm.max_map_count
 * for the whole process: keep SHMEM_ARENA_VMA_RESERVE of it (at least an
 * eighth) for the rest of QEMU, its guest RAM, threads and libraries.
 */
#define SHMEM_ARENA_VMA_RESERVE 4096
#define SHMEM_ARENA_VMAS_PER_MAPPING 3

static unsigned int shmem_arena_budget(const char *name, uint64_t size,
                                       uint64_t scratch_size)
{
    uint64_t want = MAX(VIRTIO_SHMEM_ARENA_MIN_MAPPINGS,
                        size / VIRTIO_SHMEM_ARENA_GRANULE);
    uint64_t limit = 65530, reserve, budget, need;
    g_autofree char *text = NULL;

    if (g_file_get_contents("/proc/sys/vm/max_map_count", &text, NULL,
                            NULL)) {
        limit = g_ascii_strtoull(text, NULL, 10);
    }
    /* The holes' VMAs (shmem_arena_fill()) come first */
    reserve = MAX(limit / 8, SHMEM_ARENA_VMA_RESERVE) + size / scratch_size;
    budget = limit > reserve ?
             (limit - reserve) / SHMEM_ARENA_VMAS_PER_MAPPING : 0;
    if (want <= budget) {
        return want;
    }
    /* The limit whose budget has room for @want */
    need = want * SHMEM_ARENA_VMAS_PER_MAPPING;
    need = MAX(need * 8 / 7 + 1, need + SHMEM_ARENA_VMA_RESERVE) +
           size / scratch_size;
    warn_report("%s: the guest may need %" PRIu64 " mappings, but with "
                "vm.max_map_count=%" PRIu64 " QEMU accepts %" PRIu64
                "; raise vm.max_map_count to %" PRIu64 " or more",
                name, want, limit, budget, need);
    return MAX(budget, 1);
}

bool virtio_shmem_arena_init(VirtioSharedMemoryArena *win, Object *owner,
                             const char *name, uint64_t size, Error **errp)
{
    uint64_t scratch_size;
    unsigned int i;
    int scratch_fd;
    void *host;

    /* Address space only: shmem_arena_fill() puts the scratch there */
    host = mmap(NULL, size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED) {
        g_autofree char *sz = size_to_str(size);

        error_setg_errno(errp, errno,
                         "cannot reserve %s of host address space for %s",
                         sz, name);
        return false;
    }
    scratch_size = shmem_arena_scratch_size(size);
    /* Sealed: a scratch that shrank would make the holes fault */
    scratch_fd = qemu_memfd_create("virtio-shmem-scratch", scratch_size,
                                   false, 0,
                                   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL,
                                   errp);
    if (scratch_fd < 0) {
        munmap(host, size);
        return false;
    }
    /*
     * The window's content is the back-end's files (or the scratch):
     * shmem_arena_fill() keeps the holes out of core dumps like any other
     * memory that is not the guest's.
     */
    if (!shmem_arena_fill(host, scratch_fd, scratch_size, 0, size)) {
        error_setg_errno(errp, errno, "cannot map the holes of %s", name);
        close(scratch_fd);
        munmap(host, size);
        return false;
    }

    win->host = host;
    win->size = size;
    win->scratch_fd = scratch_fd;
    win->scratch_size = scratch_size;
    win->mappings = (IntervalTreeRoot) { };
    win->nr_mappings = 0;
    win->max_mappings = shmem_arena_budget(name, size, scratch_size);
    /* One more: a new mapping's, before those it replaces are forgotten */
    win->slots = g_new0(VirtioSharedMemoryArenaSlot, win->max_mappings + 1);
    win->free_slots = g_new(unsigned int, win->max_mappings + 1);
    for (i = 0; i <= win->max_mappings; i++) {
        win->free_slots[i] = win->max_mappings - i;
    }
    win->nr_free_slots = win->max_mappings + 1;
    memory_region_init_ram_ptr(&win->mr, owner, name, size, host);
    /*
     * Never RAM to migrate: the content is the back-end's files, which a
     * back-end that can migrate maps again on the destination, and
     * copying it would read all of them.  Nothing registers this block
     * for migration; say so here rather than rely on it.
     */
    qemu_ram_unset_migratable(win->mr.ram_block);
    /*
     * Never pinned, DMA-mapped or put in a kernel vhost table either:
     * its pages change under every remap and may fault (a truncated
     * file), where a device or the kernel would keep a stale page or
     * fail.  RAM_PROTECTED is "not accessible through DMA": the VFIO and
     * vDPA listeners skip such RAM, and so does vhost's.  Only the vCPUs
     * and QEMU's own copies reach the window.
     */
    win->mr.ram_block->flags |= RAM_PROTECTED;
    shmem_arena_add_range(win);
    trace_virtio_shmem_arena_init(name, size, host);
    return true;
}

int virtio_shmem_arena_map(VirtioSharedMemoryArena *win, uint64_t offset,
                           uint64_t len, int fd, uint64_t fd_offset,
                           bool writable, bool replace)
{
    uint64_t last = offset + len - 1;
    IntervalTreeNode *node;
    VirtioSharedMemoryArenaMapping *m;
    unsigned int replaced = 0;
    int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    int ret, slot;
    void *p;

    shmem_arena_report_sigbus();
    if (!virtio_shmem_arena_exists(win) ||
        !shmem_arena_range_valid(win, offset, len) ||
        (fd_offset & (qemu_real_host_page_size() - 1)) ||
        fd_offset > (uint64_t)INT64_MAX - len) {
        return -EINVAL;
    }

    for (node = interval_tree_iter_first(&win->mappings, offset, last);
         node; node = interval_tree_iter_next(node, offset, last)) {
        if (!replace) {
            return -EEXIST;
        }
        if (node->start < offset || node->last > last) {
            return -EBUSY;
        }
        replaced++;
    }
    if (win->nr_mappings - replaced >= win->max_mappings) {
        return -ENOSPC;
    }

    /* There is one: at most max_mappings are in use, and one more slot */
    assert(win->nr_free_slots);
    slot = win->free_slots[--win->nr_free_slots];
    /* A free slot: the fixups look at it once end_remap() publishes it */
    win->slots[slot].writable = writable;
    /*
     * Shared either way, so that no page of the file is ever copied into
     * QEMU's memory.  A read-only mapping has no write access: a guest
     * store there must not reach the file, and makes the mapping a hole
     * instead (shmem_arena_write_fault_fixup()).
     */
    shmem_arena_begin_remap(win);
    p = mmap(win->host + offset, len, prot, MAP_SHARED | MAP_FIXED, fd,
             fd_offset);
    ret = shmem_arena_remapped(win, offset, len, p, slot);
    if (ret < 0) {
        win->free_slots[win->nr_free_slots++] = slot;
        return ret;
    }

    shmem_arena_forget(win, offset, last);
    m = g_new0(VirtioSharedMemoryArenaMapping, 1);
    m->node.start = offset;
    m->node.last = last;
    m->slot = slot;
    interval_tree_insert(&m->node, &win->mappings);
    win->nr_mappings++;

    shmem_arena_invalidate_code(win, offset, len);
    trace_virtio_shmem_arena_map(memory_region_name(&win->mr), offset, len,
                                 fd_offset, writable, replaced);
    return 0;
}

int virtio_shmem_arena_unmap(VirtioSharedMemoryArena *win, uint64_t offset,
                             uint64_t len)
{
    uint64_t last = offset + len - 1;
    uint64_t next = offset;
    IntervalTreeNode *node;
    void *p;
    int ret;

    shmem_arena_report_sigbus();
    if (!virtio_shmem_arena_exists(win) ||
        !shmem_arena_range_valid(win, offset, len)) {
        return -EINVAL;
    }

    /* The mappings in the range, in order, must tile it exactly. */
    for (node = interval_tree_iter_first(&win->mappings, offset, last);
         node; node = interval_tree_iter_next(node, offset, last)) {
        if (node->start != next || node->last > last) {
            return -EINVAL;
        }
        next = node->last + 1;
    }
    if (next == offset) {
        return -ENOENT;
    }
    if (next != last + 1) {
        return -EINVAL;
    }

    shmem_arena_begin_remap(win);
    p = shmem_arena_fill_win(win, offset, len);
    ret = shmem_arena_remapped(win, offset, len, p, -1);
    if (ret < 0) {
        return ret;
    }
    shmem_arena_forget(win, offset, last);

    shmem_arena_invalidate_code(win, offset, len);
    trace_virtio_shmem_arena_unmap(memory_region_name(&win->mr), offset, len);
    return 0;
}

void virtio_shmem_arena_reset(VirtioSharedMemoryArena *win)
{
    void *p;

    if (!virtio_shmem_arena_exists(win)) {
        return;
    }
    shmem_arena_report_sigbus();

    trace_virtio_shmem_arena_reset(memory_region_name(&win->mr),
                                   win->nr_mappings);
    /* Drop the mappings, and with them the back-end's files */
    shmem_arena_begin_remap(win);
    p = shmem_arena_fill_win(win, 0, win->size);
    shmem_arena_end_remap(win, 0, win->size, p != MAP_FAILED, -1);
    if (p == MAP_FAILED) {
        /* Only an exhausted host gets here: keep the mappings we know of. */
        error_report("cannot reset virtio shared memory window %s: %s",
                     memory_region_name(&win->mr), strerror(errno));
        return;
    }
    /*
     * And what the guest wrote into the holes: the next guest finds
     * zeros there.  Punching keeps the size, so the holes never fault.
     */
    if (fallocate(win->scratch_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  0, win->scratch_size) < 0) {
        warn_report("virtio shared memory window %s: cannot clear the "
                    "scratch behind its holes: %s",
                    memory_region_name(&win->mr), strerror(errno));
    }
    shmem_arena_forget(win, 0, win->size - 1);
    shmem_arena_invalidate_code(win, 0, win->size);
}

void virtio_shmem_arena_finalize(VirtioSharedMemoryArena *win)
{
    if (!virtio_shmem_arena_exists(win)) {
        return;
    }
    /*
     * The memory region is gone already (it is finalized with its owner,
     * before the owner's own finalize), so leave it alone: munmap() alone
     * drops whatever is still mapped.
     */
    shmem_arena_forget(win, 0, win->size - 1);
    shmem_arena_remove_range(win);
    munmap(win->host, win->size);
    win->host = NULL;
    close(win->scratch_fd);
    win->scratch_fd = -1;
    g_free(win->slots);
    win->slots = NULL;
    g_free(win->free_slots);
    win->free_slots = NULL;
}
