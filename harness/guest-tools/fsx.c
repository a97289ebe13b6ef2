/*
 * Random file operations checked against an in-memory model, in the spirit
 * of fsx: pwrite, pread, mmap reads, mmap writes (MAP_SHARED + msync),
 * truncate up and down, fallocate (with and without KEEP_SIZE), hole
 * punching and copy_file_range, spread over a few files.
 *
 *   fsx [-n OPS] [-s SEED] [-l MAXLEN] [-m MAXOP] [-c EVERY] [-o DIR]
 *       [-x NAME]... [-X OP] [-w SECS] [-P] FILE...
 *
 *   -n OPS     operations in all (default 100000)
 *   -s SEED    the run is a function of the seed alone (default 1)
 *   -l MAXLEN  no file grows beyond this (default 16 MiB)
 *   -m MAXOP   longest single read, write, copy... (default 256 KiB)
 *   -c EVERY   compare every file in full every EVERY operations
 *   -o DIR     at the end, write each file's model to DIR/<basename> so
 *              that the host copy can be compared with it
 *   -x NAME    leave out the operation NAME (as printed: mapwrite...), to
 *              narrow down a failure
 *   -X OP      self-test: after operation OP, change one byte of the first
 *              file behind the model's back; the run must then fail
 *   -w SECS    report a run that makes no progress for SECS seconds (a
 *              call that never returns) with the operation log, and say
 *              "has not returned"; 0 (the default) does not watch
 *   -P         keep every file a whole number of pages long: operations
 *              that grow a file end on a page boundary, truncates go to
 *              one (upstream QEMU's DAX can map only such files)
 *
 * Reads and writes go on after a short transfer, and a read() or write()
 * that fails with EBUSY is tried again (up to EBUSY_TRIES times in a row;
 * both counted and reported): under DAX, Linux 6.12 stops a transfer with
 * EBUSY when its inline reclaim of one of the file's own ranges finds page
 * entries it cannot drop (fs/fuse/dax.c), instead of waiting.
 * fsx.sh checks that the back-end refused no mapping meanwhile.
 *
 * Every read is compared with the model at once.  On the first difference
 * the tool prints where, what it expected, the last operations it did and
 * exits with status 1.  The files are created (truncated) at start.
 *
 * The offsets favour the edges the DAX cache window has: 2 MiB range
 * boundaries and page boundaries, where a request is split between two
 * mappings or a mapping is reclaimed under it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DAX_RANGE (2u << 20)
#define LOG_LEN 32

enum op {
    OP_READ, OP_WRITE, OP_MAPREAD, OP_MAPWRITE, OP_TRUNCATE,
    OP_FALLOC, OP_FALLOC_KEEP, OP_PUNCH, OP_COPY, OP_NR
};

static const char *const op_name[OP_NR] = {
    [OP_READ] = "read", [OP_WRITE] = "write", [OP_MAPREAD] = "mapread",
    [OP_MAPWRITE] = "mapwrite", [OP_TRUNCATE] = "truncate",
    [OP_FALLOC] = "fallocate", [OP_FALLOC_KEEP] = "fallocate-keep",
    [OP_PUNCH] = "punch", [OP_COPY] = "copy_file_range",
};

/* Relative frequency of each operation; -x sets one to 0 */
static unsigned op_weight[OP_NR] = {
    [OP_READ] = 20, [OP_WRITE] = 20, [OP_MAPREAD] = 12, [OP_MAPWRITE] = 12,
    [OP_TRUNCATE] = 6, [OP_FALLOC] = 5, [OP_FALLOC_KEEP] = 5, [OP_PUNCH] = 8,
    [OP_COPY] = 12,
};

/* The last operation that changed a page of the model */
struct change {
    uint64_t n;
    enum op op;
};

struct file {
    const char *path;
    int fd;
    /* Bytes past size are kept zero: growing a file exposes zeros */
    uint8_t *model;
    uint64_t size;
    struct change *changed;     /* per page of maxlen */
};

