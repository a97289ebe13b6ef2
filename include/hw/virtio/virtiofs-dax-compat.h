/*
 * The upstream releases this code builds on (README, "Upstream bases")
 * moved or changed a few interfaces its new files use.  They are bridged
 * here, once, so that every new file compiles on each base unchanged.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_VIRTIO_VIRTIOFS_DAX_COMPAT_H
#define HW_VIRTIO_VIRTIOFS_DAX_COMPAT_H

#define VIRTIOFS_DAX_QEMU_AT_LEAST(major, minor) \
    (QEMU_VERSION_MAJOR > (major) || \
     (QEMU_VERSION_MAJOR == (major) && QEMU_VERSION_MINOR >= (minor)))

/* 10.0 has exec/memory.h, 10.2 system/memory.h */
#if VIRTIOFS_DAX_QEMU_AT_LEAST(10, 2)
#include "system/memory.h"
#else
#include "exec/memory.h"
#endif

/*
 * 10.2 dropped exec/exec-all.h; tb_invalidate_phys_range(), in
 * exec/translation-block.h there, takes the CPU that wrote, NULL for a
 * write that is no CPU's.  Both headers are for target-specific code
 * only: such a file includes VIRTIOFS_DAX_TB_H itself.
 */
#if VIRTIOFS_DAX_QEMU_AT_LEAST(10, 2)
#define VIRTIOFS_DAX_TB_H "exec/translation-block.h"
#define virtiofs_dax_tb_invalidate_phys_range(start, last) \
    tb_invalidate_phys_range(NULL, (start), (last))
#else
#define VIRTIOFS_DAX_TB_H "exec/exec-all.h"
#define virtiofs_dax_tb_invalidate_phys_range(start, last) \
    tb_invalidate_phys_range((start), (last))
#endif

/* 10.2 moved exec/ramblock.h to system/ramblock.h */
#if VIRTIOFS_DAX_QEMU_AT_LEAST(10, 2)
#define VIRTIOFS_DAX_RAMBLOCK_H "system/ramblock.h"
#else
#define VIRTIOFS_DAX_RAMBLOCK_H "exec/ramblock.h"
#endif

/* 10.2 renamed a chardev's front-end half CharFrontend */
#if VIRTIOFS_DAX_QEMU_AT_LEAST(10, 2)
#include "chardev/char.h"
typedef CharFrontend CharBackend;
#endif

#endif
