/*
 * libqos driver for vhost-user-fs-pci (virtio-fs)
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "../libqtest.h"
#include "qemu/module.h"
#include "standard-headers/linux/pci_regs.h"
#include "standard-headers/linux/virtio_config.h"
#include "standard-headers/linux/virtio_pci.h"
#include "vhost-user-fs.h"

void qvhost_user_fs_get_tag(QVhostUserFS *fs, char *tag)
{
    int i;

    for (i = 0; i < QVIRTIO_FS_TAG_LEN; i++) {
        tag[i] = qvirtio_config_readb(fs->vdev, QVIRTIO_FS_CONFIG_TAG + i);
    }
    tag[QVIRTIO_FS_TAG_LEN] = '\0';
}

uint32_t qvhost_user_fs_get_num_request_queues(QVhostUserFS *fs)
{
    return qvirtio_config_readl(fs->vdev,
                                QVIRTIO_FS_CONFIG_NUM_REQUEST_QUEUES);
}

uint8_t qvirtio_pci_find_shm_cap(QVirtioPCIDevice *d, uint8_t shmid,
                                 uint8_t *bar, uint64_t *offset,
                                 uint64_t *length)
{
    QPCIDevice *pdev = d->pdev;
    uint8_t cap = 0;

    while ((cap = qpci_find_capability(pdev, PCI_CAP_ID_VNDR, cap))) {
        uint8_t type = qpci_config_readb(pdev, cap +
                           offsetof(struct virtio_pci_cap, cfg_type));

        if (type != VIRTIO_PCI_CAP_SHARED_MEMORY_CFG ||
            qpci_config_readb(pdev, cap +
                              offsetof(struct virtio_pci_cap, id)) != shmid) {
            continue;
        }
        *bar = qpci_config_readb(pdev, cap +
                                 offsetof(struct virtio_pci_cap, bar));
        *offset = qpci_config_readl(pdev, cap +
                      offsetof(struct virtio_pci_cap, offset)) |
                  (uint64_t)qpci_config_readl(pdev, cap +
                      offsetof(struct virtio_pci_cap64, offset_hi)) << 32;
        *length = qpci_config_readl(pdev, cap +
                      offsetof(struct virtio_pci_cap, length)) |
                  (uint64_t)qpci_config_readl(pdev, cap +
                      offsetof(struct virtio_pci_cap64, length_hi)) << 32;
        return cap;
    }
    return 0;
}

/*
 * What a guest driver does before the device may be used: without
 * DRIVER_OK the front-end never starts its back-end, and a qos test of
 * the vhost-user protocol would only see the connection handshake.
 */
static void qvhost_user_fs_setup(QVhostUserFS *fs)
{
    QVirtioDevice *vdev = fs->vdev;
    uint64_t features;
    unsigned int i;

    /*
     * virtio-fs has no feature bits of its own, and the libqos rings are
     * split rings: of the ring features a back-end may offer, ack none.
     */
    features = qvirtio_get_features(vdev);
    g_assert_true(features & (1ULL << VIRTIO_F_VERSION_1));
    qvirtio_set_features(vdev, 1ULL << VIRTIO_F_VERSION_1);

    /* The high priority queue, then the request queues */
    fs->nvqs = 1 + qvhost_user_fs_get_num_request_queues(fs);
    fs->queues = g_new(QVirtQueue *, fs->nvqs);
    for (i = 0; i < fs->nvqs; i++) {
        fs->queues[i] = qvirtqueue_setup(vdev, fs->alloc, i);
    }
    qvirtio_set_driver_ok(vdev);
}

static void qvhost_user_fs_cleanup(QVhostUserFS *fs)
{
    unsigned int i;

    for (i = 0; i < fs->nvqs; i++) {
        qvirtqueue_cleanup(fs->vdev->bus, fs->queues[i], fs->alloc);
    }
    g_free(fs->queues);
    fs->queues = NULL;
    fs->nvqs = 0;
}

static void *qvhost_user_fs_get_driver(QVhostUserFS *fs, const char *interface)
{
    if (!g_strcmp0(interface, "vhost-user-fs")) {
        return fs;
    }
    if (!g_strcmp0(interface, "virtio")) {
        return fs->vdev;
    }

    fprintf(stderr, "%s not present in vhost-user-fs\n", interface);
    g_assert_not_reached();
}

/* vhost-user-fs-device */
static void *qvhost_user_fs_device_get_driver(void *object,
                                              const char *interface)
{
    QVhostUserFSDevice *dev = object;

    return qvhost_user_fs_get_driver(&dev->fs, interface);
}

static void qvhost_user_fs_device_start_hw(QOSGraphObject *obj)
{
    QVhostUserFSDevice *dev = (QVhostUserFSDevice *)obj;

    qvhost_user_fs_setup(&dev->fs);
}

