/*
 * Virtio shared memory window
 *
 * The window is one RAM memory region over a host range that is reserved
 * once, when the device is realized.  Mapping a file range into it is a
 * single mmap(MAP_FIXED) over part of that range: the guest physical
 * layout, the KVM memory slots and the vhost memory tables all stay the
 * same, so a guest can keep thousands of mappings and churn through them
 * quickly.  Holes are private anonymous memory: they read as zeros, and
 * what the guest writes there stays in QEMU.
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
#include "exec/cpu-common.h"
#include "hw/virtio/virtiofs-dax-compat.h"
#include VIRTIOFS_DAX_TB_H
#include "system/tcg.h"
#include "system/cpus.h"
#include "hw/virtio/virtio-shmem-arena.h"
#include "trace.h"

typedef struct VirtioSharedMemoryArenaMapping {
    /* start and last are offsets in the window */
    IntervalTreeNode node;
} VirtioSharedMemoryArenaMapping;

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
     * over the window: the fixup must not put its page over a mapping
     * the main thread made after the fault (see shmem_arena_sigbus_fixup).
     * Never held while touching the window's memory, so a fault cannot
     * come while it is held, and held only across single system calls.
     */
    int lock;
    /* Under the lock: the pages the fixup filled that are still there */
    uintptr_t *fixups;
    unsigned int nr_fixups;
    unsigned int max_fixups;
    /* Said when max_fixups is reached; made outside signal context */
    char give_up[160];
} ShmemArenaRange;
static ShmemArenaRange shmem_arena_ranges[SHMEM_ARENA_MAX_RANGES];

/* Pages the fixup filled with zeros since the last report */
static unsigned int shmem_arena_sigbus_pages;

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
 * Around every mmap() over the window: the SIGBUS fixup's page must not
 * land on what such a call put there, and the fixup pages it covers are
 * gone with it.
 */
static void shmem_arena_begin_remap(VirtioSharedMemoryArena *win)
{
    ShmemArenaRange *r = shmem_arena_range(win);

    if (r) {
        shmem_arena_range_lock(r);
    }
}

static void shmem_arena_end_remap(VirtioSharedMemoryArena *win, uint64_t offset,
                                  uint64_t len, bool remapped)
{
    ShmemArenaRange *r = shmem_arena_range(win);
    uintptr_t start = (uintptr_t)win->host + offset;
    unsigned int i = 0;

    if (!r) {
        return;
    }
    while (remapped && i < r->nr_fixups) {
        if (r->fixups[i] - start < len) {
            r->fixups[i] = r->fixups[--r->nr_fixups];
        } else {
            i++;
        }
    }
    shmem_arena_range_unlock(r);
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
 * A file mapped into a window can shrink under the guest, e.g. truncated
 * by another program on the host; a guest access to a page past its new
 * end then raises SIGBUS, which would kill QEMU.  Put a page of zeros
 * there instead: the guest reads zeros, as it would past the end of a
 * file, and what it writes there is discarded.  Async-signal-safe.
 *
 * The fault may be old news by the time we run: the main thread may
 * have mapped something else there since (a back-end's SHMEM_MAP over a
 * range the guest gave up, the repair of a truncated mapping), and our
 * MAP_FIXED would throw that mapping away.  So, under the window's lock,
 * which every remap holds, ask the kernel first whether the page still
 * faults (MADV_POPULATE_READ fails with EFAULT where an access would
 * raise SIGBUS) and just retry the access if not.  A page that faults
 * again right after such a probe (a write the file system refuses, say)
 * gets the zero page like any other.
 *
 * Each page put there costs the process up to two VMAs out of
 * vm.max_map_count, which everything else in QEMU needs too: past the
 * window's budget (max_fixups) the fixup gives up and QEMU dies of the
 * fault, rather than have every later mmap() and large malloc() fail.
 */
static bool shmem_arena_sigbus_fixup(void *addr)
{
    static __thread uintptr_t probed;
    uintptr_t page_mask = qemu_real_host_page_size() - 1;
    uintptr_t a = (uintptr_t)addr;
    uintptr_t page = a & ~page_mask;
    unsigned int i;

    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];
        uintptr_t size = qatomic_read(&r->size);
        uintptr_t start;
        bool fixed = false;
        int saved_errno;
        void *p;

        /* Read the size before the start it publishes */
        smp_rmb();
        start = qatomic_read(&r->start);
        if (!size || a - start >= size) {
            continue;
        }
        saved_errno = errno;
        shmem_arena_range_lock(r);
        /* Gone meanwhile (hot-unplug): not ours after all */
        if (r->size != size || r->start != start) {
            shmem_arena_range_unlock(r);
            errno = saved_errno;
            return false;
        }
        if (probed != page &&
            madvise((void *)page, page_mask + 1, MADV_POPULATE_READ) == 0) {
            /* Mapped anew since the fault */
            probed = page;
            shmem_arena_range_unlock(r);
            errno = saved_errno;
            return true;
        }
        probed = 0;
        if (r->nr_fixups >= r->max_fixups) {
            shmem_arena_sigbus_say(r->give_up);
        } else {
            p = mmap((void *)page, page_mask + 1, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                     -1, 0);
            if (p != MAP_FAILED) {
                r->fixups[r->nr_fixups++] = page;
                qatomic_inc(&shmem_arena_sigbus_pages);
                fixed = true;
            }
        }
        shmem_arena_range_unlock(r);
        errno = saved_errno;
        return fixed;
    }
    return false;
}