struct logent {
    uint64_t n;
    enum op op;
    int f, f2;                  /* f2: copy_file_range's source */
    uint64_t off, off2, len;
    uint64_t size_before;
    int64_t res;
};

static struct file *files;
static int nfiles;
static uint64_t maxlen = 16u << 20, maxop = 256u << 10;
static uint64_t seed = 1, rng_state;
static long page;
static uint8_t *buf;
static struct logent oplog[LOG_LEN];
static uint64_t opno;
/* Bumped at every step of the run; the watchdog looks for it to move */
static uint64_t beats;
static unsigned watchdog_s;
static bool whole_pages;
static uint64_t op_count[OP_NR], short_copies, ebusy_retries, short_transfers;
#define EBUSY_TRIES 100
static enum op cur_op;
static const char *model_dir;

static void write_model(const char *dir, struct file *f);

/* splitmix64: tiny, and the same sequence everywhere for a given seed */
static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t n)
{
    return n ? rnd64() % n : 0;
}

static void dump_log(void)
{
    uint64_t first = opno >= LOG_LEN ? opno - LOG_LEN + 1 : 1;

    fprintf(stderr, "fsx: last operations (offsets and lengths in hex):\n");
    for (uint64_t n = first; n <= opno; n++) {
        struct logent *e = &oplog[n % LOG_LEN];

        if (e->n != n) {
            continue;
        }
        fprintf(stderr, "  #%" PRIu64 " %-14s %s off 0x%" PRIx64
                " len 0x%" PRIx64, e->n, op_name[e->op],
                files[e->f].path, e->off, e->len);
        if (e->op == OP_COPY) {
            fprintf(stderr, " from %s off 0x%" PRIx64, files[e->f2].path,
                    e->off2);
        }
        fprintf(stderr, " size was 0x%" PRIx64 " -> %" PRId64 "\n",
                e->size_before, e->res);
    }
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fsx: FAIL at operation %" PRIu64 " of the run with seed %"
            PRIu64 ": ", opno, seed);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    dump_log();
    if (model_dir) {
        /* For the host to tell a lost write from a stale read */
        const char *dir = model_dir;

        model_dir = NULL;           /* a failure in there dies plainly */
        for (int i = 0; i < nfiles; i++) {
            write_model(dir, &files[i]);
        }
        fprintf(stderr, "fsx: models written to %s\n", dir);
    }
    exit(1);
}

/* The model's pages of [off, off + len) were just changed by this op */
static void changed(struct file *f, uint64_t off, uint64_t len)
{
    uint64_t pg;

    for (pg = off / page; len && pg <= (off + len - 1) / page; pg++) {
        f->changed[pg] = (struct change){ .n = opno, .op = cur_op };
    }
}

/*
 * Where the file differs from the model, page by page: how much, the
 * operation that last changed the page, whether the file read zeros
 * there, and whether it still differs when read again a moment later
 * (a stale mapping or TLB entry comes right; data lost or written to
 * the wrong place does not).
 */
static void explain(struct file *f, uint64_t off, const uint8_t *got,
                    uint64_t len)
{
    uint64_t pg, shown = 0;
    uint8_t *again = malloc(page);

    for (pg = off / page; pg <= (off + len - 1) / page && shown < 8; pg++) {
        uint64_t from = pg * page > off ? pg * page : off;
        uint64_t to = (pg + 1) * page < off + len ? (pg + 1) * page : off + len;
        uint64_t i, bad = 0, zero = 0, still = 0;
        struct change *c = &f->changed[pg];
        ssize_t n;

        for (i = from; i < to; i++) {
            if (got[i - off] != f->model[i]) {
                bad++;
                zero += !got[i - off];
            }
        }
        if (!bad) {
            continue;
        }
        usleep(100000);
        n = again ? pread(f->fd, again, to - from, from) : -1;
        for (i = 0; n == (ssize_t)(to - from) && i < to - from; i++) {
            still += again[i] != f->model[from + i];
        }
        fprintf(stderr, "fsx:   page 0x%" PRIx64 ": %" PRIu64 " bytes differ"
                " (%" PRIu64 " read as zero), last changed by #%" PRIu64
                " %s; read again: %s%" PRIu64 " differ\n", pg * page, bad,
                zero, c->n, c->n ? op_name[c->op] : "(never)",
                n == (ssize_t)(to - from) ? "" : "(failed) ", still);
        shown++;
    }
    free(again);
}

