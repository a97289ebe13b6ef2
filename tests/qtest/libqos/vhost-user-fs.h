/*
 * libqos driver for vhost-user-fs-pci (virtio-fs)
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef TESTS_LIBQOS_VHOST_USER_FS_H
#define TESTS_LIBQOS_VHOST_USER_FS_H

#include "qgraph.h"
#include "virtio.h"
#include "virtio-pci.h"

/* Config space layout (virtio spec 5.11.4) */
#define QVIRTIO_FS_CONFIG_TAG 0
#define QVIRTIO_FS_TAG_LEN 36
#define QVIRTIO_FS_CONFIG_NUM_REQUEST_QUEUES 36

/* Queue 0 is the high priority queue, then the request queues */
#define QVIRTIO_FS_HIPRIO_QUEUE 0

typedef struct QVhostUserFS {
    QVirtioDevice *vdev;
    /*
     * Set up by the qgraph start_hw hook only: tests that bind the driver
     * with qvhost_user_fs_pci_new() drive the virtqueues themselves.
     */
    QGuestAllocator *alloc;
    QVirtQueue **queues;
    unsigned int nvqs;
} QVhostUserFS;

typedef struct QVhostUserFSPCI {
    QVirtioPCIDevice pci_vdev;
    QVhostUserFS fs;
} QVhostUserFSPCI;

typedef struct QVhostUserFSDevice {
    QOSGraphObject obj;
    QVhostUserFS fs;
} QVhostUserFSDevice;

/* The tag, NUL-terminated: @tag must hold QVIRTIO_FS_TAG_LEN + 1 bytes */
void qvhost_user_fs_get_tag(QVhostUserFS *fs, char *tag);
uint32_t qvhost_user_fs_get_num_request_queues(QVhostUserFS *fs);

/*
 * Find the VIRTIO_PCI_CAP_SHARED_MEMORY_CFG capability for @shmid.
 * Returns its config space offset, or 0 if there is none.
 */
uint8_t qvirtio_pci_find_shm_cap(QVirtioPCIDevice *d, uint8_t shmid,
                                 uint8_t *bar, uint64_t *offset,
                                 uint64_t *length);

/*
 * For tests that start QEMU themselves rather than through qos-test:
 * bind the driver to the device at @addr, or return NULL.
 */
QVhostUserFSPCI *qvhost_user_fs_pci_new(QPCIBus *bus, QPCIAddress *addr);

/*
 * Place the cache window's 64-bit BAR 2 at @addr: libqos only allocates
 * 32-bit MMIO, so tests put the window above 4 GiB by hand.
 */
void qvhost_user_fs_pci_place_cache_bar(QVhostUserFSPCI *fs, uint64_t addr);
void qvhost_user_fs_pci_free(QVhostUserFSPCI *dev);

#endif
