/*
 * Change QEMU's memory map under a vCPU that is using it.
 *
 *   mapflip DEVICE SECONDS      DEVICE: /sys/bus/pci/devices/0000:...
 *
 * One thread, on CPU 0, reads the device's MMIO BAR 0 without pause; the
 * main thread, on CPU 1, turns the device's memory decoding off and on
 * through its config space as fast as it can.  Each flip makes QEMU
 * rebuild the guest's memory map, and under TCG the reading vCPU may
 * still hold TLB entries made from the old one when it next touches the
 * BAR.  A QEMU that looks such an entry up in the new map instead of the
 * one it was made from reaches for a section that is gone (an assertion
 * in iotlb_to_section(), or another device's registers).  The reads'
 * values do not matter; that QEMU lives through it does.
 *
 * Prints "mapflip: F flips, R reads" and exits 0, or says what failed.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PCI_COMMAND 4
#define PCI_COMMAND_MEMORY 0x2

/* Set by the flipping thread when its time is up; the reader polls it. */
static int stop;

static void pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) {
        perror("mapflip: sched_setaffinity");
        exit(1);
    }
}

static void *reader(void *opaque)
{
    /* MMIO: every read must reach the device, none may be merged away */
    volatile uint8_t *bar = opaque;
    unsigned long n = 0;

    pin(0);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        (void)bar[n & 0xff];
        n++;
    }
    return (void *)n;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char path[512];
    unsigned long flips = 0;
    uint16_t cmd, off;
    pthread_t thread;
    void *bar, *reads;
    double end;
    int cfg, res;

    if (argc != 3) {
        fprintf(stderr, "usage: mapflip DEVICE SECONDS\n");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/resource0", argv[1]);
    res = open(path, O_RDWR | O_SYNC);
    if (res < 0) {
        perror(path);
        return 1;
    }
    bar = mmap(NULL, 4096, PROT_READ, MAP_SHARED, res, 0);
    if (bar == MAP_FAILED) {
        perror("mapflip: mmap of BAR 0");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/config", argv[1]);
    cfg = open(path, O_RDWR);
    if (cfg < 0 || pread(cfg, &cmd, 2, PCI_COMMAND) != 2) {
        perror(path);
        return 1;
    }
    cmd |= PCI_COMMAND_MEMORY;
    off = cmd & ~PCI_COMMAND_MEMORY;

    pin(1);
    if (pthread_create(&thread, NULL, reader, bar)) {
        fprintf(stderr, "mapflip: cannot start the reader\n");
        return 1;
    }
    end = now() + atoi(argv[2]);
    while (now() < end) {
        if (pwrite(cfg, &off, 2, PCI_COMMAND) != 2 ||
            pwrite(cfg, &cmd, 2, PCI_COMMAND) != 2) {
            perror("mapflip: writing the command register");
            return 1;
        }
        flips++;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(thread, &reads);
    printf("mapflip: %lu flips, %lu reads\n", flips, (unsigned long)reads);
    return 0;
}