/* GOT holds what the file has at OFF; compare it with the model */
static void compare(struct file *f, uint64_t off, const uint8_t *got,
                    uint64_t len, const char *how)
{
    const uint8_t *want = f->model + off;
    uint64_t i, bad = 0, first = 0;

    if (!memcmp(got, want, len)) {
        return;
    }
    for (i = 0; i < len; i++) {
        if (got[i] != want[i] && !bad++) {
            first = i;
        }
    }
    fprintf(stderr, "fsx: MISMATCH in %s (%s) at 0x%" PRIx64 ": %" PRIu64
            " of 0x%" PRIx64 " bytes from 0x%" PRIx64 " differ, size 0x%"
            PRIx64 "\n", f->path, how, off + first, bad, len, off, f->size);
    fprintf(stderr, "fsx:   file :");
    for (i = first; i < len && i < first + 16; i++) {
        fprintf(stderr, " %02x", got[i]);
    }
    fprintf(stderr, "\nfsx:   model:");
    for (i = first; i < len && i < first + 16; i++) {
        fprintf(stderr, " %02x", want[i]);
    }
    fputc('\n', stderr);
    explain(f, off, got, len);
    die("file and model differ");
}

/* An offset below LIMIT, often on or next to a page or DAX range edge */
static uint64_t page_up(uint64_t n)
{
    return (n + page - 1) / page * page;
}

static uint64_t pick_off(uint64_t limit)
{
    uint64_t off;

    if (!limit) {
        return 0;
    }
    switch (rnd(4)) {
    case 0:
        off = rnd(limit / DAX_RANGE + 1) * DAX_RANGE;
        off += rnd(2 * page) - page;        /* may wrap: clamped below */
        break;
    case 1:
        off = rnd(limit / page + 1) * page;
        break;
    default:
        off = rnd(limit);
    }
    return off < limit ? off : rnd(limit);
}

static uint64_t pick_len(void)
{
    switch (rnd(4)) {
    case 0:
        return 1 + rnd(64);
    case 1:
        return (1 + rnd(maxop / page)) * page;
    default:
        return 1 + rnd(maxop);
    }
}

static void fill_random(uint8_t *p, uint64_t len)
{
    uint64_t i, v = 0;

    for (i = 0; i < len; i++) {
        if (!(i & 7)) {
            v = rnd64();
        }
        p[i] = v >> ((i & 7) * 8);
    }
}

static void check_size(struct file *f)
{
    struct stat st;

    if (fstat(f->fd, &st) < 0) {
        die("fstat %s: %s", f->path, strerror(errno));
    }
    if ((uint64_t)st.st_size != f->size) {
        die("%s has size 0x%" PRIx64 ", the model 0x%" PRIx64, f->path,
            (uint64_t)st.st_size, f->size);
    }
}

static void full_check(struct file *f, int with_mmap)
{
    uint64_t off;

    check_size(f);
    for (off = 0; off < f->size; off += maxop) {
        uint64_t len = f->size - off < maxop ? f->size - off : maxop;
        ssize_t n = pread(f->fd, buf, len, off);

        __atomic_add_fetch(&beats, 1, __ATOMIC_RELAXED);
        if (n != (ssize_t)len) {
            die("full check: pread %s at 0x%" PRIx64 ": %zd of 0x%" PRIx64
                " bytes (%s)", f->path, off, n, len,
                n < 0 ? strerror(errno) : "short");
        }
        compare(f, off, buf, len, "full check, read");
    }
    if (with_mmap && f->size) {
        uint8_t *p = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);

        if (p == MAP_FAILED) {
            die("full check: mmap %s: %s", f->path, strerror(errno));
        }
        compare(f, 0, p, f->size, "full check, mmap");
        munmap(p, f->size);
    }
}

