/*
 * File I/O through mmap(MAP_SHARED) for the guest tests, with a pattern the
 * host side can recompute (harness/tests/pattern.py).
 *
 *   mmapio fill FILE SIZE SEED     size the file, write the pattern via mmap
 *   mmapio write FILE SIZE SEED    the same through write(2) instead
 *   mmapio check FILE SEED         read via mmap, verify the pattern
 *   mmapio loop FILE SECONDS       read the file via mmap over and over,
 *                                  reporting what it sees (truncation test)
 *   mmapio survey FILE SECONDS     the same, reading every byte, and say
 *                                  how many pages of the last pass read as
 *                                  zeros and whether a SIGBUS came
 *   mmapio scribble FILE FROM SECONDS
 *                                  write the file from byte FROM to its
 *                                  end over and over, through a shared
 *                                  mapping and with pwrite(2), reporting
 *                                  what it sees (truncation test)
 *   mmapio coherence FILE SIZE SEED1 SEED2 DIR
 *                                  size the file, store SEED1's pattern
 *                                  through a mapping (no msync), hand over
 *                                  to the host (DIR/phase1, then wait for
 *                                  DIR/phase2, as host_step), then verify
 *                                  SEED2's pattern, which the host wrote,
 *                                  through the same mapping
 *   mmapio migrate FILE SIZE SEED1 SEED2 DIR
 *                                  size the file, store SEED1's pattern
 *                                  through a shared mapping, and keep
 *                                  it across a live migration
 *                                  (harness/migrate.py: DIR/.migrate-ready,
 *                                  then wait for DIR/.migrate-done); a
 *                                  child reads the mapping all along and
 *                                  fails on any byte that is not
 *                                  SEED1's.  Afterwards verify SEED1 and
 *                                  store SEED2 through the same mapping
 *   mmapio reread FILE SEED1 SEED2 DIR
 *                                  map FILE, verify SEED1's pattern, hand
 *                                  over to the host (as coherence), then
 *                                  verify SEED2's pattern through the same
 *                                  mapping: the host replaced the file's
 *                                  content meanwhile (fix-up race test)
 *   mmapio touchpast FILE SEED DIR PROGRESS
 *                                  map FILE, verify SEED's pattern, hand
 *                                  over to the host (which truncates the
 *                                  file), then touch each page once,
 *                                  storing the count touched so far in
 *                                  PROGRESS after each (fix-up cap test)
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * A size or offset from the command line, decimal or 0x-prefixed hex.
 * This runs in the guest, without QEMU's qemu_strtou64().
 */
static uint64_t arg_u64(const char *s)
{
    unsigned long long v = 0;

    if (!strncmp(s, "0x", 2)) {
        sscanf(s + 2, "%llx", &v);
    } else {
        sscanf(s, "%llu", &v);
    }
    return v;
}

static inline uint8_t pattern(uint64_t i, unsigned seed)
{
    return (uint8_t)(i * 31 + seed + (i >> 12));
}

static sigjmp_buf bus_jump;

static void on_sigbus(int sig)
{
    siglongjmp(bus_jump, 1);
}

static int fail(const char *what, const char *file)
{
    fprintf(stderr, "mmapio: %s %s: %s\n", what, file, strerror(errno));
    return 1;
}

/*
 * Map FILE whole (read-only, shared) and check SEED's pattern, so that
 * every range of it is mapped before the host acts.
 */
static volatile uint8_t *map_checked(const char *file, unsigned seed,
                                     off_t *size)
{
    struct stat st;
    int fd = open(file, O_RDONLY);

    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
        fail("open", file);
        return NULL;
    }
    /* volatile: every load must reach the window, never a register copy */
    volatile uint8_t *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED,
                               fd, 0);
    if (p == MAP_FAILED) {
        fail("mmap", file);
        return NULL;
    }
    for (off_t i = 0; i < st.st_size; i++) {
        if (p[i] != pattern(i, seed)) {
            printf("%s: byte %llu is %u before the host acted, want %u\n",
                   file, (unsigned long long)i, p[i], pattern(i, seed));
            return NULL;
        }
    }
    *size = st.st_size;
    return p;
}

/* The host_step handshake of guest-lib.sh, from C: DIR/phase1, DIR/phase2 */
static int hand_over(const char *dir)
{
    char phase[4096];
    struct stat st;
    int waited;

    snprintf(phase, sizeof(phase), "%s/phase1", dir);
    if (close(open(phase, O_WRONLY | O_CREAT, 0644)) < 0) {
        return fail("create", phase);
    }
    snprintf(phase, sizeof(phase), "%s/phase2", dir);
    for (waited = 0; stat(phase, &st) < 0; waited++) {
        if (waited > 1200) {
            fprintf(stderr, "mmapio: the host never answered\n");
            return 1;
        }
        usleep(100000);
    }
    return 0;
}

