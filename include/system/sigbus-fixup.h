/*
 * SIGBUS and write fault fixups: let the owner of RAM mapped from a file
 * survive the file shrinking under the guest, or a store into a range it
 * mapped read-only.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef SYSTEM_SIGBUS_FIXUP_H
#define SYSTEM_SIGBUS_FIXUP_H

/**
 * QemuSigbusFixup: repair a guest RAM access that raised SIGBUS
 * @addr: the host address that faulted, or NULL if the accelerator could
 * not say (KVM fails KVM_RUN with EFAULT instead of raising SIGBUS)
 *
 * With an address, called in signal context, so it must be
 * async-signal-safe.  Without, called by a vCPU thread, which is not in
 * signal context and holds no lock: the fixup then repairs every such
 * access it can find, and since KVM's EFAULT does not say whether the
 * access was a load or a store, also a store into RAM mapped read-only
 * (see qemu_set_write_fault_fixup()).  Returns true if it made the access
 * (or, without an address, some access) retryable, false if @addr is not
 * its own.
 */
typedef bool (*QemuSigbusFixup)(void *addr);

/**
 * qemu_set_sigbus_fixup: handle SIGBUS for non-existent file pages
 * @fixup: the function to try, or NULL
 *
 * RAM mapped from a file that shrinks under the guest (e.g. a virtio-fs
 * DAX window over a file truncated on the host) raises SIGBUS with
 * BUS_ADRERR when accessed; without a fixup, QEMU dies of it.  There is
 * one fixup for the process.  Does nothing on hosts other than Linux,
 * whose SIGBUS handling QEMU leaves alone.
 */
void qemu_set_sigbus_fixup(QemuSigbusFixup fixup);

/**
 * qemu_sigbus_fixup: run the fixup, from the SIGBUS handler
 * @addr: the host address that faulted with BUS_ADRERR, or NULL from a
 * KVM vCPU thread whose KVM_RUN failed with EFAULT
 *
 * Returns: true if the access can be retried.
 */
bool qemu_sigbus_fixup(void *addr);

/**
 * qemu_unblock_sigbus: let this thread take SIGBUS
 *
 * A thread that accesses guest RAM directly (a TCG vCPU) must not block
 * SIGBUS, or the kernel kills the process instead of running a fixup.
 */
void qemu_unblock_sigbus(void);

/**
 * QemuWriteFaultFixup: repair a store into RAM mapped without write access
 * @addr: the host address that faulted (SIGSEGV with SEGV_ACCERR)
 *
 * Called in signal context, on whatever thread stored there (a TCG vCPU,
 * or any thread of QEMU copying into guest RAM), so it must be
 * async-signal-safe.  Returns true if the store can be retried, false if
 * @addr is not its own or it cannot help.
 */
typedef bool (*QemuWriteFaultFixup)(void *addr);

/**
 * qemu_set_write_fault_fixup: handle stores into read-only guest RAM
 * @fixup: the function to try, or NULL
 *
 * RAM that must never be written through QEMU's mapping (e.g. a virtio
 * shared memory window's read-only file ranges) can be mapped without
 * PROT_WRITE; a store into it then raises SIGSEGV, which would kill QEMU.
 * The first call installs a SIGSEGV handler that tries @fixup for
 * SEGV_ACCERR and leaves every other SIGSEGV to the disposition it
 * replaced.  There is one fixup for the process.  Under KVM a guest store
 * raises no signal: KVM_RUN fails with EFAULT, and the KVM code calls the
 * SIGBUS fixup without an address (see #QemuSigbusFixup).  Does nothing
 * on hosts other than Linux.
 */
void qemu_set_write_fault_fixup(QemuWriteFaultFixup fixup);

#endif