static void set_size(struct file *f, uint64_t size)
{
    if (size < f->size) {
        memset(f->model + size, 0, f->size - size);
        changed(f, size, f->size - size);
    } else {
        changed(f, f->size, size - f->size);
    }
    f->size = size;
}

/*
 * pread()/pwrite() of the whole of [off, off + len), as a careful program
 * does it: a short transfer goes on from where it stopped, and EBUSY (the
 * guest's DAX reclaim, see the top of this file) is tried again, up to
 * EBUSY_TRIES times in a row.  Returns the bytes moved (fewer only at the
 * end of the file) or -1 with errno.
 */
static ssize_t full_io(bool write, int fd, uint8_t *p, uint64_t len,
                       uint64_t off)
{
    uint64_t done = 0;
    int busy = 0;

    while (done < len) {
        ssize_t n = write ? pwrite(fd, p + done, len - done, off + done)
                          : pread(fd, p + done, len - done, off + done);

        if (n < 0 && errno == EBUSY && ++busy < EBUSY_TRIES) {
            ebusy_retries++;
            usleep(10000);
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        busy = 0;
        done += n;
        if (done < len) {
            short_transfers++;
        }
    }
    return done;
}

static int64_t do_read(struct file *f, uint64_t off, uint64_t len)
{
    uint64_t want = off < f->size ? f->size - off : 0;
    ssize_t n;

    want = want < len ? want : len;
    n = full_io(false, f->fd, buf, len, off);
    if (n < 0 || (uint64_t)n != want) {
        die("pread %s off 0x%" PRIx64 " len 0x%" PRIx64 ": %zd, want 0x%"
            PRIx64 " (%s)", f->path, off, len, n, want,
            n < 0 ? strerror(errno) : "count");
    }
    compare(f, off, buf, n, "read");
    return n;
}

static int64_t do_write(struct file *f, uint64_t off, uint64_t len)
{
    ssize_t n;

    fill_random(buf, len);
    n = full_io(true, f->fd, buf, len, off);
    if (n != (ssize_t)len) {
        die("pwrite %s off 0x%" PRIx64 " len 0x%" PRIx64 ": %zd (%s)",
            f->path, off, len, n, n < 0 ? strerror(errno) : "short");
    }
    memcpy(f->model + off, buf, len);
    changed(f, off, len);
    if (off + len > f->size) {
        f->size = off + len;
    }
    return n;
}

/* Map the pages holding [off, off + len) of F */
static uint8_t *map_range(struct file *f, uint64_t off, uint64_t len,
                          int prot, uint64_t *pg, uint64_t *maplen)
{
    uint8_t *p;

    *pg = off & ~(uint64_t)(page - 1);
    *maplen = off + len - *pg;
    p = mmap(NULL, *maplen, prot, MAP_SHARED, f->fd, *pg);
    if (p == MAP_FAILED) {
        die("mmap %s off 0x%" PRIx64 " len 0x%" PRIx64 ": %s", f->path,
            *pg, *maplen, strerror(errno));
    }
    return p;
}

static int64_t do_mapread(struct file *f, uint64_t off, uint64_t len)
{
    uint64_t pg, maplen;
    uint8_t *p;

    /* Past the end of file a mapping faults with SIGBUS: stay inside */
    if (off + len > f->size) {
        len = f->size - off;
    }
    p = map_range(f, off, len, PROT_READ, &pg, &maplen);
    compare(f, off, p + (off - pg), len, "mmap read");
    munmap(p, maplen);
    return len;
}

static int64_t do_mapwrite(struct file *f, uint64_t off, uint64_t len)
{
    uint64_t pg, maplen;
    uint8_t *p;

    /* A store can only reach the file inside it: grow it first, as fsx */
    if (off + len > f->size) {
        if (ftruncate(f->fd, off + len) < 0) {
            die("ftruncate %s to 0x%" PRIx64 " before mmap write: %s",
                f->path, off + len, strerror(errno));
        }
        changed(f, f->size, off + len - f->size);
        f->size = off + len;
    }
    p = map_range(f, off, len, PROT_READ | PROT_WRITE, &pg, &maplen);
    fill_random(p + (off - pg), len);
    memcpy(f->model + off, p + (off - pg), len);
    changed(f, off, len);
    if (msync(p, maplen, MS_SYNC) < 0) {
        die("msync %s: %s", f->path, strerror(errno));
    }
    munmap(p, maplen);
    return len;
}

static int64_t do_truncate(struct file *f, uint64_t size)
{
    if (ftruncate(f->fd, size) < 0) {
        die("ftruncate %s to 0x%" PRIx64 ": %s", f->path, size,
            strerror(errno));
    }
    set_size(f, size);
    return size;
}

static int64_t do_fallocate(struct file *f, int mode, uint64_t off,
                            uint64_t len)
{
    if (fallocate(f->fd, mode, off, len) < 0) {
        /* Not supported is a failure too: the run must cover it */
        die("fallocate %s mode 0x%x off 0x%" PRIx64 " len 0x%" PRIx64
            ": %s", f->path, mode, off, len, strerror(errno));
    }
    if (mode & FALLOC_FL_PUNCH_HOLE) {
        uint64_t end = off + len < f->size ? off + len : f->size;

        if (off < end) {
            memset(f->model + off, 0, end - off);
            changed(f, off, end - off);
        }
    } else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > f->size) {
        changed(f, f->size, off + len - f->size);
        f->size = off + len;
    }
    return 0;
}