/* Verify SEED's pattern through @p; the first wrong byte, or -1 */
static long long first_wrong(volatile uint8_t *p, uint64_t size,
                             unsigned seed)
{
    for (uint64_t i = 0; i < size; i++) {
        if (p[i] != pattern(i, seed)) {
            return i;
        }
    }
    return -1;
}

/*
 * harness/migrate.py's handshake: say the guest is ready, wait until the
 * migration is over (on the destination if it completed)
 */
static int migrate_over(const char *dir)
{
    char path[4096], outcome[64] = "";
    struct stat st;
    int waited, fd;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/.migrate-ready", dir);
    if (close(open(path, O_WRONLY | O_CREAT, 0644)) < 0) {
        return fail("create", path);
    }
    snprintf(path, sizeof(path), "%s/.migrate-done", dir);
    for (waited = 0; stat(path, &st) < 0; waited++) {
        if (waited > 3000) {
            fprintf(stderr, "mmapio: the migration never ended\n");
            return 1;
        }
        usleep(100000);
    }
    fd = open(path, O_RDONLY);
    n = fd < 0 ? -1 : read(fd, outcome, sizeof(outcome) - 1);
    if (n > 0) {
        outcome[strcspn(outcome, "\n")] = 0;
    }
    printf("migrate: the migration %s\n", outcome);
    return 0;
}

