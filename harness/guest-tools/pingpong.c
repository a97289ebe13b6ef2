/*
 * Two guests share one file through mmap(MAP_SHARED) and count together.
 *
 *   pingpong writer FILE N SECONDS    guest A: stores 1, 2, ... N
 *   pingpong reader FILE N SECONDS    guest B: sees each value, acks it
 *
 * The file (at least 4 KiB, zero at start) holds two 64-bit words on
 * separate cache lines: the value, written only by the writer, and the
 * acknowledgement, written only by the reader.  The writer stores k only
 * once the ack says k - 1, so the reader must see every value, in order;
 * a value it did not expect means a store was lost or reordered on the
 * way.  Neither side calls msync or reads the file: what one guest stores
 * must reach the other through the mapping alone, which is what DAX gives
 * (both map the host's page cache).  Without progress for SECONDS the
 * side gives up and says where it stood, so a lost store fails instead of
 * hanging.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define VALUE_OFF 0
#define ACK_OFF 64

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Spin a little, then sleep: the other side may be a busy TCG vCPU */
static void pause_a_bit(unsigned long spins)
{
    if (spins > 1000) {
        usleep(50);
    }
}

int main(int argc, char **argv)
{
    uint64_t *value, *ack, n, k, seen;
    double limit, last, start;
    unsigned long spins;
    int writer, fd;
    void *p;

    if (argc != 5 || (strcmp(argv[1], "writer") && strcmp(argv[1], "reader"))) {
        fprintf(stderr, "usage: pingpong writer|reader FILE N SECONDS\n");
        return 2;
    }
    writer = !strcmp(argv[1], "writer");
    n = strtoull(argv[3], NULL, 0);
    limit = atof(argv[4]);
    fd = open(argv[2], O_RDWR);
    if (fd < 0) {
        fprintf(stderr, "pingpong: open %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "pingpong: mmap %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    value = (uint64_t *)((char *)p + VALUE_OFF);
    ack = (uint64_t *)((char *)p + ACK_OFF);

    start = last = now();
    for (k = 1; k <= n; k++) {
        spins = 0;
        if (writer) {
            /* Wait for the reader to have seen k - 1 */
            while ((seen = __atomic_load_n(ack, __ATOMIC_ACQUIRE)) != k - 1) {
                if (seen > k - 1) {
                    printf("pingpong writer: ack %llu before value %llu was "
                           "stored\n", (unsigned long long)seen,
                           (unsigned long long)k - 1);
                    return 1;
                }
                if (now() - last > limit) {
                    printf("pingpong writer: no ack for %llu within %.0f s "
                           "(ack %llu)\n", (unsigned long long)k - 1, limit,
                           (unsigned long long)seen);
                    return 1;
                }
                pause_a_bit(++spins);
            }
            __atomic_store_n(value, k, __ATOMIC_RELEASE);
        } else {
            /* The next change of the value must be exactly k */
            while ((seen = __atomic_load_n(value, __ATOMIC_ACQUIRE)) == k - 1) {
                if (now() - last > limit) {
                    printf("pingpong reader: value stayed %llu for %.0f s, "
                           "waiting for %llu\n", (unsigned long long)seen,
                           limit, (unsigned long long)k);
                    return 1;
                }
                pause_a_bit(++spins);
            }
            if (seen != k) {
                printf("pingpong reader: saw %llu after %llu: an increment "
                       "was not observed\n", (unsigned long long)seen,
                       (unsigned long long)k - 1);
                return 1;
            }
            __atomic_store_n(ack, k, __ATOMIC_RELEASE);
        }
        last = now();
    }
    if (writer) {
        /* Done only once the reader has acknowledged the last value */
        while ((seen = __atomic_load_n(ack, __ATOMIC_ACQUIRE)) != n) {
            if (now() - last > limit) {
                printf("pingpong writer: no ack for %llu within %.0f s\n",
                       (unsigned long long)n, limit);
                return 1;
            }
            usleep(50);
        }
    }
    printf("pingpong %s: %llu increments %s in %.2f s\n", argv[1],
           (unsigned long long)n,
           writer ? "stored, each acknowledged" : "observed, each in order",
           now() - start);
    return 0;
}