static int64_t do_copy(struct file *dst, uint64_t doff, struct file *src,
                       uint64_t soff, uint64_t len)
{
    loff_t in = soff, out = doff;
    uint64_t avail = soff < src->size ? src->size - soff : 0;
    ssize_t n;

    n = copy_file_range(src->fd, &in, dst->fd, &out, len, 0);
    /* A short copy is allowed; copying more than there was is not */
    if (n < 0 || (uint64_t)n > (avail < len ? avail : len)) {
        die("copy_file_range %s off 0x%" PRIx64 " -> %s off 0x%" PRIx64
            " len 0x%" PRIx64 ": %zd (%s)", src->path, soff, dst->path,
            doff, len, n, n < 0 ? strerror(errno) : "more than available");
    }
    if ((uint64_t)n < (avail < len ? avail : len)) {
        short_copies++;
    }
    if (n > 0) {
        memmove(dst->model + doff, src->model + soff, n);
        changed(dst, doff, n);
        if (doff + n > dst->size) {
            dst->size = doff + n;
        }
    }
    return n;
}

static enum op pick_op(void)
{
    unsigned total = 0, r, i;

    for (i = 0; i < OP_NR; i++) {
        total += op_weight[i];
    }
    r = rnd(total);
    for (i = 0; r >= op_weight[i]; i++) {
        r -= op_weight[i];
    }
    return i;
}

