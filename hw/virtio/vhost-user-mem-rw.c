/*
 * vhost-user MEM_READ and MEM_WRITE: guest memory that a back-end
 * cannot reach through its memory table, typically a buffer inside a
 * shared memory window.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "hw/virtio/vhost-user-shmem.h"
#include "hw/virtio/virtio.h"
#include "trace.h"

/*
 * The requests go through the device's DMA address space, so an IOMMU
 * applies.
 */
static int vhost_user_mem_rw_check(struct vhost_dev *dev, const char *name,
                                   const VhostUserMemRW *rw, size_t fdsize,
                                   AddressSpace **as)
{
    if (!virtio_has_feature(dev->protocol_features,
                            VHOST_USER_PROTOCOL_F_MEM_RW)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s without "
                      "VHOST_USER_PROTOCOL_F_MEM_RW\n", name);
        return -EINVAL;
    }
    if (fdsize) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s carries file "
                      "descriptors\n", name);
        return -EINVAL;
    }
    if (rw->size > VHOST_USER_MEM_RW_MAX) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s of %u bytes, more "
                      "than %u\n", name, rw->size, VHOST_USER_MEM_RW_MAX);
        return -EINVAL;
    }
    if (rw->size && rw->guest_address + rw->size - 1 < rw->guest_address) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s at 0x%" PRIx64
                      " wraps around\n", name, rw->guest_address);
        return -EINVAL;
    }
    if (!dev->vdev) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: %s while the device "
                      "is stopped\n", name);
        return -EINVAL;
    }
    *as = dev->vdev->dma_as;
    return 0;
}

/*
 * The back-end may reach guest RAM, including shared memory windows, and
 * nothing else: a device register written on its behalf could reset this
 * very device while the back-end waits for our reply.
 */
static bool vhost_user_mem_rw_is_ram(AddressSpace *as, hwaddr addr,
                                     hwaddr len, bool is_write)
{
    RCU_READ_LOCK_GUARD();

    while (len) {
        hwaddr xlat, l = len;
        MemoryRegion *mr = address_space_translate(as, addr, &xlat, &l,
                                                   is_write,
                                                   MEMTXATTRS_UNSPECIFIED);

        if (!memory_region_is_ram(mr) || memory_region_is_ram_device(mr) ||
            (is_write && memory_region_is_rom(mr))) {
            return false;
        }
        addr += l;
        len -= l;
    }
    return true;
}

/*
 * A page of a shared memory window whose file shrank on the host (a
 * truncate by another program, or by the back-end itself) raises SIGBUS
 * when touched.  This thread blocks SIGBUS, so the kernel would kill QEMU
 * for it; unblock it for the copy and the window's fixup makes the page
 * read as zeros, as it does for a vCPU access.
 */
static MemTxResult vhost_user_mem_rw_copy(AddressSpace *as, hwaddr addr,
                                          void *buf, hwaddr len,
                                          bool is_write)
{
    MemTxResult res;
    sigset_t set, old;

    sigemptyset(&set);
    sigaddset(&set, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &set, &old);
    res = address_space_rw(as, addr, MEMTXATTRS_UNSPECIFIED, buf, len,
                           is_write);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return res;
}

void vhost_user_mem_read(struct vhost_dev *dev, uint32_t size,
                         VhostUserMemRW *rw, size_t fdsize, uint8_t **data)
{
    AddressSpace *as;
    MemTxResult res;
    int ret;

    *data = NULL;
    trace_vhost_user_backend_mem_read(rw->guest_address, rw->size);
    if (size != sizeof(*rw)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: MEM_READ with a %u byte "
                      "payload\n", size);
        ret = -EINVAL;
    } else {
        ret = vhost_user_mem_rw_check(dev, "MEM_READ", rw, fdsize, &as);
    }
    if (!ret) {
        *data = g_malloc(rw->size);
        res = MEMTX_DECODE_ERROR;
        if (vhost_user_mem_rw_is_ram(as, rw->guest_address, rw->size,
                                     false)) {
            res = vhost_user_mem_rw_copy(as, rw->guest_address, *data,
                                         rw->size, false);
        }
        if (res != MEMTX_OK) {
            qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: MEM_READ of %u bytes "
                          "at 0x%" PRIx64 " failed\n", rw->size,
                          rw->guest_address);
            ret = -EFAULT;
        }
    }

    if (ret) {
        rw->size = 0;
        rw->status = -ret;
    } else {
        rw->status = 0;
    }
}

bool vhost_user_mem_read_reply(QIOChannel *ioc, void *hdr, size_t hdr_size,
                               VhostUserMemRW *rw, uint8_t *data,
                               Error **errp)
{
    struct iovec iov[] = {
        { .iov_base = hdr, .iov_len = hdr_size },
        { .iov_base = rw, .iov_len = sizeof(*rw) },
        { .iov_base = data, .iov_len = rw->size },
    };

    return !qio_channel_writev_all(ioc, iov, ARRAY_SIZE(iov), errp);
}

bool vhost_user_mem_write_data(QIOChannel *ioc, uint32_t size,
                               uint8_t **data, Error **errp)
{
    g_autofree char *buf = NULL;

    if (size <= VHOST_USER_MEM_RW_MAX) {
        *data = g_malloc(size);
        return !qio_channel_read_all(ioc, (char *)*data, size, errp);
    }

    /* Skip what we will not use, to keep the channel in sync */
    *data = NULL;
    buf = g_malloc(VHOST_USER_MEM_RW_MAX);
    while (size) {
        size_t n = MIN(size, VHOST_USER_MEM_RW_MAX);

        if (qio_channel_read_all(ioc, buf, n, errp)) {
            return false;
        }
        size -= n;
    }
    return true;
}

int vhost_user_mem_write(struct vhost_dev *dev, uint32_t size,
                         const VhostUserMemRW *rw, const uint8_t *data,
                         uint32_t data_size, size_t fdsize)
{
    AddressSpace *as;
    MemTxResult res;
    int ret;

    if (size < sizeof(*rw)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: MEM_WRITE with a %u "
                      "byte payload\n", size);
        return -EINVAL;
    }
    trace_vhost_user_backend_mem_write(rw->guest_address, rw->size);
    ret = vhost_user_mem_rw_check(dev, "MEM_WRITE", rw, fdsize, &as);
    if (ret) {
        return ret;
    }
    if (!data || rw->size != data_size) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: MEM_WRITE of %u bytes "
                      "carries %u\n", rw->size, data_size);
        return -EINVAL;
    }

    res = MEMTX_DECODE_ERROR;
    if (vhost_user_mem_rw_is_ram(as, rw->guest_address, rw->size, true)) {
        res = vhost_user_mem_rw_copy(as, rw->guest_address, (void *)data,
                                     rw->size, true);
    }
    if (res != MEMTX_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "vhost-user: MEM_WRITE of %u bytes "
                      "at 0x%" PRIx64 " failed\n", rw->size,
                      rw->guest_address);
        return -EFAULT;
    }
    return 0;
}
