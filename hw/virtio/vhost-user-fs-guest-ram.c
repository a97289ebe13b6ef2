/*
 * vhost-user-fs: whether a Linux guest can afford the DAX cache window.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "hw/boards.h"
#include "vhost-user-fs-guest-ram.h"

/*
 * A Linux guest describes each 4 KiB page of the window with a 64-byte
 * struct page.  When that takes more than half of the guest's RAM, its
 * virtio-fs driver fails to probe or the guest runs out of memory while
 * booting, far from any hint at the cause.  Other guests may do better,
 * so only warn.
 */
void vuf_check_guest_ram(VHostUserFS *fs)
{
    MachineState *ms = MACHINE(qdev_get_machine());
    uint64_t need = fs->conf.cache_size / 64;
    g_autofree char *need_str = NULL;
    g_autofree char *cache_str = NULL;
    g_autofree char *ram_str = NULL;

    if (!ms->ram_size || need <= ms->ram_size / 2) {
        return;
    }
    need_str = size_to_str(need);
    cache_str = size_to_str(fs->conf.cache_size);
    ram_str = size_to_str(ms->ram_size);
    warn_report("vhost-user-fs: a Linux guest needs about %s of its RAM "
                "for cache-size=%s, but the machine has %s",
                need_str, cache_str, ram_str);
}