static void one_op(void)
{
    struct logent *e = &oplog[opno % LOG_LEN];
    struct file *f = &files[rnd(nfiles)];
    uint64_t len = pick_len(), off;
    enum op op = pick_op();

    /* A map of an empty file has nothing to look at */
    if (op == OP_MAPREAD && f->size == 0) {
        op = OP_WRITE;
    }
    if (len > maxlen) {
        len = maxlen;
    }
    __atomic_add_fetch(&beats, 1, __ATOMIC_RELAXED);
    cur_op = op;
    *e = (struct logent){ .n = opno, .op = op, .f = f - files,
                          .f2 = f - files, .size_before = f->size };
    switch (op) {
    case OP_READ:
        /* Now and then across or past the end of file */
        off = pick_off(f->size + maxop);
        e->off = off, e->len = len;
        e->res = do_read(f, off, len);
        break;
    case OP_MAPREAD:
        off = pick_off(f->size);
        e->off = off, e->len = len;
        e->res = do_mapread(f, off, len);
        break;
    case OP_WRITE:
    case OP_MAPWRITE:
    case OP_FALLOC:
    case OP_FALLOC_KEEP:
    case OP_PUNCH:
        off = pick_off(maxlen - len + 1);
        if (whole_pages && off + len > f->size) {
            /* Grows the file: to a page boundary (maxlen is one) */
            len = page_up(off + len) - off;
        }
        e->off = off, e->len = len;
        if (op == OP_WRITE) {
            e->res = do_write(f, off, len);
        } else if (op == OP_MAPWRITE) {
            e->res = do_mapwrite(f, off, len);
        } else {
            e->res = do_fallocate(f, op == OP_FALLOC ? 0 :
                                  op == OP_FALLOC_KEEP ? FALLOC_FL_KEEP_SIZE :
                                  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  off, len);
        }
        break;
    case OP_TRUNCATE:
        /* Half the time a small step, the rest anywhere in range */
        if (rnd(2)) {
            off = f->size + rnd(2 * page) - page;
            off = off <= maxlen ? off : rnd(maxlen + 1);
        } else {
            off = rnd(maxlen + 1);
        }
        if (whole_pages) {
            off = off / page * page;
        }
        e->off = off;
        e->res = do_truncate(f, off);
        break;
    case OP_COPY: {
        struct file *src = &files[rnd(nfiles)];
        /* Now and then at or past the source's end: nothing to copy */
        uint64_t soff = pick_off(src->size + page), tries;

        e->f2 = src - files;
        if (whole_pages) {
            /* What is copied then ends on a page boundary too */
            soff = soff / page * page;
            len = page_up(len);
        }
        /* The same file must not overlap itself (EINVAL) */
        for (tries = 0; tries < 8; tries++) {
            off = pick_off(maxlen - len + 1);
            if (whole_pages) {
                off = off / page * page;
            }
            if (src != f || off + len <= soff || soff + len <= off) {
                break;
            }
        }
        if (tries == 8) {
            e->op = op = cur_op = OP_WRITE;
            e->off = off, e->len = len;
            e->res = do_write(f, off, len);
            break;
        }
        e->off = off, e->off2 = soff, e->len = len;
        e->res = do_copy(f, off, src, soff, len);
        break;
    }
    case OP_NR:
        abort();
    }
    if (whole_pages && f->size % page) {
        die("-P: %s left at 0x%" PRIx64 " bytes", f->path, f->size);
    }
    op_count[op]++;
}

/*
 * A page fault that waits for a free window range nobody frees does not
 * return, and no signal gets the thread out of it: only another thread can
 * still say where the run stood.  It reports once; the guest script sees
 * the message and gives up on the process.
 */
static void *watchdog(void *arg)
{
    uint64_t before;

    (void)arg;
    for (;;) {
        before = __atomic_load_n(&beats, __ATOMIC_RELAXED);
        sleep(watchdog_s);
        if (__atomic_load_n(&beats, __ATOMIC_RELAXED) == before) {
            break;
        }
    }
    fprintf(stderr, "fsx: FAIL: operation %" PRIu64 " has not returned in %u"
            " s (seed %" PRIu64 ")\n", opno, watchdog_s, seed);
    dump_log();
    fflush(stderr);
    return NULL;
}

/* Self-test: change one byte of the file without telling the model */
static void corrupt(struct file *f)
{
    /* An empty file grows by a byte: its size gives it away */
    uint64_t off = f->size ? rnd(f->size) : 0;
    uint8_t b = f->model[off] ^ 0x5a;

    if (pwrite(f->fd, &b, 1, off) != 1) {
        die("self-test write: %s", strerror(errno));
    }
    printf("fsx: self-test: byte 0x%" PRIx64 " of %s changed behind the "
           "model's back\n", off, f->path);
    fflush(stdout);
}

static void write_model(const char *dir, struct file *f)
{
    char *copy = strdup(f->path), path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, basename(copy));
    free(copy);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, f->model, f->size) != (ssize_t)f->size ||
        close(fd) < 0) {
        die("writing the model to %s: %s", path, strerror(errno));
    }
}

