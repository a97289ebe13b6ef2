/*
 * SIGBUS and write fault fixups (see include/system/sigbus-fixup.h).
 * system/cpus.c's SIGBUS handler calls qemu_sigbus_fixup() for BUS_ADRERR
 * before it treats the signal as a machine check.  QEMU has no SIGSEGV
 * handler of its own (system emulation), so the write fault fixup brings
 * one, which leaves every other SIGSEGV to what was there before.
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

/* Like sigbus_fixup; sigsegv_old is written once, before the handler runs */
static QemuWriteFaultFixup write_fault_fixup;
static struct sigaction sigsegv_old;

static void sigsegv_handler(int sig, siginfo_t *info, void *ctx)
{
    QemuWriteFaultFixup fixup = qatomic_read(&write_fault_fixup);

    if (info->si_code == SEGV_ACCERR && fixup && fixup(info->si_addr)) {
        return;
    }
    if ((sigsegv_old.sa_flags & SA_SIGINFO) &&
        sigsegv_old.sa_sigaction) {
        sigsegv_old.sa_sigaction(sig, info, ctx);
        return;
    }
    if (sigsegv_old.sa_handler != SIG_DFL &&
        sigsegv_old.sa_handler != SIG_IGN) {
        sigsegv_old.sa_handler(sig);
        return;
    }
    /*
     * Not a fault anyone can repair: die of it as without this handler.
     * A fault comes back when the instruction runs again; a signal that
     * someone sent (kill) must be sent again, and arrives once this
     * handler returns.
     */
    sigaction(SIGSEGV, &sigsegv_old, NULL);
    if (info->si_code <= 0) {
        raise(SIGSEGV);
    }
}

void qemu_set_write_fault_fixup(QemuWriteFaultFixup fixup)
{
    static bool installed;
    struct sigaction act = {
        .sa_sigaction = sigsegv_handler,
        .sa_flags = SA_SIGINFO,
    };

    qatomic_set(&write_fault_fixup, fixup);
    if (fixup && !installed) {
        /* Read first: the handler may run as soon as it is installed */
        sigaction(SIGSEGV, NULL, &sigsegv_old);
        sigemptyset(&act.sa_mask);
        installed = sigaction(SIGSEGV, &act, NULL) == 0;
    }
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

void qemu_set_write_fault_fixup(QemuWriteFaultFixup fixup)
{
}
#endif
