/*
 * vhost-user-fs-pci: whether the guest can reach the DAX cache window's
 * BAR, kept out of vhost-user-fs-pci.c so that the device file only
 * calls it.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VHOST_USER_FS_PCI_CACHE_H
#define HW_VIRTIO_VHOST_USER_FS_PCI_CACHE_H

#include "hw/virtio/virtio-pci.h"

/**
 * vhost_user_fs_pci_check_addressable: refuse a window out of reach
 * @vpci_dev: the proxy being realized
 * @size: the window's size, not 0
 * @errp: error object, with a hint at what would make the window fit
 *
 * Returns: false if the BAR would lie beyond the CPU's physical address
 * width, true otherwise, and when the machine does not say.
 */
bool vhost_user_fs_pci_check_addressable(VirtIOPCIProxy *vpci_dev,
                                         uint64_t size, Error **errp);

#endif