/* Say, outside signal context, that the fixup had to step in. */
static void shmem_arena_report_sigbus(void)
{
    unsigned int pages = qatomic_xchg(&shmem_arena_sigbus_pages, 0);

    if (pages) {
        trace_virtio_shmem_arena_sigbus(pages);
        warn_report_once("the guest accessed pages past the end of files "
                         "mapped into a virtio shared memory window (files "
                         "truncated on the host?); they now read as zeros");
    }
}

static void shmem_arena_add_range(VirtioSharedMemoryArena *win,
                                  unsigned int max_fixups)
{
    unsigned int i;

    win->range = -1;
    for (i = 0; i < SHMEM_ARENA_MAX_RANGES; i++) {
        ShmemArenaRange *r = &shmem_arena_ranges[i];

        if (!qatomic_read(&r->size)) {
            /* Not in use: the fixup skips it, nobody else takes the lock */
            g_free(r->fixups);
            r->fixups = g_new(uintptr_t, max_fixups);
            r->nr_fixups = 0;
            r->max_fixups = max_fixups;
            g_snprintf(r->give_up, sizeof(r->give_up),
                       "qemu: %s: the guest touched more than %u pages past "
                       "the end of truncated files; giving up\n",
                       memory_region_name(&win->mr), max_fixups);
            qatomic_set(&r->start, (uintptr_t)win->host);
            /* A non-zero size publishes the rest (pairs with the fixup) */
            smp_wmb();
            qatomic_set(&r->size, win->size);
            win->range = i;
            qemu_set_sigbus_fixup(shmem_arena_sigbus_fixup);
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
    r->nr_fixups = 0;
    shmem_arena_range_unlock(r);
    win->range = -1;
}

/*
 * Put fresh anonymous memory over part of the window, dropping whatever
 * was mapped there.  MAP_NORESERVE because the guest only ever touches a
 * fraction of the holes: reserving swap for all of them would make large
 * windows fail on hosts with strict overcommit accounting.
 */
static void *shmem_arena_mmap_anon(void *addr, uint64_t len, int flags)
{
    return mmap(addr, len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | flags, -1, 0);
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
        interval_tree_remove(node, &win->mappings);
        g_free(container_of(node, VirtioSharedMemoryArenaMapping, node));
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
    p = shmem_arena_mmap_anon(win->host + offset, len, MAP_FIXED);
    shmem_arena_end_remap(win, offset, len, p != MAP_FAILED);
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
 * Ends the remap of [@offset, @offset + @len) whose mmap() gave @p: 0, or
 * its -errno once the hole a failure may have left is filled.
 */
static int shmem_arena_remapped(VirtioSharedMemoryArena *win,
                                uint64_t offset, uint64_t len, void *p)
{
    int err = errno;

    shmem_arena_end_remap(win, offset, len, p != MAP_FAILED);
    if (p != MAP_FAILED) {
        return 0;
    }
    shmem_arena_repair(win, offset, len);
    return -err;
}

/*
 * How many mappings, and how many SIGBUS fixup pages, a window may cost.
 * Each costs the process up to two VMAs (a mapping or a page in the
 * middle of another splits it in three), out of vm.max_map_count for the
 * whole process: keep SHMEM_ARENA_VMA_RESERVE of it (at least an eighth)
 * for the rest of QEMU, its guest RAM, threads and libraries, and give
 * the fixup a sixteenth of what is left.
 */
#define SHMEM_ARENA_VMA_RESERVE 4096
#define SHMEM_ARENA_FIXUP_SHARE 16

static void shmem_arena_budget(const char *name, uint64_t size,
                               unsigned int *max_mappings,
                               unsigned int *max_fixups)
{
    uint64_t want = MAX(VIRTIO_SHMEM_ARENA_MIN_MAPPINGS,
                        size / VIRTIO_SHMEM_ARENA_GRANULE);
    uint64_t limit = 65530, reserve, budget, need;
    g_autofree char *text = NULL;

    if (g_file_get_contents("/proc/sys/vm/max_map_count", &text, NULL,
                            NULL)) {
        limit = g_ascii_strtoull(text, NULL, 10);
    }
    reserve = MAX(limit / 8, SHMEM_ARENA_VMA_RESERVE);
    budget = limit > reserve ? (limit - reserve) / 2 : 0;
    *max_fixups = MAX(budget / SHMEM_ARENA_FIXUP_SHARE, 1);
    budget -= MIN(budget, *max_fixups);
    if (want <= budget) {
        *max_mappings = want;
        return;
    }
    /* The limit whose budget has room for @want: limit * 7 / 16 > want */
    need = (want + want / (SHMEM_ARENA_FIXUP_SHARE - 1) + 1) * 2 * 8 / 7 + 1;
    need = MAX(need, want * 2 + 2 * SHMEM_ARENA_VMA_RESERVE);
    warn_report("%s: the guest may need %" PRIu64 " mappings, but with "
                "vm.max_map_count=%" PRIu64 " QEMU accepts %" PRIu64
                "; raise vm.max_map_count to %" PRIu64 " or more",
                name, want, limit, budget, need);
    *max_mappings = MAX(budget, 1);
}

bool virtio_shmem_arena_init(VirtioSharedMemoryArena *win, Object *owner,
                             const char *name, uint64_t size, Error **errp)
{
    unsigned int max_fixups;
    void *host;

    host = shmem_arena_mmap_anon(NULL, size, 0);
    if (host == MAP_FAILED) {
        g_autofree char *sz = size_to_str(size);

        error_setg_errno(errp, errno,
                         "cannot reserve %s of host address space for %s",
                         sz, name);
        return false;
    }
    /*
     * The window's content is the back-end's files (or zeros): keep it
     * out of core dumps like any other memory that is not the guest's.
     */
    qemu_madvise(host, size, QEMU_MADV_DONTDUMP);

    win->host = host;
    win->size = size;
    win->mappings = (IntervalTreeRoot) { };
    win->nr_mappings = 0;
    shmem_arena_budget(name, size, &win->max_mappings, &max_fixups);
    memory_region_init_ram_ptr(&win->mr, owner, name, size, host);
    /*
     * Never RAM to migrate: the content is the back-end's files, which a
     * back-end that can migrate maps again on the destination, and
     * copying it would read all of them.  Nothing registers this block
     * for migration; say so here rather than rely on it.
     */
    qemu_ram_unset_migratable(win->mr.ram_block);
    shmem_arena_add_range(win, max_fixups);
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
    int prot = PROT_READ | PROT_WRITE;
    int flags, ret;
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

    /*
     * A read-only mapping is private but writable: guest writes must not
     * reach the file, and must not fault either, since under TCG the
     * fault would be QEMU's own and kill it.  Pages the guest has not
     * written keep following the file.  No swap is reserved for the
     * copies, as for the holes.
     */
    flags = writable ? MAP_SHARED : MAP_PRIVATE | MAP_NORESERVE;
    flags |= MAP_FIXED;
    shmem_arena_begin_remap(win);
    p = mmap(win->host + offset, len, prot, flags, fd, fd_offset);
    ret = shmem_arena_remapped(win, offset, len, p);
    if (ret < 0) {
        return ret;
    }

    shmem_arena_forget(win, offset, last);
    m = g_new0(VirtioSharedMemoryArenaMapping, 1);
    m->node.start = offset;
    m->node.last = last;
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
    p = shmem_arena_mmap_anon(win->host + offset, len, MAP_FIXED);
    ret = shmem_arena_remapped(win, offset, len, p);
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
    /*
     * One mmap() over the whole window drops the mappings, and with them
     * the back-end's files, and also frees what the guest wrote into the
     * holes.
     */
    shmem_arena_begin_remap(win);
    p = shmem_arena_mmap_anon(win->host, win->size, MAP_FIXED);
    shmem_arena_end_remap(win, 0, win->size, p != MAP_FAILED);
    if (p == MAP_FAILED) {
        /* Only an exhausted host gets here: keep the mappings we know of. */
        error_report("cannot reset virtio shared memory window %s: %s",
                     memory_region_name(&win->mr), strerror(errno));
        return;
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
}