static int migrate_mapped(const char *file, uint64_t size, unsigned seed1,
                          unsigned seed2, const char *dir)
{
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    /*
     * Volatile: every byte must be loaded from the mapping while the
     * guest migrates, and the stop flag is written by another process.
     */
    volatile uint8_t *p, *stop;
    unsigned long long passes = 0;
    long long bad;
    pid_t child;
    int status;

    if (fd < 0 || ftruncate(fd, size) < 0) {
        return fail("open and size", file);
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    stop = mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || stop == MAP_FAILED) {
        return fail("mmap", file);
    }
    for (uint64_t i = 0; i < size; i++) {
        p[i] = pattern(i, seed1);
    }
    /* A thread of the guest that never stops reading the mapping */
    child = fork();
    if (child < 0) {
        return fail("fork", file);
    }
    if (child == 0) {
        while (!*stop) {
            bad = first_wrong(p, size, seed1);
            if (bad >= 0) {
                printf("migrate %s: after %llu passes the reader found "
                       "byte %lld is %u, want %u\n", file, passes, bad,
                       p[bad], pattern(bad, seed1));
                fflush(stdout);
                _exit(1);
            }
            passes++;
        }
        printf("migrate %s: the reader read it whole %llu times\n", file,
               passes);
        fflush(stdout);
        _exit(0);
    }
    if (migrate_over(dir)) {
        kill(child, SIGKILL);
        return 1;
    }
    /* Let the reader go on for a while on this side of the migration */
    sleep(2);
    *stop = 1;
    if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status)) {
        printf("migrate %s: the reader failed\n", file);
        return 1;
    }
    bad = first_wrong(p, size, seed1);
    if (bad >= 0) {
        printf("migrate %s: byte %lld is %u through the mapping, want %u\n",
               file, bad, p[bad], pattern(bad, seed1));
        return 1;
    }
    for (uint64_t i = 0; i < size; i++) {
        p[i] = pattern(i, seed2);
    }
    bad = first_wrong(p, size, seed2);
    if (bad >= 0) {
        printf("migrate %s: byte %lld is %u after the write, want %u\n",
               file, bad, p[bad], pattern(bad, seed2));
        return 1;
    }
    printf("migrate %s: %llu bytes read back and written through the "
           "same mapping\n", file, (unsigned long long)size);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: mmapio fill|write FILE SIZE SEED\n"
                "       mmapio check FILE SEED\n"
                "       mmapio loop|survey FILE SECONDS\n"
                "       mmapio scribble FILE FROM SECONDS\n"
                "       mmapio coherence FILE SIZE SEED1 SEED2 DIR\n"
                "       mmapio migrate FILE SIZE SEED1 SEED2 DIR\n"
                "       mmapio reread FILE SEED1 SEED2 DIR\n"
                "       mmapio touchpast FILE SEED DIR PROGRESS\n");
        return 2;
    }
    const char *op = argv[1], *file = argv[2];

    if (!strcmp(op, "fill") || !strcmp(op, "write")) {
        uint64_t size = arg_u64(argv[3]);
        unsigned seed = argc > 4 ? atoi(argv[4]) : 0;
        int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);

        if (fd < 0) {
            return fail("open", file);
        }
        if (!strcmp(op, "write")) {
            static uint8_t buf[65536];
            for (uint64_t off = 0; off < size; off += sizeof(buf)) {
                size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);
                for (size_t i = 0; i < n; i++) {
                    buf[i] = pattern(off + i, seed);
                }
                if (pwrite(fd, buf, n, off) != (ssize_t)n) {
                    return fail("pwrite", file);
                }
            }
        } else {
            if (ftruncate(fd, size) < 0) {
                return fail("ftruncate", file);
            }
            uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                              MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) {
                return fail("mmap", file);
            }
            for (uint64_t i = 0; i < size; i++) {
                p[i] = pattern(i, seed);
            }
            if (msync(p, size, MS_SYNC) < 0) {
                return fail("msync", file);
            }
            munmap(p, size);
        }
        if (fsync(fd) < 0) {
            return fail("fsync", file);
        }
        close(fd);
        printf("%s %s %llu bytes seed %u\n", op, file,
               (unsigned long long)size, seed);
        return 0;
    }

    if (!strcmp(op, "check")) {
        unsigned seed = atoi(argv[3]);
        struct stat st;
        int fd = open(file, O_RDONLY);

        if (fd < 0 || fstat(fd, &st) < 0) {
            return fail("open", file);
        }
        if (st.st_size == 0) {
            printf("check %s: empty\n", file);
            return 1;
        }
        uint8_t *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return fail("mmap", file);
        }
        for (uint64_t i = 0; i < (uint64_t)st.st_size; i++) {
            if (p[i] != pattern(i, seed)) {
                printf("check %s: byte %llu is %u, want %u\n", file,
                       (unsigned long long)i, p[i], pattern(i, seed));
                return 1;
            }
        }
        printf("check %s: %llu bytes ok\n", file,
               (unsigned long long)st.st_size);
        return 0;
    }

    if (!strcmp(op, "migrate") && argc == 7) {
        return migrate_mapped(file, arg_u64(argv[3]),
                              atoi(argv[4]), atoi(argv[5]), argv[6]);
    }

    if (!strcmp(op, "coherence") && argc == 7) {
        uint64_t size = arg_u64(argv[3]);
        unsigned seed1 = atoi(argv[4]), seed2 = atoi(argv[5]);
        int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);

        if (fd < 0 || ftruncate(fd, size) < 0) {
            return fail("open and size", file);
        }
        /* volatile: the host changes the file under the mapping */
        volatile uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                                   MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return fail("mmap", file);
        }
        /*
         * No msync: under DAX these stores land in the host's page cache
         * directly, so the host must see them as they are.
         */
        for (uint64_t i = 0; i < size; i++) {
            p[i] = pattern(i, seed1);
        }
        if (hand_over(argv[6])) {
            return 1;
        }
        /* The same mapping, never remapped: the host's pwrite shows */
        for (uint64_t i = 0; i < size; i++) {
            if (p[i] != pattern(i, seed2)) {
                printf("coherence %s: byte %llu is %u through the mapping, "
                       "the host wrote %u\n", file, (unsigned long long)i,
                       p[i], pattern(i, seed2));
                return 1;
            }
        }
        printf("coherence %s: %llu bytes each way\n", file,
               (unsigned long long)size);
        return 0;
    }

    if (!strcmp(op, "loop")) {
        int seconds = atoi(argv[3]);
        struct stat st;
        int fd = open(file, O_RDONLY);

        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
            return fail("open", file);
        }
        volatile uint8_t *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return fail("mmap", file);
        }
        time_t end = time(NULL) + seconds;
        unsigned long passes = 0;
        while (time(NULL) < end) {
            unsigned sum = 0;
            for (off_t i = 0; i < st.st_size; i += 4096) {
                sum += p[i];
            }
            passes++;
            (void)sum;
        }
        printf("loop %s: %lu passes\n", file, passes);
        return 0;
    }
    if (!strcmp(op, "survey")) {
        int seconds = atoi(argv[3]);
        struct stat st;
        int fd = open(file, O_RDONLY);

        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
            return fail("open", file);
        }
        volatile uint8_t *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return fail("mmap", file);
        }
        uint64_t pages = (st.st_size + 4095) / 4096;
        /* Outcome of the latest pass, and the first pass that saw zeros */
        volatile uint64_t zero_pages = 0, first_zero_pass = 0;
        volatile unsigned long passes = 0;
        volatile int sigbus = 0;
        struct sigaction sa = { .sa_handler = on_sigbus };
        sigaction(SIGBUS, &sa, NULL);
        time_t end = time(NULL) + seconds;
        if (sigsetjmp(bus_jump, 1)) {
            sigbus = 1;
        } else {
            while (time(NULL) < end) {
                uint64_t zeros = 0;
                for (uint64_t pg = 0; pg < pages; pg++) {
                    uint64_t lim = (pg + 1) * 4096 < (uint64_t)st.st_size ?
                                   (pg + 1) * 4096 : (uint64_t)st.st_size;
                    uint8_t any = 0;
                    for (uint64_t i = pg * 4096; i < lim; i++) {
                        any |= p[i];
                    }
                    zeros += !any;
                }
                passes++;
                zero_pages = zeros;
                if (zeros && !first_zero_pass) {
                    first_zero_pass = passes;
                }
            }
        }
        printf("survey %s: passes %lu pages %llu zero-pages-last-pass %llu "
               "first-zero-pass %llu sigbus %d\n", file, passes,
               (unsigned long long)pages, (unsigned long long)zero_pages,
               (unsigned long long)first_zero_pass, sigbus);
        return 0;
    }
    if (!strcmp(op, "scribble") && argc == 5) {
        off_t from = arg_u64(argv[3]);
        int seconds = atoi(argv[4]);
        static const uint8_t mark[4] = { 0xde, 0xad, 0xbe, 0xef };
        struct stat st;
        int fd = open(file, O_RDWR);

        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= from) {
            return fail("open", file);
        }
        volatile uint8_t *p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE,
                                   MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return fail("mmap", file);
        }
        volatile unsigned long passes = 0, writes = 0, errors = 0;
        volatile unsigned long sigbus = 0;
        volatile int first_errno = 0;
        struct sigaction sa = { .sa_handler = on_sigbus };
        sigaction(SIGBUS, &sa, NULL);
        time_t end = time(NULL) + seconds;
        /*
         * A SIGBUS (the guest learnt the file is shorter) ends the pass,
         * not the run: the pwrite()s must go on being tried.
         */
        if (sigsetjmp(bus_jump, 1)) {
            sigbus++;
        }
        while (time(NULL) < end) {
            for (off_t off = from; off < st.st_size; off += 4096) {
                p[off] = mark[0];
                p[off + 4095] = mark[3];
                /* Within the size the guest knows: no extending write */
                if (pwrite(fd, mark, sizeof(mark), off + 64) < 0) {
                    errors++;
                    first_errno = first_errno ? first_errno : errno;
                }
                writes++;
            }
            passes++;
        }
        printf("scribble %s: passes %lu writes %lu pwrite-errors %lu (%s) "
               "sigbus %lu\n", file, passes, writes, errors,
               errors ? strerror(first_errno) : "none", sigbus);
        return 0;
    }
    if (!strcmp(op, "reread") && argc == 6) {
        unsigned seed1 = atoi(argv[3]), seed2 = atoi(argv[4]);
        volatile uint8_t *p;
        off_t size;

        p = map_checked(file, seed1, &size);
        if (!p || hand_over(argv[5])) {
            return 1;
        }
        struct sigaction sa = { .sa_handler = on_sigbus };
        sigaction(SIGBUS, &sa, NULL);
        if (sigsetjmp(bus_jump, 1)) {
            printf("reread %s: SIGBUS in the guest\n", file);
            return 1;
        }
        for (off_t i = 0; i < size; i++) {
            if (p[i] != pattern(i, seed2)) {
                printf("reread %s: byte %llu is %u, the host wrote %u\n",
                       file, (unsigned long long)i, p[i], pattern(i, seed2));
                return 1;
            }
        }
        printf("reread %s: %llu bytes of the host's new content\n", file,
               (unsigned long long)size);
        return 0;
    }
    if (!strcmp(op, "touchpast") && argc == 6) {
        unsigned seed = atoi(argv[3]);
        volatile uint8_t *p;
        unsigned long zeros = 0;
        off_t size;
        int pfd;

        p = map_checked(file, seed, &size);
        if (!p) {
            return 1;
        }
        pfd = open(argv[5], O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (pfd < 0) {
            return fail("open", argv[5]);
        }
        printf("touchpast %s: %llu bytes mapped and checked\n", file,
               (unsigned long long)size);
        fflush(stdout);
        if (hand_over(argv[4])) {
            return 1;
        }
        for (off_t pg = 0; pg < size / 4096; pg++) {
            char line[32];
            int n;

            zeros += !p[pg * 4096];
            /* Fixed width: the count only grows, the file never shrinks */
            n = snprintf(line, sizeof(line), "%20llu\n",
                         (unsigned long long)pg + 1);
            if (pwrite(pfd, line, n, 0) != n) {
                return fail("pwrite", argv[5]);
            }
        }
        printf("touchpast %s: %llu pages touched, %lu read as zeros\n",
               file, (unsigned long long)(size / 4096), zeros);
        return 0;
    }
    fprintf(stderr, "mmapio: unknown operation %s\n", op);
    return 2;
}