static void qvhost_user_fs_device_destructor(QOSGraphObject *obj)
{
    QVhostUserFSDevice *dev = (QVhostUserFSDevice *)obj;

    qvhost_user_fs_cleanup(&dev->fs);
}

static void *vhost_user_fs_device_create(void *virtio_dev,
                                         QGuestAllocator *t_alloc,
                                         void *addr)
{
    QVhostUserFSDevice *dev = g_new0(QVhostUserFSDevice, 1);

    dev->fs.vdev = virtio_dev;
    dev->fs.alloc = t_alloc;
    dev->obj.get_driver = qvhost_user_fs_device_get_driver;
    dev->obj.start_hw = qvhost_user_fs_device_start_hw;
    dev->obj.destructor = qvhost_user_fs_device_destructor;
    return &dev->obj;
}

/* vhost-user-fs-pci */
static void *qvhost_user_fs_pci_get_driver(void *object, const char *interface)
{
    QVhostUserFSPCI *dev = object;

    return qvhost_user_fs_get_driver(&dev->fs, interface);
}

static void qvhost_user_fs_pci_start_hw(QOSGraphObject *obj)
{
    QVhostUserFSPCI *dev = (QVhostUserFSPCI *)obj;

    qvirtio_pci_start_hw(obj);
    qvhost_user_fs_setup(&dev->fs);
}

static void qvhost_user_fs_pci_destructor(QOSGraphObject *obj)
{
    QVhostUserFSPCI *dev = (QVhostUserFSPCI *)obj;

    qvhost_user_fs_cleanup(&dev->fs);
    qvirtio_pci_destructor(obj);
}

static void *vhost_user_fs_pci_create(void *pci_bus, QGuestAllocator *t_alloc,
                                      void *addr)
{
    QVhostUserFSPCI *dev = g_new0(QVhostUserFSPCI, 1);
    QOSGraphObject *obj = &dev->pci_vdev.obj;

    virtio_pci_init(&dev->pci_vdev, pci_bus, addr);
    dev->fs.vdev = &dev->pci_vdev.vdev;
    dev->fs.alloc = t_alloc;
    obj->get_driver = qvhost_user_fs_pci_get_driver;
    obj->start_hw = qvhost_user_fs_pci_start_hw;
    obj->destructor = qvhost_user_fs_pci_destructor;
    return obj;
}

QVhostUserFSPCI *qvhost_user_fs_pci_new(QPCIBus *bus, QPCIAddress *addr)
{
    QPCIDevice *pdev = qpci_device_find(bus, addr->devfn);

    if (!pdev) {
        return NULL;
    }
    g_free(pdev);
    return vhost_user_fs_pci_create(bus, NULL, addr);
}

void qvhost_user_fs_pci_free(QVhostUserFSPCI *dev)
{
    QOSGraphObject *obj = &dev->pci_vdev.obj;

    obj->destructor(obj);
    g_free(dev);
}

static void vhost_user_fs_register_nodes(void)
{
    QPCIAddress addr = {
        .devfn = QPCI_DEVFN(4, 0),
    };
    /*
     * The back-end is the test's: vhost-user-test's before hooks add this
     * chardev to the command line and serve its socket.  Tests add the tag
     * (and the queues they want) to the device options themselves.  The
     * -global stays out of extra_device_opts, which a test's own options
     * are appended to.
     */
    QOSGraphEdgeOptions device_opts = {
        .before_cmd_line = "-global virtio-mmio.force-legacy=false",
        .extra_device_opts = "chardev=chr-vhost-user-test",
    };
    QOSGraphEdgeOptions opts = {
        .extra_device_opts = "addr=04.0,chardev=chr-vhost-user-test",
    };

    qos_node_create_driver("vhost-user-fs-device",
                           vhost_user_fs_device_create);
    qos_node_consumes("vhost-user-fs-device", "virtio-bus", &device_opts);
    qos_node_produces("vhost-user-fs-device", "vhost-user-fs");

    add_qpci_address(&opts, &addr);
    qos_node_create_driver("vhost-user-fs-pci", vhost_user_fs_pci_create);
    qos_node_consumes("vhost-user-fs-pci", "pci-bus", &opts);
    /*
     * Not "pci-device": its generic tests would start the device without
     * a back-end, and the device does not realize without one.
     */
    qos_node_produces("vhost-user-fs-pci", "vhost-user-fs");
}

libqos_init(vhost_user_fs_register_nodes);

void qvhost_user_fs_pci_place_cache_bar(QVhostUserFSPCI *fs, uint64_t addr)
{
    qpci_config_writel(fs->pci_vdev.pdev, PCI_BASE_ADDRESS_2, (uint32_t)addr);
    qpci_config_writel(fs->pci_vdev.pdev, PCI_BASE_ADDRESS_2 + 4, addr >> 32);
}
