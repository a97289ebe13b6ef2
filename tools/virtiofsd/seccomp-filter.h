/*
 * virtiofsd: the system call allow-list
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_SECCOMP_FILTER_H
#define VIRTIOFSD_SECCOMP_FILTER_H

#include "options.h"

/*
 * The system call allow-list, for every thread of the process;
 * @action says what a call outside it does (VFSD_SECCOMP_NONE: nothing is
 * installed).  @syslog (--syslog) adds what logging to syslog needs.
 */
bool vfsd_seccomp_install(VfsdSeccomp action, bool syslog, char **err);

#endif /* VIRTIOFSD_SECCOMP_FILTER_H */