int main(int argc, char **argv)
{
    uint64_t nops = 100000, every = 5000, corrupt_at = 0;
    struct timespec t0, t1;
    int c, i;

    while ((c = getopt(argc, argv, "n:s:l:m:c:o:x:X:w:P")) != -1) {
        switch (c) {
        case 'n':
            nops = strtoull(optarg, NULL, 0);
            break;
        case 's':
            seed = strtoull(optarg, NULL, 0);
            break;
        case 'l':
            maxlen = strtoull(optarg, NULL, 0);
            break;
        case 'm':
            maxop = strtoull(optarg, NULL, 0);
            break;
        case 'c':
            every = strtoull(optarg, NULL, 0);
            break;
        case 'o':
            model_dir = optarg;
            break;
        case 'x':
            for (i = 0; i < OP_NR && strcmp(optarg, op_name[i]); i++) {
                continue;
            }
            if (i == OP_NR) {
                fprintf(stderr, "fsx: no operation named %s\n", optarg);
                return 2;
            }
            op_weight[i] = 0;
            break;
        case 'X':
            corrupt_at = strtoull(optarg, NULL, 0);
            break;
        case 'w':
            watchdog_s = strtoul(optarg, NULL, 0);
            break;
        case 'P':
            whole_pages = true;
            break;
        default:
            fprintf(stderr, "usage: fsx [-n OPS] [-s SEED] [-l MAXLEN] "
                    "[-m MAXOP] [-c EVERY] [-o DIR] [-x NAME]... [-X OP] "
                    "[-w SECS] [-P] FILE...\n");
            return 2;
        }
    }
    nfiles = argc - optind;
    page = sysconf(_SC_PAGESIZE);
    if (nfiles < 1 || maxop < (uint64_t)page || maxop > maxlen || !every) {
        fprintf(stderr, "fsx: need files, and page <= MAXOP <= MAXLEN\n");
        return 2;
    }
    rng_state = seed;
    /* -P may stretch an operation by up to a page */
    buf = malloc(maxop + page);
    files = calloc(nfiles, sizeof(*files));
    for (i = 0; i < nfiles; i++) {
        files[i].path = argv[optind + i];
        files[i].model = calloc(1, maxlen);
        files[i].changed = calloc(maxlen / page + 1,
                                  sizeof(*files[i].changed));
        files[i].fd = open(files[i].path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (files[i].fd < 0 || !files[i].model || !files[i].changed ||
            !buf) {
            fprintf(stderr, "fsx: %s: %s\n", files[i].path, strerror(errno));
            return 1;
        }
    }
    printf("fsx: seed %" PRIu64 ", %" PRIu64 " operations on %d files of up "
           "to %" PRIu64 " bytes, at most %" PRIu64 " per operation\n",
           seed, nops, nfiles, maxlen, maxop);
    fflush(stdout);

    if (watchdog_s) {
        pthread_t t;

        if (pthread_create(&t, NULL, watchdog, NULL)) {
            fprintf(stderr, "fsx: cannot start the watchdog\n");
            return 1;
        }
        pthread_detach(t);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (opno = 1; opno <= nops; opno++) {
        one_op();
        if (opno == corrupt_at) {
            corrupt(&files[0]);
        }
        if (opno % every == 0) {
            for (i = 0; i < nfiles; i++) {
                full_check(&files[i], 0);
            }
            printf("fsx: %" PRIu64 " operations, all files match\n", opno);
            fflush(stdout);
        }
    }
    opno = nops;
    for (i = 0; i < nfiles; i++) {
        if (fsync(files[i].fd) < 0) {
            die("fsync %s: %s", files[i].path, strerror(errno));
        }
        full_check(&files[i], 1);
        if (model_dir) {
            write_model(model_dir, &files[i]);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("fsx: done: %" PRIu64 " operations, 0 mismatches, %.1f s:",
           nops, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    for (i = 0; i < OP_NR; i++) {
        printf(" %s %" PRIu64, op_name[i], op_count[i]);
    }
    printf("; %" PRIu64 " short copies; %" PRIu64 " EBUSY retries, %" PRIu64
           " short reads/writes continued\n", short_copies, ebusy_retries,
           short_transfers);
    for (i = 0; i < nfiles; i++) {
        printf("fsx: %s: %" PRIu64 " bytes\n", files[i].path, files[i].size);
    }
    return 0;
}
