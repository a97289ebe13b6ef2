/*
 * SIGBUS fixups (see include/system/sigbus-fixup.h).  system/cpus.c's
 * SIGBUS handler calls qemu_sigbus_fixup() for BUS_ADRERR before it
 * treats the signal as a machine check.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "system/sigbus-fixup.h"

#ifdef CONFIG_LINUX
/* Set from the main thread, read in signal context on any thread */
static QemuSigbusFixup sigbus_fixup;

void qemu_set_sigbus_fixup(QemuSigbusFixup fixup)
{
    qatomic_set(&sigbus_fixup, fixup);
}

bool qemu_sigbus_fixup(void *addr)
{
    QemuSigbusFixup fixup = qatomic_read(&sigbus_fixup);

    return fixup && fixup(addr);
}

void qemu_unblock_sigbus(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}
#else
/* Elsewhere QEMU installs no SIGBUS handler: nothing would call a fixup */
void qemu_set_sigbus_fixup(QemuSigbusFixup fixup)
{
}

bool qemu_sigbus_fixup(void *addr)
{
    return false;
}

void qemu_unblock_sigbus(void)
{
}
#endif
